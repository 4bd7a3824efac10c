//! Opening files that the monitored system names, as root, without being steered.
//!
//! A path from a record or a perf map is untrusted: by the time perfwatch opens it, it may
//! be a FIFO (an open that never returns), a device whose open has side effects (a watchdog),
//! a symlink into the host from inside a container, or another file. So every open here
//! first takes an `O_PATH` descriptor (no open of the object itself), checks with `fstat`
//! that it is a regular file, and only then opens that very inode for reading through
//! `/proc/self/fd`, non-blocking. Paths inside a container resolve inside its root
//! (`openat2` with `RESOLVE_IN_ROOT`), so that an absolute symlink there cannot lead out.
use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// A regular file, open for reading, with what `fstat` said about it.
pub struct Opened {
    pub file: File,
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub uid: u32,
}

impl Opened {
    /// `file`, with the identity, size and owner `st` (its `fstat`) gives it.
    pub(crate) fn of(file: File, st: &libc::stat) -> Opened {
        Opened {
            file,
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size.max(0) as u64,
            uid: st.st_uid,
        }
    }
}

#[derive(Debug)]
pub enum OpenError {
    /// Nothing there (or a process that has gone).
    NotFound,
    /// Something there that is not a regular file: never opened.
    NotRegular(&'static str),
    /// `openat2` is missing (Linux < 5.6): container roots are not searched.
    Unsupported,
    Io(io::Error),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::NotFound => f.write_str("no such file"),
            OpenError::NotRegular(what) => write!(f, "not a regular file ({what})"),
            OpenError::Unsupported => f.write_str("openat2 is not supported by this kernel"),
            OpenError::Io(e) => write!(f, "{e}"),
        }
    }
}

fn from_errno(e: io::Error) -> OpenError {
    match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ESRCH) | Some(libc::ENOTDIR) => OpenError::NotFound,
        Some(libc::ENOSYS) => OpenError::Unsupported,
        Some(libc::ELOOP) => OpenError::NotRegular("symbolic link"),
        _ => OpenError::Io(e),
    }
}

fn cstring(path: &[u8]) -> Result<CString, OpenError> {
    CString::new(path).map_err(|_| OpenError::NotFound)
}

pub(crate) fn fstat(fd: &impl AsFd) -> io::Result<libc::stat> {
    crate::sys::fs::fstat(fd.as_fd())
}

fn kind_name(mode: libc::mode_t) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => "directory",
        libc::S_IFIFO => "FIFO",
        libc::S_IFCHR => "character device",
        libc::S_IFBLK => "block device",
        libc::S_IFSOCK => "socket",
        libc::S_IFLNK => "symbolic link",
        _ => "special file",
    }
}

/// Check the `O_PATH` descriptor, then open its inode for reading.
fn upgrade(path_fd: OwnedFd) -> Result<Opened, OpenError> {
    let st = fstat(&path_fd).map_err(OpenError::Io)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(OpenError::NotRegular(kind_name(st.st_mode)));
    }
    let proc_path = cstring(format!("/proc/self/fd/{}", path_fd.as_raw_fd()).as_bytes())?;
    let file = File::from(
        crate::sys::fs::open(
            &proc_path,
            libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY,
        )
        .map_err(from_errno)?,
    );
    let st2 = fstat(&file).map_err(OpenError::Io)?;
    if st2.st_dev != st.st_dev || st2.st_ino != st.st_ino {
        // Cannot happen through /proc/self/fd; refuse rather than trust it.
        return Err(OpenError::NotRegular("changed while opening"));
    }
    Ok(Opened::of(file, &st))
}

/// Open a regular file by absolute path. `nofollow`: refuse a symlink as the last component
/// (for files in world-writable directories such as `/tmp`).
pub(crate) fn open_regular(path: &[u8], nofollow: bool) -> Result<Opened, OpenError> {
    let c = cstring(path)?;
    let mut flags = libc::O_PATH | libc::O_CLOEXEC;
    if nofollow {
        flags |= libc::O_NOFOLLOW;
    }
    upgrade(crate::sys::fs::open(&c, flags).map_err(from_errno)?)
}

