//! When a run ends, decided in one place for every frontend.
//!
//! After each turn of its loop a frontend asks [`StopRule::check`]; the first reason that
//! holds, in this order, ends the run: a stop signal, a failed reader, `--duration`, the
//! `-- COMMAND` exiting, every reader having ended (and everything shown). Reasons only a
//! frontend can see (the TUI's `q`, a closed stdout) are the frontend's, in the same enum.
//! The stop decides the stop time T ([`Watched::request_stop`]): every ring is drained up to
//! it, and the output ends there on every CPU. After the stop, every frontend waits the same
//! [`SHUTDOWN_GRACE`] for the readers' last records; at a natural end
//! ([`StopReason::is_natural`]) it also waits for the scripts to see every event, however
//! long that takes, unless a signal (or `q`) cuts the wait short.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long to wait for the readers' (and the script stage's) last records at shutdown.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// The stop time T of a run, in the events' clock: decided once, when the stop is (the
/// monitor's `request_stop`), read by the ordering stage, which emits every record stamped
/// at or before it and none after, so that every CPU's stream ends at the same instant.
/// Records stamped after T (written between the decision and the events' disable) are
/// counted here, and said in the summary.
#[derive(Debug, Default)]
pub struct StopTime {
    at: AtomicU64,
    after: AtomicU64,
}

impl StopTime {
    /// Set T to `now` unless it is already set; returns T.
    pub(crate) fn decide(&self, now: u64) -> u64 {
        match self
            .at
            .compare_exchange(0, now.max(1), Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => now.max(1),
            Err(t) => t,
        }
    }

    /// T, once the stop is decided.
    pub fn get(&self) -> Option<u64> {
        match self.at.load(Ordering::Acquire) {
            0 => None,
            t => Some(t),
        }
    }

    /// Records stamped after T that were not emitted.
    pub fn after(&self) -> u64 {
        self.after.load(Ordering::Relaxed)
    }

    /// What the ordering stage cut so far (see [`OrderingStage::after_stop`]).
    pub(crate) fn set_after(&self, n: u64) {
        self.after.store(n, Ordering::Relaxed);
    }
}

/// Why a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// A signal asked perfwatch to stop (or `q` in the TUI, which counts as SIGINT).
    Signal(i32),
    /// `--duration` elapsed.
    Duration,
    /// The `-- COMMAND` exited with this status.
    CommandExited(i32),
    /// Every monitored task is gone (`-p`/`-t`), or every reader ended.
    TargetsGone,
    /// The reader of stdout went away (`| head`).
    BrokenPipe,
    /// A reader thread failed (see `Stats::failure`).
    ReaderFailed,
    /// The frontend itself panicked.
    Panicked,
}

impl StopReason {
    /// The run ended by itself (`--duration`, the command's exit, every target gone): the
    /// scripts then get every event before `trace_end()`, however long they take.
    pub(crate) fn is_natural(self) -> bool {
        matches!(
            self,
            StopReason::Duration | StopReason::CommandExited(_) | StopReason::TargetsGone
        )
    }
}

/// What the stop decision asks of the running monitor: whether a reader failed, whether the
/// command exited. A test drives a frontend's whole loop with its own.
pub trait Watched {
    /// A reader thread failed (a bug): a blind CPU must not pass for a quiet one.
    fn reader_failed(&self) -> bool;
    /// The `-- COMMAND`'s exit status, once it has exited.
    fn command_exit(&mut self) -> Option<i32>;
    /// Decide the stop time and ask the readers to drain up to it and end.
    fn request_stop(&self);
}

/// The stop rules of a run: where signals are read, and the duration.
pub struct StopRule {
    signal: Box<dyn Fn() -> Option<i32>>,
    duration: Option<Duration>,
    started: Instant,
}

impl StopRule {
    /// `signal` says which stop signal arrived, if any; `duration` counts from now.
    pub fn new(signal: impl Fn() -> Option<i32> + 'static, duration: Option<Duration>) -> StopRule {
        StopRule {
            signal: Box::new(signal),
            duration,
            started: Instant::now(),
        }
    }

    /// The signal that asked perfwatch to stop, if any (for frontends that look at it
    /// between other work, such as a TUI whose terminal failed).
    pub fn signal(&self) -> Option<i32> {
        (self.signal)()
    }

    /// How long a loop may sleep before it must look again: `upper`, or less when
    /// `--duration` ends sooner.
    pub(crate) fn wait_at_most(&self, upper: Duration) -> Duration {
        match self.duration {
            Some(d) => upper.min(d.saturating_sub(self.started.elapsed())),
            None => upper,
        }
    }

    /// The reason to stop now, if any. `all_ended`: every reader ended and everything it
    /// sent has been shown.
    pub fn check(&self, watched: &mut dyn Watched, all_ended: bool) -> Option<StopReason> {
        if let Some(sig) = (self.signal)() {
            return Some(StopReason::Signal(sig));
        }
        if watched.reader_failed() {
            return Some(StopReason::ReaderFailed);
        }
        crate::debug_panic_point("frontend");
        if self.duration.is_some_and(|d| self.started.elapsed() >= d) {
            return Some(StopReason::Duration);
        }
        if let Some(status) = watched.command_exit() {
            return Some(StopReason::CommandExited(status));
        }
        all_ended.then_some(StopReason::TargetsGone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    #[derive(Default)]
    struct Fake {
        failed: bool,
        exit: Option<i32>,
    }

    impl Watched for Fake {
        fn reader_failed(&self) -> bool {
            self.failed
        }
        fn command_exit(&mut self) -> Option<i32> {
            self.exit
        }
        fn request_stop(&self) {}
    }

    #[test]
    fn reasons_come_in_order() {
        let sig = Rc::new(Cell::new(None));
        let s = sig.clone();
        let rule = StopRule::new(move || s.get(), Some(Duration::ZERO));
        let mut w = Fake {
            failed: true,
            exit: Some(3),
        };
        sig.set(Some(15));
        assert_eq!(rule.check(&mut w, true), Some(StopReason::Signal(15)));
        sig.set(None);
        assert_eq!(rule.check(&mut w, true), Some(StopReason::ReaderFailed));
        w.failed = false;
        assert_eq!(rule.check(&mut w, true), Some(StopReason::Duration));
        let rule = StopRule::new(|| None, None);
        assert_eq!(rule.check(&mut w, true), Some(StopReason::CommandExited(3)));
        w.exit = None;
        assert_eq!(rule.check(&mut w, true), Some(StopReason::TargetsGone));
        assert_eq!(rule.check(&mut w, false), None);
        let rule = StopRule::new(|| None, Some(Duration::from_secs(3600)));
        assert_eq!(rule.check(&mut w, false), None);
    }
}
