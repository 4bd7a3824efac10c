//! Decoding and formatting throughput.
//!
//! `decode/ring_mix`: drain a 512 KiB ring image holding a realistic mix of records (samples,
//! fork, exit, comm, mmap2, with the sample_id trailer perfwatch asks for; some records wrap
//! around the end) and decode each into an `Event`, as a reader thread does.
//! `format/plain` and `format/json`: write the decoded events as `--plain` / `--json` lines
//! into a buffer, as the plain frontend does.
//!
//! `tracepoint/*`: rings of `sched_switch`- and `sched_process_exec`-shaped samples (with
//! their RAW data, several events in one ring, told apart by identifier): decoded into
//! events (RAW bytes copied with the sample), then into typed fields, then formatted; and,
//! for the record, the alternative of decoding every field into owned values on the reader
//! thread.
//!
//! `callchain/*`: `-g` samples whose chains hold 32 frames (kernel and user parts with their
//! context markers): decoded, then formatted.
//!
//! Run: `cargo bench --bench decode`. Throughput is reported in elements (records) per second.

use std::hint::black_box;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use perfwatch::event::Event;
use perfwatch::event::tracepoint::Value;
use perfwatch::format::{Format, write_event};
use perfwatch::perf::record::{
    DEFAULT_SAMPLE_TYPE, EventDecoder, SAMPLE_CALLCHAIN, SAMPLE_PERIOD, SAMPLE_RAW, SampleLayout,
    decode,
};
use perfwatch::perf::ring::drain;
use perfwatch::testkit::records::{self as craft, Ids};
use perfwatch::testkit::tracepoints as tp;

const RING: usize = 512 * 1024;

/// A ring image: (data, tail, head, records).
struct Image {
    data: Vec<u8>,
    tail: u64,
    head: u64,
    records: usize,
}

/// The ids of an image's `i`-th record: 50 tasks, 1 µs apart, on two CPUs.
fn ids(i: u64, id: u64) -> Ids {
    Ids {
        pid: 1000 + (i % 50) as u32,
        tid: 1000 + (i % 50) as u32,
        time: 1_000_000 + i * 1000,
        id,
        cpu: (i % 2) as u32,
    }
}

impl Image {
    /// A ring filled to ~90% with `record(i)` for i = 0, 1, ..., starting near the end so
    /// that the fill wraps around.
    fn fill(mut record: impl FnMut(u64) -> Vec<u8>) -> Image {
        let mut data = vec![0u8; RING];
        let tail = (RING - 4096) as u64;
        let (mut head, mut records) = (tail, 0usize);
        loop {
            let rec = record(records as u64);
            if (head - tail) as usize + rec.len() > RING * 9 / 10 {
                break;
            }
            for (k, b) in rec.iter().enumerate() {
                data[((head + k as u64) % RING as u64) as usize] = *b;
            }
            head += rec.len() as u64;
            records += 1;
        }
        Image {
            data,
            tail,
            head,
            records,
        }
    }

    /// Drains the image as a reader thread does, each record decoded by `decode` into `out`.
    fn decode_into(
        &self,
        decode: impl Fn(&[u8]) -> Option<Event>,
        out: &mut Vec<Event>,
        scratch: &mut Vec<u8>,
    ) {
        out.clear();
        // SAFETY: `data` is a live buffer of RING bytes that nothing else writes.
        unsafe {
            drain(
                black_box(self.data.as_ptr()),
                RING,
                self.tail,
                self.head,
                scratch,
                |r| out.extend(decode(r)),
            )
        };
    }
}

/// A fixed mix of records with the default layout.
fn ring_image() -> Image {
    let l = SampleLayout::default();
    Image::fill(|i| {
        let ids = ids(i, 7);
        match i % 20 {
            0 | 1 => craft::fork(&l, ids, 5000 + i as u32, 1000, ids.time),
            2 | 3 => craft::exit(&l, ids, 5000 + i as u32, 1000, ids.time),
            4 => craft::comm(&l, ids, 5000 + i as u32, b"kworker/u8:2", true),
            5 => craft::mmap2(
                &l,
                ids,
                5000 + i as u32,
                0x7f00_0000_0000,
                0x2000,
                b"/usr/lib/x86_64-linux-gnu/libc.so.6",
            ),
            _ => craft::sample(&l, ids, 0xffff_ffff_8100_0000 + i, 250_000),
        }
    })
}

/// Benchmarks `--plain` and `--json` formatting of `events` in group `g`.
fn bench_formats(g: &mut BenchmarkGroup<WallTime>, events: &[Event], line_bytes: usize) {
    let mut buf: Vec<u8> = Vec::with_capacity(events.len() * line_bytes);
    for (name, format) in [("plain", Format::Plain), ("json", Format::Json)] {
        g.bench_function(name, |b| {
            b.iter(|| {
                buf.clear();
                for e in events {
                    write_event(&mut buf, e, format.clone()).unwrap();
                }
                black_box(buf.len())
            })
        });
    }
}

/// Benchmarks decoding `image` with `decode` as `name` in group `g`, and returns the events
/// (every record must decode).
fn bench_decode(
    g: &mut BenchmarkGroup<WallTime>,
    name: &str,
    image: &Image,
    decode: impl Fn(&[u8]) -> Option<Event>,
) -> Vec<Event> {
    let mut events = Vec::with_capacity(image.records);
    let mut scratch = Vec::new();
    g.throughput(Throughput::Elements(image.records as u64));
    g.bench_function(name, |b| {
        b.iter(|| {
            image.decode_into(&decode, &mut events, &mut scratch);
            black_box(events.len())
        })
    });
    image.decode_into(&decode, &mut events, &mut scratch);
    assert_eq!(events.len(), image.records, "every record decodes");
    events
}

