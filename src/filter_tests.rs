//! The filter language's unit tests (moved out of `filter.rs` to keep it well under the
//! 1 000-line limit).

use super::*;
use crate::event::TaskRecord;

/// `ppid` forks `pid` on CPU 1 at time 5.
fn fork(pid: u32, ppid: u32) -> Event {
    crate::testkit::events::fork(1, 5, pid, ppid)
}

fn comm(pid: u32, name: &[u8]) -> Event {
    Event {
        cpu: 0,
        pid,
        tid: pid,
        time: 6,
        id: 0,
        kind: EventKind::Comm {
            pid,
            tid: pid,
            comm: name.into(),
            exec: true,
        },
    }
}

fn sample(cpu: u32, pid: u32) -> Event {
    Event {
        cpu,
        pid,
        tid: pid,
        time: 7,
        id: 0,
        kind: EventKind::sample(0xffff, 1000, 0),
    }
}

struct Names(Vec<(u32, &'static [u8])>);
impl CommLookup for Names {
    fn name(&self, pid: u32, _time: u64) -> Option<&[u8]> {
        self.0.iter().find(|(p, _)| *p == pid).map(|(_, n)| *n)
    }
    fn cgroup(&self, pid: u32, _time: u64) -> Option<&str> {
        (pid == 42).then_some("/system.slice/nginx.service")
    }
}

#[test]
fn argv_and_free_words_look_at_command_lines() {
    use crate::cmdline::{ArgvSource, CmdLine};
    let mut model = ProcessModel::new();
    model.collect_execs(true);
    let exec = comm(42, b"rm");
    model.apply(std::slice::from_ref(&exec));
    let argv = CmdLine::new(b"rm\0-rf\0/srv/data\0", 0, ArgvSource::Exec);
    model.set_argv(42, 6, argv.shared());
    let yes = |f: &str, e: &Event| Filter::parse(f).unwrap().matches(e, &model);
    assert!(yes("argv:*-rf*", &exec));
    assert!(yes("argv:/SRV/data", &exec), "a substring, any case");
    assert!(
        yes("argv:*-rf* type:sample", &sample(0, 42)),
        "the process's samples"
    );
    assert!(!yes("argv:*--force*", &exec));
    assert!(!yes("argv:rm", &comm(43, b"rm")), "no command line known");
    // A free word finds the exec by its command line, as the log shows it.
    assert!(yes("srv/data", &exec));
    assert!(!yes("srv/data", &comm(43, b"rm")));
    let f = Filter::parse("argv:x").unwrap();
    assert!(f.uses_names() && f.uses_argv());
    assert!(Filter::parse("word").unwrap().uses_argv());
    assert!(!Filter::parse("comm:x").unwrap().uses_argv());
}

#[test]
fn cgroup_and_filename() {
    assert!(m("cgroup:*nginx*", &sample(0, 42)));
    assert!(m("cgroup:system.slice", &sample(0, 42)), "a substring");
    assert!(!m("cgroup:*nginx*", &sample(0, 7)), "another group");
    assert!(!m("cgroup:*", &sample(0, 9)), "no group known");
    let map = crate::testkit::events::mmap2(0, 5, 42, 0x1000, 0x1000, 0, b"/usr/lib/libc.so.6", 1);
    assert!(m("filename:libc*", &map) && m("filename:*/libc.so.6", &map));
    assert!(!m("filename:libm*", &map));
    assert!(
        !m("filename:libc", &sample(0, 42)),
        "samples have no file name"
    );
    assert!(
        !Filter::parse("filename:x cgroup:y")
            .unwrap()
            .names_samples()
    );
    assert!(Filter::parse("cgroup:x").unwrap().uses_names());
}

fn m(f: &str, ev: &Event) -> bool {
    Filter::parse(f)
        .unwrap()
        .matches(ev, &Names(vec![(42, b"bash"), (7, b"kworker/0:1")]))
}

#[test]
fn empty_filter_keeps_all() {
    let f = Filter::parse("   ").unwrap();
    assert!(f.is_empty());
    assert!(f.matches(&sample(0, 1), &NoComms));
}

#[test]
fn types_and_negation() {
    assert!(m("type:fork,exit", &fork(2, 1)));
    assert!(!m("type:fork,exit", &sample(0, 1)));
    assert!(m("!type:sample", &fork(2, 1)));
    assert!(!m("!type:sample", &sample(0, 1)));
    assert!(m("type:COMM", &comm(3, b"x")));
    assert!(m(
        "type:switch",
        &Event {
            kind: EventKind::Switch {
                out: true,
                preempt: false,
                next_prev: None
            },
            ..sample(0, 1)
        }
    ));
}

#[test]
fn ids_ranges_and_lists() {
    assert!(m("pid:2", &fork(2, 1)), "pid is the forked task");
    assert!(!m("pid:1", &fork(2, 1)));
    assert!(m("ppid:1", &fork(2, 1)));
    assert!(!m("ppid:1", &sample(0, 1)), "samples have no ppid");
    assert!(m("tid:1-3", &fork(2, 1)));
    assert!(m("cpu:0-1", &sample(1, 5)));
    assert!(!m("cpu:0", &sample(1, 5)));
    assert!(m("cpu:3,1", &sample(1, 5)));
    assert!(m("pid:5 cpu:1", &sample(1, 5)));
    assert!(!m("pid:5 cpu:0", &sample(1, 5)), "terms are ANDed");
}

#[test]
fn alternatives_with_bar_or_the_word_or() {
    assert!(m("type:fork|type:exit", &fork(2, 1)));
    assert!(!m("type:comm|type:exit", &fork(2, 1)));
    assert!(m("type:comm | pid:2", &fork(2, 1)));
    assert!(m("pid:9 OR ppid:1", &fork(2, 1)));
    // AND binds tighter: (pid:5 cpu:0) or (pid:5 cpu:1).
    assert!(m("pid:5 cpu:0 or pid:5 cpu:1", &sample(1, 5)));
    assert!(!m("pid:5 cpu:0 or pid:6 cpu:1", &sample(1, 5)));
    assert!(m("!type:sample|cpu:1", &sample(1, 5)));
    for bad in [
        "|type:fork",
        "type:fork |",
        "type:fork || pid:1",
        "or",
        "a or or b",
    ] {
        let e = Filter::parse(bad).unwrap_err().to_string();
        assert!(e.contains("'|'") || e.contains("'or'"), "{bad}: {e}");
    }
    let f = Filter::parse("type:fork|pid:3").unwrap();
    assert_eq!(f.source(), "type:fork|pid:3");
}

#[test]
fn which_filters_name_samples() {
    let n = |s: &str| Filter::parse(s).unwrap().names_samples();
    assert!(n("type:sample"));
    assert!(n("type:fork|sym:memcpy"));
    assert!(n("dso:libc*") && n("event:cpu-clock") && n("prev_pid:0"));
    assert!(!n("type:fork,exit") && !n("!type:sample") && !n("comm:make") && !n(""));
}

#[test]
fn comm_substring_glob_and_lookup() {
    assert!(m("comm:bas", &comm(3, b"bash")));
    assert!(m("comm:BASH", &comm(3, b"bash")));
    assert!(m("comm:b*h", &comm(3, b"bash")));
    assert!(!m("comm:b*x", &comm(3, b"bash")));
    assert!(m("comm:?ash", &comm(3, b"bash")));
    assert!(m("comm:bash", &sample(0, 42)), "known from the lookup");
    assert!(!m("comm:bash", &sample(0, 43)), "unknown pid");
    assert!(m("comm:kworker*", &sample(0, 7)));
    assert!(m("!comm:kworker*", &sample(0, 42)));
    assert!(m("comm:zsh,bash", &sample(0, 42)));
}

fn switch(prev: &[u8], prev_pid: i32, next: &[u8], next_pid: i32) -> Event {
    use crate::testkit::tracepoints as craft;
    let desc = craft::desc(0, "sched:sched_switch", craft::SCHED_SWITCH);
    let raw = craft::sched_switch(prev, prev_pid, 1, next, next_pid);
    Event {
        kind: craft::sample(desc, 1, 0, raw),
        ..sample(0, 1)
    }
}

#[test]
fn event_names_and_tracepoint_fields() {
    let sw = switch(b"bash", 42, b"swapper/0", 0);
    assert!(m("event:sched:sched_switch", &sw));
    assert!(m("event:sched:*", &sw));
    assert!(m("event:SWITCH", &sw));
    assert!(!m("event:cycles", &sw));
    assert!(!m("event:sched", &sample(0, 1)), "an unnamed sample");
    assert!(!m("event:sched", &fork(2, 1)));
    assert!(m("prev_comm:bash", &sw));
    assert!(m("prev_comm:ba*", &sw));
    assert!(!m("prev_comm:zsh", &sw));
    assert!(m("next_pid:0", &sw));
    assert!(m("prev_pid:40-50", &sw));
    assert!(m("prev_pid:0x2a", &sw));
    assert!(!m("next_pid:1", &sw));
    assert!(m("!next_pid:1", &sw));
    assert!(
        m("fields.common_pid:42", &sw),
        "the kernel's common fields can be asked for"
    );
    assert!(m("common_pid:1", &sw), "common_pid: is the running task");
    assert!(
        !m("prev_pid:bash", &sw),
        "text against a number matches nothing"
    );
    assert!(
        !m("prev_comm:0", &sample(0, 1)),
        "no such field on a plain sample"
    );
    let neg = switch(b"x", -5, b"y", 3);
    assert!(m("prev_pid:-5", &neg));
    assert!(m("prev_pid:-9--1", &neg));
    assert!(!m("prev_pid:-4-9", &neg));
    assert!(Filter::parse("prev_pid:5-1").is_ok(), "a bad range is text");
    assert!(!m("prev_pid:5-1", &sw));
}

#[test]
fn comm_matches_the_escaped_name() {
    assert!(m("comm:\\x1b", &comm(3, b"\x1bevil")));
}

#[test]
fn free_words_match_the_plain_line() {
    assert!(m("FORK", &fork(2, 1)));
    assert!(m("0xffff", &sample(0, 1)));
    assert!(m("period", &sample(0, 1)));
    assert!(!m("mmap", &sample(0, 1)));
    assert!(m("!mmap", &sample(0, 1)));
}

#[test]
fn errors_name_the_term() {
    let e = |s: &str| Filter::parse(s).unwrap_err().to_string();
    assert!(e("type:forks").contains("'forks'"), "{}", e("type:forks"));
    assert!(e("pid:abc").contains("'pid:abc'"));
    assert!(e("cpu:3-1").contains("'cpu:3-1'"));
    assert!(e("pid:").contains("'pid:'"));
    let sw = crate::event::tracepoint::Format::parse(
        "sched:sched_switch",
        crate::testkit::tracepoints::SCHED_SWITCH,
    )
    .unwrap();
    let f = Filter::parse("color:red").unwrap();
    let e2 = f.check(&[&sw], true).unwrap_err().to_string();
    assert!(e2.contains("'color'"), "{e2}");
    assert!(
        Filter::parse("prev_pid:1")
            .unwrap()
            .check(&[&sw], true)
            .is_ok()
    );
    // Without a sampling event, sym:, dso: and event: can match nothing.
    for t in ["sym:memcpy", "dso:libc*", "event:cycles"] {
        let e = Filter::parse(t).unwrap().check(&[], false).unwrap_err();
        assert!(e.to_string().contains("-e dummy"), "{e}");
        assert!(Filter::parse(t).unwrap().check(&[], true).is_ok());
    }
    assert!(Filter::parse("!sym:x").unwrap().check(&[], false).is_ok());
    assert!(e("!").contains("'!'"));
    assert!(e("!!fork").contains("'!!fork'"));
    for s in ["type:forks", "pid:1,,2", "!"] {
        assert!(!e(s).contains('\n'), "one line: {}", e(s));
    }
}

#[test]
fn glob_edge_cases() {
    let g = |p: &str, s: &str| {
        glob(
            &p.chars().collect::<Vec<_>>(),
            &s.chars().collect::<Vec<_>>(),
        )
    };
    assert!(g("*", ""));
    assert!(g("a*", "a"));
    assert!(g("*b*", "abc"));
    assert!(!g("a?", "a"));
    assert!(g("a*c*e", "abcde"));
    assert!(!g("a*c*e", "abcd"));
}

#[test]
fn comm_map_follows_fork_comm_exit() {
    // The model the pipeline keeps, as `comm:` sees it.
    let mut c = ProcessModel::new();
    c.apply_one(&comm(10, b"sh"));
    c.apply_one(&fork(11, 10));
    assert_eq!(c.name(11, 5), Some(&b"sh"[..]));
    c.apply_one(&comm(11, b"ls"));
    assert_eq!(c.name(11, 6), Some(&b"ls"[..]));
    let exit = Event {
        kind: EventKind::Exit(TaskRecord {
            pid: 11,
            ppid: 10,
            tid: 11,
            ptid: 10,
            time: 9,
        }),
        ..fork(11, 10)
    };
    c.apply_one(&exit);
    // Known for records a little late, then forgotten.
    assert_eq!(c.name(11, 9), Some(&b"ls"[..]));
    c.evict(
        9 + crate::process::EXITED_KEEP_NS + 1_000_000_000,
        |_, _| true,
    );
    assert_eq!(c.name(11, 9), None);
    assert_eq!(c.len(), 1);
}

#[test]
fn plain_predicate_knows_names_from_comm_records() {
    let mut model = ProcessModel::new();
    let mut p = plain_predicate(Filter::parse("comm:zz_unlikely_name").unwrap());
    assert!(!p(&sample(0, 999_999), &model));
    // The pipeline applies each record to the model before the frontend filters it.
    let c = comm(999_999, b"zz_unlikely_name");
    model.apply_one(&c);
    assert!(p(&c, &model));
    assert!(p(&sample(0, 999_999), &model));
}

#[test]
fn proc_has_init() {
    let seen = crate::process::proc::snapshot(
        std::path::Path::new("/proc"),
        &crate::process::proc::SeedOptions::default(),
    );
    assert!(seen.iter().any(|p| p.pid == 1));
}
