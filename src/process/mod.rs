//! The process model: what perfwatch knows about the tasks it watches, built once from the
//! ordered stream and read by everything downstream (the filter's `comm:`, the TUI, the
//! script module's `perfwatch.comm`, the symbolizer).
//!
//! pid/tid → name, parent, threads, start, exec time, argv (best effort) and the exec'd file,
//! exit time, and the address space (the executable mappings of MMAP/MMAP2 records, shared by a process's
//! threads, copied on write when a fork copies it, replaced by exec). Seeded at start from
//! `/proc` ([`proc`]) with the tasks that exist and their executable mappings, as perf
//! synthesises them.
//!
//! **Updated in stream order by one writer**: the thread that runs the ordering stage applies
//! each ordered chunk ([`ProcessModel::apply`]) before the chunk goes on to the script stage
//! and the frontend. Those consumers, and readers on other threads (the Python worker, later
//! the symbolizer), may therefore see a model a little ahead of the event they handle, so
//! every lookup takes the event's time: names have a short history, an exec keeps the
//! address spaces it replaced for a while, and a reused pid keeps its previous owner. A
//! lookup at time T answers as of T.
//!
//! **Orphans are followed**: when a process exits, the kernel gives its live children a new
//! parent (the nearest child subreaper above it, else the init of its pid namespace), and no
//! record says so. The model lists them ([`ProcessModel::take_orphans`]); the writer reads
//! each one's parent from `/proc/PID/stat` (in perfwatch's pid namespace, which a rule of
//! thumb could not get right for containers and subreapers) and sets it
//! ([`ProcessModel::reparent`]). An exit record names the parent at the exit too, and is
//! believed over anything the model had.
//!
//! **Bounded**: exited tasks are kept [`EXITED_KEEP_NS`] of stream time after their exit (for
//! records that mention them late, and readers that lag), then forgotten; at most
//! [`MAX_TASKS`] tasks are kept (exited ones go first; past that, live ones whose exit was
//! lost, then the oldest); each address space keeps at most [`maps::MAX_MAPPINGS`].
//!
//! **Shared** as a [`ModelHandle`]: an `Arc<RwLock<_>>` that the writer locks once per chunk
//! (never per event) and readers lock per lookup (or per chunk, on the writer's own thread).

pub mod maps;
pub mod proc;
pub mod tree_log;

use std::collections::VecDeque;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use rustc_hash::FxHashMap;

use crate::cmdline::CmdLine;
use crate::event::Chunk;
use crate::event::{Event, EventKind, TaskRecord};
pub(crate) use maps::AddressSpace;
pub use maps::{MappedFile, Mapping};

/// How long an exited task is kept, in stream time.
pub const EXITED_KEEP_NS: u64 = 10_000_000_000;
/// Tasks (threads) kept at most, live and exited.
pub(crate) const MAX_TASKS: usize = 1 << 17;
/// Names a task remembers (the latest ones).
const NAMES: usize = 3;
/// Address spaces an exec'ing process keeps from before, for samples taken before the exec.
const OLD_SPACES: usize = 2;

/// A task name as the kernel keeps it (at most 16 bytes), stored without allocating.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Comm {
    buf: [u8; 16],
    len: u8,
}

impl Comm {
    pub fn new(b: &[u8]) -> Comm {
        let b = crate::text::until_nul(b);
        let n = b.len().min(16);
        let mut buf = [0; 16];
        buf[..n].copy_from_slice(&b[..n]);
        Comm { buf, len: n as u8 }
    }

    /// The raw (untrusted) bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len as usize]
    }

    /// The escaped, displayable name.
    pub fn display(&self) -> String {
        crate::text::escape(self.as_bytes())
    }
}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", crate::text::Untrusted(self.as_bytes()))
    }
}

/// A task's latest names, each with the time it was taken. Kept inline (no allocation):
/// every fork makes a task, so its size is paid per record under a fork storm.
#[derive(Clone, Copy, Debug, Default)]
struct Names {
    n: u8,
    times: [u64; NAMES],
    comms: [Comm; NAMES],
}

