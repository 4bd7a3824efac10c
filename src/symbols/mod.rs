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
//! used first. Everything that reads a file runs on a loader thread with a deadline
//! ([`Config::load_timeout`]), so a file that never answers (a FIFO put in a binary's place,
//! a hung FUSE mount) costs one deadline, not a hang.
//!
//! Unknown stays honest: an address outside every symbol's extent, in a stripped binary, in a
//! file that cannot be read or is not the mapped one, is `[unknown]` with its binary named;
//! what went wrong is said once per binary ([`Symbolizer::take_notes`]).
//!
//! A [`Symbolizer`] runs on the pipeline's thread (the frontend's, in its symbolize step),
//! never on a reader thread.

mod debug_file;
pub mod demangle;
pub mod elf;
mod fs;
pub mod kernel;
mod load;
mod loader;
pub mod perfmap;
mod plt;
mod request;
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

pub use request::{BuildId, FileIdentity, MappedFile, Mapping, MappingKind, Request};
pub use symbol::{Dso, DsoKind, Symbol, SymbolKey, Symbolized, UNKNOWN};
pub use table::TooLarge;

use load::{ElfJob, Job, LoadError, Outcome, PerfMapJob, PerfMapRead, SymbolsFrom};
use loader::{Loader, RunError};
use perfmap::PerfMap;
use request::Target;
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
    /// Read kallsyms when the symbolizer starts rather than at the first kernel address
    /// (the kernel takes some 70 ms to list it; a monitor that samples the kernel pays it
    /// before the first batch instead of in it).
    pub preload_kernel: bool,
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
            preload_kernel: false,
        }
    }
}

impl Config {
    /// An upper bound of the memory the caches hold with this configuration, in bytes: the
    /// table budget, both result-cache generations and the binary index.
    pub fn memory_bound(&self) -> usize {
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

struct PerfMapState {
    map: PerfMap,
    dev: u64,
    ino: u64,
    end: u64,
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
        }
    }
}

/// The result cache's map. Its keys are addresses a monitored program chooses (a JIT can put
/// code anywhere), so the hash is foldhash with a per-map random seed: as fast as FxHash on
/// two integers, but a program cannot aim its addresses at one bucket chain.
type ResultMap =
    std::collections::HashMap<(BinaryId, u64), Symbolized, foldhash::fast::RandomState>;

/// The answers already given, in two generations: a full current generation becomes the old
/// one (the previous old one is dropped), and a hit in the old generation moves back.
struct ResultCache {
    cur: ResultMap,
    old: ResultMap,
    cap: usize,
}

impl ResultCache {
    fn new(cap: usize) -> ResultCache {
        ResultCache {
            cur: ResultMap::default(),
            old: ResultMap::default(),
            cap: cap.max(1),
        }
    }

    #[inline]
    fn get(&mut self, id: BinaryId, key: u64) -> Option<Symbolized> {
        match self.cur.get(&(id, key)) {
            Some(s) => Some(s.clone()),
            None => self.promote(id, key),
        }
    }

    #[cold]
    fn promote(&mut self, id: BinaryId, key: u64) -> Option<Symbolized> {
        let s = self.old.remove(&(id, key))?;
        self.insert(id, key, s.clone());
        Some(s)
    }

    fn insert(&mut self, id: BinaryId, key: u64, s: Symbolized) {
        if self.cur.len() >= self.cap {
            self.old = mem::take(&mut self.cur);
        }
        self.cur.insert((id, key), s);
    }

    fn len(&self) -> usize {
        self.cur.len() + self.old.len()
    }

