//! Sources + stages for an embedding program (the `perfwatch` Python module, issue 30): the
//! same [`Monitor`] and [`Pipeline`] the CLI frontends drive, behind a small API that starts
//! a run, hands out ordered, symbolized chunks with a timeout, reports the counters and stops.
//!
//! It is a frontend loop like [`crate::frontend::plain`], without the terminal, the signals
//! or the command: the embedding program decides when to stop (a `break`, a Ctrl-C, garbage
//! collection) and calls [`Session::stop`] (or drops the session), which disables the events,
//! drains the rings and joins every thread.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use anyhow::Result;
use crossbeam_channel::select;

use crate::event::Event;
use crate::monitor::{Monitor, MonitorConfig, TargetSpec};
use crate::perf::events::{DEFAULT_FREQ, Sampling, parse_event_list};
use crate::pipeline::{Pipeline, PipelineOptions};
use crate::process::proc::SeedOptions;
use crate::stats::Totals;

/// What to watch, as an embedding program asks for it.
#[derive(Clone, Debug, Default)]
pub struct WatchOptions {
    /// Event names as `-e` takes them (`cpu-clock`, `sched:sched_switch`, `dummy`); empty:
    /// perfwatch's default event.
    pub events: Vec<String>,
    /// Only these CPUs (`-C`); `None`: all online CPUs.
    pub cpus: Option<Vec<u32>>,
    /// Only these processes (`-p`); `None`: system-wide.
    pub pids: Option<Vec<u32>>,
    /// Record call chains of at most this many frames (`-g`).
    pub call_graph: Option<u16>,
    /// Stop by itself after this long (`--duration`).
    pub duration: Option<Duration>,
    /// Sampling frequency (`-F`) or period (`-c`); `None`: perfwatch's default frequency.
    pub sampling: Option<Sampling>,
    /// Ring size in pages per CPU (`-m`); `None`: the default.
    pub mmap_pages: Option<usize>,
    /// Context switch records (`--switch`).
    pub context_switch: bool,
}

/// A running watch: readers on their threads, the ordering and symbolizing pipeline, and the
/// chunks it has ready.
pub struct Session {
    mon: Monitor,
    pipe: Pipeline,
    end: Option<Instant>,
    stopped: bool,
    ready: VecDeque<Vec<Event>>,
}

/// Batches the channel holds per CPU (as the CLI: a slow consumer makes the rings take the
/// strain, and count it as lost).
const CHANNEL_BATCHES_PER_CPU: usize = 8;

impl Session {
    /// Open the events, start the readers and the pipeline.
    pub fn start(opts: WatchOptions) -> Result<Session> {
        let mut events = if opts.events.is_empty() {
            vec![crate::perf::events::EventSpec::default_event()]
        } else {
            parse_event_list(&opts.events)?
        };
        if let Some(n) = opts.call_graph {
            for e in events.iter_mut().filter(|e| !e.is_dummy()) {
                e.call_graph = Some(n);
            }
        }
        let target = match &opts.pids {
            Some(p) => TargetSpec::Pids(p.clone()),
            None => TargetSpec::System,
        };
        let mut cfg = MonitorConfig::new(events, target);
        cfg.cpus = opts.cpus.clone();
        cfg.sampling = opts.sampling.unwrap_or(Sampling::Freq(DEFAULT_FREQ));
        if let Some(p) = opts.mmap_pages {
            cfg.mmap_pages = p;
        }
        cfg.context_switch = opts.context_switch;
        cfg.channel_capacity = 64
            + CHANNEL_BATCHES_PER_CPU
                * crate::perf::cpus::online_cpus()
                    .map(|c| c.len())
                    .unwrap_or(1);
        let mon = Monitor::start(cfg)?;
        let samples = mon.info.events.iter().any(|e| !e.is_dummy());
        let symbols = samples.then(|| crate::symbols::Config {
            load_timeout: Duration::from_secs(2),
            batch_wait: Some(Duration::from_millis(100)),
            preload_kernel: true,
            ..crate::symbols::Config::default()
        });
        let pipe = Pipeline::new(
            mon.rx.clone(),
            &mon.info.cpus,
            PipelineOptions {
                // The process model is kept for the symbolizer: a run of side-band records
                // only (the perf binding's twatch.py) does not pay for it, as `--plain` does not.
                model: samples,
                symbols,
                seed: Some(SeedOptions {
                    maps: samples,
                    argv: false,
                }),
                pool: Some(mon.pool.clone()),
                stop_time: Some(mon.stop_time.clone()),
                ..PipelineOptions::default()
            },
        );
        Ok(Session {
            end: opts.duration.map(|d| Instant::now() + d),
            mon,
            pipe,
            stopped: false,
            ready: VecDeque::new(),
        })
    }

    /// The CPUs being read.
    pub fn cpus(&self) -> &[u32] {
        &self.mon.info.cpus
    }

