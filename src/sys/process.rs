//! Children: one forked and held before its exec (`perfwatch -- COMMAND`, see
//! src/command.rs), and what a parent does with its own children (wait, signal).
//!
//! The child's side of the fork lives here whole, so that what it may call between `fork`
//! and `exec` (async-signal-safe calls only, nothing allocated) is checked in one place.

use std::ffi::{CStr, CString, c_int};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// A forked child held before its exec.
pub(crate) struct Held {
    pub(crate) pid: libc::pid_t,
    /// One byte written here lets the child exec; closed unwritten, the child `_exit(127)`s.
    pub(crate) go: OwnedFd,
    /// After `go`: the exec's errno (4 bytes, native order), or end of file once the exec
    /// succeeded (the child's end is close-on-exec).
    pub(crate) exec_error: OwnedFd,
}

/// Fork a child that execs `path` with `argv` once released through [`Held::go`]. In the
/// child, before the exec: SIGPIPE back to its default (Rust ignores it), each of `ignore`
/// ignored, the signal mask emptied. Everything the child uses is made before the fork.
pub(crate) fn fork_held(path: &CStr, argv: &[CString], ignore: &[c_int]) -> io::Result<Held> {
    let mut c_argv: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    c_argv.push(std::ptr::null());
    let (go_read, go) = super::pipe()?;
    let (exec_error, err_write) = super::pipe()?;
    let (go_read_fd, go_fd) = (go_read.as_raw_fd(), go.as_raw_fd());
    let (err_read_fd, err_write_fd) = (exec_error.as_raw_fd(), err_write.as_raw_fd());
    // SAFETY: fork; the child below only calls async-signal-safe functions and never
    // returns (exec or _exit), so nothing of the parent's is dropped or used twice.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: in the child, async-signal-safe calls only on descriptors and buffers made
        // before the fork (`c_argv` is NULL-terminated, its strings outlive the exec), then
        // exec or _exit.
        unsafe {
            libc::close(go_fd);
            libc::close(err_read_fd);
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            for &sig in ignore {
                libc::signal(sig, libc::SIG_IGN);
            }
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            let mut b = 0u8;
            let n = loop {
                let n = libc::read(go_read_fd, &mut b as *mut u8 as *mut libc::c_void, 1);
                if n >= 0 || *libc::__errno_location() != libc::EINTR {
                    break n;
                }
            };
            if n != 1 {
                // The parent went away without releasing us.
                libc::_exit(127);
            }
            libc::execv(path.as_ptr(), c_argv.as_ptr());
            let e: i32 = *libc::__errno_location();
            libc::write(err_write_fd, &e as *const i32 as *const libc::c_void, 4);
            libc::_exit(127);
        }
    }
    // The child's ends, closed in the parent.
    drop(go_read);
    drop(err_write);
    Ok(Held {
        pid,
        go,
        exec_error,
    })
}

/// `waitpid(pid, &status, flags)`: the pid reaped (0 with `WNOHANG` when none), or -1 with
/// errno.
pub(crate) fn waitpid(pid: libc::pid_t, status: &mut c_int, flags: c_int) -> libc::pid_t {
    // SAFETY: `status` is an int we own; waitpid has no other memory preconditions.
    unsafe { libc::waitpid(pid, status, flags) }
}

/// `kill(pid, sig)`: 0, or -1 with errno.
pub(crate) fn kill(pid: libc::pid_t, sig: c_int) -> c_int {
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(pid, sig) }
}