    fn clear(&mut self) {
        self.cur = ResultMap::default();
        self.old = ResultMap::default();
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
    perf_maps: FxHashMap<u32, BinaryId>,
    vdso_checked: FxHashMap<(u32, u64), bool>,
    results: ResultCache,
    /// The file of the previous request, to skip the index for runs of one binary.
    last_file: Option<(Arc<MappedFile>, BinaryId)>,
    epoch: u32,
    tick: u64,
    table_bytes: usize,
    notes: Vec<Note>,
    /// When the kallsyms read started in the background ([`Config::preload_kernel`]), until
    /// the first kernel address waits for it.
    kernel_preload: Option<Instant>,
    noted: FxHashSet<u64>,
    stats: Stats,
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
    pub fn set_load_deadline(&mut self, at: Option<Instant>) {
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
            kernel_preload: None,
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

    /// Start reading kallsyms on the loader thread without waiting for it: the first kernel
    /// address waits for it then (within the load deadline, counted from now), so that
    /// whoever builds the symbolizer is not held up (under a sampling storm, reading
    /// kallsyms can take seconds).
    fn preload_kernel(&mut self) {
        let job = Job::Kernel {
            kallsyms: self.config.kallsyms.clone(),
            modules: self.config.modules.clone(),
            max_bytes: self.config.table_budget,
        };
        self.stats.loads += 1;
        self.binaries[KERNEL as usize].attempts = 1;
        self.binaries[KERNEL as usize].last_attempt = Some(Instant::now());
        let tag = self.tag(KERNEL);
        match self.loader.run_waiting(job, tag, Duration::ZERO) {
            Ok(outcome) => self.install(KERNEL, outcome),
            Err(RunError::TimedOut) => self.kernel_preload = Some(Instant::now()),
            Err(e) => {
                let e = self.run_error(e);
                self.fail(KERNEL, e)
            }
        }
    }

    /// Answer every request, in order, into `out` (appended).
    pub fn resolve(&mut self, requests: &[Request], out: &mut Vec<Symbolized>) {
        if self.loader.stuck() > 0 {
            self.harvest();
        }
        out.reserve(requests.len());
        for r in requests {
            let s = self.resolve_one(r);
            out.push(s);
        }
    }

    /// Answer one request.
    pub fn resolve_one(&mut self, r: &Request) -> Symbolized {
        self.stats.requests += 1;
        match &r.target {
            Target::Kernel => self.lookup(KERNEL, r.addr, r),
            Target::Mapped(m) => match m.file.kind() {
                MappingKind::File => {
                    let id = self.file_id(&m.file);
                    self.lookup(id, m.file_offset(r.addr), r)
                }
                MappingKind::Anon => self.perf_map(r.pid, r.addr, Some(&m.file)),
                MappingKind::Vdso => self.vdso(r, m),
                MappingKind::Special => {
                    let id = self.file_id(&m.file);
                    Symbolized::unknown(&self.binaries[id as usize].unknown)
                }
            },
            Target::Unmapped => self.perf_map(r.pid, r.addr, None),
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
            // Not cached: a binary that failed may load later.
            return Symbolized::unknown(&b.unknown);
        };
        let found = match &l.table {
            Table::Elf { table, segments } => elf::offset_to_vaddr(segments, key)
                .and_then(|va| table.find(va))
                .map(|(i, off)| {
                    let start = table.start(i);
                    let (dso, dso_key) = (&b.dso, b.dso_key);
                    let sym = l.interned.entry(i as u64).or_insert_with(|| {
                        Symbol::new(
                            Some(demangle::display_name(table.name(i))),
                            Arc::clone(dso),
                            SymbolKey {
                                dso: dso_key,
                                start,
                            },
                        )
                    });
                    (Arc::clone(sym), off)
                }),
            Table::Kernel { symbols, owners } => symbols.table.find(key).map(|(i, off)| {
                let t = &symbols.table;
                let (dso, dso_key) = &owners[t.tag(i) as usize];
                let sym = l.interned.entry(i as u64).or_insert_with(|| {
                    Symbol::new(
                        Some(demangle::display_name(t.name(i))),
                        Arc::clone(dso),
                        SymbolKey {
                            dso: *dso_key,
                            start: t.start(i),
                        },
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

    fn may_retry(&self, id: BinaryId) -> bool {
        let b = &self.binaries[id as usize];
        b.attempts < MAX_ATTEMPTS && b.last_attempt.is_none_or(|t| t.elapsed() >= RETRY_AFTER)
    }

    fn ensure_loaded(&mut self, id: BinaryId, r: &Request) {
        if id == KERNEL {
            if let Some(started) = self.kernel_preload.take() {
                let left = self
                    .loader
                    .timeout()
                    .saturating_sub(started.elapsed())
                    .min(self.loader.wait());
                let tag = self.tag(KERNEL);
                match self.loader.wait_for(tag, left) {
                    Some(outcome) => self.install(KERNEL, outcome),
                    None => {
                        let e = self.run_error(RunError::TimedOut);
                        self.fail(KERNEL, e);
                    }
                }
                return;
            }
        }
        match &self.binaries[id as usize].state {
            State::Loaded(_) | State::NoSymbols => return,
            State::Failed(e) if !(e.retryable() && self.may_retry(id)) => return,
            State::Failed(_) | State::Unloaded => {}
        }
        let job = match &self.binaries[id as usize].source {
            Source::Kernel => Job::Kernel {
                kallsyms: self.config.kallsyms.clone(),
                modules: self.config.modules.clone(),
                max_bytes: self.config.table_budget,
            },
            Source::File(f) => {
                let Target::Mapped(m) = &r.target else {
                    return;
                };
                Job::Elf(ElfJob {
                    file: Arc::clone(f),
                    pid: r.pid,
                    start: m.start,
                    end: m.start.saturating_add(m.len),
                    debug_dirs: Arc::clone(&self.debug_dirs),
                    max_bytes: self.room(),
                })
            }
            Source::Vdso => {
                self.load_vdso();
                return;
            }
            Source::Nowhere | Source::Special | Source::PerfMap(_) => return,
        };
        let b = &mut self.binaries[id as usize];
        b.attempts = b.attempts.saturating_add(1);
        b.last_attempt = Some(Instant::now());
        self.stats.loads += 1;
        let tag = self.tag(id);
        match self.loader.run(job, tag) {
            Ok(outcome) => self.install(id, outcome),
            Err(e) => {
                let e = self.run_error(e);
                self.fail(id, e)
            }
        }
    }

    fn run_error(&self, e: RunError) -> LoadError {
        match e {
            RunError::TimedOut if self.loader.deadline_cuts_waits() => LoadError::Stopping,
            RunError::TimedOut => LoadError::TimedOut(self.loader.timeout().as_secs().max(1)),
            RunError::Busy => LoadError::Busy,
            RunError::Failed(m) => LoadError::Internal(m),
        }
    }

    fn load_vdso(&mut self) {
        let state = match vdso::own_image() {
            Some(img) => {
                let mut builder = table::TableBuilder::new(1 << 20);
                let want = elf::Want {
                    symtab: true,
                    dynsym: true,
                    runtime: false,
                };
                match elf::read(img, want, &mut builder, 1 << 20) {
                    Ok(facts) if builder.len() > 0 => {
                        let table = builder.build(facts.symtab_functions > 0);
                        let bytes = table.bytes();
                        self.table_bytes += bytes;
                        State::Loaded(Box::new(Loaded {
                            table: Table::Elf {
                                table,
                                segments: facts.segments,
                            },
                            interned: FxHashMap::default(),
                            bytes,
                            interned_bytes: 0,
                        }))
                    }
                    _ => State::NoSymbols,
                }
            }
            None => State::NoSymbols,
        };
        self.binaries[VDSO as usize].state = state;
    }

    /// Put a finished read in place.
    fn install(&mut self, id: BinaryId, outcome: Outcome) {
        let table = match outcome {
            Outcome::Elf(Ok(le)) => {
                match &le.from {
                    SymbolsFrom::Nothing => self.note(
                        id,
                        match le.build_id {
                            Some(b) => format!(
                                "no symbols (stripped, and no debug file for build id {})",
                                b.to_hex()
                            ),
                            None => {
                                "no symbols (stripped, and no build id to find a debug file by)"
                                    .into()
                            }
                        },
                    ),
                    SymbolsFrom::Dynsym => self.note(
                        id,
                        "stripped: only its exported functions are named (install its debug \
                         file for the others)",
                    ),
                    SymbolsFrom::Unusable(why) => self.note(
                        id,
                        format!("stripped: only its exported functions are named ({why})"),
                    ),
                    SymbolsFrom::Symtab
                    | SymbolsFrom::DebugFile(_)
                    | SymbolsFrom::MiniDebugInfo => {}
                }
                if le.table.is_empty() {
                    self.binaries[id as usize].state = State::NoSymbols;
                    return;
                }
                Table::Elf {
                    table: le.table,
                    segments: le.segments,
                }
            }
            Outcome::Kernel(Ok(symbols)) => {
                let owners = symbols
                    .owners
                    .iter()
                    .enumerate()
                    .map(|(i, name)| {
                        if i == 0 {
                            let b = &self.binaries[KERNEL as usize];
                            (Arc::clone(&b.dso), b.dso_key)
                        } else {
                            let shown = format!("[{}]", crate::text::escape(name));
                            let key = stable_hash(("kernel module", &shown));
                            (Dso::new(shown, DsoKind::KernelModule), key)
                        }
                    })
                    .collect();
                if symbols.bad_lines > 0 {
                    self.note(
                        id,
                        format!(
                            "{} lines of {} were not kallsyms lines: skipped",
                            symbols.bad_lines,
                            crate::text::escape(
                                self.config.kallsyms.as_os_str().as_encoded_bytes()
                            )
                        ),
                    );
                }
                Table::Kernel { symbols, owners }
            }
            Outcome::Kernel(Err(LoadError::Hidden)) => {
                let restrict = std::fs::read_to_string("/proc/sys/kernel/kptr_restrict")
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|_| "?".into());
                self.note(
                    id,
                    format!(
                        "kernel symbols are hidden ({} lists every address as 0; \
                         kernel.kptr_restrict = {restrict}): kernel samples keep their addresses. \
                         Run as root with kernel.kptr_restrict at 0 or 1 to name them",
                        crate::text::escape(self.config.kallsyms.as_os_str().as_encoded_bytes())
                    ),
                );
                self.binaries[id as usize].state = State::NoSymbols;
                return;
            }
            Outcome::Elf(Err(e)) | Outcome::Kernel(Err(e)) => {
                self.fail(id, e);
                return;
            }
            Outcome::PerfMap(r) => {
                self.install_perf_map(id, r);
                return;
            }
            Outcome::Memory(_) => return,
        };
        let bytes = match &table {
            Table::Elf { table, segments } => {
                table.bytes() + segments.len() * mem::size_of::<elf::Segment>()
            }
            Table::Kernel { symbols, .. } => symbols.table.bytes(),
            Table::PerfMap(p) => p.map.bytes(),
        };
        self.table_bytes += bytes;
        self.binaries[id as usize].state = State::Loaded(Box::new(Loaded {
            table,
            interned: FxHashMap::default(),
            bytes,
            interned_bytes: 0,
        }));
        self.evict(id);
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

    /// Results of reads that finished after their deadline.
    fn harvest(&mut self) {
        for (tag, outcome) in self.loader.harvest() {
            if (tag >> 32) as u32 != self.epoch {
                continue;
            }
            let id = tag as u32;
            if id as usize >= self.binaries.len() {
                continue;
            }
            if id == KERNEL {
                // The kallsyms read started at preload came in: nobody waits for it now.
                self.kernel_preload = None;
            }
            self.install(id, outcome);
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
                self.loader.run(Job::Memory { pid, addr: start, len }, u64::MAX),
                Ok(Outcome::Memory(Some(bytes))) if bytes == img
            );
        if self.vdso_checked.len() >= 4096 {
            self.vdso_checked.clear();
        }
        self.vdso_checked.insert((pid, start), same);
        same
    }

    fn perf_map(&mut self, pid: u32, addr: u64, mapped: Option<&Arc<MappedFile>>) -> Symbolized {
        let id = match self.perf_maps.get(&pid) {
            Some(&id) => id,
            None => self.new_perf_map(pid),
        };
        if let Some(hit) = self.results.get(id, addr) {
            self.stats.cache_hits += 1;
            return hit;
        }
        if let Some(s) = self.perf_map_miss(pid, id, addr) {
            return s;
        }
        // Not in the map (not cached: the JIT may write it later).
        match mapped {
            Some(f) => {
                let id = self.file_id(f);
                Symbolized::unknown(&self.binaries[id as usize].unknown)
            }
            None => Symbolized::unknown(&self.binaries[NOWHERE as usize].unknown),
        }
    }

    #[cold]
    fn new_perf_map(&mut self, pid: u32) -> BinaryId {
        let name = format!("/tmp/perf-{pid}.map");
        let key = stable_hash(("perf map", pid));
        let b = Binary::new(
            Source::PerfMap(pid),
            Dso::new(name, DsoKind::PerfMap),
            key,
            State::Unloaded,
        );
        let id = self.push_binary(b);
        self.perf_maps.insert(pid, id);
        id
    }

    fn perf_map_find(&mut self, id: BinaryId, addr: u64) -> Option<Symbolized> {
        let b = &mut self.binaries[id as usize];
        let State::Loaded(l) = &mut b.state else {
            return None;
        };
        let Table::PerfMap(p) = &l.table else {
            return None;
        };
        let (start, name_key, name) = p.map.find_keyed(addr)?;
        let (dso, dso_key) = (&b.dso, b.dso_key);
        let mut added = 0;
        let sym = l.interned.entry(name_key).or_insert_with(|| {
            let shown = demangle::display_name(name);
            added = shown.len() + mem::size_of::<Symbol>() + 48;
            Symbol::new(
                Some(shown),
                Arc::clone(dso),
                SymbolKey {
                    dso: dso_key,
                    start,
                },
            )
        });
        let s = Symbolized::new(Arc::clone(sym), addr - start);
        l.bytes += added;
        l.interned_bytes += added;
        self.table_bytes += added;
        Some(s)
    }

    #[cold]
    fn perf_map_miss(&mut self, pid: u32, id: BinaryId, addr: u64) -> Option<Symbolized> {
        self.tick += 1;
        self.binaries[id as usize].last_used = self.tick;
        let found = self.perf_map_find(id, addr);
        let b = &self.binaries[id as usize];
        let due = match &b.state {
            _ if found.is_some() => false,
            State::NoSymbols => false,
            State::Unloaded => true,
            State::Failed(e) if !e.retryable() && *e != LoadError::NotFound => false,
            State::Loaded(_) | State::Failed(_) => b
                .last_attempt
                .is_none_or(|t| t.elapsed() >= PERF_MAP_RECHECK),
        };
        let (id, found) = if due {
            let known = match &b.state {
                State::Loaded(l) => match &l.table {
                    Table::PerfMap(p) => Some((p.dev, p.ino, p.end)),
                    _ => None,
                },
                _ => None,
            };
            self.binaries[id as usize].last_attempt = Some(Instant::now());
            self.stats.loads += 1;
            let job = Job::PerfMap(PerfMapJob {
                pid,
                known,
                max_bytes: self.room(),
            });
            let tag = self.tag(id);
            let id = match self.loader.run(job, tag) {
                Ok(Outcome::PerfMap(r)) => self.install_perf_map(id, r),
                Ok(_) => id,
                Err(e) => {
                    let e = self.run_error(e);
                    self.fail(id, e);
                    id
                }
            };
            (id, self.perf_map_find(id, addr))
        } else {
            (id, found)
        };
        if let Some(s) = &found {
            self.results.insert(id, addr, s.clone());
        }
        if self.table_bytes > self.config.table_budget {
            self.evict(id);
        }
        found
    }

    /// Take in what was read of a perf map; returns the map's id, a new one when its
    /// contents changed (so that answers cached for the old contents are no longer found).
    fn install_perf_map(&mut self, id: BinaryId, r: Result<PerfMapRead, LoadError>) -> BinaryId {
        let read = match r {
            Ok(read) => read,
            // A map read before and gone now (deleted) is still the best knowledge there is.
            Err(_) if matches!(self.binaries[id as usize].state, State::Loaded(_)) => return id,
            Err(e) => {
                self.fail(id, e);
                return id;
            }
        };
        let budget = self.room();
        let b = &mut self.binaries[id as usize];
        let old = mem::replace(&mut b.state, State::Unloaded);
        let (mut state, had) = match old {
            State::Loaded(l) if !read.restart => match l.table {
                Table::PerfMap(p) => (p, l.bytes),
                _ => (new_map_state(), l.bytes),
            },
            State::Loaded(l) => (new_map_state(), l.bytes),
            _ => (new_map_state(), 0),
        };
        let changed = !read.bytes.is_empty() || read.restart;
        let too_large = state.map.feed(&read.bytes, budget).is_err();
        state.dev = read.dev;
        state.ino = read.ino;
        state.end = read.end;
        let (lines, bad) = state.map.lines();
        let bytes = state.map.bytes();
        self.table_bytes = self.table_bytes.saturating_sub(had) + bytes;
        let loaded = Box::new(Loaded {
            table: Table::PerfMap(state),
            interned: FxHashMap::default(),
            bytes,
            interned_bytes: 0,
        });
        if bad > 0 {
            self.note(
                id,
                format!("{bad} of its {lines} lines are not `START SIZE NAME`: skipped"),
            );
        }
        if too_large || read.truncated {
            self.note(
                id,
                format!(
                    "larger than the symbol cache ({} MiB): only its beginning is used",
                    budget >> 20
                ),
            );
        }
        if !changed || self.binaries[id as usize].attempts == 0 {
            let b = &mut self.binaries[id as usize];
            b.attempts = 1;
            b.state = State::Loaded(loaded);
            return id;
        }
        // New contents: a fresh id, the old slot dead.
        let Source::PerfMap(pid) = self.binaries[id as usize].source else {
            self.binaries[id as usize].state = State::Loaded(loaded);
            return id;
        };
        let old = &mut self.binaries[id as usize];
        let mut moved = Binary::new(
            Source::PerfMap(pid),
            Arc::clone(&old.dso),
            old.dso_key,
            State::Loaded(loaded),
        );
        moved.attempts = 1;
        moved.last_attempt = old.last_attempt;
        moved.last_used = old.last_used;
        old.source = Source::Special;
        old.state = State::NoSymbols;
        let new_id = self.push_binary(moved);
        self.perf_maps.insert(pid, new_id);
        new_id
    }
}

fn new_map_state() -> PerfMapState {
    PerfMapState {
        map: PerfMap::new(),
        dev: 0,
        ino: 0,
        end: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_symbolizer_moves_to_its_thread() {
        fn send<T: Send>() {}
        send::<Symbolizer>();
        send::<Symbolized>();
        send::<Request>();
        fn sync<T: Sync>() {}
        sync::<Symbolized>();
    }

    #[test]
    fn the_result_cache_keeps_two_generations() {
        let mut c = ResultCache::new(2);
        let dso = Dso::new("x", DsoKind::File);
        let u = Symbolized::unknown(&Symbol::unknown(dso, 1));
        c.insert(1, 1, u.clone());
        c.insert(1, 2, u.clone());
        c.insert(1, 3, u.clone()); // 1 and 2 move to the old generation
        assert_eq!(c.len(), 3);
        assert!(c.get(1, 1).is_some()); // promoted back
        c.insert(1, 4, u.clone());
        c.insert(1, 5, u.clone());
        assert!(c.len() <= 4);
        assert!(c.get(9, 9).is_none());
    }

    #[test]
    fn the_memory_bound_counts_every_cache() {
        let c = Config::default();
        assert!(c.memory_bound() > c.table_budget);
        assert!(c.memory_bound() < 48 << 20, "{}", c.memory_bound());
    }

    #[test]
    fn the_kernel_can_be_read_before_the_first_request() {
        let dir = tempfile::tempdir().unwrap();
        let k = dir.path().join("kallsyms");
        std::fs::write(&k, "ffffffff81000000 T _stext\nffffffff81001000 T do_one\n").unwrap();
        let mut s = Symbolizer::new(Config {
            kallsyms: k,
            preload_kernel: true,
            ..Config::default()
        });
        assert_eq!(s.stats().loads, 1);
        assert_eq!(
            s.resolve_one(&Request::kernel(0xffffffff81000010))
                .to_string(),
            "_stext+0x10"
        );
        assert_eq!(s.stats().loads, 1);
        assert_eq!(s.stats().loaded_binaries, 1);
    }

    #[test]
    fn a_kallsyms_that_never_answers_holds_up_neither_the_start_nor_the_first_lookup() {
        let dir = tempfile::tempdir().unwrap();
        let k = dir.path().join("kallsyms");
        let c = std::ffi::CString::new(k.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let t0 = Instant::now();
        let mut s = Symbolizer::new(Config {
            kallsyms: k,
            preload_kernel: true,
            load_timeout: Duration::from_millis(300),
            ..Config::default()
        });
        assert!(
            t0.elapsed() < Duration::from_millis(200),
            "{:?}",
            t0.elapsed()
        );
        let a = s.resolve_one(&Request::kernel(0xffffffff81000010));
        assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
        assert_eq!(a.to_string(), UNKNOWN);
        let notes = s.take_notes();
        assert_eq!(notes.len(), 1, "{notes:?}");
        // Refused as what it is, or given up at the deadline: either way, said once.
        assert!(
            notes[0].message.contains("longer than") || notes[0].message.contains("FIFO"),
            "{}",
            notes[0]
        );
    }

    #[test]
    fn unknown_kernel_without_kallsyms_says_so_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Symbolizer::new(Config {
            kallsyms: dir.path().join("none"),
            modules: dir.path().join("none"),
            ..Config::default()
        });
        let a = s.resolve_one(&Request::kernel(0xffffffff81000000));
        assert!(!a.is_known());
        assert_eq!(a.dso().name(), "[kernel.kallsyms]");
        assert!(a.is_kernel());
        let _ = s.resolve_one(&Request::kernel(0xffffffff81000010));
        let notes = s.take_notes();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0]
                .to_string()
                .starts_with("[kernel.kallsyms]: cannot read")
        );
    }
}
