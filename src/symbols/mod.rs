//! The symbolizer: names for sample addresses, kernel and user, with the binary they are in.
//!
//! A frontend (through the process model) asks with a batch of [`Request`]s: a kernel address,
//! or a user address with the [`Mapping`] that holds it as an MMAP2 record described it (path,
//! start, length, file offset, device/inode or build id) and the process id. The answers are
//! [`Symbolized`] values: an interned [`Symbol`] (name and [`Dso`], shared, cheap to clone)
//! and the offset into it, so that `hot_b+0x16` in `/usr/local/bin/spin` costs a reference
//! count per sample.
//!
//! Sources: `/proc/kallsyms` (modules named `[module]`); the ELF symbol tables (`.symtab`,
//! `.dynsym`) of the mapped file, found through `/proc/PID/map_files` (deleted or replaced
//! binaries), `/proc/PID/root` (containers) or its path, and checked against the mapping's
//! device/inode or build id so that another file at the same path is never read in its place;
//! a separate debug file by build id or `.gnu_debuglink` (opened only where its owners put it,
//! `trusted`), or MiniDebugInfo (`.gnu_debugdata`); PLT stubs named as perf names them
//! (`memcmp@plt`); the perf map of a JIT
//! (`/tmp/perf-PID.map`); the vDSO, from perfwatch's own copy when it is the same image.
//! Names are demangled (Rust, C++) and escaped. A process that has exited is named from what
//! its mapping said: nothing here reads `/proc/PID/maps`.
//!
//! Caching: each distinct (binary, file offset) is resolved once, then answered from a
//! two-generation cache keyed by a small binary id and the offset (foldhash, seeded: no
//! SipHash on the hot path, no bucket a monitored program can aim at). Parsed binaries are kept in a cache bounded in bytes
//! ([`Config::table_budget`]), keyed by device/inode or build id and evicted least recently
//! used first. Everything that reads a file runs on a small pool of loader threads
//! (`loader`), started as soon as a binary is mapped ([`Symbolizer::prefetch`]) or needed, and
//! a batch of requests waits once for all the reads it needs ([`Config::batch_wait`]), so a
//! file that never answers (a FIFO put in a binary's place, a hung NFS mount) costs at most
//! that wait, not a hang, and a storm of new binaries does not add up. Stuck reads are
//! bounded per source (device), so one user's files never blind the names of others. Files
//! on FUSE and network filesystems are not read by default ([`Config::read_user_fs`],
//! `mounts`): a read their server never answers can keep the process from exiting.
//!
//! Unknown stays honest: an address outside every symbol's extent, in a stripped binary, in a
//! file that cannot be read or is not the mapped one, is `[unknown]` with its binary named;
//! what went wrong is said once per binary ([`Symbolizer::take_notes`]).
//!
//! A [`Symbolizer`] runs on the pipeline's thread (the frontend's, in its symbolize step),
//! never on a reader thread.

mod as_owner;
mod build_id;
mod debug_file;
pub mod demangle;
pub mod elf;
mod fs;
pub mod kernel;
mod load;
mod loader;
mod loading;
mod mounts;
mod perf_maps;
pub mod perfmap;
mod plt;
mod request;
mod results;
mod section;
mod symbol;
mod table;
mod trusted;
mod vdso;

use std::hash::{Hash, Hasher};
use std::mem;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustc_hash::{FxHashMap, FxHashSet};

pub(crate) use load::{OpenMappedError, open_mapped};
pub(crate) use mounts::user_fs_of;
pub(crate) use request::{BuildId, MappingKind};
pub use request::{FileIdentity, MappedFile, Mapping, Request};
pub(crate) use symbol::{Dso, SymbolKey, UNKNOWN};
pub use symbol::{DsoKind, Symbol, Symbolized};
/// perfwatch's own vDSO (the unwinder reads its unwind tables), and a process's copy to compare.
pub(crate) use vdso::{
    own_build_id as own_vdso_build_id, own_image as own_vdso, read_process_memory,
};

use load::{Job, LoadError, Outcome};
use loader::Loader;
use perf_maps::PerfMapState;
use request::Target;
use results::ResultCache;
use table::SymbolTable;

