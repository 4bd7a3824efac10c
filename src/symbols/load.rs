//! The work that touches files: finding the file a mapping meant, checking that it is that
//! file, reading its symbols (or its debug file's), reading kallsyms, a perf map, or another
//! process's vDSO. Each job runs on the loader thread ([`super::loader`]), so that a slow
//! file holds up nobody but itself.

use std::io::{Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;

use super::debug_file;
use super::elf::{self, ElfError, Segment, Want};
use super::fs::{self, OpenError, Opened};
use super::kernel::{self, KernelSymbols};
use super::request::{BuildId, FileIdentity, MappedFile};
use super::table::{SymbolTable, TableBuilder};
use super::trusted;
use crate::text::escape;

/// Why a binary gave no symbols; the text of its note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LoadError {
    /// No candidate path exists (the file was deleted, the process is gone).
    NotFound,
    /// A file is there, but not the one that was mapped.
    Mismatch(String),
    /// Something there that could not be opened or is not a regular file.
    Open(String),
    Elf(ElfError),
    /// A perf map owned by someone who is neither root, perfwatch's user nor the process's.
    NotOwned(u32),
    /// kallsyms lists zeros.
    Hidden,
    TimedOut(u64),
    /// perfwatch was stopping and its grace ran out before the read was done.
    Stopping,
    /// Too many reads are stuck already; this one was not started.
    Busy,
    /// On a filesystem whose reads another program or machine answers (its type): not read.
    UserFs(String),
    Internal(String),
}

impl LoadError {
    /// Worth trying again later, with another process's view of the file or once a stuck
    /// read has finished.
    pub(crate) fn retryable(&self) -> bool {
        matches!(
            self,
            LoadError::NotFound | LoadError::Mismatch(_) | LoadError::Busy
        )
    }
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::NotFound => f.write_str("the file is gone"),
            LoadError::Mismatch(m) => {
                write!(f, "the file there now is not the one that was mapped ({m})")
            }
            LoadError::Open(m) => f.write_str(m),
            LoadError::Elf(e) => write!(f, "{e}"),
            LoadError::NotOwned(uid) => write!(
                f,
                "owned by uid {uid}, not by the process's user (nor, once it has gone, by root or perfwatch's user): not read"
            ),
            LoadError::Hidden => f.write_str("hidden"),
            LoadError::TimedOut(s) => write!(
                f,
                "reading it took longer than {s} s: skipped until it finishes"
            ),
            LoadError::Stopping => f.write_str("not read before perfwatch stopped"),
            LoadError::Busy => {
                f.write_str("too many reads of files on its filesystem are stuck: not read for now")
            }
            LoadError::UserFs(t) => write!(
                f,
                "it is on a {t} filesystem, whose reads another program or machine answers (one \
                 that never answers would keep perfwatch from exiting): not read; its samples \
                 are named by the binary. --read-user-fs reads such files"
            ),
            LoadError::Internal(m) => write!(f, "internal error while reading it: {m}"),
        }
    }
}

impl From<ElfError> for LoadError {
    fn from(e: ElfError) -> LoadError {
        LoadError::Elf(e)
    }
}

fn open_error(e: OpenError) -> LoadError {
    match e {
        OpenError::NotFound | OpenError::Unsupported => LoadError::NotFound,
        e => LoadError::Open(e.to_string()),
    }
}

/// A job for the loader thread.
pub(crate) enum Job {
    Elf(ElfJob),
    Kernel {
        kallsyms: PathBuf,
        modules: PathBuf,
        max_bytes: usize,
    },
    PerfMap(PerfMapJob),
    /// Read another process's memory (its vDSO).
    Memory {
        pid: u32,
        addr: u64,
        len: u64,
    },
    /// Tests of the loader: a job that takes this long, one that panics.
    #[cfg(test)]
    Sleep(std::time::Duration),
    #[cfg(test)]
    Panic,
}

pub enum Outcome {
    Elf(Result<LoadedElf, LoadError>),
    Kernel(Result<KernelSymbols, LoadError>),
    PerfMap(Result<PerfMapRead, LoadError>),
    Memory(Option<Vec<u8>>),
}

impl Job {
    pub(crate) fn run(self) -> Outcome {
        match self {
            Job::Elf(j) => Outcome::Elf(j.run()),
            Job::Kernel {
                kallsyms,
                modules,
                max_bytes,
            } => Outcome::Kernel(load_kernel(&kallsyms, &modules, max_bytes)),
            Job::PerfMap(j) => Outcome::PerfMap(j.run()),
            Job::Memory { pid, addr, len } => {
                Outcome::Memory(super::vdso::read_process_memory(pid, addr, len))
            }
            #[cfg(test)]
            Job::Sleep(d) => {
                std::thread::sleep(d);
                Outcome::Memory(None)
            }
            #[cfg(test)]
            Job::Panic => panic!("a job that panics (test)"),
        }
    }
}