impl Names {
    fn set(&mut self, time: u64, comm: Comm) {
        if self.n as usize == NAMES {
            self.times.copy_within(1.., 0);
            self.comms.copy_within(1.., 0);
            self.n -= 1;
        }
        // Stream order makes times non-decreasing; a late record goes in its place.
        let mut i = self.n as usize;
        while i > 0 && self.times[i - 1] > time {
            self.times[i] = self.times[i - 1];
            self.comms[i] = self.comms[i - 1];
            i -= 1;
        }
        self.times[i] = time;
        self.comms[i] = comm;
        self.n += 1;
    }

    /// The name at `time`: the latest taken by then, else the earliest known.
    fn at(&self, time: u64) -> Option<&Comm> {
        let n = self.n as usize;
        let i = self.times[..n]
            .iter()
            .rposition(|t| *t <= time)
            .unwrap_or(0);
        self.comms[..n].get(i)
    }

    fn latest(&self) -> Option<&Comm> {
        self.comms[..self.n as usize].last()
    }
}

/// "Not known" for the compact id and time fields below.
const NO_ID: u32 = u32::MAX;
const NO_TIME: u64 = u64::MAX;

fn id(v: u32) -> Option<u32> {
    (v != NO_ID).then_some(v)
}

fn time(v: u64) -> Option<u64> {
    (v != NO_TIME).then_some(v)
}

/// One task (a thread; a process's main thread has `tid == pid`).
#[derive(Clone, Debug)]
pub struct Task {
    pub tid: u32,
    /// Its process (thread group).
    pub pid: u32,
    ppid: u32,
    ptid: u32,
    start: u64,
    exit: u64,
    names: Names,
    /// The task that had this tid before (the tid was reused), for lookups before `start`.
    prev: Option<Box<Task>>,
}

impl Task {
    fn new(tid: u32, pid: u32) -> Task {
        Task {
            tid,
            pid,
            ppid: NO_ID,
            ptid: NO_ID,
            start: NO_TIME,
            exit: NO_TIME,
            names: Names::default(),
            prev: None,
        }
    }

    /// The process that forked its process, when known.
    pub fn ppid(&self) -> Option<u32> {
        id(self.ppid)
    }

    /// The thread that created it, when its fork was seen.
    pub fn ptid(&self) -> Option<u32> {
        id(self.ptid)
    }

    /// When it was forked; `None` when it existed before perfwatch started or its fork was
    /// not seen.
    pub fn start(&self) -> Option<u64> {
        time(self.start)
    }

    /// When it exited.
    pub fn exit(&self) -> Option<u64> {
        time(self.exit)
    }

    /// Its latest name.
    pub fn comm(&self) -> Option<&Comm> {
        self.names.latest()
    }

    /// Its name at `time`.
    pub(crate) fn comm_at(&self, time: u64) -> Option<&Comm> {
        self.names.at(time)
    }

    /// How long it lived, when both ends were seen.
    pub fn lifetime(&self) -> Option<u64> {
        Some(self.exit()?.saturating_sub(self.start()?))
    }

    /// This task, or the one that had its tid before, as of `time`.
    fn at(&self, time: u64) -> Option<&Task> {
        let mut t = self;
        loop {
            if t.start().is_none_or(|s| s <= time) {
                return Some(t);
            }
            match &t.prev {
                Some(p) => t = p,
                // Asked about a time before it started: the oldest we know is the best
                // answer (records can be a little late).
                None => return Some(t),
            }
        }
    }
}

/// Address spaces an exec replaced, with the time each one ended.
type OldSpaces = VecDeque<(u64, Arc<AddressSpace>)>;
/// Earlier execs: when each was, and its command line.
type OldExecs = VecDeque<(u64, Option<Arc<CmdLine>>)>;

/// The address space of a process that has mapped nothing (known).
static EMPTY_SPACE: AddressSpace = AddressSpace::new();

