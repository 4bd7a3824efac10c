//! The real binary against bad input: every mistake gets one clear line naming the value and
//! a non-zero exit code; never a panic or a backtrace.

use crate::common;

use common::InTime;

use assert_cmd::Command;
use predicates::prelude::*;

fn perfwatch() -> Command {
    let mut c = Command::cargo_bin("perfwatch").unwrap();
    c.env_remove("RUST_BACKTRACE")
        .timeout(std::time::Duration::from_secs(20));
    c
}

/// Usage errors, caught while parsing the command line: exit code 2.
#[test]
fn bad_values_are_usage_errors() {
    let cases: &[(&[&str], &str)] = &[
        (&["-C", "1-a"], "'a' is not a CPU number"),
        (&["-C", "3-1"], "range '3-1' goes backwards"),
        (&["-C", ""], "invalid CPU list ''"),
        (&["-C", "0,,1"], "empty item"),
        (&["-C", "99999"], "above the kernel's limit"),
        (&["-p", "abc"], "'abc' is not a process or thread id"),
        (&["-p", "-5"], "'-5'"),
        (&["-t", "0"], "'0' is not a valid process or thread id"),
        (&["-m", "3"], "'3' is 3 pages, which is not a power of two"),
        (&["-m", "0"], "'0' must be at least one page"),
        (&["-m", "12Q"], "'12Q' is not a page count"),
        (&["-m", "4194304"], "larger than the limit"),
        (&["-F", "0"], "'0' must be greater than zero"),
        (&["-F", "abc"], "'abc' is not a positive whole number"),
        (&["-F", "-5"], "'-5'"),
        (&["-c", "0"], "'0' must be greater than zero"),
        (&["--duration", "0"], "'0' must be a positive duration"),
        (&["--duration", "soon"], "'soon' is not a duration"),
        (&["--plain", "--json"], "cannot be used with"),
        (&["-p", "1", "-t", "1"], "cannot be used with"),
        (&["-F", "10", "-c", "10"], "cannot be used with"),
        (&["--no-such-flag"], "unexpected argument '--no-such-flag'"),
    ];
    for (args, msg) in cases {
        perfwatch()
            .args(*args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(*msg).and(predicate::str::contains("panicked").not()))
            .stdout(predicate::str::is_empty());
    }
}

/// Errors found when starting: exit code 1, one line beginning `perfwatch: error:`.
#[test]
fn bad_targets_and_events_fail_at_start() {
    let cases: &[(&[&str], &str)] = &[
        (&["--plain", "-e", "cylces"], "unknown event 'cylces'"),
        (
            &["--plain", "-e", "nosuchsys:nosuchtp"],
            "no tracepoint 'nosuchsys:nosuchtp'",
        ),
        (
            &["--plain", "-e", "dummy", "-C", "4000"],
            "CPU 4000 is not online",
        ),
        (
            &["--plain", "-e", "dummy", "-p", "2147483646"],
            "no such process: '2147483646'",
        ),
        (
            &["--plain", "-e", "dummy", "-t", "2147483646"],
            "no such process: '2147483646'",
        ),
        (
            &["--plain", "-e", "dummy", "--", "no-such-command-xyz"],
            "cannot run 'no-such-command-xyz': command not found",
        ),
    ];
    for (args, msg) in cases {
        let out = perfwatch()
            .args(*args)
            .assert()
            .code(1)
            .get_output()
            .clone();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(msg), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one line: {stderr}");
        assert!(stderr.starts_with("perfwatch: error: "), "{stderr}");
    }
}

#[test]
fn a_command_that_cannot_be_executed_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("not-executable");
    std::fs::write(&p, "#!/bin/sh\n").unwrap();
    let out = perfwatch()
        .args(["--plain", "-e", "dummy", "--"])
        .arg(&p)
        .assert()
        .code(1)
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("cannot run '{}'", p.display())),
        "{stderr}"
    );
    assert!(stderr.contains("Permission denied"), "{stderr}");
}

/// Without privileges, system-wide monitoring is refused with perf's kind of explanation.
#[test]
fn permission_errors_explain_paranoid_and_how_to_fix() {
    // Only meaningful where we can drop to an unprivileged user and the sysctl forbids
    // CPU-wide events for them.
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(2);
    require_root!("to drop privileges with setpriv");
    if paranoid < 1 {
        skip!("kernel.perf_event_paranoid is {paranoid}: everyone may monitor the system");
    }
    let bin = assert_cmd::cargo::cargo_bin("perfwatch");
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&bin)
        .args(["--plain", "-e", "dummy"])
        .output_in_time()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("kernel.perf_event_paranoid is {paranoid}")),
        "{stderr}"
    );
    assert!(
        stderr.contains("CAP_PERFMON")
            && stderr.contains("sudo sysctl kernel.perf_event_paranoid=0"),
        "{stderr}"
    );
}

