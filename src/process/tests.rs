//! The process model against crafted record sequences.

use super::*;
use crate::cmdline::{ArgvSource, CmdLine};
use crate::testkit::events::{comm, comm_of, exit, fork, mmap2, thread, thread_exit};

const S: u64 = 1_000_000_000;
const T0: u64 = 100 * S;

fn name(m: &ProcessModel, tid: u32, time: u64) -> Option<String> {
    m.comm_at(tid, time)
        .map(|c| String::from_utf8_lossy(c.as_bytes()).into_owned())
}

fn path(m: &ProcessModel, pid: u32, time: u64, addr: u64) -> Option<(String, u64)> {
    m.find_mapping(pid, time, addr)
        .map(|(m, off)| (String::from_utf8_lossy(&m.file.path).into_owned(), off))
}

/// The shell (100) forks `pid` at `t`, which execs `name` a nanosecond later.
fn spawned(pid: u32, t: u64, name: &[u8]) -> [Event; 2] {
    [fork(0, t, pid, 100), comm(0, t + 1, pid, name, true)]
}

/// A shell (100) that exists at start, with its binary mapped.
fn with_shell() -> ProcessModel {
    let mut m = ProcessModel::new();
    m.seed(vec![proc::SeedProcess {
        pid: 100,
        ppid: Some(1),
        threads: vec![(100, (*b"bash").into())],
        maps: vec![Mapping::from_record(
            &mmap_rec(100, 0x400000, 0x1000, 0, b"/bin/bash"),
            0,
        )],
        argv: Some(proc_argv(b"bash\0-l")),
        exe: Some((*b"/bin/bash").into()),
        cgroup: None,
    }]);
    m
}

/// A command line as `/proc` gives it, NUL-separated.
fn proc_argv(raw: &[u8]) -> CmdLine {
    CmdLine::new(raw, 0, ArgvSource::Proc)
}

/// Its raw bytes, to compare.
fn raw(c: Option<&Arc<CmdLine>>) -> Option<&[u8]> {
    c.map(|c| c.raw())
}

fn mmap_rec(pid: u32, start: u64, len: u64, pgoff: u64, file: &[u8]) -> crate::event::MmapRecord {
    match mmap2(0, 0, pid, start, len, pgoff, file, 7).kind {
        EventKind::Mmap(m) => *m,
        _ => unreachable!(),
    }
}

#[test]
fn fork_inherits_name_parent_maps_and_argv() {
    let mut m = with_shell();
    m.apply(&[fork(0, T0, 200, 100)]);
    let t = m.task(200).unwrap();
    assert_eq!(
        (t.pid, t.ppid(), t.ptid(), t.start()),
        (200, Some(100), Some(100), Some(T0))
    );
    assert_eq!(name(&m, 200, T0).as_deref(), Some("bash"));
    let p = m.process(200).unwrap();
    assert_eq!((p.threads, m.threads(200)), (1, vec![200]));
    assert_eq!(raw(p.argv.as_ref()), Some(&b"bash\0-l"[..]));
    assert_eq!(p.exe.as_deref(), Some(&b"/bin/bash"[..]));
    assert_eq!(
        path(&m, 200, T0, 0x400010),
        Some(("/bin/bash".into(), 0x10))
    );
    // Shared until one of them maps something: then each has its own.
    assert!(std::ptr::eq(m.process(100).unwrap().space(), p.space()));
    m.apply(&[mmap2(0, T0 + 1, 200, 0x7000, 0x1000, 0, b"/lib/x.so", 9)]);
    assert_eq!(
        path(&m, 200, T0 + 1, 0x7000).map(|p| p.0).as_deref(),
        Some("/lib/x.so")
    );
    assert_eq!(
        path(&m, 100, T0 + 1, 0x7000),
        None,
        "the parent's copy is untouched"
    );
    assert_eq!(
        path(&m, 200, T0 + 1, 0x400000).map(|p| p.0).as_deref(),
        Some("/bin/bash")
    );
}