/// One process (thread group): its threads, exec and argv, and its address space.
#[derive(Clone, Debug)]
pub struct Process {
    pub pid: u32,
    ppid: u32,
    /// How many of its threads are alive ([`ProcessModel::threads`] lists them).
    pub threads: u32,
    start: u64,
    exit: u64,
    exec: u64,
    /// Its command line, read at start (`/proc`) and at exec when the model is asked to
    /// ([`ProcessModel::set_argv`]); a fork copies it.
    pub argv: Option<Arc<CmdLine>>,
    /// The file its last exec ran (untrusted path): the first executable file mapping after
    /// the exec, as its MMAP2 record named it (for a `#!` script, the interpreter); from
    /// `/proc/PID/exe` at start. A fork copies it.
    pub exe: Option<Arc<[u8]>>,
    /// An exec happened and its executable mapping has not been seen yet.
    exe_wanted: bool,
    /// Its control group, from `/proc` at start; a fork inherits its parent's (as the kernel
    /// does, short of CLONE_INTO_CGROUP). A later move between groups is not seen.
    pub cgroup: Option<Arc<str>>,
    /// Shared with the processes it was copied to or from by a fork, until one maps
    /// something (copy on write); `None` while empty.
    space: Option<Arc<AddressSpace>>,
    old_spaces: Option<Box<OldSpaces>>,
    /// The execs before the last one, with their command lines (`sh -c 'exec prog'` execs
    /// twice within a chunk: the first one's line is filed after the second came).
    old_execs: Option<Box<OldExecs>>,
    prev: Option<Box<Process>>,
}

impl Process {
    fn new(pid: u32) -> Process {
        Process {
            pid,
            ppid: NO_ID,
            threads: 0,
            start: NO_TIME,
            exit: NO_TIME,
            exec: NO_TIME,
            argv: None,
            exe: None,
            exe_wanted: false,
            cgroup: None,
            space: None,
            old_spaces: None,
            old_execs: None,
            prev: None,
        }
    }

    /// The process that forked it, when known.
    pub fn ppid(&self) -> Option<u32> {
        id(self.ppid)
    }

    /// When it was forked (`None`: before perfwatch started, or not seen).
    pub fn start(&self) -> Option<u64> {
        time(self.start)
    }

    /// When its last thread exited.
    pub fn exit(&self) -> Option<u64> {
        time(self.exit)
    }

    /// When it last called execve.
    pub fn exec(&self) -> Option<u64> {
        time(self.exec)
    }

    /// When the program it ran at `time` began: its last exec up to `time`, else its fork
    /// (0: neither was seen). What a JIT wrote into its perf map names that program's code
    /// only, not an earlier program of the process nor a later process with its pid.
    pub(crate) fn image_at(&self, time: u64) -> u64 {
        let start = self.start().unwrap_or(0);
        if let Some(e) = self.exec().filter(|&e| e <= time) {
            return start.max(e);
        }
        let olds = self.old_execs.iter().flat_map(|o| o.iter());
        olds.map(|(t, _)| *t)
            .filter(|&t| t <= time)
            .fold(start, u64::max)
    }

    /// Its current address space.
    pub fn space(&self) -> &AddressSpace {
        self.space.as_deref().unwrap_or(&EMPTY_SPACE)
    }

    /// Its address space as of `time` (before an exec: the one the exec replaced).
    pub(crate) fn space_at(&self, time: u64) -> &AddressSpace {
        self.old_spaces
            .iter()
            .flat_map(|o| o.iter())
            .find(|(until, _)| time < *until)
            .map_or(self.space(), |(_, s)| s)
    }

    fn at(&self, time: u64) -> &Process {
        let mut p = self;
        while p.start().is_some_and(|s| s > time) {
            match &p.prev {
                Some(prev) => p = prev,
                None => break,
            }
        }
        p
    }
}

/// What the writer may want to read from `/proc` after applying a chunk: the command line of
/// each process that exec'd (best effort; see [`ProcessModel::set_argv`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ExecSeen {
    pub pid: u32,
    pub time: u64,
    pub comm: Comm,
}

/// A live process whose parent exited: the kernel has given it a new parent, which the
/// writer reads from `/proc` ([`ProcessModel::reparent`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Orphan {
    pub pid: u32,
    /// The parent that exited.
    pub parent: u32,
    pub comm: Comm,
}

/// The tasks and processes.
#[derive(Debug, Default)]
pub struct ProcessModel {
    tasks: FxHashMap<u32, Task>,
    processes: FxHashMap<u32, Process>,
    /// Stream time of the last eviction pass.
    swept: u64,
    /// Execs since the writer last took them ([`ProcessModel::take_execs`]).
    execs: Vec<ExecSeen>,
    /// Whether to collect execs for argv.
    want_argv: bool,
    /// Processes that exited since the writer last asked for orphans (when collected).
    exited: Vec<u32>,
    want_orphans: bool,
    /// How many times a parent changed after a fork ([`ProcessModel::reparents`]).
    reparents: u64,
    /// Processes that came, went or changed parent, for readers' trees (when collected).
    tree: tree_log::TreeLog,
}

