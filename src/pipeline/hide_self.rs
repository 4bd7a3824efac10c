//! perfwatch's own records, hidden unless `--show-self` (and counted for the summary): its
//! threads', and those of the helpers it forks, from their fork to their exit.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use crate::event::{Event, EventKind};

/// perfwatch's own records, hidden unless `--show-self`: its threads', and those of the
/// short-lived helpers it forks (a perf map opened as its owner), from their fork to their
/// exit. The `-- COMMAND` is perfwatch's child too, and is never hidden.
#[derive(Clone, Debug)]
pub struct HideSelf {
    /// perfwatch's pid.
    pub pid: u32,
    /// The command's pid, if perfwatch started one.
    pub command: Option<u32>,
    /// Where the count of hidden records is kept for the summary.
    pub hidden: Arc<AtomicU64>,
}

/// Helpers alive at once, at most (each lives for one open(2)): past it, the set is
/// forgotten rather than grown.
const MAX_OWN_HELPERS: usize = 4096;

impl HideSelf {
    /// Whether `ev` is perfwatch's own; `helpers` are its live helper children.
    pub(super) fn hides(&self, ev: &Event, helpers: &mut rustc_hash::FxHashSet<u32>) -> bool {
        match &ev.kind {
            EventKind::Lost { .. } | EventKind::LostSamples { .. } | EventKind::Throttle { .. } => {
                false
            }
            EventKind::Fork(t)
                if t.ppid == self.pid && t.pid != self.pid && Some(t.pid) != self.command =>
            {
                if helpers.len() >= MAX_OWN_HELPERS {
                    helpers.clear();
                }
                helpers.insert(t.pid);
                true
            }
            EventKind::Exit(t) if t.pid == t.tid && helpers.remove(&t.pid) => true,
            _ => {
                let pid = ev.subject_pid();
                pid == self.pid || helpers.contains(&pid)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::events::{exit, fork, lost_samples, sample};

    /// perfwatch's helpers (forked, not the command) are hidden from their fork to their
    /// exit with perfwatch's own threads; the command, other processes and a later process
    /// that reuses a helper's pid are not.
    #[test]
    fn its_own_helpers_are_hidden_but_not_its_command() {
        let hidden = Arc::new(AtomicU64::new(0));
        let hide = HideSelf {
            pid: 100,
            command: Some(101),
            hidden: hidden.clone(),
        };
        let mut helpers = rustc_hash::FxHashSet::default();
        let evs = [
            (fork(0, 1, 101, 100), false), // the command
            (sample(0, 101, 2, 1), false), // its sample
            (fork(0, 3, 102, 100), true),  // a helper (a perf map opened as its owner)
            (sample(1, 102, 4, 1), true),  // the helper on a CPU
            (sample(1, 100, 5, 1), true),  // perfwatch itself
            (exit(1, 6, 102, 100), true),  // the helper's end
            (fork(0, 7, 102, 55), false),  // pid 102 again, someone else's child
            (sample(0, 102, 8, 1), false), // ... on a CPU
            (fork(0, 9, 103, 1), false),   // another process
            (lost_samples(0, 10), false),  // about the events: never hidden
        ];
        for (i, (ev, want)) in evs.iter().enumerate() {
            assert_eq!(hide.hides(ev, &mut helpers), *want, "event {i}: {ev:?}");
        }
        assert!(helpers.is_empty());
    }
}