#[test]
fn exec_renames_and_replaces_the_maps_and_lookups_answer_as_of_their_time() {
    let mut m = with_shell();
    m.collect_execs(true);
    m.apply(&[
        fork(0, T0, 200, 100),
        comm(0, T0 + 10, 200, b"sleep", true),
        mmap2(
            0,
            T0 + 11,
            200,
            0x500000,
            0x2000,
            0x1000,
            b"/usr/bin/sleep",
            3,
        ),
    ]);
    assert_eq!(
        name(&m, 200, T0 + 5).as_deref(),
        Some("bash"),
        "before the exec"
    );
    assert_eq!(name(&m, 200, T0 + 10).as_deref(), Some("sleep"));
    assert_eq!(m.comm(200).map(Comm::as_bytes), Some(&b"sleep"[..]));
    let p = m.process(200).unwrap();
    assert_eq!(p.exec(), Some(T0 + 10));
    assert_eq!(p.argv, None, "not the shell's any more");
    // The new image only, after the exec; the shell's before it.
    assert_eq!(path(&m, 200, T0 + 12, 0x400000), None);
    assert_eq!(
        path(&m, 200, T0 + 12, 0x500100),
        Some(("/usr/bin/sleep".into(), 0x1100))
    );
    assert_eq!(
        path(&m, 200, T0 + 9, 0x400000).map(|p| p.0).as_deref(),
        Some("/bin/bash")
    );
    let execs = m.take_execs();
    assert_eq!(execs.len(), 1);
    assert_eq!((execs[0].pid, execs[0].time), (200, T0 + 10));
    m.set_argv(200, T0 + 10, proc_argv(b"sleep\x001").shared());
    assert_eq!(
        raw(m.process(200).unwrap().argv.as_ref()),
        Some(&b"sleep\x001"[..])
    );
    // A stale read (for an earlier exec) is not taken.
    m.set_argv(200, T0 + 3, proc_argv(b"wrong").shared());
    assert_eq!(
        raw(m.process(200).unwrap().argv.as_ref()),
        Some(&b"sleep\x001"[..])
    );
    assert_eq!(raw(m.exec_argv(200, T0 + 10)), Some(&b"sleep\x001"[..]));
    assert_eq!(m.exec_argv(200, T0 + 3), None, "not that exec");
    assert_eq!(m.exec_argv(999, T0 + 10), None);
}

#[test]
fn threads_share_the_process_and_its_maps() {
    let mut m = with_shell();
    m.apply(&spawned(300, T0, b"srv"));
    m.apply(&[
        thread(1, T0 + 2, 300, 301, 300),
        comm_of(1, T0 + 3, 300, 301, b"worker", false),
        mmap2(1, T0 + 4, 300, 0x9000, 0x1000, 0, b"/lib/t.so", 4),
    ]);
    let t = m.task(301).unwrap();
    assert_eq!((t.pid, t.ppid(), t.ptid()), (300, Some(100), Some(300)));
    assert_eq!(
        name(&m, 301, T0 + 2).as_deref(),
        Some("srv"),
        "inherited from its creator"
    );
    assert_eq!(name(&m, 301, T0 + 3).as_deref(), Some("worker"));
    assert_eq!(
        name(&m, 300, T0 + 3).as_deref(),
        Some("srv"),
        "the process keeps its name"
    );
    assert_eq!(m.threads(300), vec![300, 301]);
    assert_eq!(m.process(300).unwrap().threads, 2);
    assert_eq!(m.processes(), 2);
    // A mapping made by a thread is the process's.
    assert!(path(&m, 300, T0 + 4, 0x9000).is_some());
    m.apply(&[thread_exit(1, T0 + 5, 300, 301)]);
    let p = m.process(300).unwrap();
    assert_eq!((p.threads, p.exit()), (1, None));
    assert_eq!(m.threads(300), vec![300]);
    m.apply(&[exit(0, T0 + 6, 300, 100)]);
    let p = m.process(300).unwrap();
    assert_eq!(p.exit(), Some(T0 + 6), "its last thread exited");
    assert_eq!(m.task(300).unwrap().lifetime(), Some(6));
}

