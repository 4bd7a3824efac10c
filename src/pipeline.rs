//! The middle of perfwatch: from the readers' batches to the ordered chunks a frontend shows.
//!
//! ```text
//!  reader 0 ─┐                 ┌─────────── the frontend's thread ───────────────┐
//!  reader 1 ─┼─► Batch channel ─► OrderingStage ─► ProcessModel ─┬──────────────► frontend
//!  reader N ─┘    (bounded)    │  (one window,     (the writer:   │               (TUI, plain,
//!                              │   one clock        one lock per  └─► script ──┐    json; never
//!                              │   table)           chunk)            stage    │    reorders)
//!                              └────────────────────────────◄── Chunk channel ◄┘
//! ```
//!
//! A [`Pipeline`] lives in the thread of the frontend that reads it. Each turn of the
//! frontend's loop hands it what its `select!` received ([`Pipeline::take`]) and takes the
//! chunks that are ready ([`Pipeline::next`]). The ordering stage runs there; each chunk it
//! emits updates the process model (the model's only writer), then goes either straight to
//! the frontend or, with `--script`, to the script stage (its own threads: the pump and the
//! Python worker), which hands chunks back in the same order. Readers of the model on other
//! threads (the Python worker, later the symbolizer) share its [`ModelHandle`] and look
//! things up as of an event's time, so a model a chunk ahead of them answers as it should.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvError, Sender, TrySendError, bounded, never};

use crate::cmdline::CmdLine;
use crate::event::Event;
use crate::event::{Batch, BufferPool, Chunk};
use crate::exec_table::ExecTable;
use crate::order::{OrderingStage, collect_last_batches};
use crate::process::proc::{self, SeedOptions, SeedProcess};
use crate::process::{ExecSeen, ModelHandle, Orphan, ProcessModel};
use crate::symbolize::Symbolize;

/// Events the ordering window holds at most (its memory bound: about 80 bytes each).
pub(crate) const MAX_REORDER: usize = 1 << 18;
/// Queued batches taken in one turn before chunks go out: fewer, larger chunks.
const BATCHES_PER_TURN: usize = 64;
/// Chunks waiting for room in the script stage's queue before batches are no longer taken.
const STAGE_BACKLOG: usize = 64;
/// Command lines read after execs per second at most (each is two small `/proc` reads).
const ARGV_PER_SECOND: u32 = 500;
/// How long after an exec the exec watcher may still file its command line (the tracepoint
/// fires at the end of the exec, after the COMM record), in the events' time.
const EXEC_GRACE_NS: u64 = 1_000_000_000;
/// Execs waiting for the exec watcher, at most.
const MAX_LATE_EXECS: usize = 1024;
/// Parents of orphans read from `/proc` per second at most.
const ORPHANS_PER_SECOND: u32 = 2000;
/// How long an orphan whose parent `/proc` does not show changed yet is looked at again.
const ORPHAN_WAIT: Duration = Duration::from_secs(1);
/// Symbolizer notes kept for the end of a run (one per binary it could not read, at most).
pub(crate) const MAX_NOTES: usize = 64;
const SEED_WAIT: Duration = Duration::from_secs(2);
/// How long the records are held back for the `/proc` snapshot at most (after which they go
/// on without it, and it fills the gaps when it comes), besides [`MAX_REORDER`] of them: on a
/// loaded machine with 20 000 processes, reading `/proc` took 7–15 s, during which the TUI
/// showed nothing.
const SEED_HOLD: Duration = Duration::from_secs(2);

