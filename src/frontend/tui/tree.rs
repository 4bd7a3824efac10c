//! The process tree (`t`): live processes as parent → children, threads folded into a count,
//! processes that started or exited in the last seconds marked (htop's tree, forkstat's
//! marks), and the set of a process and its descendants that Enter narrows the views to.
//!
//! A parent's exited children are folded into one row when there are more than
//! [`FOLD_EXITED`] of them (`+5912 exited: true ×5900, sh ×12`, as forkstat summarises): a
//! fork storm of short-lived programs is one row, not thousands. Those with children of
//! their own still shown stay rows of their own.
//!
//! Drawn from a [`TreeIndex`]: each process's parent and its children in pid order, kept
//! from the model's log of processes that came, went or changed parent
//! ([`ProcessModel::tree_changes`]), so a frame neither collects nor sorts the processes.
//! A frame walks the index once (which processes are shown depends on the time: the
//! recently exited, the not yet started of a replay) into light rows, and only the rows it
//! draws get their guides and names ([`name_rows`]): at 20 000 processes, building and
//! naming every row on every frame was most of a frame.

use std::collections::BTreeSet;

use rustc_hash::{FxHashMap, FxHashSet};

use super::input::{Action, Handled, down, scroll_delta};
use crate::process::tree_log::TreeCursor;
use crate::process::{Comm, Process, ProcessModel};

/// How long a process that started or exited stays marked, in ns.
pub(crate) const RECENT_NS: u64 = 5_000_000_000;

/// pid 2: the kernel threads' parent. Its children are folded into a count.
const KTHREADD: u32 = 2;
/// A parent's exited children are shown one by one up to this many, else as one row.
pub const FOLD_EXITED: usize = 3;
/// Names the row of folded exited children lists, the most frequent first.
const FOLD_NAMES: usize = 3;

/// How a row is marked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    None,
    /// Started in the last [`RECENT_NS`].
    New,
    /// Exited (kept by the model for a while after).
    Exited,
}

/// No row: a root's [`TreeRow::up`].
const NO_ROW: u32 = u32::MAX;

/// One row of the tree, ready to draw once named ([`name_rows`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeRow {
    pub pid: u32,
    /// The guides before the name: `│  ├─ ` (empty until [`name_rows`]).
    pub prefix: String,
    /// The row of the process it is shown under ([`NO_ROW`]: a root).
    pub up: u32,
    /// It is the last row under `up` (its guide is `└─`).
    pub last: bool,
    /// The name, or the command line when it was read (escaped).
    pub name: String,
    /// The same, its first argument without its directory (for a narrow column).
    pub short: String,
    /// Threads besides the main one (with the name: [`name_rows`]).
    pub threads: u32,
    pub mark: Mark,
    /// Kernel threads folded under this row (kthreadd).
    pub folded: usize,
    /// A row that stands for this many exited children of `pid` (its `name` says which).
    pub exited: usize,
}

/// The name of the row that stands for a parent's exited children: how many, and how many of
/// each name, the most frequent first.
fn exited_summary(model: &ProcessModel, pids: &[u32]) -> String {
    // Counted by the kernel's name as kept (no string per process: a fork storm's thousands
    // of exited children are counted on every frame), written out for the few shown.
    let mut by_comm: FxHashMap<Option<Comm>, usize> = FxHashMap::default();
    for &pid in pids {
        *by_comm.entry(model.comm(pid).copied()).or_default() += 1;
    }
    let mut by_name: FxHashMap<String, usize> = FxHashMap::default();
    for (comm, n) in by_comm {
        let name = comm.map_or_else(|| "?".to_string(), |c| c.display());
        *by_name.entry(name).or_default() += n;
    }
    let mut names: Vec<(String, usize)> = by_name.into_iter().collect();
    names.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut text = format!("+{} exited: ", pids.len());
    for (i, (name, n)) in names.iter().take(FOLD_NAMES).enumerate() {
        if i > 0 {
            text.push_str(", ");
        }
        text.push_str(&format!("{name} ×{n}"));
    }
    if names.len() > FOLD_NAMES {
        text.push_str(&format!(", +{} more names", names.len() - FOLD_NAMES));
    }
    text
}

