//! Command lines at exec, from the real kernel: `argv` on `--json` exec records and
//! `event.argv` in scripts. (The TUI's task stream is checked in tests/tui_pty.rs.)

mod common;

use std::process::{Command, Stdio};

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;

fn perfwatch(args: &[&str]) -> (i32, String, String) {
    let out = Command::cargo_bin("perfwatch")
        .unwrap()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A link named `name` to `sh`, so that its exec is told apart from any other; run as
/// `name -c 'sleep N; :' ARG0`, it lives N seconds with the arguments the test chose.
fn sh_as(dir: &std::path::Path, name: &str) -> String {
    let link = dir.join(name);
    let sh = perfwatch::command::resolve("sh".as_ref()).expect("sh in PATH");
    std::os::unix::fs::symlink(sh, &link).expect("symlink");
    link.to_str().expect("utf-8 temp path").to_string()
}

#[test]
fn json_exec_records_carry_the_command_line() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let prog = sh_as(dir.path(), "pwargv");
    // A quick exec too: /bin/true is usually gone before its line is read (argv null, not
    // an error).
    let script = format!("/bin/true; {prog} -c 'sleep 0.7; :' 'two words'");
    let (code, out, err) = perfwatch(&["--json", "-e", "dummy", "--", "sh", "-c", &script]);
    assert_eq!(code, 0, "{err}");
    let execs: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
        .filter(|v| v["type"] == "comm" && v["exec"] == true)
        .collect();
    let mine = execs
        .iter()
        .find(|v| v["comm"] == "pwargv")
        .unwrap_or_else(|| panic!("no exec of pwargv in {execs:?}"));
    assert_eq!(
        mine["argv"],
        serde_json::json!([prog, "-c", "sleep 0.7; :", "two words"]),
        "{mine}"
    );
    // Every exec record has the member: an array of strings, or null.
    for v in &execs {
        assert!(
            v["argv"].is_null()
                || v["argv"]
                    .as_array()
                    .is_some_and(|a| a.iter().all(Value::is_string)),
            "{v}"
        );
    }
    // Fork and non-exec records do not.
    assert!(
        out.lines()
            .filter(|l| l.contains("\"type\":\"fork\""))
            .all(|l| !l.contains("\"argv\""))
    );
}

#[test]
fn json_argv_is_escaped_like_comm() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let prog = sh_as(dir.path(), "pwesc");
    let script = format!("exec {prog} -c 'sleep 0.5; :' \"$(printf '\\033[2J\\007')\"");
    let (code, out, err) = perfwatch(&["--json", "-e", "dummy", "--", "sh", "-c", &script]);
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.contains("\"comm\":\"pwesc\""))
        .unwrap_or_else(|| panic!("no exec of pwesc:\n{out}"));
    assert!(
        !line.bytes().any(|b| b < 0x20),
        "raw control bytes: {line:?}"
    );
    let v: Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["argv"][3], "\\x1b[2J\\x07", "{line}");
}

#[cfg(feature = "python")]
#[test]
fn scripts_read_event_argv() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let prog = sh_as(dir.path(), "pwpyargv");
    let script = dir.path().join("argv.py");
    std::fs::write(
        &script,
        "def on_event(event):\n    \
         if event.type == 'comm' and event.exec and event.comm == 'pwpyargv':\n        \
         print('ARGV', repr(event.argv))\n    \
         elif event.type == 'fork':\n        \
         assert not hasattr(event, 'argv')\n",
    )
    .unwrap();
    let cmd = format!("{prog} -c 'sleep 0.6; :' x");
    let (code, out, err) = perfwatch(&[
        "--plain",
        "-e",
        "dummy",
        "--script",
        script.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &cmd,
    ]);
    assert_eq!(code, 0, "{err}");
    let want = format!("ARGV ['{prog}', '-c', 'sleep 0.6; :', 'x']");
    assert!(
        out.contains(&want) || err.contains(&want),
        "want {want}\nstdout:\n{out}\nstderr:\n{err}"
    );
    assert!(!err.contains("Traceback"), "{err}");
}
