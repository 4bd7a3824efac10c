//! The Top symbols pane's state: which functions the samples were taken in, as `perf top`
//! shows them, over the last seconds (default) or since start; with call chains (`-g`), each
//! symbol's Children (inclusive) and Self shares and its callers, expandable down the chain.
//!
//! Pure: fed with named samples ([`TopSymbols::add`]), read as rows ([`TopSymbols::rows`])
//! by the renderer and the tests. The counting is [`crate::callgraph::CallGraph`]'s, keyed by
//! the symbolizer's [`SymbolKey`] (the same function of the same binary, whatever `Arc` the
//! symbolizer handed out), tagged with the sample's process so that the view can be narrowed
//! to a task and can say which tasks run a symbol.

use std::collections::HashSet;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::input::{Action, Handled, down, scroll_delta};
use super::log::Narrowed;
use crate::callgraph::{CallGraph, Span};
use crate::event::Event;
use crate::symbols::{Symbol, SymbolKey};

/// Seconds the default view covers.
pub(crate) const WINDOW_SECONDS: u64 = 10;

/// Symbols kept for display at most (one per distinct function seen).
const MAX_SYMBOLS: usize = 1 << 18;

/// How the rows are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SortBy {
    /// Most samples first (Children with call chains, as perf top -g sorts).
    Samples,
    /// Self samples first (with call chains; without, the same as Samples).
    SelfSamples,
    /// By binary, then name.
    Dso,
}

impl SortBy {
    fn next(self) -> SortBy {
        match self {
            SortBy::Samples => SortBy::SelfSamples,
            SortBy::SelfSamples => SortBy::Dso,
            SortBy::Dso => SortBy::Samples,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SortBy::Samples => "samples",
            SortBy::SelfSamples => "self",
            SortBy::Dso => "binary",
        }
    }
}

/// What the pane shows instead of the symbol list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Zoom {
    /// The symbols.
    None,
    /// The tasks that run one symbol (Enter on a symbol).
    Tasks(SymbolKey),
}

/// One row as drawn.
#[derive(Clone, Debug)]
pub(crate) struct SymRow {
    /// 0 for a symbol, 1.. for its callers, down the chain.
    pub depth: usize,
    pub key: SymbolKey,
    /// Samples through this row (Children for a symbol, the path's for a caller).
    pub samples: u64,
    /// Self samples (symbols only): the rows are sorted by it; only the tests read it back.
    #[cfg_attr(not(test), allow(dead_code))]
    pub self_samples: u64,
    /// Share of all samples over the span, in percent.
    pub share: f64,
    pub self_share: f64,
    pub kernel: bool,
    /// The function (and its binary), named and escaped by the symbolizer: a reference
    /// count per row, no text copied until a row is drawn.
    pub symbol: Option<Arc<Symbol>>,
    /// Can be expanded into callers (`+`), and is.
    pub has_callers: bool,
    pub expanded: bool,
    /// The caller path from the symbol down to this row: what names it for `+`/`-`.
    path: Vec<SymbolKey>,
}

/// The pane's data: what the samples counted (held still by a pause).
#[derive(Clone)]
pub(crate) struct TopSymbols {
    graph: CallGraph<SymbolKey>,
    symbols: FxHashMap<SymbolKey, Arc<Symbol>>,
    /// Call chains were asked for (`-g`): Children and Self columns, callers.
    pub callchains: bool,
    scratch: Vec<SymbolKey>,
}

/// How the pane is shown (the view's, one whether paused or not): span, order, zoom,
/// selection, open callers.
#[derive(Clone, Debug)]
pub(crate) struct SymbolsView {
    pub span: Span,
    pub sort: SortBy,
    pub zoom: Zoom,
    /// The selected row.
    pub selected: usize,
    expanded: HashSet<Vec<SymbolKey>>,
}