/// The name a row shows, whole and short (the command's first argument without its
/// directory, for a narrow column).
fn shown_name(model: &ProcessModel, p: &Process) -> (String, String) {
    let comm = model
        .comm(p.pid)
        .map_or_else(|| "?".to_string(), |c| c.display());
    match p.argv.as_deref() {
        Some(argv) if !argv.is_gone() => (argv.line(), argv.short_line()),
        _ => (comm.clone(), comm),
    }
}

/// Which processes are shown: the live ones, and those that exited in the last
/// [`RECENT_NS`] (marked). A process known from `/proc` at start whose exit the stream cannot
/// tell (it is not watched) is live while `alive` says so.
/// A replay's model knows a little of what comes after its position: a process that starts
/// later is not shown yet, one that exits later is live.
#[cfg(test)]
fn shown(p: &Process, now: u64, alive: &dyn Fn(u32) -> bool) -> bool {
    shown_at(p.pid, p.start(), p.exit(), now, alive)
}

/// [`shown`] of process `pid` started at `start` and exited at `exit`.
fn shown_at(
    pid: u32,
    start: Option<u64>,
    exit: Option<u64>,
    now: u64,
    alive: &dyn Fn(u32) -> bool,
) -> bool {
    if start.is_some_and(|s| s > now) {
        return false;
    }
    match exit {
        Some(e) if e <= now => now - e <= RECENT_NS,
        Some(_) => true,
        None => start.is_some() || alive(pid),
    }
}

/// Whether `p` had exited by `now`.
#[cfg(test)]
fn exited(p: &Process, now: u64) -> bool {
    p.exit().is_some_and(|e| e <= now)
}

/// How a process started at `start` and exited at `exit` is marked at `now`.
fn mark_at(start: Option<u64>, exit: Option<u64>, now: u64) -> Mark {
    if exit.is_some_and(|e| e <= now) {
        Mark::Exited
    } else if start.is_some_and(|s| now.saturating_sub(s) <= RECENT_NS) {
        Mark::New
    } else {
        Mark::None
    }
}

/// The guides before a name, from its ancestors' (true where that ancestor was a last child,
/// its own last).
fn guides_prefix(guides: &[bool]) -> String {
    let mut prefix = String::new();
    if let Some((last, above)) = guides.split_last() {
        for &l in above {
            prefix.push_str(if l { "   " } else { "│  " });
        }
        prefix.push_str(if *last { "└─ " } else { "├─ " });
    }
    prefix
}

/// The tree's selection (the view's, one whether paused or not).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TreeView {
    /// The selected row, from the top.
    pub sel: usize,
    /// The process on that row: the selection follows it when rows above come and go.
    pub pid: Option<u32>,
    /// The selected row is the one of that process's folded exited children.
    pub exited: bool,
}

impl TreeView {
    /// The selected row of `rows` (the tree as shown now): the selected process's, while
    /// it is in the tree, else the same place.
    pub fn selected(&self, rows: &[TreeRow]) -> usize {
        self.pid
            .and_then(|pid| {
                rows.iter()
                    .position(|r| r.pid == pid && (r.exited > 0) == self.exited)
            })
            .unwrap_or(self.sel)
            .min(rows.len().saturating_sub(1))
    }

    fn select_row(&mut self, rows: &[TreeRow], i: usize) {
        self.sel = i;
        self.pid = rows.get(i).map(|r| r.pid);
        self.exited = rows.get(i).is_some_and(|r| r.exited > 0);
    }

