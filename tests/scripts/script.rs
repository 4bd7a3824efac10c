//! `--script`: real Python, the real binary and (where marked) the real kernel.
#![cfg(feature = "python")]

use crate::common;

use common::InTime;

use common::{Run, plain_script, run, script, temp_script};

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const ASSETS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/scripts");

/// The `type:` of each `--plain` line.
fn types(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| l.split("{ type: ").nth(1))
        .map(|r| r.split(',').next().unwrap_or("").trim().to_string())
        .collect()
}

fn count(stdout: &str, ty: &str) -> usize {
    types(stdout).iter().filter(|t| *t == ty).count()
}

/// A shell script named `pwfam_child` that starts /bin/true three times.
fn family_child(dir: &Path) -> PathBuf {
    let p = dir.join("pwfam_child");
    std::fs::write(&p, "#!/bin/sh\nfor i in 1 2 3; do /bin/true; done\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[test]
fn family_filter_limits_plain_to_one_child_family() {
    require_perf!();
    let d = tempfile::tempdir().unwrap();
    let child = family_child(d.path());
    let r = run(plain_script(Path::new(&format!("{ASSETS}/family.py")), &[])
        .env("FAMILY_COMM", "pwfam_child")
        .args(["--", "sh", "-c"])
        .arg(format!("true; {}; sleep 0.01; true", child.display())));
    r.exited(0);
    // The family: pwfam_child's exec (comm), its 3 forks, 3 execs of true, 4 exits.
    assert_eq!(count(&r.stdout, "comm"), 4, "{}", r.stdout);
    assert_eq!(count(&r.stdout, "fork"), 3, "{}", r.stdout);
    assert_eq!(count(&r.stdout, "exit"), 4, "{}", r.stdout);
    assert!(
        !r.stdout.contains("comm: sh ") && !r.stdout.contains("comm: sleep "),
        "{}",
        r.stdout
    );
    // The counters still count what the filter dropped (sh, sleep, the outer true).
    r.said(&["fork 5"]);
    r.said(&["[family.py] following 'pwfam_child'"]);
}

#[test]
fn event_object_reads_like_perfs_binding() {
    require_perf!();
    let (_d, s) = temp_script(
        "ev.py",
        r#"
import perfwatch
def on_event(event):
    if event.type == perfwatch.RECORD_COMM and event.comm == "true":
        d = event.as_dict()
        assert d["pid"] == event.pid == event.sample_pid, d
        assert d["comm"] == "true" and d["exec"] is True, d
        assert isinstance(event.sample_time, int) and event.sample_period == 0
        try:
            event.ppid
            raise AssertionError("comm has no ppid")
        except AttributeError:
            pass
        print("STR", str(event))
        print("COMM", perfwatch.comm(event.pid))
    if event.type == "fork":
        assert event.ppid > 0 and event.time > 0 and event.ptid > 0
"#,
    );
    let r = run(plain_script(&s, &[]).args(["--", "sh", "-c", "/bin/true; true"]));
    r.exited(0);
    assert!(!r.stderr.contains("Error"), "{}", r.stderr);
    let printed = r
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("[ev.py] STR "))
        .unwrap_or_else(|| panic!("no STR line: {}", r.stderr));
    // str(event) is exactly the `{ ... }` part of the --plain line.
    assert!(
        r.stdout
            .lines()
            .any(|l| l.ends_with(printed) && l.contains(" { type: comm")),
        "{printed}\n{}",
        r.stdout
    );
    r.said(&["[ev.py] COMM true"]);
    // print() never writes onto stdout.
    assert!(
        r.stdout.lines().all(|l| l.starts_with("cpu: ")),
        "{}",
        r.stdout
    );
}

#[test]
fn on_tick_lines_go_to_stderr_or_the_output_file() {
    require_perf!();
    let (d, s) = temp_script(
        "tick.py",
        "n = 0\ndef on_tick():\n    global n\n    n += 1\n    return [f'tick {n}', 'second line']\n",
    );
    let r = run(plain_script(&s, &[]).args(["--", "sleep", "1.3"]));
    r.exited(0)
        .said(&["[tick.py] tick 1\n[tick.py] second line\n"]);
    let out = d.path().join("pane.txt");
    let r = run(plain_script(&s, &[])
        .arg("--script-output")
        .arg(&out)
        .args(["--", "sleep", "1.3"]));
    r.exited(0);
    assert!(!r.stderr.contains("tick 1"), "{}", r.stderr);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("[tick.py] tick 1\n"), "{text}");
}

/// The script `name` (`body`) stops perfwatch at start-up (exit 1, nothing on stdout),
/// and stderr says each of `says`.
fn stops_start_up(dir: &Path, name: &str, body: &str, says: &[&str]) {
    let r = run(&mut plain_script(&script(dir, name, body), &[]));
    r.exited(1).said(says);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
}

