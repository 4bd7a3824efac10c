//! The event log's history: two bounded rings, one for the records that tell what happened
//! (fork, exit, comm, mmap, lost, throttle, switch, and tracepoint samples, which are events
//! in their own right) and one for periodic samples (`cpu-clock`, `cycles`, ...), so that
//! 1 kHz of samples per CPU cannot wash a minute-old exec out of the log.
//!
//! The view is the two rings merged in arrival order, after the filter, with the periodic
//! samples only when asked: `S`, or a filter that names them (`type:sample`, `sym:`, ...).
//! They are summarised by Top tasks and Top symbols anyway. Reading a page of the view is a
//! binary search for where it starts in each ring, then a merge of the page's rows.

use std::collections::VecDeque;

use rustc_hash::FxHashSet;

use super::input::{Action, Handled, back, scroll_delta};
use crate::event::{Event, EventKind};
use crate::filter::Filter;
use crate::process::ProcessModel;

/// Is `ev` a periodic sample (kept in the samples ring)? Tracepoint samples are not: each
/// one is an event the user asked to see.
pub(crate) fn is_periodic_sample(ev: &Event) -> bool {
    match &ev.kind {
        EventKind::Sample { event, .. } => {
            event.type_ != perf_event_open_sys::bindings::PERF_TYPE_TRACEPOINT
        }
        _ => false,
    }
}

/// One ring: (arrival number, event), oldest first.
#[derive(Clone, Debug, Default)]
struct Ring {
    q: VecDeque<(u64, Event)>,
    /// The ring's own sequence number of `q[0]`.
    first: u64,
    /// With a filter: the sequence numbers of the entries that match it, oldest first.
    matching: Option<VecDeque<u64>>,
}

impl Ring {
    fn push(&mut self, n: u64, ev: Event, cap: usize, matches: bool) {
        if self.q.len() >= cap.max(1) {
            self.q.pop_front();
            self.first += 1;
            if let Some(m) = self.matching.as_mut() {
                while m.front().is_some_and(|&s| s < self.first) {
                    m.pop_front();
                }
            }
        }
        let seq = self.first + self.q.len() as u64;
        self.q.push_back((n, ev));
        if let (true, Some(m)) = (matches, self.matching.as_mut()) {
            m.push_back(seq);
        }
    }

    /// Entries in the view (after the filter).
    fn len(&self) -> usize {
        self.matching.as_ref().map_or(self.q.len(), VecDeque::len)
    }

    /// The `i`-th entry of the view, oldest first.
    fn get(&self, i: usize) -> Option<&(u64, Event)> {
        match &self.matching {
            None => self.q.get(i),
            Some(m) => self.q.get(m.get(i)?.checked_sub(self.first)? as usize),
        }
    }

    fn refilter(&mut self, sel: Selection, tasks: &ProcessModel, line: &mut String) {
        self.matching = (!sel.all()).then(|| {
            self.q
                .iter()
                .enumerate()
                .filter(|(_, (_, ev))| sel.keeps(ev, tasks, line))
                .map(|(i, _)| self.first + i as u64)
                .collect()
        });
    }

    fn clear(&mut self) {
        self.first += self.q.len() as u64;
        self.q.clear();
        if let Some(m) = self.matching.as_mut() {
            m.clear();
        }
    }
}

/// How the log is shown (the view's, one whether paused or not).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LogView {
    /// Rows scrolled back from the newest (0: following the tail).
    pub scroll: usize,
    /// Columns scrolled to the right (Right/Left).
    pub hscroll: usize,
}

impl LogView {
    /// The log's keys, on a log of `len` rows shown `page` rows at a time: scrolling back,
    /// and Right/Left sideways.
    pub fn on_key(&mut self, a: Action, len: usize, page: usize) -> Handled {
        if let Some(d) = scroll_delta(a, page) {
            self.scroll = back(self.scroll, d, len, page);
            return Handled::Done;
        }
        match a {
            Action::Expand => self.hscroll += 8,
            Action::Collapse => self.hscroll = self.hscroll.saturating_sub(8),
            _ => return Handled::Not,
        }
        Handled::Done
    }
}

/// The processes the views are narrowed to (Enter on a task: it and its children), as the
/// app keeps them; `None`: all.
pub(crate) type Narrowed<'a> = Option<&'a FxHashSet<u32>>;

/// Which entries the view keeps: the filter's, of the narrowed-to processes.
#[derive(Clone, Copy)]
struct Selection<'a> {
    filter: &'a Filter,
    narrow: Narrowed<'a>,
}

