//! The process tree built from scratch (the walk the TUI did on every frame before the
//! [`super::TreeIndex`]): every shown process collected, children sorted, guides carried
//! down. Kept for the test that the index, updated from the model's changes, draws the same
//! tree after random forks, exits, execs, re-parentings and evictions.

use proptest::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};

use super::*;
use crate::process::proc::SeedProcess;
use crate::testkit::events as tk;

/// What the walk has still to show: a process, or the row of a parent's folded exited
/// children; each with its guides.
enum Item {
    Process(u32, Vec<bool>),
    Exited(u32, Vec<bool>, Vec<u32>),
}

/// A drawn row as compared: (pid, guides and name, threads, mark, folded, exited).
type Drawn = (u32, String, String, u32, Mark, usize, usize);

fn drawn(rows: &[TreeRow]) -> Vec<Drawn> {
    let name = |r: &TreeRow| format!("{}{} / {}", r.prefix, r.name, r.short);
    let row = |r: &TreeRow| {
        (
            r.pid,
            name(r),
            String::new(),
            r.threads,
            r.mark,
            r.folded,
            r.exited,
        )
    };
    rows.iter().map(row).collect()
}

/// The tree as of `now`, every row named, built from every process of `model`.
fn from_scratch(model: &ProcessModel, now: u64, alive: &dyn Fn(u32) -> bool) -> Vec<Drawn> {
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
    let mut out = Vec::new();
    let mut stack: Vec<Item> = roots
        .iter()
        .rev()
        .map(|&r| Item::Process(r, Vec::new()))
        .collect();
    let mut seen = FxHashSet::default();
    let mut rest: Vec<u32> = procs.keys().copied().collect();
    rest.sort_unstable_by(|a, b| b.cmp(a));
    let mut next_root = |seen: &FxHashSet<u32>| {
        while let Some(p) = rest.pop() {
            if !seen.contains(&p) {
                return Some(Item::Process(p, Vec::new()));
            }
        }
        None
    };
    while let Some(item) = stack.pop().or_else(|| next_root(&seen)) {
        let (pid, guides) = match item {
            Item::Process(pid, guides) => (pid, guides),
            Item::Exited(parent, guides, gone) => {
                let name = exited_summary(model, &gone);
                let text = format!("{}{name} / {name}", guides_prefix(&guides));
                out.push((parent, text, String::new(), 0, Mark::Exited, 0, gone.len()));
                continue;
            }
        };
        if !seen.insert(pid) {
            continue;
        }
        let Some(p) = procs.get(&pid) else { continue };
        let kids = children.get(&pid).map(Vec::as_slice).unwrap_or_default();
        let fold = pid == KTHREADD;
        let mark = if exited(p, now) {
            Mark::Exited
        } else if p
            .start()
            .is_some_and(|s| now.saturating_sub(s) <= RECENT_NS)
        {
            Mark::New
        } else {
            Mark::None
        };
        let (name, short) = shown_name(model, p);
        let text = format!("{}{name} / {short}", guides_prefix(&guides));
        let folded = if fold { kids.len() } else { 0 };
        let threads = p.threads.saturating_sub(1);
        out.push((pid, text, String::new(), threads, mark, folded, 0));
        if fold {
            let mut todo = kids.to_vec();
            while let Some(k) = todo.pop() {
                if seen.insert(k) {
                    todo.extend(children.get(&k).into_iter().flatten().copied());
                }
            }
            continue;
        }
        let (gone, shown): (Vec<u32>, Vec<u32>) = kids.iter().partition(|k| {
            procs.get(k).is_some_and(|c| exited(c, now)) && !children.contains_key(k)
        });
        let (gone, kids) = if gone.len() > FOLD_EXITED {
            (gone, shown)
        } else {
            (Vec::new(), kids.to_vec())
        };
        if !gone.is_empty() {
            seen.extend(gone.iter().copied());
            let mut g = guides.clone();
            g.push(true);
            stack.push(Item::Exited(pid, g, gone));
        }
        let last_is_a_kid = stack
            .last()
            .is_none_or(|i| !matches!(i, Item::Exited(p, ..) if *p == pid));
        for (i, &k) in kids.iter().enumerate().rev() {
            let mut g = guides.clone();
            g.push(i + 1 == kids.len() && last_is_a_kid);
            stack.push(Item::Process(k, g));
        }
    }
    out
}

const S: u64 = 1_000_000_000;
const T0: u64 = 1_000 * S;

