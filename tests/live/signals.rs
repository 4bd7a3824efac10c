//! Signals and a stalled stdout, as a real shell produces them: the real binary, the real
//! kernel.

use crate::common;

use common::InTime;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;

/// perfwatch, with the signals these tests send at their defaults whatever `cargo test`
/// started with (see [`common::default_signals`]).
fn perfwatch() -> Command {
    let mut c = Command::cargo_bin("perfwatch").unwrap();
    c.stdin(Stdio::null());
    common::default_signals(&mut c);
    c
}

/// Make about `n` fork/exec/exit records (with their mmaps) on the system.
fn churn(n: usize) {
    for _ in 0..n {
        let _ = Command::new("/bin/true").status_in_time();
    }
}

fn kill(child: &Child, sig: i32) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
}

/// Wait for `child` to exit, at most `limit`; returns its status and how long it took.
fn wait_exit(child: &mut Child, limit: Duration) -> (std::process::ExitStatus, Duration) {
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return (s, t0.elapsed());
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("perfwatch did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn stderr_of(child: &mut Child) -> String {
    let mut s = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut s);
    }
    s
}

/// Whether a thread of process `pid` sleeps in the kernel's pipe_write (its wchan:
/// `anon_pipe_write` on this kernel).
fn waits_in_pipe_write(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|t| {
        // pipe_write, or anon_pipe_write on newer kernels.
        std::fs::read_to_string(t.path().join("wchan"))
            .is_ok_and(|w| w.trim().ends_with("pipe_write"))
    })
}

/// Start perfwatch with its stdout a pipe nobody reads, and fill that pipe.
fn stalled(extra: &[&str]) -> (Child, std::process::ChildStdout) {
    let mut child = perfwatch()
        .args(["--plain", "-e", "dummy"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Held, never read: the pipe and perfwatch's own queue fill up. Records are made once
    // perfwatch watches, until the pipe is full (a fixed number of them took longer than
    // the run's --duration on a loaded machine), then some more for its queue.
    let out = child.stdout.take().unwrap();
    common::wait_until_watching(&mut child);
    let fd = std::os::fd::AsRawFd::as_raw_fd(&out);
    // SAFETY: F_GETPIPE_SZ on a pipe we own; no memory is passed.
    let size = unsafe { libc::fcntl(fd, libc::F_GETPIPE_SZ) };
    let queued = || -> libc::c_int {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int to the pointer, which points to ours.
        unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) };
        n
    };
    // Full: less room left than one atomic write (PIPE_BUF), which perfwatch's next line
    // waits for, or a thread of perfwatch already waiting in the kernel's pipe_write. The
    // pipe's 16 page slots can all be taken with fewer than its size in bytes (a write that
    // does not fit the last page's room starts a new page), so bytes alone cannot say it.
    let pid = child.id();
    let t0 = Instant::now();
    while queued() + 4096 < size && !waits_in_pipe_write(pid) && child.try_wait().unwrap().is_none()
    {
        assert!(
            t0.elapsed() < common::deadline(),
            "the pipe never filled: {} of {size} bytes",
            queued()
        );
        churn(10);
    }
    churn(50);
    (child, out)
}

/// With the reader of stdout stalled, one SIGINT or SIGTERM still stops perfwatch within
/// a couple of seconds, with the summary on stderr and status 1 (output was lost) or 128+N.
#[test]
fn a_stalled_stdout_never_keeps_a_signal_from_stopping_perfwatch() {
    require_perf!();
    for (sig, code) in [(libc::SIGINT, 1), (libc::SIGTERM, 143)] {
        let (mut child, _out) = stalled(&[]);
        kill(&child, sig);
        let (status, took) = wait_exit(&mut child, Duration::from_secs(15));
        let err = stderr_of(&mut child);
        assert!(
            took < Duration::from_secs(4),
            "signal {sig}: took {took:?}\n{err}"
        );
        assert_eq!(status.code(), Some(code), "signal {sig}: {err}");
        assert!(err.contains("records in"), "no summary: {err}");
        assert!(
            err.contains("bytes of output were not written: stdout did not take them"),
            "{err}"
        );
    }
}

/// `--duration` and the command's exit are still seen while stdout is stalled.
#[test]
fn a_stalled_stdout_never_keeps_duration_or_the_command_from_stopping_perfwatch() {
    require_perf!();
    let t0 = Instant::now();
    let (mut child, _out) = stalled(&["-d", "2"]);
    let (status, _) = wait_exit(&mut child, Duration::from_secs(15));
    let err = stderr_of(&mut child);
    within(t0, Duration::from_secs(6), &err);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("records in"), "{err}");

    let (mut child, _out) = stalled(&["-a", "--", "sh", "-c", "sleep 1; exit 3"]);
    let t0 = Instant::now();
    let (status, _) = wait_exit(&mut child, Duration::from_secs(15));
    let err = stderr_of(&mut child);
    within(t0, Duration::from_secs(5), &err);
    // The command's own status is kept (it already says something).
    assert_eq!(status.code(), Some(3), "{err}");
}

