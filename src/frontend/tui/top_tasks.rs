//! The Top tasks pane's view and keys: which tasks took the samples of the last closed
//! second, per process or per thread (`H`), in an order (`s`), narrowed or not; the rows
//! are built from the panes' data ([`super::panes::Panes`]) as this view says, and drawn
//! by [`super::ui`].

use super::input::{Action, Handled, down, scroll_delta};
use super::log::Narrowed;
use crate::process::ProcessModel;

/// The order of Top tasks (`s` when it has the focus).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TopSort {
    Samples,
    Id,
    Name,
}

impl TopSort {
    pub(crate) fn next(self) -> TopSort {
        match self {
            TopSort::Samples => TopSort::Id,
            TopSort::Id => TopSort::Name,
            TopSort::Name => TopSort::Samples,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            TopSort::Samples => "samples",
            TopSort::Id => "id",
            TopSort::Name => "name",
        }
    }
}

/// How Top tasks is shown (the view's, one whether paused or not).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TopView {
    /// The selected row, from the top (the first row shown).
    pub scroll: usize,
    /// `H`: per thread rather than per process.
    pub per_thread: bool,
    /// `s` on Top tasks: its order.
    pub sort: TopSort,
}

impl Default for TopView {
    fn default() -> TopView {
        TopView {
            scroll: 0,
            per_thread: false,
            sort: TopSort::Samples,
        }
    }
}

impl TopView {
    /// The rows as shown: (pid, or tid with `H`; samples), of the narrowed-to processes when
    /// narrowed, in the chosen order; from the last second's `top` (pid, samples) and
    /// `threads` (pid, tid, samples), most first.
    pub fn rows(
        &self,
        top: &[(u32, u64)],
        threads: &[(u32, u32, u64)],
        narrow: Narrowed,
        tasks: &ProcessModel,
    ) -> Vec<(u32, u64)> {
        let keep = |pid: &u32| narrow.is_none_or(|n| n.contains(pid));
        let mut rows: Vec<(u32, u64)> = if self.per_thread {
            threads
                .iter()
                .filter(|(p, _, _)| keep(p))
                .map(|(_, t, n)| (*t, *n))
                .collect()
        } else {
            top.iter().filter(|(p, _)| keep(p)).copied().collect()
        };
        match self.sort {
            TopSort::Samples => {}
            TopSort::Id => rows.sort_unstable_by_key(|r| r.0),
            TopSort::Name => {
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

    /// `H`: per thread or per process (whatever pane has the focus), from the top.
    pub(crate) fn toggle_threads(&mut self) {
        self.per_thread = !self.per_thread;
        self.scroll = 0;
    }

    /// The pane's keys on `rows` (as shown) seen `page` at a time: moving the selection,
    /// Enter on a task, `s` for the next order.
    pub fn on_key(&mut self, a: Action, rows: &[(u32, u64)], page: usize) -> Handled {
        if let Some(d) = scroll_delta(a, page) {
            self.scroll = down(self.scroll, d, rows.len());
            return Handled::Done;
        }
        match a {
            Action::Select => match rows.get(self.scroll) {
                Some((pid, _)) => Handled::Narrow(*pid),
                None => Handled::Say(super::input::NOTHING_SELECTED),
            },
            Action::Sort => {
                self.sort = self.sort.next();
                Handled::Done
            }
            _ => Handled::Not,
        }
    }

    /// A click on row `row` (from the first shown) of `len` rows.
    pub fn click(&mut self, row: usize, len: usize) {
        if self.scroll + row < len {
            self.scroll += row;
        }
    }
}
