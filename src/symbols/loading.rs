//! Reading binaries for the symbolizer: which reads to start, how long an answer waits for
//! them, and putting what they read in place.
//!
//! A read is started on the loader's pool ([`super::loader`]) at the first request that
//! needs it, and the requests of a batch that need a read in flight are answered once, at
//! the end of the batch, after one wait for all of those reads together ([`Config::batch_wait`],
//! cut at the load timeout and a stop's deadline): a batch that meets thirty new binaries
//! waits at most that long, not thirty times as long. What is still being read then is
//! answered `[unknown]` (in its binary) and not cached; the read goes on, and the requests
//! after it get its names.
//!
//! A file on a filesystem whose reads someone else answers (FUSE, NFS, ...; see
//! [`super::mounts`]) is not read unless [`Config::read_user_fs`] says so.
//!
//! [`Config::batch_wait`]: super::Config::batch_wait
//! [`Config::read_user_fs`]: super::Config::read_user_fs

use std::mem;
use std::sync::Arc;
use std::time::Instant;

use rustc_hash::FxHashMap;

use super::load::{ElfJob, Job, LoadError, Outcome, SymbolsFrom};
use super::loader::RunError;
use super::mounts::FsClass;
use super::request::{FileIdentity, Target};
use super::{
    BinaryId, Dso, DsoKind, KERNEL, Loaded, MAX_ATTEMPTS, RETRY_AFTER, Request, Source, State,
    Symbolized, Symbolizer, Table, VDSO, elf, stable_hash, table, vdso,
};

/// A mapping of executable code this long (its binary larger still) is a heavy read for the
/// loader's pool ([`super::loader::HEAVY`]).
const HEAVY_TEXT: u64 = 4 << 20;

/// The source ([`super::loader`]) of the kernel's reads, and of another process's memory.
const KERNEL_SOURCE: u64 = 1;
const MEMORY_SOURCE: u64 = 2;

impl Symbolizer {
    /// Start reading kallsyms on the loader's pool without waiting for it: the first batch
    /// with a kernel address waits for it then (as for any read in flight), so that whoever
    /// builds the symbolizer is not held up (under a sampling storm, reading kallsyms can
    /// take seconds).
    pub(super) fn preload_kernel(&mut self) {
        // A fresh pool always has a thread free.
        let _ = self.start_load(KERNEL, None);
    }

    /// Answer every request, in order, into `out` (appended).
    pub fn resolve(&mut self, requests: &[Request], out: &mut Vec<Symbolized>) {
        self.now = Instant::now();
        if self.loader.running() > 0 {
            self.harvest();
        }
        let base = out.len();
        out.reserve(requests.len());
        let mut pending: Vec<usize> = Vec::new();
        for (i, r) in requests.iter().enumerate() {
            let s = self.answer(r);
            if self.in_flight {
                self.in_flight = false;
                pending.push(i);
            }
            out.push(s);
        }
        // One wait for the batch: reads that could not start at once (the pool was busy)
        // start as others finish, within the same bound.
        // The kernel's table is the exception: read once, at the start, and shared by every
        // process, it is waited for up to the load timeout.
        let wait = match self.config.batch_wait {
            Some(w) if !self.config.complete && !self.awaited.contains(&KERNEL) => w,
            _ => self.config.load_timeout,
        };
        let until = Instant::now() + wait.min(self.loader.wait());
        while !pending.is_empty() {
            // Wakes as soon as one read is done: its requests are answered, and reads that
            // waited for a thread start, while the others go on.
            // Nothing done: the time is up, or nothing is left to wait for.
            if !self.wait_for_reads(until) {
                break;
            }
            pending.retain(|&i| {
                let s = self.answer(&requests[i]);
                out[base + i] = s;
                mem::take(&mut self.in_flight)
            });
        }
        self.awaited.clear();
        self.in_flight = false;
        self.queued = false;
    }

    /// Answer one request (waiting for its binary's read as a batch of one would).
    pub fn resolve_one(&mut self, r: &Request) -> Symbolized {
        let mut out = Vec::with_capacity(1);
        self.resolve(std::slice::from_ref(r), &mut out);
        match out.pop() {
            Some(s) => s,
            None => Symbolized::unknown(&self.binaries[super::NOWHERE as usize].unknown),
        }
    }

    /// One wait, within the batch's bound, for one of the reads the batch's requests need;
    /// what finishes is put in place (false: nothing did), and what does not is said once
    /// when it outlasts the load timeout or a stop.
    fn wait_for_reads(&mut self, until: Instant) -> bool {
        let awaited = mem::take(&mut self.awaited);
        // A read waiting for a thread of the pool waits for any read to finish.
        let tags: Vec<u64> = if mem::take(&mut self.queued) {
            self.loader.running_tags()
        } else {
            awaited.iter().map(|&id| self.tag(id)).collect()
        };
        let outcomes = self.loader.wait_some(&tags, until);
        let done = !outcomes.is_empty();
        for (tag, outcome) in outcomes {
            self.take_outcome(tag, outcome);
        }
        for id in awaited {
            let State::Loading(since) = self.binaries[id as usize].state else {
                continue;
            };
            if self.loader.deadline_cuts_waits() {
                self.note(
                    id,
                    format!("cannot read its symbols: {}", LoadError::Stopping),
                );
            } else if since.elapsed() >= self.loader.timeout() {
                let e = LoadError::TimedOut(self.loader.timeout().as_secs().max(1));
                self.note(id, format!("cannot read its symbols: {e}"));
            }
        }
        done
    }

