//! The one owner of a run's lifecycle, live or a recording. [`Run`] holds the source (the
//! monitor, or the recording being read), the pipeline over it, the counters the pipeline
//! writes, the scripts, the taps (the agent), `--folded` and the stop rule. A frontend drives
//! the pipeline over the source until a stop and returns an [`Outcome`] (why it stopped, the
//! folded stacks it fed); [`Run::end`] is the one ending for every source and frontend:
//! the folded stacks written, stdout drained, the scripts and the taps finished, the source
//! stopped (the command too), the summary, and the exit status.
//!
//! What a source changes in the ending is said in [`Source`]'s methods and nowhere else:
//! how it stops, the lines it adds to the summary, what its failure means for the status.

use std::cell::RefCell;
use std::io::Write;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Result;

use crate::frontend::Outcome;
use crate::frontend::plain::{self, PlainOptions};
use crate::frontend::tui::TuiOptions;
use crate::monitor::Monitor;
use crate::output::StdoutQueue;
use crate::pipeline::Pipeline;
use crate::record_file::Recording;
use crate::signals::{StopSignals, exit_code_for};
use crate::stop::{StopReason, StopRule, Watched};

/// Exit status after an internal error (a bug), as Rust uses for a panic.
pub(crate) const EXIT_INTERNAL: i32 = 101;

/// Exit status of a run that lost output it should have written.
pub(crate) const EXIT_OUTPUT_LOST: i32 = 1;

/// The counters the pipeline writes and the summary reads: made by the run, handed to the
/// pipeline (and to the taps that publish them).
#[derive(Clone, Default)]
pub(crate) struct Counters {
    /// Records the ordering stage let out of time order.
    pub late: Arc<AtomicU64>,
    /// Records of perfwatch itself that the pipeline hid (without `--show-self`).
    pub hidden: Arc<AtomicU64>,
    /// How the `--call-graph dwarf` chains ended (the pipeline's unwind step writes it).
    pub unwound: Arc<std::sync::Mutex<crate::unwind::Stats>>,
}

/// The recording being read now: a backward jump in the TUI's replay replaces it with a new
/// read of the file, while the loop watches it and reads its counters.
#[derive(Clone)]
pub(crate) struct Current(pub Rc<RefCell<Recording>>);

impl Current {
    pub fn new(rec: Recording) -> Current {
        Current(Rc::new(RefCell::new(rec)))
    }
}

/// Where a run's events come from.
pub(crate) enum Source {
    /// The live rings (and the command, if any).
    Live(Box<Monitor>),
    /// A recording (`-i`).
    Recording(Current),
}

impl Watched for Source {
    fn reader_failed(&self) -> bool {
        match self {
            Source::Live(mon) => mon.reader_failed(),
            Source::Recording(_) => false,
        }
    }

    fn command_exit(&mut self) -> Option<i32> {
        match self {
            Source::Live(mon) => Watched::command_exit(&mut **mon),
            Source::Recording(_) => None,
        }
    }

    fn request_stop(&self) {
        match self {
            Source::Live(mon) => Watched::request_stop(&**mon),
            Source::Recording(rec) => Watched::request_stop(&*rec.0.borrow()),
        }
    }
}

impl Source {
    /// The counters of what was read.
    pub fn totals(&self) -> crate::stats::Totals {
        match self {
            Source::Live(mon) => mon.stats.snapshot(),
            Source::Recording(rec) => rec.0.borrow().stats.snapshot(),
        }
    }

    /// Stop reading. Live: the command is stopped if perfwatch stopped first, the readers
    /// joined, and a failed reader becomes the reason (whatever the frontend saw: a failed
    /// reader also ends its channel; it records its failure after that, so only now is it
    /// sure to be seen). Returns the reason and the command's status.
    fn stop(&mut self, reason: Option<StopReason>) -> (Option<StopReason>, Option<i32>) {
        match self {
            Source::Live(mon) => {
                let Some(reason) = reason else {
                    return (None, None);
                };
                let status = match reason {
                    StopReason::CommandExited(s) => Some(s),
                    _ if mon.has_command() => mon.end_command(libc::SIGTERM),
                    _ => None,
                };
                mon.join();
                let reason = match mon.stats.failure() {
                    Some(_) if reason != StopReason::Panicked => StopReason::ReaderFailed,
                    _ => reason,
                };
                (Some(reason), status)
            }
            Source::Recording(rec) => {
                // The frontend already waited its grace for the last batch; the copy of
                // `-o`, if any, is finished on the reading thread: waited for longer.
                let mut rec = rec.0.borrow_mut();
                let grace = if rec.counts.copying { 10_000 } else { 200 };
                rec.join(std::time::Duration::from_millis(grace));
                (reason, None)
            }
        }
    }