/// Is `ev` about process `pid` (its samples, its threads' forks, exits, names and mappings,
/// its switches)? Losses and throttling are about the events, never hidden.
/// How the pipeline is set up.
#[derive(Clone, Debug)]
pub struct PipelineOptions {
    /// Events the ordering window holds at most.
    pub max_reorder: usize,
    /// Keep the process model. It is kept for its readers (the TUI, scripts, a filter on
    /// names, the symbolizer); a run without any (`--plain` as it is) does not pay for it.
    pub model: bool,
    /// What to read from `/proc` at start (`None`: nothing, for tests).
    pub seed: Option<SeedOptions>,
    /// Read each exec'd process's command line (best effort, rate-limited).
    pub argv: bool,
    /// Where the exec watcher files command lines read at the exec (when it runs).
    pub execs: Option<Arc<ExecTable>>,
    /// Follow orphans to their new parent (a `/proc` read each).
    pub orphans: bool,
    /// Where `/proc` is.
    pub proc_root: PathBuf,
    /// Where the readers' emptied buffers go back to (the monitor's), if anywhere.
    pub pool: Option<BufferPool>,
    /// Name the samples (needs `model`): the symbolize step's configuration.
    pub symbols: Option<crate::symbols::Config>,
    /// Name a call chain's return addresses as perf 6.1 does, where perf is the oracle (a
    /// recording, `--format perf`): a frame-pointer chain's by the address itself (a call that
    /// ends a function returns to the next one's first byte, which perf names), a DWARF
    /// caller by its address less one (as perf's unwinders give it). Off (live): by the
    /// call's byte, the calling function.
    pub perf_names: bool,
    /// Unwind the samples' user stacks (`--call-graph dwarf`; needs `model`): at most this
    /// many user frames, and where the counters go.
    pub unwind: Option<(u16, Arc<std::sync::Mutex<crate::unwind::Stats>>)>,
    /// Hide perfwatch's own records (its threads', its helpers'), counting them.
    pub hide: Option<HideSelf>,
    /// Where the count of late events (see [`Pipeline::late`]) is kept for the summary.
    pub late: Option<Arc<AtomicU64>>,
    /// The run's stop time, once decided: nothing stamped after it goes out (counted there).
    pub stop_time: Option<Arc<crate::stop::StopTime>>,
    /// How long the shutdown waits for a `/proc` snapshot still being read.
    pub seed_wait: Duration,
    /// Each batch goes into the ordering stage and what it completes comes out before the
    /// next is taken (not as many as are queued): what is released, and so what is late,
    /// depends on the batches alone, not on how far the source ran ahead (a recording).
    pub exact_order: bool,
}

impl Default for PipelineOptions {
    fn default() -> PipelineOptions {
        PipelineOptions {
            max_reorder: MAX_REORDER,
            model: true,
            seed: Some(SeedOptions {
                maps: true,
                argv: false,
            }),
            argv: false,
            execs: None,
            orphans: true,
            proc_root: PathBuf::from("/proc"),
            pool: None,
            symbols: None,
            perf_names: false,
            unwind: None,
            hide: None,
            late: None,
            stop_time: None,
            seed_wait: SEED_WAIT,
            exact_order: false,
        }
    }
}

/// The script stage as the pipeline sees it: ordered chunks go in, the same chunks (less
/// what the scripts filtered out) come back in the same order.
pub struct StageLink {
    pub to: Sender<Chunk>,
    pub from: Receiver<Chunk>,
    /// How far the scripts are, and whether the run ended by itself (see [`ending`]).
    pub progress: Arc<StageProgress>,
}

mod ending;
mod hide_self;

pub use ending::StageProgress;
pub(crate) use hide_self::HideSelf;

/// A consumer beside the frontend (`--metrics`, `--pprof`): it sees every ordered chunk once
/// the model has learnt it and its samples are named, before the scripts and the frontend's
/// filter, on the pipeline's thread. It must never wait (it hands work to threads of its own).
pub(crate) trait Tap {
    fn chunk(&mut self, events: &[Event], model: &ProcessModel);

    /// What `/proc` showed at start, once read (before the model learns it and before the
    /// first chunk; empty when it could not be read).
    fn seeded(&mut self, _snapshot: &[SeedProcess]) {}
}