#[test]
fn frequency_above_the_kernel_limit_is_clamped_and_said() {
    require_perf!();
    // The kernel lowers the limit by itself when sampling interrupts take too long (a loaded
    // machine): perfwatch must use the limit as it read it, which lies between the values
    // read before and after it ran, and say it.
    let limit = || -> u64 {
        std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let before = limit();
    let asked = before + 1;
    // On a command, not system-wide: every CPU sampled at the limit (100 kHz here) is an
    // interrupt storm that starved perfwatch's own stop for seconds to minutes on a loaded
    // machine, and the other tests running beside it.
    let out = common::run(common::perfwatch().args([
        "--plain",
        "-e",
        "cpu-clock",
        "-F",
        &asked.to_string(),
        "--",
        "true",
    ]));
    let after = limit();
    let stderr = &out.exited(0).stderr;
    let said = format!("-F {asked} is above kernel.perf_event_max_sample_rate (");
    let used: u64 = stderr
        .split_once(&said)
        .and_then(|(_, rest)| rest.split_once("); using "))
        .and_then(|(max, rest)| {
            let used = rest.split_once(" Hz")?.0;
            (max == used).then(|| used.parse().ok())?
        })
        .unwrap_or_else(|| panic!("no {said}N); using N Hz: {stderr}"));
    assert!(
        (after.min(before)..=before.max(after)).contains(&used),
        "used {used} Hz; the limit was {before} before and {after} after"
    );
}

#[test]
fn help_documents_exit_codes_and_permissions() {
    perfwatch().arg("--help").assert().success().stdout(
        predicate::str::contains("EXIT STATUS")
            .and(predicate::str::contains("perf_event_paranoid")),
    );
}

/// The fds a child of this process holds when it starts: 0, 1 and 2, and every fd of ours
/// without FD_CLOEXEC, such as a caller's `exec 3>file` or `/usr/bin/time -o FILE`.
fn fds_a_child_inherits() -> std::collections::BTreeSet<i32> {
    let mut fds: std::collections::BTreeSet<i32> = [0, 1, 2].into();
    for e in std::fs::read_dir("/proc/self/fd").unwrap() {
        let Some(fd) = e.unwrap().file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        // SAFETY: F_GETFD on any number is harmless; a closed fd answers -1.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
            fds.insert(fd);
        }
    }
    fds
}

/// EMFILE: with room to raise the soft limit perfwatch does so and runs; without, it says
/// how, in its own words. The limits are set relative to the fds perfwatch inherits, so the
/// test does not depend on what the caller left open.
#[test]
fn too_many_open_files_raises_the_limit_or_explains() {
    use std::os::unix::process::CommandExt;
    require_perf!();
    let cpus = perfwatch::perf::cpus::online_cpus().unwrap().len();
    if cpus < 2 {
        skip!("one CPU online: system-wide perfwatch needs a single perf fd");
    }
    // One free fd below the limit: the first perf event fits, the second does not.
    let inherited = fds_a_child_inherits();
    let first_free = (0..).find(|fd| !inherited.contains(fd)).unwrap();
    let soft = first_free as u64 + 1;
    let bin = assert_cmd::cargo::cargo_bin("perfwatch");
    let run = |hard: u64| {
        let mut cmd = std::process::Command::new(&bin);
        cmd.args(["--plain", "-e", "dummy", "-d", "0.2"]);
        // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: soft,
                    rlim_max: hard,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd.output_in_time().unwrap()
    };
    let out = run(soft);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "perfwatch: error: too many open files opening {cpus} perf events; raise the limit (ulimit -n, now {soft})"
        )),
        "inherited fds {inherited:?}: {stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let out = run(soft + 4096);
    assert!(
        out.status.success(),
        "inherited fds {inherited:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A bug in a reader thread or in the frontend: perfwatch stops, says so, prints the summary
/// and exits 101. (Debug builds only: the panic points are compiled out of release builds.)
#[test]
fn a_panicking_thread_stops_with_a_summary_and_status_101() {
    require_perf!();
    if !cfg!(debug_assertions) {
        skip!("a release build: the panic points are compiled out");
    }
    for (point, says) in [
        ("reader", "the reader of CPU"),
        ("frontend", "internal error"),
    ] {
        let out = perfwatch()
            .env("PERFWATCH_DEBUG_PANIC", point)
            .args(["--plain", "-e", "dummy", "-d", "5"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(101), "{point}: {stderr}");
        assert!(
            stderr.contains(says) && stderr.contains("please report it"),
            "{point}: {stderr}"
        );
        assert!(
            stderr.contains("lost by the kernel"),
            "summary printed: {stderr}"
        );
    }
}

#[test]
fn a_missing_script_is_named() {
    perfwatch()
        .args([
            "--plain",
            "-e",
            "dummy",
            "--script",
            "/nonexistent/perfwatch-test.py",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "cannot open script '/nonexistent/perfwatch-test.py'",
        ));
}

/// A ring bigger than an unprivileged user may lock: the mmap fails and perfwatch says what
/// to change.
#[test]
fn a_ring_too_big_to_lock_suggests_a_smaller_m() {
    require_perf!();
    require_root!("to drop privileges with setpriv");
    let bin = assert_cmd::cargo::cargo_bin("perfwatch");
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&bin)
        .args(["--plain", "-e", "dummy", "-m", "256M", "--", "true"])
        .output_in_time()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot map a ring of 65536 pages"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Use a smaller -m/--mmap-pages") && stderr.contains("perf_event_mlock_kb"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}
