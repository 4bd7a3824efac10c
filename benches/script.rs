//! Events per second through the script stage: a trivial `filter`, an `on_event` that
//! updates a dict, and (for the stage's own cost) a script with no per-event handler.
//!
//! `cargo bench --bench script`. Closed loop: at most IN_FLIGHT batches are outstanding, so
//! the worker's queue never fills and every event goes through Python (the run asserts that
//! none bypassed the script).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use crossbeam_channel::bounded;
use perfwatch::event::Chunk;
use perfwatch::event::{Event, EventKind, TaskRecord};
use perfwatch::script::{ScriptStage, StageOptions};
use perfwatch::stats::Stats;

const BATCH: usize = 1024;
const IN_FLIGHT: usize = 16;
const MS: u64 = 1_000_000;

fn chunk(i: u64) -> Chunk {
    let base = (i + 1) * MS;
    let events = (0..BATCH as u64)
        .map(|k| Event {
            cpu: 0,
            pid: 1000 + (k % 64) as u32,
            tid: 1000 + (k % 64) as u32,
            time: base + k,
            id: 7,
            kind: if k % 2 == 0 {
                EventKind::sample(0xffff_ffff_8100_0000 + k, 250_000, 1)
            } else {
                EventKind::Fork(TaskRecord {
                    pid: 5000 + k as u32,
                    ppid: 1000,
                    tid: 5000 + k as u32,
                    ptid: 1000,
                    time: base + k,
                })
            },
        })
        .collect();
    // Chunks come ordered from the pipeline: the stage passes them on as they come.
    Chunk {
        events,
        watermark: base + BATCH as u64,
    }
}

/// `kept`: how many of a batch's events the script lets through.
fn bench_script(c: &mut Criterion, name: &str, body: &str, kept: u64) {
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join(format!("{name}.py"));
    std::fs::write(&path, body).unwrap();
    let stage = ScriptStage::load(&[path], StageOptions::default()).unwrap();
    let stats = Arc::new(Stats::new(&[0]));
    let (tx, rx) = bounded(IN_FLIGHT * 2);
    let (out, _pane, handle) = stage.start(rx, stats.clone()).unwrap();
    let template: Vec<Chunk> = (0..IN_FLIGHT as u64).map(chunk).collect();
    let mut seq = 0u64;

    let mut g = c.benchmark_group("script");
    g.throughput(Throughput::Elements(BATCH as u64));
    g.measurement_time(Duration::from_secs(5));
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            // Fresh copies made outside the timed loop would need `iters` batches in memory;
            // cloning a template batch is cheap next to the Python calls measured here.
            let mut sent = 0u64;
            let mut received = 0u64;
            let t0 = Instant::now();
            while received < iters * kept {
                while sent < iters && sent * kept < received + IN_FLIGHT as u64 * kept {
                    let mut b = template[(seq % IN_FLIGHT as u64) as usize].clone();
                    // Keep times increasing across iterations.
                    let shift = seq * BATCH as u64 * 4;
                    for e in &mut b.events {
                        e.time += shift;
                    }
                    b.watermark = b.events.last().map_or(0, |e| e.time);
                    seq += 1;
                    tx.send(b).unwrap();
                    sent += 1;
                }
                match out.recv_timeout(Duration::from_secs(10)) {
                    Ok(b) => received += b.events.len() as u64,
                    Err(e) => panic!("stage stalled: {e}"),
                }
            }
            t0.elapsed()
        })
    });
    g.finish();
    drop(tx);
    let report = handle.stop(Duration::from_secs(2));
    assert_eq!(report.bypassed, 0, "events bypassed the script: {report:?}");
}

fn benches(c: &mut Criterion) {
    let all = BATCH as u64;
    bench_script(
        c,
        "no_per_event_handler",
        "def on_tick():\n    return None\n",
        all,
    );
    bench_script(
        c,
        "filter_true",
        "def filter(event):\n    return True\n",
        all,
    );
    bench_script(
        c,
        "filter_by_type",
        "def filter(event):\n    return event.type == 'fork'\n",
        all / 2,
    );
    bench_script(
        c,
        "on_event_dict_update",
        "counts = {}\ndef on_event(event):\n    pid = event.sample_pid\n    counts[pid] = counts.get(pid, 0) + 1\n",
        all,
    );
}

criterion_group!(script, benches);
criterion_main!(script);