/// The ordering stage, the model's writer and the link to the script stage.
pub struct Pipeline {
    rx: Receiver<Batch>,
    no_batches: Receiver<Batch>,
    order: OrderingStage,
    model: ModelHandle,
    opts: PipelineOptions,
    /// perfwatch's helper children alive now (see [`HideSelf`]).
    own_helpers: rustc_hash::FxHashSet<u32>,
    stage: Option<StageLink>,
    no_chunks: Receiver<Chunk>,
    /// Chunks for the script stage that did not fit its queue yet.
    to_stage: VecDeque<Chunk>,
    /// Chunks for the frontend.
    out: VecDeque<Chunk>,
    readers_gone: bool,
    /// The script stage has ended (after the pipeline closed its input).
    stage_done: bool,
    /// The watermark of the last chunk the script stage handed back: `u64::MAX` once it has
    /// handed back the end of the stream.
    staged_watermark: u64,
    /// Spare event buffers (from chunks the frontend gave back).
    spare: Vec<Vec<Event>>,
    argv_window: (Instant, u32),
    /// Execs the exec watcher had not filed when they came out: taken when it does.
    late_execs: VecDeque<ExecSeen>,
    /// Orphans whose new parent is to be read, with when they were found.
    orphans: Vec<(Orphan, Instant)>,
    orphan_window: (Instant, u32),
    /// The `/proc` snapshot being read: the model learns it before the first chunk.
    seed: Option<Receiver<Vec<SeedProcess>>>,
    /// When the snapshot started being read (see [`SEED_HOLD`]).
    seed_since: Instant,
    /// Chunks out of the ordering stage, waiting for the snapshot.
    held: VecDeque<Chunk>,
    held_events: usize,
    /// The symbolize step, when samples are named.
    symbolize: Option<Symbolize>,
    /// The unwind step, with `--call-graph dwarf`.
    unwind: Option<crate::unwinding::Unwind>,
    /// What the symbolizer said, for the frontend to show once, and all of it (bounded) for
    /// a frontend that shows it again at the end (the TUI).
    notes: Vec<String>,
    said: Vec<String>,
    /// Consumers beside the frontend.
    taps: Vec<Box<dyn Tap>>,
}

impl Pipeline {
    /// A pipeline over the readers' channel `rx` for `cpus`. Reads `/proc` now (what existed
    /// before the events were enabled; call it after they are): the model's first update.
    pub fn new(rx: Receiver<Batch>, cpus: &[u32], opts: PipelineOptions) -> Pipeline {
        let mut model = ProcessModel::new();
        model.collect_execs(opts.argv);
        model.collect_orphans(opts.orphans && opts.model);
        let seed = opts.seed.clone().filter(|_| opts.model).and_then(|what| {
            // Read /proc on a thread of its own: on a busy machine it can take a while, and
            // the readers' batches must keep being taken meanwhile.
            let (tx, rx) = bounded(1);
            let (root, opts2) = (opts.proc_root.clone(), what.clone());
            let spawned = std::thread::Builder::new()
                .name("perfwatch-seed".into())
                .spawn(move || {
                    let _ = tx.send(proc::snapshot(&root, &opts2));
                });
            match spawned {
                Ok(_) => Some(rx),
                Err(_) => {
                    model.seed(proc::snapshot(&opts.proc_root, &what));
                    None
                }
            }
        });
        let symbolize = opts
            .symbols
            .clone()
            .filter(|_| opts.model)
            .map(|c| Symbolize::new(c).returns_by_address(opts.perf_names));
        let unwind = opts
            .unwind
            .clone()
            .filter(|_| opts.model)
            .map(|(max, shared)| {
                let unwind = crate::unwinding::Unwind::new(
                    crate::unwind::Config::default(),
                    max,
                    Some(shared),
                );
                unwind.callers_less_one(opts.perf_names)
            });
        Pipeline {
            own_helpers: Default::default(),
            symbolize,
            unwind,
            notes: Vec::new(),
            said: Vec::new(),
            taps: Vec::new(),
            rx,
            no_batches: never(),
            order: OrderingStage::new(cpus, opts.max_reorder),
            model: ModelHandle::new(model),
            opts,
            stage: None,
            no_chunks: never(),
            to_stage: VecDeque::new(),
            out: VecDeque::new(),
            readers_gone: false,
            stage_done: false,
            staged_watermark: 0,
            spare: Vec::new(),
            argv_window: (Instant::now(), 0),
            late_execs: VecDeque::new(),
            orphans: Vec::new(),
            orphan_window: (Instant::now(), 0),
            seed,
            seed_since: Instant::now(),
            held: VecDeque::new(),
            held_events: 0,
        }
    }

