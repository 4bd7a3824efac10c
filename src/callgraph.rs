//! Call graphs for a live view: each symbol's *Self* and *Children* samples, and the callers
//! of a symbol as a tree, over the last seconds or since start (what `perf top -g` shows).
//!
//! [`CallGraph`] is pure and generic over the symbol key `K` (the TUI passes the
//! symbolizer's keys; the tests pass strings). A sample is added as its chain of symbols,
//! innermost first, with a *tag* (the process it came from), so that a view narrowed to some
//! processes counts only theirs. Chains are interned: a program has few distinct call paths,
//! and a sample then costs a hash of its chain and a counter in the bucket of its second.
//!
//! - *Self* of a symbol: the samples whose innermost frame is that symbol.
//! - *Children* (inclusive): the samples with that symbol anywhere in the chain, each sample
//!   counted once however often the symbol recurs in it.
//! - The *callers* of a symbol: from its innermost occurrence in each chain, outwards, merged
//!   into a tree whose nodes count the samples that passed through that call path.
//!
//! Memory is bounded: at most `max_entries` symbol keys are kept in interned chains (a
//! chain's length each); samples of new chains beyond that are counted as not kept, never
//! silently lost. The per-second buckets cover the window only.
//!
//! [`CallGraph::top`] is read once a frame, [`CallGraph::add`] once a sample: so each
//! symbol's Self and Children are kept as running counts (since start and over the window,
//! the window's taken back as its oldest second leaves), and the view over all tasks is a
//! walk over the symbols, not over every chain and its frames. A view narrowed to some
//! tasks (rare, chosen by hand) still sums the chains.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash};

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Symbol keys kept in interned chains by default: with 16-byte keys, 8 MiB.
pub(crate) const MAX_ENTRIES: usize = 1 << 19;

/// Frames of one chain looked at, at most, for Children and the callers tree (the kernel's
/// own limit is 127 by default).
pub(crate) const MAX_DEPTH: usize = 256;

/// Over which time the counts are taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Span {
    /// The last `window` seconds (those with samples in them), up to the newest sample.
    Recent,
    /// Everything since the start.
    SinceStart,
}

/// One symbol's counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Row<K> {
    pub key: K,
    /// Samples in which this symbol was the innermost frame.
    pub self_samples: u64,
    /// Samples in which this symbol was anywhere in the chain (once per sample).
    pub children: u64,
}

/// Which samples count: all, or only those of the tags a predicate keeps.
pub(crate) type TagFilter<'a> = Option<&'a dyn Fn(u32) -> bool>;

/// A chain as interned: the tag it came with, and its symbols, innermost first.
#[derive(Clone, Debug)]
struct Path<K> {
    tag: u32,
    keys: Box<[K]>,
    /// Its symbols' indices (in [`CallGraph::syms`]), each once: what a sample of this
    /// chain adds to Children. The innermost one (Self) is first.
    uniq: Box<[u32]>,
}

/// One symbol's running counts: (Self, Children) since start and over the window.
#[derive(Clone, Copy, Debug, Default)]
struct SymCounts {
    total: (u64, u64),
    recent: (u64, u64),
}

/// Samples by call chain, over time.
#[derive(Clone)]
pub(crate) struct CallGraph<K> {
    paths: Vec<Path<K>>,
    /// Chain ids by the hash of (tag, chain): looked up without building a key.
    ids: FastMap<u64, Vec<u32>>,
    hasher: foldhash::fast::FixedState,
    entries: usize,
    max_entries: usize,
    /// Samples per interned chain since start, by chain id.
    total: Vec<u64>,
    /// (second, samples per chain id in that second), oldest first, within the window.
    recent: VecDeque<(u64, FastMap<u32, u32>)>,
    /// The symbols of the interned chains, by index, and their running counts.
    syms: Vec<K>,
    sym_ids: FastMap<K, u32>,
    counts_by_sym: Vec<SymCounts>,
    /// Samples of kept chains since start, and in the window's buckets.
    kept_total: u64,
    kept_recent: u64,
    window: u64,
    newest: u64,
    samples: u64,
    not_kept: u64,
}

impl<K: Clone + Eq + Hash + Ord> CallGraph<K> {
    /// A graph whose [`Span::Recent`] covers `window_seconds` (at least 1).
    pub fn new(window_seconds: u64) -> CallGraph<K> {
        CallGraph::with_budget(window_seconds, MAX_ENTRIES)
    }

