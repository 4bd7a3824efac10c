//! The running monitor: the opened events, the reader threads, the started command, and the
//! channel of batches the frontends consume. Frontends (plain, TUI) drive it; it prints
//! nothing itself: what a user should be told at start-up is in [`MonitorInfo::notes`].

use std::ffi::OsString;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use crossbeam_channel::{Receiver, bounded};

use crate::command::PausedChild;
use crate::event::EventDesc;
use crate::event::{Batch, BufferPool};
use crate::perf::cpus::{CpuList, online_cpus};
use crate::perf::events::{EventSpec, Sampling};
use crate::perf::open::{self, Fallback, OpenConfig, Target};
use crate::perf::reader;
use crate::stats::Stats;

/// Whose events to watch, as the user asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetSpec {
    System,
    Pids(Vec<u32>),
    Tids(Vec<u32>),
    Command(Vec<OsString>),
}

/// Everything the monitor needs, already parsed.
#[derive(Clone, Debug)]
pub struct MonitorConfig {
    /// The events, in `-e` order (at least one).
    pub events: Vec<EventSpec>,
    pub sampling: Sampling,
    pub target: TargetSpec,
    /// `-C`: restrict to these CPUs (validated against the online list here).
    pub cpus: Option<Vec<u32>>,
    pub mmap_pages: usize,
    pub context_switch: bool,
    /// Batches the channel holds before readers wait.
    pub channel_capacity: usize,
    /// How long a reader whose ring stays under its wakeup watermark sleeps before it reads
    /// it anyway ([`reader::POLL_TIMEOUT`] by default; the stop wakes it at once).
    pub idle_wake: std::time::Duration,
    /// With a system-wide target: a command to run while watching (`-a -- COMMAND`).
    pub workload: Option<Vec<OsString>>,
    /// The clock of event times (`-k`; CLOCK_MONOTONIC by default).
    pub clockid: libc::clockid_t,
    /// `-G`: with a system-wide target, only the tasks of this cgroup (its directory).
    pub cgroup: Option<std::path::PathBuf>,
    /// Show tracepoints' `common_*` fields.
    pub common_fields: bool,
    /// Read command lines at each exec ([`crate::perf::exec_watch`]), when it can be opened.
    pub exec_argv: bool,
    /// Where every reader also copies its records as they are (`-o`).
    pub raw: Option<crate::perf::raw_tap::RawTap>,
}

impl MonitorConfig {
    /// A configuration with perfwatch's defaults for everything but the events and target.
    pub fn new(events: Vec<EventSpec>, target: TargetSpec) -> MonitorConfig {
        MonitorConfig {
            events,
            sampling: Sampling::Freq(crate::perf::events::DEFAULT_FREQ),
            target,
            cpus: None,
            mmap_pages: 128,
            context_switch: false,
            channel_capacity: 64,
            idle_wake: reader::POLL_TIMEOUT,
            workload: None,
            clockid: libc::CLOCK_MONOTONIC,
            cgroup: None,
            common_fields: false,
            exec_argv: false,
            raw: None,
        }
    }
}

/// What is being watched, for status lines and summaries.
#[derive(Clone, Debug)]
pub struct MonitorInfo {
    /// The main event: the first of the list that samples (not `dummy`), else the first.
    pub event: EventSpec,
    /// Every event in use, in list order (the event table samples index into).
    pub events: Vec<EventSpec>,
    /// The descriptors their samples carry, in the same order.
    pub descs: Vec<&'static EventDesc>,
    /// Set when a requested `cycles` was replaced by a software clock.
    pub fallback: Option<Fallback>,
    /// The clock of event times: the frontends read this clock to compare with them.
    pub clockid: libc::clockid_t,
    pub sampling: Sampling,
    pub target: String,
    pub cpus: Vec<u32>,
    pub mmap_pages: usize,
    /// Things the user should be told once (fallback, clamped frequency).
    pub notes: Vec<String>,
    /// The events' attributes as opened, with their ids (for `-o`).
    pub attrs: Vec<crate::perf::open::OpenedAttr>,
}

pub struct Monitor {
    pub rx: Receiver<Batch>,
    /// Where the consumer gives the readers' batch buffers back.
    pub pool: BufferPool,
    pub stats: Arc<Stats>,
    pub info: MonitorInfo,
    pub started: Instant,
    /// The stop time T, decided by the first [`Monitor::request_stop`]; the ordering stage
    /// emits everything stamped up to it.
    pub stop_time: Arc<crate::stop::StopTime>,
    stop: Arc<reader::ReaderStop>,
    threads: Vec<JoinHandle<()>>,
    child: Option<PausedChild>,
    child_status: Option<i32>,
    /// The exec watcher, when asked for and it could be opened (ends when dropped).
    pub execs: Option<crate::perf::exec_watch::ExecWatch>,
    /// No `-C`: every CPU was asked for, not only those online at the start.
    every_cpu: bool,
}

