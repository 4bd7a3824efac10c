//! Opening a file that a monitored process names, with that process's own credentials.
//!
//! A JIT's perf map lies in `/tmp` as its process sees it: inside the process's mount
//! namespace, which its user may have made (`unshare -Urm`) and filled with bind mounts. Root
//! resolving the path there would open whatever the user mounted over it: a root-only file,
//! `/proc/<root daemon>/syscall`, `/proc/kmsg` (and drain it). So the file is opened in a
//! short-lived child that has dropped to the process's user and groups (no capability left),
//! and passed back as a descriptor (`SCM_RIGHTS`): the kernel's permission checks are the
//! user's, exactly as if the user had opened it. The child runs no code but system calls
//! (it is forked from a threaded process), never anything of the user's, and is waited for
//! with a deadline. The parent then checks what it got: a regular file owned by the process's
//! user, on no pseudo filesystem ([`is_pseudo_fs`]).
//!
//! The fork, the child's side and the descriptor passing are `sys::as_user`.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use super::fs::{OpenError, Opened, fstat};
use crate::sys;

/// The user and groups a process accesses files with (`/proc/PID/status`: the fs uid and
/// gid, and its supplementary groups).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Creds {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

/// The fields of a `/proc/PID/status` text: the fourth (fs) id of `Uid:` and `Gid:`, and
/// `Groups:`.
pub(crate) fn parse_status(status: &[u8]) -> Option<Creds> {
    let field = |name: &[u8]| -> Option<&[u8]> {
        status
            .split(|&b| b == b'\n')
            .find_map(|l| l.strip_prefix(name))
    };
    let nums = |l: &[u8]| -> Option<Vec<u32>> {
        l.split(|b| b.is_ascii_whitespace())
            .filter(|f| !f.is_empty())
            .map(|f| std::str::from_utf8(f).ok()?.parse().ok())
            .collect()
    };
    let uid = *nums(field(b"Uid:")?)?.get(3)?;
    let gid = *nums(field(b"Gid:")?)?.get(3)?;
    let groups = nums(field(b"Groups:").unwrap_or(b""))?;
    Some(Creds { uid, gid, groups })
}

/// The credentials process `pid` opens files with; `None` once it has gone.
pub(crate) fn creds_of(pid: u32) -> Option<Creds> {
    parse_status(&std::fs::read(format!("/proc/{pid}/status")).ok()?)
}

/// Filesystems whose files are the kernel's, not anyone's data: never read as a perf map,
/// whoever owns the file.
pub(crate) fn is_pseudo_fs(magic: i64) -> bool {
    const PSEUDO: [i64; 13] = [
        0x9fa0,      // proc
        0x6265_6572, // sysfs
        0x6462_6720, // debugfs
        0x7472_6163, // tracefs
        0x7363_6673, // securityfs
        0x0027_e0eb, // cgroup
        0x6367_7270, // cgroup2
        0xcafe_4a11, // bpf
        0x6265_6570, // configfs
        0x6165_676c, // pstore
        0xde5e_81e4, // efivarfs
        0x1cd1,      // devpts
        0xf97c_ff8c, // selinuxfs
    ];
    PSEUDO.contains(&magic)
}

/// Why a file was not opened as its process's user.
#[derive(Debug)]
pub(crate) enum Refused {
    Open(OpenError),
    /// A regular file, but another user's (its uid).
    NotOwned(u32),
}

impl From<OpenError> for Refused {
    fn from(e: OpenError) -> Refused {
        Refused::Open(e)
    }
}

/// Open `rel` (a path relative to the root `root`, resolved inside it, the last component
/// not followed) as `creds`, within `timeout`; the result is checked as the module says.
pub(crate) fn open(
    root: &OwnedFd,
    rel: &[u8],
    creds: &Creds,
    timeout: Duration,
) -> Result<Opened, Refused> {
    let file = open_in_child(root, rel, creds, timeout)?;
    let st = fstat(&file).map_err(OpenError::Io)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(OpenError::NotRegular("special file").into());
    }
    if super::fs::fs_magic(&file).is_none_or(is_pseudo_fs) {
        return Err(OpenError::NotRegular("a kernel file on procfs, sysfs or the like").into());
    }
    if st.st_uid != creds.uid {
        return Err(Refused::NotOwned(st.st_uid));
    }
    Ok(Opened::of(file, &st))
}