impl Default for SymbolsView {
    fn default() -> SymbolsView {
        SymbolsView {
            span: Span::Recent,
            sort: SortBy::Samples,
            zoom: Zoom::None,
            selected: 0,
            expanded: HashSet::new(),
        }
    }
}

impl Default for TopSymbols {
    fn default() -> TopSymbols {
        TopSymbols::new(WINDOW_SECONDS)
    }
}

impl SymRow {
    /// The function's name as shown (`[unknown]` when not known).
    pub fn name(&self) -> &str {
        self.symbol
            .as_deref()
            .map_or(crate::symbols::UNKNOWN, |s| s.display_name())
    }

    /// Its binary.
    pub fn dso(&self) -> &str {
        self.symbol.as_deref().map_or("?", |s| s.dso().name())
    }
}

impl TopSymbols {
    pub fn new(window_seconds: u64) -> TopSymbols {
        TopSymbols {
            graph: CallGraph::new(window_seconds),
            symbols: FxHashMap::default(),
            callchains: false,
            scratch: Vec::new(),
        }
    }

    /// Whether any named sample came (the pane is shown from then on).
    pub(crate) fn has_samples(&self) -> bool {
        self.graph.samples() > 0
    }

    /// Count a sample, by the names the symbolize step gave it.
    pub fn add(&mut self, ev: &Event) {
        let Some(names) = ev.names() else { return };
        self.scratch.clear();
        if !names.frames.is_empty() {
            self.callchains = true;
            for s in names.frames.iter().flatten() {
                let k = self.remember(s.symbol());
                self.scratch.push(k);
            }
        } else if let Some(s) = &names.ip {
            let k = self.remember(s.symbol());
            self.scratch.push(k);
        }
        let second = ev.time / 1_000_000_000;
        self.graph.add(second, ev.pid, &self.scratch);
    }

    fn remember(&mut self, s: &Arc<Symbol>) -> SymbolKey {
        let k = s.key();
        if self.symbols.len() < MAX_SYMBOLS || self.symbols.contains_key(&k) {
            self.symbols.entry(k).or_insert_with(|| Arc::clone(s));
        }
        k
    }

    fn symbol(&self, k: &SymbolKey) -> (bool, Option<Arc<Symbol>>) {
        match self.symbols.get(k) {
            Some(s) => (s.dso().is_kernel(), Some(Arc::clone(s))),
            None => (false, None),
        }
    }

    /// The rows to draw as `v` shows them, and the samples over the span, of the processes
    /// the views are narrowed to.
    pub fn rows(&self, v: &SymbolsView, narrow: Narrowed) -> (Vec<SymRow>, u64) {
        let keep = |tag: u32| narrow.is_some_and(|pids| pids.contains(&tag));
        let only: crate::callgraph::TagFilter = if narrow.is_some() { Some(&keep) } else { None };
        let (mut top, total) = self.graph.top(v.span, only);
        let pct = |n: u64| {
            if total > 0 {
                n as f64 * 100.0 / total as f64
            } else {
                0.0
            }
        };
        match v.sort {
            SortBy::Samples => {}
            SortBy::SelfSamples => top.sort_by(|a, b| {
                b.self_samples
                    .cmp(&a.self_samples)
                    .then(b.children.cmp(&a.children))
                    .then(a.key.cmp(&b.key))
            }),
            SortBy::Dso => {
                let name = |k: &SymbolKey| {
                    self.symbols
                        .get(k)
                        .map(|s| (s.dso().name(), s.display_name()))
                };
                top.sort_by(|a, b| name(&a.key).cmp(&name(&b.key)));
            }
        }
        let mut rows = Vec::with_capacity(top.len());
        for r in top {
            let (kernel, symbol) = self.symbol(&r.key);
            let path = vec![r.key];
            let expanded = v.expanded.contains(&path);
            rows.push(SymRow {
                depth: 0,
                key: r.key,
                samples: r.children,
                self_samples: r.self_samples,
                share: pct(r.children),
                self_share: pct(r.self_samples),
                kernel,
                symbol,
                // Whether it has callers is known once expanded; a chain's symbols mostly do.
                has_callers: self.callchains,
                expanded,
                path,
            });
            if expanded {
                let tree = self.graph.callers(v.span, only, &r.key);
                for line in tree.lines(|p| v.expanded.contains(p)).into_iter().skip(1) {
                    let (kernel, symbol) = self.symbol(&line.key);
                    rows.push(SymRow {
                        depth: line.depth,
                        key: line.key,
                        samples: line.samples,
                        self_samples: 0,
                        share: pct(line.samples),
                        self_share: 0.0,
                        kernel,
                        symbol,
                        has_callers: line.has_callers,
                        expanded: v.expanded.contains(&line.path),
                        path: line.path,
                    });
                }
            }
        }
        (rows, total)
    }