/// Limits and places; the defaults suit a live monitor.
#[derive(Clone, Debug)]
pub struct Config {
    pub kallsyms: PathBuf,
    pub modules: PathBuf,
    /// Where separate debug files are looked for (`.build-id/xx/yyyy.debug` under each, and
    /// debug links).
    pub debug_dirs: Vec<PathBuf>,
    /// Bytes of parsed symbol tables kept (all binaries, the kernel and perf maps together);
    /// one binary may use all of it, a binary needing more is not read.
    pub table_budget: usize,
    /// Answers kept per cache generation (two generations).
    pub result_entries: usize,
    /// Distinct binaries tracked before every cache is cleared.
    pub max_binaries: usize,
    /// How long one file read may take before its samples are answered `[unknown]` (the read
    /// goes on; its symbols are used once it finishes).
    pub load_timeout: Duration,
    /// How long one batch of requests ([`Symbolizer::resolve`]) waits for the reads its
    /// binaries need, all of them together (None: the load timeout). What is not read by
    /// then is answered `[unknown]` in its binary (the read goes on for the requests after
    /// it), so a batch that meets thirty new binaries holds its caller up this long, not
    /// thirty times the load timeout.
    pub batch_wait: Option<Duration>,
    /// Read binaries on filesystems whose reads another program or machine answers (FUSE,
    /// NFS, CIFS, 9p...: [`mounts::can_hang`]). Off: such a binary is not read (its samples
    /// are named by the binary alone, and it is said once), because a read its server never
    /// answers can keep the whole process from ever exiting.
    pub read_user_fs: bool,
    /// Read kallsyms when the symbolizer starts rather than at the first kernel address
    /// (the kernel takes some 70 ms to list it; a monitor that samples the kernel pays it
    /// before the first batch instead of in it).
    pub preload_kernel: bool,
    /// Finished data (a recording read to a line format): every batch waits for all the
    /// reads it needs until they finish, up to [`Config::load_timeout`] each, so that the
    /// same file gets the same names however loaded the machine is; a read still going past
    /// the load timeout is not waited for again (its samples are `[unknown]` until it
    /// finishes, and it is said once). Off (live): [`Config::batch_wait`] bounds each batch.
    pub complete: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            kallsyms: "/proc/kallsyms".into(),
            modules: "/proc/modules".into(),
            debug_dirs: vec!["/usr/lib/debug".into()],
            table_budget: 32 << 20,
            result_entries: 32 << 10,
            max_binaries: 16 << 10,
            load_timeout: Duration::from_secs(2),
            batch_wait: None,
            read_user_fs: false,
            preload_kernel: false,
            complete: false,
        }
    }
}

impl Config {
    /// An upper bound of the memory the caches hold with this configuration, in bytes: the
    /// table budget, both result-cache generations and the binary index.
    #[cfg(test)]
    pub(crate) fn memory_bound(&self) -> usize {
        // A result entry: 24 bytes of key and value, one control byte, at most half the
        // buckets of a power-of-two table empty.
        let results = 2 * self.result_entries.next_power_of_two() * 2 * 33;
        // A binary: its slot, dso and unknown symbol, and an index entry.
        let binaries = self.max_binaries * 320;
        self.table_budget + results + binaries
    }
}

/// Something the user should be told once about a binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// The binary's escaped name.
    pub dso: String,
    pub message: String,
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.dso, self.message)
    }
}

/// Counters, for tests, benchmarks and a status line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub requests: u64,
    /// Answered from the result cache.
    pub cache_hits: u64,
    /// Files (binaries, kallsyms, perf maps) read.
    pub loads: u64,
    pub load_failures: u64,
    pub evictions: u64,
    /// Times every cache was cleared because too many binaries were seen.
    pub resets: u64,
    pub loaded_binaries: usize,
    pub table_bytes: usize,
    pub cached_results: usize,
}

type BinaryId = u32;
const KERNEL: BinaryId = 0;
const VDSO: BinaryId = 1;
/// Addresses no mapping covers.
const NOWHERE: BinaryId = 2;
const FIXED: usize = 3;
/// The kernel and the vDSO: never evicted.
const PINNED: usize = 2;

