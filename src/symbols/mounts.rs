//! Which filesystem a mapped file lives on, decided without touching the file.
//!
//! A read on a FUSE mount is answered by whoever runs its server, any user may mount one
//! (in a user namespace of their own), and a read that server never answers puts the reading
//! thread in an uninterruptible sleep that even SIGKILL cannot end: the process cannot exit
//! until the server lets go. Network filesystems (NFS, CIFS, 9p, Ceph...) can hang the same
//! way when their server goes away. Opening or `statfs`-ing a path on such a mount can hang
//! too, so the filesystem is found from what the MMAP2 record already says (the file's
//! device, `major:minor`) and the mount table (`/proc/PID/mountinfo`, which the kernel
//! writes from its own tables without asking any filesystem).

use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

/// What is known about a device's filesystem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FsClass {
    /// A filesystem whose reads are answered by the kernel and a local device.
    Local,
    /// A filesystem whose reads another program or machine answers (its type, as the mount
    /// table names it, escaped).
    Remote(String),
    /// No mount table seen has this device.
    Unknown,
}

/// Filesystem types whose reads can wait for ever on someone else: FUSE in every form
/// (`fuse`, `fuseblk`, `fuse.sshfs`, ...) and network filesystems. virtiofs is left out: its
/// server is the hypervisor, and it is the root filesystem of many virtual machines.
pub(crate) fn can_hang(fstype: &[u8]) -> bool {
    const REMOTE: &[&[u8]] = &[
        b"nfs",
        b"nfs4",
        b"cifs",
        b"smb3",
        b"smbfs",
        b"9p",
        b"ceph",
        b"afs",
        b"coda",
        b"lustre",
        b"orangefs",
        b"gfs2",
        b"ocfs2",
        b"ncpfs",
        b"glusterfs",
    ];
    fstype.starts_with(b"fuse") || REMOTE.contains(&fstype)
}

/// The filesystem type of device `maj:min` in a mountinfo text (the first mount of it).
pub(crate) fn fstype_of(mountinfo: &[u8], maj: u32, min: u32) -> Option<&[u8]> {
    let want = format!("{maj}:{min}");
    mountinfo.split(|&b| b == b'\n').find_map(|line| {
        let mut fields = line.split(|&b| b == b' ');
        if fields.nth(2)? != want.as_bytes() {
            return None;
        }
        // The optional fields end at a lone "-"; the type follows it.
        let mut rest = fields.skip_while(|f| *f != b"-");
        rest.next()?;
        rest.next()
    })
}

/// The type of the filesystem a mapped file is on, when it is one whose reads another
/// program or machine answers ([`can_hang`]): the unwinder's check before it reads a binary
/// (the symbolizer's own, through its cached [`Mounts`], is in `loading.rs`).
pub(crate) fn user_fs_of(file: &super::MappedFile, pid: u32) -> Option<String> {
    let super::FileIdentity::Inode { maj, min, .. } = *file.identity() else {
        return None;
    };
    match Mounts::default().class(maj, min, pid) {
        FsClass::Remote(t) => Some(t),
        _ => None,
    }
}

/// How long what the mount table said about a device is trusted (a device number is
/// reused once its filesystem is unmounted).
const FRESH: Duration = Duration::from_secs(5);
/// Devices remembered at most.
const MAX_DEVICES: usize = 4096;

/// The class of each device seen, from the mount tables, kept for [`FRESH`].
#[derive(Default)]
pub(crate) struct Mounts {
    known: FxHashMap<(u32, u32), (FsClass, Instant)>,
}

impl Mounts {
    /// The class of device `maj:min` as process `pid` (0: none) sees it: perfwatch's own
    /// mount table first, then the process's (a mount in a namespace of its own).
    pub(crate) fn class(&mut self, maj: u32, min: u32, pid: u32) -> FsClass {
        if let Some((c, at)) = self.known.get(&(maj, min))
            && at.elapsed() < FRESH
            && (*c != FsClass::Unknown || pid == 0)
        {
            return c.clone();
        }
        let mut class = FsClass::Unknown;
        let tables = [
            Some("/proc/self/mountinfo".to_string()),
            (pid != 0).then(|| format!("/proc/{pid}/mountinfo")),
        ];
        for path in tables.into_iter().flatten() {
            let Ok(text) = std::fs::read(&path) else {
                continue;
            };
            if let Some(t) = fstype_of(&text, maj, min) {
                class = if can_hang(t) {
                    FsClass::Remote(crate::text::escape(t))
                } else {
                    FsClass::Local
                };
                break;
            }
        }
        if self.known.len() >= MAX_DEVICES {
            self.known.clear();
        }
        self.known
            .insert((maj, min), (class.clone(), Instant::now()));
        class
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &[u8] = b"22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime master:1 - ext4 /dev/vda rw
40 27 0:45 / /mnt/u\\040x rw,nosuid,nodev,relatime shared:7 master:3 - fuse.sshfs me@host: rw,user_id=1000
41 27 0:46 / /mnt/nfs rw - nfs4 srv:/export rw
42 27 8:17 / /media/usb rw - fuseblk /dev/sdb1 rw
";

    #[test]
    fn the_mount_table_gives_each_devices_type() {
        assert_eq!(fstype_of(TABLE, 254, 0), Some(&b"ext4"[..]));
        assert_eq!(fstype_of(TABLE, 0, 45), Some(&b"fuse.sshfs"[..]));
        assert_eq!(fstype_of(TABLE, 0, 46), Some(&b"nfs4"[..]));
        assert_eq!(fstype_of(TABLE, 8, 17), Some(&b"fuseblk"[..]));
        assert_eq!(fstype_of(TABLE, 0, 4), None);
        assert_eq!(fstype_of(TABLE, 0, 2), None, "0:21 is not 0:2");
        assert_eq!(
            fstype_of(b"garbage\n\n1 2 3:4\n1 2 3:4 / / rw -", 3, 4),
            None
        );
    }

    #[test]
    fn fuse_and_network_filesystems_can_hang_local_ones_cannot() {
        for t in [
            "fuse",
            "fuseblk",
            "fuse.sshfs",
            "fuse.fuse-overlayfs",
            "nfs",
            "nfs4",
            "cifs",
            "9p",
        ] {
            assert!(can_hang(t.as_bytes()), "{t}");
        }
        for t in [
            "ext4", "xfs", "btrfs", "tmpfs", "overlay", "proc", "virtiofs", "squashfs",
        ] {
            assert!(!can_hang(t.as_bytes()), "{t}");
        }
    }

    #[test]
    fn this_machines_root_is_classed_from_the_real_mount_table() {
        use std::os::unix::fs::MetadataExt;
        let dev = std::fs::metadata("/proc/self/exe").unwrap().dev();
        let mut m = Mounts::default();
        // /proc is procfs: local, and known from perfwatch's own table.
        let proc_dev = std::fs::metadata("/proc/self").unwrap().dev();
        assert_eq!(
            m.class(libc::major(proc_dev), libc::minor(proc_dev), 0),
            FsClass::Local
        );
        // The test binary's device is in the table (btrfs subvolumes report another one).
        let c = m.class(libc::major(dev), libc::minor(dev), std::process::id());
        assert!(matches!(c, FsClass::Local | FsClass::Unknown), "{c:?}");
        assert_eq!(m.class(0, 999_999, 0), FsClass::Unknown);
    }
}