impl Monitor {
    /// Open everything, start the readers, and (for a command) let the command run.
    pub fn start(cfg: MonitorConfig) -> Result<Monitor> {
        let online = online_cpus()?;
        let cpus = match &cfg.cpus {
            None => online.clone(),
            Some(list) => {
                for c in list {
                    if !online.contains(c) {
                        bail!(
                            "invalid CPU list '{}': CPU {c} is not online (online CPUs: {})",
                            CpuList(list),
                            CpuList(&online)
                        );
                    }
                }
                list.clone()
            }
        };
        let mut notes = Vec::new();
        let mut sampling = cfg.sampling;
        let mut events = cfg.events.clone();
        if let Some(max) = open::max_sample_rate() {
            let samples = |e: &EventSpec| !e.is_dummy() && !e.is_tracepoint();
            if let Sampling::Freq(hz) = sampling {
                if hz > max && events.iter().any(|e| samples(e) && e.sampling.is_none()) {
                    notes.push(format!(
                        "-F {hz} is above kernel.perf_event_max_sample_rate ({max}); using {max} Hz"
                    ));
                    sampling = Sampling::Freq(max);
                }
            }
            for e in events.iter_mut().filter(|e| samples(e)) {
                if let Some(Sampling::Freq(hz)) = e.sampling {
                    if hz > max {
                        notes.push(format!(
                            "{}: freq={hz} is above kernel.perf_event_max_sample_rate ({max}); using {max} Hz",
                            e.name
                        ));
                        e.sampling = Some(Sampling::Freq(max));
                    }
                }
            }
        }
        if events.iter().any(|e| e.call_graph.is_some()) {
            let asked = events.iter().filter_map(|e| e.call_graph).max();
            let (max, note) =
                crate::callchain::resolve_max_stack(asked, crate::callchain::kernel_max_stack());
            notes.extend(note);
            for e in events.iter_mut().filter(|e| e.call_graph.is_some()) {
                e.call_graph = e.call_graph.map(|n| n.min(max));
            }
        }
        if cfg.cgroup.is_some() && cfg.target != TargetSpec::System {
            bail!(
                "-G/--cgroup watches a cgroup on every CPU: it cannot be combined with -p, -t or a command without -a"
            );
        }
        for p in match &cfg.target {
            TargetSpec::Pids(p) | TargetSpec::Tids(p) => p.as_slice(),
            _ => &[],
        } {
            if !std::path::Path::new(&format!("/proc/{p}")).exists() {
                bail!("no such process: '{p}'");
            }
        }

        let mut child = match (&cfg.target, &cfg.workload) {
            (TargetSpec::Command(argv), _) => Some(PausedChild::spawn(argv)?),
            (TargetSpec::System, Some(argv)) if !argv.is_empty() => Some(PausedChild::spawn(argv)?),
            _ => None,
        };
        let target = match &cfg.target {
            TargetSpec::System => Target::System,
            TargetSpec::Pids(p) => Target::Pids(p.clone()),
            TargetSpec::Tids(t) => Target::Tids(t.clone()),
            TargetSpec::Command(_) => {
                let c = child.as_ref().context("command not started")?;
                Target::Command {
                    pid: c.pid(),
                    argv0: c.display().to_string(),
                }
            }
        };
        let open_cfg = OpenConfig {
            events,
            sampling,
            target: target.clone(),
            cpus: cpus.clone(),
            mmap_pages: cfg.mmap_pages,
            context_switch: cfg.context_switch,
            clockid: cfg.clockid,
            cgroup: cfg.cgroup.clone(),
            common_fields: cfg.common_fields,
        };
        // Before the command runs, so that its first exec is seen too; best effort. And before
        // the user's events: the kernel runs a tracepoint's perf events newest first, so the
        // watcher's stack copy (tens of microseconds) then comes after the user's
        // `sched:sched_process_exec` has taken its time stamp, not before it.
        let execs = cfg.exec_argv.then(|| {
            crate::perf::exec_watch::ExecWatch::start(crate::perf::exec_watch::WatchConfig {
                target: target.clone(),
                cpus: cpus.clone(),
                clockid: cfg.clockid,
                cgroup: cfg.cgroup.clone(),
                proc_root: "/proc".into(),
            })
            .ok()
        });
        let opened = open::open(&open_cfg)?;
        for f in &opened.fallbacks {
            notes.push(f.to_string());
        }
        let stats = Arc::new(Stats::new(&cpus));
        let (tx, rx) = bounded(cfg.channel_capacity.max(1));
        let pool = BufferPool::new(cfg.channel_capacity.max(1));
        let stop = Arc::new(reader::ReaderStop::new());
        if !matches!(target, Target::Command { .. }) {
            open::enable(&opened.rings).context("cannot enable the perf events")?;
        }
        let reopen = reopen(&open_cfg, &opened.events, cfg.raw.is_some());
        let mut threads = Vec::with_capacity(opened.rings.len());
        for mut ring in opened.rings {
            ring.raw = cfg.raw.clone();
            let h = reader::spawn(
                ring,
                tx.clone(),
                pool.clone(),
                stop.clone(),
                stats.clone(),
                cfg.idle_wake,
                Some(reopen.clone()),
            )
            .context("cannot start a reader thread")?;
            threads.push(h);
        }
        drop(tx);
        if let Some(c) = child.as_mut() {
            if let Err(e) = c.go() {
                stop.request();
                drop(rx);
                for t in threads {
                    let _ = t.join();
                }
                return Err(e.into());
            }
        }
        let all_cpus = cfg.cpus.is_none() || cpus == online;
        Ok(Monitor {
            rx,
            pool,
            stats,
            info: MonitorInfo {
                event: opened
                    .events
                    .iter()
                    .find(|e| !e.is_dummy())
                    .unwrap_or(&opened.events[0])
                    .clone(),
                events: opened.events,
                descs: opened.descs,
                attrs: opened.attrs,
                fallback: opened.fallbacks.into_iter().next(),
                clockid: cfg.clockid,
                sampling,
                target: match (&target, child.as_ref()) {
                    (Target::System, Some(c)) => {
                        format!(
                            "{} while '{}' runs (pid {})",
                            target.describe(&cpus, all_cpus),
                            c.display(),
                            c.pid()
                        )
                    }
                    _ => target.describe(&cpus, all_cpus),
                } + &cfg
                    .cgroup
                    .as_ref()
                    .map(|c| {
                        format!(
                            ", cgroup '{}'",
                            crate::text::escape(c.as_os_str().as_encoded_bytes())
                        )
                    })
                    .unwrap_or_default(),
                cpus,
                mmap_pages: cfg.mmap_pages,
                notes,
            },
            started: Instant::now(),
            stop_time: Arc::default(),
            stop,
            threads,
            child,
            child_status: None,
            execs: execs.flatten(),
            every_cpu: cfg.cpus.is_none(),
        })
    }