/// Where a binary's names came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SymbolsFrom {
    /// The binary's own `.symtab`.
    Symtab,
    /// A separate debug file (its escaped path).
    DebugFile(String),
    /// The binary's MiniDebugInfo (`.gnu_debugdata`) and its `.dynsym`.
    MiniDebugInfo,
    /// Only `.dynsym`: exported functions.
    Dynsym,
    /// Only `.dynsym`: its MiniDebugInfo could not be used (why).
    Unusable(String),
    /// Nothing.
    Nothing,
}

pub(crate) struct LoadedElf {
    pub table: SymbolTable,
    pub segments: Vec<Segment>,
    pub from: SymbolsFrom,
    pub build_id: Option<BuildId>,
}

/// Read the symbols of the file a mapping meant.
pub(crate) struct ElfJob {
    pub file: Arc<MappedFile>,
    pub pid: u32,
    pub start: u64,
    pub end: u64,
    pub debug_dirs: Arc<[PathBuf]>,
    pub max_bytes: usize,
}

/// The file `what` (`elf`, the binary; `debug`, its debug file) of build id `id` in perf's
/// build-id cache (`~/.debug/.build-id/xx/yyyy.../WHAT`): root's cache when perfwatch runs as
/// root (never a user's: its links could point root's reads anywhere), else the user's own.
fn perf_cache_path(id: &BuildId, what: &str) -> Option<PathBuf> {
    let hex = id.to_hex();
    let (head, rest) = (hex.get(..2)?, hex.get(2..)?);
    let home = if crate::sys::geteuid() == 0 {
        PathBuf::from("/root")
    } else {
        PathBuf::from(std::env::var_os("HOME").filter(|h| !h.is_empty())?)
    };
    Some(home.join(format!(".debug/.build-id/{head}/{rest}/{what}")))
}

/// The copy of the binary with build id `id` in perf's build-id cache, if there is one, read
/// with the user's own rights.
fn perf_cache(id: &BuildId) -> Option<Opened> {
    let p = perf_cache_path(id, "elf")?;
    fs::open_regular(p.as_os_str().as_encoded_bytes(), true).ok()
}

/// Why [`open_mapped`] gave no file; each says why, for a note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OpenMappedError {
    /// A file is at the mapping's path, but not the one mapped (its device or inode differ:
    /// replaced since it was mapped), and the mapped one cannot be reached any more.
    Replaced(String),
    /// Any other reason (gone, unreadable, not a regular file).
    Other(String),
}

impl std::fmt::Display for OpenMappedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenMappedError::Replaced(m) => {
                write!(f, "the file there is not the one mapped (replaced: {m})")
            }
            OpenMappedError::Other(m) => f.write_str(m),
        }
    }
}

/// The file mapping `[start, end)` of process `pid` mapped, checked to be that file (as the
/// symbolizer finds it, see [`ElfJob::open`]): for readers of other parts of the binary (the
/// unwinder's unwind tables).
pub(crate) fn open_mapped(
    file: &Arc<MappedFile>,
    pid: u32,
    start: u64,
    end: u64,
) -> Result<std::fs::File, OpenMappedError> {
    let job = ElfJob {
        file: file.clone(),
        pid,
        start,
        end,
        debug_dirs: Arc::new([]),
        max_bytes: 0,
    };
    job.open().map(|o| o.file).map_err(|e| match e {
        LoadError::Mismatch(m) => OpenMappedError::Replaced(m),
        e => OpenMappedError::Other(e.to_string()),
    })
}

/// Does the opened file match what the record said?
fn check_identity(identity: &FileIdentity, o: &Opened) -> Result<(), String> {
    let FileIdentity::Inode { maj, min, ino, .. } = *identity else {
        return Ok(());
    };
    if o.ino != ino {
        return Err(format!("inode {}, the mapping's was {ino}", o.ino));
    }
    let (m, n) = fs::split_dev(o.dev);
    if (m, n) != (maj, min) && !fs::fs_magic(&o.file).is_some_and(fs::dev_is_virtual) {
        return Err(format!("device {m}:{n}, the mapping's was {maj}:{min}"));
    }
    Ok(())
}