impl ProcessModel {
    pub fn new() -> ProcessModel {
        ProcessModel::default()
    }

    /// Ask for the execs seen, so that their command lines can be read.
    pub fn collect_execs(&mut self, on: bool) {
        self.want_argv = on;
    }

    /// Ask for the live children of processes that exit ([`ProcessModel::take_orphans`]).
    pub(crate) fn collect_orphans(&mut self, on: bool) {
        self.want_orphans = on;
    }

    /// Log the processes that come, go or change parent, for a reader that keeps a tree
    /// ([`ProcessModel::tree_changes`]).
    pub fn collect_tree_changes(&mut self, on: bool) {
        self.tree.set_on(on);
    }

    /// The processes that came, went or changed parent since `at` (a cursor from here), and
    /// the cursor after them; `None`: rebuild from [`ProcessModel::each_process`] and start
    /// again at [`ProcessModel::tree_cursor`].
    pub fn tree_changes(
        &self,
        at: tree_log::TreeCursor,
    ) -> Option<(impl Iterator<Item = u32> + '_, tree_log::TreeCursor)> {
        self.tree.since(at)
    }

    /// The cursor of a reader that has just read every process.
    pub fn tree_cursor(&self) -> tree_log::TreeCursor {
        self.tree.cursor()
    }

    /// Tasks known (threads, live and exited).
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Processes known.
    pub fn processes(&self) -> usize {
        self.processes.len()
    }

    /// Every process known (live, and exited ones still kept), as it is now.
    pub fn each_process(&self) -> impl Iterator<Item = &Process> {
        self.processes.values()
    }

    /// Task `tid` as it is now (the latest task with that id).
    pub fn task(&self, tid: u32) -> Option<&Task> {
        self.tasks.get(&tid)
    }

    /// Task `tid` as of `time`.
    pub(crate) fn task_at(&self, tid: u32, time: u64) -> Option<&Task> {
        self.tasks.get(&tid)?.at(time)
    }

    /// Process `pid` as it is now.
    pub fn process(&self, pid: u32) -> Option<&Process> {
        self.processes.get(&pid)
    }

    /// The command line of process `pid`'s exec at `time`: `Some` when it was read (or
    /// found gone: [`CmdLine::is_gone`]), `None` when it was not read (not asked for, or
    /// over the budget).
    pub(crate) fn exec_argv(&self, pid: u32, time: u64) -> Option<&Arc<CmdLine>> {
        let p = self.process_at(pid, time)?;
        if p.exec() != Some(time) {
            let olds = p.old_execs.as_deref()?;
            return olds.iter().find(|(t, _)| *t == time)?.1.as_ref();
        }
        p.argv.as_ref()
    }

    /// Process `pid` as of `time`.
    pub(crate) fn process_at(&self, pid: u32, time: u64) -> Option<&Process> {
        Some(self.processes.get(&pid)?.at(time))
    }

    /// When the program process `pid` ran at `time` began ([`Process::image_at`]).
    pub(crate) fn image_at(&self, pid: u32, time: u64) -> u64 {
        self.process_at(pid, time).map_or(0, |p| p.image_at(time))
    }

    /// The latest name of task `tid`.
    pub fn comm(&self, tid: u32) -> Option<&Comm> {
        self.tasks.get(&tid)?.comm()
    }

    /// The name of task `tid` at `time`. For a process id, the name of its main thread,
    /// which is what `ps` shows for the process.
    pub(crate) fn comm_at(&self, tid: u32, time: u64) -> Option<&Comm> {
        self.task_at(tid, time)?.comm_at(time)
    }

    /// The mapping of process `pid` that held `addr` at `time`, and the file offset of
    /// `addr` in it: the symbolizer's question, answered also for processes that have
    /// exited (while they are kept).
    pub(crate) fn find_mapping(&self, pid: u32, time: u64, addr: u64) -> Option<(&Mapping, u64)> {
        let m = self.process_at(pid, time)?.space_at(time).find(addr)?;
        Some((m, m.file_offset(addr)))
    }