    /// The tree's keys on `rows` shown `page` at a time: moving the selection, Enter on
    /// a process.
    pub fn on_key(&mut self, a: Action, rows: &[TreeRow], page: usize) -> Handled {
        if let Some(d) = scroll_delta(a, page) {
            self.select_row(rows, down(self.selected(rows), d, rows.len()));
            return Handled::Done;
        }
        match a {
            Action::Select => match rows.get(self.selected(rows)) {
                Some(r) => Handled::Narrow(r.pid),
                None => Handled::Say(super::input::NOTHING_SELECTED),
            },
            _ => Handled::Not,
        }
    }

    /// A click on row `row` of a pane showing `visible` rows.
    pub fn click(&mut self, rows: &[TreeRow], row: usize, visible: usize) {
        let start = self.selected(rows).saturating_sub(visible - 1);
        if rows.get(start + row).is_some() {
            self.select_row(rows, start + row);
        }
    }
}

/// The tree as of `now` (CLOCK_MONOTONIC ns, the records' clock), depth first, children
/// by pid, every row named (from an index built for the call: tests, keys).
pub fn rows(model: &ProcessModel, now: u64, alive: &dyn Fn(u32) -> bool) -> Vec<TreeRow> {
    let mut index = TreeIndex::default();
    index.sync(model);
    let mut out = index.rows_unnamed(model, now, alive);
    let all = 0..out.len();
    name_rows(model, &mut out, all);
    out
}

/// Fill in the guides and names of `rows[range]` (of [`TreeIndex::rows_unnamed`]): a frame
/// names the rows it shows only. A process's name is its command line, escaped.
pub fn name_rows(model: &ProcessModel, rows: &mut [TreeRow], range: std::ops::Range<usize>) {
    let end = range.end.min(rows.len());
    let mut guides = Vec::new();
    for i in range.start.min(end)..end {
        // The guides: whether each row on the way up was the last under its own.
        guides.clear();
        let mut at = i;
        while let Some(r) = rows.get(at).filter(|r| r.up != NO_ROW) {
            guides.push(r.last);
            at = r.up as usize;
            if guides.len() > rows.len() {
                break; // never: `up` always points to an earlier row
            }
        }
        guides.reverse();
        let r = &mut rows[i];
        r.prefix = guides_prefix(&guides);
        if r.exited == 0 && r.name.is_empty() {
            if let Some(p) = model.process(r.pid) {
                (r.name, r.short) = shown_name(model, p);
                r.threads = p.threads.saturating_sub(1);
            }
        }
    }
}

/// No parent in the index.
const NO_PARENT: u32 = u32::MAX;

/// A process in the [`TreeIndex`]: what a frame's walk needs of it, so that the walk does
/// not look every process up in the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Node {
    /// Its parent as the model says ([`NO_PARENT`]: none known).
    parent: u32,
    start: Option<u64>,
    exit: Option<u64>,
    /// Shown on the frame being built.
    shown: bool,
    /// Walked on the frame being built.
    seen: bool,
}

/// The model's processes as a tree (each one's parent, each parent's children by pid), kept
/// up to date from the model's log of changes ([`ProcessModel::tree_changes`]); rebuilt
/// from every process when the log cannot say (another model, a reader that lagged).
#[derive(Debug, Default)]
pub struct TreeIndex {
    cursor: Option<TreeCursor>,
    nodes: FxHashMap<u32, Node>,
    /// By parent pid (also one the model does not know), its children.
    children: FxHashMap<u32, BTreeSet<u32>>,
}

impl TreeIndex {
    /// Catch up with `model`.
    pub fn sync(&mut self, model: &ProcessModel) {
        let changes = self.cursor.and_then(|c| model.tree_changes(c));
        match changes {
            Some((pids, next)) => {
                for pid in pids {
                    self.update(model, pid);
                }
                self.cursor = Some(next);
            }
            None => {
                self.nodes.clear();
                self.children.clear();
                for p in model.each_process() {
                    self.update(model, p.pid);
                }
                self.cursor = Some(model.tree_cursor());
            }
        }
    }

