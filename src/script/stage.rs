//! The script stage between the pipeline (ordering stage and process model) and a frontend.
//!
//! ```text
//!  pipeline ─► pump ──(queue of WORK_BATCHES)──► Python worker ─┐
//!  (ordered      │  └─ bypass when the queue is full ─┐         │
//!   chunks)      └──────────── in-order release ◄─────┴─────────┘─► pipeline ─► frontend
//! ```
//!
//! The stage sees chunks already in time order (the pipeline orders the readers' batches
//! once) and hands them back in the same order: it never reorders. The pump is plain Rust and
//! never waits for Python, so the pipeline (and behind it the readers) never waits for a
//! script. Each chunk takes one of two paths:
//!
//! - **through the script**: queued for the worker, which runs the filters and `on_event`
//!   over it and hands it back, minus the events a filter dropped;
//! - **around it**: when the worker's queue is full (the script cannot keep up), the chunk is
//!   passed on unfiltered and its events are counted as dropped (`Stats::add_dropped`). In
//!   this stage "dropped" means *not seen by the script*: the events still reach the log and
//!   `--plain`, but no filter or `on_event` ran on them.
//!
//! The pump releases chunks in the order they arrived. A chunk that stays with the worker
//! longer than the stall limit (a handler that blocks or loops) is given up on so that the
//! rest keep flowing; if the worker hands it back later it is passed on at once (late), and
//! if it never does, its events are counted as dropped when the stage ends. Chunks without
//! events, which only move the watermark on, never wait for Python.

use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use crossbeam_channel::{
    Receiver, RecvTimeoutError, SendTimeoutError, Sender, TrySendError, bounded, never, select,
};

use super::ledger::Ledger;
use super::module::PaneSink;
use super::shared::{Done, Shared, Work, per_cpu};
use crate::event::Chunk;
use crate::event::Event;
use crate::pane::PaneMsg;
use crate::stats::Stats;

/// How long [`ScriptHandle::stop`] waits for a handler that is still in the call it was in
/// when the stop came, after interrupting it.
const STUCK_AT_STOP: Duration = Duration::from_millis(500);

/// At a natural end, how long a handler may go without finishing a single event before it
/// is taken for stuck (interrupted, and what it held counted, as at a signal). A slow
/// handler that keeps moving is waited for however long it takes.
const NATURAL_STUCK: Duration = Duration::from_secs(10);

/// Events of chunks queued together that the pump hands the worker as one, at most.
const MERGE_EVENTS: usize = 16 * 1024;

/// At a stop, how long the pump waits for the worker to hand back the batch it is in.
const HANDBACK_AT_STOP: Duration = Duration::from_millis(300);

/// Tunables of the stage; [`StageOptions::default`] is what the binary uses.
#[derive(Clone, Debug)]
pub struct StageOptions {
    /// How often `on_tick()` is called.
    pub tick: Duration,
    /// Chunks queued for the worker before new ones go around the script.
    pub work_batches: usize,
    /// Chunks the input and the output channels hold.
    pub out_batches: usize,
    /// How long a batch may stay with the worker before the batches behind it are released.
    pub stall: Duration,
    /// The same once the monitor is stopping; the worker is then also interrupted.
    pub stall_stopping: Duration,
    /// Pane messages queued before more are dropped.
    pub pane_messages: usize,
    /// `sys.argv[1:]` of scripts written for perf script (`--script-arg`).
    pub script_args: Vec<String>,
}

impl Default for StageOptions {
    fn default() -> StageOptions {
        StageOptions {
            tick: Duration::from_secs(1),
            work_batches: 64,
            out_batches: 1024,
            stall: Duration::from_secs(1),
            stall_stopping: Duration::from_millis(200),
            pane_messages: 4096,
            script_args: Vec::new(),
        }
    }
}

/// Loaded scripts, waiting for the event stream.
pub struct ScriptStage {
    shared: Arc<Shared>,
    opts: StageOptions,
    work_tx: Sender<Work>,
    work_rx: Receiver<Work>,
    results_rx: Receiver<Done>,
    pane_rx: Receiver<PaneMsg>,
    pane_dropped: Arc<AtomicU64>,
    worker: JoinHandle<()>,
    worker_done: Receiver<()>,
    loaded: super::worker::Loaded,
}