/// Open `path` (absolute, as seen from inside the container) under `root` (such as
/// `/proc/PID/root`), resolving every component, symlinks included, inside that root.
pub(crate) fn open_in_root(root: &[u8], path: &[u8], nofollow: bool) -> Result<Opened, OpenError> {
    let root_c = cstring(root)?;
    let dirfd = crate::sys::fs::open(&root_c, libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .map_err(from_errno)?;
    let rel = path.strip_prefix(b"/").unwrap_or(path);
    let rel = cstring(if rel.is_empty() { b"." } else { rel })?;
    let mut flags = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    if nofollow {
        flags |= libc::O_NOFOLLOW as u64;
    }
    let resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    upgrade(crate::sys::fs::openat2(dirfd.as_fd(), &rel, flags, resolve).map_err(from_errno)?)
}

/// The filesystem type (`statfs.f_type`) of an open file.
pub(crate) fn fs_magic(file: &File) -> Option<i64> {
    crate::sys::fs::fstatfs(file.as_fd())
        .ok()
        .map(|st| st.f_type)
}

/// Filesystems whose `stat` reports another device than the one the kernel puts into MMAP2
/// records (btrfs subvolumes; overlayfs, whose mappings point at the layer's file).
pub(crate) fn dev_is_virtual(magic: i64) -> bool {
    const BTRFS: i64 = 0x9123_683e;
    const OVERLAYFS: i64 = 0x794c_7630;
    magic == BTRFS || magic == OVERLAYFS
}

/// Read from the current position to the end, at most `cap` bytes; also says whether the
/// file had more.
pub(crate) fn read_capped(file: &mut File, cap: usize) -> io::Result<(Vec<u8>, bool)> {
    let mut out = Vec::new();
    let n = file.by_ref().take(cap as u64 + 1).read_to_end(&mut out)?;
    let more = n > cap;
    out.truncate(cap);
    Ok((out, more))
}

/// `major(st_dev)` and `minor(st_dev)`, as MMAP2 records split them.
pub(crate) fn split_dev(dev: u64) -> (u32, u32) {
    (libc::major(dev), libc::minor(dev))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn regular_files_open_and_everything_else_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"hello").unwrap();
        let o = open_regular(file.as_os_str().as_bytes(), false).unwrap();
        assert_eq!(o.size, 5);

        let fifo = dir.path().join("fifo");
        let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        crate::sys::fs::mkfifo(&c, 0o600).unwrap();
        // Opening a FIFO for reading would block until a writer comes: it must not.
        assert!(matches!(
            open_regular(fifo.as_os_str().as_bytes(), false),
            Err(OpenError::NotRegular("FIFO"))
        ));
        assert!(matches!(
            open_regular(b"/dev/zero", false),
            Err(OpenError::NotRegular("character device"))
        ));
        assert!(matches!(
            open_regular(dir.path().as_os_str().as_bytes(), false),
            Err(OpenError::NotRegular("directory"))
        ));
        assert!(matches!(
            open_regular(b"/nonexistent/x", false),
            Err(OpenError::NotFound)
        ));
        assert!(matches!(
            open_regular(b"/a\0b", false),
            Err(OpenError::NotFound)
        ));

        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(open_regular(link.as_os_str().as_bytes(), false).is_ok());
        assert!(open_regular(link.as_os_str().as_bytes(), true).is_err());
    }

    #[test]
    fn paths_in_a_root_stay_in_that_root() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"outside").unwrap();
        std::fs::create_dir(root.path().join("lib")).unwrap();
        std::fs::write(root.path().join("lib/inside"), b"in").unwrap();
        // An absolute symlink inside the root that names a file outside it.
        std::os::unix::fs::symlink(
            outside.path().join("secret"),
            root.path().join("lib/escape"),
        )
        .unwrap();
        let r = root.path().as_os_str().as_bytes();
        match open_in_root(r, b"/lib/inside", false) {
            Ok(o) => assert_eq!(o.size, 2),
            Err(OpenError::Unsupported) => return,
            Err(e) => panic!("{e}"),
        }
        // Resolved inside the root, the symlink's target does not exist.
        assert!(matches!(
            open_in_root(r, b"/lib/escape", false),
            Err(OpenError::NotFound)
        ));
        assert!(matches!(
            open_in_root(r, b"/../../../../etc/passwd", false),
            Err(OpenError::NotFound)
        ));
    }

    #[test]
    fn reads_are_capped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, vec![b'x'; 100]).unwrap();
        let mut f = File::open(&p).unwrap();
        let (b, more) = read_capped(&mut f, 10).unwrap();
        assert_eq!((b.len(), more), (10, true));
        let mut f = File::open(&p).unwrap();
        let (b, more) = read_capped(&mut f, 100).unwrap();
        assert_eq!((b.len(), more), (100, false));
    }
}
