//! The real binary in a real pseudo-terminal: start it on a command whose children have a
//! known name, read the screen through a terminal emulator (vt100), type a filter, quit,
//! and check the exit status and that the terminal left the alternate screen.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, unbounded};
use portable_pty::{Child, CommandBuilder, PtySize, native_pty_system};

const ROWS: u16 = 40;
const COLS: u16 = 120;

fn nz(v: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(v).expect("non-zero size")
}

struct Screen {
    parser: vt100::Parser,
    rx: Receiver<Vec<u8>>,
    raw: Vec<u8>,
    writer: Box<dyn Write + Send>,
    child: Box<dyn Child + Send + Sync>,
}

impl Screen {
    fn spawn(args: &[&str]) -> Screen {
        Screen::spawn_env(args, &[])
    }

    fn spawn_env(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Screen {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: ROWS,
                cols: COLS,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_perfwatch"));
        cmd.args(args);
        cmd.env("TERM", "xterm-256color");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = pair.slave.spawn_command(cmd).expect("spawn perfwatch");
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().expect("reader");
        let writer = pair.master.take_writer().expect("writer");
        let (tx, rx) = unbounded();
        std::thread::spawn(move || {
            // Keeps the master open for as long as the reader runs.
            let _master = pair.master;
            let mut buf = [0u8; 8192];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        if tx.send(buf[..n].to_vec()).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Screen {
            parser: vt100::Parser::new(nz(ROWS), nz(COLS), 0),
            rx,
            raw: Vec::new(),
            writer,
            child,
        }
    }

    fn pump(&mut self, wait: Duration) {
        if let Ok(b) = self.rx.recv_timeout(wait) {
            self.parser.process(&b);
            self.raw.extend_from_slice(&b);
        }
        while let Ok(b) = self.rx.try_recv() {
            self.parser.process(&b);
            self.raw.extend_from_slice(&b);
        }
    }

    fn text(&self) -> String {
        self.parser.screen().contents()
    }

    /// Poll the screen until `cond` holds; panic with the screen after `timeout`.
    fn wait_for(&mut self, what: &str, timeout: Duration, cond: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + timeout;
        loop {
            self.pump(Duration::from_millis(50));
            if cond(&self.text()) {
                return;
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for {what}; screen:\n{}", self.text());
            }
        }
    }

    fn send(&mut self, s: &str) {
        self.writer.write_all(s.as_bytes()).expect("write to pty");
        self.writer.flush().expect("flush pty");
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        // A failed test must not leave perfwatch running.
        let _ = self.child.kill();
    }
}

/// The log rows of the screen: lines that hold a record body.
fn log_rows(screen: &str) -> Vec<&str> {
    screen.lines().filter(|l| l.contains("{ type: ")).collect()
}

#[test]
fn tui_shows_children_filters_and_quits_cleanly() {
    require_perf!();
    let dir = tempfile::tempdir().expect("tempdir");
    let child_path = dir.path().join("pwtchild");
    let sleep = perfwatch::command::resolve("sleep".as_ref()).expect("sleep in PATH");
    std::os::unix::fs::symlink(sleep, &child_path).expect("symlink");
    let script = format!(
        "while true; do {} 0.2; done",
        child_path.to_str().expect("utf-8 temp path")
    );
    let mut s = Screen::spawn(&["-e", "dummy", "--", "sh", "-c", &script]);

    s.wait_for(
        "the child's comm in the task stream",
        Duration::from_secs(20),
        |t| {
            t.contains("Tasks:")
                && t.lines()
                    .any(|l| l.contains("exec") && l.contains("pwtchild"))
        },
    );
    assert!(
        s.parser.screen().alternate_screen(),
        "the TUI runs on the alternate screen"
    );
    s.wait_for("mmap records in the log", Duration::from_secs(20), |t| {
        log_rows(t).iter().any(|l| l.contains("type: mmap"))
    });

    s.send("/type:exit");
    s.wait_for("the filter being edited", Duration::from_secs(10), |t| {
        t.contains("filter>") && t.contains("type:exit")
    });
    s.send("\r");
    s.wait_for(
        "the log narrowed to exit records",
        Duration::from_secs(20),
        |t| {
            let rows = log_rows(t);
            t.contains("filter: type:exit")
                && !t.contains("filter>")
                && !rows.is_empty()
                && rows.iter().all(|l| l.contains("type: exit"))
        },
    );

    // A bad filter shows its error and keeps the previous one.
    s.send("/ bogus:1");
    s.wait_for("the filter error", Duration::from_secs(10), |t| {
        t.contains("unknown filter key 'bogus'")
    });
    s.send("\x1b");
    s.wait_for("the edit cancelled", Duration::from_secs(10), |t| {
        !t.contains("filter>") && t.contains("filter: type:exit")
    });

    s.send("q");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        s.pump(Duration::from_millis(50));
        if let Some(st) = s.child.try_wait().expect("try_wait") {
            break st;
        }
        assert!(Instant::now() < deadline, "perfwatch did not exit after q");
    };
    // Read what is left (the summary) until the pty closes.
    let end = Instant::now() + Duration::from_secs(2);
    while Instant::now() < end {
        s.pump(Duration::from_millis(50));
    }
    assert!(status.success(), "exit status {status:?}");
    assert!(
        !s.parser.screen().alternate_screen(),
        "the terminal left the alternate screen"
    );
    let raw = String::from_utf8_lossy(&s.raw);
    let left = raw
        .rfind("\x1b[?1049l")
        .expect("leave-alternate-screen sequence");
    let entered = raw
        .rfind("\x1b[?1049h")
        .expect("enter-alternate-screen sequence");
    assert!(left > entered);
    assert!(
        raw.contains("\x1b[?1000l") || raw.contains("\x1b[?1006l"),
        "mouse capture off"
    );
    let summary = &raw[left..];
    assert!(
        summary.contains("records in"),
        "summary after the TUI: {summary}"
    );
}

#[test]
fn stop_signals_restore_the_terminal() {
    require_perf!();
    for (sig, code) in [
        (libc::SIGINT, 0),
        (libc::SIGTERM, 143),
        (libc::SIGHUP, 129),
        (libc::SIGQUIT, 131),
    ] {
        let mut s = Screen::spawn(&["-e", "dummy", "--", "sh", "-c", "sleep 30"]);
        s.wait_for("the TUI", Duration::from_secs(20), |t| {
            t.contains("Event log")
        });
        let pid = s.child.process_id().expect("pid") as libc::pid_t;
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid, sig) };
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            s.pump(Duration::from_millis(50));
            if let Some(st) = s.child.try_wait().expect("try_wait") {
                break st;
            }
            assert!(
                Instant::now() < deadline,
                "perfwatch did not exit on signal {sig}"
            );
        };
        let end = Instant::now() + Duration::from_secs(1);
        while Instant::now() < end {
            s.pump(Duration::from_millis(50));
        }
        assert_eq!(status.exit_code(), code, "128 + signal {sig}");
        assert!(!s.parser.screen().alternate_screen(), "signal {sig}");
        assert!(String::from_utf8_lossy(&s.raw).contains("records in"));
    }
}