/// What the stage did, for the end-of-run report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StageReport {
    /// Events passed on without the script seeing them (its queue was full); also counted
    /// in the monitor's dropped counter.
    pub bypassed: u64,
    /// Events the worker never handed back (a handler still busy at the end); counted as
    /// dropped.
    pub stuck_events: u64,
    /// Pane messages lost because the frontend did not take them.
    pub pane_dropped: u64,
    /// The worker was still in Python when the wait ran out; perfwatch did not wait for it.
    pub worker_stuck: bool,
}

/// The running stage.
pub struct ScriptHandle {
    shared: Arc<Shared>,
    pump: Option<JoinHandle<PumpTotals>>,
    worker: Option<JoinHandle<()>>,
    worker_done: Receiver<()>,
    pane_dropped: Arc<AtomicU64>,
}

/// The display name of each script: its file name, made unique with `#2`, `#3` if needed.
pub fn script_names(paths: &[PathBuf]) -> Vec<String> {
    let mut names: Vec<String> = Vec::with_capacity(paths.len());
    for p in paths {
        let base = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| p.display().to_string());
        let mut name = base.clone();
        let mut k = 2;
        while names.contains(&name) {
            name = format!("{base}#{k}");
            k += 1;
        }
        names.push(name);
    }
    names
}

impl ScriptStage {
    /// Open, check (as root, the file and every directory above it: [`super::safety`]) and
    /// load the scripts at `paths`: what [`ScriptStage::load_opened`] does with scripts
    /// already opened.
    pub fn load(paths: &[PathBuf], opts: StageOptions) -> Result<ScriptStage> {
        let who = super::safety::Invoker::current();
        let scripts = paths
            .iter()
            .map(|p| super::safety::open_script(p, false, who))
            .collect::<Result<Vec<_>, _>>()?;
        ScriptStage::load_opened(scripts, opts)
    }

    /// Start the interpreter (isolated: [`super::interp`]), then on its own thread load every
    /// script in order from the source that was read when it was opened, and call their
    /// `trace_begin()`. Errors (syntax, import, a script with no handler, a failing
    /// `trace_begin`) come back here with the Python traceback, before any frontend starts.
    pub fn load_opened(
        scripts: Vec<super::safety::OpenedScript>,
        opts: StageOptions,
    ) -> Result<ScriptStage> {
        super::interp::init().map_err(|e| anyhow!(e))?;
        let paths: Vec<PathBuf> = scripts.iter().map(|s| s.path.clone()).collect();
        let paths = &paths[..];
        let names = Arc::new(script_names(paths));
        let shared = Arc::new(Shared::new());
        let (pane_tx, pane_rx) = bounded(opts.pane_messages.max(1));
        let pane_dropped = Arc::new(AtomicU64::new(0));
        let sink = Arc::new(PaneSink {
            tx: pane_tx,
            names: names.clone(),
            current: Arc::new(AtomicUsize::new(0)),
            dropped: pane_dropped.clone(),
        });
        let (work_tx, work_rx) = bounded::<Work>(opts.work_batches.max(1));
        let (results_tx, results_rx) = bounded(opts.work_batches.max(1) + 1);
        let (loaded_tx, loaded_rx) = bounded(1);
        let (done_tx, worker_done) = bounded::<()>(1);
        let worker = {
            let (names, shared, tick, work_rx) =
                (names.clone(), shared.clone(), opts.tick, work_rx.clone());
            let script_args = opts.script_args.clone();
            std::thread::Builder::new()
                .name("perfwatch-python".into())
                .spawn(move || {
                    super::worker::run(super::worker::WorkerArgs {
                        scripts,
                        names,
                        sink,
                        shared,
                        tick,
                        loaded: loaded_tx,
                        work: work_rx,
                        results: results_tx,
                        script_args,
                    });
                    drop(done_tx);
                })
                .context("cannot start the Python thread")?
        };
        let loaded = match loaded_rx.recv() {
            Ok(Ok(loaded)) => loaded,
            Ok(Err(e)) => {
                let _ = worker.join();
                return Err(anyhow!(e));
            }
            Err(_) => {
                let _ = worker.join();
                return Err(anyhow!("the Python interpreter failed to start"));
            }
        };
        Ok(ScriptStage {
            shared,
            opts,
            work_tx,
            work_rx,
            results_rx,
            pane_rx,
            pane_dropped,
            worker,
            worker_done,
            loaded,
        })
    }