    /// Processes in the index.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Process `pid` as the model has it now: there or not, under which parent, when it
    /// started and exited.
    fn update(&mut self, model: &ProcessModel, pid: u32) {
        let found = model.process(pid).map(|p| {
            let parent = p.ppid().filter(|&pp| pp != pid).unwrap_or(NO_PARENT);
            (parent, p.start(), p.exit())
        });
        let old = self.nodes.get(&pid).map(|n| (n.parent, n.start, n.exit));
        if found == old {
            return;
        }
        let now = found.map(|f| f.0);
        let before = old.map(|o| o.0);
        if now == before {
            if let (Some(n), Some((_, start, exit))) = (self.nodes.get_mut(&pid), found) {
                (n.start, n.exit) = (start, exit);
            }
            return;
        }
        if let Some(pp) = before.filter(|&pp| pp != NO_PARENT) {
            if let Some(kids) = self.children.get_mut(&pp) {
                kids.remove(&pid);
                if kids.is_empty() {
                    self.children.remove(&pp);
                }
            }
        }
        match found {
            Some((parent, start, exit)) => {
                let node = Node {
                    parent,
                    start,
                    exit,
                    shown: false,
                    seen: false,
                };
                self.nodes.insert(pid, node);
                if parent != NO_PARENT {
                    self.children.entry(parent).or_default().insert(pid);
                }
            }
            None => {
                self.nodes.remove(&pid);
            }
        }
    }

    fn shown(&self, pid: u32) -> bool {
        self.nodes.get(&pid).is_some_and(|n| n.shown)
    }

    /// The shown children of `pid`, by pid.
    fn shown_kids(&self, pid: u32) -> Vec<u32> {
        let kids = self.children.get(&pid).into_iter().flatten();
        kids.copied().filter(|&k| self.shown(k)).collect()
    }

    /// Mark `pid` walked; false when it already was.
    fn see(&mut self, pid: u32) -> bool {
        match self.nodes.get_mut(&pid) {
            Some(n) if !n.seen => {
                n.seen = true;
                true
            }
            _ => false,
        }
    }