    /// What the writer does with each chunk that leaves the ordering stage: learn its
    /// events, then forget what is old at its watermark (`alive` as for
    /// [`ProcessModel::evict`]).
    pub(crate) fn apply_chunk(&mut self, chunk: &Chunk, alive: impl Fn(u32, u32) -> bool) {
        self.apply(&chunk.events);
        if chunk.watermark != u64::MAX {
            self.evict(chunk.watermark, alive);
        }
    }

    /// Apply ordered events.
    pub fn apply(&mut self, events: &[Event]) {
        for ev in events {
            self.apply_one(ev);
        }
    }

    /// Apply one event.
    pub(crate) fn apply_one(&mut self, ev: &Event) {
        match &ev.kind {
            EventKind::Fork(t) => self.fork(t),
            EventKind::Exit(t) => self.exit(t),
            EventKind::Comm {
                pid,
                tid,
                comm,
                exec,
            } => self.rename(*pid, *tid, ev.time, Comm::new(comm), *exec),
            // pid -1: a kernel mapping (modules), not a process's.
            EventKind::Mmap(m) if m.pid != u32::MAX => {
                let map = Mapping::from_record(m, ev.time);
                let p = self.process_entry(m.pid, ev.time);
                if p.exe_wanted && is_exe_mapping(m) {
                    p.exe = Some(Arc::from(&m.filename[..]));
                    p.exe_wanted = false;
                }
                Arc::make_mut(p.space.get_or_insert_with(Arc::default)).insert(map);
            }
            _ => {}
        }
    }

    /// The process `pid`, made if unknown (a record about a task whose fork was not seen).
    fn process_entry(&mut self, pid: u32, time: u64) -> &mut Process {
        let tree = &mut self.tree;
        let p = self.processes.entry(pid).or_insert_with(|| {
            tree.changed(pid);
            Process::new(pid)
        });
        if p.exit().is_some_and(|e| e < time) && p.threads == 0 {
            tree.changed(pid);
            // A record for a process that had exited: the pid was reused without a fork
            // record (lost). Start a new one.
            let old = std::mem::replace(p, Process::new(pid));
            p.prev = Some(Box::new(Process { prev: None, ..old }));
            p.start = time;
        }
        p
    }

    /// Task `tid`, made if unknown; true when it was made.
    fn task_entry(&mut self, tid: u32, pid: u32) -> (&mut Task, bool) {
        let mut made = false;
        let t = self.tasks.entry(tid).or_insert_with(|| {
            made = true;
            Task::new(tid, pid)
        });
        (t, made)
    }

    fn fork(&mut self, t: &TaskRecord) {
        let thread = t.pid == t.ppid && t.tid != t.pid;
        // The name it inherits: its creator's, else its parent process's.
        let inherited = self
            .comm_at(t.ptid, t.time)
            .or_else(|| self.comm_at(t.ppid, t.time))
            .copied();
        let mut task = Task::new(t.tid, t.pid);
        task.ptid = t.ptid;
        task.start = t.time;
        if let Some(c) = inherited {
            task.names.set(t.time, c);
        }
        if thread {
            let p = self.process_entry(t.pid, t.time);
            p.threads += 1;
            task.ppid = p.ppid;
        } else {
            // A new process: a copy of its parent's address space (shared until one of them
            // changes it) and command line.
            let mut p = Process::new(t.pid);
            p.ppid = t.ppid;
            p.start = t.time;
            p.threads = 1;
            if let Some(parent) = self.processes.get(&t.ppid) {
                p.space = parent.space.clone();
                p.argv = parent.argv.clone();
                p.exe = parent.exe.clone();
                p.cgroup = parent.cgroup.clone();
            }
            task.ppid = t.ppid;
            self.tree.changed(t.pid);
            replace_keeping_prev(
                &mut self.processes,
                t.pid,
                p,
                t.time,
                |p| &mut p.exit,
                |p| &mut p.prev,
            );
        }
        // A reused tid keeps its previous owner (one generation) for lookups before this
        // fork; one whose exit was lost ends here.
        replace_keeping_prev(
            &mut self.tasks,
            t.tid,
            task,
            t.time,
            |t| &mut t.exit,
            |t| &mut t.prev,
        );
    }