    /// A script is written for perf script (`perf script -s`): in `--plain`/`--json` its
    /// output is what stdout carries, as perf script's is.
    pub fn perf_style(&self) -> bool {
        self.loaded.perf_style
    }

    /// The tracepoints the perf scripts' `SUBSYS__EVENT` handlers are for (`SUBSYS:EVENT`).
    pub fn perf_tracepoints(&self) -> &[String] {
        &self.loaded.tracepoints
    }

    /// Put the stage between the pipeline and a frontend: read ordered chunks from `input`,
    /// return the same chunks, filtered, in the same order, and the pane messages. Drops are
    /// counted in `stats`.
    pub fn start(
        self,
        input: Receiver<Chunk>,
        stats: Arc<Stats>,
    ) -> Result<(Receiver<Chunk>, Receiver<PaneMsg>, ScriptHandle)> {
        let (out_tx, out_rx) = bounded(self.opts.out_batches.max(1));
        let _ = self.shared.stats.set(stats.clone());
        let handle = ScriptHandle {
            shared: self.shared.clone(),
            pump: None,
            worker: None,
            worker_done: self.worker_done.clone(),
            pane_dropped: self.pane_dropped.clone(),
        };
        let pane_rx = self.pane_rx.clone();
        let worker = self.worker;
        let pump = Pump::new(
            PumpParts {
                work_tx: self.work_tx,
                work_rx: self.work_rx,
                results: self.results_rx,
                shared: self.shared,
                opts: self.opts,
            },
            input,
            out_tx,
            stats,
        );
        let pump = std::thread::Builder::new()
            .name("perfwatch-script-pump".into())
            .spawn(move || pump.run())
            .context("cannot start the script stage")?;
        Ok((
            out_rx,
            pane_rx,
            ScriptHandle {
                pump: Some(pump),
                worker: Some(worker),
                ..handle
            },
        ))
    }
}

/// What the pump takes over from the loaded stage.
struct PumpParts {
    work_tx: Sender<Work>,
    work_rx: Receiver<Work>,
    results: Receiver<Done>,
    shared: Arc<Shared>,
    opts: StageOptions,
}

impl ScriptHandle {
    /// Where the pipeline reads how far the scripts are, and says that the run ended by
    /// itself.
    pub fn progress(&self) -> Arc<crate::pipeline::StageProgress> {
        self.shared.progress.clone()
    }