impl ElfJob {
    /// The mapped file: through `/proc/PID/map_files` (exactly the mapped inode, even deleted
    /// or replaced, in any mount namespace), then the path inside the process's root, then the
    /// path as it reads here. The first that is the mapped file wins.
    fn open(&self) -> Result<Opened, LoadError> {
        // A mapping known by its build id (a recording's): perf's build-id cache first, where
        // `perf record` keeps a copy of each binary it sampled, under the id itself, so it is
        // the right file even once the one at the path was rebuilt or removed. The id is
        // checked again once the file is read.
        if let FileIdentity::BuildId(id) = self.file.identity() {
            if let Some(o) = perf_cache(id) {
                return Ok(o);
            }
        }
        let path = self.file.path_on_disk();
        let mut mismatch = None;
        let mut other = None;
        for candidate in 0..3 {
            let opened = match candidate {
                0 if self.pid != 0 && self.end > self.start => fs::open_regular(
                    format!(
                        "/proc/{}/map_files/{:x}-{:x}",
                        self.pid, self.start, self.end
                    )
                    .as_bytes(),
                    false,
                ),
                1 if self.pid != 0 => {
                    fs::open_in_root(format!("/proc/{}/root", self.pid).as_bytes(), path, false)
                }
                2 => fs::open_regular(path, false),
                _ => continue,
            };
            match opened {
                Ok(o) => match check_identity(self.file.identity(), &o) {
                    Ok(()) => return Ok(o),
                    Err(m) => mismatch = Some(m),
                },
                Err(OpenError::NotFound) | Err(OpenError::Unsupported) => {}
                Err(e) => other = Some(e),
            }
        }
        Err(match (mismatch, other) {
            (Some(m), _) => LoadError::Mismatch(m),
            (None, Some(e)) => open_error(e),
            (None, None) => LoadError::NotFound,
        })
    }

    fn run(self) -> Result<LoadedElf, LoadError> {
        let opened = self.open()?;
        let owner = opened.uid;
        let all = Want {
            symtab: true,
            dynsym: true,
            runtime: true,
        };
        let mut builder = TableBuilder::new(self.max_bytes);
        let facts = elf::read_file(opened.file, all, &mut builder, self.max_bytes as u64)?;
        let build_id = facts.build_id;
        if let FileIdentity::BuildId(want) = self.file.identity()
            && build_id != Some(*want)
        {
            return Err(LoadError::Mismatch(format!(
                "build id {}, the mapping's was {}",
                build_id.map_or("none".into(), |b| b.to_hex()),
                want.to_hex()
            )));
        }
        let loaded = |table, from| LoadedElf {
            table,
            segments: facts.segments.clone(),
            from,
            build_id,
        };
        if facts.symtab_functions > 0 {
            elf::push_plt(&mut builder, &facts.plt);
            return Ok(loaded(builder.build(true), SymbolsFrom::Symtab));
        }
        if let Some(id) = build_id
            && let Some((table, path)) =
                self.debug_file(id, facts.debuglink.as_deref(), owner, &facts.plt)
        {
            return Ok(loaded(table, SymbolsFrom::DebugFile(path)));
        }
        let mut mini_error = None;
        if let Some(packed) = &facts.gnu_debugdata {
            match self.mini_debuginfo(packed, build_id, &mut builder) {
                Ok(n) if n > 0 => {
                    elf::push_plt(&mut builder, &facts.plt);
                    return Ok(loaded(builder.build(true), SymbolsFrom::MiniDebugInfo));
                }
                Ok(_) => {}
                Err(e) => mini_error = Some(e),
            }
        }
        elf::push_plt(&mut builder, &facts.plt);
        let from = match mini_error {
            Some(e) => SymbolsFrom::Unusable(e),
            None if facts.dynsym_functions > 0 => SymbolsFrom::Dynsym,
            None => SymbolsFrom::Nothing,
        };
        Ok(loaded(builder.build(false), from))
    }

    /// The functions of the binary's MiniDebugInfo, added to `builder` (beside its
    /// `.dynsym`'s, which it leaves out); how many. Decompressed within the table's room, and
    /// used only when it is of the same build as the binary (or says no build).
    fn mini_debuginfo(
        &self,
        packed: &[u8],
        build_id: Option<BuildId>,
        builder: &mut TableBuilder,
    ) -> Result<usize, String> {
        let room = self.max_bytes.saturating_sub(builder.bytes());
        let elf_image = debug_file::mini_debuginfo(packed, room).map_err(|e| e.to_string())?;
        let header_only = Want {
            symtab: false,
            dynsym: false,
            runtime: false,
        };
        let mut none = TableBuilder::new(0);
        let ids = elf::read(&elf_image[..], header_only, &mut none, 0)
            .map_err(|e| format!("its .gnu_debugdata is not a usable ELF file ({e})"))?;
        if let (Some(mini), Some(id)) = (ids.build_id, build_id)
            && mini != id
        {
            return Err(format!(
                "its .gnu_debugdata is of another build ({}): not used",
                mini.to_hex()
            ));
        }
        let want = Want {
            symtab: true,
            dynsym: false,
            runtime: false,
        };
        let facts = elf::read(&elf_image[..], want, builder, self.max_bytes as u64)
            .map_err(|e| format!("its .gnu_debugdata is not a usable ELF file ({e})"))?;
        Ok(facts.symtab_functions)
    }

