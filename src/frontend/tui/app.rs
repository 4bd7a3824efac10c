//! The TUI's state: plain data, updated by plain functions, drawn by [`super::ui`].
//!
//! Nothing here touches a terminal, a clock or the kernel: the loop hands in ordered chunks
//! (from the [`crate::pipeline::Pipeline`]), keys and the monotonic time of each tick, so that
//! tests can drive it with hand-made events and assert on rates, the task stream, filtering,
//! history bounds and scrolling. Names, parents and lifetimes come from the process model the
//! pipeline keeps, looked up as of each event's time.
//!
//! Ingest is the hot path (every record passes through it): it does no string formatting
//! (unless a filter with free words is active), keeps names as fixed 16-byte arrays, and only
//! appends to bounded rings. Text is formatted at draw time, for the visible rows only.

use std::cell::Cell;
use std::collections::VecDeque;

use rustc_hash::{FxHashMap, FxHashSet};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};

use super::input::{Action, map_key};
pub use super::layout::Pane;
use super::log::Log;
pub use super::rates::{EventRates, RATE_SECONDS, RateUnit, Rates, ipc};
use super::rates::{is_dummy, push_bounded};
pub use super::task_rows::{TASK_ROWS, TaskEvent, TaskRow};
use crate::event::{Event, EventKind};
use crate::filter::Filter;
use crate::monitor::MonitorInfo;
use crate::order::Chunk;
use crate::pane::PaneMsg;
pub use crate::process::Comm;
use crate::process::{ModelHandle, ProcessModel};
use crate::stats::Totals;
use crate::text::escape;

/// Log entries kept by default (`--history`).
pub const DEFAULT_HISTORY: usize = 10_000;
/// Lines and messages a script pane keeps.
const PANE_LINES: usize = 1_000;
const PANE_MESSAGES: usize = 200;
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
    pub fn samples(&self) -> bool {
        self.events.is_empty() || self.events.iter().any(|d| !is_dummy(d))
    }

    /// The formats of the tracepoints being watched (what the filter's field keys name).
    pub fn formats(&self) -> Vec<&crate::perf::tracepoint::Format> {
        self.events
            .iter()
            .filter_map(|d| d.format.as_ref())
            .collect()
    }
}

impl AppConfig {
    pub fn from_info(info: &MonitorInfo, history: usize, start_ns: u64) -> AppConfig {
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

/// A script's pane: what its `on_tick()` returned, and its printed messages.
#[derive(Clone, Debug, Default)]
pub struct ScriptPane {
    /// The script's name, escaped.
    pub name: String,
    pub lines: Vec<String>,
    /// Escaped message lines; `true` for error output.
    pub messages: VecDeque<(String, bool)>,
    /// Rows scrolled down from the top.
    pub scroll: usize,
}

/// The order of Top tasks (`s` when it has the focus).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopSort {
    Samples,
    Id,
    Name,
}

impl TopSort {
    pub fn next(self) -> TopSort {
        match self {
            TopSort::Samples => TopSort::Id,
            TopSort::Id => TopSort::Name,
            TopSort::Name => TopSort::Samples,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TopSort::Samples => "samples",
            TopSort::Id => "id",
            TopSort::Name => "name",
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
    pub fn pids_of(narrow: &Option<Narrow>) -> super::log::Narrowed<'_> {
        narrow.as_ref().map(|n| &n.pids)
    }
}

/// The filter being edited (`/`).
#[derive(Clone, Debug)]
pub struct FilterEdit {
    pub text: String,
    /// The parse error of `text`, shown under it.
    pub error: Option<String>,
    /// The filter in force before editing: restored by Esc.
    before: Filter,
}

/// The whole state of the TUI.
pub struct App {
    pub cfg: AppConfig,
    /// Rates of the other events of the list, and the IPC pair.
    pub event_rates: EventRates,
    pub rates: Rates,
    /// The process model (written by the pipeline; the app only reads it).
    pub(super) model: ModelHandle,
    task_rows: VecDeque<TaskRow>,
    /// Samples by pid since the last second closed.
    top_acc: FxHashMap<u32, (u32, u64)>,
    /// The threads of the last closed second: (pid, tid, samples), most first.
    top_threads: Vec<(u32, u32, u64)>,
    /// `H`: Top tasks per thread rather than per process.
    pub per_thread: bool,
    /// `s` on Top tasks: its order.
    pub top_sort: TopSort,
    /// The top tasks of the last closed second: (pid, samples), and all samples.
    top: Vec<(u32, u64)>,
    top_total: u64,
    /// The event log's history (records and periodic samples apart) and its filter.
    log: Log,
    /// `--folded FILE`: the folded stacks, fed in time order.
    folding: Option<crate::folded::Folding>,
    /// While paused: the panes as they were at the pause. Keys scroll and filter it; the
    /// live state goes on underneath (the status bar shows its counters) and is shown again
    /// on resume.
    frozen: Option<Box<App>>,
    pub totals: Totals,
    rate_mark: Option<(u64, u64)>,
    /// Records per second over the last second (from the counters).
    pub records_per_sec: f64,
    pub now_ns: u64,
    pub paused: bool,
    pub show_help: bool,
    pub edit: Option<FilterEdit>,
    pub focus: Pane,
    /// Rows scrolled back from the newest (0: following the tail).
    pub log_scroll: usize,
    pub task_scroll: usize,
    /// Rows scrolled down from the top.
    pub top_scroll: usize,
    pub cpu_scroll: usize,
    pub scripts: Vec<ScriptPane>,
    /// The Top symbols pane (shown once a named sample came).
    pub symbols: super::top_symbols::TopSymbols,
    /// `t`: the task pane shows the process tree rather than the stream.
    pub tree: bool,
    /// The selected row of the tree, from the top.
    pub tree_sel: usize,
    /// The process on that row: the selection follows it when rows above come and go.
    pub tree_pid: Option<u32>,
    /// The selected row is the one of that process's folded exited children.
    tree_exited: bool,
    /// Enter on a task: the log, Top tasks and Top symbols show only it and its children.
    pub narrow: Option<Narrow>,
    /// The model's count of re-parented orphans when the narrowed set last followed it.
    reparents: u64,
    /// A message for the footer (e.g. why a key did nothing).
    pub message: Option<String>,
    pub quit: bool,
    /// Rows of the focused pane at the last draw: the PgUp/PgDn step.
    pub page_rows: Cell<usize>,
    /// Whether a process still exists (`/proc`), for the tree's processes whose exit the
    /// stream cannot show; None: trust the model (tests).
    pub proc_alive: Option<fn(u32) -> bool>,
    /// Where each pane was drawn last: what a mouse click lands on.
    pub areas: std::cell::RefCell<Vec<(Pane, ratatui::layout::Rect)>>,
    /// The middle panes that did not fit at the last draw (Tab shows them).
    pub folded: std::cell::RefCell<Vec<Pane>>,
    /// The middle pane focused last while folded: shown in the row's last place.
    pub pick: Option<Pane>,
    /// `z`: the focused pane takes the whole screen but the status bar and the footer.
    pub zoom: bool,
    /// Columns the log is scrolled to the right (Right/Left on the log).
    pub log_hscroll: usize,
}

impl App {
    pub fn new(cfg: AppConfig) -> App {
        App {
            rates: Rates::new(cfg.unit, &cfg.cpus, cfg.start_ns),
            event_rates: EventRates::new(&cfg.events, &cfg.cpus, cfg.start_ns),
            model: ModelHandle::default(),
            task_rows: VecDeque::new(),
            top_acc: FxHashMap::default(),
            top_threads: Vec::new(),
            per_thread: false,
            top_sort: TopSort::Samples,
            top: Vec::new(),
            top_total: 0,
            log: Log::new(cfg.history),
            folding: None,
            frozen: None,
            totals: Totals::default(),
            rate_mark: None,
            records_per_sec: 0.0,
            now_ns: cfg.start_ns,
            paused: false,
            show_help: false,
            edit: None,
            focus: Pane::Log,
            log_scroll: 0,
            task_scroll: 0,
            top_scroll: 0,
            cpu_scroll: 0,
            scripts: Vec::new(),
            symbols: super::top_symbols::TopSymbols::default(),
            tree: false,
            tree_sel: 0,
            tree_pid: None,
            tree_exited: false,
            narrow: None,
            reparents: 0,
            message: None,
            quit: false,
            page_rows: Cell::new(10),
            proc_alive: None,
            areas: Default::default(),
            folded: Default::default(),
            pick: None,
            zoom: false,
            log_hscroll: 0,
            cfg,
        }
    }