    /// Start reading the binary mapped by `m` in process `pid` if it was never read: an
    /// MMAP2 record just seen, whose samples come later. Waits for nothing (and starts
    /// nothing when the pool is busy).
    pub fn prefetch(&mut self, pid: u32, m: &super::Mapping) {
        if m.file.kind() != super::MappingKind::File {
            return;
        }
        let id = self.file_id(&m.file);
        let b = &self.binaries[id as usize];
        if matches!(b.state, State::Unloaded) && b.attempts == 0 {
            let _ = self.start_load(id, Some(&Request::user(pid, m.start, m)));
        }
    }

    pub(super) fn may_retry(&self, id: BinaryId) -> bool {
        let b = &self.binaries[id as usize];
        b.attempts < MAX_ATTEMPTS
            && b.last_attempt
                .is_none_or(|t| self.now.saturating_duration_since(t) >= RETRY_AFTER)
    }

    /// Make sure `id`'s table is read or being read; a read in flight marks the request
    /// for the batch's wait.
    pub(super) fn ensure_loaded(&mut self, id: BinaryId, r: &Request) {
        match &self.binaries[id as usize].state {
            State::Loaded(_) | State::NoSymbols => return,
            // Finished data waits for a read, but not twice for one that outlived the
            // load timeout (a hung file would otherwise cost every batch that long).
            State::Loading(since)
                if self.config.complete
                    && self.now.saturating_duration_since(*since) >= self.loader.timeout() =>
            {
                return;
            }
            State::Loading(_) => {}
            State::Failed(e) if !(e.retryable() && self.may_retry(id)) => return,
            State::Failed(_) | State::Unloaded => {
                if !self.start_load(id, Some(r)) {
                    self.in_flight = true;
                    self.queued = true;
                    return;
                }
            }
        }
        if matches!(self.binaries[id as usize].state, State::Loading(_)) {
            self.in_flight = true;
            if !self.awaited.contains(&id) {
                self.awaited.push(id);
            }
        }
    }

    /// Start the read of `id`'s table (as `r`, the request that needs it, tells where the
    /// file is mapped). False when the pool had no thread for it: not started.
    pub(super) fn start_load(&mut self, id: BinaryId, r: Option<&Request>) -> bool {
        let (job, source, heavy) = match &self.binaries[id as usize].source {
            Source::Kernel => (
                Job::Kernel {
                    kallsyms: self.config.kallsyms.clone(),
                    modules: self.config.modules.clone(),
                    max_bytes: self.config.table_budget,
                },
                KERNEL_SOURCE,
                true,
            ),
            Source::File(f) => {
                let Some(Target::Mapped(m)) = r.map(|r| &r.target) else {
                    return true;
                };
                let pid = r.map_or(0, |r| r.pid);
                let source = match *f.identity() {
                    FileIdentity::Inode { maj, min, .. } => {
                        if !self.config.read_user_fs
                            && let FsClass::Remote(fstype) = self.mounts.class(maj, min, pid)
                        {
                            self.fail(id, LoadError::UserFs(fstype));
                            return true;
                        }
                        stable_hash(("device", maj, min))
                    }
                    _ => stable_hash(("file", f.identity_hash())),
                };
                (
                    Job::Elf(ElfJob {
                        file: Arc::clone(f),
                        pid,
                        start: m.start,
                        end: m.start.saturating_add(m.len),
                        debug_dirs: Arc::clone(&self.debug_dirs),
                        max_bytes: self.room(),
                    }),
                    source,
                    m.len >= HEAVY_TEXT,
                )
            }
            Source::Vdso => {
                self.load_vdso();
                return true;
            }
            Source::Nowhere | Source::Special | Source::PerfMap(_) => return true,
        };
        let tag = self.tag(id);
        match self.loader.start(job, tag, source, heavy) {
            Ok(()) => {
                let b = &mut self.binaries[id as usize];
                b.attempts = b.attempts.saturating_add(1);
                b.last_attempt = Some(Instant::now());
                b.state = State::Loading(Instant::now());
                self.stats.loads += 1;
            }
            // The pool is reading others: started once a thread is free.
            Err(RunError::Full) => return false,
            Err(e) => {
                let e = self.run_error(e);
                self.fail(id, e)
            }
        }
        true
    }

    pub(super) fn run_error(&self, e: RunError) -> LoadError {
        match e {
            RunError::TimedOut if self.loader.deadline_cuts_waits() => LoadError::Stopping,
            RunError::TimedOut => LoadError::TimedOut(self.loader.timeout().as_secs().max(1)),
            RunError::Busy | RunError::Full => LoadError::Busy,
            RunError::Failed(m) => LoadError::Internal(m),
        }
    }

    /// The source of another process's memory (its vDSO) for [`super::loader::Loader::run`].
    pub(super) fn memory_source() -> u64 {
        MEMORY_SOURCE
    }

    pub(super) fn load_vdso(&mut self) {
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
    pub(super) fn install(&mut self, id: BinaryId, outcome: Outcome) {
        let table = match outcome {
            Outcome::Elf(Ok(le)) => {
                if let Some(b) = le.build_id {
                    self.binaries[id as usize].dso.set_build_id(b);
                }
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

    /// Results of reads that finished while nobody waited for them.
    pub(super) fn harvest(&mut self) {
        for (tag, outcome) in self.loader.harvest() {
            self.take_outcome(tag, outcome);
        }
    }

    /// Put the outcome of the read `tag` in place, unless its binary is gone since (the
    /// caches were cleared).
    fn take_outcome(&mut self, tag: u64, outcome: Outcome) {
        if (tag >> 32) as u32 != self.epoch {
            return;
        }
        let id = tag as u32;
        if (id as usize) < self.binaries.len() {
            self.install(id, outcome);
        }
    }
}
