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
// Still its own `unsafe` (the fatal-signal handlers and the terminal modes they restore):
// not moved into src/sys/ yet (issue 24).
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::ffi::OsStr;
use std::io::{self, Write};
use std::mem::MaybeUninit;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

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

/// The terminal attributes from before raw mode, saved once, for the signal handler.
struct SavedTty {
    fd: AtomicI32,
    ready: AtomicBool,
    termios: UnsafeCell<MaybeUninit<libc::termios>>,
}

// SAFETY: `termios` is written once, before `ready` is set (release), and only read after
// `ready` is seen set (acquire); it is never written again.
unsafe impl Sync for SavedTty {}

static SAVED: SavedTty = SavedTty {
    fd: AtomicI32::new(-1),
    ready: AtomicBool::new(false),
    termios: UnsafeCell::new(MaybeUninit::uninit()),
};

/// The TUI owns the terminal: a fatal signal must restore it.
static ARMED: AtomicBool = AtomicBool::new(false);
/// A fatal signal is ending the process: nobody draws any more.
static DYING: AtomicBool = AtomicBool::new(false);

/// The descriptor raw mode is set on, as crossterm chooses it: stdin when it is a terminal,
/// else the controlling terminal.
fn tty_fd() -> io::Result<i32> {
    // SAFETY: isatty has no preconditions.
    if unsafe { libc::isatty(libc::STDIN_FILENO) } == 1 {
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
    if !SAVED.ready.load(Ordering::Acquire) {
        if let Ok(fd) = tty_fd() {
            let mut t = MaybeUninit::<libc::termios>::zeroed();
            // SAFETY: a valid fd and a valid out-parameter.
            if unsafe { libc::tcgetattr(fd, t.as_mut_ptr()) } == 0 {
                // SAFETY: written once, before `ready` is published; see SavedTty.
                unsafe { *SAVED.termios.get() = t };
                SAVED.fd.store(fd, Ordering::Relaxed);
                SAVED.ready.store(true, Ordering::Release);
            }
        }
        install_fatal_handlers();
    }
    ARMED.store(true, Ordering::Release);
}

/// The terminal has been restored: fatal signals no longer touch it.
pub(crate) fn disarm() {
    ARMED.store(false, Ordering::Release);
}

/// A fatal signal is being handled: the UI must not write another frame over the restored
/// terminal.
pub(crate) fn dying() -> bool {
    DYING.load(Ordering::Acquire)
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

/// Signal numbers the table below covers.
const NSIG: usize = 65;

/// The disposition each fatal signal had before perfwatch's handler, to chain to.
struct Previous(UnsafeCell<[MaybeUninit<libc::sigaction>; NSIG]>);

// SAFETY: each entry is written once, before the handler for that signal is installed, and
// only read by that handler afterwards.
unsafe impl Sync for Previous {}

static PREVIOUS: Previous = Previous(UnsafeCell::new([MaybeUninit::uninit(); NSIG]));

/// Install the fatal-signal handler (once), for every signal in [`FATAL_SIGNALS`] that is not
/// ignored and has no handler of someone else's: a signal ignored at entry stays ignored.
/// SIGSEGV and SIGBUS keep Rust's stack-overflow handler, chained after the restore.
fn install_fatal_handlers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for sig in FATAL_SIGNALS {
            let idx = sig as usize;
            if idx >= NSIG {
                continue;
            }
            let mut old = MaybeUninit::<libc::sigaction>::zeroed();
            // SAFETY: reading the current disposition into a valid out-parameter.
            if unsafe { libc::sigaction(sig, std::ptr::null(), old.as_mut_ptr()) } != 0 {
                continue;
            }
            // SAFETY: sigaction filled it.
            let old_action = unsafe { old.assume_init() };
            let h = old_action.sa_sigaction;
            let rusts = sig == libc::SIGSEGV || sig == libc::SIGBUS;
            if h == libc::SIG_IGN || (h != libc::SIG_DFL && !rusts) {
                continue;
            }
            // SAFETY: written before the handler that reads it is installed; see Previous.
            unsafe { (*PREVIOUS.0.get())[idx] = old };
            let mut act = MaybeUninit::<libc::sigaction>::zeroed();
            // SAFETY: a zeroed sigaction is valid; the fields are set below.
            let act = unsafe {
                let a = act.as_mut_ptr();
                (*a).sa_sigaction = on_fatal as *const () as usize;
                (*a).sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut (*a).sa_mask);
                act.assume_init()
            };
            // SAFETY: a valid action for a catchable signal.
            unsafe { libc::sigaction(sig, &act, std::ptr::null_mut()) };
        }
    });
}