    /// Read names from `model` (the pipeline's) rather than from a model of its own.
    pub fn with_model(mut self, model: ModelHandle) -> App {
        self.model = model;
        self
    }

    /// The process model, for lookups (drawing).
    pub fn tasks(&self) -> std::sync::RwLockReadGuard<'_, ProcessModel> {
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

    /// Set the filter in force (from `--filter`, or when an edit is applied).
    pub fn set_filter(&mut self, filter: Filter) {
        self.log_scroll = 0;
        let model = self.model.clone();
        let narrow = Narrow::pids_of(&self.narrow);
        self.log.set_filter(filter, &model.read(), narrow);
    }

    pub fn filter(&self) -> &Filter {
        self.log.filter()
    }

    /// Are periodic samples in the log (`S`, or a filter naming them)?
    pub fn samples_in_log(&self) -> bool {
        self.log.samples_shown()
    }

    /// The name of task `pid` as shown: the latest, or on a paused view the one it had at
    /// the pause.
    pub fn task_name(&self, tasks: &ProcessModel, pid: u32) -> String {
        let c = match self.paused {
            true => tasks.comm_at(pid, self.now_ns).or_else(|| tasks.comm(pid)),
            false => tasks.comm(pid),
        };
        c.map_or_else(|| "?".to_string(), |c| c.display())
    }