#[test]
fn syntax_error_stops_start_up_with_file_and_line() {
    let d = tempfile::tempdir().unwrap();
    let bad = "x = 1\ndef on_tick(:\n    pass\n";
    let says = &[
        "script '",
        "bad.py' failed to load",
        "bad.py\", line 2",
        "SyntaxError",
    ];
    stops_start_up(d.path(), "bad.py", bad, says);
}

#[test]
fn import_error_and_empty_script_stop_start_up() {
    let d = tempfile::tempdir().unwrap();
    for (name, body, says) in [
        (
            "imp.py",
            "import os\nimport no_such_module_pw\ndef on_tick(): pass\n",
            &[
                "imp.py\", line 2, in <module>",
                "ModuleNotFoundError: No module named 'no_such_module_pw'",
            ][..],
        ),
        (
            "none.py",
            "x = 1\n",
            &[
                "none.py' defines none of trace_begin(), trace_end(), filter(event), \
               on_event(event), on_tick()",
            ],
        ),
        (
            "begin.py",
            "def trace_begin():\n    raise RuntimeError('no')\n",
            &[
                "trace_begin() of script 'begin.py' failed",
                "RuntimeError: no",
            ],
        ),
    ] {
        stops_start_up(d.path(), name, body, says);
    }
}

#[test]
fn handler_exception_passes_events_and_is_switched_off() {
    require_perf!();
    let (_d, s) = temp_script("exc.py", "def filter(event):\n    return 1 // 0\n");
    let r = run(plain_script(&s, &[]).args([
        "--",
        "sh",
        "-c",
        "for i in 1 2 3 4 5 6; do /bin/true; done",
    ]));
    r.exited(0);
    // Unfiltered: the 6 forks of the loop are all there.
    assert!(count(&r.stdout, "fork") >= 6, "{}", r.stdout);
    r.said(&["[exc.py] filter() raised an exception; the event passes unfiltered"]);
    r.said(&["exc.py\", line 2, in filter", "ZeroDivisionError"]);
    assert_eq!(
        r.stderr.matches("ZeroDivisionError").count(),
        10,
        "{}",
        r.stderr
    );
    r.said(&["filter() failed 10 times; perfwatch has switched it off"]);
}

