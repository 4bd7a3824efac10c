//! Decoding and formatting throughput.
//!
//! `decode/ring_mix`: drain a 512 KiB ring image holding a realistic mix of records (samples,
//! fork, exit, comm, mmap2, with the sample_id trailer perfwatch asks for; some records wrap
//! around the end) and decode each into an `Event`, as a reader thread does.
//! `format/plain` and `format/json`: write the decoded events as `--plain` / `--json` lines
//! into a buffer, as the plain frontend does.
//!
//! Run: `cargo bench --bench decode`. Throughput is reported in elements (records) per second.

use std::hint::black_box;
use std::io::Write;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use perfwatch::event::Event;
use perfwatch::perf::record::craft::{self, Ids};
use perfwatch::perf::record::{SampleLayout, decode};
use perfwatch::perf::ring::drain;
use perfwatch::plain::{Format, write_event};

const RING: usize = 512 * 1024;

/// A ring image filled to ~90% with a fixed mix of records, starting near the end so that the
/// fill wraps around. Returns (data, tail, head, records).
fn ring_image() -> (Vec<u8>, u64, u64, usize) {
    let l = SampleLayout::default();
    let mut data = vec![0u8; RING];
    let start = (RING - 4096) as u64;
    let mut pos = start;
    let mut n = 0usize;
    let mut i = 0u64;
    loop {
        let ids = Ids {
            pid: 1000 + (i % 50) as u32,
            tid: 1000 + (i % 50) as u32,
            time: 1_000_000 + i * 1000,
            id: 7,
            cpu: (i % 2) as u32,
        };
        let rec = match i % 20 {
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
        };
        if (pos - start) as usize + rec.len() > RING * 9 / 10 {
            break;
        }
        for (k, b) in rec.iter().enumerate() {
            data[((pos + k as u64) % RING as u64) as usize] = *b;
        }
        pos += rec.len() as u64;
        n += 1;
        i += 1;
    }
    (data, start, pos, n)
}

fn decode_events(data: &[u8], tail: u64, head: u64, out: &mut Vec<Event>, scratch: &mut Vec<u8>) {
    let l = SampleLayout::default();
    // SAFETY: `data` is a live buffer of RING bytes that nothing else writes.
    unsafe {
        drain(data.as_ptr(), RING, tail, head, scratch, |r| {
            if let Ok(e) = decode(r, &l, 0) {
                out.push(e);
            }
        })
    };
}

fn bench(c: &mut Criterion) {
    let (data, tail, head, n) = ring_image();
    let mut events = Vec::with_capacity(n);
    let mut scratch = Vec::new();
    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("ring_mix", |b| {
        b.iter(|| {
            events.clear();
            decode_events(black_box(&data), tail, head, &mut events, &mut scratch);
            black_box(events.len())
        })
    });
    g.finish();

    events.clear();
    decode_events(&data, tail, head, &mut events, &mut scratch);
    assert_eq!(events.len(), n, "every record decodes");
    let mut g = c.benchmark_group("format");
    g.throughput(Throughput::Elements(n as u64));
    let mut buf: Vec<u8> = Vec::with_capacity(n * 160);
    for (name, format) in [("plain", Format::Plain), ("json", Format::Json)] {
        g.bench_function(name, |b| {
            b.iter(|| {
                buf.clear();
                for e in &events {
                    write_event(&mut buf, e, format).unwrap();
                }
                buf.flush().unwrap();
                black_box(buf.len())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