    /// Add a consumer beside the frontend.
    pub(crate) fn with_tap(mut self, tap: Box<dyn Tap>) -> Pipeline {
        self.taps.push(tap);
        self
    }

    /// Put the script stage between the model and the frontend.
    pub fn with_stage(mut self, link: StageLink) -> Pipeline {
        self.stage = Some(link);
        self
    }

    /// What the symbolizer had to say since the last call (a binary it could not read,
    /// kernel symbols hidden, ...): each said once, escaped.
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    /// Everything the symbolizer said during the run (the first [`MAX_NOTES`]).
    pub(crate) fn all_notes(&self) -> &[String] {
        &self.said
    }

    /// The model, for readers (the frontend, the script module, the symbolizer).
    pub fn model(&self) -> &ModelHandle {
        &self.model
    }

    /// What the frontend's `select!` waits on for batches (`never` once the readers are
    /// gone, or while the script stage is too far behind to take more).
    pub fn batches(&self) -> &Receiver<Batch> {
        if self.readers_gone || self.to_stage.len() >= STAGE_BACKLOG {
            &self.no_batches
        } else {
            &self.rx
        }
    }

    /// What the frontend's `select!` waits on for chunks the script stage hands back
    /// (`never` without scripts).
    pub(crate) fn staged(&self) -> &Receiver<Chunk> {
        match &self.stage {
            Some(l) if !self.stage_done => &l.from,
            _ => &self.no_chunks,
        }
    }

    /// A batch (or the channel's end) from [`Pipeline::batches`]; queued ones are taken
    /// with it.
    pub fn take(&mut self, msg: Result<Batch, RecvError>) {
        self.poll_seed(false);
        match msg {
            Ok(b) => {
                // Binaries start being read as their MMAP2 records arrive, before their
                // samples leave the ordering window.
                if let Some(s) = &mut self.symbolize {
                    s.prefetch(&b.events);
                }
                let spare = self.order.push(b);
                self.give(spare);
                let more = if self.opts.exact_order {
                    0
                } else {
                    BATCHES_PER_TURN
                };
                for _ in 0..more {
                    let Ok(b) = self.rx.try_recv() else { break };
                    if let Some(s) = &mut self.symbolize {
                        s.prefetch(&b.events);
                    }
                    let spare = self.order.push(b);
                    self.give(spare);
                }
                self.order_ready();
            }
            Err(_) => self.readers_ended(),
        }
    }

    /// A chunk (or the end) from [`Pipeline::staged`].
    pub(crate) fn take_staged(&mut self, msg: Result<Chunk, RecvError>) {
        match msg {
            Ok(c) => {
                self.staged_watermark = self.staged_watermark.max(c.watermark);
                self.out.push_back(c);
            }
            Err(_) => self.stage_done = true,
        }
    }

    /// The next chunk for the frontend, in order.
    pub fn next_chunk(&mut self) -> Option<Chunk> {
        self.poll_seed(false);
        self.feed_stage();
        self.out.pop_front()
    }