    /// What the panes show: the snapshot taken at the pause, or the live state.
    pub fn view(&self) -> &App {
        self.frozen.as_deref().unwrap_or(self)
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
            self.account(&ev);
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

    #[inline]
    fn account(&mut self, ev: &Event) {
        if !self.event_rates.account(ev) {
            self.rates.account(ev);
        }
        if matches!(ev.kind, EventKind::Sample { .. }) {
            self.top_acc.entry(ev.tid).or_insert((ev.pid, 0)).1 += 1;
            self.symbols.add(ev);
        }
    }

    /// Feed `--folded FILE` with every event the TUI takes, in time order.
    pub fn set_folding(&mut self, folding: Option<crate::folded::Folding>) {
        self.folding = folding;
    }

    fn ingest(&mut self, ev: Event, tasks: &ProcessModel) {
        if let Some(f) = &self.folding {
            f.observe(&ev, tasks);
        }
        if let (Some(n), EventKind::Fork(t)) = (self.narrow.as_mut(), &ev.kind) {
            if t.pid != t.ppid && n.pids.contains(&t.ppid) {
                n.pids.insert(t.pid);
            }
        }
        let row = super::task_rows::row_of(&ev, tasks);
        if let Some(row) = row {
            self.push_task_row(row);
        }
        self.push_log(ev, tasks);
    }

    fn push_task_row(&mut self, row: TaskRow) {
        push_bounded(&mut self.task_rows, row, TASK_ROWS);
        if self.task_scroll > 0 {
            self.task_scroll = (self.task_scroll + 1).min(self.task_rows.len().saturating_sub(1));
        }
    }

    fn push_log(&mut self, ev: Event, tasks: &ProcessModel) {
        // A view scrolled back stays on the same entries.
        let narrow = Narrow::pids_of(&self.narrow);
        if self.log.push(ev, tasks, narrow) && self.log_scroll > 0 {
            self.log_scroll += 1;
        }
        self.log_scroll = self.log_scroll.min(self.log_len().saturating_sub(1));
    }

    /// Entries the log view shows (after the filter, samples only when shown).
    pub fn log_len(&self) -> usize {
        self.log.len()
    }

    /// Entries held in the log's history (before the filter), and of them periodic samples.
    pub fn log_held(&self) -> (usize, usize) {
        self.log.held()
    }

    /// Entries held in the log's history (before the filter).
    pub fn log_entries(&self) -> usize {
        self.log.held().0
    }

    /// The `i`-th entry of the log view, oldest first.
    pub fn log_entry(&self, i: usize) -> Option<&Event> {
        self.log.get(i)
    }

    /// The entries `[start, end)` of the log view.
    pub fn log_range(&self, start: usize, end: usize) -> Vec<&Event> {
        self.log.range(start, end)
    }

    /// The rows of the task stream, oldest first.
    pub fn task_rows(&self) -> &VecDeque<TaskRow> {
        &self.task_rows
    }

    /// The top tasks of the last second: (pid, samples), most first, and all samples.
    /// The rates of the event with list index `index` (the main one or another).
    pub fn rates_of(&self, index: u16) -> Option<&Rates> {
        if Some(index) == self.event_rates.main {
            return Some(&self.rates);
        }
        self.event_rates
            .others
            .iter()
            .find(|(d, _)| d.index == index)
            .map(|(_, r)| r)
    }

    /// Instructions per cycle of CPU row `i` (the all-CPU row is `cpus.len()`) over the
    /// latest final second, when both cycles and instructions are open.
    pub fn ipc(&self, i: usize) -> Option<f64> {
        let (c, n) = self.event_rates.ipc_pair?;
        let cycles = self.rates_of(c)?.latest(i)?;
        let instructions = self.rates_of(n)?.latest(i)?;
        ipc(instructions, cycles)
    }

    /// Whether the per-CPU pane has an IPC column.
    pub fn has_ipc(&self) -> bool {
        self.event_rates.ipc_pair.is_some()
    }

    pub fn top(&self) -> (&[(u32, u64)], u64) {
        (&self.top, self.top_total)
    }

    /// The render clock: `now` is CLOCK_MONOTONIC ns. Makes seconds final, rolls the top
    /// list, forgets old exited tasks.
    pub fn on_tick(&mut self, now: u64) {
        self.now_ns = now;
        self.event_rates.close(now);
        if self.rates.close(now) > 0 {
            self.top_threads.clear();
            self.top_threads.extend(
                self.top_acc
                    .iter()
                    .filter(|(_, (pid, _))| *pid != 0)
                    .map(|(tid, (pid, n))| (*pid, *tid, *n)),
            );
            self.top_threads
                .sort_unstable_by(|a, b| b.2.cmp(&a.2).then(a.1.cmp(&b.1)));
            let mut by_pid: FxHashMap<u32, u64> = FxHashMap::default();
            for (pid, _, n) in &self.top_threads {
                *by_pid.entry(*pid).or_insert(0) += n;
            }
            self.top.clear();
            self.top.extend(by_pid);
            self.top
                .sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            self.top_total = self.top_acc.values().map(|v| v.1).sum();
            self.top_acc.clear();
        }
    }

    /// The counters of the readers (read on each tick); records/s is derived over a second.
    pub fn set_totals(&mut self, totals: Totals) {
        let total = totals.total_records();
        match self.rate_mark {
            None => self.rate_mark = Some((total, self.now_ns)),
            Some((t0, n0)) if self.now_ns >= n0 + NS => {
                self.records_per_sec =
                    total.saturating_sub(t0) as f64 * NS as f64 / (self.now_ns - n0) as f64;
                self.rate_mark = Some((total, self.now_ns));
            }
            _ => {}
        }
        self.totals = totals;
    }

    /// A message from the script stage.
    pub fn on_pane_msg(&mut self, msg: PaneMsg) {
        let script = match &msg {
            PaneMsg::Lines { script, .. } | PaneMsg::Text { script, .. } => script,
        };
        let name = escape(script.as_bytes());
        let idx = match self.scripts.iter().position(|p| p.name == name) {
            Some(i) => i,
            None => {
                self.scripts.push(ScriptPane {
                    name,
                    ..Default::default()
                });
                self.scripts.len() - 1
            }
        };
        let pane = &mut self.scripts[idx];
        match msg {
            PaneMsg::Lines { lines, .. } => {
                pane.lines = lines
                    .iter()
                    .take(PANE_LINES)
                    .map(|l| escape(l.as_bytes()))
                    .collect();
            }
            PaneMsg::Text { text, is_error, .. } => {
                for line in text.lines() {
                    push_bounded(
                        &mut pane.messages,
                        (escape(line.as_bytes()), is_error),
                        PANE_MESSAGES,
                    );
                }
            }
        }
    }

    /// The panes in Tab order (the script pane only when a script sent something).
    pub fn panes(&self) -> Vec<Pane> {
        let mut v = vec![Pane::Cpus, Pane::Tasks];
        if self.symbols.has_samples() {
            v.push(Pane::Symbols);
        }
        v.push(Pane::Top);
        if !self.scripts.is_empty() {
            v.extend((0..self.scripts.len()).map(Pane::Script));
        }
        v.push(Pane::Log);
        v
    }

    pub fn on_key(&mut self, key: KeyEvent) {
        if key.kind == crossterm::event::KeyEventKind::Release {
            return;
        }
        if key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL) {
            self.quit = true;
            return;
        }
        if let Some(view) = self.frozen.as_mut() {
            // Paused: keys act on the snapshot, but for resume and quit.
            let typing = view.edit.is_some() || view.show_help;
            match map_key(key) {
                Action::Pause if !typing => self.toggle_pause(),
                Action::Quit if !typing => self.quit = true,
                _ => view.on_key(key),
            }
            return;
        }
        if self.edit.is_some() {
            self.on_edit_key(key);
            return;
        }
        if self.show_help {
            // Any key closes the help; q closes it rather than quitting by surprise.
            self.show_help = false;
            return;
        }
        self.message = None;
        match map_key(key) {
            Action::Quit => self.quit = true,
            Action::Pause => self.toggle_pause(),
            Action::EditFilter => {
                let text = self.filter().source().to_string();
                self.edit = Some(FilterEdit {
                    text,
                    error: None,
                    before: self.filter().clone(),
                });
            }
            Action::FocusNext => self.move_focus(1),
            Action::FocusPrev => self.move_focus(-1),
            Action::Up(n) => self.scroll(-(n as isize)),
            Action::Down(n) => self.scroll(n as isize),
            Action::PageUp => self.scroll(-(self.page_rows.get().max(1) as isize)),
            Action::PageDown => self.scroll(self.page_rows.get().max(1) as isize),
            Action::Home => self.scroll(isize::MIN / 2),
            Action::End => self.scroll(isize::MAX / 2),
            Action::Clear => self.clear_log(),
            Action::Help => self.show_help = true,
            Action::Select => self.select(),
            Action::Back => {
                if self.symbols.zoom != super::top_symbols::Zoom::None {
                    self.symbols.back();
                } else if self.narrow.is_some() {
                    self.set_narrow(None);
                } else {
                    self.message = Some("nothing to go back from".into());
                }
            }
            Action::Zoom => self.zoom = !self.zoom,
            Action::Tree => {
                self.tree = !self.tree;
                self.tree_sel = 0;
                self.tree_pid = None;
                self.focus = Pane::Tasks;
            }
            Action::Expand if self.focus == Pane::Log => self.log_hscroll += 8,
            Action::Collapse if self.focus == Pane::Log => {
                self.log_hscroll = self.log_hscroll.saturating_sub(8)
            }
            Action::Expand | Action::Collapse if self.focus != Pane::Symbols => {
                self.message = Some(
                    "Right/Left scroll the log; + and - open a symbol's callers in Top symbols"
                        .into(),
                );
            }
            Action::Expand if !self.symbols.callchains => {
                self.message = Some("callers need call chains: run with -g".into());
            }
            Action::Expand => self.symbols.expand(Narrow::pids_of(&self.narrow)),
            Action::Collapse => self.symbols.collapse(Narrow::pids_of(&self.narrow)),
            Action::Span => self.symbols.toggle_span(),
            Action::Samples => {
                let shown = self.log.toggle_samples();
                self.log_scroll = 0;
                self.message = Some(match (shown, self.log.filter().names_samples()) {
                    (true, false) => "the log shows samples (S hides them)".into(),
                    (true, true) => "the filter names samples: the log shows them".into(),
                    (false, _) => {
                        "samples hidden from the log (Top tasks and Top symbols count them)".into()
                    }
                });
            }
            Action::Sort if self.focus == Pane::Top => self.top_sort = self.top_sort.next(),
            Action::Sort => self.symbols.next_sort(),
            Action::Threads => {
                self.per_thread = !self.per_thread;
                self.top_scroll = 0;
            }
            Action::None => {}
        }
    }

    /// Enter: on a task (the tree, the task stream, Top tasks, or a zoomed symbol's tasks),
    /// narrow the log, Top tasks and Top symbols to it and its children; on a symbol, show
    /// the tasks that run it.
    fn select(&mut self) {
        use super::top_symbols::Zoom;
        let from_symbols = self.focus == Pane::Symbols;
        let pid = match self.focus {
            Pane::Top => self.top_rows().get(self.top_scroll).map(|(p, _)| *p),
            Pane::Tasks if self.tree => {
                let rows = self.tree_rows();
                rows.get(self.tree_selected(&rows)).map(|r| r.pid)
            }
            Pane::Tasks => {
                let n = self.task_rows.len();
                n.checked_sub(1 + self.task_scroll)
                    .and_then(|i| self.task_rows.get(i))
                    .map(|r| r.pid)
            }
            Pane::Symbols => match &self.symbols.zoom {
                Zoom::Tasks(key) => self
                    .symbols
                    .tasks_of(key)
                    .get(self.symbols.selected)
                    .map(|(p, _)| *p),
                Zoom::None => {
                    self.symbols.zoom_selected(Narrow::pids_of(&self.narrow));
                    self.symbols.selected = 0;
                    return;
                }
            },
            _ => None,
        };
        match pid {
            Some(pid) => {
                self.set_narrow(Some(pid));
                if from_symbols {
                    self.focus = Pane::Symbols;
                }
            }
            None => self.message = Some("Enter: select a task or a symbol first".into()),
        }
    }