#[test]
fn exited_tasks_answer_for_a_while_then_are_forgotten() {
    let mut m = with_shell();
    m.apply(&[
        fork(0, T0, 200, 100),
        mmap2(0, T0 + 1, 200, 0x7000, 0x1000, 0, b"/lib/x.so", 9),
        exit(0, T0 + 2, 200, 100),
        fork(0, T0 + 3, 201, 100),
    ]);
    m.evict(T0 + 5 * S, |_, _| true);
    // A sample taken before it exited is still named, and its address found.
    assert_eq!(name(&m, 200, T0 + 1).as_deref(), Some("bash"));
    assert!(path(&m, 200, T0 + 1, 0x7000).is_some());
    assert_eq!(m.len(), 3);
    m.evict(T0 + 2 + EXITED_KEEP_NS + S, |_, _| true);
    assert_eq!(name(&m, 200, T0 + 1), None);
    assert!(m.process(200).is_none());
    assert_eq!(m.len(), 2, "the live ones stay");
    assert!(m.task(201).is_some() && m.task(100).is_some());
}

#[test]
fn a_reused_pid_keeps_its_previous_owner_for_earlier_lookups() {
    let mut m = with_shell();
    m.apply(&spawned(200, T0, b"first"));
    m.apply(&[
        mmap2(0, T0 + 2, 200, 0x1000, 0x1000, 0, b"/bin/first", 1),
        exit(0, T0 + 3, 200, 100),
        fork(0, T0 + 10, 200, 100),
        comm(0, T0 + 11, 200, b"second", true),
        mmap2(0, T0 + 12, 200, 0x1000, 0x1000, 0, b"/bin/second", 2),
    ]);
    assert_eq!(name(&m, 200, T0 + 2).as_deref(), Some("first"));
    assert_eq!(name(&m, 200, T0 + 12).as_deref(), Some("second"));
    assert_eq!(
        path(&m, 200, T0 + 2, 0x1000).map(|p| p.0).as_deref(),
        Some("/bin/first")
    );
    assert_eq!(
        path(&m, 200, T0 + 12, 0x1000).map(|p| p.0).as_deref(),
        Some("/bin/second")
    );
    let now = m.task(200).unwrap();
    assert_eq!((now.start(), now.exit()), (Some(T0 + 10), None));
    // A reuse whose exit record was lost: the old one ends at the new fork.
    m.apply(&[fork(0, T0 + 20, 200, 100)]);
    assert_eq!(m.task_at(200, T0 + 15).unwrap().exit(), Some(T0 + 20));
}

#[test]
fn records_about_unknown_tasks_make_them() {
    let mut m = ProcessModel::new();
    m.apply(&[
        comm(0, T0, 55, b"late", false),
        mmap2(0, T0 + 1, 66, 0x1000, 0x1000, 0, b"/bin/x", 1),
        exit(0, T0 + 2, 77, 1),
    ]);
    assert_eq!(name(&m, 55, T0).as_deref(), Some("late"));
    assert!(path(&m, 66, T0 + 1, 0x1000).is_some());
    assert_eq!(m.task(77).unwrap().exit(), Some(T0 + 2));
    assert_eq!(
        m.task(77).unwrap().lifetime(),
        None,
        "its start was not seen"
    );
    // A name asked for before the first one known: the earliest known.
    assert_eq!(name(&m, 55, 0).as_deref(), Some("late"));
    // Kernel mappings (pid -1) belong to no process.
    m.apply(&[mmap2(
        0,
        T0 + 3,
        u32::MAX,
        0x1000,
        0x1000,
        0,
        b"[kernel]",
        0,
    )]);
    assert!(m.process(u32::MAX).is_none());
}