    /// The tasks that run `key` over `span`: (pid, samples), most first.
    pub(crate) fn tasks_of(&self, span: Span, key: &SymbolKey) -> Vec<(u32, u64)> {
        self.graph.tags_of(span, key)
    }

    /// The rows the pane shows as `v` shows it: the tasks of the zoomed-in symbol, else the
    /// symbol rows.
    pub(crate) fn shown_len(&self, v: &SymbolsView, narrow: Narrowed) -> usize {
        match &v.zoom {
            Zoom::Tasks(k) => self.tasks_of(v.span, k).len(),
            Zoom::None => self.rows(v, narrow).0.len(),
        }
    }

    /// The name of `key` as shown.
    pub(crate) fn name_of(&self, key: &SymbolKey) -> &str {
        self.symbols
            .get(key)
            .map_or(crate::symbols::UNKNOWN, |s| s.display_name())
    }
}

impl SymbolsView {
    /// `+`: show the callers of the selected row of `t`.
    pub fn expand(&mut self, t: &TopSymbols, narrow: Narrowed) {
        if let Some(r) = t.rows(self, narrow).0.get(self.selected) {
            if t.callchains {
                let path = r.path.clone();
                self.expanded.insert(path);
            }
        }
    }

    /// `-`: hide them again (on a caller line, its own callers).
    pub fn collapse(&mut self, t: &TopSymbols, narrow: Narrowed) {
        let Some(path) = t
            .rows(self, narrow)
            .0
            .get(self.selected)
            .map(|r| r.path.clone())
        else {
            return;
        };
        if !self.expanded.remove(&path) && path.len() > 1 {
            // On a line that is not open: close its parent and select it.
            let parent = path[..path.len() - 1].to_vec();
            self.expanded.remove(&parent);
            let rows = t.rows(self, narrow).0;
            if let Some(i) = rows.iter().position(|x| x.path == parent) {
                self.selected = i;
            }
        }
    }

    /// Enter on a symbol row: the tasks that run it.
    pub(crate) fn zoom_selected(&mut self, t: &TopSymbols, narrow: Narrowed) {
        if let Some(r) = t.rows(self, narrow).0.get(self.selected) {
            self.zoom = Zoom::Tasks(r.key);
        }
    }

    /// `a`: the last seconds or since start.
    pub(crate) fn toggle_span(&mut self) {
        self.span = match self.span {
            Span::Recent => Span::SinceStart,
            Span::SinceStart => Span::Recent,
        };
    }

    /// `s`: the next order.
    pub(crate) fn next_sort(&mut self) {
        self.sort = self.sort.next();
    }

    /// Esc: back from a zoom. True when there was one.
    pub fn back(&mut self) -> bool {
        std::mem::replace(&mut self.zoom, Zoom::None) != Zoom::None
    }

