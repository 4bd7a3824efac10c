//! The system calls perfwatch makes, as safe functions: the one module where `unsafe` is
//! allowed (the crate root denies it everywhere else, see src/lib.rs).
//!
//! Each wrapper keeps the call's own convention (a `c_int`/`isize` result with `errno` left for
//! `io::Error::last_os_error()`) unless it hands out a descriptor, which comes back owned
//! (`io::Result<OwnedFd>`) so no caller has to trust a raw number. What makes each call sound
//! is said once, here, beside it. It imports nothing of perfwatch's: it is the ground floor.
//!
//! Not here yet (files that still allow `unsafe` themselves, each named in ARCHITECTURE.md):
//! the ring mapping (src/perf/ring.rs), and the Python C API calls (src/script/).

pub(crate) mod as_user;
pub mod fs;
pub mod perf;
pub(crate) mod process;
pub(crate) mod tty;

use std::ffi::{c_int, c_long, c_ulong};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `clock_gettime(clock)` in nanoseconds (0 for a clock the kernel does not have).
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The current disposition of `sig`, or `None` when sigaction refuses (an invalid signal).
pub fn disposition(sig: c_int) -> Option<libc::sigaction> {
    let mut old = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: reading the current disposition into a valid out-parameter; nothing is changed.
    let ok = unsafe { libc::sigaction(sig, std::ptr::null(), old.as_mut_ptr()) } == 0;
    // SAFETY: filled by sigaction when it succeeded.
    ok.then(|| unsafe { old.assume_init() })
}

/// Give the allocator's free memory back to the system (glibc's `malloc_trim(0)`).
pub(crate) fn malloc_trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of the allocator to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// glibc's allocator tuned to at most `arenas` malloc arenas, trimming free memory past
/// `trim_threshold` bytes at an arena's top (`mallopt(M_ARENA_MAX)`, `M_TRIM_THRESHOLD`).
pub(crate) fn malloc_tune(arenas: c_int, trim_threshold: c_int) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes the allocator's tuning; no pointer is passed.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas);
        libc::mallopt(libc::M_TRIM_THRESHOLD, trim_threshold);
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = (arenas, trim_threshold);
}

/// Give the calling thread (only) the nice value `nice`; -1 with errno when not allowed.
pub(crate) fn set_thread_nice(nice: c_int) -> c_int {
    // SAFETY: gettid and setpriority take no pointers; the thread id is this thread's.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, nice)
    }
}

/// `poll(2)` over `fds`: the count of ready entries, or -1 with errno.
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: c_int) -> c_int {
    // SAFETY: `fds` is a live, initialised array of `fds.len()` pollfd structs that poll only
    // writes `revents` of, for the duration of the call.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) }
}

/// `ppoll(2)` over `fds` with a timeout and no change of the signal mask.
pub(crate) fn ppoll(fds: &mut [libc::pollfd], timeout: &libc::timespec) -> c_int {
    // SAFETY: as for poll; the timespec is borrowed for the call; a null mask changes nothing.
    unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            timeout,
            std::ptr::null(),
        )
    }
}

/// `read(2)` into `buf`: bytes read, or -1 with errno.
pub fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> isize {
    // SAFETY: `buf` is valid for writes of its length; the fd is borrowed, so open.
    unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) }
}

/// Descriptor 1 by number: no `io::stdout()` handle, lock or buffer (what a writer left
/// blocked at exit must not hold).
pub(crate) fn stdout_fd() -> BorrowedFd<'static> {
    // SAFETY: std borrows fd 1 the same way for its own `Stdout` handle: the number stays
    // allocated for the process's life (a closed stdout makes calls on it fail with EBADF,
    // which callers handle as the write error it is).
    unsafe { BorrowedFd::borrow_raw(libc::STDOUT_FILENO) }
}

/// Descriptor 2 by number, as [`stdout_fd`].
pub(crate) fn stderr_fd() -> BorrowedFd<'static> {
    // SAFETY: as for `stdout_fd`, for fd 2.
    unsafe { BorrowedFd::borrow_raw(libc::STDERR_FILENO) }
}