/// How long the child that opens a perf map may take: a backstop for an open that never
/// returns (a hung mount), longer than the loader's own deadline, which is what a slow
/// open (a fork on a loaded machine) meets first, and whose read is then used when it ends.
const CHILD_DEADLINE: Duration = Duration::from_secs(10);

/// The last `NSpid` of a live process: its pid inside its own pid namespace, which its JIT
/// uses in the map's name.
fn ns_pid(pid: u32) -> Option<u32> {
    let status = std::fs::read(format!("/proc/{pid}/status")).ok()?;
    let line = status
        .split(|&b| b == b'\n')
        .find(|l| l.starts_with(b"NSpid:"))?;
    let last = line[6..]
        .split(|b| b.is_ascii_whitespace())
        .rfind(|f| !f.is_empty())?;
    std::str::from_utf8(last).ok()?.parse().ok()
}

fn open_dir(path: &str) -> Result<OwnedFd, OpenError> {
    let c = CString::new(path).map_err(|_| OpenError::NotFound)?;
    sys::fs::open(&c, libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC).map_err(|e| {
        match e.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ESRCH) => OpenError::NotFound,
            _ => OpenError::Io(e),
        }
    })
}

/// Open the perf map of process `pid`. While it lives: `/tmp/perf-NSPID.map` inside its own
/// root and mount namespace, then `/tmp/perf-PID.map` here, each opened as the process's user
/// ([`open`]). Once it has gone, `/tmp/perf-PID.map` here as root, and only a file of root's
/// or perfwatch's own user with no other hard link (nobody else could have put it there).
pub(crate) fn open_perf_map(pid: u32) -> Result<Opened, Refused> {
    let name = |p: u32| format!("/tmp/perf-{p}.map");
    let Some(creds) = creds_of(pid) else {
        return open_left_behind(name(pid).as_bytes());
    };
    let ns = ns_pid(pid);
    if surely_absent(pid, ns) {
        return Err(Refused::Open(OpenError::NotFound));
    }
    let mut result = Err(Refused::Open(OpenError::NotFound));
    if let Some(ns) = ns {
        let root = open_dir(&format!("/proc/{pid}/root"))?;
        result = open(&root, name(ns).as_bytes(), &creds, CHILD_DEADLINE);
    }
    if matches!(result, Err(Refused::Open(OpenError::NotFound))) {
        let root = open_dir("/")?;
        result = open(&root, name(pid).as_bytes(), &creds, CHILD_DEADLINE);
    }
    result
}

/// Whether the process's perf map surely does not exist, known without the child: no name
/// the child would try is there. Most processes have no map, and their maps are looked for
/// again every second while they are sampled; a fork of perfwatch (tens of MB of page tables
/// to copy, and every page written afterwards faults once) for each look was most of the
/// headless agent's CPU time on a busy machine. A process that sees the mount namespace and
/// root perfwatch sees has both names looked up in perfwatch's own `/tmp`; one in another
/// (a container's) has its namespace's name looked up in its own `/tmp`, through its root
/// (`/proc/PID/root`), and its host pid's name in perfwatch's: on a host of containers,
/// nearly every sampled process is one (and other engineers' sandboxed builds were most of
/// the agent's forks here).
///
/// Each look is a path lookup only (`O_PATH`: nothing is opened, read or drained) of one
/// name, with no symbolic link followed, not made when the filesystem of the `/tmp` looked
/// into is one whose lookups can wait on someone else. Root sees every name the process's
/// user sees, so "no such file" as root is "no such file" as its user; any other answer
/// leaves the question to the child.
fn surely_absent(pid: u32, ns: Option<u32>) -> bool {
    let link = |p: String| std::fs::read_link(p).ok();
    let same_view = link(format!("/proc/{pid}/root")).is_some_and(|r| r.as_os_str() == "/")
        && link(format!("/proc/{pid}/ns/mnt"))
            .is_some_and(|m| Some(m) == link("/proc/self/ns/mnt".into()));
    let Some(tmp) = our_tmp() else {
        return false;
    };
    // Beneath perfwatch's /tmp, on its filesystem.
    let here = libc::RESOLVE_BENEATH
        | libc::RESOLVE_NO_XDEV
        | libc::RESOLVE_NO_SYMLINKS
        | libc::RESOLVE_NO_MAGICLINKS;
    if same_view {
        let names = [Some(pid), ns.filter(|&n| n != pid)];
        return names
            .iter()
            .flatten()
            .all(|n| absent_at(tmp, &format!("perf-{n}.map"), here));
    }
    // The child looks in the process's own /tmp first (by its namespace's pid), then in
    // perfwatch's (by the host's).
    if !absent_at(tmp, &format!("perf-{pid}.map"), here) {
        return false;
    }
    match ns {
        Some(n) => absent_in_their_tmp(pid, n),
        None => true,
    }
}

