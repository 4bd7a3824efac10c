//! Signals that stop perfwatch: SIGINT, SIGTERM, SIGHUP, SIGQUIT.
//!
//! Handlers only record which signal arrived; the frontend loops look at it on every tick
//! and stop cleanly (terminal restored, summary printed). A second SIGINT or SIGTERM while
//! the first is being handled ends the process at once, so a stuck shutdown can always be
//! interrupted.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};

/// The signals perfwatch stops on.
pub const STOP_SIGNALS: [i32; 4] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT];

#[derive(Clone)]
pub struct StopSignals {
    last: Arc<AtomicUsize>,
}

impl StopSignals {
    pub fn install() -> std::io::Result<StopSignals> {
        let last = Arc::new(AtomicUsize::new(0));
        let armed = Arc::new(AtomicBool::new(false));
        for sig in STOP_SIGNALS {
            // Order matters: the conditional shutdown checks `armed` before the flag below
            // sets it, so the first signal is handled and only a second one exits.
            signal_hook::flag::register_conditional_shutdown(sig, 1, armed.clone())?;
            signal_hook::flag::register(sig, armed.clone())?;
            signal_hook::flag::register_usize(sig, last.clone(), sig as usize)?;
        }
        Ok(StopSignals { last })
    }

    /// The signal that asked perfwatch to stop, if any.
    pub fn pending(&self) -> Option<i32> {
        match self.last.load(Ordering::Acquire) {
            0 => None,
            s => Some(s as i32),
        }
    }
}

/// The exit code after stopping on `sig`: 0 for SIGINT (the normal way to stop a monitor),
/// 128 + N for the others, as a shell reports a process killed by them.
pub fn exit_code_for(sig: i32) -> i32 {
    if sig == SIGINT { 0 } else { 128 + sig }
}
