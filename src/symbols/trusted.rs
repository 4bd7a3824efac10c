//! Opening a file only where its owners put it: for separate debug files, which perfwatch
//! looks for by name (a build id, a `.gnu_debuglink`) in places another user may control.
//!
//! As root, following a user's `prog.debug -> /root/private/prog` would read a file the user
//! cannot, and show its symbols as the user's. So a debug file is opened by walking its path
//! from `/` one component at a time, never following a link it has not judged, by the rules
//! `--script` uses for the same danger ([`crate::script`]'s path walk; kept apart here
//! because the symbolizer sits below the script stage):
//!
//! - every directory, link and the file itself belongs to someone the caller trusts (root,
//!   perfwatch's own user, and for a file beside a binary, that binary's owner);
//! - no directory on the way is writable by group or others unless it is sticky (`/tmp`)
//!   and the entry in it belongs to someone trusted;
//! - a symbolic link is followed only where the caller allows it (root's `/usr/lib/debug`
//!   tree, whose `.build-id` entries are links on Fedora), never beside a user's binary;
//! - the file is a regular file, not writable by group or others, judged on the descriptor
//!   it is then read from.
//!
//! [`judge`] is the rules as a pure function over what the walk saw, tested on crafted
//! metadata; [`open`] is the walk.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};

/// Whose files are trusted: root always, and up to two more users.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Trust {
    others: [Option<u32>; 2],
    /// Symbolic links (trusted ones, in safe directories) may be followed.
    pub follow_links: bool,
}

impl Trust {
    /// Root and perfwatch's own user; links followed (a system debug directory).
    pub(crate) fn system() -> Trust {
        let me = crate::sys::geteuid();
        Trust {
            others: [Some(me), None],
            follow_links: true,
        }
    }

    /// Also `owner` (a binary's, for the files beside it); no link is followed.
    pub(crate) fn beside(owner: u32) -> Trust {
        let mut t = Trust::system();
        t.others[1] = Some(owner);
        t.follow_links = false;
        t
    }

    fn trusts(&self, uid: u32) -> bool {
        uid == 0 || self.others.contains(&Some(uid))
    }
}

/// What one lookup of the walk found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    pub uid: u32,
    /// `st_mode`: type and permission bits.
    pub mode: u32,
}

impl Seen {
    fn of(st: &libc::stat) -> Seen {
        Seen {
            uid: st.st_uid,
            mode: st.st_mode,
        }
    }

    fn is(&self, ty: u32) -> bool {
        self.mode & libc::S_IFMT == ty
    }

    fn shared(&self) -> bool {
        self.mode & 0o022 != 0
    }
}

/// Why a candidate was not opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Nothing there, or not reachable.
    Missing,
    /// Owned by someone not trusted.
    Foreign(u32),
    /// A directory others may rename entries in, or a file others may write.
    Writable,
    /// A symbolic link where none may be followed.
    Link,
    /// Not a regular file.
    NotFile,
    TooManyLinks,
}

/// May the walk take `entry`, found in directory `dir`? The pure rules.
pub(crate) fn judge(dir: Seen, entry: Seen, last: bool, trust: &Trust) -> Result<(), Refused> {
    if dir.shared() && dir.mode & libc::S_ISVTX == 0 {
        return Err(Refused::Writable);
    }
    if !trust.trusts(entry.uid) {
        return Err(Refused::Foreign(entry.uid));
    }
    if entry.is(libc::S_IFLNK) {
        return if trust.follow_links {
            Ok(())
        } else {
            Err(Refused::Link)
        };
    }
    if last {
        if !entry.is(libc::S_IFREG) {
            return Err(Refused::NotFile);
        }
        if entry.shared() {
            return Err(Refused::Writable);
        }
        // Someone else's file in a user's directory: that user may have linked it there
        // (a hard link needs no right to read the file where `protected_hardlinks` is off).
        if dir.uid != 0 && entry.uid != dir.uid {
            return Err(Refused::Foreign(entry.uid));
        }
    } else if !entry.is(libc::S_IFDIR) {
        return Err(Refused::Missing);
    }
    Ok(())
}

/// Links followed at most on one walk.
const MAX_LINKS: u32 = 16;

fn openat(dir: &OwnedFd, name: &[u8], flags: i32) -> Result<OwnedFd, Refused> {
    let c = CString::new(name).map_err(|_| Refused::Missing)?;
    crate::sys::fs::openat(dir.as_fd(), &c, flags, 0).map_err(|_| Refused::Missing)
}

fn stat(fd: &impl AsFd) -> Result<libc::stat, Refused> {
    // An empty name with AT_EMPTY_PATH: the descriptor itself.
    let flags = libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW;
    crate::sys::fs::fstatat(fd.as_fd(), c"", flags).map_err(|_| Refused::Missing)
}