    fn exit(&mut self, t: &TaskRecord) {
        let (task, made) = self.task_entry(t.tid, t.pid);
        let was_alive = !made && task.exit().is_none();
        task.exit = t.time;
        // The kernel writes the parent the task has at its exit (`real_parent`): after a
        // re-parenting, the new one.
        let parent = (t.pid != t.ppid).then_some(t.ppid);
        if let Some(pp) = parent {
            task.ppid = pp;
        }
        let want_orphans = self.want_orphans;
        let p = self.process_entry(t.pid, t.time);
        if was_alive {
            p.threads = p.threads.saturating_sub(1);
        }
        let moved = parent.is_some_and(|pp| p.ppid != NO_ID && p.ppid != pp);
        let new_parent = parent.is_some_and(|pp| p.ppid != pp);
        if let Some(pp) = parent {
            p.ppid = pp;
        }
        let ended = p.threads == 0 && p.exit().is_none();
        let exit_moved = p.threads == 0 && p.exit != t.time;
        if p.threads == 0 {
            p.exit = t.time;
        }
        self.reparents += moved as u64;
        if new_parent || exit_moved {
            self.tree.changed(t.pid);
        }
        if ended && want_orphans {
            self.exited.push(t.pid);
        }
    }

    fn rename(&mut self, pid: u32, tid: u32, time: u64, comm: Comm, exec: bool) {
        let (task, made) = self.task_entry(tid, pid);
        task.names.set(time, comm);
        let p = self.process_entry(pid, time);
        if made {
            p.threads += 1;
        }
        if exec {
            // A new program: a new, empty address space (the kernel reports the new image's
            // mappings right after), the old one kept for samples taken before.
            if let Some(before) = p.exec() {
                let olds = p.old_execs.get_or_insert_with(Box::default);
                if olds.len() == OLD_SPACES {
                    olds.pop_front();
                }
                olds.push_back((before, p.argv.take()));
            }
            p.exec = time;
            p.argv = None;
            p.exe = None;
            p.exe_wanted = true;
            if let Some(old) = p.space.take().filter(|s| !s.is_empty()) {
                let olds = p.old_spaces.get_or_insert_with(Box::default);
                if olds.len() == OLD_SPACES {
                    olds.pop_front();
                }
                olds.push_back((time, old));
            }
            if self.want_argv {
                self.execs.push(ExecSeen { pid, time, comm });
            }
        }
    }