/// One step of a random history; pids are small so that they are reused.
#[derive(Clone, Debug)]
enum Step {
    Fork {
        pid: u32,
        parent: u32,
    },
    Exit {
        pid: u32,
    },
    Exec {
        pid: u32,
        name: u8,
    },
    Thread {
        pid: u32,
        tid: u32,
    },
    /// Orphans of exited parents given to `to` (as the writer reads from /proc).
    Reparent {
        to: u32,
    },
    /// Time passes (the model forgets long-exited processes).
    Wait {
        ms: u32,
    },
    /// A frame: the tree is drawn, `back` ms before the stream's time (a replay).
    Draw {
        back: u32,
    },
}

fn step() -> impl Strategy<Value = Step> {
    let pid = 1u32..48;
    prop_oneof![
        4 => (pid.clone(), 1u32..48).prop_map(|(pid, parent)| Step::Fork { pid, parent }),
        3 => pid.clone().prop_map(|pid| Step::Exit { pid }),
        1 => (pid.clone(), 0u8..4).prop_map(|(pid, name)| Step::Exec { pid, name }),
        1 => (pid.clone(), 48u32..64).prop_map(|(pid, tid)| Step::Thread { pid, tid }),
        1 => (1u32..48).prop_map(|to| Step::Reparent { to }),
        1 => (0u32..4000).prop_map(|ms| Step::Wait { ms }),
        2 => (0u32..3000).prop_map(|back| Step::Draw { back }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn the_index_kept_from_changes_draws_the_tree_built_from_scratch(
        seeds in proptest::collection::vec((1u32..48, 0u32..48), 0..24),
        steps in proptest::collection::vec(step(), 1..120),
        dead in 0u32..5,
    ) {
        let mut m = ProcessModel::new();
        m.collect_tree_changes(true);
        m.collect_orphans(true);
        // Processes from /proc (kthreadd among them when drawn), some gone since.
        let mut snap: Vec<SeedProcess> = Vec::new();
        for (pid, ppid) in seeds {
            if snap.iter().all(|s| s.pid != pid) {
                snap.push(SeedProcess {
                    pid,
                    ppid: (ppid != 0).then_some(ppid),
                    threads: vec![(pid, format!("s{pid}").into_bytes().into())],
                    maps: Vec::new(),
                    argv: None,
                    exe: None,
                    cgroup: None,
                });
            }
        }
        m.seed(snap);
        let alive = move |pid: u32| dead == 0 || pid % (dead + 2) != 0;
        let mut index = TreeIndex::default();
        let mut t = T0;
        for s in steps {
            t += 1_000;
            match s {
                Step::Fork { pid, parent } => m.apply(&[
                    tk::fork(0, t, pid, parent),
                    tk::comm(0, t + 1, pid, format!("c{}", pid % 5).as_bytes(), true),
                ]),
                Step::Exit { pid } => {
                    let ppid = m.process(pid).and_then(|p| p.ppid()).unwrap_or(1);
                    m.apply(&[tk::exit(0, t, pid, ppid)]);
                }
                Step::Exec { pid, name } => {
                    m.apply(&[tk::comm(0, t, pid, &[b'e', b'0' + name], true)]);
                }
                Step::Thread { pid, tid } => m.apply(&[tk::thread(0, t, pid, tid, pid)]),
                Step::Reparent { to } => {
                    for o in m.take_orphans() {
                        m.reparent(&o, to);
                    }
                }
                Step::Wait { ms } => {
                    t += u64::from(ms) * 1_000_000;
                    m.evict(t, |_, _| true);
                }
                Step::Draw { back } => {
                    let now = t.saturating_sub(u64::from(back) * 1_000_000);
                    index.sync(&m);
                    prop_assert_eq!(index.len(), m.processes());
                    let mut rows = index.rows_unnamed(&m, now, &alive);
                    let all = 0..rows.len();
                    name_rows(&m, &mut rows, all);
                    prop_assert_eq!(drawn(&rows), from_scratch(&m, now, &alive));
                }
            }
        }
        index.sync(&m);
        let mut rows = index.rows_unnamed(&m, t, &alive);
        let all = 0..rows.len();
        name_rows(&m, &mut rows, all);
        prop_assert_eq!(drawn(&rows), from_scratch(&m, t, &alive));
    }
}

#[test]
fn a_frame_names_only_the_rows_it_is_given() {
    let m = tests::seeded(tests::FAMILY);
    let mut index = TreeIndex::default();
    index.sync(&m);
    let mut rows = index.rows_unnamed(&m, T0, &|_| true);
    name_rows(&m, &mut rows, 2..4);
    let named: Vec<bool> = rows.iter().map(|r| !r.name.is_empty()).collect();
    assert_eq!(named, [false, false, true, true, false, false, false]);
    assert_eq!(rows[3].prefix, "│     └─ ", "guides from the rows above");
}