/// Whether `/tmp/perf-N.map` is surely absent in process `pid`'s root and mount namespace:
/// its `/tmp` is on a filesystem whose lookups cannot wait on someone else (its own
/// mountinfo says), and the name, looked up within its root (`RESOLVE_IN_ROOT`: `..` and
/// absolute links stay inside) without following any link, is not there.
fn absent_in_their_tmp(pid: u32, n: u32) -> bool {
    let Ok(info) = std::fs::read(format!("/proc/{pid}/mountinfo")) else {
        return false;
    };
    if tmp_fstype(&info).is_none_or(super::mounts::can_hang) {
        return false;
    }
    let Ok(root) = open_dir(&format!("/proc/{pid}/root")) else {
        return false;
    };
    let inside = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    absent_at(&root, &format!("tmp/perf-{n}.map"), inside)
}

/// Whether the lookup of `path` from directory `dir` (`O_PATH`, with openat2's `resolve`
/// rules) says "no such file". A name that is there (whatever it is) or any other error:
/// false.
fn absent_at(dir: &OwnedFd, path: &str, resolve: u64) -> bool {
    let Ok(name) = CString::new(path) else {
        return false;
    };
    use std::os::fd::AsFd;
    // A descriptor returned is closed at once (dropped).
    let flags = (libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64;
    match crate::sys::fs::openat2(dir.as_fd(), &name, flags, resolve) {
        Ok(_) => false,
        Err(e) => e.raw_os_error() == Some(libc::ENOENT),
    }
}

/// perfwatch's own `/tmp` (`O_PATH`), unless its filesystem is one whose lookups can wait on
/// another program or machine (FUSE, NFS, ...: [`super::mounts::can_hang`]) or is not known.
fn our_tmp() -> Option<&'static OwnedFd> {
    static TMP: std::sync::OnceLock<Option<OwnedFd>> = std::sync::OnceLock::new();
    TMP.get_or_init(|| {
        let info = std::fs::read("/proc/self/mountinfo").ok()?;
        let fstype = tmp_fstype(&info)?;
        if super::mounts::can_hang(fstype) {
            return None;
        }
        open_dir("/tmp").ok()
    })
    .as_ref()
}

/// The filesystem type of the mount `/tmp` is on, from a mountinfo text: the last mount on
/// `/tmp` itself, else on `/`.
fn tmp_fstype(mountinfo: &[u8]) -> Option<&[u8]> {
    let mut best: Option<(usize, &[u8])> = None;
    for line in mountinfo.split(|&b| b == b'\n') {
        let fields: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
        let (Some(&point), Some(dash)) = (fields.get(4), fields.iter().position(|f| *f == b"-"))
        else {
            continue;
        };
        let Some(&fstype) = fields.get(dash + 1) else {
            continue;
        };
        let rank = match point {
            b"/tmp" => 2,
            b"/" => 1,
            _ => continue,
        };
        if best.is_none_or(|(r, _)| rank >= r) {
            best = Some((rank, fstype));
        }
    }
    best.map(|(_, f)| f)
}