fn readlink(fd: &OwnedFd) -> Result<Vec<u8>, Refused> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // An empty name: the link the O_PATH descriptor refers to.
    let n = crate::sys::fs::readlinkat(fd.as_fd(), c"", &mut buf).map_err(|_| Refused::Missing)?;
    buf.truncate(n);
    Ok(buf)
}

fn components(path: &[u8]) -> impl DoubleEndedIterator<Item = &[u8]> {
    path.split(|&b| b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
}

/// Open the regular file at absolute `path` for reading, if the walk from `/` finds nothing
/// that `trust` does not allow (see the module's rules).
pub(crate) fn open(path: &[u8], trust: &Trust) -> Result<File, Refused> {
    let root = || -> Result<(OwnedFd, Seen), Refused> {
        let fd = openat_root()?;
        let st = stat(&fd)?;
        Ok((fd, Seen::of(&st)))
    };
    // The directories entered, from `/` down: `..` goes back up this stack.
    let mut dirs = vec![root()?];
    let mut queue: std::collections::VecDeque<Vec<u8>> =
        components(path).map(<[u8]>::to_vec).collect();
    let mut links = 0;
    while let Some(name) = queue.pop_front() {
        let last = queue.is_empty();
        if name == b".." {
            if dirs.len() > 1 {
                dirs.pop();
            }
            continue;
        }
        let (dir, dir_seen) = dirs.last().ok_or(Refused::Missing)?;
        let dir_seen = *dir_seen;
        if last {
            // The file itself: opened (never through a link), then judged on that descriptor.
            let fd = openat(
                dir,
                &name,
                libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
            );
            let fd = match fd {
                Ok(fd) => fd,
                // A link as the last component (ELOOP), or nothing: look at what is there.
                Err(_) => {
                    let p = openat(dir, &name, libc::O_PATH | libc::O_NOFOLLOW)?;
                    let seen = Seen::of(&stat(&p)?);
                    judge(dir_seen, seen, false, trust)?;
                    if !seen.is(libc::S_IFLNK) {
                        return Err(Refused::Missing);
                    }
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(Refused::TooManyLinks);
                    }
                    follow(&readlink(&p)?, &mut queue, &mut dirs, root)?;
                    continue;
                }
            };
            let seen = Seen::of(&stat(&fd)?);
            judge(dir_seen, seen, true, trust)?;
            return Ok(File::from(fd));
        }
        let fd = openat(dir, &name, libc::O_PATH | libc::O_NOFOLLOW)?;
        let seen = Seen::of(&stat(&fd)?);
        judge(dir_seen, seen, false, trust)?;
        if seen.is(libc::S_IFLNK) {
            links += 1;
            if links > MAX_LINKS {
                return Err(Refused::TooManyLinks);
            }
            follow(&readlink(&fd)?, &mut queue, &mut dirs, root)?;
        } else {
            dirs.push((fd, seen));
        }
    }
    Err(Refused::NotFile)
}

/// Go on along a link's `target`: its components first, from `/` when it is absolute.
fn follow(
    target: &[u8],
    queue: &mut std::collections::VecDeque<Vec<u8>>,
    dirs: &mut Vec<(OwnedFd, Seen)>,
    root: impl Fn() -> Result<(OwnedFd, Seen), Refused>,
) -> Result<(), Refused> {
    for c in components(target).rev() {
        queue.push_front(c.to_vec());
    }
    if target.starts_with(b"/") {
        dirs.clear();
        dirs.push(root()?);
    }
    Ok(())
}