/// Wait for the child to exit, then read what is left until the pty goes quiet.
fn exit_status(s: &mut Screen, what: &str) -> portable_pty::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        s.pump(Duration::from_millis(50));
        if let Some(st) = s.child.try_wait().expect("try_wait") {
            break st;
        }
        assert!(Instant::now() < deadline, "perfwatch did not exit: {what}");
    };
    let end = Instant::now() + Duration::from_secs(1);
    while Instant::now() < end {
        s.pump(Duration::from_millis(50));
    }
    status
}

/// The terminal is back to normal: alternate screen left, cursor shown, mouse capture off.
fn assert_restored(s: &Screen, what: &str) {
    assert!(
        !s.parser.screen().alternate_screen(),
        "{what}: alternate screen left"
    );
    assert!(!s.parser.screen().hide_cursor(), "{what}: cursor shown");
    let raw = String::from_utf8_lossy(&s.raw);
    let left = raw
        .rfind("\x1b[?1049l")
        .unwrap_or_else(|| panic!("{what}: no leave-alternate-screen"));
    assert!(
        raw[left..].contains("records in"),
        "{what}: summary after the TUI"
    );
}

#[test]
fn ctrl_c_key_quits_with_status_zero() {
    require_perf!();
    let mut s = Screen::spawn(&["-e", "dummy", "--", "sh", "-c", "sleep 30"]);
    s.wait_for("the TUI", Duration::from_secs(20), |t| {
        t.contains("Event log")
    });
    s.send("\x03");
    let status = exit_status(&mut s, "Ctrl-C");
    assert_eq!(status.exit_code(), 0);
    assert_restored(&s, "Ctrl-C");
}