    /// The same, keeping at most `max_entries` symbol keys in interned chains.
    pub(crate) fn with_budget(window_seconds: u64, max_entries: usize) -> CallGraph<K> {
        CallGraph {
            paths: Vec::new(),
            ids: FastMap::default(),
            hasher: foldhash::fast::FixedState::default(),
            entries: 0,
            max_entries,
            total: Vec::new(),
            recent: VecDeque::new(),
            syms: Vec::new(),
            sym_ids: FastMap::default(),
            counts_by_sym: Vec::new(),
            kept_total: 0,
            kept_recent: 0,
            window: window_seconds.max(1),
            newest: 0,
            samples: 0,
            not_kept: 0,
        }
    }

    /// Add one sample taken at `second` (any monotonic count of seconds), from `tag`, whose
    /// chain of symbols is `chain`, innermost first. An empty chain is not a sample.
    pub fn add(&mut self, second: u64, tag: u32, chain: &[K]) {
        if chain.is_empty() {
            return;
        }
        self.samples += 1;
        let chain = &chain[..chain.len().min(MAX_DEPTH)];
        let id = match self.id_of(tag, chain) {
            Some(id) => id,
            None => {
                self.not_kept += 1;
                return;
            }
        };
        self.total[id as usize] += 1;
        self.kept_total += 1;
        self.count_syms(id, 1, true);
        if second > self.newest {
            self.newest = second;
            while self
                .recent
                .front()
                .is_some_and(|(s, _)| s + self.window <= second)
            {
                if let Some((_, bucket)) = self.recent.pop_front() {
                    for (id, n) in bucket {
                        self.uncount_recent(id, u64::from(n));
                    }
                }
            }
        }
        if second + self.window <= self.newest {
            return; // older than the window: counted since start only
        }
        self.count_syms(id, 1, false);
        self.kept_recent += 1;
        let at = self.recent.iter().rposition(|(s, _)| *s <= second);
        let bucket = match at {
            Some(i) if self.recent[i].0 == second => &mut self.recent[i].1,
            Some(i) => {
                self.recent.insert(i + 1, (second, FastMap::default()));
                &mut self.recent[i + 1].1
            }
            None => {
                self.recent.push_front((second, FastMap::default()));
                &mut self.recent[0].1
            }
        };
        *bucket.entry(id).or_insert(0) += 1;
    }

    /// Add `n` samples of chain `id` to its symbols' counts since start (`total`) or in the
    /// window.
    fn count_syms(&mut self, id: u32, n: u64, total: bool) {
        let uniq = &self.paths[id as usize].uniq;
        for (i, &s) in uniq.iter().enumerate() {
            let c = &mut self.counts_by_sym[s as usize];
            let c = if total { &mut c.total } else { &mut c.recent };
            if i == 0 {
                c.0 += n;
            }
            c.1 += n;
        }
    }

    /// Take `n` samples of chain `id` out of the window's counts (its second left it).
    fn uncount_recent(&mut self, id: u32, n: u64) {
        self.kept_recent -= n;
        let uniq = &self.paths[id as usize].uniq;
        for (i, &s) in uniq.iter().enumerate() {
            let c = &mut self.counts_by_sym[s as usize].recent;
            if i == 0 {
                c.0 -= n;
            }
            c.1 -= n;
        }
    }

    fn sym_id(&mut self, k: &K) -> u32 {
        if let Some(&i) = self.sym_ids.get(k) {
            return i;
        }
        let i = self.syms.len() as u32;
        self.syms.push(k.clone());
        self.sym_ids.insert(k.clone(), i);
        self.counts_by_sym.push(SymCounts::default());
        i
    }

    fn id_of(&mut self, tag: u32, chain: &[K]) -> Option<u32> {
        // The common case is a chain seen before: no allocation for it.
        let hash = self.hasher.hash_one((tag, chain));
        if let Some(ids) = self.ids.get(&hash) {
            let paths = &self.paths;
            if let Some(&id) = ids.iter().find(|&&id| {
                let p = &paths[id as usize];
                p.tag == tag && *p.keys == *chain
            }) {
                return Some(id);
            }
        }
        if self.entries + chain.len() > self.max_entries || self.paths.len() >= u32::MAX as usize {
            return None;
        }
        let id = self.paths.len() as u32;
        self.entries += chain.len();
        let mut uniq: Vec<u32> = Vec::with_capacity(chain.len());
        for k in chain {
            let s = self.sym_id(k);
            if !uniq.contains(&s) {
                uniq.push(s);
            }
        }
        self.paths.push(Path {
            tag,
            keys: Box::from(chain),
            uniq: uniq.into_boxed_slice(),
        });
        self.ids.entry(hash).or_default().push(id);
        self.total.push(0);
        Some(id)
    }