/// The map of a process that has gone, read as root.
fn open_left_behind(path: &[u8]) -> Result<Opened, Refused> {
    let o = super::fs::open_regular(path, true)?;
    let me = sys::geteuid();
    if o.uid != 0 && o.uid != me {
        return Err(Refused::NotOwned(o.uid));
    }
    if fstat(&o.file).map_err(OpenError::Io)?.st_nlink != 1 {
        return Err(OpenError::NotRegular("a file with other hard links").into());
    }
    if super::fs::fs_magic(&o.file).is_none_or(is_pseudo_fs) {
        return Err(OpenError::NotRegular("a kernel file on procfs, sysfs or the like").into());
    }
    Ok(o)
}

fn open_in_child(
    root: &OwnedFd,
    rel: &[u8],
    creds: &Creds,
    timeout: Duration,
) -> Result<File, OpenError> {
    let rel =
        CString::new(rel.strip_prefix(b"/").unwrap_or(rel)).map_err(|_| OpenError::NotFound)?;
    let got = sys::as_user::open_in_child(
        root.as_fd(),
        &rel,
        (creds.uid, creds.gid, &creds.groups),
        timeout,
    )
    .map_err(OpenError::Io)?;
    match got {
        (0, Some(file)) => Ok(file),
        (sys::as_user::NOT_REGULAR, _) => Err(OpenError::NotRegular("not a regular file")),
        (code, _) => Err(match code {
            libc::ENOENT | libc::ENOTDIR | libc::ESRCH => OpenError::NotFound,
            libc::ELOOP => OpenError::NotRegular("symbolic link"),
            libc::ENOSYS => OpenError::Unsupported,
            c => OpenError::Io(io::Error::from_raw_os_error(c)),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_without_a_map_is_known_to_have_none_without_a_fork_and_a_new_map_is_seen() {
        use std::process::{Command, Stdio};
        let mut child = Command::new("sleep")
            .arg("30")
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        let path = format!("/tmp/perf-{pid}.map");
        let _ = std::fs::remove_file(&path);
        let ns = ns_pid(pid);
        // perfwatch's tests run in the namespace and root the child inherits.
        let absent = surely_absent(pid, ns);
        // A map written later is seen at once (a file, or a name in any form).
        std::fs::write(&path, "1000 10 jitted\n").unwrap();
        let after_write = surely_absent(pid, ns);
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/nonexistent", &path).unwrap();
        let after_link = surely_absent(pid, ns);
        std::fs::remove_file(&path).unwrap();
        // A process that has gone: not this function's to say (read as root elsewhere).
        child.kill().unwrap();
        child.wait().unwrap();
        let gone = surely_absent(pid, ns);
        assert!(absent, "no map, same namespace: absent");
        assert!(!after_write, "a map written later must be opened");
        assert!(!after_link, "a name in any form must be opened as its user");
        assert!(!gone, "a gone process is not in perfwatch's namespace");
    }

    #[test]
    fn a_containers_perf_map_is_looked_for_in_its_own_tmp_and_ours_without_the_child() {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        // A process in a mount namespace of its own, with a tmpfs of its own on /tmp (as a
        // container's, or a service's with PrivateTmp=).
        let spawned = Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c"])
            .arg("mount -t tmpfs pw-test /tmp && echo ready && exec sleep 30")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => return skip_unless_ci(&format!("unshare(1) did not start: {e}")),
        };
        let mut line = String::new();
        let _ = std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
        if line.trim() != "ready" {
            let _ = child.kill();
            let _ = child.wait();
            return skip_unless_ci("no mount namespace with a tmpfs of its own (not root?)");
        }
        let pid = child.id();
        let ns = ns_pid(pid);
        let theirs = format!("/proc/{pid}/root/tmp/perf-{}.map", ns.unwrap_or(pid));
        let ours = format!("/tmp/perf-{pid}.map");
        let _ = std::fs::remove_file(&ours);
        let absent = surely_absent(pid, ns);
        std::fs::write(&theirs, b"1000 10 jitted\n").unwrap();
        let in_theirs = surely_absent(pid, ns);
        std::fs::remove_file(&theirs).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", &theirs).unwrap();
        let link_in_theirs = surely_absent(pid, ns);
        std::fs::remove_file(&theirs).unwrap();
        std::fs::write(&ours, b"1000 10 jitted\n").unwrap();
        let in_ours = surely_absent(pid, ns);
        std::fs::remove_file(&ours).unwrap();
        let again = surely_absent(pid, ns);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(ns.is_some(), "NSpid not read");
        assert!(
            absent,
            "no map in its /tmp nor ours: absent without the child"
        );
        assert!(!in_theirs, "a map in its own /tmp was taken for absent");
        assert!(
            !link_in_theirs,
            "a name in any form must be opened as its user"
        );
        assert!(
            !in_ours,
            "a map in our /tmp by its host pid was taken for absent"
        );
        assert!(again, "absent again once removed");
    }

    /// A test that needs root and unshare(1): a visible skip, a failure under `CI=true`.
    fn skip_unless_ci(why: &str) {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
        use std::io::Write;
        let _ = std::io::stderr().write_all(format!("\nSKIPPED: {why}\n").as_bytes());
    }

    #[test]
    fn status_gives_the_fs_ids_and_groups() {
        let status =
            b"Name:\tx\nUid:\t1001\t1002\t1003\t1004\nGid:\t5\t6\t7\t8\nGroups:\t27 100 \n";
        assert_eq!(
            parse_status(status),
            Some(Creds {
                uid: 1004,
                gid: 8,
                groups: vec![27, 100]
            })
        );
        let none = b"Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\n";
        assert_eq!(parse_status(none).map(|c| c.groups), Some(vec![]));
        assert_eq!(parse_status(b"Uid:\t1\n"), None);
        assert_eq!(parse_status(b"garbage"), None);
    }

    #[test]
    fn procfs_and_sysfs_are_pseudo_and_tmpfs_is_not() {
        let magic = |p: &str| super::super::fs::fs_magic(&File::open(p).unwrap()).unwrap();
        assert!(is_pseudo_fs(magic("/proc/self/status")));
        assert!(is_pseudo_fs(magic("/sys/kernel/uevent_seqnum")));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), b"x").unwrap();
        assert!(!is_pseudo_fs(magic(dir.path().join("f").to_str().unwrap())));
        assert!(!is_pseudo_fs(0x0102_1994));
    }

    #[test]
    fn tmp_is_on_its_own_mount_else_on_the_root() {
        let root = b"22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n";
        let tmp = b"30 22 0:26 / /tmp rw shared:5 - fuse.sshfs u@h: rw\n";
        let other = b"31 22 0:27 / /tmpx rw - nfs h:/x rw\n";
        let all = [&root[..], &other[..], &tmp[..]].concat();
        assert_eq!(tmp_fstype(&all), Some(&b"fuse.sshfs"[..]));
        assert_eq!(
            tmp_fstype(&[&root[..], &other[..]].concat()),
            Some(&b"ext4"[..])
        );
        assert_eq!(tmp_fstype(b"garbage\n"), None);
    }

    #[test]
    fn a_perf_map_in_our_tmp_is_looked_for_without_the_child_only_when_absent() {
        // This process sees its own namespace: the look decides "absent" alone, and leaves
        // a map that is there (or anything else there) to the child.
        let pid = std::process::id();
        let path = format!("/tmp/perf-{pid}.map");
        let _ = std::fs::remove_file(&path);
        if our_tmp().is_none() {
            return; // /tmp on a filesystem that is not looked into: the child always asks.
        }
        assert!(surely_absent(pid, Some(pid)));
        std::fs::write(&path, b"1000 10 jitted\n").unwrap();
        let there = surely_absent(pid, Some(pid));
        std::fs::remove_file(&path).unwrap();
        assert!(!there, "a map that exists was taken for absent");
        std::os::unix::fs::symlink("/etc/hostname", &path).unwrap();
        let link = surely_absent(pid, None);
        std::fs::remove_file(&path).unwrap();
        assert!(!link, "a symbolic link was taken for absent");
        // Another pid's name is looked at too when the process knows itself by it.
        let other = format!("/tmp/perf-{}.map", pid + 1_000_000);
        std::fs::write(&other, b"").unwrap();
        let ns = surely_absent(pid, Some(pid + 1_000_000));
        std::fs::remove_file(&other).unwrap();
        assert!(!ns);
    }
}
