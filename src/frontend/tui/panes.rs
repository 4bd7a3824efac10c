//! The panes' data: what the TUI shows, built from the pipeline's chunks, the ticks, the
//! readers' counters and the scripts' messages. A pause holds a clone of it still (see
//! [`super::app::App::shown`]); how it is shown (focus, scrolls, selections, narrowing)
//! is the view's, in [`super::app::App`].
//!
//! Ingest is the hot path (every record passes through it): it does no string formatting
//! (unless a filter with free words is active), keeps names as fixed 16-byte arrays, and only
//! appends to bounded rings. Text is formatted at draw time, for the visible rows only.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use super::layout::Pane;
use super::log::{Log, Narrowed};
use super::rates::{EventRates, RateUnit, Rates, ipc, push_bounded};
use super::task_rows::{TASK_ROWS, TaskRow};
use super::top_symbols::TopSymbols;
use crate::event::{Event, EventDesc, EventKind};
use crate::filter::Filter;
use crate::pane::PaneMsg;
use crate::process::ProcessModel;
use crate::stats::Totals;
use crate::text::escape;

/// Lines and messages a script pane keeps.
const PANE_LINES: usize = 1_000;
pub(super) const PANE_MESSAGES: usize = 200;
const NS: u64 = 1_000_000_000;

/// A script's pane: what its `on_tick()` returned, and its printed messages.
#[derive(Clone, Debug, Default)]
pub(crate) struct ScriptPane {
    /// The script's name, escaped.
    pub name: String,
    pub lines: Vec<String>,
    /// Escaped message lines; `true` for error output.
    pub messages: VecDeque<(String, bool)>,
}

/// What the panes show.
#[derive(Clone)]
pub(crate) struct Panes {
    /// Rates of the other events of the list, and the IPC pair.
    pub(crate) event_rates: EventRates,
    pub(crate) rates: Rates,
    task_rows: VecDeque<TaskRow>,
    /// Samples by tid since the last second closed: (pid, samples).
    top_acc: FxHashMap<u32, (u32, u64)>,
    /// The threads of the last closed second: (pid, tid, samples), most first.
    pub(super) top_threads: Vec<(u32, u32, u64)>,
    /// The top tasks of the last closed second: (pid, samples), and all samples.
    pub(super) top: Vec<(u32, u64)>,
    top_total: u64,
    /// The event log's history (records and periodic samples apart) and its filter.
    pub(super) log: Log,
    pub(crate) totals: Totals,
    rate_mark: Option<(u64, u64)>,
    /// Records per second over the last second (from the counters).
    pub(crate) records_per_sec: f64,
    pub(crate) now_ns: u64,
    pub(crate) scripts: Vec<ScriptPane>,
    /// The Top symbols pane's counts (shown once a named sample came).
    pub(crate) symbols: TopSymbols,
}

impl Panes {
    /// No data yet: rates in `unit` of `events` on `cpus` from `start_ns`, a log of
    /// `history` entries.
    pub(super) fn new(
        cpus: &[u32],
        events: &[&'static EventDesc],
        unit: RateUnit,
        history: usize,
        start_ns: u64,
    ) -> Panes {
        Panes {
            rates: Rates::new(unit, cpus, start_ns),
            event_rates: EventRates::new(events, cpus, start_ns),
            task_rows: VecDeque::new(),
            top_acc: FxHashMap::default(),
            top_threads: Vec::new(),
            top: Vec::new(),
            top_total: 0,
            log: Log::new(history),
            totals: Totals::default(),
            rate_mark: None,
            records_per_sec: 0.0,
            now_ns: start_ns,
            scripts: Vec::new(),
            symbols: TopSymbols::default(),
        }
    }

    /// The copy a pause holds: the data as it is, without what only ingest uses.
    pub(super) fn frozen(&self) -> Panes {
        let mut p = self.clone();
        p.top_acc = FxHashMap::default();
        p
    }

    /// Count `ev` in the rates, Top tasks and Top symbols.
    #[inline]
    pub(super) fn account(&mut self, ev: &Event) {
        if !self.event_rates.account(ev) {
            self.rates.account(ev);
        }
        if matches!(ev.kind, EventKind::Sample { .. }) {
            self.top_acc.entry(ev.tid).or_insert((ev.pid, 0)).1 += 1;
            self.symbols.add(ev);
        }
    }

    /// A row of the task stream.
    pub(super) fn push_task_row(&mut self, row: TaskRow) {
        push_bounded(&mut self.task_rows, row, TASK_ROWS);
    }

    /// Keep `ev` in the log; true when it is in the log's view.
    pub(super) fn push_log(&mut self, ev: Event, tasks: &ProcessModel, narrow: Narrowed) -> bool {
        self.log.push(ev, tasks, narrow)
    }

    pub(crate) fn filter(&self) -> &Filter {
        self.log.filter()
    }

    /// Are periodic samples in the log (`S`, or a filter naming them)?
    pub(crate) fn samples_in_log(&self) -> bool {
        self.log.samples_shown()
    }

    /// Entries the log view shows (after the filter, samples only when shown).
    pub fn log_len(&self) -> usize {
        self.log.len()
    }

    /// Entries held in the log's history (before the filter), and of them periodic samples.
    pub(crate) fn log_held(&self) -> (usize, usize) {
        self.log.held()
    }

    /// The `i`-th entry of the log view, oldest first.
    pub fn log_entry(&self, i: usize) -> Option<&Event> {
        self.log.get(i)
    }

    /// The entries `[start, end)` of the log view.
    pub(crate) fn log_range(&self, start: usize, end: usize) -> Vec<&Event> {
        self.log.range(start, end)
    }

    /// The rows of the task stream, oldest first.
    pub fn task_rows(&self) -> &VecDeque<TaskRow> {
        &self.task_rows
    }

    /// The rates of the event with list index `index` (the main one or another).
    pub(crate) fn rates_of(&self, index: u16) -> Option<&Rates> {
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
    pub(crate) fn ipc(&self, i: usize) -> Option<f64> {
        let (c, n) = self.event_rates.ipc_pair?;
        let cycles = self.rates_of(c)?.latest(i)?;
        let instructions = self.rates_of(n)?.latest(i)?;
        ipc(instructions, cycles)
    }

    /// Whether the per-CPU pane has an IPC column.
    pub(crate) fn has_ipc(&self) -> bool {
        self.event_rates.ipc_pair.is_some()
    }

    /// The top tasks of the last second: (pid, samples), most first, and all samples.
    pub(crate) fn top(&self) -> (&[(u32, u64)], u64) {
        (&self.top, self.top_total)
    }

    /// The render clock: `now` is CLOCK_MONOTONIC ns. Makes seconds final, rolls the top
    /// list.
    pub(super) fn on_tick(&mut self, now: u64) {
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

    /// The counters of the readers; records/s is derived over a second.
    pub(super) fn set_totals(&mut self, totals: Totals) {
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
    pub(super) fn on_pane_msg(&mut self, msg: PaneMsg) {
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
    pub(crate) fn panes(&self) -> Vec<Pane> {
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
}
