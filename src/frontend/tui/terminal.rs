//! The terminal's state around the TUI: whether it can show one, what is restored when a
//! fatal signal ends perfwatch, and Ctrl-Z.
//!
//! - [`capable`]: `TERM=dumb`, an empty or missing `TERM` get no full-screen view.
//! - [`arm`] / [`disarm`]: while the TUI owns the terminal, a fatal signal (SIGSEGV in a C
//!   extension, `abort()`, SIGBUS, SIGILL, SIGFPE, and the signals whose default action ends
//!   the process, such as SIGALRM or SIGUSR1) first restores the terminal from the signal
//!   handler, with async-signal-safe calls only (`write(2)` of a constant byte string, then
//!   `tcsetattr(2)` of the attributes saved before raw mode), then lets the signal take its
//!   course: the previous handler runs (Rust's own SIGSEGV/SIGBUS handler, which reports a
//!   stack overflow), else the default action, so the process still ends by that signal
//!   (status 128+N, a core dump where configured).
//! - [`Suspend`]: SIGTSTP and the Ctrl-Z key (raw mode turns it into a key) leave the
//!   terminal, stop perfwatch as the shell expects, and on SIGCONT take the terminal back and
//!   redraw everything, as htop and vim do.
//!
//! The system calls (the handler itself, the saved attributes, job control) are in
//! `sys::tty`; this file decides what is restored and when.

use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::sys::tty;

use crossterm::event::{DisableMouseCapture, EnableMouseCapture, KeyCode, KeyEvent, KeyModifiers};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};

/// Can this terminal show a full-screen view? `Err` says why not (for a note).
pub(crate) fn capable(term: Option<&OsStr>) -> Result<(), String> {
    match term {
        None => Err("TERM is not set".to_string()),
        Some(t) if t.is_empty() => Err("TERM is empty".to_string()),
        Some(t) if t == "dumb" => Err("TERM is 'dumb'".to_string()),
        Some(_) => Ok(()),
    }
}

/// What a fatal-signal handler writes to put the terminal back: mouse reporting off (every
/// mode crossterm turns on), attributes reset, the alternate screen left, the cursor shown.
pub(crate) const RESTORE_SEQUENCE: &[u8] =
    b"\x1b[?1006l\x1b[?1015l\x1b[?1003l\x1b[?1002l\x1b[?1000l\x1b[0m\x1b[?1049l\x1b[?25h";

/// The descriptor raw mode is set on, as crossterm chooses it: stdin when it is a terminal,
/// else the controlling terminal.
fn tty_fd() -> io::Result<i32> {
    if tty::isatty(io::stdin().as_fd()) {
        return Ok(libc::STDIN_FILENO);
    }
    // Kept open for the handler for the rest of the process (std adds O_CLOEXEC).
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::IntoRawFd;
    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open("/dev/tty")?;
    Ok(tty.into_raw_fd())
}

/// Save the terminal's attributes (once: before the first raw mode) and make fatal signals
/// restore the terminal until [`disarm`]. Call before entering raw mode.
pub(crate) fn arm() {
    if !tty::attributes_saved() {
        if let Ok(fd) = tty_fd() {
            tty::save_attributes(fd);
        }
        tty::restore_on_fatal(&FATAL_SIGNALS, RESTORE_SEQUENCE);
    }
    tty::set_armed(true);
}

/// The terminal has been restored: fatal signals no longer touch it.
pub(crate) fn disarm() {
    tty::set_armed(false);
}

/// A fatal signal is being handled: the UI must not write another frame over the restored
/// terminal.
pub(crate) fn dying() -> bool {
    tty::dying()
}

/// Signals whose default action ends the process (with or without a core dump) and that
/// perfwatch does not otherwise handle. SIGINT, SIGTERM, SIGHUP and SIGQUIT stop perfwatch
/// cleanly (`signals.rs`); SIGPIPE is ignored by Rust.
pub(crate) const FATAL_SIGNALS: [i32; 17] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGABRT,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGSYS,
    libc::SIGTRAP,
    libc::SIGXCPU,
    libc::SIGXFSZ,
    libc::SIGALRM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGIO,
    libc::SIGPWR,
    libc::SIGSTKFLT,
];

/// The Ctrl-Z key, as raw mode delivers it.
pub(crate) fn is_suspend_key(k: &KeyEvent) -> bool {
    k.code == KeyCode::Char('z') && k.modifiers.contains(KeyModifiers::CONTROL)
}

/// The TUI's loop is running (suspended or not): SIGTSTP is a request to it, not a stop.
static TUI_RUNNING: AtomicBool = AtomicBool::new(false);

/// Requests to suspend: SIGTSTP (from `kill`, or from a terminal not in raw mode) and the
/// Ctrl-Z key. Disabled when SIGTSTP was ignored when perfwatch started: it stays ignored,
/// and Ctrl-Z does nothing either.
pub struct Suspend {
    requested: Arc<AtomicBool>,
    enabled: bool,
}

impl Suspend {
    /// Catch SIGTSTP while the TUI runs (before and after it, the default action: stop).
    pub fn install() -> Suspend {
        let requested = Arc::new(AtomicBool::new(false));
        if crate::signals::ignored_at_entry(libc::SIGTSTP) {
            return Suspend {
                requested,
                enabled: false,
            };
        }
        let ok = tty::catch_tstp(requested.clone(), &TUI_RUNNING);
        TUI_RUNNING.store(true, Ordering::Release);
        Suspend {
            requested,
            enabled: ok.is_ok(),
        }
    }