    /// The live threads of process `pid`, by tid (a walk over every task: for views, not
    /// for every record).
    pub fn threads(&self, pid: u32) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .tasks
            .values()
            .filter(|t| t.pid == pid && t.exit().is_none())
            .map(|t| t.tid)
            .collect();
        v.sort_unstable();
        v
    }

    /// The execs applied since the last call (when [`ProcessModel::collect_execs`] is on).
    pub(crate) fn take_execs(&mut self) -> Vec<ExecSeen> {
        std::mem::take(&mut self.execs)
    }

    /// Record process `pid`'s command line, read for its exec at `time`. A command line
    /// from the exec itself is never replaced by one read later from `/proc`.
    pub fn set_argv(&mut self, pid: u32, time: u64, argv: Arc<CmdLine>) {
        if let Some(p) = self.processes.get_mut(&pid) {
            let better = |old: &CmdLine| {
                use crate::cmdline::ArgvSource::{Exec, Gone};
                old.source() != Exec || argv.source() == Exec && old.source() == Gone
            };
            let slot = if p.exec() == Some(time) {
                Some(&mut p.argv)
            } else {
                // An earlier exec (one that exec'd again within the chunk).
                p.old_execs
                    .as_deref_mut()
                    .and_then(|o| o.iter_mut().find(|(t, _)| *t == time))
                    .map(|(_, a)| a)
            };
            if let Some(slot) = slot {
                if slot.as_deref().is_none_or(better) {
                    *slot = Some(argv);
                }
            }
        }
    }

    /// The live processes whose parent exited since the last call (when
    /// [`ProcessModel::collect_orphans`] is on): one walk over the processes per call that
    /// has exits to look at.
    pub(crate) fn take_orphans(&mut self) -> Vec<Orphan> {
        if self.exited.is_empty() {
            return Vec::new();
        }
        let gone: rustc_hash::FxHashSet<u32> = self.exited.drain(..).collect();
        let mut out: Vec<Orphan> = self
            .processes
            .values()
            .filter(|p| p.exit().is_none() && gone.contains(&p.ppid) && p.ppid != p.pid)
            .map(|p| Orphan {
                pid: p.pid,
                parent: p.ppid,
                comm: self.comm(p.pid).copied().unwrap_or_default(),
            })
            .collect();
        out.sort_unstable_by_key(|o| o.pid);
        out
    }

    /// Process `pid`, which `orphan` said had lost its parent, now has `ppid` (read from
    /// `/proc`): its threads too. Nothing changes when it no longer has the parent it lost
    /// (an exit record said better meanwhile).
    pub(crate) fn reparent(&mut self, orphan: &Orphan, ppid: u32) {
        let Some(p) = self.processes.get_mut(&orphan.pid) else {
            return;
        };
        if p.ppid != orphan.parent || ppid == orphan.parent || ppid == orphan.pid {
            return;
        }
        p.ppid = ppid;
        self.reparents += 1;
        self.tree.changed(orphan.pid);
        for t in self.tasks.values_mut() {
            if t.pid == orphan.pid && t.exit().is_none() {
                t.ppid = ppid;
            }
        }
    }

    /// How many times a process's parent changed after its fork (orphans re-parented): a
    /// reader that keeps sets of descendants refreshes them when it moves.
    pub fn reparents(&self) -> u64 {
        self.reparents
    }

    /// Learn what existed before perfwatch started (read from `/proc` after the events
    /// were enabled). Only fills in what the stream has not said already: a task it knows
    /// is newer than the snapshot.
    pub fn seed(&mut self, snapshot: Vec<proc::SeedProcess>) {
        for sp in snapshot {
            let known = self.processes.contains_key(&sp.pid);
            if !known {
                let mut p = Process::new(sp.pid);
                p.ppid = sp.ppid.unwrap_or(NO_ID);
                p.argv = sp.argv.map(Arc::new);
                p.exe = sp.exe.map(Arc::from);
                p.cgroup = sp.cgroup;
                if !sp.maps.is_empty() {
                    let mut space = AddressSpace::default();
                    for m in sp.maps {
                        space.insert(m);
                    }
                    p.space = Some(Arc::new(space));
                }
                self.processes.insert(sp.pid, p);
                self.tree.changed(sp.pid);
            }
            for (tid, comm) in sp.threads {
                if self.tasks.contains_key(&tid) {
                    continue;
                }
                let mut t = Task::new(tid, sp.pid);
                t.ppid = sp.ppid.unwrap_or(NO_ID);
                t.names.set(0, Comm::new(&comm));
                self.tasks.insert(tid, t);
                if let Some(p) = self.processes.get_mut(&sp.pid) {
                    p.threads += 1;
                }
            }
        }
    }

    /// A task that existed before perfwatch started, known by name only (tests, and the
    /// TUI's hand-made scenes).
    pub(crate) fn seed_comm(&mut self, pid: u32, comm: &[u8]) {
        self.seed(vec![proc::SeedProcess {
            pid,
            ppid: None,
            threads: vec![(pid, comm.into())],
            maps: Vec::new(),
            argv: None,
            exe: None,
            cgroup: None,
        }]);
    }

    /// Forget what is no longer needed at stream time `now`: tasks that exited more than
    /// [`EXITED_KEEP_NS`] ago; past [`MAX_TASKS`], older exited ones, then live ones for
    /// which `alive(pid, tid)` says the exit was lost, then the oldest. Cheap to call often:
    /// it does its work at most once per second of stream time, or when over the cap.
    pub fn evict(&mut self, now: u64, alive: impl Fn(u32, u32) -> bool) {
        let over = self.tasks.len() > MAX_TASKS;
        if now < self.swept.saturating_add(1_000_000_000) && !over {
            return;
        }
        self.swept = now;
        let cut = now.saturating_sub(EXITED_KEEP_NS);
        let gone = |exit: Option<u64>| exit.is_some_and(|e| e < cut);
        self.tasks.retain(|_, t| {
            if t.prev.as_ref().is_some_and(|p| gone(p.exit())) {
                t.prev = None;
            }
            !gone(t.exit())
        });
        if self.tasks.len() > MAX_TASKS {
            let target = MAX_TASKS * 3 / 4;
            // Exited ones first, the longest gone first.
            let mut exits: Vec<u64> = self.tasks.values().filter_map(Task::exit).collect();
            let excess = self.tasks.len() - target;
            if !exits.is_empty() {
                let k = excess.min(exits.len()) - 1;
                let (_, nth, _) = exits.select_nth_unstable(k);
                let nth = *nth;
                self.tasks.retain(|_, t| t.exit().is_none_or(|e| e > nth));
            }
            if self.tasks.len() > target {
                // Live ones whose exit record was lost.
                self.tasks.retain(|_, t| alive(t.pid, t.tid));
            }
            if self.tasks.len() > target {
                let mut starts: Vec<u64> = self
                    .tasks
                    .values()
                    .map(|t| t.start().unwrap_or(0))
                    .collect();
                let excess = self.tasks.len() - target;
                let (_, nth, _) = starts.select_nth_unstable(excess - 1);
                let nth = *nth;
                let mut left = excess;
                self.tasks.retain(|_, t| {
                    if left > 0 && t.start().unwrap_or(0) <= nth {
                        left -= 1;
                        false
                    } else {
                        true
                    }
                });
            }
        }
        // A process goes when it has exited long enough, or when it has exited and none of
        // its tasks is left.
        let (tasks, tree) = (&self.tasks, &mut self.tree);
        self.processes.retain(|pid, p| {
            if p.prev.as_ref().is_some_and(|x| gone(x.exit())) {
                p.prev = None;
            }
            let orphan = p.exit().is_some() && !tasks.contains_key(pid);
            let keep = !(gone(p.exit()) || orphan);
            if !keep {
                tree.changed(*pid);
            }
            keep
        });
        if self.processes.len() > MAX_TASKS {
            // Processes known only from a record about them (an mmap), none of whose tasks
            // is known: the first to go.
            let (tasks, tree) = (&self.tasks, &mut self.tree);
            self.processes.retain(|pid, _| {
                let keep = tasks.contains_key(pid);
                if !keep {
                    tree.changed(*pid);
                }
                keep
            });
        }
        for p in self.processes.values_mut() {
            if let Some(olds) = p.old_spaces.as_mut() {
                olds.retain(|(until, _)| *until >= cut);
                if olds.is_empty() {
                    p.old_spaces = None;
                }
            }
        }
    }
}

