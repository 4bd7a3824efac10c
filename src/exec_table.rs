//! The command lines a source filed for execs, by pid and time, until the pipeline takes
//! them for the process model. The live source's exec watcher (`perf::exec_watch`) files
//! what it read from each exec's stack; the pipeline takes an exec's line when the exec's
//! COMM record leaves the ordering stage. Pure data: nothing here reads the kernel.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rustc_hash::FxHashMap;

use crate::cmdline::CmdLine;

/// Entries the table keeps at most (the pipeline takes them within a second or so).
const MAX_ENTRIES: usize = 8192;
/// How long an entry waits for the pipeline, in the events' time.
const KEEP_NS: u64 = 10_000_000_000;

/// One exec's command line, as filed.
#[derive(Clone, Debug)]
struct Entry {
    time: u64,
    argv: Arc<CmdLine>,
    /// For a command line read from `/proc`: when it was read (a later exec of the same pid
    /// before that makes it the later program's).
    read_at: Option<u64>,
}

#[derive(Debug, Default)]
struct Entries {
    by_pid: FxHashMap<u32, VecDeque<Entry>>,
    /// (time, pid) in filing order, for the bound.
    order: VecDeque<(u64, u32)>,
    newest: u64,
}

/// The command lines the exec watcher filed, until the pipeline takes them.
#[derive(Debug, Default)]
pub struct ExecTable {
    entries: Mutex<Entries>,
    /// Every exec sample with an earlier time (in the events' clock) has been filed.
    progress: AtomicU64,
    /// Exec samples the kernel could not write (its LOST records), and stacks read from
    /// `/proc` instead.
    pub(crate) lost: AtomicU64,
    pub(crate) from_proc: AtomicU64,
}

impl ExecTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// File the command line of `pid`'s exec at `time` (`read_at`: when it was read from
    /// `/proc`, if it was).
    pub fn insert(&self, pid: u32, time: u64, argv: CmdLine, read_at: Option<u64>) {
        let mut e = self.lock();
        let list = e.by_pid.entry(pid).or_default();
        // A command line read from /proc after this exec began is this exec's, not the
        // earlier one's.
        for old in list.iter_mut() {
            if old.read_at.is_some_and(|r| r > time) && old.time < time {
                old.argv = CmdLine::gone().shared();
                old.read_at = None;
            }
        }
        let at = list.partition_point(|x| x.time <= time);
        list.insert(
            at,
            Entry {
                time,
                argv: argv.shared(),
                read_at,
            },
        );
        e.order.push_back((time, pid));
        e.newest = e.newest.max(time);
        let cut = e.newest.saturating_sub(KEEP_NS);
        while e.order.len() > MAX_ENTRIES || e.order.front().is_some_and(|(t, _)| *t < cut) {
            let Some((t, p)) = e.order.pop_front() else {
                break;
            };
            if let Some(l) = e.by_pid.get_mut(&p) {
                l.retain(|x| x.time != t);
                if l.is_empty() {
                    e.by_pid.remove(&p);
                }
            }
        }
    }

    /// The command line of `pid`'s exec whose COMM record came at `since`: the first one
    /// filed at or after it (the tracepoint fires at the end of the exec, after the COMM
    /// record). Earlier ones of that pid are dropped.
    pub fn take(&self, pid: u32, since: u64) -> Option<Arc<CmdLine>> {
        let mut e = self.lock();
        let list = e.by_pid.get_mut(&pid)?;
        while list.front().is_some_and(|x| x.time < since) {
            list.pop_front();
        }
        let got = list.pop_front().map(|x| x.argv);
        if list.is_empty() {
            e.by_pid.remove(&pid);
        }
        got
    }

    /// Every exec sample before this time (the events' clock) has been filed.
    pub fn progress(&self) -> u64 {
        self.progress.load(Ordering::Acquire)
    }

    pub(crate) fn set_progress(&self, t: u64) {
        self.progress.fetch_max(t, Ordering::AcqRel);
    }

    /// Exec samples lost by the kernel, and command lines read from `/proc` instead of the
    /// exec's stack.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.lost.load(Ordering::Relaxed),
            self.from_proc.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmdline::ArgvSource;

    fn cl(s: &[u8]) -> CmdLine {
        CmdLine::new(s, 0, ArgvSource::Exec)
    }

    #[test]
    fn the_table_answers_by_pid_and_time() {
        let t = ExecTable::default();
        t.insert(7, 100, cl(b"a\0"), None);
        t.insert(7, 200, cl(b"b\0"), None);
        t.insert(8, 150, cl(b"c\0"), None);
        // The COMM record comes a little before the tracepoint.
        assert_eq!(
            t.take(7, 190).map(|c| c.raw().to_vec()),
            Some(b"b".to_vec())
        );
        assert!(
            t.take(7, 90).is_none(),
            "the earlier one went with the later"
        );
        assert_eq!(
            t.take(8, 150).map(|c| c.raw().to_vec()),
            Some(b"c".to_vec())
        );
        assert!(t.take(8, 150).is_none(), "taken once");
    }

    #[test]
    fn a_proc_read_after_a_later_exec_is_not_the_earlier_ones() {
        let t = ExecTable::default();
        let proc = CmdLine::new(b"later\0", 0, ArgvSource::Proc);
        // Exec at 100 read from /proc at 300; the same pid exec'd again at 250.
        t.insert(7, 100, proc, Some(300));
        t.insert(7, 250, cl(b"later\0"), None);
        assert!(t.take(7, 100).is_some_and(|c| c.is_gone()));
        assert_eq!(t.take(7, 250).map(|c| c.source()), Some(ArgvSource::Exec));
        // Read before the next exec: kept.
        t.insert(9, 100, CmdLine::new(b"x\0", 0, ArgvSource::Proc), Some(120));
        t.insert(9, 250, cl(b"y\0"), None);
        assert_eq!(
            t.take(9, 100).map(|c| c.raw().to_vec()),
            Some(b"x".to_vec())
        );
    }

    #[test]
    fn the_table_is_bounded() {
        let t = ExecTable::default();
        for i in 0..(MAX_ENTRIES as u64 + 100) {
            t.insert(i as u32, 1_000 + i, cl(b"x\0"), None);
        }
        assert!(t.lock().order.len() <= MAX_ENTRIES);
        assert!(t.take(0, 0).is_none(), "the oldest went");
        // Ten seconds of event time later, everything older goes.
        t.insert(1, 1_000 + KEEP_NS + 100_000, cl(b"x\0"), None);
        assert_eq!(t.lock().order.len(), 1);
    }
}