#[test]
fn seeding_fills_gaps_and_never_overrides_the_stream() {
    let mut m = ProcessModel::new();
    // The stream already told us about 200 (it forked after the events were enabled, before
    // /proc was read).
    m.apply(&spawned(200, T0, b"new"));
    m.seed(vec![
        proc::SeedProcess {
            pid: 100,
            ppid: Some(1),
            threads: vec![(100, (*b"bash").into()), (101, (*b"bash-helper").into())],
            maps: vec![],
            argv: None,
            exe: None,
            cgroup: None,
        },
        proc::SeedProcess {
            pid: 200,
            ppid: Some(100),
            threads: vec![(200, (*b"stale").into())],
            maps: vec![],
            argv: None,
            exe: None,
            cgroup: None,
        },
    ]);
    assert_eq!(name(&m, 200, T0 + 5).as_deref(), Some("new"));
    assert_eq!(name(&m, 101, T0).as_deref(), Some("bash-helper"));
    assert_eq!(m.threads(100), vec![100, 101]);
    assert_eq!(m.process(100).unwrap().threads, 2);
    assert_eq!(m.task(101).unwrap().ppid(), Some(1));
}

#[test]
fn seeding_from_the_real_proc_knows_us_and_our_code() {
    let mut m = ProcessModel::new();
    m.seed(proc::snapshot(
        std::path::Path::new("/proc"),
        &proc::SeedOptions {
            maps: true,
            argv: true,
        },
    ));
    let me = std::process::id();
    assert!(m.comm(me).is_some());
    assert!(m.process(1).is_some());
    // The address of this very function lies in an executable mapping of ours.
    let addr = seeding_from_the_real_proc_knows_us_and_our_code as *const () as usize as u64;
    let (map, off) = m.find_mapping(me, 0, addr).expect("our code is mapped");
    assert!(map.prot & libc::PROT_EXEC as u32 != 0);
    assert!(off >= map.pgoff);
}

#[test]
fn the_task_table_is_bounded_even_when_exits_are_lost() {
    let mut m = ProcessModel::new();
    let n = MAX_TASKS as u32 + 1000;
    // Every one forked, half exited, the other half's exits lost.
    let evs: Vec<_> = (0..n)
        .flat_map(|i| {
            let pid = 10_000 + i;
            let t = T0 + i as u64;
            let mut v = vec![fork(0, t, pid, 1)];
            if i % 2 == 0 {
                v.push(exit(0, t, pid, 1));
            }
            v
        })
        .collect();
    m.apply(&evs);
    assert_eq!(m.len(), n as usize);
    // Not a second later, and every exited one is within the keep window: the cap decides.
    m.evict(T0 + n as u64, |_, tid| tid % 4 == 1);
    assert!(m.len() <= MAX_TASKS * 3 / 4, "{}", m.len());
    assert!(m.processes() <= MAX_TASKS, "{}", m.processes());
    // The newest exited ones stayed longest; the "alive" ones the probe vouched for stay.
    assert!(m.task(10_000 + n - 2).is_some());
    assert!(m.task(10_001).is_some());
}

#[test]
fn names_keep_a_short_history() {
    let mut n = Names::default();
    for (i, c) in [b"a", b"b", b"c", b"d"].iter().enumerate() {
        n.set(10 * (i as u64 + 1), Comm::new(&c[..]));
    }
    let at = |n: &Names, t| n.at(t).map(|c| c.as_bytes().to_vec());
    assert_eq!(
        at(&n, 5),
        Some(b"b".to_vec()),
        "a is forgotten: the earliest known"
    );
    assert_eq!(at(&n, 25), Some(b"b".to_vec()));
    assert_eq!(at(&n, 40), Some(b"d".to_vec()));
    // A record that comes late goes in its place.
    n.set(35, Comm::new(b"late"));
    assert_eq!(at(&n, 36), Some(b"late".to_vec()));
    assert_eq!(at(&n, 45), Some(b"d".to_vec()));
}

#[test]
fn the_handle_is_shared_between_threads() {
    let h = ModelHandle::default();
    h.write().apply(&[comm(0, T0, 9, b"nine", false)]);
    let r = h.clone();
    let got = std::thread::spawn(move || r.read().comm(9).map(|c| c.as_bytes().to_vec()))
        .join()
        .unwrap();
    assert_eq!(got, Some(b"nine".to_vec()));
}

