//! The TUI's own cost: CPU time per record while rendering, under a steady load.
//!
//! Feeds the real `App` a paced stream of synthetic batches (a typical mix: mostly samples,
//! with fork/exec/exit/mmap), 10,000 records per second over two CPUs, and draws the screen
//! 15 times per second into a crossterm backend that writes the real escape sequences to a
//! sink. The thread's CPU time (CLOCK_THREAD_CPUTIME_ID) divided by the records is the TUI's
//! cost per record, rendering included; the readers' decoding is not in it.
//!
//! `cargo bench --bench tui` (env `PERFWATCH_BENCH_SECS`, default 5, and
//! `PERFWATCH_BENCH_RATE`, default 10000). `PERFWATCH_BENCH_TREE=20000 cargo bench --bench
//! tui`: the process tree's frame at 20 000 processes instead (see `tree_frames`).

use std::time::{Duration, Instant};

use perfwatch::event::Batch;
use perfwatch::event::{Event, EventKind, MmapRecord};
use perfwatch::filter::Filter;
use perfwatch::frontend::tui::app::{App, AppConfig, RateUnit};
use perfwatch::frontend::tui::ui;
use perfwatch::pipeline::{Pipeline, PipelineOptions};
use perfwatch::testkit::events::task;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};

const NS: u64 = 1_000_000_000;
const BATCH_EVERY: Duration = Duration::from_millis(10);
const FRAME_EVERY: Duration = Duration::from_millis(66);

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * NS + ts.tv_nsec as u64
}

/// Record `i` of the synthetic stream on `cpu` at `time`.
fn record(i: u64, cpu: u32, time: u64) -> Event {
    let pid = 1000 + (i % 37) as u32;
    let child = 50_000 + (i / 100 % 5000) as u32;
    let kind = match i % 100 {
        0 => EventKind::Fork(task(child, pid, time)),
        1 => EventKind::Comm {
            pid: child,
            tid: child,
            comm: (*b"worker").into(),
            exec: true,
        },
        2 => EventKind::Mmap(Box::new(MmapRecord {
            pid,
            tid: pid,
            start: 0x7f00_0000_0000 + i * 4096,
            len: 0x2000,
            pgoff: 0,
            filename: (*b"/usr/lib/x86_64-linux-gnu/libc.so.6").into(),
            mmap2: None,
        })),
        3 => EventKind::Exit(task(child, pid, time)),
        _ => EventKind::sample(0x5555_0000 + i * 16, 1_000_000, 2),
    };
    Event {
        cpu,
        pid,
        tid: pid,
        time,
        id: 1,
        kind,
    }
}

struct Result {
    records: u64,
    frames: u64,
    ingest_ns: u64,
    render_ns: u64,
    cpu_ns: u64,
    wall: Duration,
}

/// Run the paced load for `secs`; `filter` set on the app first.
fn run(secs: u64, rate: u64, filter: &str) -> Result {
    let start_ns = 1_000 * NS;
    // The TUI's thread runs the pipeline too (ordering, the process model): measured with it.
    let (tx, rx) = crossbeam_channel::unbounded();
    let mut pipe = Pipeline::new(
        rx,
        &[0, 1],
        PipelineOptions {
            seed: None,
            ..PipelineOptions::default()
        },
    );
    let mut app = App::new(AppConfig::system_wide(
        "cpu-clock",
        RateUnit::Utilisation,
        vec![0, 1],
        start_ns,
    ))
    .with_model(pipe.model().clone());
    app.seed_tasks((1000..1037).map(|p| (p, (*b"busy").into())));
    app.set_filter(Filter::parse(filter).expect("bench filter"));
    let backend = CrosstermBackend::new(std::io::sink());
    let mut term = Terminal::with_options(
        backend,
        TerminalOptions {
            viewport: Viewport::Fixed(Rect::new(0, 0, 120, 40)),
        },
    )
    .expect("terminal");

    // Prepare every batch first: building them is the readers' work, not the TUI's.
    let per_batch = (rate * BATCH_EVERY.as_millis() as u64 / 1000 / 2).max(1);
    let n_batches = secs * 1000 / BATCH_EVERY.as_millis() as u64;
    let mut batches = Vec::with_capacity(n_batches as usize * 2);
    let mut i = 0;
    for b in 0..n_batches {
        let t0 = start_ns + b * BATCH_EVERY.as_nanos() as u64;
        for cpu in 0..2u32 {
            let events = (0..per_batch)
                .map(|k| {
                    i += 1;
                    record(i, cpu, t0 + k * (BATCH_EVERY.as_nanos() as u64 / per_batch))
                })
                .collect();
            batches.push(Batch {
                cpu,
                events,
                now: t0 + BATCH_EVERY.as_nanos() as u64,
                end: false,
            });
        }
    }
    let records = i;

    let wall0 = Instant::now();
    let cpu0 = thread_cpu_ns();
    let mut next_frame = wall0;
    let mut frames = 0;
    let (mut ingest_ns, mut render_ns) = (0, 0);
    let mut it = batches.into_iter();
    for b in 0..n_batches {
        let due = wall0 + BATCH_EVERY * b as u32;
        if let Some(d) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        let c = thread_cpu_ns();
        for _ in 0..2 {
            if let Some(batch) = it.next() {
                let _ = tx.send(batch);
            }
        }
        let first = pipe.batches().recv();
        pipe.take(first);
        while let Some(chunk) = pipe.next_chunk() {
            app.on_chunk(chunk);
        }
        ingest_ns += thread_cpu_ns() - c;
        if Instant::now() >= next_frame {
            let c = thread_cpu_ns();
            app.on_tick(start_ns + (b + 1) * BATCH_EVERY.as_nanos() as u64);
            ui::render(&mut term, &mut app).expect("render");
            render_ns += thread_cpu_ns() - c;
            frames += 1;
            next_frame += FRAME_EVERY;
        }
    }
    Result {
        records,
        frames,
        ingest_ns,
        render_ns,
        cpu_ns: thread_cpu_ns() - cpu0,
        wall: wall0.elapsed(),
    }
}