    /// The pane's keys on `t`, of the narrowed-to processes, `page` rows at a time: moving
    /// the selection, Enter (the tasks of a symbol; on one of them, narrowing to it),
    /// `+`/`-` (callers), `s` (the next order).
    pub fn on_key(&mut self, a: Action, t: &TopSymbols, narrow: Narrowed, page: usize) -> Handled {
        if let Some(d) = scroll_delta(a, page) {
            self.selected = down(self.selected, d, t.shown_len(self, narrow));
            return Handled::Done;
        }
        match a {
            Action::Select => match &self.zoom {
                Zoom::Tasks(key) => match t.tasks_of(self.span, key).get(self.selected) {
                    Some((pid, _)) => return Handled::Narrow(*pid),
                    None => return Handled::Say(super::input::NOTHING_SELECTED),
                },
                Zoom::None => {
                    self.zoom_selected(t, narrow);
                    self.selected = 0;
                }
            },
            Action::Expand if !t.callchains => {
                return Handled::Say("callers need call chains: run with -g");
            }
            Action::Expand => self.expand(t, narrow),
            Action::Collapse => self.collapse(t, narrow),
            Action::Sort => self.next_sort(),
            _ => return Handled::Not,
        }
        Handled::Done
    }

    /// A click on row `row` of a pane showing `visible` rows.
    pub fn click(&mut self, t: &TopSymbols, narrow: Narrowed, row: usize, visible: usize) {
        let start = self.selected.saturating_sub(visible - 1);
        if start + row < t.shown_len(self, narrow) {
            self.selected = start + row;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontend::tui::app::{App, Pane, RateUnit};
    use crate::testkit::events::comm;
    use crate::testkit::named::Names;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    const NS: u64 = 1_000_000_000;

    fn shown(t: &TopSymbols, v: &SymbolsView, narrow: Narrowed) -> Vec<(usize, String, u64, u64)> {
        t.rows(v, narrow)
            .0
            .into_iter()
            .map(|r| (r.depth, r.name().to_string(), r.samples, r.self_samples))
            .collect()
    }

    #[test]
    fn without_chains_each_sample_counts_for_its_own_function() {
        let n = Names::new();
        let mut t = TopSymbols::default();
        let mut v = SymbolsView::default();
        assert!(!t.has_samples());
        for i in 0..6 {
            t.add(&n.sample(10, 100 * NS + i, &["hot"], false));
        }
        t.add(&n.sample(11, 100 * NS, &["k_read"], false));
        t.add(&n.sample(11, 100 * NS, &["hot"], false));
        assert!(t.has_samples() && !t.callchains);
        assert_eq!(
            shown(&t, &v, None),
            [(0, "hot".into(), 7, 7), (0, "k_read".into(), 1, 1)]
        );
        let (rows, total) = t.rows(&v, None);
        assert_eq!(total, 8);
        assert!((rows[0].share - 87.5).abs() < 1e-9);
        assert!(rows[1].kernel && !rows[0].kernel);
        assert_eq!(rows[0].dso(), "/usr/local/bin/spin");
        // Narrowed to pid 11: its two samples only (equal counts: by key).
        let only: rustc_hash::FxHashSet<u32> = [11].into_iter().collect();
        assert_eq!(
            shown(&t, &v, Some(&only)),
            [(0, "k_read".into(), 1, 1), (0, "hot".into(), 1, 1)]
        );
        // The tasks running hot, most first.
        let hot = t.rows(&v, Some(&only)).0[1].key;
        assert_eq!(t.tasks_of(v.span, &hot), [(10, 6), (11, 1)]);
        v.zoom_selected(&t, Some(&only));
        assert_eq!(v.zoom, Zoom::Tasks(t.rows(&v, Some(&only)).0[0].key));
        assert!(v.back() && v.zoom == Zoom::None && !v.back());
    }

    #[test]
    fn the_window_forgets_and_since_start_remembers() {
        let n = Names::new();
        let mut t = TopSymbols::new(10);
        let mut v = SymbolsView::default();
        t.add(&n.sample(1, 100 * NS, &["early"], false));
        t.add(&n.sample(1, 120 * NS, &["late"], false));
        assert_eq!(shown(&t, &v, None), [(0, "late".into(), 1, 1)]);
        v.toggle_span();
        assert_eq!(shown(&t, &v, None).len(), 2);
    }

    #[test]
    fn with_chains_children_and_self_and_callers_open_and_close() {
        let n = Names::new();
        let mut t = TopSymbols::default();
        let mut v = SymbolsView::default();
        for _ in 0..3 {
            t.add(&n.sample(1, NS, &["hot", "middle", "main"], true));
        }
        t.add(&n.sample(1, NS, &["cold", "main"], true));
        assert!(t.callchains);
        assert_eq!(
            shown(&t, &v, None),
            [
                (0, "main".into(), 4, 0),
                (0, "hot".into(), 3, 3),
                (0, "middle".into(), 3, 0),
                (0, "cold".into(), 1, 1),
            ]
        );
        // Sorted by self, select hot (first), open its callers, then middle's.
        v.next_sort();
        v.selected = 0;
        v.expand(&t, None);
        v.selected = 1;
        v.expand(&t, None);
        assert_eq!(
            shown(&t, &v, None)[..4],
            [
                (0, "hot".into(), 3, 3),
                (1, "middle".into(), 3, 0),
                (2, "main".into(), 3, 0),
                (0, "cold".into(), 1, 1),
            ]
        );
        assert!(t.rows(&v, None).0[0].expanded && t.rows(&v, None).0[1].expanded);
        // `-` on main (not open): closes middle and selects it; again: closes hot.
        v.selected = 2;
        v.collapse(&t, None);
        assert_eq!(v.selected, 1);
        assert_eq!(shown(&t, &v, None)[1], (1, "middle".into(), 3, 0));
        assert_eq!(shown(&t, &v, None)[2].0, 0);
        v.selected = 0;
        v.collapse(&t, None);
        assert_eq!(shown(&t, &v, None)[1].0, 0);
        // Sorting by binary: the kernel's [..] before paths, then names.
        v.next_sort();
        assert_eq!(v.sort, SortBy::Dso);
        assert_eq!(shown(&t, &v, None)[0].1, "cold");
    }

    #[test]
    fn the_pane_beside_the_task_stream_on_160x45() {
        use ratatui::{Terminal, backend::TestBackend};
        let n = Names::new();
        let cfg = crate::frontend::tui::app::tests::cfg(RateUnit::Utilisation, 1000);
        let mut app = App::new(cfg);
        let t0 = 100 * NS;
        let mut evs = vec![
            comm(0, t0, 4242, b"spin", true),
            comm(1, t0, 77, b"dd", true),
        ];
        for i in 0..400u64 {
            let t = t0 + 1_000_000 * (i + 1);
            let (pid, chain): (u32, &[&str]) = match i % 8 {
                0..=4 => (4242, &["hot_b", "middle", "main"]),
                5 => (4242, &["hot_a", "main"]),
                6 => (77, &["k_copy_to_user", "k_vfs_read", "k_ksys_read"]),
                _ => (77, &["k_vfs_write", "k_ksys_write"]),
            };
            evs.push(n.sample(pid, t, chain, true));
        }
        app.on_events(evs);
        app.on_tick(t0 + NS / 2 + 400 * 1_000_000);
        app.focus = Pane::Symbols;
        app.on_key(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::NONE));
        app.on_key(KeyEvent::new(KeyCode::Char('+'), KeyModifiers::NONE));
        let mut term = Terminal::new(TestBackend::new(160, 45)).unwrap();
        crate::frontend::tui::ui::render(&mut term, &mut app).unwrap();
        let text: Vec<String> = term
            .backend()
            .buffer()
            .content
            .chunks(160)
            .map(|row| row.iter().map(|c| c.symbol()).collect())
            .collect();
        insta::assert_debug_snapshot!(&text[7..20]);
    }
}