    /// Apply the `/proc` snapshot once it has been read (or, with `wait`, wait for it), then
    /// the chunks that waited for it.
    fn poll_seed(&mut self, wait: bool) {
        let Some(rx) = &self.seed else { return };
        let got = if wait {
            rx.recv_timeout(self.opts.seed_wait).ok()
        } else {
            match rx.try_recv() {
                Ok(s) => Some(s),
                Err(crossbeam_channel::TryRecvError::Empty) => return,
                Err(crossbeam_channel::TryRecvError::Disconnected) => None,
            }
        };
        self.seed = None;
        for t in &mut self.taps {
            t.seeded(got.as_deref().unwrap_or_default());
        }
        if let Some(snapshot) = got {
            self.model.write().seed(snapshot);
        }
        self.held_events = 0;
        while let Some(c) = self.held.pop_front() {
            self.publish(c);
        }
    }

    /// Give a chunk's buffer back for reuse (optional).
    pub fn recycle(&mut self, mut events: Vec<Event>) {
        if self.spare.len() < 4 && events.capacity() <= 1 << 16 {
            events.clear();
            self.spare.push(events);
        } else {
            self.give(events);
        }
    }

    /// A buffer for a chunk: a spare one, else one from the readers' pool.
    fn buffer(&mut self) -> Vec<Event> {
        match (self.spare.pop(), &self.opts.pool) {
            (Some(v), _) => v,
            (None, Some(pool)) => pool.take(0),
            (None, None) => Vec::new(),
        }
    }

    /// A buffer goes back to the readers.
    fn give(&self, events: Vec<Event>) {
        if let Some(pool) = &self.opts.pool {
            pool.give(events);
        }
    }

    /// True once every reader has ended and every event has gone out to the frontend (with
    /// scripts: the stage has handed back the end of the stream).
    pub fn all_ended(&self) -> bool {
        self.order.all_ended()
            && self.order.is_empty()
            && self.to_stage.is_empty()
            && self.out.is_empty()
            && (self.stage.is_none() || self.stage_done || self.staged_watermark == u64::MAX)
    }

    /// Events that arrived after newer ones had gone out (a reader that lagged behind the
    /// ordering window).
    pub fn late(&self) -> u64 {
        self.order.late()
    }

    /// At shutdown, once the readers were asked to stop: take their last batches (for at
    /// most `grace`), let out everything held (naming its samples without waiting for a
    /// binary's first read past the grace), and wait (within the same grace) for the
    /// script stage to hand back what it holds. The chunks are then in [`Pipeline::next`].
    pub fn finish(&mut self, grace: Duration) {
        let deadline = Instant::now() + grace;
        self.finish_readers(grace);
        self.finish_stage(deadline);
    }

    /// The readers' last batches (for at most `grace`), and everything held let out.
    fn finish_readers(&mut self, grace: Duration) {
        let deadline = Instant::now() + grace;
        // Binaries not read yet do not hold the stop up past the grace: their samples are
        // [unknown] (said, as any read that outlasts its wait).
        if let Some(s) = &mut self.symbolize {
            s.set_load_deadline(Some(deadline));
        }
        self.poll_seed(true);
        if !self.readers_gone {
            collect_last_batches(
                &self.rx,
                grace,
                &mut self.order,
                OrderingStage::all_ended,
                |o, b| drop(o.push(b)),
            );
        }
        self.flush();
    }

    /// Hand the script stage the rest, then close its input, and take what it hands back
    /// until it ends or `deadline`.
    fn finish_stage(&mut self, deadline: Instant) {
        if let Some(StageLink { to, from, .. }) = self.stage.take() {
            self.finish_stage_with(Some(to), &from, deadline);
        }
    }

    /// [`Pipeline::finish_stage`] over the link's ends (`to` is `None` once closed).
    fn finish_stage_with(
        &mut self,
        to: Option<Sender<Chunk>>,
        from: &Receiver<Chunk>,
        deadline: Instant,
    ) {
        if let Some(to) = to {
            while let Some(c) = self.to_stage.pop_front() {
                let left = deadline.saturating_duration_since(Instant::now());
                if to.send_timeout(c, left).is_err() {
                    break;
                }
            }
        }
        while !self.stage_done {
            let left = deadline.saturating_duration_since(Instant::now());
            match from.recv_timeout(left.max(Duration::from_millis(1))) {
                Ok(c) => self.take_staged(Ok(c)),
                Err(_) => self.stage_done = true,
            }
            if left.is_zero() {
                break;
            }
        }
    }