/// A bug in a reader thread or in the UI thread: the terminal is restored, the summary
/// printed, and the status is 101. (Debug builds: the panic points are compiled out of
/// release builds.)
#[test]
fn a_panic_in_any_thread_restores_the_terminal() {
    require_perf!();
    if !cfg!(debug_assertions) {
        skip!("a release build: the panic points are compiled out");
    }
    for point in ["reader", "frontend"] {
        let mut s = Screen::spawn_env(
            &["-e", "dummy", "--", "sh", "-c", "sleep 30"],
            &[("PERFWATCH_DEBUG_PANIC", point.as_ref())],
        );
        let status = exit_status(&mut s, point);
        assert_eq!(status.exit_code(), 101, "{point}");
        assert_restored(&s, point);
        let raw = String::from_utf8_lossy(&s.raw);
        assert!(raw.contains("please report it"), "{point}: {raw}");
    }
}

/// A program whose name holds an escape sequence, a newline, invalid UTF-8 and a
/// bidirectional override: the TUI shows it escaped, and the raw bytes never reach the
/// terminal.
#[test]
fn hostile_names_never_reach_the_terminal_raw() {
    require_perf!();
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let name: &[u8] = b"ev\x1b[31mil\n\xff\xe2\x80\xaeX";
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = dir.path().join(std::ffi::OsStr::from_bytes(name));
    std::fs::copy("/bin/true", &prog).expect("copy");
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // The path goes to the shell through the environment: it is not UTF-8.
    let script = "while true; do \"$HOSTILE\"; sleep 0.2; done";
    let mut s = Screen::spawn_env(
        &[
            "-e",
            "dummy",
            "--filter",
            "type:comm",
            "--",
            "sh",
            "-c",
            script,
        ],
        &[("HOSTILE", prog.as_os_str())],
    );
    let shown = perfwatch::text::escape(&name[..15]);
    s.wait_for(
        "the escaped comm in the log",
        Duration::from_secs(20),
        |t| {
            log_rows(t)
                .iter()
                .any(|l| l.contains(&format!("comm: {shown}")))
        },
    );
    let raw = &s.raw;
    for bad in [&b"ev\x1b[31m"[..], b"\xff", "\u{202e}".as_bytes(), b"il\n"] {
        assert!(
            !raw.windows(bad.len()).any(|w| w == bad),
            "raw {bad:?} reached the terminal"
        );
    }
    s.send("q");
    let status = exit_status(&mut s, "q");
    assert!(status.success());
    assert_restored(&s, "hostile");
}

/// A real script's `on_tick()` lines fill a pane titled with its name, and its `print()`
/// output lands there too, not on the screen around it.
#[test]
fn script_on_tick_lines_fill_their_pane() {
    require_perf!();
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("ticker.py");
    std::fs::write(
        &script,
        "n = 0\ndef on_event(event):\n    global n\n    n += 1\ndef on_tick():\n    print('printed-by-script')\n    return ['hello-from-ticker', f'events {n}']\n",
    )
    .expect("write script");
    let mut s = Screen::spawn(&[
        "-e",
        "dummy",
        "--script",
        script.to_str().expect("utf-8 path"),
        "--",
        "sh",
        "-c",
        "sleep 30",
    ]);
    s.wait_for("the script pane", Duration::from_secs(20), |t| {
        t.contains("ticker.py")
            && t.contains("hello-from-ticker")
            && t.contains("printed-by-script")
    });
    s.send("q");
    let status = exit_status(&mut s, "q");
    assert!(status.success());
    assert_restored(&s, "script pane");
}
