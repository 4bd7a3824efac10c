//! What the symbolizer is asked: an address, and what the process model knows about where it
//! lies (a kernel address, a file mapping as an MMAP2 record described it, or nothing).
//!
//! The types here depend on nothing of the process model: a model builds one [`MappedFile`]
//! per MMAP2 record (or `/proc/PID/maps` line) and keeps it in its map entry, so that building
//! a [`Request`] for a sample costs one reference count.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

pub(crate) use super::build_id::BuildId;

/// How a mapping identified its file, so that a different file found later at the same path
/// is never read in its place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileIdentity {
    /// Nothing to check (an MMAP record without the MMAP2 fields, or an anonymous mapping).
    Unknown,
    /// MMAP2 without build id (and `/proc/PID/maps`): device and inode. `generation` is the
    /// inode generation MMAP2 carries (0 when unknown); it tells apart two files that got the
    /// same inode number one after the other.
    Inode {
        maj: u32,
        min: u32,
        ino: u64,
        generation: u64,
    },
    /// MMAP2 with `PERF_RECORD_MISC_MMAP_BUILD_ID`.
    BuildId(BuildId),
}

impl FileIdentity {
    /// The identity an MMAP2 record (without build id) or a `/proc/PID/maps` line gives: the
    /// device and inode (all zero means none, as for anonymous memory).
    pub fn from_mmap2(maj: u32, min: u32, ino: u64, generation: u64) -> FileIdentity {
        if maj == 0 && min == 0 && ino == 0 {
            FileIdentity::Unknown
        } else {
            FileIdentity::Inode {
                maj,
                min,
                ino,
                generation,
            }
        }
    }
}

/// What kind of memory a mapping's name says it is (perf's rules for anonymous memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MappingKind {
    /// A file with an absolute path: its symbol tables.
    File,
    /// Anonymous memory (`//anon`, `[anon:NAME]`, `/dev/zero`, `/anon_hugepage`, `/memfd:`):
    /// code there comes from a JIT, named by `/tmp/perf-PID.map` when the JIT writes one.
    Anon,
    /// `[vdso]`.
    Vdso,
    /// Memory with a name but no symbols to read: `[stack]`, `[heap]`, `[vsyscall]`, device
    /// files, relative or empty names. Never opened.
    Special,
}

impl MappingKind {
    fn of(path: &[u8]) -> MappingKind {
        if path == b"[vdso]" {
            MappingKind::Vdso
        } else if path == b"//anon"
            || path.starts_with(b"[anon:")
            || path.starts_with(b"/dev/zero")
            || path.starts_with(b"/anon_hugepage")
            || path.starts_with(b"/memfd:")
        {
            MappingKind::Anon
        } else if !path.starts_with(b"/") || path.starts_with(b"/dev/") {
            MappingKind::Special
        } else {
            MappingKind::File
        }
    }
}

/// The file behind a mapping, as a record named it. Build one per MMAP2 record and share it
/// (`Arc`) between the map entry and the requests; equality and hashing use the identity
/// (device/inode or build id) when there is one, so that the same binary mapped by many
/// processes, or reached by several paths, is read once.
pub struct MappedFile {
    path: Box<[u8]>,
    identity: FileIdentity,
    kind: MappingKind,
    /// A hash of the identity, computed once, so that looking a file up costs no hashing of
    /// its path on the hot path.
    hash: u64,
}

impl MappedFile {
    /// `path` is the file name exactly as the record gave it (untrusted bytes, perhaps with a
    /// ` (deleted)` suffix); `identity` what the record said about the file.
    pub fn new(path: &[u8], identity: FileIdentity) -> Arc<MappedFile> {
        let kind = MappingKind::of(path);
        // Stable across runs and processes (DefaultHasher::new has fixed keys); collisions
        // only cost a comparison.
        let mut h = std::hash::DefaultHasher::new();
        kind.hash(&mut h);
        match identity {
            FileIdentity::Unknown => path.hash(&mut h),
            id => id.hash(&mut h),
        }
        Arc::new(MappedFile {
            path: path.into(),
            identity,
            kind,
            hash: h.finish(),
        })
    }

    pub fn path(&self) -> &[u8] {
        &self.path
    }

    pub fn identity(&self) -> &FileIdentity {
        &self.identity
    }

    pub fn kind(&self) -> MappingKind {
        self.kind
    }

    /// The identity hash (stable for the same file; used as the dso part of a [`SymbolKey`]).
    ///
    /// [`SymbolKey`]: super::SymbolKey
    pub(crate) fn identity_hash(&self) -> u64 {
        self.hash
    }

    /// The path without the ` (deleted)` suffix the kernel adds for an unlinked file.
    pub(crate) fn path_on_disk(&self) -> &[u8] {
        self.path.strip_suffix(b" (deleted)").unwrap_or(&self.path)
    }
}

impl PartialEq for MappedFile {
    fn eq(&self, other: &MappedFile) -> bool {
        if std::ptr::eq(self, other) {
            return true;
        }
        self.hash == other.hash
            && self.kind == other.kind
            && self.identity == other.identity
            && (self.identity != FileIdentity::Unknown || self.path == other.path)
    }
}

impl Eq for MappedFile {}

impl Hash for MappedFile {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MappedFile")
            .field("path", &crate::text::Untrusted(&self.path))
            .field("identity", &self.identity)
            .field("kind", &self.kind)
            .finish()
    }
}