    fn readers_ended(&mut self) {
        // No more batches can come, whatever the last ones said.
        self.readers_gone = true;
        self.order.end_all();
        self.flush();
    }

    /// Tell the ordering stage the stop time once it is decided.
    fn follow_stop(&mut self) {
        if let Some(st) = &self.opts.stop_time {
            self.order.follow(st);
        }
    }

    /// Let out everything the ordering stage holds.
    fn flush(&mut self) {
        self.follow_stop();
        let mut events = self.buffer();
        let before = self.order.watermark();
        let wm = self.order.flush(&mut events);
        if !events.is_empty() || wm != before {
            self.publish(Chunk {
                events,
                watermark: wm,
            });
        }
    }

    fn order_ready(&mut self) {
        self.follow_stop();
        let mut events = self.buffer();
        let before = self.order.watermark();
        let wm = self.order.pop_ready(&mut events);
        if events.is_empty() && wm == before {
            self.spare.push(events);
            return;
        }
        self.publish(Chunk {
            events,
            watermark: wm,
        });
    }

    /// A chunk leaves the ordering stage: the model learns from it, then it goes on. Until
    /// the `/proc` snapshot is in, chunks wait (within a bound), so that the model knows what
    /// existed before the stream says anything.
    fn publish(&mut self, mut chunk: Chunk) {
        if let Some(late) = &self.opts.late {
            late.store(self.order.late(), Ordering::Relaxed);
        }
        if let Some(st) = &self.opts.stop_time {
            st.set_after(self.order.after_stop());
        }
        if let Some(hide) = &self.opts.hide {
            let before = chunk.events.len();
            let helpers = &mut self.own_helpers;
            chunk.events.retain(|e| !hide.hides(e, helpers));
            let n = before - chunk.events.len();
            if n > 0 {
                hide.hidden.fetch_add(n as u64, Ordering::Relaxed);
            }
        }
        if !self.opts.model {
            return self.pass_on(chunk);
        }
        if self.seed.is_some() {
            self.held_events += chunk.events.len();
            self.held.push_back(chunk);
            if self.held_events > self.opts.max_reorder || self.seed_since.elapsed() > SEED_HOLD {
                // Too long: go on without it (it fills gaps when it comes).
                let rx = self.seed.take();
                self.held_events = 0;
                let held = std::mem::take(&mut self.held);
                for c in held {
                    self.publish(c);
                }
                self.seed = rx;
            }
            return;
        }
        let (execs, orphans) = {
            let mut m = self.model.write();
            let root = &self.opts.proc_root;
            m.apply_chunk(&chunk, |pid, tid| proc::task_alive(root, pid, tid));
            (m.take_execs(), m.take_orphans())
        };
        if !execs.is_empty() || !self.late_execs.is_empty() {
            self.read_argv(execs);
        }
        if !orphans.is_empty() || !self.orphans.is_empty() {
            self.follow_orphans(orphans);
        }
        if let Some(u) = &mut self.unwind {
            u.unwind(&mut chunk.events, &self.model.read());
            for n in u.take_notes() {
                if self.said.len() < MAX_NOTES {
                    self.said.push(n.clone());
                }
                self.notes.push(n);
            }
        }
        if let Some(sym) = &mut self.symbolize {
            sym.name(&mut chunk.events, &self.model.read());
            for n in sym.take_notes() {
                let n = n.to_string();
                if self.said.len() < MAX_NOTES {
                    self.said.push(n.clone());
                }
                self.notes.push(n);
            }
        }
        self.pass_on(chunk);
    }

    /// To the script stage, or to the frontend.
    fn pass_on(&mut self, chunk: Chunk) {
        if !self.taps.is_empty() {
            let m = self.model.read();
            for t in &mut self.taps {
                t.chunk(&chunk.events, &m);
            }
        }
        match &self.stage {
            Some(_) => {
                self.to_stage.push_back(chunk);
                self.feed_stage();
            }
            None => self.out.push_back(chunk),
        }
    }