/// A child forks, its parent exits: the kernel re-parents the child, and the model follows
/// once the writer has read the new parent (here: told).
#[test]
fn orphans_are_listed_and_follow_their_new_parent() {
    let mut m = with_shell();
    m.collect_orphans(true);
    // bash (100) runs `bash -c 'sleep 42.5 & exit'`: 300, whose child 301 sleeps.
    m.apply(&spawned(300, T0, b"bash"));
    m.apply(&[
        fork(0, T0 + 10, 301, 300),
        thread(0, T0 + 11, 301, 302, 301),
    ]);
    m.apply(&[comm(0, T0 + 12, 301, b"sleep", true)]);
    assert!(m.take_orphans().is_empty(), "nobody exited yet");
    m.apply(&[exit(0, T0 + 20, 300, 100)]);
    let orphans = m.take_orphans();
    assert_eq!(
        orphans,
        [Orphan {
            pid: 301,
            parent: 300,
            comm: Comm::new(b"sleep")
        }]
    );
    assert!(m.take_orphans().is_empty(), "said once");
    let before = m.reparents();
    m.reparent(&orphans[0], 1);
    assert_eq!(m.process(301).and_then(Process::ppid), Some(1));
    assert_eq!(m.task(301).and_then(Task::ppid), Some(1));
    assert_eq!(m.task(302).and_then(Task::ppid), Some(1), "its threads too");
    assert_eq!(m.reparents(), before + 1);
    // A stale answer (the parent is already another one) changes nothing.
    m.reparent(&orphans[0], 77);
    assert_eq!(m.process(301).and_then(Process::ppid), Some(1));
    // Its exit record names the parent it has then: a subreaper that took it later.
    m.apply(&[exit(0, T0 + 50, 301, 55)]);
    assert_eq!(m.process(301).and_then(Process::ppid), Some(55));
    assert_eq!(m.reparents(), before + 2);
    // Dead children are no orphans; a model not asked lists nothing.
    let family = [
        fork(0, T0 + 10, 301, 300),
        exit(0, T0 + 15, 301, 300),
        fork(0, T0 + 16, 303, 300),
        exit(0, T0 + 20, 300, 100),
    ];
    let mut dead = with_shell();
    dead.collect_orphans(true);
    dead.apply(&spawned(300, T0, b"bash"));
    dead.apply(&family);
    assert_eq!(
        dead.take_orphans()
            .iter()
            .map(|o| o.pid)
            .collect::<Vec<_>>(),
        [303]
    );
    let mut quiet = with_shell();
    quiet.apply(&spawned(300, T0, b"bash"));
    quiet.apply(&family);
    assert!(quiet.take_orphans().is_empty());
}

#[test]
fn the_execd_file_is_the_first_executable_mapping_after_the_exec() {
    use crate::testkit::events::{mmap_record, mmap2_extra};
    let mut m = with_shell();
    let data = |t: u64, file: &[u8]| {
        let mut r = mmap_rec(200, 0x600000, 0x1000, 0, file);
        r.mmap2 = Some(mmap2_extra(
            4,
            libc::PROT_READ as u32,
            libc::MAP_PRIVATE as u32,
        ));
        mmap_record(0, t, r)
    };
    m.apply(&spawned(200, T0, b"innocent-daemo"));
    assert_eq!(
        m.process(200).and_then(|p| p.exe.clone()),
        None,
        "not mapped yet"
    );
    m.apply(&[
        data(T0 + 2, b"/tmp/data.bin"),
        mmap2(0, T0 + 3, 200, 0x7ff000, 0x1000, 0, b"[vdso]", 0),
        mmap2(0, T0 + 4, 200, 0x400000, 0x1000, 0, b"/tmp/evil", 9),
        mmap2(0, T0 + 5, 200, 0x7f0000, 0x1000, 0, b"/lib/ld.so", 10),
    ]);
    assert_eq!(
        m.process(200).and_then(|p| p.exe.clone()).as_deref(),
        Some(&b"/tmp/evil"[..])
    );
    // A fork copies it; the next exec forgets it until its own mapping comes.
    m.apply(&[fork(0, T0 + 6, 201, 200)]);
    assert_eq!(
        m.process(201).and_then(|p| p.exe.clone()).as_deref(),
        Some(&b"/tmp/evil"[..])
    );
    m.apply(&[comm(0, T0 + 7, 201, b"ls", true)]);
    assert_eq!(m.process(201).and_then(|p| p.exe.clone()), None);
    m.apply(&[mmap2(
        0,
        T0 + 8,
        201,
        0x400000,
        0x1000,
        0,
        b"/usr/bin/ls",
        11,
    )]);
    assert_eq!(
        m.process(201).and_then(|p| p.exe.clone()).as_deref(),
        Some(&b"/usr/bin/ls"[..])
    );
}