/// Put the terminal back, with async-signal-safe calls only.
fn restore_from_handler() {
    // SAFETY: write(2) of a constant buffer to stdout is async-signal-safe.
    unsafe {
        libc::write(
            libc::STDOUT_FILENO,
            RESTORE_SEQUENCE.as_ptr().cast(),
            RESTORE_SEQUENCE.len(),
        );
    }
    if SAVED.ready.load(Ordering::Acquire) {
        let fd = SAVED.fd.load(Ordering::Relaxed);
        // SAFETY: termios was written before `ready`; tcsetattr is async-signal-safe.
        unsafe {
            libc::tcsetattr(fd, libc::TCSANOW, (*SAVED.termios.get()).as_ptr());
        }
    }
}

extern "C" fn on_fatal(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    if ARMED.swap(false, Ordering::AcqRel) {
        DYING.store(true, Ordering::Release);
        restore_from_handler();
    }
    let idx = sig as usize;
    if idx >= NSIG {
        return;
    }
    // SAFETY: the entry for `sig` was written before this handler was installed.
    let prev = unsafe { (*PREVIOUS.0.get())[idx].assume_init() };
    let h = prev.sa_sigaction;
    if h != libc::SIG_DFL && h != libc::SIG_IGN {
        // SAFETY: `h` is the handler that was installed for this signal, called the way its
        // flags say it expects (Rust's own handler for SIGSEGV/SIGBUS).
        unsafe {
            if prev.sa_flags & libc::SA_SIGINFO != 0 {
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    std::mem::transmute(h);
                f(sig, info, ctx);
            } else {
                let f: extern "C" fn(libc::c_int) = std::mem::transmute(h);
                f(sig);
            }
        }
        // It returned: unless it put the default action back (Rust's does, for a fault that
        // is not a stack overflow), the signal has been dealt with.
        let mut now = MaybeUninit::<libc::sigaction>::zeroed();
        // SAFETY: reading the disposition is async-signal-safe.
        let reset = unsafe {
            libc::sigaction(sig, std::ptr::null(), now.as_mut_ptr()) == 0
                && now.assume_init().sa_sigaction == libc::SIG_DFL
        };
        if !reset {
            return;
        }
    }
    // The default action: for a fault the instruction faults again on return; a signal sent
    // by kill(2) is raised again. Either way the process ends by this signal.
    // SAFETY: signal(2) to SIG_DFL and raise(3) are async-signal-safe.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

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
        let flag = requested.clone();
        // SAFETY: the action only touches atomics and calls async-signal-safe functions.
        let ok = unsafe {
            signal_hook::low_level::register(libc::SIGTSTP, move || {
                if TUI_RUNNING.load(Ordering::Acquire) {
                    flag.store(true, Ordering::Release);
                } else {
                    let _ = signal_hook::low_level::emulate_default_handler(libc::SIGTSTP);
                }
            })
        };
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
        // SAFETY: getpgrp/getpid/kill/raise have no memory preconditions.
        unsafe {
            if libc::getpgrp() == libc::getpid() {
                libc::kill(0, libc::SIGTSTP);
            }
            // SIGSTOP stops every thread before raise() returns; SIGCONT continues here.
            libc::raise(libc::SIGSTOP);
        }
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
    // SAFETY: these calls have no memory preconditions.
    let (pgrp, sid) = unsafe { (libc::getpgrp(), libc::getsid(0)) };
    // SAFETY: as above.
    let mut pid = unsafe { libc::getpid() };
    for _ in 0..64 {
        let Some(parent) = parent_of(pid) else {
            return false;
        };
        if parent <= 0 {
            return false;
        }
        // SAFETY: as above; a failure returns -1, which matches nothing.
        let (ppgrp, psid) = unsafe { (libc::getpgid(parent), libc::getsid(parent)) };
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
        // SAFETY: no preconditions.
        let (me, parent) = unsafe { (libc::getpid(), libc::getppid()) };
        assert_eq!(parent_of(me), Some(parent));
    }
}
