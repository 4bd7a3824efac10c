//! `--script`: real Python, the real binary and (where marked) the real kernel.
#![cfg(feature = "python")]

mod common;

use common::{Run, run};

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;

const ASSETS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/scripts");

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    p
}

fn perfwatch() -> Command {
    let mut c = Command::cargo_bin("perfwatch").unwrap();
    c.stdin(Stdio::null());
    c
}

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
    let r = run(perfwatch()
        .env("FAMILY_COMM", "pwfam_child")
        .args(["--plain", "-e", "dummy", "--script"])
        .arg(format!("{ASSETS}/family.py"))
        .args(["--", "sh", "-c"])
        .arg(format!("true; {}; sleep 0.01; true", child.display())));
    assert_eq!(r.code, 0, "{}", r.stderr);
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
    assert!(r.stderr.contains("fork 5"), "{}", r.stderr);
    assert!(
        r.stderr.contains("[family.py] following 'pwfam_child'"),
        "{}",
        r.stderr
    );
}

#[test]
fn event_object_reads_like_perfs_binding() {
    require_perf!();
    let d = tempfile::tempdir().unwrap();
    let s = script(
        d.path(),
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
    let r = run(perfwatch()
        .args(["--plain", "-e", "dummy", "--script"])
        .arg(&s)
        .args(["--", "sh", "-c", "/bin/true; true"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
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
    assert!(r.stderr.contains("[ev.py] COMM true"), "{}", r.stderr);
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
    let d = tempfile::tempdir().unwrap();
    let s = script(
        d.path(),
        "tick.py",
        "n = 0\ndef on_tick():\n    global n\n    n += 1\n    return [f'tick {n}', 'second line']\n",
    );
    let r = run(perfwatch()
        .args(["--plain", "-e", "dummy", "--script"])
        .arg(&s)
        .args(["--", "sleep", "1.3"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("[tick.py] tick 1\n[tick.py] second line\n"),
        "{}",
        r.stderr
    );
    let out = d.path().join("pane.txt");
    let r = run(perfwatch()
        .args(["--plain", "-e", "dummy", "--script"])
        .arg(&s)
        .arg("--script-output")
        .arg(&out)
        .args(["--", "sleep", "1.3"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("tick 1"), "{}", r.stderr);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("[tick.py] tick 1\n"), "{text}");
}

#[test]
fn syntax_error_stops_start_up_with_file_and_line() {
    let d = tempfile::tempdir().unwrap();
    let s = script(d.path(), "bad.py", "x = 1\ndef on_tick(:\n    pass\n");
    let r = run(perfwatch()
        .args(["--plain", "-e", "dummy", "--script"])
        .arg(&s));
    assert_eq!(r.code, 1);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    assert!(
        r.stderr.contains("script '") && r.stderr.contains("bad.py' failed to load"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("bad.py\", line 2"), "{}", r.stderr);
    assert!(r.stderr.contains("SyntaxError"), "{}", r.stderr);
}

#[test]
fn import_error_and_empty_script_stop_start_up() {
    let d = tempfile::tempdir().unwrap();
    let s = script(
        d.path(),
        "imp.py",
        "import os\nimport no_such_module_pw\ndef on_tick(): pass\n",
    );
    let r = run(perfwatch()
        .args(["--plain", "-e", "dummy", "--script"])
        .arg(&s));
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("imp.py\", line 2, in <module>"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("ModuleNotFoundError: No module named 'no_such_module_pw'"),
        "{}",
        r.stderr
    );
    let s = script(d.path(), "none.py", "x = 1\n");
    let r = run(perfwatch()
        .args(["--plain", "-e", "dummy", "--script"])
        .arg(&s));
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("none.py' defines none of trace_begin(), trace_end(), filter(event), on_event(event), on_tick()"), "{}", r.stderr);
    let s = script(
        d.path(),
        "begin.py",
        "def trace_begin():\n    raise RuntimeError('no')\n",
    );
    let r = run(perfwatch()
        .args(["--plain", "-e", "dummy", "--script"])
        .arg(&s));
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("trace_begin() of script 'begin.py' failed")
            && r.stderr.contains("RuntimeError: no"),
        "{}",
        r.stderr
    );
}

#[test]
fn handler_exception_passes_events_and_is_switched_off() {
    require_perf!();
    let d = tempfile::tempdir().unwrap();
    let s = script(
        d.path(),
        "exc.py",
        "def filter(event):\n    return 1 // 0\n",
    );
    let r = run(perfwatch()
        .args(["--plain", "-e", "dummy", "--script"])
        .arg(&s)
        .args(["--", "sh", "-c", "for i in 1 2 3 4 5 6; do /bin/true; done"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Unfiltered: the 6 forks of the loop are all there.
    assert!(count(&r.stdout, "fork") >= 6, "{}", r.stdout);
    assert!(
        r.stderr
            .contains("[exc.py] filter() raised an exception; the event passes unfiltered"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("exc.py\", line 2, in filter"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("ZeroDivisionError"), "{}", r.stderr);
    assert_eq!(
        r.stderr.matches("ZeroDivisionError").count(),
        10,
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("filter() failed 10 times; perfwatch has switched it off"),
        "{}",
        r.stderr
    );
}

/// Start perfwatch system-wide with `script`, make some events, send SIGINT; returns how
/// long it took to exit after the signal, and its output.
fn interrupt_after(script: &Path, wait: Duration) -> (Duration, Run) {
    let d = tempfile::tempdir().unwrap();
    let (out, err) = (d.path().join("out"), d.path().join("err"));
    let mut child = perfwatch()
        .args(["--plain", "-e", "dummy", "--script"])
        .arg(script)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while t0.elapsed() < wait {
        let _ = Command::new("/bin/true").status();
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
    (
        took,
        Run {
            code: status.code().unwrap_or(-1),
            stdout: std::fs::read_to_string(out).unwrap(),
            stderr: std::fs::read_to_string(err).unwrap(),
        },
    )
}

#[test]
fn never_returning_handler_still_quits_promptly_on_ctrl_c() {
    require_perf!();
    let d = tempfile::tempdir().unwrap();
    let s = script(
        d.path(),
        "spin.py",
        "def on_event(event):\n    while True:\n        pass\n",
    );
    let (took, r) = interrupt_after(&s, Duration::from_millis(1500));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        took < Duration::from_millis(1500),
        "took {took:?}\n{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("[spin.py] on_event() interrupted: perfwatch is stopping"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("spin.py\", line 2, in on_event"),
        "{}",
        r.stderr
    );
    // The stream kept flowing past the stuck script, and what it did not see is counted.
    assert!(count(&r.stdout, "fork") > 0, "{}", r.stdout);
    assert!(r.stderr.contains("the scripts did not see"), "{}", r.stderr);

    // Stuck where no interrupt reaches (a sleep in C): perfwatch does not wait for it.
    let s = script(
        d.path(),
        "sleepy.py",
        "import time\ndef on_event(event):\n    time.sleep(1000)\n",
    );
    let (took, r) = interrupt_after(&s, Duration::from_millis(1500));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        took < Duration::from_millis(2000),
        "took {took:?}\n{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("perfwatch did not wait for it"),
        "{}",
        r.stderr
    );
}

#[test]
fn foreign_or_writable_script_is_refused_as_root() {
    require_root!("the ownership check applies to root only");
    let d = tempfile::tempdir().unwrap();
    let s = script(d.path(), "foreign.py", "def on_tick():\n    return 'x'\n");
    std::os::unix::fs::chown(&s, Some(65534), Some(65534)).unwrap();
    let r = run(perfwatch()
        .env_remove("SUDO_UID")
        .args(["--plain", "-e", "dummy", "-d", "0.2", "--script"])
        .arg(&s));
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("refusing to run script")
            && r.stderr.contains("owned by uid 65534, not by root"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("--force-script"), "{}", r.stderr);
    // The sudo user's own script is fine.
    let r = run(perfwatch()
        .env("SUDO_UID", "65534")
        .args(["--plain", "-e", "dummy", "-d", "0.2", "--script"])
        .arg(&s));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = run(perfwatch()
        .env_remove("SUDO_UID")
        .args([
            "--plain",
            "-e",
            "dummy",
            "-d",
            "0.2",
            "--force-script",
            "--script",
        ])
        .arg(&s));
    assert_eq!(r.code, 0, "{}", r.stderr);

    let w = script(d.path(), "writable.py", "def on_tick():\n    return 'x'\n");
    std::fs::set_permissions(&w, std::fs::Permissions::from_mode(0o666)).unwrap();
    let r = run(perfwatch()
        .args(["--plain", "-e", "dummy", "-d", "0.2", "--script"])
        .arg(&w));
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("writable by group and others (mode 0666)"),
        "{}",
        r.stderr
    );
}

#[test]
fn example_scripts_summarise_a_known_workload() {
    require_perf!();
    let d = tempfile::tempdir().unwrap();
    let child = family_child(d.path());
    let workload = format!("{}; sleep 0.01", child.display());
    let go = |name: &str| {
        let r = run(perfwatch()
            .args(["--plain", "-e", "dummy", "--script"])
            .arg(format!("{ASSETS}/{name}"))
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
    let d = tempfile::tempdir().unwrap();
    let s = script(
        d.path(),
        "env.py",
        "import sys, json\ndef trace_begin():\n    print('PY', sys.version_info[:2], json.dumps([1]))\n",
    );
    let r = run(perfwatch()
        .env_clear()
        .args(["--plain", "-e", "dummy", "-d", "0.2", "--script"])
        .arg(&s));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("[env.py] PY (3, "), "{}", r.stderr);
}

/// As root, `--script-output` does not follow a symlink nor write through a hard link (the
/// path may be in a directory another user controls), and under sudo the file belongs to the
/// invoking user, which perfwatch says.
#[test]
fn script_output_as_root_is_not_turned_against_the_system() {
    require_perf!();
    require_root!("the checks apply to root only");
    use std::os::unix::fs::MetadataExt;
    let d = tempfile::tempdir().unwrap();
    let s = script(d.path(), "tick.py", "def on_tick():\n    return 'x'\n");
    let victim = d.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let link = d.path().join("link.txt");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let hard = d.path().join("hard.txt");
    std::fs::hard_link(&victim, &hard).unwrap();
    for (path, why) in [(&link, "symbolic link"), (&hard, "hard links")] {
        let r = run(perfwatch()
            .args(["--plain", "-e", "dummy", "--script"])
            .arg(&s)
            .arg("--script-output")
            .arg(path)
            .args(["--", "true"]));
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert!(r.stderr.contains(why), "{}", r.stderr);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    }
    let out = d.path().join("mine.txt");
    let r = run(perfwatch()
        .env("SUDO_UID", "65534")
        .env("SUDO_GID", "65534")
        .args(["--plain", "-e", "dummy", "--force-script", "--script"])
        .arg(&s)
        .arg("--script-output")
        .arg(&out)
        .args(["--", "true"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("owned by the invoking user (uid 65534)"),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::metadata(&out).unwrap().uid(), 65534);
}