/// How often a perf map that lacked an address, or is missing, is looked at again.
const PERF_MAP_RECHECK: Duration = Duration::from_secs(1);
/// How often, and how many times, a binary that could not be read is tried again.
const RETRY_AFTER: Duration = Duration::from_secs(1);
const MAX_ATTEMPTS: u8 = 4;

enum Source {
    Kernel,
    Vdso,
    Nowhere,
    File(Arc<MappedFile>),
    PerfMap(u32),
    /// Memory without symbols (`[stack]`, anonymous memory's own name, a dead slot).
    Special,
}

enum Table {
    Elf {
        table: SymbolTable,
        segments: Vec<elf::Segment>,
    },
    /// The kernel's table and the dso (and its key) of each owner tag.
    Kernel {
        symbols: kernel::KernelSymbols,
        owners: Vec<(Arc<Dso>, u64)>,
    },
    PerfMap(PerfMapState),
}

struct Loaded {
    table: Table,
    /// Symbols already handed out, by symbol index (perf maps: by name offset).
    interned: FxHashMap<u64, Arc<Symbol>>,
    /// The table's bytes and the interned symbols'.
    bytes: usize,
    interned_bytes: usize,
}

enum State {
    Unloaded,
    /// A read is in flight since then.
    Loading(Instant),
    Loaded(Box<Loaded>),
    Failed(LoadError),
    NoSymbols,
}

struct Binary {
    source: Source,
    dso: Arc<Dso>,
    dso_key: u64,
    unknown: Arc<Symbol>,
    state: State,
    last_used: u64,
    attempts: u8,
    last_attempt: Option<Instant>,
    /// Its unknown answer went into the result cache once it was [`Binary::settled`]: from
    /// then on every address of it is answered from its state, with no entry of its own.
    unknown_cached: bool,
}

impl Binary {
    fn new(source: Source, dso: Arc<Dso>, dso_key: u64, state: State) -> Binary {
        Binary {
            unknown: Symbol::unknown(Arc::clone(&dso), dso_key),
            source,
            dso,
            dso_key,
            state,
            last_used: 0,
            attempts: 0,
            last_attempt: None,
            unknown_cached: false,
        }
    }

    /// It will never be read: no symbols, or a read that failed for good (not worth
    /// retrying, or out of attempts). Every address in it is its unknown symbol.
    #[inline]
    fn settled(&self) -> bool {
        match &self.state {
            State::NoSymbols => true,
            State::Failed(e) => !e.retryable() || self.attempts >= MAX_ATTEMPTS,
            _ => false,
        }
    }
}

fn stable_hash(h: impl Hash) -> u64 {
    let mut s = std::hash::DefaultHasher::new();
    h.hash(&mut s);
    s.finish()
}

/// Resolves addresses to symbols; keeps every cache. Not shared between threads: it runs on
/// the pipeline's.
pub struct Symbolizer {
    config: Config,
    debug_dirs: Arc<[PathBuf]>,
    loader: Loader,
    binaries: Vec<Binary>,
    files: FxHashMap<Arc<MappedFile>, BinaryId>,
    /// Each process's perf map, with the start of the program it was read for.
    perf_maps: FxHashMap<u32, (u64, BinaryId)>,
    vdso_checked: FxHashMap<(u32, u64), bool>,
    results: ResultCache,
    /// The file of the previous request, to skip the index for runs of one binary.
    last_file: Option<(Arc<MappedFile>, BinaryId)>,
    epoch: u32,
    tick: u64,
    table_bytes: usize,
    notes: Vec<Note>,
    /// The class of each device's filesystem.
    mounts: mounts::Mounts,
    /// The binaries whose reads the current batch waits for.
    awaited: Vec<BinaryId>,
    /// The last request answered needed a read still in flight (or waiting for a thread).
    in_flight: bool,
    /// A read of the current batch waits for a thread of the pool.
    queued: bool,
    noted: FxHashSet<u64>,
    stats: Stats,
    /// The clock as the current batch began: what the miss paths compare their recheck and
    /// retry times with, instead of reading the clock once per sample.
    now: Instant,
}

impl Default for Symbolizer {
    fn default() -> Symbolizer {
        Symbolizer::new(Config::default())
    }
}

