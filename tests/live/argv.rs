//! Command lines at exec, from the real kernel: `argv` on `--json` exec records and
//! `event.argv` in scripts. (The TUI's task stream is checked in tests/tui/tui_pty.rs.)

use crate::common;

use common::InTime;

use std::process::{Command, Stdio};

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;

fn perfwatch(args: &[&str]) -> (i32, String, String) {
    let out = Command::cargo_bin("perfwatch")
        .unwrap()
        .args(args)
        .stdin(Stdio::null())
        .output_in_time()
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

/// The exec records of `comm` in `--json` output.
fn execs_of<'a>(out: &'a [Value], comm: &str) -> Vec<&'a Value> {
    out.iter()
        .filter(|v| v["type"] == "comm" && v["exec"] == true && v["comm"] == comm)
        .collect()
}

/// Processes that live a millisecond get their command line: it is read at the exec (from
/// the new program's stack, or from /proc at once), not when the COMM record comes out of the
/// ordering stage a poll timeout later. The share is the issue's measure (goal >= 95%).
#[test]
fn short_lived_execs_get_their_command_line() {
    let _tracefs = require_tracefs!();
    let script = "for i in $(seq 200); do /bin/echo $i >/dev/null; done; sleep 0.1";
    let run = common::run_args(&[
        "--json", "-e", "dummy", "-d", "60", "--", "sh", "-c", script,
    ]);
    run.exited(0);
    let out = run.json();
    let echoes = execs_of(&out, "echo");
    assert_eq!(echoes.len(), 200, "every exec is seen");
    let mut right = 0;
    let mut from_exec = 0;
    for v in &echoes {
        let Some(argv) = v["argv"].as_array() else {
            continue;
        };
        assert_eq!(argv.len(), 2, "{v}");
        assert_eq!(argv[0], "/bin/echo", "{v}");
        assert!(
            argv[1].as_str().is_some_and(|n| n.parse::<u32>().is_ok()),
            "{v}"
        );
        right += 1;
        from_exec += (v["argv_source"] == "exec") as usize;
    }
    common::say(&format!(
        "short_lived_execs_get_their_command_line: {right}/200 /bin/echo execs with argv ({from_exec} from the exec's stack, the rest from /proc at once)"
    ));
    // The goal (95%) is measured with release builds side by side by
    // benches/argv_share.py; a debug build beside the other tests of this binary, on a
    // loaded machine, gets a little less. Before the exec watcher: none of the 200.
    assert!(right >= 170, "only {right} of 200 execs got their argv");
    let sleep = execs_of(&out, "sleep");
    assert_eq!(sleep.len(), 1);
    assert_eq!(sleep[0]["argv"], serde_json::json!(["sleep", "0.1"]));
}

