//! What the script stage's threads share: the pump, the Python worker and the handle that
//! stops them. Its own module, so that the stage (which starts the worker) and the worker
//! (which reports through this) do not import each other.
// Still its own `unsafe` (the Python C API (pyo3's ffi)): not moved into src/sys/ yet (issue 24).
#![allow(unsafe_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pyo3::prelude::*;

use crate::event::Event;
use crate::stats::Stats;

/// Events for the worker (in time order, from any CPU), with their place in the order.
pub type Work = (u64, Vec<Event>);
/// A batch the worker hands back: its place, the events that passed, and how many per CPU it
/// passed on without running the script (it was stopping).
pub type Done = (u64, Vec<Event>, super::ledger::Counts);

/// State shared by the pump, the worker and the handle.
pub struct Shared {
    pub(super) stop: AtomicBool,
    /// Set once perfwatch has had to interrupt the script's code: it is stopping.
    pub(super) interrupted: AtomicBool,
    /// Milliseconds since `epoch` at which the worker entered Python; 0 when idle.
    pub busy_since: AtomicU64,
    /// The worker's Python thread id (`threading.get_ident()`), for interrupting it.
    pub py_thread: AtomicU64,
    last_interrupt: AtomicU64,
    epoch: Instant,
    /// The monitor's counters, once the stage is started.
    pub(super) stats: std::sync::OnceLock<Arc<Stats>>,
    /// How far the scripts are, and whether the run ended by itself (shared with the
    /// pipeline, which waits on it at a natural end).
    pub progress: Arc<crate::pipeline::StageProgress>,
}

impl Shared {
    pub(super) fn new() -> Shared {
        Shared {
            stop: AtomicBool::new(false),
            interrupted: AtomicBool::new(false),
            busy_since: AtomicU64::new(0),
            py_thread: AtomicU64::new(0),
            last_interrupt: AtomicU64::new(0),
            epoch: Instant::now(),
            stats: std::sync::OnceLock::new(),
            progress: Arc::default(),
        }
    }

    /// `n` more events are done with (the scripts ran on them, or they went around).
    pub fn done(&self, n: u64) {
        self.progress.done.fetch_add(n, Ordering::Relaxed);
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    /// The stage is stopping, or perfwatch has interrupted the script because it is.
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire) || self.interrupted.load(Ordering::Acquire)
    }

    /// The pump must keep running until the handle stops it.
    pub(super) fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    pub fn mark_busy(&self) {
        self.busy_since.store(self.now_ms(), Ordering::Release);
    }

    pub fn mark_idle(&self) {
        self.busy_since.store(0, Ordering::Release);
    }

    /// How long the worker has been in Python, if it is.
    pub(super) fn busy_for(&self) -> Option<Duration> {
        match self.busy_since.load(Ordering::Acquire) {
            0 => None,
            t => Some(Duration::from_millis(self.now_ms().saturating_sub(t))),
        }
    }

    /// Raise KeyboardInterrupt in the worker's Python code, so that a handler that loops
    /// forever returns. `PyThreadState_SetAsyncExc` needs the GIL, which a looping handler
    /// gives up every few milliseconds, but which code stuck in C may hold for ever: ask from
    /// a helper thread that nobody waits for. At most every 100 ms.
    pub(super) fn interrupt(&self) {
        let now = self.now_ms();
        let last = self.last_interrupt.load(Ordering::Acquire);
        if last != 0 && now.saturating_sub(last) < 100 {
            return;
        }
        self.last_interrupt.store(now, Ordering::Release);
        self.interrupted.store(true, Ordering::Release);
        let ident = self.py_thread.load(Ordering::Acquire);
        if ident == 0 {
            return;
        }
        let _ = std::thread::Builder::new()
            .name("perfwatch-script-interrupt".into())
            .spawn(move || {
                Python::attach(|_py| {
                    // SAFETY: the GIL is held; the exception type is a valid static object.
                    unsafe {
                        pyo3::ffi::PyThreadState_SetAsyncExc(
                            ident as _,
                            pyo3::ffi::PyExc_KeyboardInterrupt,
                        );
                    }
                })
            });
    }
}

/// Events per CPU, for the dropped counters.
pub(super) fn per_cpu(events: &[Event]) -> super::ledger::Counts {
    let mut v: Vec<(u32, u64)> = Vec::new();
    for e in events {
        match v.iter_mut().find(|(c, _)| *c == e.cpu) {
            Some((_, n)) => *n += 1,
            None => v.push((e.cpu, 1)),
        }
    }
    v
}