impl Symbolizer {
    /// From now on, wait for no binary's first read past `at`: a stopping run names what
    /// it can within its grace and leaves the rest `[unknown]` (None: only the load
    /// timeout bounds a wait).
    pub(crate) fn set_load_deadline(&mut self, at: Option<Instant>) {
        self.loader.set_deadline(at);
    }

    pub fn new(config: Config) -> Symbolizer {
        let mut s = Symbolizer {
            debug_dirs: config.debug_dirs.clone().into(),
            loader: Loader::new(config.load_timeout),
            results: ResultCache::new(config.result_entries),
            config,
            binaries: Vec::new(),
            files: FxHashMap::default(),
            perf_maps: FxHashMap::default(),
            vdso_checked: FxHashMap::default(),
            last_file: None,
            epoch: 0,
            tick: 0,
            table_bytes: 0,
            notes: Vec::new(),
            noted: FxHashSet::default(),
            stats: Stats::default(),
            mounts: mounts::Mounts::default(),
            awaited: Vec::new(),
            in_flight: false,
            queued: false,
            now: Instant::now(),
        };
        let fixed = [
            (Source::Kernel, "[kernel.kallsyms]", DsoKind::Kernel),
            (Source::Vdso, "[vdso]", DsoKind::Vdso),
            (Source::Nowhere, UNKNOWN, DsoKind::Unknown),
        ];
        for (source, name, kind) in fixed {
            let key = stable_hash(("perfwatch fixed dso", name));
            let state = match source {
                Source::Nowhere => State::NoSymbols,
                _ => State::Unloaded,
            };
            s.binaries
                .push(Binary::new(source, Dso::new(name, kind), key, state));
        }
        if s.config.preload_kernel {
            s.preload_kernel();
        }
        s
    }

    /// Answer one request with what is read already (a read it needs is started).
    fn answer(&mut self, r: &Request) -> Symbolized {
        self.stats.requests += 1;
        match &r.target {
            Target::Kernel => self.lookup(KERNEL, r.addr, r),
            Target::Mapped(m) => match m.file.kind() {
                MappingKind::File => {
                    let id = self.file_id(&m.file);
                    self.lookup(id, m.file_offset(r.addr), r)
                }
                MappingKind::Anon => self.perf_map(r, Some(&m.file)),
                MappingKind::Vdso => self.vdso(r, m),
                MappingKind::Special => {
                    let id = self.file_id(&m.file);
                    Symbolized::unknown(&self.binaries[id as usize].unknown)
                }
            },
            Target::Unmapped => self.perf_map(r, None),
        }
    }

    /// What went wrong since the last call, at most once per binary.
    pub fn take_notes(&mut self) -> Vec<Note> {
        mem::take(&mut self.notes)
    }

