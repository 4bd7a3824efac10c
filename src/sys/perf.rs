//! `perf_event_open(2)` and the ioctls on its descriptors.

use std::ffi::c_ulong;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use perf_event_open_sys as pe;
use perf_event_open_sys::bindings::perf_event_attr;

/// `perf_event_open(attr, pid, cpu, group_fd -1, flags)`: the event's descriptor, or the
/// kernel's refusal (EINTR included: the caller decides to retry).
pub fn open(attr: &mut perf_event_attr, pid: i32, cpu: i32, flags: c_ulong) -> io::Result<OwnedFd> {
    // SAFETY: attr is a valid, initialised perf_event_attr we borrow mutably (the kernel
    // writes its `size` back on E2BIG).
    let fd = unsafe { pe::perf_event_open(attr, pid, cpu, -1, flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just gave us this fd; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// PERF_EVENT_IOC_SET_OUTPUT: `fd`'s records go into the ring of `target` (-1: its own).
pub(crate) fn set_output(fd: BorrowedFd<'_>, target: i32) -> io::Result<()> {
    // SAFETY: the ioctl takes a descriptor number, not a pointer; a wrong one is refused.
    if unsafe { pe::ioctls::SET_OUTPUT(fd.as_raw_fd(), target) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// PERF_EVENT_IOC_ID: the event's id, as samples carry it.
pub fn id(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut id = 0u64;
    // SAFETY: the kernel writes one u64 into `id`, which we own.
    if unsafe { pe::ioctls::ID(fd.as_raw_fd(), &mut id) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(id)
}

/// PERF_EVENT_IOC_ENABLE.
pub fn enable(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: the ioctl takes no pointer (argument 0).
    if unsafe { pe::ioctls::ENABLE(fd.as_raw_fd(), 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// PERF_EVENT_IOC_DISABLE.
pub(crate) fn disable(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: the ioctl takes no pointer (argument 0).
    if unsafe { pe::ioctls::DISABLE(fd.as_raw_fd(), 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The bytes of an attribute, as `perf_event_open` reads them.
pub(crate) fn attr_bytes(a: &perf_event_attr) -> Vec<u8> {
    let n = std::mem::size_of::<perf_event_attr>();
    // SAFETY: `a` is a live, initialised plain C struct of `n` bytes without padding (the
    // kernel's ABI struct), read only for the duration of the borrow.
    unsafe { std::slice::from_raw_parts((a as *const perf_event_attr).cast::<u8>(), n) }.to_vec()
}
