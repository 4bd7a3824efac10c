//! Symbolizer speed.
//!
//! `symbols/cached_mix`: answers from the cache, the steady state of a live monitor. The mix:
//! 4096 distinct addresses, half kernel (random offsets into kallsyms text symbols), half
//! user (random addresses in the executable mappings of libc, ld.so and this benchmark, with
//! their MMAP2-style mappings read from /proc/self/maps), drawn 64 Ki times with a Zipf-like
//! skew (a few hot functions, a long tail), resolved in batches of 4096 after one warm-up
//! pass. Throughput in elements (lookups) per second, on one core.
//! `symbols/first_load_libc`: a fresh symbolizer names one libc address: finding the file,
//! reading its headers and build id, finding the debug file where libc6-dbg is installed,
//! reading its .symtab and building the table (the loader thread's start included).
//! `symbols/first_load_kallsyms`: the same for the kernel (reading /proc/kallsyms).
//!
//! Run: `cargo bench --bench symbols`.

use std::hint::black_box;

use criterion::measurement::WallTime;
use criterion::{
    BatchSize, BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main,
};
use perfwatch::symbols::{Mapping, Request, Symbolizer};

#[path = "common/maps.rs"]
mod maps;

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The executable mappings of this process, as MMAP2 records would give them.
fn exec_mappings() -> Vec<Mapping> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps::exec_maps(&maps)
        .into_iter()
        .map(|m| Mapping {
            start: m.start,
            len: m.end - m.start,
            pgoff: m.pgoff,
            file: m.file,
        })
        .collect()
}

/// This process's resident set, in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

fn kernel_text() -> Vec<u64> {
    let text = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(' ');
            let a = u64::from_str_radix(f.next()?, 16).ok()?;
            matches!(f.next()?, "t" | "T")
                .then_some(a)
                .filter(|&a| a != 0)
        })
        .collect()
}

/// 4096 distinct requests, half kernel, half user.
fn distinct(rng: &mut Rng) -> Vec<Request> {
    let maps = exec_mappings();
    let ktext = kernel_text();
    let pid = std::process::id();
    let mut out = Vec::new();
    for i in 0..4096 {
        if i % 2 == 0 && !ktext.is_empty() {
            let base = ktext[rng.below(ktext.len() as u64) as usize];
            out.push(Request::kernel(base + rng.below(64)));
        } else {
            let m = &maps[rng.below(maps.len() as u64) as usize];
            out.push(Request::user(pid, m.start + rng.below(m.len), m));
        }
    }
    out
}

/// A skewed stream over `distinct`: index ~ n * u^4 (u uniform), so the first few percent of
/// the addresses take most of the lookups.
fn stream(distinct: &[Request], rng: &mut Rng, n: usize) -> Vec<Request> {
    (0..n)
        .map(|_| {
            let u = rng.below(1 << 20) as f64 / (1u64 << 20) as f64;
            distinct[((u * u * u * u) * distinct.len() as f64) as usize].clone()
        })
        .collect()
}

fn cached_mix(c: &mut Criterion) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let distinct = distinct(&mut rng);
    let stream = stream(&distinct, &mut rng, 64 << 10);
    let mut out = Vec::with_capacity(4096);
    let rss_before = rss_kib();
    let mut sym = Symbolizer::default();
    sym.resolve(&distinct, &mut out);
    let named = out.iter().filter(|s| s.is_known()).count();
    eprintln!(
        "cached_mix: {named} of {} distinct addresses named; RSS +{} KiB for {:?}",
        distinct.len(),
        rss_kib().saturating_sub(rss_before),
        sym.stats()
    );
    let mut g = c.benchmark_group("symbols");
    g.throughput(Throughput::Elements(stream.len() as u64));
    g.bench_function("cached_mix", |b| {
        b.iter(|| {
            for batch in stream.chunks(4096) {
                out.clear();
                sym.resolve(black_box(batch), &mut out);
                black_box(&out);
            }
        })
    });
    g.finish();
}

fn first_loads(c: &mut Criterion) {
    let pid = std::process::id();
    let libc = exec_mappings()
        .into_iter()
        .find(|m| m.file.path().ends_with(b"/libc.so.6"))
        .expect("libc is mapped");
    let addr = libc.start + libc.len / 2;
    let req = Request::user(pid, addr, &libc);
    let probe = Symbolizer::default().resolve_one(&req);
    eprintln!(
        "first_load_libc: {} names {probe} in {}",
        String::from_utf8_lossy(libc.file.path()),
        probe.dso().name()
    );
    let mut g = c.benchmark_group("symbols");
    g.sample_size(30);
    // A fresh symbolizer per iteration: the cost of a binary's first read.
    let first_load = |g: &mut BenchmarkGroup<WallTime>, name: &str, req: &Request| {
        g.bench_function(name, |b| {
            b.iter_batched(
                Symbolizer::default,
                |mut s| black_box(s.resolve_one(req)),
                BatchSize::PerIteration,
            )
        });
    };
    first_load(&mut g, "first_load_libc", &req);
    let k = kernel_text();
    if let Some(&a) = k.get(k.len() / 2) {
        let req = Request::kernel(a);
        g.sample_size(10);
        first_load(&mut g, "first_load_kallsyms", &req);
    }
    g.finish();
}

criterion_group!(benches, cached_mix, first_loads);
criterion_main!(benches);
