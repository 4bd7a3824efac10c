//! Signals that stop perfwatch: SIGINT, SIGTERM, SIGHUP, SIGQUIT.
//!
//! Handlers only record which signal arrived; the frontend loops look at it on every tick
//! and stop cleanly (terminal restored, summary printed). A second SIGINT or SIGTERM while
//! the first is being handled ends the process at once, so a stuck shutdown can always be
//! interrupted.
//!
//! SIGINT and SIGTERM always stop perfwatch, whatever their disposition at entry, as they
//! stop `perf record` and tcpdump: a non-interactive shell starts its background jobs with
//! SIGINT ignored, and `perfwatch ... & kill -INT $!` is how a script stops one. SIGHUP and
//! SIGQUIT ignored at entry stay ignored, as coreutils leave them: `nohup perfwatch` is not
//! stopped by SIGHUP.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};

/// The signals perfwatch stops on.
pub(crate) const STOP_SIGNALS: [i32; 4] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT];

/// Signals whose disposition at entry is remembered (the stop signals and SIGTSTP).
const WATCHED: [i32; 5] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT, libc::SIGTSTP];

/// Which of [`WATCHED`] were ignored (SIG_IGN) when perfwatch started.
fn entry_ignored() -> &'static [bool; 5] {
    static AT_ENTRY: OnceLock<[bool; 5]> = OnceLock::new();
    AT_ENTRY.get_or_init(|| {
        WATCHED.map(|sig| {
            crate::sys::disposition(sig).is_some_and(|old| old.sa_sigaction == libc::SIG_IGN)
        })
    })
}

/// Remember how the watched signals were disposed when perfwatch started. Call first thing,
/// before anything installs a handler; later calls (and [`ignored_at_entry`]) read that.
pub(crate) fn record_entry() {
    let _ = entry_ignored();
}

/// Was `sig` ignored when perfwatch started?
pub(crate) fn ignored_at_entry(sig: i32) -> bool {
    WATCHED
        .iter()
        .position(|&s| s == sig)
        .is_some_and(|i| entry_ignored()[i])
}

/// The stop signals caught even when ignored at entry: the ones a user or a script sends on
/// purpose to stop a run (`kill -INT`, `kill`), never by accident of a hang-up.
pub(crate) const ALWAYS_CAUGHT: [i32; 2] = [SIGINT, SIGTERM];

/// The signals to catch among `wanted`: [`ALWAYS_CAUGHT`], and the others unless ignored at
/// entry. A pure function of the dispositions, so that the rule is tested without changing
/// the test's own signals.
pub(crate) fn to_catch(wanted: &[i32], ignored: impl Fn(i32) -> bool) -> Vec<i32> {
    wanted
        .iter()
        .copied()
        .filter(|&s| ALWAYS_CAUGHT.contains(&s) || !ignored(s))
        .collect()
}

#[derive(Clone)]
pub(crate) struct StopSignals {
    last: Arc<AtomicUsize>,
}

impl StopSignals {
    pub fn install() -> std::io::Result<StopSignals> {
        let last = Arc::new(AtomicUsize::new(0));
        let armed = Arc::new(AtomicBool::new(false));
        for sig in to_catch(&STOP_SIGNALS, ignored_at_entry) {
            // Order matters: the conditional shutdown checks `armed` before the flag below
            // sets it, so the first signal is handled and only a second one exits.
            signal_hook::flag::register_conditional_shutdown(sig, 1, armed.clone())?;
            signal_hook::flag::register(sig, armed.clone())?;
            signal_hook::flag::register_usize(sig, last.clone(), sig as usize)?;
        }
        Ok(StopSignals { last })
    }

    /// The signal that asked perfwatch to stop, if any.
    pub(crate) fn pending(&self) -> Option<i32> {
        match self.last.load(Ordering::Acquire) {
            0 => None,
            s => Some(s as i32),
        }
    }
}

/// The exit code after stopping on `sig`: 0 for SIGINT (the normal way to stop a monitor),
/// 128 + N for the others, as a shell reports a process killed by them.
pub(crate) fn exit_code_for(sig: i32) -> i32 {
    if sig == SIGINT { 0 } else { 128 + sig }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hup_and_quit_ignored_at_entry_are_left_alone_int_and_term_never() {
        // nohup: SIGHUP ignored.
        assert_eq!(
            to_catch(&STOP_SIGNALS, |s| s == SIGHUP),
            vec![SIGINT, SIGTERM, SIGQUIT]
        );
        // A background job of a non-interactive shell: SIGINT and SIGQUIT ignored. SIGINT
        // is still caught (`kill -INT $!` stops it, as it stops perf record), SIGQUIT not.
        assert_eq!(
            to_catch(&STOP_SIGNALS, |s| s == SIGINT || s == SIGQUIT),
            vec![SIGINT, SIGTERM, SIGHUP]
        );
        // Everything ignored: SIGINT and SIGTERM are caught all the same.
        assert_eq!(to_catch(&STOP_SIGNALS, |_| true), vec![SIGINT, SIGTERM]);
        assert_eq!(to_catch(&STOP_SIGNALS, |_| false), STOP_SIGNALS.to_vec());
    }

    #[test]
    fn exit_codes() {
        assert_eq!(exit_code_for(SIGINT), 0);
        assert_eq!(exit_code_for(SIGTERM), 143);
        assert_eq!(exit_code_for(SIGHUP), 129);
    }
}
