//! The TUI's state: the panes' data ([`Panes`], live, and a copy held still while paused)
//! and the view state (focus, scrolls, selections, narrowing, the filter being edited),
//! updated by plain functions, drawn by [`super::ui`].
//!
//! Nothing here touches a terminal, a clock or the kernel: the loop hands in ordered chunks
//! (from the [`crate::pipeline::Pipeline`]), keys and the monotonic time of each tick, so that
//! tests can drive it with hand-made events and assert on rates, the task stream, filtering,
//! history bounds and scrolling. Names, parents and lifetimes come from the process model the
//! pipeline keeps, looked up as of each event's time.

use std::collections::VecDeque;

use rustc_hash::FxHashSet;

use super::input::{Action, map_key};
use super::layout::Drawn;
pub use super::layout::Pane;
use super::log::{Log, LogView};
pub(crate) use super::panes::Panes;
pub use super::rates::RateUnit;
use super::rates::is_dummy;
pub(crate) use super::task_rows::{StreamView, TaskRow};
use super::top_symbols::SymbolsView;
pub(crate) use super::top_tasks::TopView;
use super::tree::{TreeRow, TreeView};
use crate::event::Chunk;
use crate::event::{Event, EventKind};
use crate::filter::Filter;
use crate::monitor::MonitorInfo;
use crate::pane::PaneMsg;
pub use crate::process::Comm;
use crate::process::{ModelHandle, ProcessModel};
use crate::stats::Totals;

mod keys;
#[cfg(test)]
pub(crate) mod tests;

/// Log entries kept by default (`--history`).
pub(crate) const DEFAULT_HISTORY: usize = 10_000;
const NS: u64 = 1_000_000_000;

/// What the app shows about the monitor itself.
#[derive(Clone, Debug)]
pub struct AppConfig {
    /// What is watched, as the header says it ("system-wide", "pid 42", "CPUs 0-1").
    pub target: String,
    /// The CPUs watched.
    pub cpus: Vec<u32>,
    /// The events being watched (for the filter's tracepoint field names).
    pub events: Vec<&'static crate::event::EventDesc>,
    /// The event in use, as the header names it.
    pub event: String,
    /// The fallback note ("cycles not supported, using cpu-clock").
    pub fallback: Option<String>,
    /// What the per-CPU rates count.
    pub unit: RateUnit,
    /// Log entries kept.
    pub history: usize,
    /// CLOCK_MONOTONIC ns when monitoring started.
    pub start_ns: u64,
}

impl AppConfig {
    /// `event` watched system-wide on `cpus` since `start_ns`, its rates in `unit`; no
    /// fallback, the default history, no tracepoint.
    pub fn system_wide(event: &str, unit: RateUnit, cpus: Vec<u32>, start_ns: u64) -> AppConfig {
        AppConfig {
            event: event.into(),
            fallback: None,
            unit,
            target: "system-wide".into(),
            cpus,
            history: DEFAULT_HISTORY,
            start_ns,
            events: Vec::new(),
        }
    }

    /// Whether a watched event takes samples (true when the events are not known).
    pub(crate) fn samples(&self) -> bool {
        self.events.is_empty() || self.events.iter().any(|d| !is_dummy(d))
    }

    /// The formats of the tracepoints being watched (what the filter's field keys name).
    pub(crate) fn formats(&self) -> Vec<&crate::event::tracepoint::Format> {
        self.events
            .iter()
            .filter_map(|d| d.format.as_ref())
            .collect()
    }
}

impl AppConfig {
    /// A recording replayed (`-i FILE`): the header says what the file says about itself;
    /// the rates are of its main event (the first that samples); `start_ns` is its first
    /// sample's time (0 until a pipe's first record says it).
    pub fn replay(
        info: &crate::record_file::RecordingInfo,
        history: usize,
        start_ns: u64,
    ) -> AppConfig {
        let main = info
            .descs
            .iter()
            .find(|d| !is_dummy(d))
            .or(info.descs.first());
        let unit = match main {
            Some(d) if is_dummy(d) || d.format.is_some() => RateUnit::Records,
            Some(d) => super::rates::unit_of(d),
            None => RateUnit::Records,
        };
        AppConfig {
            event: main.map_or_else(|| "?".into(), |d| crate::text::escape(d.name.as_bytes())),
            fallback: None,
            unit,
            target: format!("recording {}", info.input.display()),
            cpus: info.cpus.clone(),
            history,
            start_ns,
            events: info.descs.clone(),
        }
    }