#[test]
fn a_command_line_from_the_exec_is_never_replaced_by_a_later_read() {
    let mut m = with_shell();
    m.collect_execs(true);
    m.apply(&spawned(200, T0, b"sleep"));
    let exec = |raw: &[u8]| CmdLine::new(raw, 0, ArgvSource::Exec).shared();
    let source = |m: &ProcessModel| m.exec_argv(200, T0 + 1).map(|a| a.source());
    m.set_argv(200, T0 + 1, CmdLine::gone().shared());
    assert_eq!(source(&m), Some(ArgvSource::Gone));
    m.set_argv(200, T0 + 1, proc_argv(b"rewritten").shared());
    assert_eq!(source(&m), Some(ArgvSource::Proc), "a read beats nothing");
    m.set_argv(200, T0 + 1, exec(b"sleep\x000.1"));
    assert_eq!(
        source(&m),
        Some(ArgvSource::Exec),
        "the exec's own beats a read"
    );
    m.set_argv(200, T0 + 1, proc_argv(b"rewritten").shared());
    m.set_argv(200, T0 + 1, CmdLine::gone().shared());
    assert_eq!(raw(m.exec_argv(200, T0 + 1)), Some(&b"sleep\x000.1"[..]));
}

/// `sh -c 'exec sleep 1'`: two execs of one process within a chunk; each keeps its own
/// command line, filed after both were applied.
#[test]
fn each_exec_of_a_process_keeps_its_command_line() {
    let mut m = with_shell();
    m.collect_execs(true);
    m.apply(&[
        fork(0, T0, 200, 100),
        comm(0, T0 + 1, 200, b"sh", true),
        comm(0, T0 + 5, 200, b"sleep", true),
    ]);
    assert_eq!(m.take_execs().len(), 2);
    m.set_argv(200, T0 + 1, proc_argv(b"sh\0-c\0exec sleep 1").shared());
    m.set_argv(200, T0 + 5, proc_argv(b"sleep\x001").shared());
    assert_eq!(
        raw(m.exec_argv(200, T0 + 1)),
        Some(&b"sh\0-c\0exec sleep 1"[..])
    );
    assert_eq!(raw(m.exec_argv(200, T0 + 5)), Some(&b"sleep\x001"[..]));
    assert_eq!(
        raw(m.process(200).unwrap().argv.as_ref()),
        Some(&b"sleep\x001"[..]),
        "the process's own is the latest"
    );
    assert_eq!(m.exec_argv(200, T0 + 3), None, "no exec then");
}

#[test]
fn the_image_a_time_falls_in_is_the_last_fork_or_exec_before_it() {
    let mut m = with_shell();
    m.apply(&spawned(200, T0, b"jit"));
    m.apply(&[comm(0, T0 + 5 * S, 200, b"jit2", true)]);
    // Before perfwatch saw the process start: unknown.
    assert_eq!(m.image_at(100, T0), 0);
    assert_eq!(m.image_at(200, T0), T0);
    assert_eq!(m.image_at(200, T0 + 2 * S), T0 + 1);
    assert_eq!(m.image_at(200, T0 + 6 * S), T0 + 5 * S);
    // The pid, reused by another process after this one's exit: a new image.
    m.apply(&[exit(0, T0 + 7 * S, 200, 100)]);
    m.apply(&[fork(0, T0 + 8 * S, 200, 100)]);
    assert_eq!(m.image_at(200, T0 + 9 * S), T0 + 8 * S);
    assert_eq!(m.image_at(200, T0 + 6 * S), T0 + 5 * S);
}