    /// The summary's first lines: why the source stopped early, if it says. True when it
    /// failed (a recording that could not be read to its end).
    fn why(&self, reason: StopReason, err: &mut Vec<u8>) -> bool {
        match self {
            Source::Live(mon) => {
                match reason {
                    StopReason::TargetsGone if !mon.has_command() => {
                        let _ = writeln!(err, "perfwatch: every monitored task has exited");
                    }
                    StopReason::ReaderFailed => {
                        if let Some((cpu, msg)) = mon.stats.failure() {
                            let _ = writeln!(
                                err,
                                "perfwatch: error: the reader of CPU {cpu} failed ({}); stopped. This is a bug: please report it.",
                                crate::text::escape(msg.as_bytes())
                            );
                        }
                    }
                    _ => {}
                }
                false
            }
            Source::Recording(rec) => {
                let rec = rec.0.borrow();
                let failure = rec.counts.failure.get();
                if let Some(why) = failure {
                    let _ = writeln!(
                        err,
                        "perfwatch: error: {}: {why}; the records before it were shown",
                        rec.info.input.display()
                    );
                }
                let copied = rec.counts.copied.get();
                if rec.counts.copying && copied.is_none() {
                    let _ = writeln!(
                        err,
                        "perfwatch: error: the recording's copy (-o) was not finished"
                    );
                }
                failure.is_some() || (rec.counts.copying && !matches!(copied, Some(Ok(_))))
            }
        }
    }

    /// The summary's counters: the source's own, then the pipeline's (`counters`).
    fn counters(&self, counters: &Counters, err: &mut Vec<u8>) {
        let (started, late_why) = match self {
            Source::Live(mon) => (
                mon.started,
                "a CPU's reader fell behind the ordering window",
            ),
            Source::Recording(rec) => (
                rec.0.borrow().started,
                "the recording's rounds overlap more than perf promises",
            ),
        };
        let _ = err.write_all(self.totals().summary(started.elapsed()).as_bytes());
        if let Source::Live(mon) = self {
            for cpu in mon.came_online() {
                let _ = writeln!(
                    err,
                    "  cpu {cpu}: came online after the start: not watched (the events are opened on the CPUs online at the start)"
                );
            }
        }
        if let Source::Recording(rec) = self {
            for line in rec.0.borrow().counts.summary() {
                let _ = writeln!(err, "{line}");
            }
        }
        let hidden = counters.hidden.load(Ordering::Relaxed);
        if hidden > 0 {
            let _ = writeln!(
                err,
                "  hidden: {hidden} records of perfwatch itself (--show-self shows them)"
            );
        }
        if let Ok(u) = counters.unwound.lock()
            && u.chains() > 0
        {
            let _ = write!(
                err,
                "  dwarf unwinding: {} chains, {} user frames; ended by",
                u.chains(),
                u.frames
            );
            let mut sep = " ";
            for end in crate::unwind::End::ALL {
                let n = u.count(end);
                if n > 0 {
                    let _ = write!(err, "{sep}{}: {n}", end.name());
                    sep = ", ";
                }
            }
            let _ = writeln!(
                err,
                " ({} binaries' unwind tables, {} KiB)",
                u.binaries,
                u.bytes / 1024
            );
        }
        let late = counters.late.load(Ordering::Relaxed);
        if late > 0 {
            let _ = writeln!(
                err,
                "  out of time order: {late} records came after newer ones had gone out ({late_why})"
            );
        }
        if let Source::Live(mon) = self
            && let Some(t) = mon.stop_time.get()
        {
            let after = mon.stop_time.after();
            let _ = write!(
                err,
                "  stopped at {}.{:09} s ({}): every CPU's records up to then are above",
                t / 1_000_000_000,
                t % 1_000_000_000,
                crate::cli::clock_name(mon.info.clockid)
            );
            if after > 0 {
                let _ = write!(
                    err,
                    "; {after} records stamped later (before the events were disabled) were left out"
                );
            }
            let _ = writeln!(err);
        }
    }

    /// The exit status before lost output: a stop signal's, the command's own, an internal
    /// error's, 1 when the source failed, else 0.
    fn exit_code(&self, reason: StopReason, failed: bool, command: Option<i32>) -> i32 {
        let has_command = matches!(self, Source::Live(mon) if mon.has_command());
        match reason {
            StopReason::Signal(sig) => exit_code_for(sig),
            StopReason::CommandExited(s) => s,
            StopReason::ReaderFailed | StopReason::Panicked => EXIT_INTERNAL,
            _ if failed => 1,
            _ => command
                .filter(|_| has_command && reason == StopReason::TargetsGone)
                .unwrap_or(0),
        }
    }
}