/// Asserts that less than `limit` has passed since `t0`; shows `err` if not.
#[track_caller]
fn within(t0: Instant, limit: Duration, err: &str) {
    assert!(t0.elapsed() < limit, "{:?}\n{err}", t0.elapsed());
}

/// Read the pid a shell printed, then wait for that process to have started.
fn pid_from(out: &mut impl BufRead) -> i32 {
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    line.trim().parse().unwrap()
}

fn alive(pid: i32) -> bool {
    // A zombie counts as gone.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next())
                .is_some_and(|st| st != "Z")
        })
        .unwrap_or(false)
}

fn wait_gone(pid: i32, limit: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Under `nohup`, SIGHUP is ignored when perfwatch starts: it stays ignored. A background
/// job of a non-interactive shell starts with SIGINT and SIGQUIT ignored: SIGQUIT stays
/// ignored, but `kill -INT $!` stops it (status 0), as it stops `perf record`.
#[test]
fn hup_and_quit_ignored_at_start_stay_ignored_int_stops_a_background_job() {
    require_perf!();
    let bin = assert_cmd::cargo::cargo_bin("perfwatch");
    let cases: [(&str, &[i32], i32, i32); 2] = [
        (
            "nohup \"$PW\" --plain -e dummy -d 30 >/dev/null 2>&1 & echo $!; wait $!; echo \"status $?\"",
            &[libc::SIGHUP],
            libc::SIGTERM,
            143,
        ),
        (
            "\"$PW\" --plain -e dummy -d 30 >/dev/null 2>&1 & echo $!; wait $!; echo \"status $?\"",
            &[libc::SIGQUIT],
            libc::SIGINT,
            0,
        ),
    ];
    for (script, ignored, stop, code) in cases {
        // The shell starts with default dispositions (not those of a `nohup cargo test &`):
        // what perfwatch finds ignored is what the script arranged.
        let mut sh = Command::new("sh");
        let mut sh = common::default_signals(&mut sh)
            .args(["-c", script])
            .env("PW", &bin)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(sh.stdout.take().unwrap());
        let pid = pid_from(&mut out);
        // Signalled once it has opened its events (its handlers are installed before).
        common::wait_until_pid_watching(pid as u32, || false);
        for &sig in ignored {
            // SAFETY: signalling a process we started.
            unsafe { libc::kill(pid, sig) };
            std::thread::sleep(Duration::from_millis(400));
            assert!(
                alive(pid),
                "signal {sig} was ignored at start but stopped perfwatch"
            );
        }
        // SAFETY: as above.
        unsafe { libc::kill(pid, stop) };
        assert!(
            wait_gone(pid, Duration::from_secs(10)),
            "signal {stop} did not stop it"
        );
        let mut rest = String::new();
        let _ = out.read_to_string(&mut rest);
        common::wait_in_time(&mut sh);
        assert_eq!(rest.trim(), format!("status {code}"), "signal {stop}");
    }
}

/// perfwatch started with SIGINT and SIGTERM both ignored (set here, in the child, before the
/// exec): each of them still stops it within the grace, with the summary on stderr, the
/// records it saw on stdout, and its status (0 for SIGINT, 143 for SIGTERM).
#[test]
fn int_and_term_stop_perfwatch_even_when_ignored_at_start() {
    require_perf!();
    for (sig, code) in [(libc::SIGINT, 0), (libc::SIGTERM, 143)] {
        let mut cmd = perfwatch();
        cmd.args(["--plain", "-e", "dummy", "-d", "30"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        ignore_int_and_term(&mut cmd);
        let mut child = cmd.spawn().unwrap();
        let mut out = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        common::wait_until_watching(&mut child);
        // No pause before the signal: the forks made before it are in the rings, and a stop
        // drains every ring up to the stop time.
        churn(20);
        kill(&child, sig);
        let (status, took) = wait_exit(&mut child, Duration::from_secs(15));
        let err = stderr_of(&mut child);
        let out = reader.join().unwrap();
        assert!(
            took < Duration::from_secs(4),
            "signal {sig}: took {took:?}\n{err}"
        );
        assert_eq!(status.code(), Some(code), "signal {sig}: {err}");
        assert!(
            err.contains("records in"),
            "signal {sig}: no summary: {err}"
        );
        assert!(
            out.contains("type: fork"),
            "signal {sig}: the forks before the signal are not in the output:\n{err}"
        );
    }
}

/// The `-- COMMAND` gets SIGINT and SIGTERM as perfwatch got them: ignored at perfwatch's
/// start, ignored in the command (perfwatch's own handlers do not leak into it as defaults).
#[test]
fn a_command_keeps_the_signals_ignored_at_perfwatch_start() {
    require_perf!();
    let mut cmd = common::plain_sh("grep SigIgn /proc/self/status >&2");
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    ignore_int_and_term(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let (status, _) = wait_exit(&mut child, Duration::from_secs(15));
    let err = stderr_of(&mut child);
    assert_eq!(status.code(), Some(0), "{err}");
    let mask = err
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .unwrap_or_else(|| panic!("no SigIgn line from the command: {err}"));
    for sig in [libc::SIGINT, libc::SIGTERM] {
        assert!(
            mask & (1 << (sig - 1)) != 0,
            "signal {sig} not ignored in the command: {mask:x}"
        );
    }
}

/// A SIGTERM while perfwatch is still starting (here: a script's slow `trace_begin()`) is
/// not lost and does not kill it outright: the run stops as soon as it has started, with its
/// summary and status 143.
#[cfg(feature = "python")]
#[test]
fn a_signal_during_start_up_stops_the_run_with_its_summary() {
    require_perf!();
    let (_d, script) = common::temp_script(
        "slow_start.py",
        "import time\ndef trace_begin():\n    time.sleep(1.5)\ndef on_event(event):\n    pass\n",
    );
    let mut child = perfwatch()
        .args(["--plain", "-e", "dummy", "-d", "30", "--script"])
        .arg(&script)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    kill(&child, libc::SIGTERM);
    let (status, took) = wait_exit(&mut child, Duration::from_secs(20));
    let err = stderr_of(&mut child);
    assert_eq!(status.code(), Some(143), "{err}");
    assert!(err.contains("records in"), "no summary: {err}");
    assert!(took < Duration::from_secs(8), "took {took:?}: {err}");
}

/// The signals `/proc/PID/status` says `pid` ignores (SigIgn), as a bit mask by number.
fn ignored_by(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .expect("a SigIgn line");
    u64::from_str_radix(mask.trim(), 16).unwrap()
}

/// What `nohup cargo test &` does to the tests (SIGHUP and SIGINT ignored), the children
/// they signal do not inherit: `common::default_signals` puts them back to their defaults.
#[test]
fn children_start_with_the_signals_tests_send_at_their_defaults() {
    let bit = |sig: i32| 1u64 << (sig - 1);
    let ignore = |sig: i32, how: libc::sighandler_t| {
        // SAFETY: setting a disposition to SIG_IGN or back to the one saved; no handler runs.
        unsafe { libc::signal(sig, how) }
    };
    // As nohup and a background job leave them, for this process, as a parent.
    let (hup, int) = (
        ignore(libc::SIGHUP, libc::SIG_IGN),
        ignore(libc::SIGINT, libc::SIG_IGN),
    );
    let plain = Command::new("sleep").arg("30").spawn();
    let mut reset = Command::new("sleep");
    let reset = common::default_signals(reset.arg("30")).spawn();
    ignore(libc::SIGHUP, hup);
    ignore(libc::SIGINT, int);
    let (mut plain, mut reset) = (plain.unwrap(), reset.unwrap());
    let (inherited, defaults) = (ignored_by(plain.id()), ignored_by(reset.id()));
    for c in [&mut plain, &mut reset] {
        let _ = c.kill();
        common::wait_in_time(c);
    }
    // Without the reset they are inherited (the test can tell), with it they are not.
    let both = bit(libc::SIGHUP) | bit(libc::SIGINT);
    assert_eq!(inherited & both, both, "SigIgn {inherited:x}");
    assert_eq!(defaults & both, 0, "SigIgn {defaults:x}");
}

/// The deadline every wait on a child goes through: a child that outlives it is killed, and
/// the test fails with what the child printed so far, instead of hanging `cargo test`.
#[test]
fn a_child_past_its_deadline_is_killed_and_fails_the_test_with_its_output() {
    let child = Command::new("sh")
        .args(["-c", "echo started; echo oops >&2; exec sleep 600"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let t0 = Instant::now();
    let failed = std::panic::catch_unwind(move || common::finish(child, Duration::from_secs(1)))
        .expect_err("finish returned for a child that sleeps 600 s");
    let message = failed.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    assert!(
        message.contains("still running")
            && message.contains("started")
            && message.contains("oops"),
        "{message}"
    );
    // Killed and reaped, not left behind.
    assert!(!alive(pid), "the child {pid} is still there");
}

/// `cmd` starts with SIGINT and SIGTERM ignored, as under `nohup` or a shell's `trap '' INT
/// TERM`.
fn ignore_int_and_term(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: only async-signal-safe calls (signal) between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            libc::signal(libc::SIGTERM, libc::SIG_IGN);
            Ok(())
        });
    }
}
