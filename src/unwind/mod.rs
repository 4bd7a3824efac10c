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
    /// A frame in a binary replaced since it was mapped (the file at its path is another,
    /// and the mapped one cannot be reached): its callers cannot be trusted to another
    /// build's rules, so the chain ends at it.
    Replaced,
}

impl End {
    pub(crate) const ALL: [End; 9] = [
        End::Complete,
        End::NoRegisters,
        End::EmptyStack,
        End::StackCopyEnd,
        End::NoUnwindInfo,
        End::Loop,
        End::MaxFrames,
        End::Invalid,
        End::Replaced,
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
            End::Replaced => "binary replaced since it was mapped",
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

    /// The summary's line (a recording's; a live run's says the same in run.rs).
    pub fn summary_line(&self) -> String {
        let mut s = format!(
            "  dwarf unwinding: {} chains, {} user frames; ended by",
            self.chains(),
            self.frames
        );
        let mut sep = " ";
        for end in End::ALL {
            let n = self.count(end);
            if n > 0 {
                s += &format!("{sep}{}: {n}", end.name());
                sep = ", ";
            }
        }
        s + &format!(
            " ({} binaries' unwind tables, {} KiB)",
            self.binaries,
            self.bytes / 1024
        )
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
pub(crate) type SpaceKey = (usize, u64);

type Tables = Option<Arc<UnwindTables>>;

struct Binary {
    tables: Tables,
    /// The file at its path is another than the one mapped (see [`End::Replaced`]).
    replaced: bool,
    last_use: u64,
}

/// Where a process's modules are: those with unwind rules, and those whose binary was
/// replaced since it was mapped (no rules read from the new one).
#[derive(Debug, Default, Clone)]
pub struct Coverage {
    pub covered: Vec<std::ops::Range<u64>>,
    pub replaced: Vec<std::ops::Range<u64>>,
}

impl Coverage {
    fn is_replaced(&self, addr: u64) -> bool {
        self.replaced.iter().any(|r| r.contains(&addr))
    }
}

struct Process {
    key: SpaceKey,
    unwinder: UnwinderX86_64<Arc<[u8]>>,
    coverage: Coverage,
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
    /// perfwatch's own vDSO's tables (read once, when a process's vDSO is first met).
    vdso: Option<Tables>,
    /// Whether process `pid`'s vDSO at an address is perfwatch's own image (bounded).
    vdso_same: FxHashMap<(u32, u64), bool>,
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
            vdso: None,
            vdso_same: FxHashMap::default(),
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
                        &p.coverage,
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
        let (unwinder, coverage) = self.build(pid, &maps);
        self.maps = maps;
        if self.processes.len() >= self.config.max_processes && !self.processes.contains_key(&pid) {
            self.forget_processes();
        }
        self.processes.insert(
            pid,
            Process {
                key,
                unwinder,
                coverage,
                last_use: clock,
            },
        );
    }

    /// A framehop unwinder over the modules of `maps` whose tables can be read.
    fn build(&mut self, pid: u32, maps: &[ModuleMap]) -> (UnwinderX86_64<Arc<[u8]>>, Coverage) {
        let mut u = UnwinderX86_64::new();
        let mut coverage = Coverage::default();
        for m in maps {
            if m.end <= m.start {
                continue;
            }
            let t = match m.file.kind() {
                MappingKind::File => self.tables(pid, m, &mut coverage),
                MappingKind::Vdso => self.vdso_tables(pid, m),
                _ => continue,
            };
            let Some(t) = t else {
                continue;
            };
            let Some(svma) = t.svma_of_offset(m.pgoff) else {
                continue;
            };
            let base_avma = m.start.wrapping_sub(svma);
            if t.has_rules() {
                coverage.covered.push(m.start..m.end);
            }
            let name = String::new();
            u.add_module(Module::new(
                name,
                m.start..m.end,
                base_avma,
                t.section_info(),
            ));
        }
        (u, coverage)
    }

    /// The unwind tables of process `pid`'s vDSO mapping `m`: perfwatch's own vDSO's, when
    /// the process's is the same image (by build id when the record carried one, else by
    /// comparing the process's copy, as the symbolizer names it); else none (its frames end
    /// the chains as "no unwind info").
    fn vdso_tables(&mut self, pid: u32, m: &ModuleMap) -> Tables {
        let own = crate::symbols::own_vdso()?;
        let same = match m.file.identity() {
            crate::symbols::FileIdentity::BuildId(b) => {
                crate::symbols::own_vdso_build_id() == Some(*b)
            }
            _ => *self.vdso_same.entry((pid, m.start)).or_insert_with(|| {
                m.end - m.start == own.len() as u64
                    && crate::symbols::read_process_memory(pid, m.start, m.end - m.start)
                        .is_some_and(|copy| copy == own)
            }),
        };
        if self.vdso_same.len() > 4096 {
            self.vdso_same.clear();
        }
        if !same {
            return None;
        }
        self.vdso
            .get_or_insert_with(|| tables::read(own).ok().map(Arc::new))
            .clone()
    }

    /// The tables of the binary `m` maps: from the cache, else read now (once). A binary
    /// replaced since it was mapped goes into `coverage`'s replaced ranges.
    fn tables(&mut self, pid: u32, m: &ModuleMap, coverage: &mut Coverage) -> Tables {
        self.clock += 1;
        let key = binary_key(&m.file);
        if let Some(b) = self.binaries.get_mut(&key) {
            b.last_use = self.clock;
            if b.replaced {
                coverage.replaced.push(m.start..m.end);
            }
            return b.tables.clone();
        }
        let mut replaced = false;
        let read = match crate::symbols::user_fs_of(&m.file, pid) {
            // As the symbolizer: a read another program or machine answers may never end.
            Some(fstype) if !self.config.read_user_fs => Err(format!(
                "it is on a {fstype} filesystem, whose reads another program or machine \
                 answers: not read (--read-user-fs reads such files)"
            )),
            _ => match crate::symbols::open_mapped(&m.file, pid, m.start, m.end) {
                // A recording's mapping names its build: another one is never used.
                Ok(f) => tables::read_file(f).and_then(|t| match m.file.identity() {
                    crate::symbols::FileIdentity::BuildId(want) if t.build_id != Some(*want) => {
                        replaced = true;
                        Err(format!(
                            "build id {}, the recording's is {}",
                            t.build_id.map_or("none".into(), |b| b.to_hex()),
                            want.to_hex()
                        ))
                    }
                    _ => Ok(t),
                }),
                Err(e) => {
                    replaced = matches!(e, crate::symbols::OpenMappedError::Replaced(_));
                    Err(e.to_string())
                }
            },
        };
        if replaced {
            coverage.replaced.push(m.start..m.end);
        }
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
                replaced,
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

/// Unwind `stack` with `unwinder` (whose modules are where `coverage` says): the frames
/// into `out`, at most `max_frames` (at least 1), and why the chain ended. Every step reads
/// only the copied stack, and the walk ends at `max_frames` whatever the rules say, or at
/// the first frame in a replaced binary.
pub fn walk(
    unwinder: &UnwinderX86_64<Arc<[u8]>>,
    coverage: &Coverage,
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
    if coverage.is_replaced(regs.ip) {
        return End::Replaced;
    }
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
                if coverage.is_replaced(f.address()) {
                    return End::Replaced;
                }
            }
            Ok(None) => return End::Complete,
            Err(e) => {
                // framehop says CouldNotReadStack also when a frame has no rules and its
                // frame-pointer guess led off the copy: tell the two apart by whether the
                // last address is in a module with rules.
                let last = out.last().copied().unwrap_or(regs.ip);
                if matches!(e, StepError::CouldNotReadStack(_))
                    && !coverage.covered.iter().any(|r| r.contains(&last))
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
        let t = crate::testkit::fuzz::tables(eh_frame, hdr, debug_frame);
        let mut u = UnwinderX86_64::new();
        u.add_module(Module::new(
            String::new(),
            crate::testkit::fuzz::MODULE,
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

    /// Found by the `unwind` fuzz target: an `.eh_frame_hdr` whose FDE count times its row
    /// size overflows in gimli's binary search (`ParsedEhFrameHdr`'s table lookup). It wraps,
    /// as in release builds (Cargo.toml turns the check off for gimli in tests too), and
    /// the walk ends within its bound with the interrupted address first.
    #[test]
    fn an_eh_frame_hdr_whose_table_overflows_ends_the_chain() {
        let hdr = vec![
            0x01, 0x01, 0x00, 0x04, 0x00, 0xc4, 0x00, 0xff, 0x00, 0xba, 0x00, 0x00, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff,
        ];
        let t = crate::testkit::fuzz::tables(vec![0, 0, 0xff, 0], hdr, vec![]);
        let regs = (0x405001, 0x10000f0fffffe00, 0xff76cec483ba0400);
        let (frames, end) = crate::testkit::fuzz::unwind(&t, Some(regs), &[0x41], false, 132);
        assert_eq!(frames.first(), Some(&0x405001), "{end:?}");
        assert!(frames.len() <= 132);
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
            walk(&u, &Coverage::default(), &mut cache, &none, 64, &mut out),
            End::NoRegisters
        );
        assert!(out.is_empty());
        let empty = stack(0x401000, 0x7000, 0x7000, vec![]);
        assert_eq!(
            walk(&u, &Coverage::default(), &mut cache, &empty, 64, &mut out),
            End::EmptyStack
        );
        assert_eq!(out, [0x401000]);
        // A frame pointer that points at itself: framehop refuses to go round.
        out.clear();
        let mut bytes = vec![0u8; 64];
        bytes[0..8].copy_from_slice(&0x7000u64.to_ne_bytes());
        bytes[8..16].copy_from_slice(&0x401234u64.to_ne_bytes());
        let looped = stack(0x401000, 0x7000, 0x7000, bytes);
        let end = walk(&u, &Coverage::default(), &mut cache, &looped, 64, &mut out);
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
            let coverage = Coverage {
                covered: std::iter::once(0x400000..0x410000).collect(),
                replaced: vec![],
            };
            let _ = walk(&u, &coverage, &mut cache, &s, max, &mut out);
            prop_assert!(!out.is_empty() && out.len() <= max);
        }

        /// Well-formed `.debug_frame` with random rules (CFA from any register and offset,
        /// expressions, saved registers, state pushes and pops) over random stacks: what
        /// parses gets evaluated, and the walk still ends within its bound, never a panic.
        #[test]
        fn random_rules_in_well_formed_cfi_end_within_the_bound(
            cie_ops in proptest::collection::vec(cfa_op(), 0..6),
            fde_ops in proptest::collection::vec(cfa_op(), 0..24),
            bytes in proptest::collection::vec(any::<u8>(), 0..1024),
            ip_off in 0u64..0x8000,
            sp_off in 0u64..64,
            bp in any::<u64>(),
            max in 1usize..200,
        ) {
            let u = module(vec![], vec![], debug_frame(&cie_ops.concat(), &fde_ops.concat()));
            let mut cache = CacheX86_64::new();
            let mut out = Vec::new();
            let sp = 0x7ff0_0000;
            let s = UserStack {
                regs: Some(UserRegs { ip: 0x401000 + ip_off, sp: sp + sp_off * 8, bp }),
                stack: bytes.into(),
            };
            let coverage = Coverage { covered: std::iter::once(0x400000..0x410000).collect(), replaced: vec![] };
            let end = walk(&u, &coverage, &mut cache, &s, max, &mut out);
            prop_assert!(!out.is_empty() && out.len() <= max, "{end:?}");
        }

        /// A frame in a replaced binary ends the chain there, wherever it is in the chain.
        #[test]
        fn a_frame_in_a_replaced_binary_ends_the_chain_at_it(
            frames in proptest::collection::vec(0x401000u64..0x40f000, 1..12),
            replaced_at in 0usize..12,
            max in 1usize..20,
        ) {
            // Frame-pointer rules all the way (no tables): each frame `bp -> [next bp, ra]`.
            let u = module(vec![], vec![], vec![]);
            let sp = 0x7ff0_0000u64;
            let mut bytes = Vec::new();
            for (i, ra) in frames.iter().enumerate().skip(1) {
                bytes.extend_from_slice(&(sp + 16 * i as u64).to_ne_bytes());
                bytes.extend_from_slice(&ra.to_ne_bytes());
            }
            bytes.extend_from_slice(&[0; 16]);
            let s = stack(frames[0], sp, sp, bytes);
            let bad = frames[replaced_at.min(frames.len() - 1)];
            let coverage = Coverage { covered: vec![], replaced: std::iter::once(bad..bad + 1).collect() };
            let mut cache = CacheX86_64::new();
            let mut out = Vec::new();
            let end = walk(&u, &coverage, &mut cache, &s, max, &mut out);
            prop_assert!(!out.is_empty() && out.len() <= max);
            if let Some(i) = out.iter().position(|&a| a == bad) {
                prop_assert_eq!(end, End::Replaced);
                prop_assert_eq!(i, out.len() - 1);
            } else {
                prop_assert_ne!(end, End::Replaced);
            }
        }

        /// perfwatch's own vDSO (a real, small ELF file) with random bytes changed: its
        /// tables are read or refused, and what is read unwinds random stacks within the
        /// bound.
        #[test]
        fn a_mangled_real_elf_file_is_read_or_refused_and_unwinds_within_the_bound(
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..32),
            bytes in proptest::collection::vec(any::<u8>(), 0..512),
            ip_off in 0u64..0x2000,
            max in 1usize..100,
        ) {
            let Some(own) = crate::symbols::own_vdso() else {
                return Ok(());
            };
            let mut img = own.to_vec();
            for (i, b) in &edits {
                let i = i.index(img.len());
                img[i] = *b;
            }
            let Ok(t) = tables::read(&img[..]) else {
                return Ok(());
            };
            let Some(svma) = t.svma_of_offset(0) else {
                return Ok(());
            };
            let base = 0x7fff_0000_0000u64;
            let mut u = UnwinderX86_64::new();
            u.add_module(Module::new(
                String::new(),
                base..base + img.len() as u64,
                base.wrapping_sub(svma),
                t.section_info(),
            ));
            let mut cache = CacheX86_64::new();
            let mut out = Vec::new();
            let s = stack(base + ip_off, 0x7ff0_0000, 0, bytes);
            let coverage = Coverage { covered: std::iter::once(base..base + img.len() as u64).collect(), replaced: vec![] };
            let _ = walk(&u, &coverage, &mut cache, &s, max, &mut out);
            prop_assert!(!out.is_empty() && out.len() <= max);
        }
    }

    /// One DWARF call-frame instruction, well formed or not (a random byte now and then).
    fn cfa_op() -> impl Strategy<Value = Vec<u8>> {
        let reg = 0u8..20;
        prop_oneof![
            (reg.clone(), any::<u8>()).prop_map(|(r, o)| vec![0x0c, r, o & 0x7f]), // def_cfa
            any::<u8>().prop_map(|o| vec![0x0e, o & 0x7f]),                        // def_cfa_offset
            reg.clone().prop_map(|r| vec![0x0d, r]), // def_cfa_register
            (0u8..17, any::<u8>()).prop_map(|(r, o)| vec![0x80 | r, o & 0x7f]), // offset
            (1u8..0x3f).prop_map(|d| vec![0x40 | d]), // advance_loc
            Just(vec![0x0a]),                        // remember_state
            Just(vec![0x0b]),                        // restore_state
            proptest::collection::vec(any::<u8>(), 0..8).prop_map(|e| {
                let mut v = vec![0x0f, e.len() as u8]; // def_cfa_expression
                v.extend(e);
                v
            }),
            (reg.clone(), proptest::collection::vec(any::<u8>(), 0..8)).prop_map(|(r, e)| {
                let mut v = vec![0x10, r, e.len() as u8]; // expression
                v.extend(e);
                v
            }),
            (reg, any::<u8>()).prop_map(|(r, o)| vec![0x14, r, o & 0x7f]), // val_offset
            Just(vec![0x00]),                                              // nop
            any::<u8>().prop_map(|b| vec![b]),
        ]
    }

    /// A 64-bit `.debug_frame` of one CIE (x86_64: code 1, data -8, return address in
    /// register 16; `cie_ops` after `CFA = rsp + 8, ra at CFA - 8`) and one FDE over stated
    /// addresses 0x1000..0x9000 with `fde_ops`.
    fn debug_frame(cie_ops: &[u8], fde_ops: &[u8]) -> Vec<u8> {
        fn entry(out: &mut Vec<u8>, body: Vec<u8>) {
            let mut body = body;
            while (body.len() + 4) % 8 != 0 {
                body.push(0);
            }
            out.extend_from_slice(&(body.len() as u32).to_le_bytes());
            out.extend(body);
        }
        let mut out = Vec::new();
        let mut cie = vec![
            0xff, 0xff, 0xff, 0xff, 1, 0, 1, 0x78, 16, 0x0c, 7, 8, 0x90, 1,
        ];
        cie.extend_from_slice(cie_ops);
        entry(&mut out, cie);
        let mut fde = 0u32.to_le_bytes().to_vec();
        fde.extend_from_slice(&0x1000u64.to_le_bytes());
        fde.extend_from_slice(&0x8000u64.to_le_bytes());
        fde.extend_from_slice(fde_ops);
        entry(&mut out, fde);
        out
    }

    /// A binary whose file at its path is another than the one mapped (another inode), and
    /// whose mapped one cannot be reached (no process to read it through): not read, its
    /// frames end the chains, counted as replaced.
    #[test]
    fn a_binary_replaced_since_it_was_mapped_ends_chains_counted() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("prog");
        std::fs::write(&path, b"\x7fELF not the mapped one").unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        let (maj, min) = (libc::major(meta.dev()), libc::minor(meta.dev()));
        let file = MappedFile::new(
            path.as_os_str().as_encoded_bytes(),
            crate::symbols::FileIdentity::from_mmap2(maj, min, meta.ino() + 1, 0),
        );
        let mut u = Unwinder::new(Config::default());
        let mut out = Vec::new();
        let modules = |m: &mut Vec<ModuleMap>| {
            m.push(ModuleMap {
                start: 0x400000,
                end: 0x410000,
                pgoff: 0,
                file: file.clone(),
            })
        };
        let s = stack(0x401234, 0x7ff0_0000, 0, vec![0; 64]);
        let end = u.unwind(0, (1, 1), modules, &s, 64, &mut out);
        assert_eq!((end, &out[..]), (End::Replaced, &[0x401234][..]));
        assert_eq!(u.stats().count(End::Replaced), 1);
        let notes = u.take_notes();
        assert!(notes.iter().any(|n| n.contains("replaced")), "{notes:?}");
    }

    #[test]
    fn our_own_vdso_has_unwind_rules() {
        let Some(own) = crate::symbols::own_vdso() else {
            crate::skip_test(
                "unwind::tests::our_own_vdso_has_unwind_rules",
                "no vDSO in this process",
            );
            return;
        };
        let t = tables::read(own).unwrap();
        assert!(t.has_rules() && t.eh_frame_hdr.is_some());
        assert_eq!(t.svma_of_offset(0), Some(0));
    }
}