    /// Command lines of the processes that exec'd: the exec watcher's, filed at the exec
    /// (see [`crate::perf::exec_watch`]); else read from `/proc` now, while the budget lasts
    /// (one the watcher files later still replaces it).
    fn read_argv(&mut self, execs: Vec<ExecSeen>) {
        let now = Instant::now();
        if now.duration_since(self.argv_window.0) >= Duration::from_secs(1) {
            self.argv_window = (now, 0);
        }
        let mut read: Vec<(u32, u64, Arc<CmdLine>)> = Vec::new();
        if let Some(table) = &self.opts.execs {
            let progress = table.progress();
            self.late_execs.retain(|e| match table.take(e.pid, e.time) {
                Some(argv) => {
                    read.push((e.pid, e.time, argv));
                    false
                }
                None => progress < e.time.saturating_add(EXEC_GRACE_NS),
            });
        }
        for e in execs {
            if let Some(table) = &self.opts.execs {
                if let Some(argv) = table.take(e.pid, e.time) {
                    read.push((e.pid, e.time, argv));
                    continue;
                }
                if self.late_execs.len() < MAX_LATE_EXECS {
                    self.late_execs.push_back(e);
                }
            }
            if self.argv_window.1 >= ARGV_PER_SECOND {
                continue;
            }
            self.argv_window.1 += 1;
            // Gone (or exec'd again) before it could be read: said as such.
            let argv = proc::read_cmdline_if(&self.opts.proc_root, e.pid, e.comm.as_bytes())
                .unwrap_or_else(CmdLine::gone);
            read.push((e.pid, e.time, argv.shared()));
        }
        if !read.is_empty() {
            let mut m = self.model.write();
            for (pid, time, argv) in read {
                m.set_argv(pid, time, argv);
            }
        }
    }

    /// The new parents of orphans, from `/proc` (the kernel re-parents them to the nearest
    /// subreaper, or the init of their pid namespace, and no record says so). One whose
    /// parent `/proc` does not show changed yet is looked at again on later chunks, for
    /// [`ORPHAN_WAIT`]; one that is gone is left to its exit record, which names its parent.
    fn follow_orphans(&mut self, found: Vec<Orphan>) {
        let now = Instant::now();
        if now.duration_since(self.orphan_window.0) >= Duration::from_secs(1) {
            self.orphan_window = (now, 0);
        }
        self.orphans.extend(found.into_iter().map(|o| (o, now)));
        let root = &self.opts.proc_root;
        let window = &mut self.orphan_window;
        let mut moved = Vec::new();
        self.orphans.retain(|(o, since)| {
            if window.1 >= ORPHANS_PER_SECOND {
                return now.duration_since(*since) < ORPHAN_WAIT * 2;
            }
            window.1 += 1;
            let comm = Some(o.comm.as_bytes()).filter(|c| !c.is_empty());
            match proc::read_ppid_if(root, o.pid, comm) {
                Some(pp) if pp != o.parent => {
                    moved.push((*o, pp));
                    false
                }
                Some(_) => now.duration_since(*since) < ORPHAN_WAIT,
                None => false,
            }
        });
        if !moved.is_empty() {
            let mut m = self.model.write();
            for (o, pp) in moved {
                m.reparent(&o, pp);
            }
        }
    }

    /// Pass waiting chunks to the script stage, without ever waiting for it.
    fn feed_stage(&mut self) {
        let Some(link) = &self.stage else { return };
        while let Some(c) = self.to_stage.pop_front() {
            match link.to.try_send(c) {
                Ok(()) => {}
                Err(TrySendError::Full(c)) => {
                    self.to_stage.push_front(c);
                    break;
                }
                Err(TrySendError::Disconnected(_)) => {
                    // The stage is gone (it failed): nothing more can be shown.
                    self.to_stage.clear();
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
