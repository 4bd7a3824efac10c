//! The end of a run that ended by itself (`--duration`, the command's exit, every target
//! gone), with scripts: they get every event before `trace_end()`, however long they take.
//!
//! At a stop by a signal (or `q`) the pipeline waits a bounded grace for the script stage,
//! and what the scripts still hold is counted and said ([`Pipeline::finish`]). At a natural
//! end it tells the stage so ([`StageProgress::natural_end`]): the stage then hands every
//! event to the scripts, waiting for room rather than passing chunks around them, and gives
//! a slow handler all the time it needs; the pipeline waits for everything to come back,
//! saying how far the scripts are every second after the first two. A signal during that
//! wait cuts it short, and the rest is counted as at any signal.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{RecvTimeoutError, TrySendError};

use super::Pipeline;

/// What the script stage and the pipeline tell each other at the end of a run.
#[derive(Debug, Default)]
pub struct StageProgress {
    /// Events the stage took for the scripts (into their queue or around it).
    pub taken: AtomicU64,
    /// Of those, events the scripts are done with (ran on, or passed around them).
    pub done: AtomicU64,
    /// The run ended by itself: give the scripts every event, however long it takes. Set by
    /// the pipeline at a natural end; cleared when a signal cuts the wait short.
    pub natural_end: AtomicBool,
}

impl StageProgress {
    pub fn natural_end(&self) -> bool {
        self.natural_end.load(Ordering::Acquire)
    }
}

/// How long a natural end waits before it says how far the scripts are, and then how often.
pub(crate) const PROGRESS_AFTER: Duration = Duration::from_secs(2);
const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// How long a wait cut short by a signal still gives the stage to hand back what it has.
const CUT_WAIT: Duration = Duration::from_secs(1);

impl Pipeline {
    /// The one shutdown of every frontend once its loop has stopped: the source is asked to
    /// stop (the stop time is decided now), then the readers' last records are taken within
    /// [`crate::stop::SHUTDOWN_GRACE`]; at a `natural` end the scripts first get every event
    /// ([`Pipeline::finish_natural`], with `cut` and `say` as there), else what they hold
    /// is counted ([`Pipeline::finish`]).
    pub(crate) fn shut_down(
        &mut self,
        source: &dyn crate::stop::Watched,
        natural: bool,
        cut: &dyn Fn() -> bool,
        say: &mut dyn FnMut(String),
    ) {
        source.request_stop();
        if natural {
            self.finish_natural(crate::stop::SHUTDOWN_GRACE, cut, say);
        } else {
            self.finish(crate::stop::SHUTDOWN_GRACE);
        }
    }

    /// The scripts get every event from the start, and the source waits for them: for a
    /// source that is finished data (a recording), where nothing is lost by waiting, and a
    /// run that is to end by itself anyway. A signal still cuts it short.
    pub(crate) fn scripts_get_everything(&self) {
        if let Some(link) = &self.stage {
            link.progress.natural_end.store(true, Ordering::Release);
        }
    }

    /// [`Pipeline::finish`] at a natural end: take the readers' last batches (within
    /// `grace`), then give the script stage everything and wait until it has handed it all
    /// back, for as long as it takes, unless `cut()` (a signal) says to stop waiting. `say`
    /// gets a progress line every second once the wait is past [`PROGRESS_AFTER`]. Without
    /// a script stage, the same as [`Pipeline::finish`].
    pub(crate) fn finish_natural(
        &mut self,
        grace: Duration,
        cut: &dyn Fn() -> bool,
        say: &mut dyn FnMut(String),
    ) {
        if let Some(link) = &self.stage {
            link.progress.natural_end.store(true, Ordering::Release);
        }
        self.finish_readers(grace);
        let Some(link) = self.stage.take() else {
            return;
        };
        let started = Instant::now();
        let mut next_say = started + PROGRESS_AFTER;
        let mut to = Some(link.to);
        let cut_short = loop {
            if cut() {
                break true;
            }
            if let Some(tx) = &to {
                while let Some(c) = self.to_stage.pop_front() {
                    match tx.try_send(c) {
                        Ok(()) => {}
                        Err(TrySendError::Full(c)) => {
                            self.to_stage.push_front(c);
                            break;
                        }
                        Err(TrySendError::Disconnected(_)) => self.to_stage.clear(),
                    }
                }
                if self.to_stage.is_empty() {
                    // Everything is in: closing the input tells the stage the stream ended.
                    to = None;
                }
            }
            match link.from.recv_timeout(Duration::from_millis(50)) {
                Ok(c) => self.take_staged(Ok(c)),
                Err(RecvTimeoutError::Disconnected) => {
                    self.stage_done = true;
                    break false;
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            if Instant::now() >= next_say {
                next_say += PROGRESS_EVERY;
                let p = &link.progress;
                let left: usize = self.to_stage.iter().map(|c| c.events.len()).sum();
                let taken = p.taken.load(Ordering::Relaxed);
                say(format!(
                    "script: {} of {} events handed over; the run has ended, waiting for the \
                     script to see the rest before trace_end() ({:.0} s; stopping perfwatch \
                     again cuts the wait short, and what it did not see is counted)",
                    p.done.load(Ordering::Relaxed),
                    taken + left as u64,
                    started.elapsed().as_secs_f64()
                ));
            }
        };
        if cut_short {
            // From now on as at any signal: the stage gives up on what the scripts hold.
            link.progress.natural_end.store(false, Ordering::Release);
            self.finish_stage_with(to, &link.from, Instant::now() + CUT_WAIT);
        }
    }
}
