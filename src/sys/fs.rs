//! The `*at` file calls: relative to a directory descriptor, with NUL-terminated names.

use std::ffi::{CStr, c_int};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `openat(dir, name, flags | O_CLOEXEC, mode)`.
pub fn openat(dir: BorrowedFd<'_>, name: &CStr, flags: c_int, mode: u32) -> io::Result<OwnedFd> {
    // SAFETY: a valid directory fd and a NUL-terminated name; the result is checked.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            mode,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `fstatat(dir, name, flags)`.
pub(crate) fn fstatat(dir: BorrowedFd<'_>, name: &CStr, flags: c_int) -> io::Result<libc::stat> {
    // SAFETY: a zeroed stat is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid fd, a NUL-terminated name and a stat buffer we own.
    let r = unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &mut st, flags) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// `readlinkat(dir, name)` into `buf`: the bytes of the link's target written.
pub(crate) fn readlinkat(dir: BorrowedFd<'_>, name: &CStr, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: a valid fd, a NUL-terminated name, a buffer valid for writes of its length.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// `renameat(dir, from, dir, to)`: within one directory.
pub(crate) fn renameat(dir: BorrowedFd<'_>, from: &CStr, to: &CStr) -> io::Result<()> {
    let d = dir.as_raw_fd();
    // SAFETY: a live directory descriptor and NUL-terminated names in it.
    if unsafe { libc::renameat(d, from.as_ptr(), d, to.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `unlinkat(dir, name, flags)`.
pub(crate) fn unlinkat(dir: BorrowedFd<'_>, name: &CStr, flags: c_int) -> io::Result<()> {
    // SAFETY: a live directory descriptor and a NUL-terminated name.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `open(path, flags)` (the caller's flags, `O_CLOEXEC` among them).
pub(crate) fn open(path: &CStr, flags: c_int) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated path; the result is checked.
    let fd = unsafe { libc::open(path.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `openat2(dir, name, {flags, resolve})` (no mode: nothing is created).
pub(crate) fn openat2(
    dir: BorrowedFd<'_>,
    name: &CStr,
    flags: u64,
    resolve: u64,
) -> io::Result<OwnedFd> {
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let how = OpenHow {
        flags,
        mode: 0,
        resolve,
    };
    // SAFETY: openat2 with a live directory descriptor, a NUL-terminated name and an
    // open_how of the size passed; the result is checked.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            name.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as c_int) })
}

/// `fstat(fd)`.
pub(crate) fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    // SAFETY: a zeroed stat is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a live descriptor and a stat buffer of the right type.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// `fstatfs(fd)`.
pub(crate) fn fstatfs(fd: BorrowedFd<'_>) -> io::Result<libc::statfs> {
    // SAFETY: a zeroed statfs is a valid value of this plain C struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a live descriptor and a statfs buffer of the right type.
    if unsafe { libc::fstatfs(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// `mkfifo(path, mode)`.
#[cfg(test)]
pub(crate) fn mkfifo(path: &CStr, mode: libc::mode_t) -> io::Result<()> {
    // SAFETY: a NUL-terminated path.
    if unsafe { libc::mkfifo(path.as_ptr(), mode) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