    /// Samples added (kept or not).
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Samples whose chain was new when the budget was spent: counted, not kept.
    #[cfg(test)]
    pub(crate) fn not_kept(&self) -> u64 {
        self.not_kept
    }

    /// Distinct chains kept.
    #[cfg(test)]
    pub fn chains(&self) -> usize {
        self.paths.len()
    }

    /// Samples per chain id over `span`, of the tags `only` keeps.
    fn counts(&self, span: Span, only: TagFilter) -> Vec<(u32, u64)> {
        let keep = |id: u32| only.is_none_or(|f| f(self.paths[id as usize].tag));
        match span {
            Span::SinceStart => self
                .total
                .iter()
                .enumerate()
                .filter(|&(id, &n)| n > 0 && keep(id as u32))
                .map(|(id, &n)| (id as u32, n))
                .collect(),
            Span::Recent => {
                let mut sum: FastMap<u32, u64> = FastMap::default();
                for (_, bucket) in &self.recent {
                    for (&id, &n) in bucket {
                        if keep(id) {
                            *sum.entry(id).or_insert(0) += u64::from(n);
                        }
                    }
                }
                sum.into_iter().collect()
            }
        }
    }

    /// Every symbol seen over `span` with its Self and Children samples, by Children, then
    /// Self, descending (then by key, so that equal counts keep their order), and the
    /// number of samples over that span.
    pub fn top(&self, span: Span, only: TagFilter) -> (Vec<Row<K>>, u64) {
        if only.is_some() {
            return self.top_of_chains(span, only);
        }
        let mut rows: Vec<Row<K>> = self
            .syms
            .iter()
            .zip(&self.counts_by_sym)
            .filter_map(|(k, c)| {
                let (s, ch) = match span {
                    Span::SinceStart => c.total,
                    Span::Recent => c.recent,
                };
                (ch > 0).then(|| Row {
                    key: k.clone(),
                    self_samples: s,
                    children: ch,
                })
            })
            .collect();
        rows.sort_unstable_by(by_children);
        let total = match span {
            Span::SinceStart => self.kept_total,
            Span::Recent => self.kept_recent,
        };
        (rows, total)
    }

    /// [`CallGraph::top`] summed over the chains (of the tags `only` keeps).
    fn top_of_chains(&self, span: Span, only: TagFilter) -> (Vec<Row<K>>, u64) {
        let mut rows: FastMap<&K, (u64, u64)> = FastMap::default();
        let mut total = 0;
        for (id, n) in self.counts(span, only) {
            total += n;
            let keys = &self.paths[id as usize].keys;
            rows.entry(&keys[0]).or_insert((0, 0)).0 += n;
            for (i, k) in keys.iter().enumerate() {
                if !keys[..i].contains(k) {
                    rows.entry(k).or_insert((0, 0)).1 += n;
                }
            }
        }
        let mut rows: Vec<Row<K>> = rows
            .into_iter()
            .map(|(k, (s, c))| Row {
                key: k.clone(),
                self_samples: s,
                children: c,
            })
            .collect();
        rows.sort_unstable_by(by_children);
        (rows, total)
    }

