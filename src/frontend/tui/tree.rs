//! The process tree (`t`): live processes as parent → children, threads folded into a count,
//! processes that started or exited in the last seconds marked (htop's tree, forkstat's
//! marks), and the set of a process and its descendants that Enter narrows the views to.
//!
//! Built from the process model when drawn (a few hundred or thousand processes: a sort and
//! a walk), so it is never stale and costs nothing while the stream view is shown.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::process::{Process, ProcessModel};

/// How long a process that started or exited stays marked, in ns.
pub const RECENT_NS: u64 = 5_000_000_000;

/// pid 2: the kernel threads' parent. Its children are folded into a count.
const KTHREADD: u32 = 2;

/// How a row is marked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    None,
    /// Started in the last [`RECENT_NS`].
    New,
    /// Exited (kept by the model for a while after).
    Exited,
}

/// One row of the tree, ready to draw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeRow {
    pub pid: u32,
    /// The guides before the name: `│  ├─ `.
    pub prefix: String,
    /// The name, or the command line when it was read (escaped).
    pub name: String,
    /// Threads besides the main one.
    pub threads: u32,
    pub mark: Mark,
    /// Kernel threads folded under this row (kthreadd).
    pub folded: usize,
}

fn shown_name(model: &ProcessModel, p: &Process) -> String {
    let comm = model
        .comm(p.pid)
        .map_or_else(|| "?".to_string(), |c| c.display());
    match p.argv.as_deref() {
        Some(argv) if !argv.is_gone() => argv.line(),
        _ => comm,
    }
}

/// Which processes are shown: the live ones, and those that exited in the last
/// [`RECENT_NS`] (marked). A process known from `/proc` at start whose exit the stream cannot
/// tell (it is not watched) is live while `alive` says so.
fn shown(p: &Process, now: u64, alive: &dyn Fn(u32) -> bool) -> bool {
    match p.exit() {
        Some(e) => now.saturating_sub(e) <= RECENT_NS,
        None => p.start().is_some() || alive(p.pid),
    }
}

/// The tree as of `now` (CLOCK_MONOTONIC ns, the records' clock), depth first, children
/// by pid.
pub fn rows(model: &ProcessModel, now: u64, alive: &dyn Fn(u32) -> bool) -> Vec<TreeRow> {
    let procs: FxHashMap<u32, &Process> = model
        .each_process()
        .filter(|p| shown(p, now, alive))
        .map(|p| (p.pid, p))
        .collect();
    let mut children: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
    let mut roots = Vec::new();
    for p in procs.values() {
        match p.ppid().filter(|pp| *pp != p.pid && procs.contains_key(pp)) {
            Some(pp) => children.entry(pp).or_default().push(p.pid),
            None => roots.push(p.pid),
        }
    }
    roots.sort_unstable();
    for c in children.values_mut() {
        c.sort_unstable();
    }
    let mut out = Vec::with_capacity(procs.len());
    // (pid, guides of its ancestors: true where that ancestor was a last child, is last)
    let mut stack: Vec<(u32, Vec<bool>)> = roots.iter().rev().map(|&r| (r, Vec::new())).collect();
    let mut seen = FxHashSet::default();
    // What no root leads to (a parent cycle in bad data) is walked from its lowest pid.
    let mut rest: Vec<u32> = procs.keys().copied().collect();
    rest.sort_unstable_by(|a, b| b.cmp(a));
    let mut next_root = |seen: &FxHashSet<u32>| {
        while let Some(p) = rest.pop() {
            if !seen.contains(&p) {
                return Some((p, Vec::new()));
            }
        }
        None
    };
    while let Some((pid, guides)) = stack.pop().or_else(|| next_root(&seen)) {
        if !seen.insert(pid) {
            continue; // a cycle in corrupt data: never loop
        }
        let Some(p) = procs.get(&pid) else { continue };
        let mut prefix = String::new();
        if let Some((last, above)) = guides.split_last() {
            for &l in above {
                prefix.push_str(if l { "   " } else { "│  " });
            }
            prefix.push_str(if *last { "└─ " } else { "├─ " });
        }
        let kids = children.get(&pid).map(Vec::as_slice).unwrap_or_default();
        let fold = pid == KTHREADD;
        let mark = if p.exit().is_some() {
            Mark::Exited
        } else if p
            .start()
            .is_some_and(|s| now.saturating_sub(s) <= RECENT_NS)
        {
            Mark::New
        } else {
            Mark::None
        };
        out.push(TreeRow {
            pid,
            prefix,
            name: shown_name(model, p),
            threads: p.threads.saturating_sub(1),
            mark,
            folded: if fold { kids.len() } else { 0 },
        });
        if fold {
            // Folded: neither they nor what is below them are walked again.
            let mut todo = kids.to_vec();
            while let Some(k) = todo.pop() {
                if seen.insert(k) {
                    todo.extend(children.get(&k).into_iter().flatten().copied());
                }
            }
        } else {
            for (i, &k) in kids.iter().enumerate().rev() {
                let mut g = guides.clone();
                g.push(i + 1 == kids.len());
                stack.push((k, g));
            }
        }
    }
    out
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
