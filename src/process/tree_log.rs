//! Which processes changed place in the process tree (came, went, got another parent, or
//! exited), in order, for readers that keep a tree of their own (the TUI's tree) and update it from
//! the changes instead of rebuilding it from every process on every frame.
//!
//! Off until a reader asks ([`super::ProcessModel::collect_tree_changes`]): the line writers'
//! model pays one branch per fork. Readers hold only a read lock, so nothing is taken out:
//! each change has a sequence number, a reader remembers the last one it saw, and the log
//! keeps the last [`KEEP`] changes. A reader that fell further behind (or reads another
//! model) is told so and rebuilds.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

/// Changes kept for readers that lag (a frame reads them every 100 ms; 2 000 forks a second
/// make 4 000 changes a second).
pub const KEEP: usize = 1 << 16;

/// Tells models apart, so that a reader's tree of one model is never updated from another's.
static NEXT_MODEL: AtomicU64 = AtomicU64::new(1);

/// The log of tree changes of one model.
#[derive(Debug)]
pub struct TreeLog {
    model: u64,
    on: bool,
    pids: VecDeque<u32>,
    /// The sequence number of the change after the last one kept.
    end: u64,
}

impl Default for TreeLog {
    fn default() -> TreeLog {
        TreeLog {
            model: NEXT_MODEL.fetch_add(1, Ordering::Relaxed),
            on: false,
            pids: VecDeque::new(),
            end: 0,
        }
    }
}

/// Where a reader is in a model's log: which model, and the next change it has not seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TreeCursor {
    pub model: u64,
    pub next: u64,
}

impl TreeLog {
    pub fn set_on(&mut self, on: bool) {
        if self.on != on {
            // Off, changes are not logged: a reader's cursor from before must not be
            // believed. A new identity makes every reader rebuild.
            *self = TreeLog {
                on,
                ..TreeLog::default()
            };
        }
    }

    /// Process `pid` came, went, changed parent or exited.
    #[inline]
    pub fn changed(&mut self, pid: u32) {
        if self.on {
            if self.pids.len() == KEEP {
                self.pids.pop_front();
            }
            self.pids.push_back(pid);
            self.end += 1;
        }
    }

    /// Where a reader that has just rebuilt from the whole model stands.
    pub fn cursor(&self) -> TreeCursor {
        TreeCursor {
            model: self.model,
            next: self.end,
        }
    }

    /// The pids changed since `at` (repeats possible) and the cursor after them; `None` when
    /// the reader must rebuild: another model, the log off, or changes it missed.
    pub fn since(&self, at: TreeCursor) -> Option<(impl Iterator<Item = u32> + '_, TreeCursor)> {
        let first = self.end - self.pids.len() as u64;
        if !self.on || at.model != self.model || at.next < first || at.next > self.end {
            return None;
        }
        let skip = (at.next - first) as usize;
        Some((self.pids.range(skip..).copied(), self.cursor()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_sees_each_change_once_and_rebuilds_when_it_fell_behind() {
        let mut log = TreeLog::default();
        log.changed(1);
        assert!(log.since(log.cursor()).is_none(), "off: nothing is logged");
        log.set_on(true);
        let start = log.cursor();
        log.changed(5);
        log.changed(6);
        let (pids, at) = log.since(start).unwrap();
        assert_eq!(pids.collect::<Vec<_>>(), [5, 6]);
        assert_eq!(log.since(at).unwrap().0.count(), 0);
        for pid in 0..=KEEP as u32 {
            log.changed(pid);
        }
        assert!(log.since(at).is_none(), "missed changes: rebuild");
        let other = TreeLog::default();
        assert!(other.since(log.cursor()).is_none(), "another model");
    }
}
