//! DWARF unwinding of sampled user stacks (`--call-graph dwarf`), with framehop.
//!
//! framehop (samply's unwinder) was taken over gimli's own unwind-table evaluation or a
//! hand-written one: it is the unwinder samply runs on exactly this input (perf's regs +
//! stack copies), it evaluates `.eh_frame_hdr`/`.eh_frame` and `.debug_frame` CFI with a rule
//! cache (an unwound frame costs a hash probe once its rule is known), it checks every stack
//! read and refuses to loop (`DidNotAdvance`, a frame pointer that moves backwards), and it
//! keeps the module list per process while the unwind data stays shared per binary.
//!
//! [`Unwinder`] holds, per binary, its [`tables::UnwindTables`] (read once, bounded in bytes,
//! least recently used evicted) and, per process, a framehop unwinder over the modules its
//! address space maps, rebuilt when the space changes. [`Unwinder::unwind`] turns a sample's
//! registers and stack copy into its user frames, innermost first (the interrupted address,
//! then return addresses), and says why the chain ended ([`End`]); the steps are bounded by
//! the caller's frame limit and by framehop's own checks, so a hostile table or stack ends a
//! chain, never the program.
//!
//! Binaries are opened as the symbolizer opens them ([`crate::symbols::open_mapped`]: the
//! mapped inode through `/proc/PID/map_files`, checked against the mapping's identity), on
//! the calling thread (the pipeline's), once per binary; a failure is remembered, not retried.

pub mod tables;

use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{Error as StepError, FrameAddress, Module, Unwinder as _};
use rustc_hash::FxHashMap;

use crate::event::UserStack;
use crate::symbols::{MappedFile, MappingKind};
use tables::UnwindTables;

/// Why a chain ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum End {
    /// The unwind rules said this was the outermost frame (`_start`, a thread's start).
    Complete,
    /// The sample had no user registers (a kernel thread), or they were cut short.
    NoRegisters,
    /// The kernel copied no stack (0 bytes: a stack it could not read).
    EmptyStack,
    /// The next frame is beyond the copied part of the stack (`--call-graph dwarf,SIZE`).
    StackCopyEnd,
    /// An address in no binary the process maps, or one whose unwind tables could not be read.
    NoUnwindInfo,
    /// The rules would have gone round in a loop or backwards: stopped there.
    Loop,
    /// The most frames a chain may have (`--max-stack`).
    MaxFrames,
    /// A null return address, an overflow, or another rule that cannot be trusted.
    Invalid,
}

impl End {
    pub const ALL: [End; 8] = [
        End::Complete,
        End::NoRegisters,
        End::EmptyStack,
        End::StackCopyEnd,
        End::NoUnwindInfo,
        End::Loop,
        End::MaxFrames,
        End::Invalid,
    ];

    /// How the summary names it.
    pub fn name(self) -> &'static str {
        match self {
            End::Complete => "complete",
            End::NoRegisters => "no user registers",
            End::EmptyStack => "empty stack copy",
            End::StackCopyEnd => "end of the stack copy",
            End::NoUnwindInfo => "no unwind info",
            End::Loop => "loop in the unwind rules",
            End::MaxFrames => "--max-stack reached",
            End::Invalid => "bad unwind rule",
        }
    }

    fn of_step(e: StepError) -> End {
        match e {
            StepError::CouldNotReadStack(_) => End::StackCopyEnd,
            StepError::FramepointerUnwindingMovedBackwards | StepError::DidNotAdvance => End::Loop,
            StepError::IntegerOverflow | StepError::ReturnAddressIsNull => End::Invalid,
        }
    }
}

/// Chains unwound, by how they ended, and the frames they got.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub ends: [u64; End::ALL.len()],
    pub frames: u64,
    /// Binaries whose tables are held, and their bytes.
    pub binaries: usize,
    pub bytes: usize,
}

impl Stats {
    pub fn count(&self, end: End) -> u64 {
        self.ends[end as usize]
    }

    pub fn chains(&self) -> u64 {
        self.ends.iter().sum()
    }
}

/// Bounds of the unwinder's caches.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Bytes of unwind tables kept at most (the least recently used binary goes first).
    pub table_budget: usize,
    /// Processes whose module lists are kept at most.
    pub max_processes: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            table_budget: 256 << 20,
            max_processes: 4096,
        }
    }
}

