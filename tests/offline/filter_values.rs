//! Filters that cannot match are refused, naming the field, its event and its type; the
//! ones that can, match what they say: a tracepoint field's own name, the print fmt's text
//! of a field (`prev_state:S`), and the running task through `common_*`.

use crate::common;

use common::SpawnDrained;

use common::{perfwatch, run};

#[test]
fn filters_that_cannot_match_are_refused_with_the_field_and_its_type() {
    let _tracefs = require_tracefs!();
    for (filter, said) in [
        (
            "prev_pid:abc",
            "prev_pid of sched:sched_switch is a signed 32-bit number",
        ),
        ("prev_state:Q", "shown as S D T t X Z P I R"),
        ("prev_state:s", "shown as S D T t X Z P I R"),
        ("prev_pid:99999999999", "out of its range"),
        ("color:red", "unknown filter key 'color'"),
        ("fields.type:3", "unknown filter key 'fields.type'"),
        (
            "next_comm:x prio_of_nothing:1",
            "unknown filter key 'prio_of_nothing'",
        ),
        ("pid:abc", "bad pid 'abc'"),
        ("common_pid:x", "bad common_pid 'x'"),
        ("cpu:-1", "bad cpu"),
    ] {
        let r = run(perfwatch()
            .args(["--plain", "-e", "sched:sched_switch", "-d", "5", "--filter"])
            .arg(filter));
        r.exited(2);
        assert!(r.stdout.is_empty(), "{filter}: {}", r.stdout);
        // One line says it all (clap adds its "For more information" after a blank line).
        let first = r.stderr.lines().next().unwrap_or_default();
        assert!(first.contains(said), "{filter}: {}", r.stderr);
    }
}

#[test]
fn sample_keys_without_a_sampling_event_are_refused() {
    for filter in ["sym:memcpy", "dso:libc*", "event:cycles"] {
        let r = run(perfwatch()
            .args(["--plain", "-e", "dummy", "-d", "5", "--filter"])
            .arg(filter));
        r.exited(2)
            .said(&["cannot match: only side-band records are watched"]);
    }
}

#[test]
fn symbolic_values_and_own_names_match_what_they_say() {
    let _tracefs = require_tracefs!();
    // Something sleeps and wakes while we watch.
    let r = run(perfwatch().args([
        "--json",
        "-a",
        "-e",
        "sched:sched_switch",
        "-d",
        "1",
        "--filter",
        "prev_state:S",
        "--",
        "sh",
        "-c",
        "for i in 1 2 3 4 5; do sleep 0.05; done",
    ]));
    r.exited(0);
    let lines = r.json();
    assert!(!lines.is_empty(), "no sleeping switch: {}", r.stderr);
    for l in &lines {
        assert_eq!(l["prev_state_str"], "S", "{l}");
        assert_eq!(l["prev_state"], 1, "{l}");
    }
    // sched_wakeup's own pid is the woken task; common_pid the task that woke it.
    for (key, own) in [
        ("pid", "pid"),
        ("fields.pid", "pid"),
        ("common_pid", "sample_pid"),
    ] {
        // A shell of known pid that waits for its children: each child's exit wakes it.
        let mut work = std::process::Command::new("sh")
            .arg("-c")
            .arg("read go; for i in 1 2 3; do sleep 0.05; done")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let w = work.id();
        let mut pw = perfwatch()
            .args([
                "--json",
                "-a",
                "-e",
                "sched:sched_wakeup",
                "-d",
                "3",
                "--filter",
            ])
            .arg(format!("{key}:{w}"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn_drained()
            .unwrap();
        common::wait_until_watching(&mut pw);
        {
            use std::io::Write;
            let _ = work.stdin.take().unwrap().write_all(b"go\n");
        }
        let t0 = std::time::Instant::now();
        while work.try_wait().unwrap().is_none() {
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(20),
                "workload hangs"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let r: common::Run = pw.output_in_time().unwrap().into();
        r.exited(0);
        let lines = r.json();
        assert!(!lines.is_empty(), "{key}:{w} kept nothing: {}", r.stderr);
        for l in &lines {
            assert_eq!(l[own].as_u64(), Some(w as u64), "{key}:{w} kept {l}");
        }
        if key != "common_pid" {
            // The shell is woken by others (its children, the kernel), not by itself.
            assert!(
                lines
                    .iter()
                    .any(|l| l["sample_pid"].as_u64() != Some(w as u64)),
                "{key}:{w}: {lines:?}"
            );
        }
    }
}