/// A process from `/proc` with one thread named `comm`.
fn seeded(pid: u32, ppid: Option<u32>, comm: &str) -> perfwatch::process::proc::SeedProcess {
    perfwatch::process::proc::SeedProcess {
        pid,
        ppid,
        threads: vec![(pid, comm.as_bytes().into())],
        maps: Vec::new(),
        argv: None,
        exe: None,
        cgroup: None,
    }
}

/// `PERFWATCH_BENCH_TREE=N`: the process tree's part of a frame (brought up to date with the
/// model, walked, the 40 rows drawn named) with N sleeping processes from `/proc` under one
/// parent and a fork loop beside them (2 000 forks and exits a second, 10 frames a second:
/// a fork storm's exited children folded into one row), as benches/scale.py runs the TUI,
/// without the terminal. Prints the thread's CPU time per frame.
fn tree_frames(procs: u32) {
    use perfwatch::frontend::tui::tree::{TreeIndex, name_rows};
    use perfwatch::process::ProcessModel;
    use perfwatch::testkit::events as tk;
    let mut m = ProcessModel::new();
    m.collect_tree_changes(true);
    let mut seeds = vec![
        seeded(1, None, "init"),
        seeded(10, Some(1), "stress"),
        seeded(11, Some(1), "forker"),
    ];
    seeds.extend((0..procs).map(|i| seeded(1000 + i, Some(10), "sleeper")));
    m.seed(seeds);
    let alive: rustc_hash::FxHashSet<u32> = m.each_process().map(|p| p.pid).collect();
    let alive = |pid: u32| alive.contains(&pid);
    let mut index = TreeIndex::default();
    let (mut t, mut pid) = (1_000 * NS, 100_000u32);
    let mut cpu = Vec::new();
    let mut rows = 0;
    for _ in 0..300 {
        let mut evs = Vec::new();
        for _ in 0..200 {
            t += 500_000;
            evs.push(tk::fork(0, t, pid, 11));
            evs.push(tk::exit(0, t + 1_000, pid, 11));
            pid += 1;
        }
        m.apply(&evs);
        m.evict(t, |_, _| true);
        let c0 = thread_cpu_ns();
        index.sync(&m);
        let mut r = index.rows_unnamed(&m, t, &alive);
        let shown = 0..r.len().min(40);
        name_rows(&m, &mut r, shown);
        cpu.push(thread_cpu_ns() - c0);
        rows = r.len();
    }
    cpu.sort_unstable();
    let q = |f: f64| cpu[((cpu.len() - 1) as f64 * f) as usize] as f64 / 1e6;
    println!(
        "tree at {procs} sleeping processes + 2 000 forks/s: {} frames, {rows} rows; CPU per \
         frame p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        cpu.len(),
        q(0.5),
        q(0.99),
        q(1.0)
    );
}

fn main() {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    if let Some(procs) = std::env::var("PERFWATCH_BENCH_TREE")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return tree_frames(procs);
    }
    let secs = env("PERFWATCH_BENCH_SECS", 5);
    let rate = env("PERFWATCH_BENCH_RATE", 10_000);
    println!("TUI cost at {rate} records/s for {secs} s, 120x40 screen, 15 frames/s:");
    for (name, filter) in [
        ("no filter", ""),
        ("filter type:fork,exit,comm", "type:fork,exit,comm"),
        ("filter with a free word", "!type:sample libc"),
    ] {
        let r = run(secs, rate, filter);
        let per = r.cpu_ns as f64 / r.records as f64 / 1e3;
        let load = r.cpu_ns as f64 / r.wall.as_nanos() as f64 * 100.0;
        println!(
            "  {name:<28} {:>7} records, {:>4} frames in {:.2} s: {per:.3} µs CPU per record \
             (rendering included), {load:.1}% of one CPU",
            r.records,
            r.frames,
            r.wall.as_secs_f64()
        );
        println!(
            "  {:<28} ingest {:.3} µs per record, drawing {:.0} µs per frame",
            "",
            r.ingest_ns as f64 / r.records as f64 / 1e3,
            r.render_ns as f64 / r.frames.max(1) as f64 / 1e3
        );
    }
}