/// One executable mapping of a process, as the process model knows it.
#[derive(Clone, Debug)]
pub struct ModuleMap {
    pub start: u64,
    pub end: u64,
    pub pgoff: u64,
    pub file: Arc<MappedFile>,
}

/// What a process's unwinder was built from: its address space and that space's stamp.
pub type SpaceKey = (usize, u64);

type Tables = Option<Arc<UnwindTables>>;

struct Binary {
    tables: Tables,
    last_use: u64,
}

struct Process {
    key: SpaceKey,
    unwinder: UnwinderX86_64<Arc<[u8]>>,
    /// The address ranges of its modules with unwind rules.
    covered: Vec<std::ops::Range<u64>>,
    last_use: u64,
}

/// The unwinder of a run (see the module's doc).
pub struct Unwinder {
    config: Config,
    binaries: FxHashMap<(u64, Box<[u8]>), Binary>,
    bytes: usize,
    processes: FxHashMap<u32, Process>,
    cache: CacheX86_64,
    clock: u64,
    stats: Stats,
    notes: Vec<String>,
    maps: Vec<ModuleMap>,
}

impl Unwinder {
    pub fn new(config: Config) -> Unwinder {
        Unwinder {
            config,
            binaries: FxHashMap::default(),
            bytes: 0,
            processes: FxHashMap::default(),
            cache: CacheX86_64::new(),
            clock: 0,
            stats: Stats::default(),
            notes: Vec::new(),
            maps: Vec::new(),
        }
    }

    pub fn stats(&self) -> Stats {
        Stats {
            binaries: self
                .binaries
                .values()
                .filter(|b| b.tables.is_some())
                .count(),
            bytes: self.bytes,
            ..self.stats
        }
    }

    /// What should be said once (a binary whose tables could not be read), since the last
    /// call.
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    /// Unwind `stack` of process `pid`: its user frames into `out` (innermost first, at most
    /// `max_frames`), and why the chain ended. `modules` lists the process's executable
    /// mappings; it is called only when `key` says they changed since the last sample.
    pub fn unwind(
        &mut self,
        pid: u32,
        key: SpaceKey,
        modules: impl FnOnce(&mut Vec<ModuleMap>),
        stack: &UserStack,
        max_frames: usize,
        out: &mut Vec<u64>,
    ) -> End {
        let end = self.unwind_inner(pid, key, modules, stack, max_frames, out);
        self.stats.ends[end as usize] += 1;
        end
    }

    fn unwind_inner(
        &mut self,
        pid: u32,
        key: SpaceKey,
        modules: impl FnOnce(&mut Vec<ModuleMap>),
        stack: &UserStack,
        max_frames: usize,
        out: &mut Vec<u64>,
    ) -> End {
        let Some(regs) = stack.regs else {
            return End::NoRegisters;
        };
        if max_frames == 0 {
            return End::MaxFrames;
        }
        self.clock += 1;
        let clock = self.clock;
        let stale = self.processes.get(&pid).is_none_or(|p| p.key != key);
        if stale {
            let mut maps = std::mem::take(&mut self.maps);
            maps.clear();
            modules(&mut maps);
            let (unwinder, covered) = self.build(pid, &maps);
            self.maps = maps;
            if self.processes.len() >= self.config.max_processes
                && !self.processes.contains_key(&pid)
            {
                self.forget_processes();
            }
            self.processes.insert(
                pid,
                Process {
                    key,
                    unwinder,
                    covered,
                    last_use: clock,
                },
            );
        }
        let Some(p) = self.processes.get_mut(&pid) else {
            return End::NoUnwindInfo;
        };
        p.last_use = clock;
        // The interrupted address first, whatever the stack says.
        out.push(regs.ip);
        self.stats.frames += 1;
        if stack.stack.is_empty() {
            return End::EmptyStack;
        }
        let mut read = |addr: u64| stack.read_u64(addr).ok_or(());
        let mut it = p.unwinder.iter_frames(
            regs.ip,
            UnwindRegsX86_64::new(regs.ip, regs.sp, regs.bp),
            &mut self.cache,
            &mut read,
        );
        // The first answer is the ip itself, pushed above.
        match it.next() {
            Ok(Some(FrameAddress::InstructionPointer(_))) => {}
            Ok(Some(_)) | Ok(None) => return End::Complete,
            Err(e) => return End::of_step(e),
        }
        let mut n = 1;
        loop {
            if n >= max_frames {
                return End::MaxFrames;
            }
            match it.next() {
                Ok(Some(f)) => {
                    out.push(f.address());
                    self.stats.frames += 1;
                    n += 1;
                }
                Ok(None) => return End::Complete,
                Err(e) => {
                    // framehop says CouldNotReadStack also when a frame's rules are missing
                    // and its frame-pointer guess led nowhere: tell the two apart by whether
                    // the last address is in a module with rules.
                    let last = out.last().copied().unwrap_or(regs.ip);
                    if matches!(e, StepError::CouldNotReadStack(_))
                        && !p.covered.iter().any(|r| r.contains(&last))
                    {
                        return End::NoUnwindInfo;
                    }
                    return End::of_step(e);
                }
            }
        }
    }