    pub fn stats(&self) -> Stats {
        Stats {
            loaded_binaries: self
                .binaries
                .iter()
                .filter(|b| matches!(b.state, State::Loaded(_)))
                .count(),
            table_bytes: self.table_bytes,
            cached_results: self.results.len(),
            ..self.stats
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    #[inline]
    fn lookup(&mut self, id: BinaryId, key: u64, r: &Request) -> Symbolized {
        // A binary that will never be read (no symbols, or failed for good) answers its
        // unknown for every address once that is cached: no entry per address in the result
        // cache, where a large unreadable binary (a compiler's) would push out every answer
        // worth keeping.
        if let Some(b) = self.binaries.get(id as usize)
            && b.unknown_cached
            && b.settled()
        {
            self.stats.cache_hits += 1;
            return Symbolized::unknown(&b.unknown);
        }
        if let Some(hit) = self.results.get(id, key) {
            self.stats.cache_hits += 1;
            return hit;
        }
        self.miss(id, key, r)
    }

    #[inline]
    fn file_id(&mut self, file: &Arc<MappedFile>) -> BinaryId {
        if let Some((f, id)) = &self.last_file
            && Arc::ptr_eq(f, file)
        {
            return *id;
        }
        let id = match self.files.get(&**file) {
            Some(&id) => id,
            None => self.new_file(file),
        };
        self.last_file = Some((Arc::clone(file), id));
        id
    }

    #[cold]
    fn new_file(&mut self, file: &Arc<MappedFile>) -> BinaryId {
        let (kind, state) = match file.kind() {
            MappingKind::File => (DsoKind::File, State::Unloaded),
            MappingKind::Vdso => (DsoKind::Vdso, State::NoSymbols),
            MappingKind::Anon | MappingKind::Special => (DsoKind::Other, State::NoSymbols),
        };
        let dso = Dso::new(crate::text::escape(file.path()), kind);
        let b = Binary::new(
            Source::File(Arc::clone(file)),
            dso,
            file.identity_hash(),
            state,
        );
        let id = self.push_binary(b);
        self.files.insert(Arc::clone(file), id);
        id
    }

    /// Add a binary, clearing every cache first when there are too many.
    fn push_binary(&mut self, b: Binary) -> BinaryId {
        if self.binaries.len() >= self.config.max_binaries.max(FIXED + 1) {
            self.reset();
        }
        self.binaries.push(b);
        (self.binaries.len() - 1) as BinaryId
    }

    fn reset(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        self.stats.resets += 1;
        self.binaries.truncate(FIXED);
        self.files.clear();
        self.perf_maps.clear();
        self.vdso_checked.clear();
        self.results.clear();
        self.last_file = None;
        self.table_bytes = self
            .binaries
            .iter()
            .map(|b| match &b.state {
                State::Loaded(l) => l.bytes,
                _ => 0,
            })
            .sum();
    }

    fn tag(&self, id: BinaryId) -> u64 {
        (self.epoch as u64) << 32 | id as u64
    }

    fn note(&mut self, id: BinaryId, message: impl Into<String>) {
        let b = &self.binaries[id as usize];
        if self.noted.len() > 1 << 16 {
            self.noted.clear();
        }
        if self.noted.insert(b.dso_key) {
            self.notes.push(Note {
                dso: b.dso.name().to_string(),
                message: message.into(),
            });
        }
    }

    fn fail(&mut self, id: BinaryId, e: LoadError) {
        self.stats.load_failures += 1;
        let quiet = matches!(self.binaries[id as usize].source, Source::PerfMap(_))
            && e == LoadError::NotFound;
        if !quiet {
            let msg = match &e {
                LoadError::NotFound => "cannot read its symbols: the file is gone".to_string(),
                e => format!("cannot read its symbols: {e}"),
            };
            self.note(id, msg);
        }
        self.binaries[id as usize].state = State::Failed(e);
    }

    /// Miss in the result cache: load the binary if needed, look the address up, remember.
    #[cold]
    fn miss(&mut self, id: BinaryId, key: u64, r: &Request) -> Symbolized {
        self.tick += 1;
        self.ensure_loaded(id, r);
        let b = &mut self.binaries[id as usize];
        b.last_used = self.tick;
        let State::Loaded(l) = &mut b.state else {
            let answer = Symbolized::unknown(&b.unknown);
            // A binary without symbols, or whose read failed for good, stays so: its answer
            // is kept, so the next sample there is a hash probe. One that failed may load
            // later: not kept.
            if b.settled() {
                b.unknown_cached = true;
                self.results.insert(id, key, answer.clone());
            }
            return answer;
        };
        let found = match &l.table {
            Table::Elf { table, segments } => elf::offset_to_vaddr(segments, key)
                .and_then(|va| table.find(va))
                .map(|(i, off)| {
                    let start = table.start(i);
                    let (dso, dso_key) = (&b.dso, b.dso_key);
                    let sym = l.interned.entry(i as u64).or_insert_with(|| {
                        Symbol::of_table(
                            Some(demangle::display_name(table.name(i))),
                            Arc::clone(dso),
                            SymbolKey {
                                dso: dso_key,
                                start,
                            },
                            table.end(i),
                            table.binding(i),
                        )
                    });
                    (Arc::clone(sym), off)
                }),
            Table::Kernel { symbols, owners } => symbols.table.find(key).map(|(i, off)| {
                let t = &symbols.table;
                let (dso, dso_key) = &owners[t.tag(i) as usize];
                let sym = l.interned.entry(i as u64).or_insert_with(|| {
                    Symbol::of_table(
                        Some(demangle::display_name(t.name(i))),
                        Arc::clone(dso),
                        SymbolKey {
                            dso: *dso_key,
                            start: t.start(i),
                        },
                        t.end(i),
                        t.binding(i),
                    )
                });
                (Arc::clone(sym), off)
            }),
            Table::PerfMap(_) => None,
        };
        let answer = match found {
            Some((sym, off)) => {
                let added = sym.display_name().len() + mem::size_of::<Symbol>() + 48;
                l.bytes += added;
                l.interned_bytes += added;
                self.table_bytes += added;
                Symbolized::new(sym, off)
            }
            None => Symbolized::unknown(&b.unknown),
        };
        self.results.insert(id, key, answer.clone());
        if self.table_bytes > self.config.table_budget {
            self.evict(id);
        }
        answer
    }

    /// Bytes of the kernel's and the vDSO's tables, which are never evicted: every process
    /// shares them, and the kernel's takes some 70 ms to read again.
    fn pinned_bytes(&self) -> usize {
        self.binaries[..PINNED]
            .iter()
            .map(|b| match &b.state {
                State::Loaded(l) => l.bytes,
                _ => 0,
            })
            .sum()
    }

    /// The most one binary's (or perf map's) table may take: the budget less the pinned
    /// tables, so that the budget holds whatever is loaded.
    fn room(&self) -> usize {
        self.config.table_budget.saturating_sub(self.pinned_bytes())
    }

    /// Drop the least recently used tables until the budget holds (never `keep`).
    fn evict(&mut self, keep: BinaryId) {
        while self.table_bytes > self.config.table_budget {
            let victim = self
                .binaries
                .iter()
                .enumerate()
                .filter(|(i, b)| {
                    *i != keep as usize && *i >= PINNED && matches!(b.state, State::Loaded(_))
                })
                .min_by_key(|(_, b)| b.last_used)
                .map(|(i, _)| i);
            let Some(v) = victim else {
                // Only pinned tables left: forget the symbols they handed out (answers
                // already given keep theirs; the next ones intern anew, with equal keys).
                for b in &mut self.binaries[..PINNED] {
                    if let State::Loaded(l) = &mut b.state {
                        l.interned = FxHashMap::default();
                        l.bytes -= l.interned_bytes;
                        self.table_bytes = self.table_bytes.saturating_sub(l.interned_bytes);
                        l.interned_bytes = 0;
                    }
                }
                break;
            };
            let b = &mut self.binaries[v];
            if let State::Loaded(l) = mem::replace(&mut b.state, State::Unloaded) {
                self.table_bytes = self.table_bytes.saturating_sub(l.bytes);
            }
            b.attempts = 0;
            b.last_attempt = None;
            self.stats.evictions += 1;
        }
    }

    fn vdso(&mut self, r: &Request, m: &Mapping) -> Symbolized {
        let same = match m.file.identity() {
            FileIdentity::BuildId(b) => vdso::own_build_id() == Some(*b),
            _ => self.vdso_same(r.pid, m.start, m.len),
        };
        if same {
            return self.lookup(VDSO, m.file_offset(r.addr), r);
        }
        let id = self.file_id(&m.file);
        self.note(
            id,
            "this vDSO could not be compared with perfwatch's own (its process has exited, or it \
             is another ABI's): its samples show [unknown]",
        );
        Symbolized::unknown(&self.binaries[id as usize].unknown)
    }

    #[cold]
    fn vdso_same(&mut self, pid: u32, start: u64, len: u64) -> bool {
        if let Some(&v) = self.vdso_checked.get(&(pid, start)) {
            return v;
        }
        let Some(img) = vdso::own_image() else {
            return false;
        };
        let same = pid != 0
            && len == img.len() as u64
            && matches!(
                self.loader.run(
                    Job::Memory { pid, addr: start, len },
                    u64::MAX,
                    Symbolizer::memory_source(),
                    self.config.load_timeout,
                ),
                Ok(Outcome::Memory(Some(bytes))) if bytes == img
            );
        if self.vdso_checked.len() >= 4096 {
            self.vdso_checked.clear();
        }
        self.vdso_checked.insert((pid, start), same);
        same
    }
}

#[cfg(test)]
mod tests;