    pub(crate) fn from_info(info: &MonitorInfo, history: usize, start_ns: u64) -> AppConfig {
        let unit = if info.event.is_clock() {
            RateUnit::Utilisation
        } else if info.event.is_dummy() || info.event.is_tracepoint() {
            RateUnit::Records
        } else {
            RateUnit::Events
        };
        AppConfig {
            event: info.event.name.clone(),
            // Short: the status bar has one line; the reason is in the notes printed at exit.
            fallback: info
                .fallback
                .as_ref()
                .map(|f| format!("{} not supported, using {}", f.requested, f.used)),
            unit,
            target: info.target.clone(),
            cpus: info.cpus.clone(),
            history,
            start_ns,
            events: info.descs.clone(),
        }
    }
}

/// What the views are narrowed to (Enter on a task).
#[derive(Clone, Debug)]
pub struct Narrow {
    pub pid: u32,
    /// It and its children (and theirs), growing as they fork.
    pub pids: FxHashSet<u32>,
}

impl Narrow {
    /// The set the views select by (None: not narrowed). Of the field, not of the app, so
    /// that a pane of the app can be borrowed mutably beside it.
    pub(crate) fn pids_of(narrow: &Option<Narrow>) -> super::log::Narrowed<'_> {
        narrow.as_ref().map(|n| &n.pids)
    }
}

/// The filter being edited (`/`).
#[derive(Clone, Debug)]
pub(crate) struct FilterEdit {
    pub text: String,
    /// The parse error of `text`, shown under it.
    pub error: Option<String>,
    /// The filter in force before editing: restored by Esc.
    before: Filter,
}

/// The live log and, while paused, the held one: what a change of the log's selection
/// (filter, samples, narrowing) applies to, so that both show the same.
fn logs_mut<'a>(
    live: &'a mut Panes,
    frozen: &'a mut Option<Box<Panes>>,
) -> impl Iterator<Item = &'a mut Log> {
    std::iter::once(&mut live.log).chain(frozen.as_deref_mut().map(|p| &mut p.log))
}

/// The whole state of the TUI: the panes' data (live, and a copy held still while paused)
/// and the view state, one whether paused or not.
pub struct App {
    pub(crate) cfg: AppConfig,
    /// The process model (written by the pipeline; the app only reads it).
    pub(super) model: ModelHandle,
    /// The panes' data, fed by the pipeline whether paused or not.
    pub(crate) live: Panes,
    /// While paused: the panes' data as it was at the pause (what the panes show). Keys act
    /// on the view state as ever; the live data goes on underneath (the status bar shows
    /// its counters) and is shown again on resume.
    frozen: Option<Box<Panes>>,
    /// `--folded FILE`: the folded stacks, fed in time order.
    folding: Option<crate::folded::Folding>,
    /// The model's count of re-parented orphans when the narrowed set last followed it.
    reparents: u64,
    /// How Top tasks is shown (selection, `H`, `s`).
    pub(crate) top: TopView,
    pub(crate) paused: bool,
    pub(crate) show_help: bool,
    pub(crate) edit: Option<FilterEdit>,
    pub focus: Pane,
    /// How the log is shown (scrolled back, sideways).
    pub(crate) log: LogView,
    /// How the task stream is shown (scrolled back).
    pub(crate) stream: StreamView,
    /// Rows the CPU pane is scrolled down from the top.
    pub(crate) cpu_scroll: usize,
    /// Rows each script pane is scrolled down from the top, by script.
    pub(crate) script_scroll: Vec<usize>,
    /// How Top symbols is shown (span, order, zoom, selection, open callers).
    pub(crate) symbols: SymbolsView,
    /// `t`: the task pane shows the process tree rather than the stream.
    pub(crate) tree: bool,
    /// The tree's selection.
    pub(crate) tree_view: TreeView,
    /// The model's processes as a tree, kept from its changes for the tree's frames.
    tree_index: std::cell::RefCell<super::tree::TreeIndex>,
    /// Enter on a task: the log, Top tasks and Top symbols show only it and its children.
    pub narrow: Option<Narrow>,
    /// A message for the footer (e.g. why a key did nothing).
    pub(crate) message: Option<String>,
    pub(crate) quit: bool,
    /// What the last frame drew where (see [`Drawn`]): given by the drawing, kept for the
    /// keys and the mouse.
    pub(crate) drawn: Drawn,
    /// The last listing of `/proc` (which processes still exist), for the tree's processes
    /// whose exit the stream cannot show, taken once a frame; None: trust the model (tests).
    pub(crate) proc_alive: Option<fn() -> Option<super::proc_listing::Listing>>,
    /// `PERFWATCH_FRAME_TIMES`: how long frames take to draw (reported at the end).
    pub frame_times: Option<Box<super::frame_times::FrameTimes>>,
    /// The middle pane focused last while folded: shown in the row's last place.
    pub(crate) pick: Option<Pane>,
    /// `z`: the focused pane takes the whole screen but the status bar and the footer.
    pub(crate) zoom: bool,
    /// A recording replayed: where the replay is (set by the loop on each tick).
    pub replay: Option<super::replay::ReplayView>,
    /// Replay keys for the loop (which owns the replay's clock) to act on.
    replay_cmds: Vec<super::replay::ReplayCmd>,
}

