//! `--filter` and `--history` on the command line: validation, and the filter applied in
//! `--plain` mode with the same language as the TUI.

use assert_cmd::Command;
use predicates::prelude::*;

#[test]
fn a_malformed_filter_fails_with_one_line() {
    let out = Command::cargo_bin("perfwatch")
        .unwrap()
        .args(["--plain", "--filter", "type:fork colour:red"])
        .assert()
        .failure()
        .code(2)
        .stderr(predicate::str::contains("unknown filter key 'colour'"));
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(err.lines().any(|l| l.contains("'colour'")), "{err}");
}

#[test]
fn history_is_validated() {
    for bad in ["0", "-3", "lots"] {
        Command::cargo_bin("perfwatch")
            .unwrap()
            .args(["--plain", "--history", bad])
            .assert()
            .failure()
            .code(2)
            .stderr(predicate::str::contains(format!("'{bad}'")));
    }
}

#[test]
fn help_documents_the_filter() {
    Command::cargo_bin("perfwatch")
        .unwrap()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("--filter <EXPR>"))
        .stdout(predicate::str::contains("comm:bash"))
        .stdout(predicate::str::contains("--history <N>"));
}

#[test]
fn plain_filter_keeps_only_matching_records() {
    require_perf!();
    let out = Command::cargo_bin("perfwatch")
        .unwrap()
        .args([
            "--plain",
            "-e",
            "dummy",
            "--filter",
            "type:comm,exit !comm:zzz",
            "--",
            "sh",
            "-c",
            "/bin/true; /bin/true",
        ])
        .timeout(std::time::Duration::from_secs(30))
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.iter().any(|l| l.contains("comm: true")), "{text}");
    assert!(
        lines
            .iter()
            .all(|l| l.contains("type: comm") || l.contains("type: exit")),
        "{text}"
    );
}