    /// A framehop unwinder over the modules of `maps` whose tables can be read.
    fn build(
        &mut self,
        pid: u32,
        maps: &[ModuleMap],
    ) -> (UnwinderX86_64<Arc<[u8]>>, Vec<std::ops::Range<u64>>) {
        let mut u = UnwinderX86_64::new();
        let mut covered = Vec::new();
        for m in maps {
            if m.file.kind() != MappingKind::File || m.end <= m.start {
                continue;
            }
            let Some(t) = self.tables(pid, m) else {
                continue;
            };
            let Some(svma) = t.svma_of_offset(m.pgoff) else {
                continue;
            };
            let base_avma = m.start.wrapping_sub(svma);
            if t.has_rules() {
                covered.push(m.start..m.end);
            }
            let name = String::new();
            u.add_module(Module::new(
                name,
                m.start..m.end,
                base_avma,
                t.section_info(),
            ));
        }
        (u, covered)
    }

    /// The tables of the binary `m` maps: from the cache, else read now (once).
    fn tables(&mut self, pid: u32, m: &ModuleMap) -> Tables {
        self.clock += 1;
        let key = binary_key(&m.file);
        if let Some(b) = self.binaries.get_mut(&key) {
            b.last_use = self.clock;
            return b.tables.clone();
        }
        let read =
            crate::symbols::open_mapped(&m.file, pid, m.start, m.end).and_then(tables::read_file);
        let tables = match read {
            Ok(t) => {
                if !t.has_rules() && self.notes.len() < 64 {
                    self.notes.push(format!(
                        "{}: no .eh_frame or .debug_frame: its frames end the unwound chains",
                        crate::text::escape(m.file.path())
                    ));
                }
                Some(Arc::new(t))
            }
            Err(e) => {
                if self.notes.len() < 64 {
                    self.notes.push(format!(
                        "{}: unwind tables not read: {}",
                        crate::text::escape(m.file.path()),
                        crate::text::escape(e.as_bytes())
                    ));
                }
                None
            }
        };
        let bytes = tables.as_ref().map_or(0, |t| t.bytes());
        self.bytes += bytes;
        self.binaries.insert(
            key,
            Binary {
                tables: tables.clone(),
                last_use: self.clock,
            },
        );
        self.evict();
        tables
    }

    /// Past the byte budget: drop the least recently used binaries' tables (the processes
    /// that use them keep theirs until they are rebuilt).
    fn evict(&mut self) {
        while self.bytes > self.config.table_budget && self.binaries.len() > 1 {
            let Some(oldest) = self
                .binaries
                .iter()
                .min_by_key(|(_, b)| b.last_use)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(b) = self.binaries.remove(&oldest) {
                self.bytes -= b.tables.as_ref().map_or(0, |t| t.bytes());
            }
        }
    }

    /// Past the process cap: forget the half used longest ago.
    fn forget_processes(&mut self) {
        let mut uses: Vec<u64> = self.processes.values().map(|p| p.last_use).collect();
        let k = uses.len() / 2;
        let (_, cut, _) = uses.select_nth_unstable(k);
        let cut = *cut;
        self.processes.retain(|_, p| p.last_use > cut);
    }
}

fn binary_key(f: &MappedFile) -> (u64, Box<[u8]>) {
    (f.identity_hash(), f.path().into())
}