    /// A separate debug file whose build id is the binary's, from the places
    /// [`debug_file::candidates`] lists, each opened only by [`super::trusted`]'s rules
    /// (beside the binary, its owner `owner`'s files too; nowhere a link another user could
    /// have made). Without a build id to compare, no debug file is used: a debug link alone
    /// cannot tell an old debug file from the right one.
    fn debug_file(
        &self,
        id: BuildId,
        debuglink: Option<&[u8]>,
        owner: u32,
        plt: &[super::plt::PltSymbol],
    ) -> Option<(SymbolTable, String)> {
        let path = self.file.path_on_disk();
        // perf's build-id cache may hold the binary's debug file (`perf buildid-cache`,
        // debuginfod's downloads), where perf report and perf script find it: so does this.
        let cached = perf_cache_path(&id, "debug").map(|p| {
            (
                p.into_os_string().into_encoded_bytes(),
                debug_file::Place::System,
            )
        });
        let places = debug_file::candidates(id, debuglink, path, &self.debug_dirs);
        for (c, place) in cached.into_iter().chain(places) {
            let Ok(file) = trusted::open(&c, &place.trust(owner)) else {
                continue;
            };
            let mut builder = TableBuilder::new(self.max_bytes);
            let want = Want {
                symtab: true,
                dynsym: false,
                runtime: false,
            };
            let Ok(facts) = elf::read_file(file, want, &mut builder, self.max_bytes as u64) else {
                continue;
            };
            if facts.build_id == Some(id) && facts.symtab_functions > 0 {
                elf::push_plt(&mut builder, plt);
                return Some((builder.build(true), escape(&c)));
            }
        }
        None
    }
}

fn read_all(path: &std::path::Path, cap: usize) -> Result<Vec<u8>, LoadError> {
    use std::os::unix::ffi::OsStrExt;
    let mut o = fs::open_regular(path.as_os_str().as_bytes(), false).map_err(open_error)?;
    let (bytes, _) =
        fs::read_capped(&mut o.file, cap).map_err(|e| LoadError::Open(e.to_string()))?;
    Ok(bytes)
}

/// kallsyms is about 10 MB on big configurations; more than this is not kallsyms.
const MAX_KALLSYMS: usize = 256 << 20;

fn load_kernel(
    kallsyms: &std::path::Path,
    modules: &std::path::Path,
    max_bytes: usize,
) -> Result<KernelSymbols, LoadError> {
    let text = read_all(kallsyms, MAX_KALLSYMS)?;
    let modules = read_all(modules, 16 << 20).ok();
    let k = kernel::parse(&text, modules.as_deref(), max_bytes).map_err(|_| {
        LoadError::Elf(ElfError::TooLarge {
            limit: max_bytes as u64,
        })
    })?;
    if k.hidden {
        return Err(LoadError::Hidden);
    }
    Ok(k)
}

/// Read (more of) a process's perf map.
pub(crate) struct PerfMapJob {
    pub pid: u32,
    /// The file read before and how far: only what was appended since is read, unless the
    /// file was replaced or truncated.
    pub known: Option<(u64, u64, u64)>,
    pub max_bytes: usize,
}

pub(crate) struct PerfMapRead {
    /// The map was replaced: drop what was read before.
    pub restart: bool,
    pub dev: u64,
    pub ino: u64,
    /// The file offset after `bytes`.
    pub end: u64,
    pub bytes: Vec<u8>,
    /// More than `max_bytes` in the file.
    pub truncated: bool,
}

/// The owner (effective uid) of a live process.
pub(crate) fn process_uid(pid: u32) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}"))
        .ok()
        .map(|m| m.uid())
}

impl PerfMapJob {
    fn run(self) -> Result<PerfMapRead, LoadError> {
        let mut o = super::as_owner::open_perf_map(self.pid).map_err(|e| match e {
            super::as_owner::Refused::Open(e) => open_error(e),
            super::as_owner::Refused::NotOwned(uid) => LoadError::NotOwned(uid),
        })?;
        let (restart, from) = match self.known {
            Some((dev, ino, off)) if dev == o.dev && ino == o.ino && o.size >= off => (false, off),
            _ => (true, 0),
        };
        o.file
            .seek(SeekFrom::Start(from))
            .map_err(|e| LoadError::Open(e.to_string()))?;
        let room = self.max_bytes.saturating_sub(from as usize);
        let (bytes, truncated) =
            fs::read_capped(&mut o.file, room).map_err(|e| LoadError::Open(e.to_string()))?;
        Ok(PerfMapRead {
            restart,
            dev: o.dev,
            ino: o.ino,
            end: from + bytes.len() as u64,
            bytes,
            truncated,
        })
    }
}