impl App {
    pub fn new(cfg: AppConfig) -> App {
        App {
            live: Panes::new(&cfg.cpus, &cfg.events, cfg.unit, cfg.history, cfg.start_ns),
            model: {
                let model = ModelHandle::default();
                model.write().collect_tree_changes(true);
                model
            },
            frozen: None,
            folding: None,
            reparents: 0,
            top: TopView::default(),
            paused: false,
            show_help: false,
            edit: None,
            focus: Pane::Log,
            log: LogView::default(),
            stream: StreamView::default(),
            cpu_scroll: 0,
            script_scroll: Vec::new(),
            symbols: SymbolsView::default(),
            tree: false,
            tree_view: TreeView::default(),
            tree_index: Default::default(),
            narrow: None,
            message: None,
            quit: false,
            drawn: Drawn::default(),
            proc_alive: None,
            frame_times: None,
            pick: None,
            zoom: false,
            replay: None,
            replay_cmds: Vec::new(),
            cfg,
        }
    }

    /// Read names from `model` (the pipeline's) rather than from a model of its own.
    pub fn with_model(mut self, model: ModelHandle) -> App {
        model.write().collect_tree_changes(true);
        self.model = model;
        self
    }

    /// The process model, for lookups (drawing).
    pub(crate) fn tasks(&self) -> std::sync::RwLockReadGuard<'_, ProcessModel> {
        self.model.read()
    }

    /// Tell the app's model about tasks that existed before (hand-made scenes: tests,
    /// benchmarks; in a run the pipeline seeds the model from `/proc`).
    pub fn seed_tasks(&mut self, comms: impl IntoIterator<Item = (u32, Box<[u8]>)>) {
        let mut m = self.model.write();
        for (pid, comm) in comms {
            m.seed_comm(pid, &comm);
        }
    }

    /// What the panes show: the data held at the pause, or the live data.
    pub(crate) fn shown(&self) -> &Panes {
        self.frozen.as_deref().unwrap_or(&self.live)
    }

    /// Set the filter in force (from `--filter`, or when an edit is applied).
    pub fn set_filter(&mut self, filter: Filter) {
        self.log.scroll = 0;
        let model = self.model.clone();
        let tasks = model.read();
        for log in logs_mut(&mut self.live, &mut self.frozen) {
            log.set_filter(filter.clone(), &tasks, Narrow::pids_of(&self.narrow));
        }
    }

    /// The filter in force.
    pub(crate) fn filter(&self) -> &Filter {
        self.live.filter()
    }

    /// Are periodic samples in the log (`S`, or a filter naming them)?
    pub(crate) fn samples_in_log(&self) -> bool {
        self.shown().samples_in_log()
    }

    /// `S`: show or hide periodic samples in the log. Returns whether they are now shown.
    pub(crate) fn toggle_samples(&mut self) -> bool {
        for log in logs_mut(&mut self.live, &mut self.frozen) {
            log.toggle_samples();
        }
        self.log.scroll = 0;
        self.samples_in_log()
    }

    /// The name of task `pid` as shown: the latest, or on a paused view the one it had at
    /// the pause.
    pub(crate) fn task_name(&self, tasks: &ProcessModel, pid: u32) -> String {
        // A replay's model may know a little of what comes after the position.
        let c = match self.paused || self.replay.is_some() {
            true => tasks
                .comm_at(pid, self.shown().now_ns)
                .or_else(|| tasks.comm(pid)),
            false => tasks.comm(pid),
        };
        c.map_or_else(|| "?".to_string(), |c| c.display())
    }

    /// Keep what a frame drew where, for the keys and the mouse.
    pub(crate) fn set_drawn(&mut self, drawn: Drawn) {
        self.drawn = drawn;
    }

    /// An ordered chunk from the pipeline (whose model already knows its events).
    pub fn on_chunk(&mut self, chunk: Chunk) {
        let model = self.model.clone();
        let tasks = model.read();
        if tasks.reparents() != self.reparents {
            // Orphans re-parented into the narrowed processes join them (those that left
            // stay: they were started there).
            self.reparents = tasks.reparents();
            if let Some(n) = self.narrow.as_mut() {
                n.pids.extend(super::tree::descendants(&tasks, n.pid));
            }
        }
        for ev in chunk.events {
            self.live.account(&ev);
            self.ingest(ev, &tasks);
        }
    }

    /// A chunk of hand-made events (tests, benchmarks): what the pipeline does with it
    /// (the model learns the events and forgets what is old at the watermark), then
    /// [`App::on_chunk`].
    pub fn feed(&mut self, chunk: Chunk) {
        self.model.write().apply_chunk(&chunk, |_, _| true);
        self.on_chunk(chunk);
    }

    /// Events already in time order (tests, benchmarks): [`App::feed`] as one chunk.
    pub fn on_events(&mut self, events: impl IntoIterator<Item = Event>) {
        let events: Vec<Event> = events.into_iter().collect();
        let watermark = events.last().map_or(0, |e| e.time);
        self.feed(Chunk { events, watermark });
    }

    /// Feed `--folded FILE` with every event the TUI takes, in time order.
    pub(crate) fn set_folding(&mut self, folding: Option<crate::folded::Folding>) {
        self.folding = folding;
    }

    /// The `--folded` stacks fed so far, handed back at the end of the run.
    pub(crate) fn take_folding(&mut self) -> Option<crate::folded::Folding> {
        self.folding.take()
    }

    fn ingest(&mut self, ev: Event, tasks: &ProcessModel) {
        if let Some(f) = &mut self.folding {
            f.observe(&ev, tasks);
        }
        if let (Some(n), EventKind::Fork(t)) = (self.narrow.as_mut(), &ev.kind) {
            if t.pid != t.ppid && n.pids.contains(&t.ppid) {
                n.pids.insert(t.pid);
            }
        }
        // While paused the scrolls are the held panes': the live rows do not move them.
        let live = self.frozen.is_none();
        if let Some(row) = super::task_rows::row_of(&ev, tasks) {
            self.live.push_task_row(row);
            if live {
                self.stream.row_came(self.live.task_rows().len());
            }
        }
        // A view scrolled back stays on the same entries.
        let narrow = Narrow::pids_of(&self.narrow);
        if self.live.push_log(ev, tasks, narrow) && live && self.log.scroll > 0 {
            self.log.scroll += 1;
        }
        if live {
            self.log.scroll = self.log.scroll.min(self.live.log_len().saturating_sub(1));
        }
    }

    /// Entries the live log shows (after the filter, samples only when shown).
    pub fn log_len(&self) -> usize {
        self.live.log_len()
    }

    /// Entries held in the live log's history (before the filter), and of them periodic
    /// samples.
    #[cfg(test)]
    pub(crate) fn log_held(&self) -> (usize, usize) {
        self.live.log_held()
    }

    /// Entries held in the live log's history (before the filter).
    pub fn log_entries(&self) -> usize {
        self.live.log_held().0
    }

    /// The `i`-th entry of the live log view, oldest first.
    pub fn log_entry(&self, i: usize) -> Option<&Event> {
        self.live.log_entry(i)
    }

    /// The rows of the live task stream, oldest first.
    pub fn task_rows(&self) -> &VecDeque<TaskRow> {
        self.live.task_rows()
    }

    /// The render clock: `now` is CLOCK_MONOTONIC ns. Makes seconds final, rolls the top
    /// list (of the live data; a pause holds its own).
    pub fn on_tick(&mut self, now: u64) {
        self.live.on_tick(now);
    }

    /// The counters of the readers (read on each tick); records/s is derived over a second.
    pub fn set_totals(&mut self, totals: Totals) {
        self.live.set_totals(totals);
    }

    /// A message from the script stage.
    pub fn on_pane_msg(&mut self, msg: PaneMsg) {
        self.live.on_pane_msg(msg);
    }

    /// Rows script pane `i` is scrolled down.
    pub(crate) fn script_scroll(&self, i: usize) -> usize {
        self.script_scroll.get(i).copied().unwrap_or(0)
    }

    /// Narrow the log, Top tasks and Top symbols to `pid` and its children (None: all).
    pub fn set_narrow(&mut self, pid: Option<u32>) {
        let model = self.model.clone();
        let tasks = model.read();
        let narrow = pid.map(|pid| Narrow {
            pid,
            pids: super::tree::descendants(&tasks, pid),
        });
        for log in logs_mut(&mut self.live, &mut self.frozen) {
            log.refilter(&tasks, Narrow::pids_of(&narrow));
        }
        self.log.scroll = 0;
        self.top.scroll = 0;
        self.symbols.zoom = super::top_symbols::Zoom::None;
        self.symbols.selected = 0;
        self.narrow = narrow;
    }

    /// The processes the views are narrowed to (it and its children, growing as they
    /// fork): the one set the log, Top tasks and Top symbols all select by.
    pub(crate) fn narrowed(&self) -> super::log::Narrowed<'_> {
        Narrow::pids_of(&self.narrow)
    }

    /// The selected row of `rows` (the tree as shown now).
    pub(crate) fn tree_selected(&self, rows: &[TreeRow]) -> usize {
        self.tree_view.selected(rows)
    }

    /// The process tree as shown now.
    pub fn tree_rows(&self) -> Vec<TreeRow> {
        let listing = self.proc_alive.and_then(|f| f());
        let alive = |pid: u32| listing.as_ref().is_none_or(|l| l.contains(&pid));
        super::tree::rows(&self.model.read(), self.shown().now_ns, &alive)
    }

    /// The same without the processes' names and guides: a frame names the rows it draws
    /// only ([`App::name_tree_rows`]). From the app's index of the model's processes, brought
    /// up to date with the model's changes.
    pub(crate) fn tree_rows_unnamed(&self) -> Vec<TreeRow> {
        // The listing taken once a frame, not per process.
        let listing = self.proc_alive.and_then(|f| f());
        let alive = |pid: u32| listing.as_ref().is_none_or(|l| l.contains(&pid));
        let model = self.model.read();
        let mut index = self.tree_index.borrow_mut();
        index.sync(&model);
        index.rows_unnamed(&model, self.shown().now_ns, &alive)
    }

    /// Name `rows[range]` (of [`App::tree_rows_unnamed`]).
    pub(crate) fn name_tree_rows(&self, rows: &mut [TreeRow], range: std::ops::Range<usize>) {
        super::tree::name_rows(&self.model.read(), rows, range);
    }

    /// Top tasks as shown: (pid, or tid with `H`; samples), of the narrowed-to processes
    /// when narrowed, in the chosen order.
    pub(crate) fn top_rows(&self) -> Vec<(u32, u64)> {
        let shown = self.shown();
        let tasks = self.model.read();
        self.top
            .rows(&shown.top, &shown.top_threads, self.narrowed(), &tasks)
    }

    /// `c`: forget the log shown (the counters are kept; a paused view forgets its held
    /// log, the live one goes on).
    pub(crate) fn clear_log(&mut self) {
        match self.frozen.as_deref_mut() {
            Some(p) => p.log.clear(),
            None => self.live.log.clear(),
        }
        self.log.scroll = 0;
    }

    /// The replay keys pressed since the last call, for the loop.
    pub fn take_replay_cmds(&mut self) -> Vec<super::replay::ReplayCmd> {
        std::mem::take(&mut self.replay_cmds)
    }

    /// A replay read again from its start (a jump back), or a pipe's start learnt: the panes
    /// start afresh from `start_ns` on `model` (the new read's); the view state (filter,
    /// samples shown, focus, how panes are shown) stays, scrolls and narrowing go.
    pub(crate) fn restart(&mut self, model: ModelHandle, start_ns: u64) {
        let filter = self.filter().clone();
        let samples = self.samples_in_log() && !filter.names_samples();
        let scripts = std::mem::take(&mut self.live.scripts);
        self.cfg.start_ns = start_ns;
        self.live = Panes::new(
            &self.cfg.cpus,
            &self.cfg.events,
            self.cfg.unit,
            self.cfg.history,
            start_ns,
        );
        self.live.scripts = scripts;
        self.frozen = None;
        self.paused = false;
        model.write().collect_tree_changes(true);
        self.model = model;
        self.narrow = None;
        self.reparents = 0;
        self.set_filter(filter);
        if samples {
            self.toggle_samples();
        }
        self.log.scroll = 0;
        self.stream.scroll = 0;
        self.top.scroll = 0;
        self.tree_view = TreeView::default();
    }

    /// Seconds since monitoring started.
    pub(crate) fn elapsed_secs(&self) -> f64 {
        self.live.now_ns.saturating_sub(self.cfg.start_ns) as f64 / NS as f64
    }
}