/// One mapping of a process: `[start, start + len)` maps the file from byte `pgoff` on (the
/// fields of an MMAP2 record; `pgoff` in bytes, as perf records it).
#[derive(Clone, Debug)]
pub struct Mapping {
    pub start: u64,
    pub len: u64,
    pub pgoff: u64,
    pub file: Arc<MappedFile>,
}

impl Mapping {
    /// The offset in the file of `addr`: `addr - start + pgoff`.
    pub(crate) fn file_offset(&self, addr: u64) -> u64 {
        addr.wrapping_sub(self.start).wrapping_add(self.pgoff)
    }

    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.start && addr - self.start < self.len
    }
}

/// One address to name.
#[derive(Clone, Debug)]
pub struct Request {
    pub(crate) pid: u32,
    pub(crate) addr: u64,
    pub(crate) target: Target,
    /// When the program the process ran began (its fork or exec; 0: unknown): a perf map
    /// read for one program is never used for another with the same pid.
    pub(crate) image: u64,
}

#[derive(Clone, Debug)]
pub(crate) enum Target {
    Kernel,
    Mapped(Mapping),
    Unmapped,
}

impl Request {
    /// A kernel address (a sample with `PERF_RECORD_MISC_KERNEL`): named from `/proc/kallsyms`.
    pub fn kernel(addr: u64) -> Request {
        Request {
            pid: 0,
            addr,
            target: Target::Kernel,
            image: 0,
        }
    }

    /// A user address of process `pid` (the process id, not a thread id: perf maps are named
    /// after it) that lies in `mapping`. The pid is only used while the process lives, to
    /// open the mapped file through `/proc/PID/map_files` and `/proc/PID/root`; once it has
    /// exited, what the mapping says is enough.
    pub fn user(pid: u32, addr: u64, mapping: &Mapping) -> Request {
        Request {
            pid,
            addr,
            target: Target::Mapped(mapping.clone()),
            image: 0,
        }
    }

    /// A user address of process `pid` for which no mapping is known: only a perf map of the
    /// process can name it.
    pub fn unmapped(pid: u32, addr: u64) -> Request {
        Request {
            pid,
            addr,
            target: Target::Unmapped,
            image: 0,
        }
    }

    /// The same request, for the program that began at `image` (the time of the process's
    /// fork or of its last exec before the address was seen, as the process model knows
    /// it): the perf map of an exited process, or of the program before an exec, is
    /// forgotten, not used for the next one.
    pub(crate) fn in_image(mut self, image: u64) -> Request {
        self.image = image;
        self
    }

    /// [`in_image`](Self::in_image) with the image asked of `image` only for a user address
    /// (a kernel address has no program).
    pub(crate) fn in_image_of(self, image: impl FnOnce() -> u64) -> Request {
        match self.target {
            Target::Kernel => self,
            _ => self.in_image(image()),
        }
    }

    pub fn addr(&self) -> u64 {
        self.addr
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_perfs_rules_for_anonymous_memory() {
        use MappingKind::*;
        for (path, kind) in [
            ("/usr/lib/libc.so.6", File),
            ("/usr/bin/spin (deleted)", File),
            ("//anon", Anon),
            ("[anon:v8]", Anon),
            ("/memfd:jit (deleted)", Anon),
            ("/dev/zero (deleted)", Anon),
            ("[vdso]", Vdso),
            ("[stack]", Special),
            ("[vsyscall]", Special),
            ("/dev/dri/card0", Special),
            ("relative/lib.so", Special),
            ("", Special),
        ] {
            let got = MappedFile::new(path.as_bytes(), FileIdentity::Unknown).kind();
            assert_eq!(got, kind, "{path}");
        }
    }

    #[test]
    fn the_same_inode_is_the_same_file_whatever_the_path() {
        let id = FileIdentity::from_mmap2(254, 0, 42, 7);
        let a = MappedFile::new(b"/usr/bin/spin", id);
        let b = MappedFile::new(b"/proc/1/root/usr/bin/spin", id);
        assert_eq!(*a, *b);
        assert_eq!(a.identity_hash(), b.identity_hash());
        let c = MappedFile::new(b"/usr/bin/spin", FileIdentity::from_mmap2(254, 0, 43, 7));
        assert_ne!(*a, *c);
        // Without an identity, the path decides.
        let d = MappedFile::new(b"/x", FileIdentity::Unknown);
        let e = MappedFile::new(b"/y", FileIdentity::Unknown);
        assert_ne!(*d, *e);
        assert_eq!(*d, *MappedFile::new(b"/x", FileIdentity::Unknown));
    }

    #[test]
    fn file_offsets_are_computed_as_from_an_mmap2_record() {
        let m = Mapping {
            start: 0x5555_0000_1000,
            len: 0x2000,
            pgoff: 0x1000,
            file: MappedFile::new(b"/bin/x", FileIdentity::Unknown),
        };
        assert_eq!(m.file_offset(0x5555_0000_1136), 0x1136);
        assert!(m.contains(0x5555_0000_2fff));
        assert!(!m.contains(0x5555_0000_3000));
        assert!(!m.contains(0x5555_0000_0fff));
    }

    #[test]
    fn build_ids_keep_twenty_bytes() {
        assert!(BuildId::new(&[]).is_none());
        let b = BuildId::new(&[0xab; 32]).unwrap();
        assert_eq!(b.as_bytes().len(), 20);
        assert_eq!(BuildId::new(&[1, 2]).unwrap().to_hex(), "0102");
        assert_eq!(FileIdentity::from_mmap2(0, 0, 0, 0), FileIdentity::Unknown);
    }
}