fn bench(c: &mut Criterion) {
    let image = ring_image();
    let l = SampleLayout::default();
    let mut g = c.benchmark_group("decode");
    let events = bench_decode(&mut g, "ring_mix", &image, |r| decode(r, &l, 0).ok());
    g.finish();
    let mut g = c.benchmark_group("format");
    g.throughput(Throughput::Elements(image.records as u64));
    bench_formats(&mut g, &events, 160);
    g.finish();
}

/// A ring image of tracepoint samples (`exec` every 8th record, `sched_switch` otherwise),
/// decodable by the returned decoder.
fn tracepoint_image() -> (Image, EventDecoder) {
    let l = SampleLayout::new(DEFAULT_SAMPLE_TYPE & !SAMPLE_PERIOD | SAMPLE_RAW, true)
        .unwrap()
        .with_fixed_period(1);
    let decoder = EventDecoder::new(
        vec![
            (l, tp::desc(0, "sched:sched_switch", tp::SCHED_SWITCH)),
            (
                l,
                tp::desc(1, "sched:sched_process_exec", tp::SCHED_PROCESS_EXEC),
            ),
        ],
        vec![(11, 0), (12, 1)],
    )
    .unwrap();
    let image = Image::fill(|i| {
        let exec = i % 8 == 7;
        let ids = ids(i, if exec { 12 } else { 11 });
        let raw = if exec {
            tp::sched_process_exec(b"/usr/lib/postgresql/16/bin/postgres", 4242, 4242)
        } else {
            tp::sched_switch(b"kworker/u8:2", 812, 1, b"swapper/1", 0)
        };
        craft::sample_raw(&l, ids, 0xffff_ffff_8126_7448, 1, &raw)
    });
    (image, decoder)
}

/// The reader-side alternative: every field into an owned value.
#[derive(Debug)]
#[allow(dead_code)]
enum Owned {
    Int(i64),
    UInt(u64),
    Str(Box<[u8]>),
    Array(Vec<i128>),
    Missing,
}

fn owned_fields(e: &Event) -> Vec<Owned> {
    e.fields(false)
        .map(|(_, v)| match v {
            Value::Int(x) => Owned::Int(x),
            Value::UInt(x) | Value::Hex(x) => Owned::UInt(x),
            Value::Str(s) => Owned::Str(s.into()),
            v @ Value::Array { .. } => Owned::Array(v.elements().collect()),
            Value::Missing => Owned::Missing,
        })
        .collect()
}

fn bench_tracepoints(c: &mut Criterion) {
    let (image, decoder) = tracepoint_image();
    let mut g = c.benchmark_group("tracepoint");
    let events = bench_decode(&mut g, "decode", &image, |r| decoder.decode(r, 0).ok());
    assert!(events.iter().all(|e| e.fields(false).count() >= 3));
    g.bench_function("fields", |b| {
        b.iter(|| {
            let mut sum = 0i128;
            for e in &events {
                for (_, v) in e.fields(false) {
                    sum += match v {
                        Value::Str(s) => s.len() as i128,
                        v => v.as_i128().unwrap_or(0),
                    };
                }
            }
            black_box(sum)
        })
    });
    let (mut again, mut scratch) = (Vec::with_capacity(image.records), Vec::new());
    g.bench_function("decode_and_fields", |b| {
        b.iter(|| {
            image.decode_into(|r| decoder.decode(r, 0).ok(), &mut again, &mut scratch);
            let mut sum = 0i128;
            for e in &again {
                for (_, v) in e.fields(false) {
                    sum += v.as_i128().unwrap_or(1);
                }
            }
            black_box(sum)
        })
    });
    g.bench_function("owned_fields_on_reader", |b| {
        b.iter(|| {
            let mut total = 0;
            for e in &events {
                total += owned_fields(e).len();
            }
            black_box(total)
        })
    });
    bench_formats(&mut g, &events, 300);
    g.finish();
}

/// A ring image of `cpu-clock -g` samples whose chains hold 32 frames (a kernel part of 8, a
/// user part of 24, with their two context markers), as a syscall-heavy program gives them.
fn callchain_image() -> (Image, SampleLayout) {
    use perfwatch::callchain::{CONTEXT_KERNEL, CONTEXT_USER};
    use perfwatch::testkit::records::sample_chain as chain_sample;
    let l = SampleLayout::new(DEFAULT_SAMPLE_TYPE | SAMPLE_CALLCHAIN, true).unwrap();
    let image = Image::fill(|i| {
        let mut chain = vec![CONTEXT_KERNEL];
        chain.extend((0..8).map(|k| 0xffff_ffff_8100_0000 + k * 0x1234 + i % 64));
        chain.push(CONTEXT_USER);
        chain.extend((0..24).map(|k| 0x5555_5555_0000 + k * 0x321 + i % 16));
        chain_sample(&l, ids(i, 7), chain[1], 250_000, &chain, &[])
    });
    (image, l)
}

/// `-g`: samples with 32-frame chains, decoded (the chain copied into the event, one
/// allocation) and formatted.
fn bench_callchains(c: &mut Criterion) {
    let (image, l) = callchain_image();
    let decoder = EventDecoder::single(l, &perfwatch::event::UNNAMED);
    let mut g = c.benchmark_group("callchain");
    let events = bench_decode(&mut g, "decode_32_frames", &image, |r| {
        decoder.decode(r, 0).ok()
    });
    assert!(
        events
            .iter()
            .all(|e| e.callchain().is_some_and(|c| c.len() == 32))
    );
    bench_formats(&mut g, &events, 800);
    g.finish();
}

criterion_group!(benches, bench, bench_tracepoints, bench_callchains);
criterion_main!(benches);
