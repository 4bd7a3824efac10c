//! Opening a path as another user: in a short-lived child forked for it, that drops to the
//! user's ids and groups, opens the path as the kernel lets that user, and passes the
//! descriptor back (`SCM_RIGHTS`). src/symbols/as_owner.rs says why and checks what comes
//! back; the fork, the child's side and the message passing are here, so that what the
//! child may do after the fork of a threaded process (system calls only, nothing
//! allocated, nothing of the user's) is checked in one place.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// What the child sends when the path is not a regular file (else an errno, or 0).
pub(crate) const NOT_REGULAR: i32 = -1;

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// Everything the child needs, made before the fork (the child must not allocate).
struct ChildPlan {
    root: i32,
    rel: CString,
    how: OpenHow,
    groups: Vec<libc::gid_t>,
    uid: u32,
    gid: u32,
    sock: i32,
}

impl ChildPlan {
    /// Runs in the forked child: system calls only, then `_exit`.
    fn run(&self) -> ! {
        // SAFETY (the whole function): raw system calls with arguments prepared before the
        // fork; no allocation, no lock, no code of the user's. `_exit` ends the child.
        unsafe {
            // perfwatch's handlers (a stop request, the terminal's restore) are not the
            // child's to run: every signal waits, and SIGKILL ends it with perfwatch.
            let mut all: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            let dropped =
                libc::syscall(libc::SYS_setgroups, self.groups.len(), self.groups.as_ptr()) == 0
                    && libc::syscall(libc::SYS_setresgid, self.gid, self.gid, self.gid) == 0
                    && libc::syscall(libc::SYS_setresuid, self.uid, self.uid, self.uid) == 0;
            if !dropped {
                self.fail(libc::EPERM);
            }
            // Reopening through /proc/self/fd needs the child to be able to look at itself.
            libc::prctl(libc::PR_SET_DUMPABLE, 1);
            let path_fd = libc::syscall(
                libc::SYS_openat2,
                self.root,
                self.rel.as_ptr(),
                &self.how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            );
            if path_fd < 0 {
                self.fail(*libc::__errno_location());
            }
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(path_fd as i32, &mut st) != 0 {
                self.fail(*libc::__errno_location());
            }
            if st.st_mode & libc::S_IFMT != libc::S_IFREG {
                self.fail(NOT_REGULAR);
            }
            // "/proc/self/fd/" and the number, in a stack buffer.
            let mut path = *b"/proc/self/fd/\0\0\0\0\0\0\0\0\0\0\0\0";
            let mut digits = [0u8; 12];
            let (mut n, mut len) = (path_fd as u64, 0);
            loop {
                digits[len] = b'0' + (n % 10) as u8;
                len += 1;
                n /= 10;
                if n == 0 {
                    break;
                }
            }
            for i in 0..len {
                path[14 + i] = digits[len - 1 - i];
            }
            let fd = libc::open(
                path.as_ptr() as *const libc::c_char,
                libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC,
            );
            if fd < 0 {
                self.fail(*libc::__errno_location());
            }
            self.send(0, fd);
            libc::_exit(0);
        }
    }

    /// Send `code` (and `fd` when it is one) to the parent.
    fn send(&self, code: i32, fd: i32) {
        // SAFETY: a message of one i32 and, with a descriptor, one SCM_RIGHTS control
        // message in a buffer of CMSG_SPACE bytes, all on the stack; sendmsg only reads them.
        unsafe {
            let mut data = code;
            let mut iov = libc::iovec {
                iov_base: &mut data as *mut i32 as *mut libc::c_void,
                iov_len: std::mem::size_of::<i32>(),
            };
            let mut control = [0u64; 4];
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            if fd >= 0 {
                msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
                msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<i32>() as u32) as usize;
                let cmsg = libc::CMSG_FIRSTHDR(&msg);
                (*cmsg).cmsg_level = libc::SOL_SOCKET;
                (*cmsg).cmsg_type = libc::SCM_RIGHTS;
                (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<i32>() as u32) as usize;
                std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut i32, fd);
            }
            libc::sendmsg(self.sock, &msg, libc::MSG_NOSIGNAL);
        }
    }

    fn fail(&self, code: i32) -> ! {
        self.send(if code == 0 { libc::EIO } else { code }, -1);
        // SAFETY: _exit ends the child without running anything of the parent's.
        unsafe { libc::_exit(1) }
    }
}