fn openat_root() -> Result<OwnedFd, Refused> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_PATH: the access mode is ignored; std adds O_CLOEXEC.
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
        .open("/")
        .map(OwnedFd::from)
        .map_err(|_| Refused::Missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIR: u32 = libc::S_IFDIR;
    const REG: u32 = libc::S_IFREG;
    const LNK: u32 = libc::S_IFLNK;

    fn seen(uid: u32, mode: u32) -> Seen {
        Seen { uid, mode }
    }

    #[test]
    fn the_rules() {
        let sys = Trust {
            others: [Some(0), None],
            follow_links: true,
        };
        let user = Trust {
            others: [Some(0), Some(1001)],
            follow_links: false,
        };
        let root_dir = seen(0, DIR | 0o755);
        let tmp = seen(0, DIR | 0o1777);
        let home = seen(1001, DIR | 0o755);
        // Root's files in root's directories.
        assert_eq!(judge(root_dir, seen(0, REG | 0o644), true, &sys), Ok(()));
        assert_eq!(judge(root_dir, seen(0, DIR | 0o755), false, &sys), Ok(()));
        // A user's file: only where that user is trusted (beside their binary).
        assert_eq!(
            judge(home, seen(1001, REG | 0o644), true, &sys),
            Err(Refused::Foreign(1001))
        );
        assert_eq!(judge(home, seen(1001, REG | 0o600), true, &user), Ok(()));
        assert_eq!(
            judge(home, seen(1002, REG | 0o644), true, &user),
            Err(Refused::Foreign(1002))
        );
        // Root's file in a user's directory: the user may have hard-linked it there.
        assert_eq!(
            judge(home, seen(0, REG | 0o644), true, &user),
            Err(Refused::Foreign(0))
        );
        // A user's file in root's sticky /tmp, beside that user's binary.
        assert_eq!(judge(tmp, seen(1001, REG | 0o644), true, &user), Ok(()));
        // Links: followed in the system tree, never beside a user's binary.
        assert_eq!(judge(root_dir, seen(0, LNK | 0o777), false, &sys), Ok(()));
        assert_eq!(
            judge(home, seen(1001, LNK | 0o777), true, &user),
            Err(Refused::Link)
        );
        assert_eq!(
            judge(root_dir, seen(1001, LNK | 0o777), true, &sys),
            Err(Refused::Foreign(1001))
        );
        // Directories others may write in: only sticky ones, for trusted entries.
        assert_eq!(judge(tmp, seen(0, DIR | 0o700), false, &sys), Ok(()));
        assert_eq!(
            judge(tmp, seen(1001, DIR | 0o700), false, &sys),
            Err(Refused::Foreign(1001))
        );
        assert_eq!(
            judge(seen(0, DIR | 0o777), seen(0, REG | 0o644), true, &sys),
            Err(Refused::Writable)
        );
        assert_eq!(
            judge(seen(0, DIR | 0o775), seen(0, REG | 0o644), true, &sys),
            Err(Refused::Writable)
        );
        // The file: regular, not writable by others.
        assert_eq!(
            judge(root_dir, seen(0, REG | 0o666), true, &sys),
            Err(Refused::Writable)
        );
        assert_eq!(
            judge(root_dir, seen(0, libc::S_IFIFO | 0o644), true, &sys),
            Err(Refused::NotFile)
        );
        assert_eq!(
            judge(root_dir, seen(0, REG | 0o644), false, &sys),
            Err(Refused::Missing)
        );
    }

    #[test]
    fn the_walk_follows_root_links_and_refuses_what_the_rules_refuse() {
        use std::os::unix::fs::{PermissionsExt, symlink};
        if crate::sys::geteuid() != 0 {
            // As another user the temporary directory is not root's: the rules would refuse
            // it for the system trust; the pure rules above still run.
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::create_dir_all(p.join("debug/.build-id/ab")).unwrap();
        std::fs::create_dir_all(p.join("debug/usr/bin")).unwrap();
        std::fs::write(p.join("debug/usr/bin/prog.debug"), b"ELF").unwrap();
        symlink(
            "../../usr/bin/prog.debug",
            p.join("debug/.build-id/ab/cdef.debug"),
        )
        .unwrap();
        let b = |rel: &str| p.join(rel).into_os_string().into_encoded_bytes();
        let sys = Trust::system();
        assert!(open(&b("debug/.build-id/ab/cdef.debug"), &sys).is_ok());
        assert!(open(&b("debug/.build-id/ab/../../usr/bin/prog.debug"), &sys).is_ok());
        // Not beside a binary: no link is followed there.
        assert_eq!(
            open(&b("debug/.build-id/ab/cdef.debug"), &Trust::beside(0)).err(),
            Some(Refused::Link)
        );
        assert_eq!(
            open(&b("debug/nothing"), &sys).err(),
            Some(Refused::Missing)
        );
        // A directory others can write in, not sticky.
        std::fs::set_permissions(p.join("debug/usr"), std::fs::Permissions::from_mode(0o777))
            .unwrap();
        assert_eq!(
            open(&b("debug/usr/bin/prog.debug"), &sys).err(),
            Some(Refused::Writable)
        );
        // Another user's file.
        std::fs::set_permissions(p.join("debug/usr"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        std::os::unix::fs::chown(p.join("debug/usr/bin/prog.debug"), Some(4242), None).unwrap();
        assert_eq!(
            open(&b("debug/usr/bin/prog.debug"), &sys).err(),
            Some(Refused::Foreign(4242))
        );
        assert!(open(&b("debug/usr/bin/prog.debug"), &Trust::beside(4242)).is_ok());
        // A loop of links ends.
        symlink("loop2", p.join("debug/loop1")).unwrap();
        symlink("loop1", p.join("debug/loop2")).unwrap();
        assert_eq!(
            open(&b("debug/loop1"), &sys).err(),
            Some(Refused::TooManyLinks)
        );
    }
}
