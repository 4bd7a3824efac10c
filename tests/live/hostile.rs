//! Hostile names from the monitored system: a program whose file name holds escape
//! sequences, a newline, invalid UTF-8 and a bidirectional override, exec'd for real. Its
//! comm and mmap records must come out escaped and intact: one line per record in `--plain`,
//! valid JSON that parses back to the escaped text in `--json`.

use crate::common;

use common::InTime;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use assert_cmd::cargo::cargo_bin;
use perfwatch::text::escape;

const NAME: &[u8] = b"ev\x1b[31mil\n\xff\xe2\x80\xaeX\x07\rz";

fn hostile_program(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join(OsStr::from_bytes(NAME));
    std::fs::copy("/bin/true", &path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn hostile_names_are_escaped_in_plain_and_json() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let prog = hostile_program(dir.path());
    let comm = escape(&NAME[..15.min(NAME.len())]);
    let file = escape(prog.as_os_str().as_bytes());

    let out = Command::new(cargo_bin("perfwatch"))
        .args(["--plain", "-e", "dummy", "--"])
        .arg(&prog)
        .output_in_time()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("plain output is UTF-8");
    assert!(
        !text.contains('\x1b')
            && !text.contains('\r')
            && !text.contains('\x07')
            && !text.contains('\u{202e}')
    );
    for line in text.lines() {
        assert!(line.starts_with("cpu: "), "one line per record: {line:?}");
    }
    assert!(
        text.contains(&format!("comm: {comm} }}")),
        "comm escaped: {text}"
    );
    assert!(
        text.contains(&format!("filename: {file} }}")),
        "filename escaped: {text}"
    );

    let out = Command::new(cargo_bin("perfwatch"))
        .args(["--json", "-e", "dummy", "--"])
        .arg(&prog)
        .output_in_time()
        .unwrap();
    assert!(out.status.success());
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("valid JSON"))
        .collect();
    assert!(
        lines
            .iter()
            .any(|v| v["type"] == "comm" && v["comm"] == comm.as_str()),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|v| v["type"] == "mmap" && v["filename"] == file.as_str()),
        "{lines:?}"
    );
}

#[test]
fn the_escaped_form_is_what_we_expect() {
    // Spelled out once, so that a change to the escaping is a visible decision.
    assert_eq!(escape(&NAME[..15]), "ev\\x1b[31mil\\n\\xff\\u{202e}X");
}