    /// Stop the stage: interrupt a busy handler, let the worker run `trace_end()`, and wait
    /// for it at most `wait`; a worker still stuck after that is left behind (the process is
    /// about to exit), so that quitting is always prompt.
    pub fn stop(mut self, wait: Duration) -> StageReport {
        self.shared.stop.store(true, Ordering::Release);
        if self.shared.busy_for().is_some() {
            self.shared.interrupt();
        }
        let totals = self
            .pump
            .take()
            .and_then(|p| p.join().ok())
            .unwrap_or_default();
        let started = Instant::now();
        let deadline = started + wait;
        let busy_at_stop = self.shared.busy_since.load(Ordering::Acquire);
        let mut finished = false;
        while !finished {
            // Still in the very call that was running at the stop, after an interrupt: it
            // is stuck outside Python's reach (in C, or a sleep). Do not wait for trace_end.
            if busy_at_stop != 0
                && self.shared.busy_since.load(Ordering::Acquire) == busy_at_stop
                && started.elapsed() >= STUCK_AT_STOP
            {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self
                .worker_done
                .recv_timeout(left.min(Duration::from_millis(100)))
            {
                Err(RecvTimeoutError::Disconnected) => finished = true,
                _ if left.is_zero() => break,
                _ => {
                    if self.shared.busy_for().is_some() {
                        self.shared.interrupt();
                    }
                }
            }
        }
        if finished {
            if let Some(w) = self.worker.take() {
                let _ = w.join();
            }
        }
        StageReport {
            bypassed: totals.bypassed,
            stuck_events: totals.stuck,
            pane_dropped: self.pane_dropped.load(Ordering::Relaxed),
            worker_stuck: !finished,
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct PumpTotals {
    bypassed: u64,
    stuck: u64,
}

enum Slot {
    /// A chunk ready for the frontend.
    Ready(Chunk),
    /// Events the worker has (their counts are in the pump's ledger), and the watermark of
    /// the chunk they came in.
    Script {
        seq: u64,
        since: Instant,
        watermark: u64,
    },
}

/// Why events are counted as dropped.
#[derive(Clone, Copy)]
enum Drop {
    /// Passed on without the script seeing them.
    Bypassed,
    /// Still with the worker when the stage ended.
    Stuck,
}

struct Pump {
    input: Receiver<Chunk>,
    work_tx: Sender<Work>,
    /// A second handle on the worker's queue, to take back what a stuck worker has not
    /// started on.
    work_rx: Receiver<Work>,
    results: Receiver<Done>,
    out: Sender<Chunk>,
    stats: Arc<Stats>,
    shared: Arc<Shared>,
    opts: StageOptions,
    /// Work in arrival order, waiting to be released.
    slots: VecDeque<Slot>,
    /// Work given up on while the worker had it.
    abandoned: HashSet<u64>,
    /// The batches the worker has, each counted as dropped at most once.
    ledger: Ledger,
    seq: u64,
    totals: PumpTotals,
    /// The monitor is stopping (the stream is complete, or the input closed).
    draining: bool,
    /// The watermark of the last chunk passed on (they never go back).
    watermark: u64,
    /// The scripts' progress count when last looked at, and when it last moved.
    last_done: u64,
    moved_at: Instant,
}

impl Pump {
    fn new(
        stage: PumpParts,
        input: Receiver<Chunk>,
        out: Sender<Chunk>,
        stats: Arc<Stats>,
    ) -> Pump {
        Pump {
            input,
            work_tx: stage.work_tx,
            work_rx: stage.work_rx,
            results: stage.results,
            out,
            stats,
            shared: stage.shared,
            opts: stage.opts,
            slots: VecDeque::new(),
            abandoned: HashSet::new(),
            ledger: Ledger::default(),
            seq: 0,
            totals: PumpTotals::default(),
            draining: false,
            watermark: 0,
            last_done: 0,
            moved_at: Instant::now(),
        }
    }

    /// Note whether the scripts moved on since the last look.
    fn watch_progress(&mut self) {
        let done = self.shared.progress.done.load(Ordering::Relaxed);
        if done != self.last_done || self.shared.busy_for().is_none() {
            self.last_done = done;
            self.moved_at = Instant::now();
        }
    }

    /// The run ended by itself and nothing cut the end short: every event goes to the
    /// scripts, waiting for room in their queue.
    fn natural_end(&self) -> bool {
        self.shared.progress.natural_end() && !self.shared.stop_requested()
    }

    /// Take what the worker handed back and pass on what is ready, waiting at most `wait`
    /// for something to come back. False when the worker is gone.
    fn settle(&mut self, wait: Duration) -> bool {
        let alive = match self.results.recv_timeout(wait) {
            Ok((seq, events, unseen)) => {
                self.returned(seq, events, &unseen);
                while let Ok((seq, events, unseen)) = self.results.try_recv() {
                    self.returned(seq, events, &unseen);
                }
                true
            }
            Err(RecvTimeoutError::Timeout) => true,
            Err(RecvTimeoutError::Disconnected) => false,
        };
        self.watch_progress();
        self.release();
        alive
    }

    fn run(mut self) -> PumpTotals {
        let mut input_open = true;
        let mut results_open = true;
        loop {
            let input = if input_open { &self.input } else { &never() };
            let results = if results_open {
                &self.results
            } else {
                &never()
            };
            // Wake up to check for a stuck worker only while it holds work.
            let held = self.slots.iter().any(|s| matches!(s, Slot::Script { .. }));
            let wake = Duration::from_millis(if held { 20 } else { 100 });
            select! {
                recv(input) -> m => match m {
                    Ok(c) => {
                        // Chunks queued behind it go to the worker with it, as one (in
                        // order): a recording's rounds are small, and each chunk costs a
                        // hand-off to the worker and back.
                        let mut cur = c;
                        for next in self.input.try_iter().take(64).collect::<Vec<_>>() {
                            if cur.events.len() + next.events.len() <= MERGE_EVENTS {
                                cur.events.extend(next.events);
                                cur.watermark = cur.watermark.max(next.watermark);
                            } else {
                                self.admit(std::mem::replace(&mut cur, next));
                            }
                        }
                        self.admit(cur);
                    }
                    Err(_) => {
                        input_open = false;
                        self.draining = true;
                    }
                },
                recv(results) -> r => match r {
                    Ok((seq, events, unseen)) => self.returned(seq, events, &unseen),
                    Err(_) => results_open = false,
                },
                default(wake) => {}
            }
            self.watch_progress();
            if !results_open {
                // The worker is gone: nothing it held will come back.
                self.give_up_all();
            }
            self.release();
            if self.shared.stop_requested() || (!input_open && self.slots.is_empty()) {
                break;
            }
        }
        if self.ledger.outstanding() > 0 {
            // The worker notices a stop (or an interrupt) at its next event and hands its batch back with
            // what it did not see: wait a moment for that, so that what the script did see
            // is not counted as dropped; take back what it has not started on.
            self.reclaim_queued();
            let until = Instant::now() + HANDBACK_AT_STOP;
            while self.ledger.outstanding() > 0 && Instant::now() < until {
                if let Ok((seq, events, unseen)) =
                    self.results.recv_timeout(Duration::from_millis(10))
                {
                    self.returned(seq, events, &unseen);
                }
            }
        }
        // What the worker handed back meanwhile is settled as returned (the events it saw
        // are not dropped)...
        while let Ok((seq, events, unseen)) = self.results.try_recv() {
            self.returned(seq, events, &unseen);
        }
        for s in std::mem::take(&mut self.slots) {
            match s {
                Slot::Ready(c) => self.forward(c),
                Slot::Script { .. } => {}
            }
        }
        // ...and whatever it still holds will not be shown: counted, once.
        self.abandoned.clear();
        let stuck = self.ledger.settle();
        self.count(&stuck, Drop::Stuck);
        self.totals
    }

    /// Count events as dropped (not seen by the script), per CPU.
    fn count(&mut self, counts: &[(u32, u64)], why: Drop) {
        for &(cpu, n) in counts {
            self.stats.add_dropped(cpu, n);
            match why {
                Drop::Bypassed => self.totals.bypassed += n,
                Drop::Stuck => self.totals.stuck += n,
            }
        }
    }

    /// A chunk from the pipeline: to the worker, or around it when the worker cannot take
    /// it; a chunk without events only waits for those before it.
    fn admit(&mut self, chunk: Chunk) {
        self.draining |= chunk.watermark == u64::MAX;
        if chunk.events.is_empty() {
            self.slots.push_back(Slot::Ready(chunk));
            return;
        }
        self.seq += 1;
        let counts = per_cpu(&chunk.events);
        let Chunk { events, watermark } = chunk;
        self.shared
            .progress
            .taken
            .fetch_add(events.len() as u64, Ordering::Relaxed);
        let mut work = (self.seq, events);
        let sent = loop {
            // A worker stuck in one call gets nothing more to hold hostage.
            let sent = if self.worker_stuck() {
                Err(TrySendError::Full(work))
            } else {
                self.work_tx.try_send(work)
            };
            match sent {
                // At a natural end the scripts get everything: wait for room, taking back
                // what they are done with meanwhile.
                Err(TrySendError::Full(back)) if self.natural_end() => {
                    if !self.settle(Duration::from_millis(20)) {
                        // The worker is gone: nothing will take it.
                        break Err(TrySendError::Disconnected(back));
                    }
                    work = back;
                }
                sent => break sent,
            }
        };
        match sent {
            Ok(()) => {
                self.ledger.sent(self.seq, counts);
                self.slots.push_back(Slot::Script {
                    seq: self.seq,
                    since: Instant::now(),
                    watermark,
                });
            }
            Err(TrySendError::Full((_, events)) | TrySendError::Disconnected((_, events))) => {
                self.bypass(&events);
                self.slots
                    .push_back(Slot::Ready(Chunk { events, watermark }));
            }
        }
    }

    fn bypass(&mut self, events: &[Event]) {
        self.shared.done(events.len() as u64);
        self.count(&per_cpu(events), Drop::Bypassed);
    }

    fn stall(&self) -> Duration {
        if self.draining {
            self.opts.stall_stopping
        } else {
            self.opts.stall
        }
    }

    /// The worker has been in one Python call stretch for longer than the stall limit; at a
    /// natural end, it has not finished a single event for [`NATURAL_STUCK`].
    fn worker_stuck(&self) -> bool {
        if self.natural_end() {
            return self.shared.busy_for().is_some_and(|b| b >= NATURAL_STUCK)
                && self.moved_at.elapsed() >= NATURAL_STUCK;
        }
        self.shared.busy_for().is_some_and(|b| b >= self.stall())
    }

    /// Take back the work the worker has not started on, and pass it on unfiltered.
    fn reclaim_queued(&mut self) {
        while let Ok((seq, events)) = self.work_rx.try_recv() {
            self.shared.done(events.len() as u64);
            let unseen = self.ledger.taken_back(seq);
            self.count(&unseen, Drop::Bypassed);
            self.complete(seq, events);
        }
    }

    /// The worker handed a batch back: count what it did not run the script on (once), and
    /// put the events in their place.
    fn returned(&mut self, seq: u64, events: Vec<Event>, unseen: &[(u32, u64)]) {
        let unseen = self.ledger.returned(seq, unseen);
        self.count(&unseen, Drop::Bypassed);
        self.complete(seq, events);
    }

    fn complete(&mut self, seq: u64, events: Vec<Event>) {
        if self.abandoned.remove(&seq) {
            // Late: the chunks behind it have gone on already.
            let watermark = self.watermark;
            self.forward(Chunk { events, watermark });
            return;
        }
        for s in self.slots.iter_mut() {
            if let Slot::Script {
                seq: q, watermark, ..
            } = s
            {
                if *q == seq {
                    let watermark = *watermark;
                    *s = Slot::Ready(Chunk { events, watermark });
                    return;
                }
            }
        }
    }

    fn give_up_all(&mut self) {
        let mut lost = Vec::new();
        for s in self.slots.iter_mut() {
            if let Slot::Script { seq, watermark, .. } = s {
                lost.push(*seq);
                let watermark = *watermark;
                *s = Slot::Ready(Chunk {
                    events: Vec::new(),
                    watermark,
                });
            }
        }
        for seq in lost {
            let counts = self.ledger.lost(seq);
            self.count(&counts, Drop::Stuck);
        }
    }

    /// Pass on everything at the front that is ready; give up on work the worker has held
    /// too long (stuck in one call) when more waits behind it, or when stopping.
    fn release(&mut self) {
        let stall = self.stall();
        while let Some(front) = self.slots.front() {
            match front {
                Slot::Ready(_) => {
                    if let Some(Slot::Ready(c)) = self.slots.pop_front() {
                        self.forward(c);
                    }
                }
                Slot::Script { since, .. } => {
                    // Give up only on a worker stuck in one call (or far behind): a slow
                    // but moving script keeps its order.
                    let held = since.elapsed();
                    let stuck = self.worker_stuck();
                    if self.natural_end() && !stuck {
                        // A natural end waits for a script that keeps moving.
                        break;
                    }
                    if self.draining && stuck {
                        // Stopping: interrupt the handler; it then hands its work back
                        // (the rest unfiltered) in time to keep its place.
                        self.shared.interrupt();
                    }
                    let grace = if self.draining { 3 } else { 1 };
                    if held < stall * grace
                        || !(stuck || held >= stall * 5)
                        || (self.slots.len() == 1 && !self.draining)
                    {
                        break;
                    }
                    if let Some(Slot::Script { seq, .. }) = self.slots.pop_front() {
                        self.abandoned.insert(seq);
                    }
                    self.reclaim_queued();
                }
            }
        }
    }

    /// Send to the frontend, waiting while it is busy, but not past a stop. Watermarks
    /// never go back (a chunk handed back late carries the last one).
    fn forward(&mut self, mut c: Chunk) {
        c.watermark = c.watermark.max(self.watermark);
        self.watermark = c.watermark;
        loop {
            match self.out.send_timeout(c, Duration::from_millis(50)) {
                Ok(()) | Err(SendTimeoutError::Disconnected(_)) => return,
                Err(SendTimeoutError::Timeout(back)) => {
                    if self.shared.stop_requested() {
                        return;
                    }
                    c = back;
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "stage_tests.rs"]
mod tests;
