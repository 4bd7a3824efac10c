//! The middle of perfwatch per record: the ordering stage (two and eight CPUs), the process
//! model (a fork storm: fork, exec, exit per process), and both as the frontend's thread runs
//! them in a [`Pipeline`].
//!
//! `cargo bench --bench pipeline`. Throughput is in records per second.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use perfwatch::event::Batch;
use perfwatch::event::Event;
use perfwatch::order::OrderingStage;
use perfwatch::pipeline::{Pipeline, PipelineOptions};
use perfwatch::process::ProcessModel;
use perfwatch::testkit::events::{batch, comm, exit, fork, sample};

const MS: u64 = 1_000_000;
/// Records per reader batch, as a reader drains under a storm.
const PER_BATCH: u64 = 1000;

/// A fork storm as `perfwatch-stress fork` makes it: each child forked, then exits; every
/// tenth execs first. Spread over `cpus` CPUs in interleaved batches.
fn storm(cpus: u32, batches: u64) -> Vec<Batch> {
    let mut out = Vec::new();
    let mut pid = 10_000u32;
    for b in 0..batches {
        for cpu in 0..cpus {
            let t0 = b * PER_BATCH * 10 + cpu as u64;
            let mut events: Vec<Event> = Vec::with_capacity(PER_BATCH as usize);
            let mut k = 0;
            while (events.len() as u64) < PER_BATCH {
                let t = t0 + k * 10;
                k += 1;
                pid += 1;
                events.push(fork(cpu, t, pid, 1000 + cpu));
                if pid % 10 == 0 {
                    events.push(comm(cpu, t + 1, pid, b"true", true));
                }
                events.push(exit(cpu, t + 2, pid, 1000 + cpu));
            }
            out.push(batch(cpu, t0 + PER_BATCH * 10 + 100 * MS, events, false));
        }
    }
    out
}

fn records(batches: &[Batch]) -> u64 {
    batches.iter().map(|b| b.events.len() as u64).sum()
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("pipeline");
    for cpus in [2u32, 8] {
        let input = storm(cpus, 20);
        g.throughput(Throughput::Elements(records(&input)));
        g.bench_function(format!("ordering_{cpus}_cpus"), |b| {
            b.iter_batched(
                || storm(cpus, 20),
                |batches| {
                    let all: Vec<u32> = (0..cpus).collect();
                    let mut order = OrderingStage::new(&all, 1 << 18);
                    let mut out = Vec::new();
                    for b in batches {
                        order.push(b);
                        order.pop_ready(&mut out);
                        black_box(out.len());
                        out.clear();
                    }
                },
                BatchSize::LargeInput,
            )
        });
    }
    let input = storm(2, 20);
    let events: Vec<Event> = input.iter().flat_map(|b| b.events.clone()).collect();
    g.throughput(Throughput::Elements(events.len() as u64));
    g.bench_function("model_fork_storm", |b| {
        // Steady state: the tables have grown once; each round's tasks exit and are
        // forgotten (eviction included in the time).
        let mut m = ProcessModel::new();
        let mut round = 0u64;
        b.iter(|| {
            round += 1;
            m.apply(&events);
            // Far enough on in stream time that every exited task is forgotten.
            m.evict(round * 100 * perfwatch::process::EXITED_KEEP_NS, |_, _| {
                true
            });
            black_box(m.len())
        })
    });
    let samples: Vec<Event> = (0..20_000u64)
        .map(|i| sample((i % 2) as u32, 1000 + (i % 37) as u32, i, 1))
        .collect();
    g.throughput(Throughput::Elements(samples.len() as u64));
    g.bench_function("model_samples", |b| {
        let mut m = ProcessModel::new();
        b.iter(|| m.apply(black_box(&samples)))
    });
    g.throughput(Throughput::Elements(records(&input)));
    g.bench_function("pipeline_fork_storm_2_cpus", |b| {
        b.iter_batched(
            || {
                let (tx, rx) = crossbeam_channel::unbounded();
                for b in storm(2, 20) {
                    tx.send(b).unwrap();
                }
                drop(tx);
                let opts = PipelineOptions {
                    seed: None,
                    ..PipelineOptions::default()
                };
                Pipeline::new(rx, &[0, 1], opts)
            },
            |mut p| {
                while !p.all_ended() {
                    let m = p.batches().recv();
                    p.take(m);
                    while let Some(c) = p.next_chunk() {
                        black_box(c.events.len());
                        p.recycle(c.events);
                    }
                }
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(pipeline, benches);
criterion_main!(pipeline);
