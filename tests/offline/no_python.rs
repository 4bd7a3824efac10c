//! A build without the `python` feature: `--script` fails with one line saying how to get it.
#![cfg(not(feature = "python"))]

use assert_cmd::Command;

#[test]
fn script_says_how_to_get_python() {
    let d = tempfile::tempdir().unwrap();
    let s = d.path().join("s.py");
    std::fs::write(&s, "def on_tick():\n    return 'x'\n").unwrap();
    let out = Command::cargo_bin("perfwatch")
        .unwrap()
        .args(["--plain", "-e", "dummy", "--script"])
        .arg(&s)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--features python"), "{err}");
    assert!(out.stdout.is_empty());
}