    /// The tree as of `now` (CLOCK_MONOTONIC ns, the records' clock), depth first, children
    /// by pid, without guides and the processes' names (see [`name_rows`]); the rows that
    /// stand for exited children are named. The index must be in step with `model`
    /// ([`TreeIndex::sync`]).
    pub fn rows_unnamed(
        &mut self,
        model: &ProcessModel,
        now: u64,
        alive: &dyn Fn(u32) -> bool,
    ) -> Vec<TreeRow> {
        let mut count = 0;
        for (pid, n) in self.nodes.iter_mut() {
            n.shown = shown_at(*pid, n.start, n.exit, now, alive);
            n.seen = false;
            count += n.shown as usize;
        }
        // A root: shown, under no shown parent.
        let mut roots: Vec<u32> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.shown && !self.shown(n.parent))
            .map(|(pid, _)| *pid)
            .collect();
        roots.sort_unstable();
        let mut out = Vec::with_capacity(count);
        // (pid, the row it is shown under, last under it, or the pids of folded exited
        // children).
        let mut stack: Vec<(u32, u32, bool, Option<Vec<u32>>)> = roots
            .iter()
            .rev()
            .map(|&r| (r, NO_ROW, false, None))
            .collect();
        // What no root leads to (a parent cycle in bad data) is walked from its lowest pid.
        let mut rest: Option<Vec<u32>> = None;
        loop {
            let item = match stack.pop() {
                Some(item) => item,
                None => {
                    let rest = rest.get_or_insert_with(|| {
                        let mut v: Vec<u32> = (self.nodes.iter())
                            .filter(|(_, n)| n.shown && !n.seen)
                            .map(|(pid, _)| *pid)
                            .collect();
                        v.sort_unstable_by(|a, b| b.cmp(a));
                        v
                    });
                    match rest.pop() {
                        Some(p) if self.nodes.get(&p).is_some_and(|n| !n.seen) => {
                            (p, NO_ROW, false, None)
                        }
                        Some(_) => continue,
                        None => break,
                    }
                }
            };
            let (pid, up, last, gone) = item;
            if let Some(gone) = gone {
                let name = exited_summary(model, &gone);
                out.push(TreeRow {
                    pid,
                    prefix: String::new(),
                    up,
                    last,
                    short: name.clone(),
                    name,
                    threads: 0,
                    mark: Mark::Exited,
                    folded: 0,
                    exited: gone.len(),
                });
                continue;
            }
            if !self.see(pid) {
                continue; // a cycle in corrupt data: never loop
            }
            let Some(&node) = self.nodes.get(&pid) else {
                continue;
            };
            let kids = self.shown_kids(pid);
            let fold = pid == KTHREADD;
            let mark = mark_at(node.start, node.exit, now);
            let row = out.len() as u32;
            out.push(TreeRow {
                pid,
                prefix: String::new(),
                up,
                last,
                name: String::new(),
                short: String::new(),
                threads: 0, // with the name
                mark,
                folded: if fold { kids.len() } else { 0 },
                exited: 0,
            });
            if fold {
                // Folded: neither they nor what is below them are walked again.
                let mut todo = kids;
                while let Some(k) = todo.pop() {
                    if self.see(k) {
                        todo.extend(self.shown_kids(k));
                    }
                }
                continue;
            }
            // Exited children with nothing shown below them: one row, after the others,
            // when they are many.
            let (gone, shown): (Vec<u32>, Vec<u32>) = kids.iter().partition(|&&k| {
                let exited = self.nodes.get(&k).and_then(|n| n.exit);
                exited.is_some_and(|e| e <= now)
                    && (self.children.get(&k).into_iter().flatten()).all(|&c| !self.shown(c))
            });
            let (gone, kids) = if gone.len() > FOLD_EXITED {
                (gone, shown)
            } else {
                (Vec::new(), kids)
            };
            let folded_row = !gone.is_empty();
            if folded_row {
                for &g in &gone {
                    self.see(g);
                }
                stack.push((pid, row, true, Some(gone)));
            }
            for (i, &k) in kids.iter().enumerate().rev() {
                stack.push((k, row, i + 1 == kids.len() && !folded_row, None));
            }
        }
        out
    }
}

/// `pid` and every process below it that the model knows (live or kept).
pub fn descendants(model: &ProcessModel, pid: u32) -> FxHashSet<u32> {
    let mut children: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
    for p in model.each_process() {
        if let Some(pp) = p.ppid() {
            children.entry(pp).or_default().push(p.pid);
        }
    }
    let mut set = FxHashSet::default();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        if set.insert(p) {
            todo.extend(children.get(&p).into_iter().flatten().copied());
        }
    }
    set
}