/// Open `rel` (relative to `root`, resolved inside it, the last component not followed) in a
/// child forked for it that has dropped to `(uid, gid, groups)` first; waited for until
/// `timeout` (a child late to answer is killed, and reaped by a thread of its own). The
/// answer: 0 and the file, [`NOT_REGULAR`], or the errno of the step that failed.
pub(crate) fn open_in_child(
    root: BorrowedFd<'_>,
    rel: &CStr,
    (uid, gid, groups): (u32, u32, &[libc::gid_t]),
    timeout: Duration,
) -> io::Result<(i32, Option<File>)> {
    let mut socks = [0i32; 2];
    // SAFETY: socketpair fills the two-element array; the result is checked.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            socks.as_mut_ptr(),
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just made and are ours.
    let (mine, theirs) = unsafe {
        (
            OwnedFd::from_raw_fd(socks[0]),
            OwnedFd::from_raw_fd(socks[1]),
        )
    };
    let plan = ChildPlan {
        root: root.as_raw_fd(),
        rel: rel.to_owned(),
        how: OpenHow {
            flags: (libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64,
            mode: 0,
            resolve: libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS,
        },
        groups: groups.to_vec(),
        uid,
        gid,
        sock: theirs.as_raw_fd(),
    };
    // SAFETY: the child only runs `plan.run`, which makes system calls and `_exit`s.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err(io::Error::last_os_error());
    }
    if child == 0 {
        plan.run();
    }
    drop(theirs);
    let got = receive(&mine, timeout);
    reap(child, got.is_err());
    got
}

/// The child's answer, waited for until `timeout`.
fn receive(sock: &OwnedFd, timeout: Duration) -> io::Result<(i32, Option<File>)> {
    let until = Instant::now() + timeout;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let mut p = libc::pollfd {
            fd: sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd; the result is checked.
        let n = unsafe { libc::poll(&mut p, 1, left.as_millis().min(60_000) as i32) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::TimedOut));
        }
        break;
    }
    let mut data: i32 = libc::EIO;
    let mut control = [0u64; 4];
    // SAFETY: a message header pointing at a local i32 and a local control buffer of the
    // size given; recvmsg writes within them; the result is checked.
    let (n, msg) = unsafe {
        let mut iov = libc::iovec {
            iov_base: &mut data as *mut i32 as *mut libc::c_void,
            iov_len: std::mem::size_of::<i32>(),
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&control);
        let n = libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
        (n, msg)
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n == 0 {
        // The child ended without a word (killed).
        return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
    }
    let mut file = None;
    // SAFETY: walking the control messages recvmsg filled in, within msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let fd = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const i32);
                // The descriptor is ours now (received, close-on-exec).
                file = Some(File::from_raw_fd(fd));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((data, file))
}

/// Wait for the child; one that did not answer in time is killed and reaped by a thread
/// of its own (a child stuck in an uninterruptible open must not hold up the symbolizer).
fn reap(child: libc::pid_t, late: bool) {
    if late {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child, libc::SIGKILL) };
        let spawned = std::thread::Builder::new()
            .name("perfwatch-reap".into())
            .spawn(move || wait(child));
        if spawned.is_ok() {
            return;
        }
    }
    wait(child);
}

fn wait(child: libc::pid_t) {
    let mut status = 0;
    // SAFETY: waiting for our own child; retried on EINTR.
    while unsafe { libc::waitpid(child, &mut status, 0) } < 0
        && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
    {}
}
