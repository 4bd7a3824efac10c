//! The terminal and job control, for the TUI's terminal owner
//! (src/frontend/tui/terminal.rs): the attributes saved before raw mode, the fatal-signal
//! handler that puts them back, SIGTSTP caught while the TUI runs, and the process-group
//! calls a suspend needs.
//!
//! The fatal-signal handler lives here, whole, so that what it does in a signal handler
//! (async-signal-safe calls only: `write(2)` of a constant byte string, `tcsetattr(2)` of
//! saved attributes, `sigaction(2)`, `signal(2)`, `raise(3)`, and the previous handler) is
//! checked in one place; the terminal owner only says which signals, which bytes, and when
//! the terminal is its (`set_armed`).

use std::cell::UnsafeCell;
use std::ffi::c_int;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};

/// `isatty(fd)`.
pub(crate) fn isatty(fd: BorrowedFd<'_>) -> bool {
    // SAFETY: isatty has no memory preconditions; the fd is borrowed, so open.
    unsafe { libc::isatty(fd.as_raw_fd()) == 1 }
}

/// The terminal attributes from before raw mode, saved once, for the signal handler.
struct SavedTty {
    fd: AtomicI32,
    ready: AtomicBool,
    termios: UnsafeCell<MaybeUninit<libc::termios>>,
}

// SAFETY: `termios` is written once, before `ready` is set (release), and only read after
// `ready` is seen set (acquire); it is never written again (`save_attributes` writes only
// while `ready` is unset, and is called from one thread, the TUI's, before raw mode).
unsafe impl Sync for SavedTty {}

static SAVED: SavedTty = SavedTty {
    fd: AtomicI32::new(-1),
    ready: AtomicBool::new(false),
    termios: UnsafeCell::new(MaybeUninit::uninit()),
};

/// Save the attributes of the terminal `fd` (a descriptor kept open for the rest of the
/// process) for the fatal-signal handler to restore: once, the first that succeeds; later
/// calls keep it. False when there is none saved (tcgetattr refused).
pub(crate) fn save_attributes(fd: RawFd) -> bool {
    if SAVED.ready.load(Ordering::Acquire) {
        return true;
    }
    let mut t = MaybeUninit::<libc::termios>::zeroed();
    // SAFETY: tcgetattr writes into the termios we own; a bad fd makes it fail, checked.
    if unsafe { libc::tcgetattr(fd, t.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: written once, before `ready` is published; see SavedTty.
    unsafe { *SAVED.termios.get() = t };
    SAVED.fd.store(fd, Ordering::Relaxed);
    SAVED.ready.store(true, Ordering::Release);
    true
}

/// Whether [`save_attributes`] has saved them.
pub(crate) fn attributes_saved() -> bool {
    SAVED.ready.load(Ordering::Acquire)
}

/// The terminal is the TUI's: a fatal signal restores it.
static ARMED: AtomicBool = AtomicBool::new(false);
/// A fatal signal is ending the process: nobody draws any more.
static DYING: AtomicBool = AtomicBool::new(false);
/// What the handler writes to stdout to put the terminal back.
static RESTORE: OnceLock<&'static [u8]> = OnceLock::new();

/// Whether a fatal signal restores the terminal (the TUI owns it) or leaves it alone.
pub(crate) fn set_armed(armed: bool) {
    ARMED.store(armed, Ordering::Release);
}

/// A fatal signal is being handled: the UI must not write another frame over the restored
/// terminal.
pub(crate) fn dying() -> bool {
    DYING.load(Ordering::Acquire)
}

/// Signal numbers the table below covers.
const NSIG: usize = 65;

/// The disposition each fatal signal had before perfwatch's handler, to chain to.
struct Previous(UnsafeCell<[MaybeUninit<libc::sigaction>; NSIG]>);

// SAFETY: each entry is written once, before the handler for that signal is installed, and
// only read by that handler afterwards.
unsafe impl Sync for Previous {}

static PREVIOUS: Previous = Previous(UnsafeCell::new([MaybeUninit::uninit(); NSIG]));

/// Install the fatal-signal handler (once: later calls do nothing), for every one of
/// `signals` that is not ignored and has no handler of someone else's: a signal ignored at
/// entry stays ignored. SIGSEGV and SIGBUS keep Rust's stack-overflow handler, chained after
/// the restore. While armed, the handler writes `restore` to stdout and puts the saved
/// attributes back; then the signal takes its course (the previous handler, else the
/// default action, so the process still ends by that signal).
pub(crate) fn restore_on_fatal(signals: &[c_int], restore: &'static [u8]) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = RESTORE.set(restore);
        for &sig in signals {
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
    if let Some(bytes) = RESTORE.get() {
        // SAFETY: write(2) of a 'static buffer to stdout is async-signal-safe.
        unsafe { libc::write(libc::STDOUT_FILENO, bytes.as_ptr().cast(), bytes.len()) };
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

/// Catch SIGTSTP: while `running` is set, a SIGTSTP sets `requested` (the TUI's loop
/// suspends itself); otherwise it takes its default action (stop).
pub(crate) fn catch_tstp(
    requested: Arc<AtomicBool>,
    running: &'static AtomicBool,
) -> io::Result<()> {
    // SAFETY: the action only touches atomics and calls signal-hook's
    // emulate_default_handler, which is async-signal-safe.
    unsafe {
        signal_hook::low_level::register(libc::SIGTSTP, move || {
            if running.load(Ordering::Acquire) {
                requested.store(true, Ordering::Release);
            } else {
                let _ = signal_hook::low_level::emulate_default_handler(libc::SIGTSTP);
            }
        })
    }
    .map(|_| ())
}

/// Stop this process as a terminal's Ctrl-Z would: the whole job (SIGTSTP to the process
/// group) when this process leads it, and this process with SIGSTOP, which has stopped every
/// thread before it returns. It returns once a SIGCONT continues the process.
pub(crate) fn stop_job() {
    // SAFETY: getpgrp/getpid/kill/raise have no memory preconditions.
    unsafe {
        if libc::getpgrp() == libc::getpid() {
            libc::kill(0, libc::SIGTSTP);
        }
        libc::raise(libc::SIGSTOP);
    }
}

/// This process's group and session: `(getpgrp(), getsid(0))`.
pub(crate) fn group_and_session() -> (libc::pid_t, libc::pid_t) {
    // SAFETY: these calls have no memory preconditions.
    unsafe { (libc::getpgrp(), libc::getsid(0)) }
}

/// The group and session of `pid`: `(getpgid(pid), getsid(pid))`, -1 for a call that fails.
pub(crate) fn group_and_session_of(pid: libc::pid_t) -> (libc::pid_t, libc::pid_t) {
    // SAFETY: these calls have no memory preconditions; a failure returns -1.
    unsafe { (libc::getpgid(pid), libc::getsid(pid)) }
}
