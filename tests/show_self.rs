//! Watching the whole system, perfwatch's own records (its threads' samples, their exits)
//! are hidden and counted; `--show-self` shows them.

mod common;

use common::InTime;

use std::process::{Command, Stdio};

use assert_cmd::cargo::CommandCargoExt;

/// `perfwatch --plain -a -e cpu-clock -F 4000 --duration 2 [extra]`: (its pid, stdout, stderr).
fn run(extra: &[&str]) -> (u32, String, String) {
    let child = Command::cargo_bin("perfwatch")
        .unwrap()
        .args([
            "--plain",
            "-a",
            "-e",
            "cpu-clock",
            "-F",
            "4000",
            "--duration",
            "2",
        ])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.output_in_time().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        pid,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Lines about process `pid`: all but the records about the events themselves (losses,
/// throttling), which are never hidden, whoever was running when the kernel wrote them.
fn mine(pid: u32, out: &str) -> Vec<&str> {
    let me = format!(" pid: {pid}, ");
    out.lines()
        .filter(|l| l.contains(&me))
        .filter(|l| {
            !["lost", "throttle", "unthrottle"]
                .iter()
                .any(|t| l.contains(&format!("type: {t},")))
        })
        .collect()
}

#[test]
fn its_own_records_are_hidden_and_counted_unless_show_self() {
    require_perf!();
    let (pid, out, err) = run(&[]);
    let shown = mine(pid, &out);
    assert!(shown.is_empty(), "perfwatch's own records shown: {shown:?}");
    let hidden: u64 = err
        .lines()
        .find_map(|l| l.trim().strip_prefix("hidden: "))
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no 'hidden:' line in the summary:\n{err}"));
    assert!(hidden > 0, "{err}");
    assert!(err.contains("--show-self shows them"), "{err}");
    // Writing 8 000 lines a second, perfwatch is on a CPU often enough to be sampled.
    let (pid, out, err) = run(&["--show-self"]);
    assert!(
        !mine(pid, &out).is_empty(),
        "--show-self shows none:\n{err}"
    );
    assert!(!err.contains("hidden:"), "{err}");
}
