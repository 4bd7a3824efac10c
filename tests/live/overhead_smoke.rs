//! The overhead harness in its smoke form (seconds, tiny load, one repetition), so that it
//! cannot rot: it runs to the end, prints its table, and what it checks for correctness holds.
//! Timings are not judged here.

use crate::common;

use common::InTime;

use std::process::Command;

#[test]
fn overhead_harness_smoke() {
    require_perf!();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/overhead.py");
    let out = Command::new("python3")
        .arg(script)
        .arg("--smoke")
        .args(["--perfwatch", env!("CARGO_BIN_EXE_perfwatch")])
        .args(["--stress", env!("CARGO_BIN_EXE_perfwatch-stress")])
        .output_in_time()
        .expect("python3 runs benches/overhead.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the harness failed:\n{stdout}\n{stderr}"
    );
    for want in [
        "load alone (fork, no monitor)",
        "perfwatch --plain > /dev/null",
        "perfwatch --json > /dev/null",
        "perfwatch TUI (pty 120x40)",
        "perfwatch --script (trivial filter)",
        "MET  completeness 100%, 0 lost/dropped (plain): min 100.00%, lost 0, dropped 0, not decoded 0",
        "MET  completeness 100%, 0 lost/dropped (json): min 100.00%, lost 0, dropped 0, not decoded 0",
        "unparsed lines 0, bad periods 0, time going backwards 0, not decoded 0; summary matches output: True",
        // The TUI against perf top, every configuration measured.
        "perfwatch TUI vs perf top (160x45 pty",
        "| busy, ",
        "| idle, ",
        " -g | ",
    ] {
        assert!(stdout.contains(want), "no '{want}' in:\n{stdout}\n{stderr}");
    }
}
