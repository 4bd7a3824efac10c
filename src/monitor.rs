//! The running monitor: the opened events, the reader threads, the started command, and the
//! channel of batches the frontends consume. Frontends (plain, TUI) drive it; it prints
//! nothing itself: what a user should be told at start-up is in [`MonitorInfo::notes`].

use std::ffi::OsString;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use crossbeam_channel::{Receiver, bounded};

use crate::command::PausedChild;
use crate::perf::cpus::{CpuList, online_cpus};
use crate::perf::events::{EventSpec, Sampling};
use crate::perf::open::{self, Fallback, OpenConfig, Target};
use crate::perf::reader::{self, Batch};
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
    pub event: EventSpec,
    pub sampling: Sampling,
    pub target: TargetSpec,
    /// `-C`: restrict to these CPUs (validated against the online list here).
    pub cpus: Option<Vec<u32>>,
    pub mmap_pages: usize,
    pub context_switch: bool,
    /// Batches the channel holds before readers wait.
    pub channel_capacity: usize,
    /// With a system-wide target: a command to run while watching (`-a -- COMMAND`).
    pub workload: Option<Vec<OsString>>,
}

/// What is being watched, for status lines and summaries.
#[derive(Clone, Debug)]
pub struct MonitorInfo {
    /// The event in use.
    pub event: EventSpec,
    /// Set when the requested hardware event was replaced by a software clock.
    pub fallback: Option<Fallback>,
    pub sampling: Sampling,
    pub target: String,
    pub cpus: Vec<u32>,
    pub mmap_pages: usize,
    /// Things the user should be told once (fallback, clamped frequency).
    pub notes: Vec<String>,
}

pub struct Monitor {
    pub rx: Receiver<Batch>,
    pub stats: Arc<Stats>,
    pub info: MonitorInfo,
    pub started: Instant,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    child: Option<PausedChild>,
    child_status: Option<i32>,
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
        if let (Sampling::Freq(hz), Some(max)) = (sampling, open::max_sample_rate()) {
            if hz > max && !cfg.event.is_dummy() && !cfg.event.is_tracepoint() {
                notes.push(format!(
                    "-F {hz} is above kernel.perf_event_max_sample_rate ({max}); using {max} Hz"
                ));
                sampling = Sampling::Freq(max);
            }
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
            event: cfg.event.clone(),
            sampling,
            target: target.clone(),
            cpus: cpus.clone(),
            mmap_pages: cfg.mmap_pages,
            context_switch: cfg.context_switch,
        };
        let opened = open::open(&open_cfg)?;
        if let Some(f) = &opened.fallback {
            notes.push(f.to_string());
        }
        let stats = Arc::new(Stats::new(&cpus));
        let (tx, rx) = bounded(cfg.channel_capacity.max(1));
        let stop = Arc::new(AtomicBool::new(false));
        if !matches!(target, Target::Command { .. }) {
            open::enable(&opened.rings).context("cannot enable the perf events")?;
        }
        let mut threads = Vec::with_capacity(opened.rings.len());
        for ring in opened.rings {
            let h = reader::spawn(ring, tx.clone(), stop.clone(), stats.clone())
                .context("cannot start a reader thread")?;
            threads.push(h);
        }
        drop(tx);
        if let Some(c) = child.as_mut() {
            if let Err(e) = c.go() {
                stop.store(true, Ordering::Release);
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
            stats,
            info: MonitorInfo {
                event: opened.event,
                fallback: opened.fallback,
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
                },
                cpus,
                mmap_pages: cfg.mmap_pages,
                notes,
            },
            started: Instant::now(),
            stop,
            threads,
            child,
            child_status: None,
        })
    }

    /// Ask the readers to drain once more and end. They send a last batch with `end` set.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Release);
    }

    pub fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// The command's exit status once it has exited (`-- COMMAND` only).
    pub fn command_exit(&mut self) -> Option<i32> {
        if self.child_status.is_none() {
            self.child_status = self.child.as_mut().and_then(|c| c.try_wait());
        }
        self.child_status
    }

    pub fn has_command(&self) -> bool {
        self.child.is_some()
    }

    /// Stop the command (perfwatch is stopping for another reason) and wait for it.
    pub fn end_command(&mut self, sig: libc::c_int) -> Option<i32> {
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

impl Drop for Monitor {
    fn drop(&mut self) {
        self.join();
    }
}
