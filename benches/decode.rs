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
use std::io::Write;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use perfwatch::event::{Event, EventDesc};
use perfwatch::perf::record::{
    DEFAULT_SAMPLE_TYPE, EventDecoder, SAMPLE_CALLCHAIN, SAMPLE_PERIOD, SAMPLE_RAW, SampleLayout,
    decode,
};
use perfwatch::perf::ring::drain;
use perfwatch::perf::tracepoint::{Format as TpFormat, Value};
use perfwatch::plain::{Format, write_event};
use perfwatch::testkit::records::{self as craft, Ids};
use perfwatch::testkit::tracepoints as tp;

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

/// A ring image of tracepoint samples (`exec` every 8th record, `sched_switch` otherwise),
/// decodable by the returned decoder.
fn tracepoint_image() -> (Vec<u8>, u64, u64, usize, EventDecoder) {
    let switch = TpFormat::parse("sched:sched_switch", tp::SCHED_SWITCH).unwrap();
    let exec = TpFormat::parse("sched:sched_process_exec", tp::SCHED_PROCESS_EXEC).unwrap();
    let desc = |index, name, format| {
        EventDesc {
            index,
            name,
            type_: 2,
            config: 0,
            format: Some(format),
            show_name: true,
            show_common: false,
        }
        .intern()
    };
    let l = SampleLayout::new(DEFAULT_SAMPLE_TYPE & !SAMPLE_PERIOD | SAMPLE_RAW, true)
        .unwrap()
        .with_fixed_period(1);
    let decoder = EventDecoder::new(
        vec![
            (l, desc(0, "sched:sched_switch", switch)),
            (l, desc(1, "sched:sched_process_exec", exec)),
        ],
        vec![(11, 0), (12, 1)],
    )
    .unwrap();
    let mut data = vec![0u8; RING];
    let start = (RING - 4096) as u64;
    let (mut pos, mut n, mut i) = (start, 0usize, 0u64);
    loop {
        let exec = i % 8 == 7;
        let ids = Ids {
            pid: 1000 + (i % 50) as u32,
            tid: 1000 + (i % 50) as u32,
            time: 1_000_000 + i * 1000,
            id: if exec { 12 } else { 11 },
            cpu: (i % 2) as u32,
        };
        let raw = if exec {
            tp::sched_process_exec(b"/usr/lib/postgresql/16/bin/postgres", 4242, 4242)
        } else {
            tp::sched_switch(b"kworker/u8:2", 812, 1, b"swapper/1", 0)
        };
        let rec = craft::sample_raw(&l, ids, 0xffff_ffff_8126_7448, 1, &raw);
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
    (data, start, pos, n, decoder)
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
    let (data, tail, head, n, decoder) = tracepoint_image();
    let mut scratch = Vec::new();
    let mut events: Vec<Event> = Vec::with_capacity(n);
    let decode_all = |events: &mut Vec<Event>, scratch: &mut Vec<u8>| {
        // SAFETY: `data` is a live buffer of RING bytes that nothing else writes.
        unsafe {
            drain(data.as_ptr(), RING, tail, head, scratch, |r| {
                if let Ok(e) = decoder.decode(r, 0) {
                    events.push(e);
                }
            })
        };
    };
    let mut g = c.benchmark_group("tracepoint");
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("decode", |b| {
        b.iter(|| {
            events.clear();
            decode_all(&mut events, &mut scratch);
            black_box(events.len())
        })
    });
    events.clear();
    decode_all(&mut events, &mut scratch);
    assert_eq!(events.len(), n, "every record decodes");
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
    g.bench_function("decode_and_fields", |b| {
        b.iter(|| {
            events.clear();
            decode_all(&mut events, &mut scratch);
            let mut sum = 0i128;
            for e in &events {
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
    let mut buf: Vec<u8> = Vec::with_capacity(n * 300);
    for (name, format) in [("plain", Format::Plain), ("json", Format::Json)] {
        g.bench_function(name, |b| {
            b.iter(|| {
                buf.clear();
                for e in &events {
                    write_event(&mut buf, e, format).unwrap();
                }
                black_box(buf.len())
            })
        });
    }
    g.finish();
}

/// A ring image of `cpu-clock -g` samples whose chains hold 32 frames (a kernel part of 8, a
/// user part of 24, with their two context markers), as a syscall-heavy program gives them.
fn callchain_image() -> (Vec<u8>, u64, u64, usize, SampleLayout) {
    use perfwatch::callchain::{CONTEXT_KERNEL, CONTEXT_USER};
    use perfwatch::testkit::records::sample_chain as chain_sample;
    let l = SampleLayout::new(DEFAULT_SAMPLE_TYPE | SAMPLE_CALLCHAIN, true).unwrap();
    let mut data = vec![0u8; RING];
    let start = (RING - 4096) as u64;
    let (mut pos, mut n, mut i) = (start, 0usize, 0u64);
    loop {
        let ids = Ids {
            pid: 1000 + (i % 50) as u32,
            tid: 1000 + (i % 50) as u32,
            time: 1_000_000 + i * 1000,
            id: 7,
            cpu: (i % 2) as u32,
        };
        let mut chain = vec![CONTEXT_KERNEL];
        chain.extend((0..8).map(|k| 0xffff_ffff_8100_0000 + k * 0x1234 + i % 64));
        chain.push(CONTEXT_USER);
        chain.extend((0..24).map(|k| 0x5555_5555_0000 + k * 0x321 + i % 16));
        let rec = chain_sample(&l, ids, chain[1], 250_000, &chain, &[]);
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
    (data, start, pos, n, l)
}

/// `-g`: samples with 32-frame chains, decoded (the chain copied into the event, one
/// allocation) and formatted.
fn bench_callchains(c: &mut Criterion) {
    let (data, tail, head, n, l) = callchain_image();
    let decoder = EventDecoder::single(l, &perfwatch::event::UNNAMED);
    let mut scratch = Vec::new();
    let mut events: Vec<Event> = Vec::with_capacity(n);
    let decode_all = |events: &mut Vec<Event>, scratch: &mut Vec<u8>| {
        // SAFETY: `data` is a live buffer of RING bytes that nothing else writes.
        unsafe {
            drain(data.as_ptr(), RING, tail, head, scratch, |r| {
                if let Ok(e) = decoder.decode(r, 0) {
                    events.push(e);
                }
            })
        };
    };
    let mut g = c.benchmark_group("callchain");
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("decode_32_frames", |b| {
        b.iter(|| {
            events.clear();
            decode_all(&mut events, &mut scratch);
            black_box(events.len())
        })
    });
    events.clear();
    decode_all(&mut events, &mut scratch);
    assert_eq!(events.len(), n, "every record decodes");
    assert!(
        events
            .iter()
            .all(|e| e.callchain().is_some_and(|c| c.len() == 32))
    );
    let mut buf: Vec<u8> = Vec::with_capacity(n * 800);
    for (name, format) in [("plain", Format::Plain), ("json", Format::Json)] {
        g.bench_function(name, |b| {
            b.iter(|| {
                buf.clear();
                for e in &events {
                    write_event(&mut buf, e, format).unwrap();
                }
                black_box(buf.len())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench, bench_tracepoints, bench_callchains);
criterion_main!(benches);