impl Selection<'_> {
    fn all(&self) -> bool {
        self.filter.is_empty() && self.narrow.is_none()
    }

    fn keeps(&self, ev: &Event, tasks: &ProcessModel, line: &mut String) -> bool {
        self.narrow
            .as_ref()
            .is_none_or(|n| n.contains(&ev.subject_pid()))
            && (self.filter.is_empty() || self.filter.matches_with(ev, tasks, line))
    }
}

/// The log's history and its view.
#[derive(Clone, Debug)]
pub struct Log {
    events: Ring,
    samples: Ring,
    /// Entries kept in each ring.
    cap: usize,
    /// The next arrival number.
    next: u64,
    filter: Filter,
    /// `S`: periodic samples are shown.
    show_samples: bool,
    line: String,
}

impl Log {
    /// A log keeping up to `cap` records and `cap` periodic samples.
    pub fn new(cap: usize) -> Log {
        Log {
            events: Ring::default(),
            samples: Ring::default(),
            cap: cap.max(1),
            next: 0,
            filter: Filter::default(),
            show_samples: false,
            line: String::new(),
        }
    }

    /// Keep `ev`; true when it is in the view (so a scrolled view can stay put).
    pub fn push(&mut self, ev: Event, tasks: &ProcessModel, narrow: Narrowed) -> bool {
        let periodic = is_periodic_sample(&ev);
        let shown = !periodic || self.samples_shown();
        let sel = Selection {
            filter: &self.filter,
            narrow,
        };
        let matches = sel.all() || sel.keeps(&ev, tasks, &mut self.line);
        let n = self.next;
        self.next += 1;
        let ring = if periodic {
            &mut self.samples
        } else {
            &mut self.events
        };
        ring.push(n, ev, self.cap, matches);
        shown && matches
    }

    /// Are periodic samples in the view: asked for with `S`, or named by the filter?
    pub(crate) fn samples_shown(&self) -> bool {
        self.show_samples || self.filter.names_samples()
    }

    /// `S`: show or hide periodic samples. Returns whether they are now shown.
    pub(crate) fn toggle_samples(&mut self) -> bool {
        self.show_samples = !self.show_samples;
        self.samples_shown()
    }

    pub fn filter(&self) -> &Filter {
        &self.filter
    }

    /// Put `filter` in force over the whole history.
    pub fn set_filter(&mut self, filter: Filter, tasks: &ProcessModel, narrow: Narrowed) {
        self.filter = filter;
        self.refilter(tasks, narrow);
    }

    /// Select the view over the whole history again: after the narrowing changed.
    pub(crate) fn refilter(&mut self, tasks: &ProcessModel, narrow: Narrowed) {
        let sel = Selection {
            filter: &self.filter,
            narrow,
        };
        self.events.refilter(sel, tasks, &mut self.line);
        self.samples.refilter(sel, tasks, &mut self.line);
    }

    fn samples_in_view(&self) -> usize {
        if self.samples_shown() {
            self.samples.len()
        } else {
            0
        }
    }