    /// Narrow the log, Top tasks and Top symbols to `pid` and its children (None: all).
    pub fn set_narrow(&mut self, pid: Option<u32>) {
        let model = self.model.clone();
        let tasks = model.read();
        let narrow = pid.map(|pid| Narrow {
            pid,
            pids: super::tree::descendants(&tasks, pid),
        });
        self.log.refilter(&tasks, Narrow::pids_of(&narrow));
        self.log_scroll = 0;
        self.top_scroll = 0;
        self.symbols.zoom = super::top_symbols::Zoom::None;
        self.symbols.selected = 0;
        self.narrow = narrow;
    }

    /// The processes the views are narrowed to (it and its children, growing as they
    /// fork): the one set the log, Top tasks and Top symbols all select by.
    pub fn narrowed(&self) -> super::log::Narrowed<'_> {
        Narrow::pids_of(&self.narrow)
    }

    /// The selected row of `rows` (the tree as shown now): the selected process's, while it
    /// is in the tree, else the same place.
    pub fn tree_selected(&self, rows: &[super::tree::TreeRow]) -> usize {
        self.tree_pid
            .and_then(|pid| {
                rows.iter()
                    .position(|r| r.pid == pid && (r.exited > 0) == self.tree_exited)
            })
            .unwrap_or(self.tree_sel)
            .min(rows.len().saturating_sub(1))
    }

    /// The process tree as shown now.
    pub fn tree_rows(&self) -> Vec<super::tree::TreeRow> {
        let alive = |pid: u32| self.proc_alive.is_none_or(|f| f(pid));
        super::tree::rows(&self.model.read(), self.now_ns, &alive)
    }

    /// Top tasks as shown: (pid, or tid with `H`; samples), of the narrowed-to processes
    /// when narrowed, in the chosen order.
    pub fn top_rows(&self) -> Vec<(u32, u64)> {
        let keep = |pid: &u32| self.narrowed().is_none_or(|n| n.contains(pid));
        let mut rows: Vec<(u32, u64)> = if self.per_thread {
            self.top_threads
                .iter()
                .filter(|(p, _, _)| keep(p))
                .map(|(_, t, n)| (*t, *n))
                .collect()
        } else {
            self.top.iter().filter(|(p, _)| keep(p)).copied().collect()
        };
        match self.top_sort {
            TopSort::Samples => {}
            TopSort::Id => rows.sort_unstable_by_key(|r| r.0),
            TopSort::Name => {
                let tasks = self.model.read();
                rows.sort_by_cached_key(|r| {
                    (
                        tasks.comm(r.0).map(|c| c.display()).unwrap_or_default(),
                        r.0,
                    )
                });
            }
        }
        rows
    }