    /// The tags (tasks) whose samples have `key` anywhere in the chain over `span`, with
    /// those samples, most first (perf top's thread zoom, the other way round).
    pub(crate) fn tags_of(&self, span: Span, key: &K) -> Vec<(u32, u64)> {
        let mut by: FastMap<u32, u64> = FastMap::default();
        for (id, n) in self.counts(span, None) {
            let p = &self.paths[id as usize];
            if p.keys.contains(key) {
                *by.entry(p.tag).or_insert(0) += n;
            }
        }
        let mut v: Vec<(u32, u64)> = by.into_iter().collect();
        v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// The callers of `key` over `span`: from its innermost occurrence in each chain
    /// outwards, merged by call path. The root is `key` itself, counting its Children.
    pub fn callers(&self, span: Span, only: TagFilter, key: &K) -> CallerTree<K> {
        let mut tree = CallerTree {
            nodes: vec![Node {
                key: key.clone(),
                samples: 0,
                children: Vec::new(),
            }],
        };
        for (id, n) in self.counts(span, only) {
            let keys = &self.paths[id as usize].keys;
            let Some(at) = keys.iter().position(|k| k == key) else {
                continue;
            };
            tree.nodes[0].samples += n;
            let mut node = 0;
            for k in &keys[at + 1..] {
                node = tree.child(node, k);
                tree.nodes[node].samples += n;
            }
        }
        tree.sort(0);
        tree
    }
}

/// Top's order: by Children, then Self, descending, then by key (keys are unique, so the
/// order is total and an unstable sort gives the one answer).
fn by_children<K: Ord>(a: &Row<K>, b: &Row<K>) -> std::cmp::Ordering {
    (b.children, b.self_samples)
        .cmp(&(a.children, a.self_samples))
        .then_with(|| a.key.cmp(&b.key))
}

#[derive(Clone, Debug)]
struct Node<K> {
    key: K,
    samples: u64,
    children: Vec<usize>,
}

/// The callers of one symbol: its node is the root, each node's children are the symbols
/// that called it on some path, with the samples that went through that path.
#[derive(Clone, Debug)]
pub(crate) struct CallerTree<K> {
    nodes: Vec<Node<K>>,
}

/// One line of a [`CallerTree`] as shown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CallerLine<K> {
    /// 0 for the symbol itself, 1 for its direct callers, ...
    pub depth: usize,
    pub key: K,
    pub samples: u64,
    /// The keys from the root down to this line (the root's own key first): what names
    /// this line for expanding and collapsing.
    pub path: Vec<K>,
    /// Whether it has callers of its own (can be expanded).
    pub has_callers: bool,
}

impl<K: Clone + Eq + Ord> CallerTree<K> {
    fn child(&mut self, node: usize, key: &K) -> usize {
        if let Some(&c) = self.nodes[node]
            .children
            .iter()
            .find(|&&c| self.nodes[c].key == *key)
        {
            return c;
        }
        let c = self.nodes.len();
        self.nodes.push(Node {
            key: key.clone(),
            samples: 0,
            children: Vec::new(),
        });
        self.nodes[node].children.push(c);
        c
    }

    fn sort(&mut self, node: usize) {
        let mut children = std::mem::take(&mut self.nodes[node].children);
        children.sort_by(|&a, &b| {
            self.nodes[b]
                .samples
                .cmp(&self.nodes[a].samples)
                .then_with(|| self.nodes[a].key.cmp(&self.nodes[b].key))
        });
        for &c in &children {
            self.sort(c);
        }
        self.nodes[node].children = children;
    }

    /// The samples through the root (its Children count over the span).
    #[cfg(test)]
    pub fn samples(&self) -> u64 {
        self.nodes[0].samples
    }

    /// The lines to show: the root, and below each line whose path `expanded` says is open,
    /// its callers, most samples first.
    pub fn lines(&self, expanded: impl Fn(&[K]) -> bool) -> Vec<CallerLine<K>> {
        let mut out = Vec::new();
        let mut path = Vec::new();
        self.walk(0, 0, &mut path, &expanded, &mut out);
        out
    }