    /// A SIGTSTP arrived since the last call.
    pub fn take(&self) -> bool {
        self.requested.swap(false, Ordering::AcqRel)
    }

    /// Whether Ctrl-Z / SIGTSTP suspend at all.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Leave the terminal (as [`restore_terminal`] does), stop perfwatch, and when it
    /// is continued take the terminal back. Returns false, having done nothing, when no shell
    /// could continue it (see [`job_control_parent`]): the kernel discards a terminal's stop
    /// signals for such a process too. The caller redraws everything afterwards.
    pub fn suspend(&self) -> io::Result<bool> {
        if !self.enabled || !job_control_parent() {
            return Ok(false);
        }
        restore_terminal();
        // As the terminal would have done without raw mode: the whole job stops (the
        // command perfwatch started, too), when perfwatch is the job's leader.
        // SIGSTOP stops every thread before it returns; SIGCONT continues here.
        tty::stop_job();
        // Our own SIGTSTP to the group is not a new request.
        self.requested.store(false, Ordering::Release);
        TerminalGuard::reenter()?;
        Ok(true)
    }
}

impl Drop for Suspend {
    fn drop(&mut self) {
        TUI_RUNNING.store(false, Ordering::Release);
    }
}

/// Is there a shell with job control that will continue perfwatch after it stops? That is,
/// is perfwatch's process group not orphaned: some process in it (perfwatch, or an ancestor
/// in the same group, such as sudo) has a parent in another group of the same session.
/// A stopped orphaned group would stay stopped for good (the kernel ignores SIGTSTP from the
/// terminal for it, and sends it SIGHUP if it stops).
pub(crate) fn job_control_parent() -> bool {
    let (pgrp, sid) = tty::group_and_session();
    let mut pid = std::process::id() as libc::pid_t;
    for _ in 0..64 {
        let Some(parent) = parent_of(pid) else {
            return false;
        };
        if parent <= 0 {
            return false;
        }
        // A failure gives -1, which matches nothing.
        let (ppgrp, psid) = tty::group_and_session_of(parent);
        if psid != sid {
            return false;
        }
        if ppgrp != pgrp {
            return true;
        }
        pid = parent;
    }
    false
}

/// The parent of `pid`, from `/proc/PID/stat` (the field after the parenthesised name).
fn parent_of(pid: libc::pid_t) -> Option<libc::pid_t> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(stat.get(close + 1..)?).ok()?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Raw mode, the alternate screen and mouse capture, for as long as it lives.
pub(crate) struct TerminalGuard {
    active: bool,
}

/// Put the terminal back as it was. Safe to call twice.
pub(crate) fn restore_terminal() {
    disarm();
    let _ = disable_raw_mode();
    let mut out = io::stdout();
    let _ = execute!(
        out,
        DisableMouseCapture,
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
    let _ = out.flush();
}

impl TerminalGuard {
    pub fn enter() -> io::Result<TerminalGuard> {
        // From here a fatal signal restores the terminal before it ends perfwatch.
        arm();
        let guard = TerminalGuard { active: true };
        TerminalGuard::reenter()?;
        Ok(guard)
    }

    /// Raw mode, the alternate screen (cleared) and mouse capture: at start, and again after
    /// a suspend.
    pub(crate) fn reenter() -> io::Result<()> {
        arm();
        enable_raw_mode()?;
        execute!(
            io::stdout(),
            EnterAlternateScreen,
            EnableMouseCapture,
            crossterm::terminal::Clear(crossterm::terminal::ClearType::All)
        )
    }

    /// Restore now (and not again on drop).
    pub(crate) fn restore(&mut self) {
        if std::mem::take(&mut self.active) {
            restore_terminal();
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        self.restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dumb_or_missing_term_gets_no_full_screen() {
        assert!(capable(None).unwrap_err().contains("TERM is not set"));
        assert!(capable(Some(OsStr::new(""))).is_err());
        assert_eq!(
            capable(Some(OsStr::new("dumb"))).unwrap_err(),
            "TERM is 'dumb'"
        );
        assert_eq!(capable(Some(OsStr::new("xterm-256color"))), Ok(()));
        assert_eq!(capable(Some(OsStr::new("linux"))), Ok(()));
    }

    #[test]
    fn the_restore_sequence_undoes_what_the_tui_turns_on() {
        let s = String::from_utf8_lossy(RESTORE_SEQUENCE);
        // Leave the alternate screen, show the cursor, mouse reporting off.
        for part in ["\x1b[?1049l", "\x1b[?25h", "\x1b[?1000l", "\x1b[?1006l"] {
            assert!(s.contains(part), "{part:?}");
        }
        // The same bytes crossterm writes for DisableMouseCapture.
        let mut v = Vec::new();
        crossterm::execute!(v, crossterm::event::DisableMouseCapture).unwrap();
        assert!(RESTORE_SEQUENCE.starts_with(&v), "{v:?}");
    }

    #[test]
    fn ctrl_z_is_the_suspend_key() {
        let k = KeyEvent::new(KeyCode::Char('z'), KeyModifiers::CONTROL);
        assert!(is_suspend_key(&k));
        let z = KeyEvent::new(KeyCode::Char('z'), KeyModifiers::NONE);
        assert!(!is_suspend_key(&z));
    }

    #[test]
    fn parent_of_reads_proc() {
        let (me, parent) = (std::process::id(), std::os::unix::process::parent_id());
        assert_eq!(parent_of(me as libc::pid_t), Some(parent as libc::pid_t));
    }
}