/// What a run holds besides its source and its pipeline, made before either: the taps, the
/// counters, `--folded` (a path it cannot use stops perfwatch before it starts), the stop
/// rule and the notes.
pub(crate) struct Setup {
    pub agent: crate::agent::Agent,
    pub counters: Counters,
    /// `--folded`: handed to the frontend, which hands it back in its outcome.
    pub folding: Option<crate::folded::Folding>,
    pub signals: StopSignals,
    pub stop: StopRule,
    /// What the user is told about the source (a fallback event, the recording's header):
    /// before the lines, or after the screen is restored (they were in its status bar).
    pub notes: Vec<String>,
    /// The TUI's options but `--folded` (the run hands that over).
    pub tui: TuiOptions,
}

impl Setup {
    /// The start of a run: `signals` and `--duration` make its stop rule.
    pub fn new(
        agent: crate::agent::Agent,
        folding: Option<crate::folded::Folding>,
        signals: StopSignals,
        duration: Option<std::time::Duration>,
        tui: TuiOptions,
    ) -> Setup {
        let stop = {
            let signals = signals.clone();
            StopRule::new(move || signals.pending(), duration)
        };
        Setup {
            agent,
            counters: Counters::default(),
            folding,
            signals,
            stop,
            notes: Vec::new(),
            tui,
        }
    }

    /// The run of `source` through `pipe` (the scripts attached).
    pub fn run(
        self,
        source: Source,
        pipe: Pipeline,
        scripts: crate::script::RunningScripts,
    ) -> Run {
        Run {
            source,
            pipe,
            scripts,
            setup: self,
        }
    }
}

/// A run, from its source's start to its exit status.
pub(crate) struct Run {
    source: Source,
    pipe: Pipeline,
    scripts: crate::script::RunningScripts,
    setup: Setup,
}

impl Run {
    /// Write lines (`--plain`, `--json`, `--format perf`, or nothing but the taps) to `out`
    /// until a stop, then end.
    pub fn lines(mut self, mut opts: PlainOptions, mut out: StdoutQueue) -> Result<i32> {
        for note in &self.setup.notes {
            crate::output::stderr_bounded(format!("perfwatch: {note}\n").as_bytes());
        }
        opts.folded = self.setup.folding.take();
        let (pipe, source, stop) = (&mut self.pipe, &mut self.source, &self.setup.stop);
        let outcome =
            catch_panic(|| plain::run(pipe, source, stop, opts, &mut out).map_err(Into::into));
        self.end(outcome, Some(out))
    }

    /// Run the TUI (`screen` calls it with the pipeline, the source, the stop rule and its
    /// options, the folded stacks to feed in them) until a stop, then end on the normal
    /// screen.
    pub fn screen(
        mut self,
        screen: impl FnOnce(&mut Pipeline, &mut Source, &StopRule, TuiOptions) -> Result<Outcome>,
    ) -> Result<i32> {
        let opts = TuiOptions {
            folded: self.setup.folding.take(),
            ..std::mem::take(&mut self.setup.tui)
        };
        let (pipe, source, stop) = (&mut self.pipe, &mut self.source, &self.setup.stop);
        // A panic unwinds through the TUI's terminal guard, which restores the terminal; the
        // summary is still printed.
        let outcome = catch_panic(|| screen(pipe, source, stop, opts));
        // The terminal is restored now: the notes again, with the pipeline's.
        for note in self.setup.notes.iter().chain(self.pipe.all_notes()) {
            crate::output::stderr_bounded(format!("perfwatch: {note}\n").as_bytes());
        }
        self.end(outcome, None)
    }