    fn on_edit_key(&mut self, key: KeyEvent) {
        let Some(edit) = self.edit.as_mut() else {
            return;
        };
        match key.code {
            KeyCode::Esc => {
                let before = edit.before.clone();
                self.edit = None;
                if before != *self.filter() {
                    self.set_filter(before);
                }
                return;
            }
            KeyCode::Enter => {
                if edit.error.is_none() {
                    self.edit = None;
                }
                return;
            }
            KeyCode::Backspace => {
                edit.text.pop();
            }
            KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                edit.text.clear();
            }
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                if edit.text.len() < 512 {
                    edit.text.push(c);
                }
            }
            _ => return,
        }
        // Live preview: a valid expression applies at once; an invalid one shows its error
        // and the view keeps the filter that was in force before editing.
        let (text, before) = (edit.text.clone(), edit.before.clone());
        let parsed = Filter::parse(&text)
            .and_then(|f| f.check(&self.cfg.formats(), self.cfg.samples()).map(|()| f));
        match parsed {
            Ok(f) => {
                if let Some(e) = self.edit.as_mut() {
                    e.error = None;
                }
                if f != *self.filter() {
                    self.set_filter(f);
                }
            }
            Err(e) => {
                if let Some(ed) = self.edit.as_mut() {
                    ed.error = Some(e.to_string());
                }
                if before != *self.filter() {
                    self.set_filter(before);
                }
            }
        }
    }

    pub fn on_mouse(&mut self, m: MouseEvent) {
        if let Some(view) = self.frozen.as_mut() {
            view.on_mouse(m);
            return;
        }
        match m.kind {
            MouseEventKind::ScrollUp => self.scroll(-3),
            MouseEventKind::ScrollDown => self.scroll(3),
            MouseEventKind::Down(crossterm::event::MouseButton::Left) => {
                self.click(m.column, m.row)
            }
            _ => {}
        }
    }

    /// A click: focus the pane under it, and select the row under it where rows are
    /// selected (the tree, Top tasks, Top symbols).
    fn click(&mut self, x: u16, y: u16) {
        let hit = self
            .areas
            .borrow()
            .iter()
            .copied()
            .find(|(_, r)| x >= r.x && x < r.x + r.width && y >= r.y && y < r.y + r.height);
        let Some((pane, r)) = hit else { return };
        self.focus = pane;
        // Below the top border and the header row.
        let Some(row) = y.checked_sub(r.y + 2).map(usize::from) else {
            return;
        };
        let visible = r.height.saturating_sub(3).max(1) as usize;
        match pane {
            Pane::Tasks if self.tree => {
                let rows = self.tree_rows();
                let start = self.tree_selected(&rows).saturating_sub(visible - 1);
                if let Some(r) = rows.get(start + row) {
                    self.tree_sel = start + row;
                    (self.tree_pid, self.tree_exited) = (Some(r.pid), r.exited > 0);
                }
            }
            Pane::Top if self.top_scroll + row < self.top_rows().len() => {
                self.top_scroll += row;
            }
            Pane::Symbols => {
                let len = self.symbols.shown_len(self.narrowed());
                let start = self.symbols.selected.saturating_sub(visible - 1);
                if start + row < len {
                    self.symbols.selected = start + row;
                }
            }
            _ => {}
        }
    }

    fn toggle_pause(&mut self) {
        match self.frozen.take() {
            None => {
                let mut view = self.snapshot();
                view.paused = true;
                self.frozen = Some(Box::new(view));
                self.paused = true;
            }
            Some(view) => {
                // Resuming follows the newest again, as perf top and htop do, with what
                // was chosen while paused: the filter, the focus, how Top symbols is shown.
                self.paused = false;
                if view.filter() != self.filter() {
                    self.set_filter(view.filter().clone());
                }
                if view.log.samples_asked() != self.log.samples_asked() {
                    self.log.toggle_samples();
                }
                self.focus = view.focus;
                (self.pick, self.zoom) = (view.pick, view.zoom);
                self.top_scroll = view.top_scroll;
                self.cpu_scroll = view.cpu_scroll;
                for (live, held) in self.scripts.iter_mut().zip(&view.scripts) {
                    live.scroll = held.scroll;
                }
                self.tree = view.tree;
                self.tree_sel = view.tree_sel;
                (self.tree_pid, self.tree_exited) = (view.tree_pid, view.tree_exited);
                if view.narrow.as_ref().map(|n| n.pid) != self.narrow.as_ref().map(|n| n.pid) {
                    self.set_narrow(view.narrow.as_ref().map(|n| n.pid));
                }
                self.symbols.take_view_of(&view.symbols);
                self.log_scroll = 0;
                self.task_scroll = 0;
            }
        }
    }

    /// A copy of what the panes show, for the pause. The log and the task stream are
    /// copied (bounded rings), Top symbols with its graph.
    fn snapshot(&self) -> App {
        App {
            cfg: self.cfg.clone(),
            event_rates: self.event_rates.clone(),
            rates: self.rates.clone(),
            model: self.model.clone(),
            task_rows: self.task_rows.clone(),
            top_acc: FxHashMap::default(),
            top_threads: self.top_threads.clone(),
            per_thread: self.per_thread,
            top_sort: self.top_sort,
            top: self.top.clone(),
            top_total: self.top_total,
            log: self.log.clone(),
            folding: None,
            frozen: None,
            totals: self.totals.clone(),
            rate_mark: self.rate_mark,
            records_per_sec: self.records_per_sec,
            now_ns: self.now_ns,
            paused: true,
            show_help: false,
            edit: None,
            focus: self.focus,
            log_scroll: self.log_scroll,
            task_scroll: self.task_scroll,
            top_scroll: self.top_scroll,
            cpu_scroll: self.cpu_scroll,
            scripts: self.scripts.clone(),
            symbols: self.symbols.clone(),
            tree: self.tree,
            tree_sel: self.tree_sel,
            tree_pid: self.tree_pid,
            tree_exited: self.tree_exited,
            narrow: self.narrow.clone(),
            reparents: self.reparents,
            message: None,
            quit: false,
            page_rows: self.page_rows.clone(),
            proc_alive: self.proc_alive,
            areas: self.areas.clone(),
            folded: self.folded.clone(),
            pick: self.pick,
            zoom: self.zoom,
            log_hscroll: self.log_hscroll,
        }
    }

    fn move_focus(&mut self, step: isize) {
        let panes = self.panes();
        let i = panes.iter().position(|p| *p == self.focus).unwrap_or(0) as isize;
        let n = panes.len() as isize;
        self.focus = panes[((i + step) % n + n) as usize % panes.len()];
        // A pane that did not fit takes the middle row's last place while focused there.
        let column = super::layout::column_of(self.focus);
        if self.folded.borrow().contains(&column) {
            self.pick = Some(self.focus);
        }
    }

    /// Scroll the focused pane: negative is up (older for the streams).
    fn scroll(&mut self, delta: isize) {
        let page = self.page_rows.get().max(1);
        let back = |off: usize, delta: isize, len: usize| -> usize {
            // Streams count rows back from the newest: up (negative) goes further back, until
            // the oldest row is at the top of a full page.
            let v = off as isize - delta;
            v.clamp(0, len.saturating_sub(page) as isize) as usize
        };
        fn down(off: usize, delta: isize, len: usize) -> usize {
            let v = off as isize + delta;
            v.clamp(0, len.saturating_sub(1) as isize) as usize
        }
        match self.focus {
            Pane::Log => self.log_scroll = back(self.log_scroll, delta, self.log_len()),
            Pane::Tasks if self.tree => {
                let rows = self.tree_rows();
                self.tree_sel = down(self.tree_selected(&rows), delta, rows.len());
                self.tree_pid = rows.get(self.tree_sel).map(|r| r.pid);
                self.tree_exited = rows.get(self.tree_sel).is_some_and(|r| r.exited > 0);
            }
            // The selection is the newest row shown: it reaches the oldest one.
            Pane::Tasks => {
                let v = self.task_scroll as isize - delta;
                self.task_scroll = v.clamp(0, self.task_rows.len() as isize - 1).max(0) as usize;
            }
            Pane::Top => self.top_scroll = down(self.top_scroll, delta, self.top_rows().len()),
            Pane::Symbols => {
                let len = self.symbols.shown_len(self.narrowed());
                self.symbols.selected = down(self.symbols.selected, delta, len);
            }
            Pane::Cpus => {
                self.cpu_scroll = down(self.cpu_scroll, delta, self.rates.cpus().len() + 1)
            }
            Pane::Script(i) => {
                if let Some(p) = self.scripts.get_mut(i) {
                    p.scroll = down(p.scroll, delta, p.lines.len() + p.messages.len());
                }
            }
        }
    }

    /// `c`: forget the log (the counters are kept).
    pub fn clear_log(&mut self) {
        self.log.clear();
        self.log_scroll = 0;
    }

    /// Seconds since monitoring started.
    pub fn elapsed_secs(&self) -> f64 {
        self.now_ns.saturating_sub(self.cfg.start_ns) as f64 / NS as f64
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::event::EventDesc;
    use crate::frontend::tui::rates::RATE_LAG_NS;
    use crate::testkit::events::{batch, event, fork, sample, task};

    const T0: u64 = 100 * NS;

    pub(crate) fn cfg(unit: RateUnit, history: usize) -> AppConfig {
        AppConfig {
            history,
            ..AppConfig::system_wide("cpu-clock", unit, vec![0, 1], T0)
        }
    }

    fn ev(cpu: u32, pid: u32, time: u64, kind: EventKind) -> Event {
        event(cpu, pid, pid, time, kind)
    }

    fn key(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
    }

    #[test]
    fn busy_cpu_reads_100_percent_and_idle_reads_0() {
        let mut app = App::new(cfg(RateUnit::Utilisation, 100));
        // One second, 1000 samples of 1 ms on each CPU: CPU 0 busy, CPU 1 idle (pid 0).
        let evs = (0..1000u64).flat_map(|i| {
            let t = T0 + i * 1_000_000;
            [sample(0, 42, t, 1_000_000), sample(1, 0, t, 1_000_000)]
        });
        app.on_events(evs);
        app.on_tick(T0 + NS + RATE_LAG_NS);
        let busy = app.rates.latest(0).unwrap();
        assert!((busy - 100.0).abs() < 0.01, "{busy}");
        assert_eq!(app.rates.latest(1), Some(0.0));
        assert!((app.rates.latest(2).unwrap() - 100.0).abs() < 0.01);
        assert_eq!(app.top().0, &[(42, 1000)]);
        assert_eq!(app.top().1, 2000);
    }

    #[test]
    fn partial_first_second_is_scaled_by_its_length() {
        let mut c = cfg(RateUnit::Utilisation, 100);
        c.start_ns = T0 + NS / 2;
        let mut app = App::new(c);
        let evs = (0..500u64).map(|i| sample(0, 7, T0 + NS / 2 + i * 1_000_000, 1_000_000));
        app.on_events(evs);
        app.on_tick(T0 + NS + RATE_LAG_NS);
        assert!((app.rates.latest(0).unwrap() - 100.0).abs() < 0.01);
    }

    #[test]
    fn hardware_events_are_summed_per_second_and_quiet_seconds_are_zero() {
        let mut app = App::new(cfg(RateUnit::Events, 100));
        app.on_events([
            sample(1, 5, T0 + 10, 2_000_000),
            sample(1, 5, T0 + 20, 3_000_000),
        ]);
        app.on_tick(T0 + 3 * NS + RATE_LAG_NS);
        let h: Vec<f64> = app.rates.history(1).iter().copied().collect();
        assert_eq!(h, vec![5_000_000.0, 0.0, 0.0]);
        // A record for a second already final is counted in the next one, not lost.
        app.on_events([sample(1, 5, T0 + 10, 1)]);
        app.on_tick(T0 + 4 * NS + RATE_LAG_NS);
        assert_eq!(app.rates.latest(1), Some(1.0));
        assert_eq!(app.rates.latest(0), Some(0.0));
    }

    #[test]
    fn ipc_maths() {
        assert_eq!(ipc(3_000.0, 1_000.0), Some(3.0));
        assert_eq!(ipc(500.0, 1_000.0), Some(0.5));
        assert_eq!(ipc(0.0, 1_000.0), Some(0.0));
        assert_eq!(ipc(1_000.0, 0.0), None, "no cycles: nothing to show");
        assert_eq!(ipc(f64::NAN, 1.0), None);
        assert_eq!(ipc(1.0, f64::INFINITY), None);
        assert_eq!(ipc(-1.0, 1.0), None);
    }

    use crate::testkit::events::desc;

    /// An app keeping `history` entries over a model seeded with the tree tests' family
    /// of processes.
    fn with_tree(history: usize) -> App {
        use super::super::tree::tests::{FAMILY, seeded};
        let app = App::new(cfg(RateUnit::Records, history));
        *app.model.write() = seeded(FAMILY);
        app
    }

    fn sample_of(d: &'static EventDesc, cpu: u32, time: u64, period: u64) -> Event {
        crate::testkit::events::sample_of(d, cpu, 5, time, period)
    }

    #[test]
    fn each_event_has_its_rate_and_cycles_with_instructions_give_ipc() {
        use perf_event_open_sys::bindings as sys;
        let cycles = desc(0, "cycles", sys::PERF_TYPE_HARDWARE, 0);
        let instructions = desc(1, "instructions", sys::PERF_TYPE_HARDWARE, 1);
        let switch = desc(2, "sched:sched_switch", sys::PERF_TYPE_TRACEPOINT, 372);
        let mut c = cfg(RateUnit::Events, 100);
        c.events = vec![cycles, instructions, switch];
        let mut app = App::new(c);
        assert!(app.has_ipc());
        // In the first whole second: cpu0 runs 2e9 cycles and 3e9 instructions (IPC 1.5),
        // cpu1 1e9 cycles and 0.5e9 instructions (IPC 0.5); 7 switches on cpu1.
        let t = T0 + NS;
        let mut evs = Vec::new();
        for k in 0..4 {
            evs.push(sample_of(cycles, 0, t + k, 500_000_000));
            evs.push(sample_of(instructions, 0, t + k, 750_000_000));
            evs.push(sample_of(cycles, 1, t + k, 250_000_000));
            evs.push(sample_of(instructions, 1, t + k, 125_000_000));
        }
        for k in 0..7 {
            evs.push(sample_of(switch, 1, t + 10 + k, 1));
        }
        app.on_events(evs);
        app.on_tick(T0 + 3 * NS);
        assert_eq!(app.rates.latest(0), Some(2e9), "the main event is cycles");
        assert_eq!(app.rates_of(1).and_then(|r| r.latest(0)), Some(3e9));
        assert_eq!(app.rates_of(2).and_then(|r| r.latest(1)), Some(7.0));
        assert_eq!(app.rates_of(2).and_then(|r| r.latest(0)), Some(0.0));
        assert_eq!(app.ipc(0), Some(1.5));
        assert_eq!(app.ipc(1), Some(0.5));
        assert_eq!(app.ipc(2), Some(3.5e9 / 3e9), "all CPUs");
        // No IPC without both.
        let mut c = cfg(RateUnit::Events, 100);
        c.events = vec![cycles, switch];
        assert!(!App::new(c).has_ipc());
    }

    #[test]
    fn rate_history_is_bounded() {
        let mut app = App::new(cfg(RateUnit::Records, 100));
        for s in 1..200 {
            app.on_tick(T0 + s * NS + RATE_LAG_NS);
        }
        assert_eq!(app.rates.history(0).len(), RATE_SECONDS);
    }

    #[test]
    fn exited_tasks_are_forgotten_after_a_while() {
        let mut app = App::new(cfg(RateUnit::Records, 100));
        app.on_events([
            ev(0, 1, T0, EventKind::Fork(task(5, 1, T0))),
            ev(0, 5, T0 + 1, EventKind::Exit(task(5, 1, T0 + 1))),
            ev(0, 1, T0 + 2, EventKind::Fork(task(6, 1, T0 + 2))),
        ]);
        assert_eq!(app.tasks().len(), 2);
        // The pipeline's model forgets as the stream's time moves on.
        app.feed(Chunk {
            events: vec![],
            watermark: T0 + 20 * NS,
        });
        assert_eq!(app.tasks().len(), 1, "the live task stays");
    }

    #[test]
    fn history_is_bounded_and_filter_follows_it() {
        let mut app = App::new(cfg(RateUnit::Records, 50));
        app.on_key(key('S'));
        app.set_filter(Filter::parse("cpu:1").unwrap());
        app.on_events((0..1000).map(|i| sample(i % 2, 3, T0 + i as u64, 1)));
        assert_eq!(app.log_entries(), 50);
        assert_eq!(app.log_len(), 25);
        assert!((0..25).all(|i| app.log_entry(i).unwrap().cpu == 1));
        assert_eq!(app.log_entry(24).unwrap().time, T0 + 999);
        app.set_filter(Filter::default());
        assert_eq!(app.log_len(), 50);
        app.on_key(key('c'));
        assert_eq!(app.log_len(), 0);
    }

    #[test]
    fn comm_filter_uses_task_names() {
        let mut app = App::new(cfg(RateUnit::Records, 100));
        app.seed_tasks([(9, (*b"yes").into())]);
        app.on_key(key('S'));
        app.set_filter(Filter::parse("comm:yes").unwrap());
        app.on_events([sample(0, 9, T0, 1), sample(0, 10, T0 + 1, 1)]);
        assert_eq!(app.log_len(), 1);
        assert_eq!(app.log_entry(0).unwrap().pid, 9);
    }

    #[test]
    fn filter_editing_previews_and_keeps_the_old_filter_on_error() {
        let mut app = App::new(cfg(RateUnit::Records, 100));
        app.on_events((0..10).map(|i| sample(i % 2, 3, T0 + i as u64, 1)));
        app.on_key(key('S'));
        app.on_key(key('/'));
        for c in "cpu:0".chars() {
            app.on_key(key(c));
        }
        assert_eq!(app.log_len(), 5, "live preview");
        app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
        assert!(app.edit.is_none());
        app.on_key(key('/'));
        for c in " bogus:1".chars() {
            app.on_key(key(c));
        }
        let e = app.edit.as_ref().unwrap().error.clone().unwrap();
        assert!(e.contains("'bogus'"), "{e}");
        assert_eq!(app.filter().source(), "cpu:0", "the previous filter stays");
        app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
        assert!(app.edit.is_some(), "Enter does not apply a bad filter");
        app.on_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
        assert!(app.edit.is_none());
        assert_eq!(app.filter().source(), "cpu:0");
        assert_eq!(app.log_len(), 5);
    }

    #[test]
    fn a_value_that_cannot_be_the_fields_is_refused_and_the_old_filter_stays() {
        use crate::testkit::tracepoints as craft;
        let mut c = cfg(RateUnit::Records, 100);
        c.events = vec![craft::desc(0, "sched:sched_switch", craft::SCHED_SWITCH)];
        let mut app = App::new(c);
        for (text, said) in [
            ("prev_pid:abc", "signed 32-bit number"),
            ("prev_state:Q", "shown as S D"),
        ] {
            app.on_key(key('/'));
            for ch in text.chars() {
                app.on_key(key(ch));
            }
            let e = app.edit.as_ref().unwrap().error.clone().unwrap();
            assert!(e.contains(said) && !e.contains('\n'), "{e}");
            assert_eq!(app.filter().source(), "", "the previous filter stays");
            app.on_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
        }
        app.on_key(key('/'));
        for ch in "prev_state:S".chars() {
            app.on_key(key(ch));
        }
        app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
        assert_eq!(app.filter().source(), "prev_state:S");
    }

    #[test]
    fn scrolling_stays_on_the_same_entries_and_pause_freezes() {
        let mut app = App::new(cfg(RateUnit::Records, 1000));
        app.on_key(key('S'));
        app.on_events((0..100).map(|i| sample(0, 3, T0 + i as u64, 1)));
        assert_eq!(app.log_scroll, 0);
        app.on_key(KeyEvent::new(KeyCode::Up, KeyModifiers::NONE));
        assert_eq!(app.log_scroll, 1);
        app.on_events((0..10).map(|i| sample(0, 3, T0 + 1000 + i as u64, 1)));
        assert_eq!(
            app.log_scroll, 11,
            "new entries do not move a scrolled view"
        );
        app.on_key(KeyEvent::new(KeyCode::End, KeyModifiers::NONE));
        assert_eq!(app.log_scroll, 0);
        app.on_key(KeyEvent::new(KeyCode::Home, KeyModifiers::NONE));
        assert_eq!(
            app.log_scroll,
            110 - app.page_rows.get(),
            "Home: the oldest row at the top of a full page"
        );
        app.on_key(KeyEvent::new(KeyCode::PageUp, KeyModifiers::NONE));
        assert_eq!(app.log_scroll, 110 - app.page_rows.get(), "no further");
        app.on_key(KeyEvent::new(KeyCode::End, KeyModifiers::NONE));
        app.on_key(key(' '));
        assert!(app.paused);
        app.on_events((0..5).map(|i| sample(0, 3, T0 + 2000 + i as u64, 1)));
        assert_eq!(app.view().log_len(), 110, "paused: the view stays put");
        assert_eq!(app.log_len(), 115, "counting continues");
        app.on_key(key(' '));
        assert_eq!(app.log_scroll, 0);
        assert_eq!(app.view().log_len(), 115, "resumed: live again");
    }

    #[test]
    fn pause_holds_every_pane_while_counting_goes_on_and_keys_act_on_the_held_view() {
        let mut app = App::new(cfg(RateUnit::Records, 100));
        app.on_events((0..20).map(|i| fork(0, T0 + i as u64, 100 + i, 1)));
        app.on_events((0..50).map(|i| sample(0, 105, T0 + 100 + i as u64, 1)));
        app.on_tick(T0 + 2 * NS);
        let shown = |a: &App| {
            let v = a.view();
            let log: Vec<Event> = v.log_range(0, v.log_len()).into_iter().cloned().collect();
            let tasks: Vec<u32> = v.task_rows().iter().map(|r| r.pid).collect();
            (log, tasks, v.top().0.to_vec(), v.rates.history(0).clone())
        };
        let before = shown(&app);
        app.on_key(key(' '));
        // A burst of forks and samples, and a second closing: none of it reaches the panes.
        app.on_events((0..500).map(|i| fork(1, T0 + 3 * NS + i as u64, 1000 + i, 1)));
        app.on_events((0..500).map(|i| sample(1, 1000, T0 + 3 * NS + 600 + i as u64, 1)));
        app.on_tick(T0 + 5 * NS);
        app.set_totals(Totals::default());
        assert!(shown(&app) == before, "paused: every pane as it was");
        assert_eq!(
            app.log_held(),
            (200, 100),
            "the live state goes on (100 records and 100 samples kept)"
        );
        // Keys scroll and filter the held view.
        app.focus = Pane::Log;
        app.on_key(KeyEvent::new(KeyCode::Up, KeyModifiers::NONE));
        assert_eq!(app.view().log_scroll, 1);
        app.on_key(key('/'));
        for c in "pid:105".chars() {
            app.on_key(key(c));
        }
        app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
        assert_eq!(
            app.view().log_len(),
            1,
            "the fork of 105; its samples are hidden"
        );
        assert!(app.paused && app.view().paused);
        // Resume: live, with the filter chosen while paused.
        app.on_key(key(' '));
        assert!(!app.paused);
        assert_eq!(app.filter().source(), "pid:105");
        assert!(std::ptr::eq(app.view(), &app));
        assert_eq!(
            app.log_len(),
            0,
            "live: 105's fork is 500 forks back, out of 100"
        );
        app.on_key(key('q'));
        assert!(app.quit);
    }

    #[test]
    fn quit_while_paused() {
        let mut app = App::new(cfg(RateUnit::Records, 10));
        app.on_key(key(' '));
        app.on_key(key('q'));
        assert!(app.quit);
    }

    #[test]
    fn enter_on_a_tree_row_narrows_the_views_to_it_and_its_children_and_esc_goes_back() {
        // bash (101) runs make (102); cron (110) is bash's uncle.
        let mut app = with_tree(1000);
        app.on_key(key('S'));
        app.on_events([
            sample(0, 102, T0 + 1, 1),
            sample(0, 110, T0 + 2, 1),
            sample(1, 101, T0 + 3, 1),
        ]);
        app.on_tick(T0 + 2 * NS);
        app.on_key(key('t'));
        assert!(app.tree && app.focus == Pane::Tasks);
        let rows = app.tree_rows();
        let at = rows.iter().position(|r| r.pid == 101).unwrap();
        for _ in 0..at {
            app.on_key(KeyEvent::new(KeyCode::Down, KeyModifiers::NONE));
        }
        app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
        let n = app.narrow.as_ref().expect("narrowed");
        assert_eq!(n.pid, 101);
        let pids = |a: &App| -> Vec<u32> {
            a.log_range(0, a.log_len())
                .iter()
                .map(|e| e.subject_pid())
                .collect()
        };
        assert_eq!(pids(&app), [102, 101], "cron's sample is not shown");
        assert_eq!(
            app.top_rows().iter().map(|r| r.0).collect::<Vec<_>>(),
            [101, 102]
        );
        // A child forked by make joins, and its records show.
        app.on_events([
            fork(0, T0 + 3 * NS, 103, 102),
            sample(0, 103, T0 + 3 * NS + 1, 1),
            fork(0, T0 + 3 * NS + 2, 111, 110),
        ]);
        assert_eq!(pids(&app), [102, 101, 103, 103]);
        assert!(
            app.narrowed()
                .is_some_and(|n| n.contains(&103) && !n.contains(&111))
        );
        app.on_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
        assert!(app.narrow.is_none() && app.narrowed().is_none());
        assert_eq!(app.log_len(), 6, "all again");
        app.on_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
        assert_eq!(app.message.as_deref(), Some("nothing to go back from"));
    }

    #[test]
    fn a_narrowed_view_follows_orphans_to_their_new_parent() {
        use crate::testkit::events::exit;
        // 450 (bash, under init) runs 500; 7 is a child subreaper under init.
        let mut app = App::new(cfg(RateUnit::Records, 100));
        *app.model.write() = super::super::tree::tests::seeded(&[
            (1, Some(0), "init"),
            (7, Some(1), "reaper"),
            (450, Some(1), "bash"),
            (500, Some(450), "sleep"),
        ]);
        app.model.write().collect_orphans(true);
        app.set_narrow(Some(7));
        app.on_events([exit(0, T0, 450, 1)]);
        let orphans = app.model.write().take_orphans();
        assert_eq!(orphans.len(), 1);
        // What the pipeline does once /proc shows the new parent.
        app.model.write().reparent(&orphans[0], 7);
        app.on_events([sample(0, 500, T0 + 1, 1)]);
        assert!(app.narrowed().is_some_and(|n| n.contains(&500)));
        let rows = app.tree_rows();
        let at = |pid| rows.iter().position(|r| r.pid == pid).unwrap();
        assert_eq!(rows[at(500)].prefix, "│  └─ ", "under the reaper");
        assert_eq!(at(500), at(7) + 1);
    }

    #[test]
    fn the_tree_selection_follows_its_process_when_rows_above_come_and_go() {
        let mut app = with_tree(100);
        app.on_key(key('t'));
        for _ in 0..4 {
            app.on_key(key('j'));
        }
        let rows = app.tree_rows();
        assert_eq!(rows[app.tree_selected(&rows)].pid, 110);
        // A process forked by init with a lower pid: a row above the selection.
        app.on_events([fork(0, T0, 50, 1)]);
        let rows = app.tree_rows();
        assert_eq!(rows[app.tree_selected(&rows)].pid, 110, "still cron");
        app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
        assert_eq!(app.narrow.as_ref().map(|n| n.pid), Some(110));
    }

    #[test]
    fn top_tasks_per_process_or_thread_in_three_orders() {
        let mut app = App::new(cfg(RateUnit::Records, 100));
        app.seed_tasks([(10, (*b"zed").into()), (20, (*b"alpha").into())]);
        let s = |pid, tid, t| event(0, pid, tid, t, EventKind::sample(0x1000, 1, 2));
        let mut evs = Vec::new();
        for i in 0..5 {
            evs.push(s(10, 10, T0 + i));
            evs.push(s(10, 11, T0 + 10 + i));
        }
        for i in 0..3 {
            evs.push(s(20, 20, T0 + 20 + i));
        }
        app.on_events(evs);
        app.on_tick(T0 + 2 * NS);
        assert_eq!(app.top_rows(), [(10, 10), (20, 3)]);
        app.focus = Pane::Top;
        app.on_key(key('H'));
        assert_eq!(app.top_rows(), [(10, 5), (11, 5), (20, 3)]);
        app.on_key(key('H'));
        app.on_key(key('s'));
        assert_eq!(app.top_sort, TopSort::Id);
        assert_eq!(app.top_rows(), [(10, 10), (20, 3)]);
        app.on_key(key('s'));
        assert_eq!(app.top_rows(), [(20, 3), (10, 10)], "alpha before zed");
        assert_eq!(
            app.symbols.sort,
            super::super::top_symbols::SortBy::Samples,
            "untouched"
        );
    }

    #[test]
    fn focus_cycles_and_quit_keys() {
        let mut app = App::new(cfg(RateUnit::Records, 10));
        assert_eq!(app.focus, Pane::Log);
        app.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
        assert_eq!(app.focus, Pane::Cpus);
        app.on_key(KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT));
        assert_eq!(app.focus, Pane::Log);
        app.on_key(key('?'));
        assert!(app.show_help);
        app.on_key(key('q'));
        assert!(!app.show_help && !app.quit, "q closes the help first");
        app.on_key(key('q'));
        assert!(app.quit);
        let mut app = App::new(cfg(RateUnit::Records, 10));
        app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
        assert!(app.quit);
    }

    #[test]
    fn script_panes_are_escaped_and_bounded() {
        let mut app = App::new(cfg(RateUnit::Records, 10));
        assert!(!app.panes().contains(&Pane::Script(0)));
        app.on_pane_msg(PaneMsg::Lines {
            script: "s.py".into(),
            lines: vec!["\x1b[2Jx".into()],
        });
        for i in 0..500 {
            app.on_pane_msg(PaneMsg::Text {
                script: "s.py".into(),
                text: format!("line {i}\nmore"),
                is_error: false,
            });
        }
        assert_eq!(app.scripts.len(), 1);
        assert_eq!(app.scripts[0].lines, vec!["\\x1b[2Jx".to_string()]);
        assert_eq!(app.scripts[0].messages.len(), PANE_MESSAGES);
        assert!(app.panes().contains(&Pane::Script(0)));
        app.on_pane_msg(PaneMsg::Lines {
            script: "t.py".into(),
            lines: vec!["t".into()],
        });
        let panes = app.panes();
        let at = panes.iter().position(|p| *p == Pane::Script(0)).unwrap();
        assert_eq!(
            panes[at + 1],
            Pane::Script(1),
            "one pane per script, in Tab order"
        );
        app.focus = Pane::Script(0);
        app.on_key(KeyEvent::new(KeyCode::Down, KeyModifiers::NONE));
        assert_eq!((app.scripts[0].scroll, app.scripts[1].scroll), (1, 0));
    }

    #[test]
    fn batches_go_through_time_order() {
        // The readers' batches reach the app through the pipeline, as in a run.
        let (tx, rx) = crossbeam_channel::unbounded();
        let opts = crate::pipeline::PipelineOptions {
            seed: None,
            ..Default::default()
        };
        let mut pipe = crate::pipeline::Pipeline::new(rx, &[0, 1], opts);
        let mut app = App::new(cfg(RateUnit::Records, 100)).with_model(pipe.model().clone());
        app.on_key(key('S'));
        tx.send(batch(1, T0 + 30, vec![sample(1, 3, T0 + 20, 1)], false))
            .unwrap();
        tx.send(batch(0, T0 + 30, vec![sample(0, 3, T0 + 10, 1)], true))
            .unwrap();
        tx.send(batch(1, T0 + 40, vec![], true)).unwrap();
        let first = pipe.batches().recv();
        pipe.take(first);
        while let Some(c) = pipe.next_chunk() {
            app.on_chunk(c);
        }
        assert!(pipe.all_ended());
        pipe.finish(std::time::Duration::ZERO);
        assert_eq!(app.log_len(), 2);
        assert_eq!(app.log_entry(0).unwrap().cpu, 0);
    }
}