/// Start perfwatch with the script `name` (`body`), make events for 1.5 s, send SIGINT; it
/// must exit with 0 within `within`. Returns its output.
/// How long perfwatch takes from SIGINT to its exit with the script `body` in its on_event,
/// and what it said.
fn stop_time(name: &str, body: &str) -> (Duration, Run) {
    let (d, script) = temp_script(name, body);
    let wait = Duration::from_millis(1500);
    let (out, err) = (d.path().join("out"), d.path().join("err"));
    let mut child = plain_script(&script, &[])
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while t0.elapsed() < wait {
        let _ = Command::new("/bin/true").status_in_time();
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let sent = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if sent.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("perfwatch did not stop within 10 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = sent.elapsed();
    let r = Run {
        code: status.code().unwrap_or(-1),
        stdout: std::fs::read_to_string(out).unwrap(),
        stderr: std::fs::read_to_string(err).unwrap(),
    };
    r.exited(0);
    (took, r)
}

/// [`stop_time`] of a script stuck in `body`, against the same run with a handler that returns
/// at once (measured just before, on the same machine): the stuck script may add at most
/// `extra` to the stop. The stage's own budget for a stuck handler at a stop is about a
/// second (STUCK_AT_STOP, HANDBACK_AT_STOP, stall_stopping in src/script/stage.rs); a loaded
/// machine added 0.3 s more to it in a CI run (1.59 s against 0.26 s). Without the interrupt,
/// the stop would wait for a handler that never returns. (Wall times alone would measure the machine's load as much as
/// perfwatch: a loaded 2-CPU machine takes seconds to stop the plain run too.)
fn interrupted(name: &str, body: &str, extra: Duration) -> Run {
    let (base, _) = stop_time("quick.py", "def on_event(event):\n    pass\n");
    let (took, r) = stop_time(name, body);
    assert!(
        took < base + extra,
        "took {took:?}, the run with a quick handler {base:?}\n{}",
        r.stderr
    );
    r
}

#[test]
fn never_returning_handler_still_quits_promptly_on_ctrl_c() {
    require_perf!();
    let r = interrupted(
        "spin.py",
        "def on_event(event):\n    while True:\n        pass\n",
        Duration::from_millis(2000),
    );
    // The stream kept flowing past the stuck script, and what it did not see is counted.
    r.said(&[
        "[spin.py] on_event() interrupted: perfwatch is stopping",
        "spin.py\", line 2, in on_event",
        "the scripts did not see",
    ]);
    assert!(count(&r.stdout, "fork") > 0, "{}", r.stdout);

    // Stuck where no interrupt reaches (a sleep in C): perfwatch does not wait for it.
    let r = interrupted(
        "sleepy.py",
        "import time\ndef on_event(event):\n    time.sleep(1000)\n",
        Duration::from_millis(2500),
    );
    r.said(&["perfwatch did not wait for it"]);
}

#[test]
fn foreign_or_writable_script_is_refused_as_root() {
    require_root!("the ownership check applies to root only");
    let (d, s) = temp_script("foreign.py", "def on_tick():\n    return 'x'\n");
    std::os::unix::fs::chown(&s, Some(65534), Some(65534)).unwrap();
    let r = run(plain_script(&s, &["-d", "0.2"]).env_remove("SUDO_UID"));
    r.exited(1).said(&[
        "refusing to run script",
        "owned by uid 65534, not by root",
        "--force-script",
    ]);
    // The sudo user's own script is fine.
    let r = run(plain_script(&s, &["-d", "0.2"]).env("SUDO_UID", "65534"));
    r.exited(0);
    let r = run(plain_script(&s, &["-d", "0.2", "--force-script"]).env_remove("SUDO_UID"));
    r.exited(0);

    let w = script(d.path(), "writable.py", "def on_tick():\n    return 'x'\n");
    std::fs::set_permissions(&w, std::fs::Permissions::from_mode(0o666)).unwrap();
    let r = run(&mut plain_script(&w, &["-d", "0.2"]));
    r.exited(1)
        .said(&["writable by group and others (mode 0666)"]);
}

#[test]
fn example_scripts_summarise_a_known_workload() {
    require_perf!();
    let d = tempfile::tempdir().unwrap();
    let child = family_child(d.path());
    let workload = format!("{}; sleep 0.01", child.display());
    let go = |name: &str| {
        let r = run(plain_script(Path::new(&format!("{ASSETS}/{name}")), &[])
            .args(["--", "sh", "-c", &workload]));
        assert_eq!(r.code, 0, "{name}: {}", r.stderr);
        assert!(!r.stderr.contains("Traceback"), "{name}: {}", r.stderr);
        r.stderr
    };
    let forks = go("forks.py");
    assert!(
        forks.contains("[forks.py]       3  pwfam_child["),
        "{forks}"
    );
    let execs = go("execs.py");
    assert!(
        execs.contains("[execs.py] 6 execs, 0 still running"),
        "{execs}"
    );
    assert_eq!(execs.matches("[execs.py]   true ").count(), 3, "{execs}");
    assert!(execs.contains("[execs.py]   pwfam_child "), "{execs}");
    let hist = go("lifetimes.py");
    assert!(
        hist.contains("[lifetimes.py] task lifetimes (5 tasks)"),
        "{hist}"
    );
    assert!(
        hist.contains("|########################################|"),
        "{hist}"
    );
}

#[test]
fn runs_in_a_clean_environment_like_sudos() {
    require_perf!();
    // sudo clears LD_LIBRARY_PATH and most of the environment: the binary must still find
    // the libpython it was built against (build.rs gives it an rpath) and its stdlib.
    let (_d, s) = temp_script(
        "env.py",
        "import sys, json\ndef trace_begin():\n    print('PY', sys.version_info[:2], json.dumps([1]))\n",
    );
    let r = run(plain_script(&s, &["-d", "0.2"]).env_clear());
    r.exited(0).said(&["[env.py] PY (3, "]);
}

/// As root, `--script-output` does not follow a symlink nor write through a hard link (the
/// path may be in a directory another user controls), and under sudo the file belongs to the
/// invoking user, which perfwatch says.
#[test]
fn script_output_as_root_is_not_turned_against_the_system() {
    require_perf!();
    require_root!("the checks apply to root only");
    use std::os::unix::fs::MetadataExt;
    let (d, s) = temp_script("tick.py", "def on_tick():\n    return 'x'\n");
    let victim = d.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let link = d.path().join("link.txt");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let hard = d.path().join("hard.txt");
    std::fs::hard_link(&victim, &hard).unwrap();
    for (path, why) in [(&link, "symbolic link"), (&hard, "hard links")] {
        let r = run(plain_script(&s, &[])
            .arg("--script-output")
            .arg(path)
            .args(["--", "true"]));
        r.exited(1);
        assert!(r.stderr.contains(why), "{}", r.stderr);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    }
    let out = d.path().join("mine.txt");
    let r = run(plain_script(&s, &["--force-script"])
        .env("SUDO_UID", "65534")
        .env("SUDO_GID", "65534")
        .arg("--script-output")
        .arg(&out)
        .args(["--", "true"]));
    r.exited(0)
        .said(&["owned by the invoking user (uid 65534)"]);
    assert_eq!(std::fs::metadata(&out).unwrap().uid(), 65534);
}
