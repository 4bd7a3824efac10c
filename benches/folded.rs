//! Folded stacks: one million `-g` samples aggregated and written out.
//!
//! `folded/realistic`: 1,000,000 samples of 8 processes (4 names) over 200 call paths of 16
//! to 32 frames (a third with a kernel part), the innermost address varying over 64 offsets,
//! as a sampled program spreads its samples over its hot loops: about 100,000 distinct raw
//! stacks. Counted, then named (once per distinct address), merged and written sorted. Two
//! namers: addresses (what `--folded` writes until symbols are wired in), and one that names
//! by function (256-byte functions), which merges the offsets as the symbolizer's names will.
//! `folded/add_only`: the per-sample cost alone, as a frontend pays it while the run goes on.
//!
//! Run: `cargo bench --bench folded`. The throughput is samples per second; the bar is
//! one million in less than a second.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use perfwatch::callchain::{CONTEXT_KERNEL, CONTEXT_USER, Callchain, Frame};
use perfwatch::folded::{AddressNamer, FoldedStacks, FrameNamer};

const SAMPLES: usize = 1_000_000;

/// (comm, pid, chain) for each sample, made once.
fn samples() -> Vec<(&'static [u8], u32, Callchain)> {
    let comms: [&[u8]; 4] = [b"postgres", b"nginx", b"java", b"kworker/u8:2"];
    let paths: Vec<Vec<u64>> = (0..200u64)
        .map(|p| {
            let depth = 16 + (p % 17) as usize;
            let mut chain = Vec::with_capacity(depth + 2);
            if p % 3 == 0 {
                chain.push(CONTEXT_KERNEL);
                chain.extend((0..6).map(|k| 0xffff_ffff_8100_0000 + (p * 7 + k) * 0x240));
            }
            chain.push(CONTEXT_USER);
            chain.extend(
                (0..depth as u64)
                    .map(|k| 0x5555_5555_0000 + (p * 31 + k * 17) % 4096 * 0x100 + 0x2a),
            );
            chain
        })
        .collect();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..SAMPLES)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let path = &paths[(x % 200) as usize];
            let mut chain = path.clone();
            // The innermost frame: somewhere in its function.
            let first = chain
                .iter()
                .position(|&e| e < perfwatch::callchain::CONTEXT_MAX)
                .unwrap();
            chain[first] += (x >> 20) % 64;
            let pid = 1000 + ((x >> 40) % 8) as u32;
            (comms[pid as usize % 4], pid, Callchain::new(chain))
        })
        .collect()
}

/// Names by 256-byte "function", as a symbolizer would merge offsets within one.
struct ByFunction;

impl FrameNamer for ByFunction {
    fn name(&mut self, _pid: u32, f: Frame, out: &mut String) {
        use std::fmt::Write;
        let _ = write!(out, "fn_{:x}", f.lookup_ip() >> 8);
    }
}

fn fold_all(samples: &[(&'static [u8], u32, Callchain)]) -> FoldedStacks {
    let mut s = FoldedStacks::default();
    for (comm, pid, chain) in samples {
        s.add(comm, *pid, 0, 2, Some(chain));
    }
    s
}

fn bench(c: &mut Criterion) {
    let samples = samples();
    let mut g = c.benchmark_group("folded");
    g.sample_size(10);
    g.throughput(Throughput::Elements(SAMPLES as u64));
    g.bench_function("add_only", |b| {
        b.iter(|| black_box(fold_all(&samples).len()))
    });
    let mut out = Vec::with_capacity(64 << 20);
    g.bench_function("realistic_addresses", |b| {
        b.iter(|| {
            let s = fold_all(&samples);
            out.clear();
            black_box(s.write(&mut AddressNamer, &mut out).unwrap())
        })
    });
    g.bench_function("realistic_by_function", |b| {
        b.iter(|| {
            let s = fold_all(&samples);
            out.clear();
            black_box(s.write(&mut ByFunction, &mut out).unwrap())
        })
    });
    g.finish();
    let s = fold_all(&samples);
    out.clear();
    let by_addr = s.write(&mut AddressNamer, &mut out).unwrap();
    out.clear();
    let by_fn = s.write(&mut ByFunction, &mut out).unwrap();
    eprintln!(
        "folded: {} raw stacks; {} lines by address, {} by function; {} samples",
        s.len(),
        by_addr.stacks,
        by_fn.stacks,
        by_fn.samples
    );
    assert_eq!(by_fn.samples as usize, SAMPLES);
}

criterion_group!(benches, bench);
criterion_main!(benches);