    /// The one ending: folded stacks (onto `out`, the queue the records would have gone
    /// through, for the line frontends), stdout drained, the scripts and the taps finished,
    /// the source stopped, the summary, the exit status.
    fn end(mut self, outcome: Result<Outcome>, out: Option<StdoutQueue>) -> Result<i32> {
        let (reason, mut folded) = match outcome {
            Ok(o) => (Ok(o.reason), o.folded),
            Err(e) => (Err(e), None),
        };
        let stopped = reason.as_ref().ok().copied();
        let mut lost = false;
        let mut broken = false;
        let mut stdout_note = None;
        match out {
            Some(mut out) => {
                let folded_ok = write_folded(folded.as_mut(), stopped, &mut out);
                let flushed = self.drain(out, stopped);
                broken = matches!(flushed.error, Some((std::io::ErrorKind::BrokenPipe, _)));
                if flushed.unwritten > 0 && !broken {
                    lost = true;
                    stdout_note = Some(self.unwritten(&flushed, stopped));
                }
                lost |= !folded_ok;
            }
            None => lost |= !write_folded(folded.as_mut(), stopped, &mut std::io::sink()),
        }
        let scripts = self.scripts.finish();
        scripts.print();
        lost |= scripts.output_lost;
        lost |= !self.setup.agent.finish();
        if let Some(note) = stdout_note {
            crate::output::stderr_bounded(note.as_bytes());
        }
        let reason = match reason {
            // The reader went away meanwhile: as quiet as a closed pipe seen by the loop.
            Ok(_) if broken => Ok(StopReason::BrokenPipe),
            r => r,
        };
        let (stopped, command) = self.source.stop(reason.as_ref().ok().copied());
        let reason = stopped.unwrap_or(reason?);
        if reason == StopReason::BrokenPipe {
            // stdout's reader went away: no summary; lost output still makes the status 1.
            return Ok(with_lost_output(0, lost));
        }
        // Said with a bounded wait: a stderr nobody reads must not keep perfwatch from exiting.
        let mut err = Vec::new();
        let failed = self.source.why(reason, &mut err);
        if reason == StopReason::Panicked {
            let _ = writeln!(
                err,
                "perfwatch: error: internal error (see above); stopped. This is a bug: please report it."
            );
        }
        self.source.counters(&self.setup.counters, &mut err);
        crate::output::stderr_bounded(&err);
        let code = self.source.exit_code(reason, failed, command);
        Ok(with_lost_output(code, lost))
    }

    /// stdout's queue finished with a bounded wait for a reader that stopped reading: after
    /// a signal, a second; at a natural end, for as long as the reader keeps reading (a slow
    /// `| jq` gets everything), giving up after FINISH_IDLE without progress or at a signal.
    /// The summary and the exit status come within a second or two of the stop whatever
    /// stdout does.
    fn drain(&self, out: StdoutQueue, reason: Option<StopReason>) -> crate::output::Flushed {
        let cut = || self.setup.signals.pending().is_some();
        out.finish(if natural_end(reason) {
            crate::output::FinishWait::WhileWriting {
                idle: crate::output::FINISH_IDLE,
                cut: &cut,
            }
        } else {
            crate::output::FinishWait::AtMost(crate::output::FINISH_WAIT)
        })
    }

    /// What to say of the bytes stdout did not take.
    fn unwritten(&self, flushed: &crate::output::Flushed, reason: Option<StopReason>) -> String {
        format!(
            "perfwatch: {} bytes of output were not written: {}\n",
            flushed.unwritten,
            match &flushed.error {
                Some((_, e)) => format!("stdout failed ({e})"),
                None if natural_end(reason) && self.setup.signals.pending().is_none() => format!(
                    "stdout did not take them (nothing read for {} s after the end)",
                    crate::output::FINISH_IDLE.as_secs()
                ),
                None => format!(
                    "stdout did not take them within {} s of the signal",
                    crate::output::FINISH_WAIT.as_secs()
                ),
            }
        )
    }
}

/// The run ended by itself (not by a signal or an error): stdout is waited for while its
/// reader keeps reading.
fn natural_end(reason: Option<StopReason>) -> bool {
    !matches!(reason, Some(StopReason::Signal(_)) | None)
}

/// Run a frontend; a panic in it becomes [`StopReason::Panicked`] (the panic hook has
/// already printed it), so that perfwatch still stops the command and prints the summary.
fn catch_panic(f: impl FnOnce() -> Result<Outcome>) -> Result<Outcome> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(Ok(Outcome {
        reason: StopReason::Panicked,
        folded: None,
    }))
}

/// Write the folded stacks at the end of a run (not after a panic, nor onto a closed stdout):
/// to their file, or to `stdout` (the queue the records would have gone through); say where
/// they went. False when they could not be written.
fn write_folded(
    folding: Option<&mut crate::folded::Folding>,
    reason: Option<StopReason>,
    stdout: &mut dyn Write,
) -> bool {
    let Some(f) = folding else {
        return true;
    };
    match reason {
        None | Some(StopReason::Panicked) => return true,
        Some(StopReason::BrokenPipe) if f.replaces_records() => return true,
        _ => {}
    }
    let said = match f.finish_named(stdout) {
        Ok(line) => line,
        Err(e) => format!("error: {e:#}"),
    };
    if !said.is_empty() {
        crate::output::stderr_bounded(format!("perfwatch: {said}\n").as_bytes());
    }
    !said.starts_with("error: ")
}

/// The exit status when output was lost (a write error on `--script-output`): a run that
/// would have ended with 0 ends with [`EXIT_OUTPUT_LOST`] instead; a status that already says
/// something (a signal, the command's own) is kept.
pub(crate) fn with_lost_output(code: i32, lost: bool) -> i32 {
    if lost && code == 0 {
        EXIT_OUTPUT_LOST
    } else {
        code
    }
}
