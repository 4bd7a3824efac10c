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
                model: true,
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