    /// CPUs online now that were not when the events were opened (without `-C`): their
    /// records were never read, which the summary says.
    pub(crate) fn came_online(&self) -> Vec<u32> {
        if !self.every_cpu {
            return Vec::new();
        }
        let now = online_cpus().unwrap_or_default();
        now.into_iter()
            .filter(|c| !self.info.cpus.contains(c))
            .collect()
    }

    /// Decide the stop time T (the first call; on the events' clock), then ask the readers
    /// to disable their events, drain their rings (everything up to T is in them by then)
    /// and end. They send a last batch with `end` set. Returns T.
    pub fn request_stop(&self) -> u64 {
        let t = self
            .stop_time
            .decide(crate::clock::clock_ns(self.info.clockid));
        self.stop.request();
        t
    }

    pub fn stop_requested(&self) -> bool {
        self.stop.requested()
    }

    /// The command's exit status once it has exited (`-- COMMAND` only).
    pub fn command_exit(&mut self) -> Option<i32> {
        if self.child_status.is_none() {
            self.child_status = self.child.as_mut().and_then(|c| c.try_wait());
        }
        self.child_status
    }

    pub(crate) fn has_command(&self) -> bool {
        self.child.is_some()
    }

    /// The `-- COMMAND`'s pid, if there is one.
    pub(crate) fn command_pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.pid())
    }

    /// Stop the command (perfwatch is stopping for another reason) and wait for it.
    pub(crate) fn end_command(&mut self, sig: libc::c_int) -> Option<i32> {
        if let Some(status) = self.command_exit() {
            return Some(status);
        }
        let c = self.child.as_mut()?;
        c.signal(sig);
        self.child_status = c.wait();
        self.child_status
    }

    /// Wait for the reader threads to end (after [`Monitor::request_stop`]).
    pub fn join(&mut self) {
        self.request_stop();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// How a reader opens its CPU's events again when the CPU comes back online: the same
/// events (after any fallback) on that CPU alone, enabled. A system-wide run's only: a task's
/// inherited events follow the tasks it forks from the moment they are opened, so opened
/// again they would miss those it forked before. Not with `-o`, whose file names the events'
/// ids once. Where it cannot, the reader says why.
fn reopen(cfg: &OpenConfig, events: &[EventSpec], writing: bool) -> reader::Reopen {
    let system = matches!(cfg.target, Target::System);
    let cfg = OpenConfig {
        events: events.to_vec(),
        cpus: Vec::new(),
        ..cfg.clone()
    };
    Arc::new(move |cpu| {
        if !system {
            return Err(
                "a task's events follow the tasks it forks from their start, and \
                        opened again would miss those"
                    .into(),
            );
        }
        if writing {
            return Err("-o writes each event's ids once, at the start".into());
        }
        let opened = open::open(&OpenConfig {
            cpus: vec![cpu],
            ..cfg.clone()
        })
        .map_err(|e| e.to_string())?;
        let ring = opened.rings.into_iter().next().ok_or("nothing opened")?;
        open::enable(std::slice::from_ref(&ring)).map_err(|e| e.to_string())?;
        Ok(ring)
    })
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.join();
    }
}

impl crate::stop::Watched for Monitor {
    fn reader_failed(&self) -> bool {
        self.stats.failure().is_some()
    }

    fn command_exit(&mut self) -> Option<i32> {
        Monitor::command_exit(self)
    }

    fn request_stop(&self) {
        Monitor::request_stop(self);
    }
}