    /// Entries in the view.
    pub fn len(&self) -> usize {
        self.events.len() + self.samples_in_view()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries held (before the filter), and of those, periodic samples.
    pub fn held(&self) -> (usize, usize) {
        (
            self.events.q.len() + self.samples.q.len(),
            self.samples.q.len(),
        )
    }

    /// How many of the first `p` entries of the view come from the events ring.
    fn split(&self, p: usize) -> usize {
        let (a, b) = (&self.events, &self.samples);
        let nb = self.samples_in_view();
        let n = |r: &Ring, i: usize| r.get(i).map_or(u64::MAX, |e| e.0);
        let (mut lo, mut hi) = (p.saturating_sub(nb), p.min(a.len()));
        // The smallest i whose next events entry comes after the (p - i)-th sample.
        while lo < hi {
            let i = lo + (hi - lo) / 2;
            let j = p - i;
            if j > 0 && n(b, j - 1) > n(a, i) {
                lo = i + 1;
            } else {
                hi = i;
            }
        }
        lo
    }

    /// The entries `[start, end)` of the view, oldest first.
    pub fn range(&self, start: usize, end: usize) -> Vec<&Event> {
        let end = end.min(self.len());
        if start >= end {
            return Vec::new();
        }
        let nb = self.samples_in_view();
        let mut i = self.split(start);
        let mut j = start - i;
        let mut out = Vec::with_capacity(end - start);
        while out.len() < end - start {
            let a = self.events.get(i);
            let b = (j < nb).then(|| self.samples.get(j)).flatten();
            match (a, b) {
                (Some(x), Some(y)) if y.0 < x.0 => {
                    out.push(&y.1);
                    j += 1;
                }
                (Some(x), _) => {
                    out.push(&x.1);
                    i += 1;
                }
                (None, Some(y)) => {
                    out.push(&y.1);
                    j += 1;
                }
                (None, None) => break,
            }
        }
        out
    }

    /// The `i`-th entry of the view.
    pub fn get(&self, i: usize) -> Option<&Event> {
        self.range(i, i + 1).pop()
    }

    /// Forget the history (the counters elsewhere are kept).
    pub fn clear(&mut self) {
        self.events.clear();
        self.samples.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventDesc;
    use crate::testkit::events as tk;

    fn tracepoint() -> &'static EventDesc {
        tk::desc(
            1,
            "sched:sched_switch",
            perf_event_open_sys::bindings::PERF_TYPE_TRACEPOINT,
            0,
        )
    }

    /// A periodic sample of `pid` (hand-made samples have no event: not a tracepoint).
    fn sample(pid: u32, time: u64) -> Event {
        tk::sample(0, pid, time, 1)
    }

    fn fork(pid: u32, time: u64) -> Event {
        tk::fork(0, time, pid, 1)
    }

    fn subject(v: Vec<&Event>) -> Vec<u32> {
        v.iter().map(|e| e.subject_pid()).collect()
    }

    #[test]
    fn samples_cannot_push_out_a_fork() {
        let m = ProcessModel::new();
        let mut log = Log::new(10);
        assert!(log.push(fork(7, 1), &m, None));
        for t in 0..1000 {
            assert!(!log.push(sample(3, 2 + t), &m, None), "hidden by default");
        }
        assert_eq!(log.len(), 1);
        assert_eq!(subject(log.range(0, 5)), [7]);
        assert_eq!(log.held(), (11, 10));
        assert!(log.toggle_samples());
        assert_eq!(log.len(), 11);
        assert_eq!(
            log.get(0).unwrap().subject_pid(),
            7,
            "the fork first: it came first"
        );
        assert_eq!(log.get(10).unwrap().time, 1001);
    }

    #[test]
    fn tracepoint_samples_are_events() {
        let m = ProcessModel::new();
        let mut log = Log::new(10);
        let mut ev = sample(5, 1);
        if let EventKind::Sample { event, .. } = &mut ev.kind {
            *event = tracepoint();
        }
        assert!(log.push(ev, &m, None));
        assert_eq!(log.len(), 1);
    }

    #[test]
    fn the_merge_is_in_arrival_order_at_every_offset() {
        let m = ProcessModel::new();
        let mut log = Log::new(1000);
        log.toggle_samples();
        // An irregular interleaving: pid is the arrival number.
        let mut n = 0u32;
        for round in 0..40u32 {
            for _ in 0..(round % 5) {
                log.push(sample(n, n as u64), &m, None);
                n += 1;
            }
            for _ in 0..(round % 3) {
                log.push(fork(n, n as u64), &m, None);
                n += 1;
            }
        }
        assert_eq!(log.len(), n as usize);
        for start in 0..n as usize {
            for len in [1, 3, 17] {
                let want: Vec<u32> = (start as u32..(start + len).min(n as usize) as u32).collect();
                assert_eq!(
                    subject(log.range(start, start + len)),
                    want,
                    "at {start}+{len}"
                );
            }
        }
        // Through a filter too: the odd arrivals.
        let odd: Vec<String> = (0..n)
            .filter(|p| p % 2 == 1)
            .map(|p| format!("pid:{p}"))
            .collect();
        let f = Filter::parse(&odd.join("|")).unwrap();
        log.set_filter(f, &m, None);
        let want: Vec<u32> = (0..n).filter(|p| p % 2 == 1).collect();
        assert_eq!(subject(log.range(0, log.len())), want);
        for (i, pid) in want.iter().enumerate() {
            assert_eq!(log.get(i).unwrap().subject_pid(), *pid);
        }
    }

    #[test]
    fn a_filter_naming_samples_shows_them_and_eviction_keeps_the_view_right() {
        let m = ProcessModel::new();
        let mut log = Log::new(3);
        for t in 0..10 {
            log.push(sample(t as u32, t), &m, None);
        }
        log.push(fork(99, 10), &m, None);
        assert_eq!(log.len(), 1);
        log.set_filter(Filter::parse("type:sample").unwrap(), &m, None);
        assert!(log.samples_shown());
        assert_eq!(
            subject(log.range(0, 10)),
            [7, 8, 9],
            "the newest 3 samples kept"
        );
        log.push(sample(10, 11), &m, None);
        assert_eq!(subject(log.range(0, 10)), [8, 9, 10]);
        log.clear();
        assert!(log.is_empty());
        assert_eq!(log.held(), (0, 0));
    }
}