/// A command line longer than perfwatch keeps is marked where it is cut, with the number of
/// bytes left out, in `--json` (also as `argv_cut`) and in scripts.
#[test]
fn a_cut_command_line_is_marked_everywhere() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let prog = sh_as(dir.path(), "pwlong");
    let pad = "p".repeat(5000);
    let cmd = format!("{prog} -c 'sleep 0.5; :' {pad} --really-delete-everything");
    // The whole area, NUL-terminated arguments: the final NUL is not part of it.
    let total = [
        prog.as_str(),
        "-c",
        "sleep 0.5; :",
        &pad,
        "--really-delete-everything",
    ]
    .iter()
    .map(|a| a.len() + 1)
    .sum::<usize>()
        - 1;
    let cut = total - perfwatch::cmdline::MAX_ARGV;
    let mark = format!("…[+{cut} bytes]");
    let run = common::run_args(&["--json", "-e", "dummy", "-d", "60", "--", "sh", "-c", &cmd]);
    run.exited(0);
    let out = run.json();
    let mine = execs_of(&out, "pwlong");
    assert_eq!(mine.len(), 1, "{}", run.stdout);
    let argv = mine[0]["argv"].as_array().expect("argv read");
    let last = argv.last().and_then(Value::as_str).unwrap_or_default();
    assert!(
        last.ends_with(&format!("p{mark}")),
        "{last:.80}… of {}",
        mine[0]
    );
    assert_eq!(mine[0]["argv_cut"], cut, "{}", mine[0]);
    assert!(
        !run.stdout.contains("really-delete"),
        "kept: only the first 4096 bytes"
    );

    let script = dir.path().join("cut.py");
    std::fs::write(
        &script,
        "def on_event(event):\n    \
         if event.type == 'comm' and event.exec and event.comm == 'pwlong':\n        \
         print('CUT', event.argv_cut, event.argv[-1][-30:])\n",
    )
    .unwrap();
    let run = common::run(&mut common::plain_script(
        &script,
        &["-d", "60", "--", "sh", "-c", &cmd],
    ));
    run.exited(0);
    // Python slices characters: the last 30 of the last argument.
    let tail: String = {
        let all: Vec<char> = format!("{pad}{mark}").chars().collect();
        all[all.len() - 30..].iter().collect()
    };
    let want = format!("CUT {cut} {tail}");
    assert!(
        run.stdout.contains(&want) || run.stderr.contains(&want),
        "want {want}\n{}",
        run.stderr
    );
}

/// A program that rewrites its command line as soon as it runs (perl's `$0 = ...`) shows
/// in /proc under the new name; the command line read from the exec's stack is the one it
/// was started with, and says so (`argv_source: "exec"`).
#[test]
fn a_command_line_rewritten_at_once_shows_what_was_execd() {
    let _tracefs = require_tracefs!();
    if perfwatch::command::resolve("perl".as_ref()).is_none() {
        skip!("no perl to rewrite its $0");
    }
    let perl = r#"'$0 = "/usr/sbin/innocent-daemon"; select(undef, undef, undef, 0.3)'"#;
    let script =
        format!("for i in 1 2 3 4 5; do perl -e {perl} -- --really-delete-everything; done");
    let run = common::run_args(&[
        "--json", "-e", "dummy", "-d", "60", "--", "sh", "-c", &script,
    ]);
    run.exited(0);
    let out = run.json();
    let execs = execs_of(&out, "perl");
    assert_eq!(execs.len(), 5, "{}", run.stderr);
    let from_exec: Vec<_> = execs
        .iter()
        .filter(|v| v["argv_source"] == "exec")
        .collect();
    assert!(
        !from_exec.is_empty(),
        "no stack held the strings in 5 execs: {execs:?}"
    );
    for v in from_exec {
        assert_eq!(v["argv"][0], "perl", "{v}");
        assert_eq!(v["argv"][4], "--really-delete-everything", "{v}");
    }
}

/// `--filter argv:GLOB` keeps the records of the processes whose command line matches.
#[test]
fn the_filter_matches_command_lines() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let prog = sh_as(dir.path(), "pwfilt");
    // The shell's own command line must not hold the marker: it is put together there.
    let cmd = format!("m=--marker; /bin/true; {prog} -c 'sleep 0.4; :' ${{m}}-xyz; /bin/true");
    let run = common::run_args(&[
        "--json",
        "-e",
        "dummy",
        "-d",
        "60",
        "--filter",
        "argv:*--MARKER-x*",
        "--",
        "sh",
        "-c",
        &cmd,
    ]);
    run.exited(0);
    let out = run.json();
    let execs: Vec<&Value> = out
        .iter()
        .filter(|v| v["type"] == "comm" && v["exec"] == true)
        .collect();
    assert_eq!(execs.len(), 1, "only pwfilt's exec: {execs:?}");
    assert_eq!(execs[0]["comm"], "pwfilt");
    let pid = execs[0]["pid"].as_u64().unwrap();
    assert!(
        out.iter().all(|v| v["pid"].as_u64() == Some(pid)),
        "only its records: {}",
        run.stdout
    );
}