    fn walk(
        &self,
        node: usize,
        depth: usize,
        path: &mut Vec<K>,
        expanded: &impl Fn(&[K]) -> bool,
        out: &mut Vec<CallerLine<K>>,
    ) {
        let n = &self.nodes[node];
        path.push(n.key.clone());
        out.push(CallerLine {
            depth,
            key: n.key.clone(),
            samples: n.samples,
            path: path.clone(),
            has_callers: !n.children.is_empty(),
        });
        if expanded(path) {
            for &c in &n.children {
                self.walk(c, depth + 1, path, expanded, out);
            }
        }
        path.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(samples: &[(u64, u32, &[&'static str])]) -> CallGraph<&'static str> {
        let mut g = CallGraph::new(10);
        for &(s, tag, chain) in samples {
            g.add(s, tag, chain);
        }
        g
    }

    fn row(rows: &[Row<&'static str>], key: &str) -> Option<(u64, u64)> {
        rows.iter()
            .find(|r| r.key == key)
            .map(|r| (r.self_samples, r.children))
    }

    #[test]
    fn self_is_the_innermost_frame_and_children_count_each_sample_once() {
        let g = graph(&[
            (1, 1, &["hot", "middle", "main"]),
            (1, 1, &["hot", "middle", "main"]),
            (1, 1, &["cold", "main"]),
            // Recursion: `rec` twice in one chain is one sample of its Children.
            (2, 1, &["rec", "rec", "rec", "main"]),
        ]);
        let (rows, total) = g.top(Span::SinceStart, None);
        assert_eq!(total, 4);
        assert_eq!(row(&rows, "main"), Some((0, 4)));
        assert_eq!(row(&rows, "hot"), Some((2, 2)));
        assert_eq!(row(&rows, "middle"), Some((0, 2)));
        assert_eq!(row(&rows, "cold"), Some((1, 1)));
        assert_eq!(row(&rows, "rec"), Some((1, 1)));
        // Sorted by Children, then Self, then key.
        let order: Vec<_> = rows.iter().map(|r| r.key).collect();
        assert_eq!(order, ["main", "hot", "middle", "cold", "rec"]);
    }

    #[test]
    fn running_counts_agree_with_summing_the_chains() {
        // Chains with recursion, shared frames, several tags, seconds going forward with
        // some late ones: the running counts (top without a filter) against a sum over the
        // chains, over the window and since start, after every few samples.
        const NAMES: [&str; 7] = ["a", "b", "c", "d", "e", "main", "start"];
        let mut g = CallGraph::new(3);
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let mut second = 100;
        for i in 0..3000 {
            let len = 1 + next(6) as usize;
            let chain: Vec<&str> = (0..len).map(|_| NAMES[next(7) as usize]).collect();
            let at = if next(10) == 0 {
                second - next(5)
            } else {
                second
            };
            g.add(at, next(3) as u32, &chain);
            if next(50) == 0 {
                second += 1 + next(2);
            }
            if i % 97 == 0 {
                for span in [Span::Recent, Span::SinceStart] {
                    assert_eq!(
                        g.top(span, None),
                        g.top_of_chains(span, None),
                        "{span:?} at {i}"
                    );
                }
            }
        }
        assert!(g.top(Span::Recent, None).1 < g.top(Span::SinceStart, None).1);
    }

    #[test]
    fn a_sample_without_a_chain_is_its_own_symbol() {
        let g = graph(&[(1, 7, &["leaf"]), (1, 7, &[])]);
        let (rows, total) = g.top(Span::SinceStart, None);
        assert_eq!(total, 1);
        assert_eq!(g.samples(), 1);
        assert_eq!(row(&rows, "leaf"), Some((1, 1)));
    }

    #[test]
    fn recent_keeps_the_window_and_since_start_keeps_everything() {
        let mut g = CallGraph::new(10);
        g.add(100, 1, &["old", "main"]);
        g.add(105, 1, &["mid", "main"]);
        g.add(112, 1, &["new", "main"]);
        let (recent, n) = g.top(Span::Recent, None);
        assert_eq!(n, 2, "the sample of second 100 is out of the 10 s window");
        assert_eq!(row(&recent, "old"), None);
        assert_eq!(row(&recent, "main"), Some((0, 2)));
        let (all, n) = g.top(Span::SinceStart, None);
        assert_eq!(n, 3);
        assert_eq!(row(&all, "old"), Some((1, 1)));
        // A late sample inside the window lands in its own second; one before it does not.
        g.add(104, 1, &["late", "main"]);
        g.add(101, 1, &["too_late", "main"]);
        let (recent, n) = g.top(Span::Recent, None);
        assert_eq!(n, 3);
        assert_eq!(row(&recent, "late"), Some((1, 1)));
        assert_eq!(row(&recent, "too_late"), None);
        assert_eq!(
            row(&g.top(Span::SinceStart, None).0, "too_late"),
            Some((1, 1))
        );
        // The window moves on with the newest sample.
        g.add(125, 1, &["x"]);
        let (recent, n) = g.top(Span::Recent, None);
        assert_eq!((n, recent.len()), (1, 1));
    }

    #[test]
    fn a_tag_filter_narrows_to_those_tasks() {
        let g = graph(&[
            (1, 10, &["a", "main"]),
            (1, 10, &["a", "main"]),
            (1, 20, &["a", "main"]),
            (1, 20, &["b", "main"]),
        ]);
        let only10 = |t: u32| t == 10;
        let (rows, n) = g.top(Span::SinceStart, Some(&only10));
        assert_eq!(n, 2);
        assert_eq!(row(&rows, "a"), Some((2, 2)));
        assert_eq!(row(&rows, "b"), None);
        let tree = g.callers(Span::Recent, Some(&only10), &"a");
        assert_eq!(tree.samples(), 2);
        assert_eq!(g.tags_of(Span::SinceStart, &"a"), [(10, 2), (20, 1)]);
        assert_eq!(g.tags_of(Span::SinceStart, &"main"), [(10, 2), (20, 2)]);
        assert!(g.tags_of(Span::SinceStart, &"zzz").is_empty());
    }

    #[test]
    fn callers_merge_by_path_from_the_innermost_occurrence() {
        let g = graph(&[
            (1, 1, &["hot", "middle", "outer", "main"]),
            (1, 1, &["hot", "middle", "outer", "main"]),
            (1, 1, &["hot", "other", "main"]),
            (1, 1, &["x", "hot", "middle", "main"]),
            (1, 1, &["rec", "hot", "rec", "hot", "main"]),
            (1, 1, &["unrelated", "main"]),
        ]);
        let tree = g.callers(Span::SinceStart, None, &"hot");
        assert_eq!(tree.samples(), 5);
        let closed = tree.lines(|_| false);
        assert_eq!(closed.len(), 1);
        assert_eq!(
            (
                closed[0].depth,
                closed[0].key,
                closed[0].samples,
                closed[0].has_callers
            ),
            (0, "hot", 5, true)
        );
        let all = tree.lines(|_| true);
        let shown: Vec<_> = all.iter().map(|l| (l.depth, l.key, l.samples)).collect();
        assert_eq!(
            shown,
            [
                (0, "hot", 5),
                (1, "middle", 3),
                (2, "outer", 2),
                (3, "main", 2),
                (2, "main", 1),
                (1, "other", 1),
                (2, "main", 1),
                (1, "rec", 1),
                (2, "hot", 1),
                (3, "main", 1),
            ]
        );
        // Only the paths asked for open.
        let some = tree.lines(|p| p == ["hot"] || p == ["hot", "middle"]);
        let shown: Vec<_> = some.iter().map(|l| (l.depth, l.key)).collect();
        assert_eq!(
            shown,
            [
                (0, "hot"),
                (1, "middle"),
                (2, "outer"),
                (2, "main"),
                (1, "other"),
                (1, "rec"),
            ]
        );
        assert_eq!(some[2].path, ["hot", "middle", "outer"]);
        assert!(some[2].has_callers && !some[3].has_callers);
        // A symbol nobody sampled has an empty tree.
        let none = g.callers(Span::SinceStart, None, &"absent");
        assert_eq!(none.samples(), 0);
        assert_eq!(none.lines(|_| true).len(), 1);
    }

    #[test]
    fn chains_beyond_the_budget_are_counted_not_kept() {
        let mut g = CallGraph::with_budget(10, 5);
        g.add(1, 1, &["a", "b", "c"]);
        g.add(1, 1, &["d", "e", "f"]); // 6 > 5: not kept
        g.add(1, 1, &["a", "b", "c"]); // known: kept
        g.add(1, 1, &["g", "h"]); // 3 + 2 = 5: fits
        assert_eq!((g.samples(), g.not_kept(), g.chains()), (4, 1, 2));
        let (rows, n) = g.top(Span::SinceStart, None);
        assert_eq!(n, 3);
        assert_eq!(row(&rows, "d"), None);
    }

    #[test]
    fn very_deep_chains_are_cut_at_the_depth_limit() {
        let deep: Vec<u32> = (0..1000).collect();
        let mut g: CallGraph<u32> = CallGraph::new(10);
        g.add(1, 1, &deep);
        let (rows, _) = g.top(Span::SinceStart, None);
        assert_eq!(rows.len(), MAX_DEPTH);
        let tree = g.callers(Span::SinceStart, None, &0);
        assert_eq!(tree.lines(|_| true).len(), MAX_DEPTH);
    }
}