#[cfg(test)]
#[path = "tree_scratch.rs"]
mod scratch;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::process::proc::SeedProcess;
    use crate::testkit::events as tk;

    const S: u64 = 1_000_000_000;
    const T0: u64 = 1_000 * S;

    /// A machine's processes as `(pid, parent, name)`: a login chain, a second child of
    /// init, kernel threads under kthreadd and a process whose parent is not in the list.
    pub(crate) const FAMILY: &[(u32, Option<u32>, &str)] = &[
        (1, Some(0), "systemd"),
        (2, Some(0), "kthreadd"),
        (3, Some(2), "rcu_gp"),
        (4, Some(2), "kworker/0:0"),
        (100, Some(1), "sshd"),
        (101, Some(100), "bash"),
        (102, Some(101), "make"),
        (110, Some(1), "cron"),
        (200, Some(99), "orphan"),
    ];

    /// A model that knows `(pid, ppid, comm)` from a /proc snapshot.
    pub(crate) fn seeded(list: &[(u32, Option<u32>, &str)]) -> ProcessModel {
        let mut m = ProcessModel::new();
        m.seed(
            list.iter()
                .map(|(pid, ppid, comm)| SeedProcess {
                    pid: *pid,
                    ppid: *ppid,
                    threads: vec![(*pid, comm.as_bytes().into())],
                    maps: Vec::new(),
                    argv: None,
                    exe: None,
                    cgroup: None,
                })
                .collect(),
        );
        m
    }

    fn lines(rows: &[TreeRow]) -> Vec<String> {
        rows.iter()
            .map(|r| {
                let mark = match r.mark {
                    Mark::None => "",
                    Mark::New => " +",
                    Mark::Exited => " x",
                };
                format!("{}{} {}{mark}", r.prefix, r.pid, r.name)
            })
            .collect()
    }

    #[test]
    fn parents_over_children_with_guides_and_kernel_threads_folded() {
        let m = seeded(FAMILY);
        let rows = rows(&m, T0, &|_| true);
        assert_eq!(
            lines(&rows),
            [
                "1 systemd",
                "├─ 100 sshd",
                "│  └─ 101 bash",
                "│     └─ 102 make",
                "└─ 110 cron",
                "2 kthreadd",
                "200 orphan",
            ]
        );
        assert_eq!(rows[5].folded, 2);
    }

    #[test]
    fn new_and_exited_processes_are_marked_then_forgotten() {
        let mut m = seeded(&[(1, Some(0), "init"), (100, Some(1), "bash")]);
        m.apply(&[
            tk::fork(0, T0, 300, 100),
            tk::comm(0, T0 + 1, 300, b"sleep", true),
            tk::fork(0, T0 + 2, 301, 100),
            tk::exit(0, T0 + S, 301, 100),
        ]);
        let argv = crate::cmdline::CmdLine::new(b"sleep\x005", 0, crate::cmdline::ArgvSource::Exec);
        m.set_argv(300, T0 + 1, argv.shared());
        assert_eq!(
            lines(&rows(&m, T0 + 2 * S, &|_| true)),
            [
                "1 init",
                "└─ 100 bash",
                "   ├─ 300 sleep 5 +",
                "   └─ 301 bash x"
            ]
        );
        // 10 s on: no longer new, and the exited one is gone from the tree.
        assert_eq!(
            lines(&rows(&m, T0 + 10 * S, &|_| true)),
            ["1 init", "└─ 100 bash", "   └─ 300 sleep 5"]
        );
    }

    #[test]
    fn a_replay_shows_the_tree_as_of_its_position_not_as_of_what_its_model_knows() {
        let mut m = seeded(&[(1, Some(0), "init"), (100, Some(1), "bash")]);
        m.apply(&[
            tk::fork(0, T0 + S, 301, 100),
            tk::exit(0, T0 + 3 * S, 301, 100),
        ]);
        let at = |t| lines(&rows(&m, t, &|_| true));
        assert_eq!(at(T0), ["1 init", "└─ 100 bash"], "not started yet");
        assert_eq!(
            at(T0 + 2 * S),
            ["1 init", "└─ 100 bash", "   └─ 301 bash +"],
            "live: its exit is later"
        );
        assert_eq!(
            at(T0 + 4 * S),
            ["1 init", "└─ 100 bash", "   └─ 301 bash x"]
        );
    }

    #[test]
    fn a_fork_storm_is_one_row_per_parent_and_a_few_exits_stay_rows() {
        let mut m = seeded(&[(1, Some(0), "init"), (100, Some(1), "bash")]);
        let mut evs = Vec::new();
        // bash runs 5900 `true`, 12 `sh` (one of which has a live child) and a live sleep.
        for i in 0..5900u32 {
            let t = T0 + u64::from(i) * 1000;
            evs.push(tk::fork(0, t, 1000 + i, 100));
            evs.push(tk::comm(0, t + 1, 1000 + i, b"true", true));
            evs.push(tk::exit(0, t + 2, 1000 + i, 100));
        }
        for i in 0..12u32 {
            let t = T0 + S + u64::from(i) * 1000;
            evs.push(tk::fork(0, t, 8000 + i, 100));
            evs.push(tk::comm(0, t + 1, 8000 + i, b"sh", true));
            evs.push(tk::exit(0, t + 5, 8000 + i, 100));
        }
        evs.push(tk::fork(0, T0 + S + 50_000, 9000, 8003));
        evs.push(tk::fork(0, T0 + 2 * S, 9500, 100));
        evs.push(tk::comm(0, T0 + 2 * S + 1, 9500, b"sleep", true));
        // A parent with three exited children keeps them as rows.
        for i in 0..3u32 {
            evs.push(tk::fork(0, T0 + 2 * S + 10 + u64::from(i), 9600 + i, 1));
            evs.push(tk::exit(0, T0 + 2 * S + 20 + u64::from(i), 9600 + i, 1));
        }
        m.apply(&evs);
        let r = rows(&m, T0 + 3 * S, &|_| true);
        assert_eq!(
            lines(&r),
            [
                "1 init",
                "├─ 100 bash",
                "│  ├─ 8003 sh x",
                "│  │  └─ 9000 sh +",
                "│  ├─ 9500 sleep +",
                "│  └─ 100 +5911 exited: true ×5900, sh ×11 x",
                "├─ 9600 init x",
                "├─ 9601 init x",
                "└─ 9602 init x",
            ]
        );
        assert_eq!(r[5].exited, 5911);
        assert_eq!(
            r.iter().map(|r| r.exited.max(1)).sum::<usize>(),
            1 + 1 + 5900 + 12 + 1 + 1 + 3,
            "every process counted"
        );
    }

    #[test]
    fn the_row_of_exited_children_lists_the_most_frequent_names_first() {
        let mut m = seeded(&[(1, Some(0), "init")]);
        let names: [&[u8]; 6] = [b"a", b"b", b"b", b"c", b"d", b"d"];
        for (i, n) in names.iter().enumerate() {
            let (pid, t) = (10 + i as u32, T0 + i as u64 * 10);
            m.apply(&[
                tk::fork(0, t, pid, 1),
                tk::comm(0, t + 1, pid, n, true),
                tk::exit(0, t + 2, pid, 1),
            ]);
        }
        let r = rows(&m, T0 + S, &|_| true);
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].name, "+6 exited: b ×2, d ×2, a ×1, +1 more names");
    }

    #[test]
    fn threads_are_folded_into_their_process() {
        let mut m = seeded(&[(1, Some(0), "init")]);
        m.apply(&[
            tk::fork(0, T0, 50, 1),
            tk::thread(0, T0 + 1, 50, 51, 50),
            tk::thread(0, T0 + 2, 50, 52, 50),
        ]);
        let r = rows(&m, T0 + 10 * S, &|_| true);
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!((r[1].pid, r[1].threads), (50, 2));
    }

    #[test]
    fn processes_from_proc_that_went_are_dropped_when_their_exit_cannot_be_seen() {
        let mut m = seeded(FAMILY);
        m.apply(&[tk::fork(0, T0, 300, 1)]);
        let r = rows(&m, T0 + 10 * S, &|pid| pid != 110);
        assert_eq!(
            lines(&r),
            [
                "1 systemd",
                "├─ 100 sshd",
                "│  └─ 101 bash",
                "│     └─ 102 make",
                "└─ 300 systemd",
                "2 kthreadd",
                "200 orphan",
            ],
            "cron went"
        );
    }

    #[test]
    fn descendants_of_a_process() {
        let m = seeded(FAMILY);
        let mut d: Vec<u32> = descendants(&m, 100).into_iter().collect();
        d.sort_unstable();
        assert_eq!(d, [100, 101, 102]);
        assert_eq!(descendants(&m, 999).len(), 1, "itself, even unknown");
    }

    #[test]
    fn a_parent_cycle_in_bad_data_ends() {
        let m = seeded(&[(5, Some(6), "x"), (6, Some(5), "y")]);
        assert_eq!(lines(&rows(&m, T0, &|_| true)), ["5 x", "└─ 6 y"]);
        assert_eq!(descendants(&m, 5).len(), 2);
    }
}