    /// Start-up notes (a fallback event, a clamped frequency).
    pub fn notes(&self) -> &[String] {
        &self.mon.info.notes
    }

    /// The next ordered chunk of events, waiting at most `timeout` for one. `Ok(Some(empty))`
    /// is a timeout; `None` means the run has ended (stopped, its duration is over, its
    /// targets have gone) and everything has been handed out.
    pub fn next_chunk(&mut self, timeout: Duration) -> Option<Vec<Event>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(c) = self.ready.pop_front() {
                return Some(c);
            }
            if let Some(c) = self.pipe.next_chunk() {
                if c.events.is_empty() {
                    self.pipe.recycle(c.events);
                    continue;
                }
                return Some(c.events);
            }
            if self.stopped {
                return None;
            }
            if self.pipe.all_ended() {
                self.stop();
                continue;
            }
            let now = Instant::now();
            if self.end.is_some_and(|e| now >= e) {
                self.stop();
                continue;
            }
            if now >= deadline {
                return Some(Vec::new());
            }
            let mut wait = deadline - now;
            if let Some(e) = self.end {
                wait = wait.min(e - now);
            }
            let pipe = &mut self.pipe;
            let batches = pipe.batches();
            let staged = pipe.staged();
            select! {
                recv(batches) -> msg => pipe.take(msg),
                recv(staged) -> msg => pipe.take_staged(msg),
                default(wait) => {}
            }
        }
    }

    /// Give a chunk's buffer back for reuse (optional).
    pub fn recycle(&mut self, events: Vec<Event>) {
        self.pipe.recycle(events);
    }

    /// The counters so far (records by type, lost, dropped; per CPU).
    pub fn stats(&self) -> Totals {
        self.mon.stats.snapshot()
    }

    /// Whether the run has been stopped (all that is left are the chunks it had ready).
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Stop: disable the events, take the readers' last records (within the CLI's grace),
    /// join the reader threads. What was ordered by then is still handed out by
    /// [`Session::next_chunk`]. Idempotent.
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        self.mon.request_stop();
        self.pipe.finish(crate::stop::SHUTDOWN_GRACE);
        while let Some(c) = self.pipe.next_chunk() {
            if !c.events.is_empty() {
                self.ready.push_back(c.events);
            }
        }
        self.mon.join();
    }

    /// Stop and drop whatever was not handed out yet.
    pub fn close(&mut self) {
        self.stop();
        self.ready.clear();
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.close();
    }
}

impl Session {
    /// The counters, shared: readable from another thread while the run goes on.
    pub fn stats_handle(&self) -> std::sync::Arc<crate::stats::Stats> {
        self.mon.stats.clone()
    }
}

/// A counting event (perf's binding's `evsel.open` + `evsel.read`): one descriptor for one
/// task (`pid`, -1: every task) on one CPU (`cpu`, -1: any), counting from its open, with
/// the times it was enabled and running (perf's `read_format` TOTAL_TIME_ENABLED|RUNNING).
pub struct Counter {
    file: std::fs::File,
}

/// A counter's reading, as perf's binding's `counts_values`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Count {
    /// The count.
    pub val: u64,
    /// Nanoseconds the event was enabled.
    pub ena: u64,
    /// Nanoseconds it was running (less than `ena` when the PMU was shared).
    pub run: u64,
}

impl Counter {
    /// Open the event `type_`/`config` (the kernel's numbers: `PERF_TYPE_*`, `PERF_COUNT_*`,
    /// a tracepoint id), enabled at once; `inherit`: children forked later count too.
    pub fn open(type_: u32, config: u64, pid: i32, cpu: i32, inherit: bool) -> Result<Counter> {
        use perf_event_open_sys::bindings as pe;
        let mut a = pe::perf_event_attr {
            type_,
            size: std::mem::size_of::<pe::perf_event_attr>() as u32,
            config,
            read_format: (pe::PERF_FORMAT_TOTAL_TIME_ENABLED | pe::PERF_FORMAT_TOTAL_TIME_RUNNING)
                as u64,
            ..Default::default()
        };
        a.set_inherit(inherit as u64);
        let flags = pe::PERF_FLAG_FD_CLOEXEC as std::ffi::c_ulong;
        let fd = loop {
            match crate::sys::perf::open(&mut a, pid, cpu, flags) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => break r,
            }
        };
        let fd = fd.map_err(|e| {
            anyhow::anyhow!(
                "cannot open event type {type_} config {config:#x} (pid {pid}, cpu {cpu}): {e}"
            )
        })?;
        Ok(Counter {
            file: std::fs::File::from(fd),
        })
    }

    /// The count so far.
    pub fn read(&self) -> std::io::Result<Count> {
        use std::io::Read;
        let mut buf = [0u8; 24];
        (&self.file).read_exact(&mut buf)?;
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&buf[i * 8..i * 8 + 8]);
            u64::from_ne_bytes(w)
        };
        Ok(Count {
            val: word(0),
            ena: word(1),
            run: word(2),
        })
    }
}