/// Whether a mapping is the executable one an exec maps first: a file mapped executable
/// (MMAP records without MMAP2's protection are executable ones).
fn is_exe_mapping(m: &crate::event::MmapRecord) -> bool {
    let exec = m
        .mmap2
        .as_ref()
        .is_none_or(|x| x.prot & libc::PROT_EXEC as u32 != 0);
    exec && !m.filename.starts_with(b"[") && &m.filename[..] != b"//anon"
}

/// Put `new` at `key`; an entry already there (the id was reused) becomes its `prev`, one
/// generation deep, ended at `time` if its end was never seen.
fn replace_keeping_prev<T>(
    map: &mut FxHashMap<u32, T>,
    key: u32,
    new: T,
    time: u64,
    end: impl Fn(&mut T) -> &mut u64,
    prev: impl Fn(&mut T) -> &mut Option<Box<T>>,
) {
    match map.entry(key) {
        std::collections::hash_map::Entry::Occupied(mut e) => {
            let mut old = std::mem::replace(e.get_mut(), new);
            let end = end(&mut old);
            if *end == NO_TIME {
                *end = time;
            }
            *prev(&mut old) = None;
            *prev(e.get_mut()) = Some(Box::new(old));
        }
        std::collections::hash_map::Entry::Vacant(e) => {
            e.insert(new);
        }
    }
}

/// The model as its readers share it: the writer locks it once per chunk, a reader once per
/// lookup. A poisoned lock (a panic while it was held) is still used: the model is never
/// left half-updated in a way that matters to a lookup.
#[derive(Clone, Debug, Default)]
pub struct ModelHandle(Arc<RwLock<ProcessModel>>);

impl ModelHandle {
    pub fn new(model: ProcessModel) -> ModelHandle {
        ModelHandle(Arc::new(RwLock::new(model)))
    }

    pub fn read(&self) -> RwLockReadGuard<'_, ProcessModel> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn write(&self) -> RwLockWriteGuard<'_, ProcessModel> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests;
