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
//! mapped inode through `/proc/PID/map_files`, checked against the mapping's identity; not
//! at all on FUSE and network filesystems unless `--read-user-fs`), on the calling thread
//! (the pipeline's), once per binary; a failure is remembered, not retried.

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
    /// Read binaries on FUSE and network filesystems too (`--read-user-fs`).
    pub read_user_fs: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            table_budget: 256 << 20,
            max_processes: 4096,
            read_user_fs: false,
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
        let end = if stack.regs.is_none() {
            End::NoRegisters
        } else {
            self.clock += 1;
            let clock = self.clock;
            self.refresh(pid, key, modules, clock);
            match self.processes.get_mut(&pid) {
                None => End::NoUnwindInfo,
                Some(p) => {
                    p.last_use = clock;
                    let before = out.len();
                    let end = walk(
                        &p.unwinder,
                        &p.covered,
                        &mut self.cache,
                        stack,
                        max_frames,
                        out,
                    );
                    self.stats.frames += (out.len() - before) as u64;
                    end
                }
            }
        };
        self.stats.ends[end as usize] += 1;
        end
    }

    /// Build process `pid`'s unwinder from its `modules` when `key` says they changed since
    /// its last sample (or it has none yet); at `max_processes`, the others are forgotten.
    fn refresh(
        &mut self,
        pid: u32,
        key: SpaceKey,
        modules: impl FnOnce(&mut Vec<ModuleMap>),
        clock: u64,
    ) {
        let stale = self.processes.get(&pid).is_none_or(|p| p.key != key);
        if !stale {
            return;
        }
        let mut maps = std::mem::take(&mut self.maps);
        maps.clear();
        modules(&mut maps);
        let (unwinder, covered) = self.build(pid, &maps);
        self.maps = maps;
        if self.processes.len() >= self.config.max_processes && !self.processes.contains_key(&pid) {
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
        let read = match crate::symbols::user_fs_of(&m.file, pid) {
            // As the symbolizer: a read another program or machine answers may never end.
            Some(fstype) if !self.config.read_user_fs => Err(format!(
                "it is on a {fstype} filesystem, whose reads another program or machine \
                 answers: not read (--read-user-fs reads such files)"
            )),
            _ => crate::symbols::open_mapped(&m.file, pid, m.start, m.end)
                .and_then(tables::read_file),
        };
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

/// Unwind `stack` with `unwinder` (whose modules with rules cover `covered`): the frames
/// into `out`, at most `max_frames` (at least 1), and why the chain ended. Every step reads
/// only the copied stack, and the walk ends at `max_frames` whatever the rules say.
pub fn walk(
    unwinder: &UnwinderX86_64<Arc<[u8]>>,
    covered: &[std::ops::Range<u64>],
    cache: &mut CacheX86_64,
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
    // The interrupted address first, whatever the stack says.
    out.push(regs.ip);
    if stack.stack.is_empty() {
        return End::EmptyStack;
    }
    let mut read = |addr: u64| stack.read_u64(addr).ok_or(());
    let mut it = unwinder.iter_frames(
        regs.ip,
        UnwindRegsX86_64::new(regs.ip, regs.sp, regs.bp),
        cache,
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
                n += 1;
            }
            Ok(None) => return End::Complete,
            Err(e) => {
                // framehop says CouldNotReadStack also when a frame has no rules and its
                // frame-pointer guess led off the copy: tell the two apart by whether the
                // last address is in a module with rules.
                let last = out.last().copied().unwrap_or(regs.ip);
                if matches!(e, StepError::CouldNotReadStack(_))
                    && !covered.iter().any(|r| r.contains(&last))
                {
                    return End::NoUnwindInfo;
                }
                return End::of_step(e);
            }
        }
    }
}

fn binary_key(f: &MappedFile) -> (u64, Box<[u8]>) {
    (f.identity_hash(), f.path().into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::UserRegs;
    use proptest::prelude::*;

    fn module(eh_frame: Vec<u8>, hdr: Vec<u8>, debug_frame: Vec<u8>) -> UnwinderX86_64<Arc<[u8]>> {
        let t = UnwindTables {
            segments: vec![tables::Segment {
                offset: 0,
                filesz: 0x10000,
                vaddr: 0,
            }],
            text_svma: Some(0x1000..0x9000),
            eh_frame_svma: Some(0x9000..0x9000 + eh_frame.len() as u64),
            eh_frame: (!eh_frame.is_empty()).then(|| Arc::from(eh_frame)),
            eh_frame_hdr_svma: Some(0xa000..0xa000 + hdr.len() as u64),
            eh_frame_hdr: (!hdr.is_empty()).then(|| Arc::from(hdr)),
            debug_frame: (!debug_frame.is_empty()).then(|| Arc::from(debug_frame)),
            ..Default::default()
        };
        let mut u = UnwinderX86_64::new();
        u.add_module(Module::new(
            String::new(),
            0x400000..0x410000,
            0x400000,
            t.section_info(),
        ));
        u
    }

    fn stack(ip: u64, sp: u64, bp: u64, bytes: Vec<u8>) -> UserStack {
        UserStack {
            regs: Some(UserRegs { ip, sp, bp }),
            stack: bytes.into(),
        }
    }

    #[test]
    fn no_registers_no_stack_and_a_frame_pointer_loop_end_the_chain() {
        let u = module(vec![], vec![], vec![]);
        let mut cache = CacheX86_64::new();
        let mut out = Vec::new();
        let none = UserStack {
            regs: None,
            stack: Box::new([]),
        };
        assert_eq!(
            walk(&u, &[], &mut cache, &none, 64, &mut out),
            End::NoRegisters
        );
        assert!(out.is_empty());
        let empty = stack(0x401000, 0x7000, 0x7000, vec![]);
        assert_eq!(
            walk(&u, &[], &mut cache, &empty, 64, &mut out),
            End::EmptyStack
        );
        assert_eq!(out, [0x401000]);
        // A frame pointer that points at itself: framehop refuses to go round.
        out.clear();
        let mut bytes = vec![0u8; 64];
        bytes[0..8].copy_from_slice(&0x7000u64.to_ne_bytes());
        bytes[8..16].copy_from_slice(&0x401234u64.to_ne_bytes());
        let looped = stack(0x401000, 0x7000, 0x7000, bytes);
        let end = walk(&u, &[], &mut cache, &looped, 64, &mut out);
        assert!(out.len() < 64, "{end:?} {out:x?}");
        assert_ne!(end, End::Complete);
    }

    proptest! {
        /// Hostile tables and stacks: the walk ends, within its bound, and never panics.
        #[test]
        fn any_tables_and_stack_end_within_the_bound(
            eh_frame in proptest::collection::vec(any::<u8>(), 0..256),
            hdr in proptest::collection::vec(any::<u8>(), 0..64),
            debug_frame in proptest::collection::vec(any::<u8>(), 0..256),
            bytes in proptest::collection::vec(any::<u8>(), 0..512),
            ip in 0x3ff000u64..0x411000,
            bp in any::<u64>(),
            max in 1usize..200,
        ) {
            let u = module(eh_frame, hdr, debug_frame);
            let mut cache = CacheX86_64::new();
            let mut out = Vec::new();
            let s = stack(ip, 0x7ff0_0000, bp, bytes);
            let covered = vec![std::ops::Range { start: 0x400000, end: 0x410000 }];
            let _ = walk(&u, &covered, &mut cache, &s, max, &mut out);
            prop_assert!(!out.is_empty() && out.len() <= max);
        }
    }
}