/// `pipe2(O_CLOEXEC)`: the read end, then the write end.
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own; the result is checked.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: two new descriptors, each owned once.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `fcntl(fd, F_GETPIPE_SZ)`: the capacity of the pipe behind `fd`, in bytes.
#[cfg(test)]
pub(crate) fn pipe_size(fd: BorrowedFd<'_>) -> io::Result<usize> {
    // SAFETY: F_GETPIPE_SZ on a borrowed (so open) descriptor takes no argument.
    let n = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETPIPE_SZ) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// `write(2)` of `buf`: bytes written, or -1 with errno.
pub fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> isize {
    // SAFETY: `buf` is valid for reads of its length; the fd is borrowed, so open.
    unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) }
}

/// `uname(2)`: (sysname, nodename, release, version, machine), or `None` when it fails.
pub(crate) fn uname() -> Option<[Vec<u8>; 5]> {
    // SAFETY: a zeroed utsname is a valid value of this plain C struct.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uname writes into the struct we own.
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    let field = |s: &[libc::c_char]| -> Vec<u8> {
        s.iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect()
    };
    Some([
        field(&u.sysname),
        field(&u.nodename),
        field(&u.release),
        field(&u.version),
        field(&u.machine),
    ])
}

/// `sysconf(name)`: -1 for a name the system does not know.
pub(crate) fn sysconf(name: c_int) -> c_long {
    // SAFETY: sysconf has no memory-safety preconditions.
    unsafe { libc::sysconf(name) }
}

/// The effective uid of this process.
pub fn geteuid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// `getauxval(type)`: 0 when the auxiliary vector has no such entry.
pub(crate) fn getauxval(type_: c_ulong) -> c_ulong {
    // SAFETY: getauxval only reads the process's auxiliary vector.
    unsafe { libc::getauxval(type_) }
}

/// A new eventfd.
pub(crate) fn eventfd(init: u32, flags: c_int) -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes no pointers.
    let fd = unsafe { libc::eventfd(init, flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd from eventfd, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `getrlimit(resource)`.
pub fn getrlimit(resource: libc::__rlimit_resource_t) -> io::Result<libc::rlimit> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into a struct we own.
    if unsafe { libc::getrlimit(resource, &mut r) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r)
}

/// `setrlimit(resource, limit)`.
pub fn setrlimit(resource: libc::__rlimit_resource_t, limit: &libc::rlimit) -> io::Result<()> {
    // SAFETY: setrlimit reads a struct we borrow.
    if unsafe { libc::setrlimit(resource, limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Set the calling thread's nice value (`setpriority` on its tid); best effort.
pub(crate) fn nice_this_thread(nice: c_int) {
    // SAFETY: gettid and setpriority take no pointers; they act on this thread only.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, nice);
    }
}

/// This process's vDSO image, in place: the range `/proc/self/maps` names `[vdso]`, if it
/// starts where the auxiliary vector says (`AT_SYSINFO_EHDR`) and is at most 1 MiB.
pub(crate) fn vdso_image() -> Option<&'static [u8]> {
    static IMAGE: std::sync::OnceLock<Option<&'static [u8]>> = std::sync::OnceLock::new();
    *IMAGE.get_or_init(|| {
        let base = getauxval(libc::AT_SYSINFO_EHDR) as u64;
        if base == 0 {
            return None;
        }
        let maps = std::fs::read("/proc/self/maps").ok()?;
        let (start, end) = maps.split(|&b| b == b'\n').find_map(|line| {
            if !line.ends_with(b"[vdso]") {
                return None;
            }
            let range = line.split(|&b| b == b' ').next()?;
            let dash = range.iter().position(|&b| b == b'-')?;
            let s = u64::from_str_radix(std::str::from_utf8(&range[..dash]).ok()?, 16).ok()?;
            let e = u64::from_str_radix(std::str::from_utf8(&range[dash + 1..]).ok()?, 16).ok()?;
            Some((s, e))
        })?;
        if start != base || end <= start || end - start > 1 << 20 {
            return None;
        }
        // SAFETY: the kernel maps the vDSO readable at [start, end) for the life of the
        // process, and nothing in perfwatch unmaps it.
        Some(unsafe { std::slice::from_raw_parts(start as *const u8, (end - start) as usize) })
    })
}
