//! The real binary in a real pseudo-terminal: start it on a command whose children have a
//! known name, read the screen through a terminal emulator (vt100), type a filter, quit,
//! and check the exit status and that the terminal left the alternate screen.

use crate::common;

use common::InTime;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, unbounded};
use portable_pty::{Child, CommandBuilder, PtySize, native_pty_system};

const ROWS: u16 = 40;
const COLS: u16 = 120;

fn nz(v: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(v).expect("non-zero size")
}

pub(crate) struct Screen {
    parser: vt100::Parser,
    rx: Receiver<Vec<u8>>,
    raw: Vec<u8>,
    writer: Box<dyn Write + Send>,
    child: Box<dyn Child + Send + Sync>,
    /// The pty's master: open for as long as the screen lives; its terminal attributes are
    /// the slave's.
    master: Box<dyn portable_pty::MasterPty + Send>,
}

impl Screen {
    fn spawn(args: &[&str]) -> Screen {
        Screen::spawn_env(args, &[])
    }

    fn spawn_env(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Screen {
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_perfwatch"));
        cmd.args(args);
        cmd.env("TERM", "xterm-256color");
        for (k, v) in env {
            cmd.env(k, v);
        }
        Screen::spawn_cmd(cmd)
    }

    /// perfwatch `args` on a `rows`x`cols` terminal.
    pub(crate) fn spawn_at(args: &[&str], rows: u16, cols: u16) -> Screen {
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_perfwatch"));
        cmd.args(args);
        cmd.env("TERM", "xterm-256color");
        Screen::spawn_sized(cmd, rows, cols)
    }

    /// `q`, and perfwatch ends with status 0.
    pub(crate) fn quit_ok(&mut self) {
        self.send("q");
        assert!(exit_status(self, "q").success());
    }

    /// `q`: a clean exit, and the terminal as it was (`what` names the case).
    fn quit_restored(&mut self, what: &str) {
        self.quit_ok();
        assert_restored(self, what);
    }

    /// Read the screen for `d`, whatever comes.
    fn idle(&mut self, d: Duration) {
        let end = Instant::now() + d;
        while Instant::now() < end {
            self.pump(Duration::from_millis(50));
        }
    }

    fn spawn_cmd(cmd: CommandBuilder) -> Screen {
        Screen::spawn_sized(cmd, ROWS, COLS)
    }

    fn spawn_sized(cmd: CommandBuilder, rows: u16, cols: u16) -> Screen {
        let Pty {
            child,
            writer,
            rx,
            master,
        } = Pty::open(cmd, rows, cols);
        Screen {
            parser: vt100::Parser::new(nz(rows), nz(cols), 0),
            rx,
            raw: Vec::new(),
            writer,
            child,
            master,
        }
    }

    pub(crate) fn pump(&mut self, wait: Duration) {
        if let Ok(b) = self.rx.recv_timeout(wait) {
            self.parser.process(&b);
            self.raw.extend_from_slice(&b);
        }
        while let Ok(b) = self.rx.try_recv() {
            self.parser.process(&b);
            self.raw.extend_from_slice(&b);
        }
    }

    pub(crate) fn text(&self) -> String {
        self.parser.screen().contents()
    }

    /// Poll the screen until `cond` holds; panic with the screen after `timeout`.
    pub(crate) fn wait_for(&mut self, what: &str, timeout: Duration, cond: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + timeout;
        loop {
            self.pump(Duration::from_millis(50));
            // Held on a whole frame: a frame comes in several reads, and a test that saw
            // one part of it (a pane's title) would read another (its header) half drawn.
            if cond(&self.text()) && {
                self.settle();
                cond(&self.text())
            } {
                return;
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for {what}; screen:\n{}", self.text());
            }
        }
    }

    /// Read until nothing more has come for 60 ms (at most 1 s): the frame being drawn is
    /// then whole.
    fn settle(&mut self) {
        let until = Instant::now() + Duration::from_secs(1);
        while Instant::now() < until {
            match self.rx.recv_timeout(Duration::from_millis(60)) {
                Ok(b) => {
                    self.parser.process(&b);
                    self.raw.extend_from_slice(&b);
                }
                Err(_) => return,
            }
        }
    }

    pub(crate) fn send(&mut self, s: &str) {
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

/// `dir/name`: a symlink to the program `prog` (found in PATH), so that its exec is told apart.
fn link_as(dir: &std::path::Path, name: &str, prog: &str) -> std::path::PathBuf {
    let link = dir.join(name);
    let target = perfwatch::command::resolve(prog.as_ref()).expect("program in PATH");
    std::os::unix::fs::symlink(target, &link).expect("symlink");
    link
}

/// The log rows of the screen: lines that hold a record body.
fn log_rows(screen: &str) -> Vec<&str> {
    screen.lines().filter(|l| l.contains("{ type: ")).collect()
}

#[test]
fn tui_shows_children_filters_and_quits_cleanly() {
    require_perf!();
    let dir = tempfile::tempdir().expect("tempdir");
    let child_path = link_as(dir.path(), "pwtchild", "sleep");
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
    let status = exit_status(&mut s, "after q");
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
    // `q` decides the stop time too: every ring was drained up to it.
    assert!(
        summary.contains("stopped at ") && summary.contains("every CPU's records up to then"),
        "no stop time after q: {summary}"
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
        s.idle(Duration::from_secs(1));
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
    s.idle(Duration::from_secs(1));
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
    s.quit_restored("hostile");
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
    s.quit_restored("script pane");
}

/// perf's `sctop.py` (a thread of its own clears the screen and prints its table every
/// interval): each clear is a new frame of its pane, never escapes on the screen.
#[test]
fn a_perf_scripts_clear_screen_frames_fill_its_pane() {
    require_perf!();
    let sctop = std::path::Path::new("/usr/lib/perf-core/scripts/python/sctop.py");
    if !sctop.is_file() {
        skip!("{} is absent (Debian: linux-perf)", sctop.display());
    }
    // Large enough for every pane (the scripts' one among them).
    let mut s = Screen::spawn_at(
        &[
            "-e",
            "raw_syscalls:sys_enter",
            "--script",
            sctop.to_str().expect("utf-8 path"),
            "--script-arg",
            "1",
            "--",
            "sh",
            "-c",
            "while :; do sleep 0.1; done",
        ],
        45,
        160,
    );
    s.wait_for("sctop's table in its pane", Duration::from_secs(20), |t| {
        t.contains("sctop.py")
            && t.contains("syscall events:")
            && t.contains("│event ")
            && t.contains("│--------------------")
    });
    let screen = s.parser.screen().contents();
    assert!(
        !screen.contains("[2J") && !screen.contains("\\x1b"),
        "escapes on the screen:\n{screen}"
    );
    s.quit_restored("sctop pane");
}

impl Screen {
    /// The local modes of the pty (its terminal attributes, read through the master).
    fn lflag(&self) -> libc::tcflag_t {
        let fd = self.master.as_raw_fd().expect("master fd");
        let mut t = std::mem::MaybeUninit::<libc::termios>::zeroed();
        // SAFETY: a valid fd and out-parameter.
        assert_eq!(
            unsafe { libc::tcgetattr(fd, t.as_mut_ptr()) },
            0,
            "tcgetattr"
        );
        // SAFETY: filled by tcgetattr.
        unsafe { t.assume_init() }.c_lflag
    }

    /// Canonical mode and echo are on: the shell's line editing works again.
    fn cooked(&self) -> bool {
        let l = self.lflag();
        l & libc::ICANON != 0 && l & libc::ECHO != 0
    }

    fn pid(&self) -> libc::pid_t {
        self.child.process_id().expect("pid") as libc::pid_t
    }
}

/// The state letter of a process (`R`, `S`, `T` stopped, `Z`), from /proc.
fn proc_state(pid: libc::pid_t) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit(')')
        .next()?
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// The terminal is left as the shell needs it after perfwatch died by a signal: no
/// alternate screen, cursor shown, canonical mode and echo on.
fn assert_restored_after_death(s: &Screen, what: &str) {
    assert!(
        !s.parser.screen().alternate_screen(),
        "{what}: alternate screen left"
    );
    assert!(!s.parser.screen().hide_cursor(), "{what}: cursor shown");
    assert!(s.cooked(), "{what}: raw mode off (lflag {:o})", s.lflag());
    let raw = String::from_utf8_lossy(&s.raw);
    assert!(
        raw.contains("\x1b[?1000l") && raw.contains("\x1b[?1006l"),
        "{what}: mouse reporting off"
    );
}

/// A fatal signal while the TUI owns the terminal (sent by kill, or a real crash in native
/// code under a script) ends perfwatch by that signal, and the terminal is restored first.
#[test]
fn fatal_signals_restore_the_terminal_before_they_end_perfwatch() {
    require_perf!();
    for (sig, name) in [
        (libc::SIGSEGV, "Segmentation fault"),
        (libc::SIGABRT, "Aborted"),
        (libc::SIGUSR1, "User defined signal 1"),
    ] {
        let mut s = Screen::spawn(&["-e", "dummy"]);
        s.wait_for("the TUI", Duration::from_secs(20), |t| {
            t.contains("Event log")
        });
        assert!(!s.cooked(), "raw mode while the TUI runs");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(s.pid(), sig) };
        let status = exit_status(&mut s, name);
        assert_eq!(status.signal(), Some(name), "died by the signal");
        assert_restored_after_death(&s, name);
    }
    if !cfg!(feature = "python") {
        skip!("built without the python feature");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    for (body, name) in [
        (
            "import ctypes\ndef on_tick():\n    ctypes.string_at(0)\n",
            "Segmentation fault",
        ),
        ("import os\ndef on_tick():\n    os.abort()\n", "Aborted"),
    ] {
        let script = dir.path().join("crash.py");
        std::fs::write(&script, body).expect("script");
        let mut s = Screen::spawn(&["-e", "dummy", "--script", script.to_str().expect("utf-8")]);
        let status = exit_status(&mut s, name);
        assert_eq!(status.signal(), Some(name), "a crash in native code");
        assert_restored_after_death(&s, name);
    }
}

/// A minimal job-control shell: runs its arguments as a foreground job in a process group of
/// its own, reports a stop with the terminal's modes at that moment, and continues the job
/// when a line is typed.
const JOB_SHELL: &str = r#"
import os, signal, sys, termios
signal.signal(signal.SIGTTOU, signal.SIG_IGN)
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    os.tcsetpgrp(0, os.getpgrp())
    os.execv(sys.argv[1], sys.argv[1:])
try:
    os.setpgid(pid, pid)
except OSError:
    pass
os.tcsetpgrp(0, pid)
print("JOBSHELL child", pid, flush=True)
while True:
    _, st = os.waitpid(pid, os.WUNTRACED)
    if os.WIFSTOPPED(st):
        os.tcsetpgrp(0, os.getpgrp())
        l = termios.tcgetattr(0)[3]
        print("\r\nJOBSHELL stopped sig=%d icanon=%d echo=%d" % (
            os.WSTOPSIG(st), bool(l & termios.ICANON), bool(l & termios.ECHO)), flush=True)
        sys.stdin.readline()
        os.tcsetpgrp(0, pid)
        os.killpg(pid, signal.SIGCONT)
    else:
        print("\r\nJOBSHELL exit %d" % os.waitstatus_to_exitcode(st), flush=True)
        break
"#;

/// The whole screen is there (a redraw of only what changed would leave it mostly blank
/// after the terminal cleared it): the header, the panes' titles and the key line.
fn fully_drawn(t: &str) -> bool {
    t.contains(" perfwatch │")
        && t.contains("Tasks:")
        && t.contains("Event log")
        && t.contains(" q  quit")
}

/// Ctrl-Z (a key in raw mode) and SIGTSTP leave the terminal (alternate screen, raw mode,
/// mouse, hidden cursor), stop perfwatch for its shell, and on SIGCONT take the terminal back
/// and redraw everything.
#[test]
fn ctrl_z_and_sigtstp_suspend_and_continue_with_a_full_redraw() {
    require_perf!();
    let dir = tempfile::tempdir().expect("tempdir");
    let shell = dir.path().join("jobshell.py");
    std::fs::write(&shell, JOB_SHELL).expect("job shell");
    let mut cmd = CommandBuilder::new("python3");
    cmd.arg(&shell);
    cmd.args([env!("CARGO_BIN_EXE_perfwatch"), "-e", "dummy"]);
    cmd.env("TERM", "xterm-256color");
    let mut s = Screen::spawn_cmd(cmd);
    s.wait_for("the TUI", Duration::from_secs(20), fully_drawn);
    let raw = String::from_utf8_lossy(&s.raw).into_owned();
    let pw: libc::pid_t = raw
        .split("JOBSHELL child ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .expect("the job's pid");
    for (how, stop) in [("Ctrl-Z", None), ("SIGTSTP", Some(libc::SIGTSTP))] {
        let before = s.raw.len();
        match stop {
            None => s.send("\x1a"),
            // SAFETY: signalling the perfwatch we started.
            Some(sig) => unsafe {
                libc::kill(pw, sig);
            },
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while !String::from_utf8_lossy(&s.raw[before..]).contains("JOBSHELL stopped") {
            assert!(Instant::now() < deadline, "{how}: no stop reported");
            s.pump(Duration::from_millis(50));
        }
        assert_eq!(proc_state(pw), Some('T'), "{how}: perfwatch is stopped");
        assert!(
            !s.parser.screen().alternate_screen(),
            "{how}: alternate screen left"
        );
        assert!(!s.parser.screen().hide_cursor(), "{how}: cursor shown");
        let report = String::from_utf8_lossy(&s.raw[before..]).into_owned();
        assert!(
            report.contains("icanon=1 echo=1"),
            "{how}: the terminal is cooked while stopped: {report}"
        );
        assert!(report.contains("\x1b[?1000l"), "{how}: mouse reporting off");
        // Continue: the job shell gives the terminal back and sends SIGCONT.
        s.send("\n");
        s.wait_for("the full redraw", Duration::from_secs(10), |t| {
            fully_drawn(t) && !t.contains("JOBSHELL")
        });
        assert!(
            s.parser.screen().alternate_screen(),
            "{how}: back on the alternate screen"
        );
        assert!(!s.cooked(), "{how}: raw mode again");
    }
    s.send("q");
    s.wait_for("the end", Duration::from_secs(20), |t| {
        t.contains("JOBSHELL exit")
    });
    assert!(s.text().contains("JOBSHELL exit 0"), "{}", s.text());
}

/// With no shell that could continue it (perfwatch leads its own session here), Ctrl-Z does
/// nothing, as the kernel does with a terminal's stop signals for such a process.
#[test]
fn ctrl_z_without_a_shell_to_continue_does_nothing() {
    require_perf!();
    let mut s = Screen::spawn(&["-e", "dummy"]);
    s.wait_for("the TUI", Duration::from_secs(20), |t| {
        t.contains("Event log")
    });
    s.send("\x1a");
    s.idle(Duration::from_millis(700));
    assert_ne!(proc_state(s.pid()), Some('T'));
    assert!(s.parser.screen().alternate_screen());
    s.quit_restored("q after Ctrl-Z");
}

/// TERM=dumb, or no TERM at all: no full-screen view, --plain lines with a note.
#[test]
fn a_dumb_or_missing_term_gets_plain_lines() {
    require_perf!();
    for term in [Some("dumb"), None] {
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_perfwatch"));
        cmd.args(["-e", "dummy", "--", "sh", "-c", "sleep 0.3; /bin/true"]);
        match term {
            Some(t) => cmd.env("TERM", t),
            None => cmd.env_remove("TERM"),
        }
        let mut s = Screen::spawn_cmd(cmd);
        let status = exit_status(&mut s, "plain");
        assert!(status.success(), "{term:?}");
        let raw = String::from_utf8_lossy(&s.raw);
        assert!(
            !raw.contains("\x1b[?1049h"),
            "{term:?}: no alternate screen"
        );
        let note = match term {
            Some(_) => "TERM is 'dumb': no full-screen view; printing --plain lines instead",
            None => "TERM is not set: no full-screen view",
        };
        assert!(raw.contains(note), "{term:?}: {raw}");
        assert!(raw.contains("{ type: exit"), "{term:?}: {raw}");
    }
}

/// What the panes can no longer show reaches stderr once the terminal is restored: each
/// script's last on_tick() lines and what trace_end() printed. With --script-output it goes
/// to that file, in the TUI too.
#[test]
fn script_output_after_the_tui_quits_is_not_lost() {
    require_perf!();
    if !cfg!(feature = "python") {
        skip!("built without the python feature");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("final.py");
    std::fs::write(
        &script,
        "n = 0\n\
         def on_tick():\n\
         \x20   global n\n\
         \x20   n += 1\n\
         \x20   return [f'tick-line {n}', 'second line']\n\
         def trace_end():\n\
         \x20   print('FINAL TABLE', n)\n",
    )
    .expect("script");
    let path = script.to_str().expect("utf-8");
    let mut s = Screen::spawn(&["-e", "dummy", "--script", path]);
    s.wait_for("the pane", Duration::from_secs(20), |t| {
        t.contains("tick-line 2")
    });
    s.quit_restored("script");
    let raw = String::from_utf8_lossy(&s.raw);
    let after = &raw[raw.rfind("\x1b[?1049l").expect("left")..];
    assert!(after.contains("[final.py] FINAL TABLE"), "{after}");
    assert!(after.contains("[final.py] second line"), "{after}");
    assert!(after.contains("[final.py] tick-line "), "{after}");

    let out = dir.path().join("pane.txt");
    let mut s = Screen::spawn(&[
        "-e",
        "dummy",
        "--script",
        path,
        "--script-output",
        out.to_str().expect("utf-8"),
    ]);
    s.wait_for("the pane", Duration::from_secs(20), |t| {
        t.contains("tick-line 1")
    });
    s.send("q");
    let status = exit_status(&mut s, "q");
    assert!(status.success());
    let text = std::fs::read_to_string(&out).expect("--script-output written in the TUI");
    assert!(text.contains("[final.py] tick-line 1\n"), "{text}");
    assert!(text.contains("[final.py] FINAL TABLE"), "{text}");
    let raw = String::from_utf8_lossy(&s.raw);
    let after = &raw[raw.rfind("\x1b[?1049l").expect("left")..];
    assert!(!after.contains("FINAL TABLE"), "{after}");
}

/// What a perf script prints in trace_end() reaches the terminal after the TUI is gone,
/// bare, as perf script prints it.
#[test]
fn a_perf_scripts_trace_end_output_follows_the_tui_bare() {
    require_perf!();
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("perf_final.py");
    std::fs::write(
        &script,
        "from perf_trace_context import *\n\
         def raw_syscalls__sys_enter(*args):\n\
         \x20   pass\n\
         def trace_end():\n\
         \x20   print('PERF FINAL TABLE')\n",
    )
    .expect("script");
    let mut s = Screen::spawn(&["-e", "dummy", "--script", script.to_str().expect("utf-8")]);
    s.wait_for("the TUI", Duration::from_secs(20), |t| {
        t.contains("records")
    });
    s.quit_restored("perf script");
    let raw = String::from_utf8_lossy(&s.raw);
    let after = &raw[raw.rfind("\x1b[?1049l").expect("left")..];
    assert!(after.contains("PERF FINAL TABLE"), "{after}");
    assert!(
        !after.contains("[perf_final.py] PERF FINAL TABLE"),
        "{after}"
    );
}

/// A program that spends its time in `pwhot_spin`, called from `main` through `pwhot_outer`,
/// for at most 15 s.
fn hot_program(dir: &std::path::Path) -> std::path::PathBuf {
    let src = dir.join("pwhot.c");
    std::fs::write(
        &src,
        "#include <unistd.h>\nvolatile unsigned long sink;\n\
         __attribute__((noinline)) void pwhot_spin(void) { for (;;) sink++; }\n\
         __attribute__((noinline)) void pwhot_outer(void) { pwhot_spin(); }\n\
         int main(void) { alarm(15); pwhot_outer(); return 0; }\n",
    )
    .expect("write source");
    let bin = dir.join("pwhot");
    let st = std::process::Command::new("cc")
        .args([
            "-O0",
            "-fno-omit-frame-pointer",
            "-mno-omit-leaf-frame-pointer",
            "-fno-optimize-sibling-calls",
            "-o",
        ])
        .arg(&bin)
        .arg(&src)
        .status_in_time()
        .expect("cc");
    assert!(st.success());
    bin
}

/// perfwatch `extra -e cpu-clock -F 1000 -- pwhot` on a 160x45 terminal (and the directory
/// that holds the program).
fn hot_on_160x45(extra: &[&str]) -> (tempfile::TempDir, Screen) {
    hot_on(extra, 45, 160)
}

/// The same on a `rows`x`cols` terminal.
fn hot_on(extra: &[&str], rows: u16, cols: u16) -> (tempfile::TempDir, Screen) {
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = hot_program(dir.path());
    let mut args = extra.to_vec();
    args.extend([
        "-e",
        "cpu-clock",
        "-F",
        "1000",
        "--",
        prog.to_str().unwrap(),
    ]);
    let s = Screen::spawn_at(&args, rows, cols);
    (dir, s)
}

#[test]
fn top_symbols_names_the_hot_function_and_zooms_both_ways() {
    require_perf!();
    let (_dir, mut s) = hot_on_160x45(&[]);
    // On 160x45 the pane is there without a key, beside the task stream, the hot function
    // first, in its binary.
    s.wait_for(
        "Top symbols with pwhot_spin",
        Duration::from_secs(20),
        |t| {
            t.contains("Top symbols (last 10 s")
                && t.lines()
                    .any(|l| l.contains("pwhot_spin") && l.contains("[.]") && l.contains("pwhot "))
        },
    );
    let screen = s.text();
    let tasks_line = screen
        .lines()
        .find(|l| l.contains("Tasks: fork/exit/exec"))
        .unwrap();
    assert!(
        tasks_line.contains("Top symbols"),
        "not beside the task stream:\n{screen}"
    );
    // Focus it (Shift-Tab twice from the log), Enter: the tasks running the symbol.
    s.send("\x1b[Z\x1b[Z\r");
    s.wait_for(
        "the tasks running pwhot_spin",
        Duration::from_secs(5),
        |t| t.contains("Tasks running pwhot_spin") && t.contains("pwhot"),
    );
    // Enter on that task: Top symbols narrowed to it; Esc back.
    s.send("\r");
    s.wait_for(
        "Top symbols narrowed to the task",
        Duration::from_secs(5),
        |t| t.contains("Top symbols of ") && t.contains(" pwhot (last 10 s"),
    );
    s.send("\x1b");
    s.wait_for("the narrowing gone", Duration::from_secs(5), |t| {
        t.contains("Top symbols (last 10 s")
    });
    // `a`: since start.
    s.send("a");
    s.wait_for("since start", Duration::from_secs(5), |t| {
        t.contains("Top symbols (since start")
    });
    s.quit_ok();
}

#[test]
fn with_call_chains_top_symbols_has_children_and_self_and_expands_callers() {
    require_perf!();
    let (_dir, mut s) = hot_on_160x45(&["-g"]);
    s.wait_for("Children and Self", Duration::from_secs(20), |t| {
        t.contains("child") && t.contains("self") && t.contains("+ pwhot_spin")
    });
    // Sort by self: pwhot_spin first; expand it: its callers, down the chain.
    s.send("\x1b[Z\x1b[Zs+");
    s.wait_for("the callers of pwhot_spin", Duration::from_secs(5), |t| {
        right_under(t, "- pwhot_spin", "pwhot_outer")
    });
    // Down to the caller, expand it too: main below it.
    s.send("j+");
    s.wait_for("main under pwhot_outer", Duration::from_secs(5), |t| {
        right_under(t, "- pwhot_outer", "main")
    });
    // `-` closes it again.
    s.send("-");
    s.wait_for("pwhot_outer closed", Duration::from_secs(5), |t| {
        t.contains("+ pwhot_outer")
    });
    s.quit_ok();
}

/// Does the first line of `screen` that holds `above` have a line holding `below` under it?
fn right_under(screen: &str, above: &str, below: &str) -> bool {
    let lines: Vec<&str> = screen.lines().collect();
    lines
        .iter()
        .position(|l| l.contains(above))
        .is_some_and(|i| lines.get(i + 1).is_some_and(|l| l.contains(below)))
}

/// The panes of a screen: all but the status bar (its counters and clock go on while paused).
fn panes(screen: &str) -> String {
    screen.lines().skip(2).collect::<Vec<_>>().join("\n")
}

#[test]
fn pause_holds_every_pane_through_a_fork_storm_and_home_shows_a_page() {
    require_perf!();
    let mut s = Screen::spawn(&[
        "-e",
        "dummy",
        "--",
        "sh",
        "-c",
        "while :; do /bin/true; done",
    ]);
    s.wait_for("execs of true", Duration::from_secs(20), |t| {
        t.lines().any(|l| l.contains("exec") && l.contains("true")) && log_rows(t).len() > 10
    });
    s.send(" ");
    s.wait_for("PAUSED", Duration::from_secs(5), |t| t.contains("PAUSED"));
    // Let a frame with the pause be drawn, then watch the storm go on for 2 seconds.
    s.pump(Duration::from_millis(300));
    let held = panes(&s.text());
    let status = |t: &str| t.lines().nth(1).unwrap_or_default().to_string();
    let counted = status(&s.text());
    s.idle(Duration::from_secs(2));
    let now = s.text();
    assert_eq!(panes(&now), held, "the panes moved while paused");
    assert_ne!(status(&now), counted, "the status bar's counters go on");
    // Home on the held log: the oldest entries, a full page of them.
    s.send("g");
    s.wait_for(
        "the log scrolled to its start",
        Duration::from_secs(5),
        |t| t.contains("back, End follows]"),
    );
    let t = s.text();
    let log_top = t.lines().position(|l| l.contains("Event log (")).unwrap();
    let footer = t.lines().count() - 1;
    let rows = log_rows(&t).len();
    assert!(
        rows + 2 >= footer - log_top,
        "Home shows a full page ({rows} rows under line {log_top}):\n{t}"
    );
    // Resume: live again.
    s.send(" ");
    s.wait_for("resumed", Duration::from_secs(5), |t| !t.contains("PAUSED"));
    s.wait_for("the panes moving again", Duration::from_secs(5), |t| {
        panes(t) != held
    });
    s.quit_ok();
}

#[test]
fn side_band_history_outlives_samples_and_the_log_shows_samples_on_s() {
    require_perf!();
    let dir = tempfile::tempdir().expect("tempdir");
    let hot = hot_program(dir.path());
    let marker = link_as(dir.path(), "pwmark", "sleep");
    let script = format!(
        "{} 0.1; exec {}",
        marker.to_str().unwrap(),
        hot.to_str().unwrap()
    );
    let args = [
        "-e",
        "cpu-clock",
        "-F",
        "4000",
        "--history",
        "200",
        "--",
        "sh",
        "-c",
        &script,
    ];
    let mut s = Screen::spawn_at(&args, 45, 160);
    s.wait_for("the hot program running", Duration::from_secs(20), |t| {
        t.lines().any(|l| l.contains("exec") && l.contains("pwhot"))
    });
    // Five seconds of samples: at 4 kHz, 100 times the history.
    s.idle(Duration::from_secs(5));
    let t = s.text();
    assert!(
        t.contains("samples hidden: S"),
        "the log says samples are hidden:\n{t}"
    );
    assert!(log_rows(&t).iter().all(|l| !l.contains("type: sample")));
    s.send("/comm:pwmark\r");
    s.wait_for(
        "the marker's exec and exit, 5 s later",
        Duration::from_secs(10),
        |t| {
            let rows = log_rows(t);
            t.contains("filter: comm:pwmark")
                && rows
                    .iter()
                    .any(|l| l.contains("type: comm") && l.contains("pwmark"))
                && rows.iter().any(|l| l.contains("type: exit"))
        },
    );
    // S: the samples in the log too (the filter cleared first).
    s.send("/\x15\r");
    s.wait_for("the filter cleared", Duration::from_secs(5), |t| {
        !t.contains("filter: comm:pwmark")
    });
    s.send("S");
    s.wait_for("samples in the log", Duration::from_secs(5), |t| {
        log_rows(t).iter().any(|l| l.contains("type: sample"))
    });
    s.quit_ok();
}

#[test]
fn an_exec_shows_its_command_line_in_the_task_stream() {
    require_perf!();
    let dir = tempfile::tempdir().expect("tempdir");
    let link = link_as(dir.path(), "pwtuiargv", "sh");
    let script = format!(
        "while :; do {} -c 'sleep 0.5; :' hello-args; done",
        link.to_str().unwrap()
    );
    let mut s = Screen::spawn_at(&["-e", "dummy", "--", "sh", "-c", &script], 40, 200);
    s.wait_for(
        "the exec row with its arguments",
        Duration::from_secs(20),
        |t| {
            t.lines()
                .any(|l| l.contains("exec") && l.contains("/pwtuiargv -c sleep 0.5; :"))
        },
    );
    s.quit_ok();
}

#[test]
fn two_scripts_panes_are_both_visible_on_160x50() {
    require_perf!();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut args: Vec<String> = vec!["-e".into(), "dummy".into()];
    for name in ["first", "second"] {
        let script = dir.path().join(format!("{name}.py"));
        std::fs::write(
            &script,
            format!(
                "def on_tick():\n    return ['{name}-line-1', '{name}-line-2']\n\
                 def trace_begin():\n    print('{name}-printed')\n"
            ),
        )
        .expect("write script");
        args.extend(["--script".into(), script.to_str().unwrap().into()]);
    }
    args.extend(["--".into(), "sleep".into(), "30".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut s = Screen::spawn_at(&args, 50, 160);
    s.wait_for("both script panes", Duration::from_secs(20), |t| {
        [
            "Script: first.py",
            "first-line-2",
            "first-printed",
            "Script: second.py",
            "second-line-2",
            "second-printed",
        ]
        .iter()
        .all(|w| t.contains(w))
    });
    s.quit_ok();
}

#[test]
fn t_shows_the_process_tree_and_enter_narrows_to_a_process_and_its_children() {
    require_perf!();
    let dir = tempfile::tempdir().expect("tempdir");
    let parent = link_as(dir.path(), "pwtparent", "sh");
    let child = link_as(dir.path(), "pwtchild", "sleep");
    // A child that lives through the walk below (one of 30 s could end, on a loaded machine,
    // before the walk reached its parent, and the row under the parent was another).
    let body = format!(
        "while :; do {} 300; done; :",
        child.to_str().expect("utf-8 temp path")
    );
    let args = ["-e", "dummy", "--", parent.to_str().unwrap(), "-c", &body];
    let mut s = Screen::spawn_at(&args, 60, 200);
    s.wait_for("the child's exec", Duration::from_secs(20), |t| {
        t.lines()
            .any(|l| l.contains("exec") && l.contains("pwtchild 300"))
    });
    // The parent's row (its command line, or its name if that could not be read), not
    // perfwatch's (whose command line names it too).
    let is_parent = |l: &str| l.contains("pwtparent") && !l.contains("perfwatch");
    s.send("t");
    s.wait_for("the tree", Duration::from_secs(10), |t| {
        t.contains("Process tree (")
    });
    // Move the selection (reverse video) down the tree, which scrolls with it, to the
    // parent's row (where the test runs, the tree may be longer than the pane). Each key
    // is sent only once the previous one has been drawn: a key sent ahead of the screen
    // would overshoot on a loaded machine.
    let selected = |s: &Screen| -> Option<(usize, String)> {
        let screen = s.parser.screen();
        let text = screen.contents();
        let lines: Vec<&str> = text.lines().collect();
        let top = lines.iter().position(|l| l.contains("Process tree ("))?;
        (top + 1..lines.len())
            .take_while(|&row| !lines[row].starts_with('└'))
            .find(|&row| screen.cell(row as u16, 1).is_some_and(|c| c.inverse()))
            .map(|row| (row, lines[row].to_string()))
    };
    // The selected process: the pid in the row's first column.
    let pid = |row: &Option<(usize, String)>| {
        row.as_ref()
            .and_then(|(_, l)| l.trim_start_matches('│').split_whitespace().next())
            .map(str::to_string)
    };
    // Send `key` and wait (at most `limit`) until the selection has moved: the row then.
    let try_step = |s: &mut Screen, key: &str, limit: Duration| -> Option<(usize, String)> {
        let before = pid(&selected(s));
        s.send(key);
        let deadline = Instant::now() + limit;
        loop {
            s.pump(Duration::from_millis(50));
            let now = selected(s);
            let moved = pid(&now) != before;
            if let Some(row) = now.filter(|_| moved) {
                return Some(row);
            }
            if Instant::now() >= deadline {
                return None;
            }
        }
    };
    let step = |s: &mut Screen, key: &str| -> (usize, String) {
        try_step(s, key, Duration::from_secs(10))
            .unwrap_or_else(|| panic!("the selection did not move on {key:?}:\n{}", s.text()))
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while selected(&s).is_none() {
        assert!(Instant::now() < deadline, "nothing selected:\n{}", s.text());
        s.pump(Duration::from_millis(50));
    }
    // The tree holds every process of the machine, hundreds where other builds run: a page
    // at a time (PageDown) while the parent's row is not in the pane, then a row at a time
    // towards it, so that the walk does not take a key (and a redraw) per process.
    let parent_row = |s: &Screen| -> Option<usize> {
        let text = s.text();
        let lines: Vec<&str> = text.lines().collect();
        let top = lines.iter().position(|l| l.contains("Process tree ("))?;
        (top + 1..lines.len())
            .take_while(|&row| !lines[row].starts_with('└'))
            .find(|&row| is_parent(lines[row]))
    };
    let mut presses = 0;
    while !selected(&s).is_some_and(|(_, l)| is_parent(&l)) {
        assert!(presses < 400, "never selected the parent:\n{}", s.text());
        let key = match (parent_row(&s), selected(&s)) {
            (Some(p), Some((r, _))) if p < r => "k",
            (Some(_), _) => "j",
            (None, _) => "\x1b[6~",
        };
        presses += 1;
        if key != "\x1b[6~" {
            step(&mut s, key);
            continue;
        }
        // A page down that does not move is the tree's end: the parent's row went above the
        // pane while the walk passed it (other processes came and went around it on a
        // busy machine, and the rows moved). Back to the top, and down again.
        if try_step(&mut s, key, Duration::from_secs(10)).is_none() {
            step(&mut s, "g");
        }
    }
    // The next row down is its child, drawn under it.
    let (row, line) = step(&mut s, "j");
    let text = s.text();
    let above = text.lines().nth(row - 1).unwrap_or_default();
    assert!(
        line.contains("└─ ") && line.contains("pwtchild 300") && is_parent(above),
        "the child under its parent:\n{text}"
    );
    let (_, back) = step(&mut s, "k");
    assert!(is_parent(&back), "k went back to the parent:\n{}", s.text());
    s.send("\r");
    s.wait_for("the views narrowed", Duration::from_secs(10), |t| {
        t.contains("Event log of ") && t.contains("pwtparent (+children)")
    });
    let t = s.text();
    let rows = log_rows(&t);
    assert!(!rows.is_empty(), "the parent's records:\n{t}");
    s.send("\x1b");
    s.wait_for("the narrowing gone", Duration::from_secs(5), |t| {
        !t.contains("(+children)")
    });
    s.quit_ok();
}

#[test]
fn top_tasks_name_each_process_cgroup_where_there_is_room() {
    require_perf!();
    let (_dir, mut s) = hot_on(&[], 45, 220);
    // Every Linux has /proc/PID/cgroup; its path starts with '/'.
    s.wait_for(
        "pwhot in Top tasks with a cgroup column",
        Duration::from_secs(20),
        |t| {
            t.lines()
                .any(|l| l.contains("share") && l.contains("cgroup"))
                && t.lines().any(|l| l.contains("pwhot ") && l.contains("% /"))
        },
    );
    s.quit_ok();
}

/// A TUI run that ends by itself (the command exits) while a script is far behind (some 600
/// events at 5 ms each): the footer says how far the script is, and trace_end() reports every
/// record the run had, with nothing dropped.
#[test]
fn a_slow_script_gets_every_event_when_a_tui_run_ends_by_itself() {
    let _tracefs = require_tracefs!();
    if !cfg!(feature = "python") {
        skip!("built without the python feature");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("slow.py");
    std::fs::write(
        &script,
        "import time\nn = 0\ndef on_event(event):\n    global n\n    n += 1\n    time.sleep(0.005)\n\
         def trace_end():\n    print(f'saw {n} events')\n",
    )
    .expect("script");
    let path = script.to_str().expect("utf-8");
    let mut s = Screen::spawn(&[
        "-e",
        "raw_syscalls:sys_enter",
        "--script",
        path,
        "--",
        "dd",
        "if=/dev/zero",
        "of=/dev/null",
        "bs=1",
        "count=300",
        "status=none",
    ]);
    s.wait_for(
        "the script's progress in the footer",
        Duration::from_secs(30),
        |t| t.contains("events handed over"),
    );
    let status = exit_status(&mut s, "the natural end");
    assert!(status.success(), "exit status {status:?}");
    assert_restored(&s, "the natural end");
    let raw = String::from_utf8_lossy(&s.raw);
    let after = &raw[raw.rfind("\x1b[?1049l").expect("left")..];
    let number_after = |what: &str| -> u64 {
        after
            .split(what)
            .nth(1)
            .and_then(|r| r.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no '{what}' after the TUI: {after}"))
    };
    let saw = number_after("[slow.py] saw ");
    // The summary's first line: other "perfwatch: " lines (a binary without symbols, say)
    // may come before it, in an order that depends on timing.
    let records = after
        .lines()
        .find_map(|l| {
            let (n, _) = l
                .trim()
                .strip_prefix("perfwatch: ")?
                .split_once(" records in ")?;
            n.parse::<u64>().ok()
        })
        .unwrap_or_else(|| panic!("no summary after the TUI: {after}"));
    assert!(records > 300, "{after}");
    assert_eq!(saw, records, "{after}");
    assert!(after.contains("dropped by perfwatch: 0"), "{after}");
}

/// `perf record -e cpu-clock -g` of the hot program for 3 s, into `dir/replay.data`.
fn hot_recording(dir: &std::path::Path) -> std::path::PathBuf {
    let prog = hot_program(dir);
    let data = dir.join("replay.data");
    let out = std::process::Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock", "-F", "999", "-g", "-o"])
        .arg(&data)
        .args(["--", "timeout", "3"])
        .arg(&prog)
        .output_in_time()
        .expect("perf record");
    assert!(
        data.exists(),
        "perf record: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    data
}

/// The replay's position bar: (position, end) in seconds from the first sample.
fn replay_position(screen: &str) -> Option<(f64, Option<f64>)> {
    let line = screen.lines().find(|l| l.contains(" replay: "))?;
    let mut it = line.split('│').nth(1)?.split(" s / ");
    let pos = it.next()?.trim().parse().ok()?;
    let end = it.next()?.split(" s").next()?.trim().parse().ok();
    Some((pos, end))
}

#[test]
fn a_recording_replays_on_its_own_clock_pauses_jumps_and_quits_cleanly() {
    require_perf!();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = hot_recording(dir.path());
    let mut s = Screen::spawn_at(&["-i", data.to_str().unwrap()], 45, 160);
    // The header says what the file says about itself; the replay plays at 1x.
    s.wait_for("the replay playing", Duration::from_secs(20), |t| {
        t.contains("replay: PLAYING 1x")
            && t.contains("recording ")
            && t.contains(" host ")
            && t.contains("recorded with: ")
            && replay_position(t).is_some_and(|(p, _)| p > 0.0)
    });
    let (first, end) = replay_position(&s.text()).unwrap();
    let end = end.expect("the span from the file's header");
    assert!((2.0..=4.0).contains(&end), "a 3 s recording: {end}");
    s.wait_for("the position bar moving", Duration::from_secs(5), |t| {
        replay_position(t).is_some_and(|(p, _)| p > first)
    });
    // Space pauses; `{` goes back to the start (the file read again), still paused.
    s.send(" ");
    s.wait_for("paused", Duration::from_secs(5), |t| {
        t.contains("replay: PAUSED") && replay_position(t).is_some_and(|(p, _)| p > 0.0)
    });
    s.send("{");
    s.wait_for("paused at the start", Duration::from_secs(10), |t| {
        t.contains("replay: PAUSED") && replay_position(t).is_some_and(|(p, _)| p == 0.0)
    });
    s.idle(Duration::from_millis(1500));
    let screen = s.text();
    assert_eq!(
        replay_position(&screen).map(|p| p.0),
        Some(0.0),
        "paused: the position stays\n{screen}"
    );
    // The status bar says what the file says about itself, and the counters as live.
    let about = screen
        .lines()
        .find(|l| l.starts_with(" host "))
        .unwrap_or_else(|| panic!("no row about the recording:\n{screen}"));
    for what in [
        ", Linux ",
        ", perf ",
        " CPUs, events cpu-clock",
        "; recorded with: ",
    ] {
        assert!(about.contains(what), "{what} in {about}");
    }
    assert!(
        screen.contains("lost 0 lost samples 0 dropped 0"),
        "{screen}"
    );
    // A paused replay's screen but for what differs from run to run: the status rows that
    // count or name this machine, the panes' rows; digits masked (a run of them is one #),
    // a run of border dashes or of the bar's dots one (a title a digit longer has a dash less),
    // the temporary directory named.
    let tmp = dir.path().display().to_string();
    let masked: String = screen
        .lines()
        .filter(|l| l.starts_with(" perfwatch ") || l.contains(" replay: ") || l.starts_with('┌'))
        .chain(
            screen
                .lines()
                .filter(|l| l.starts_with(" q  quit "))
                .map(|l| l.split("  focus").next().unwrap_or(l)),
        )
        .map(|l| {
            let mut out = String::new();
            for c in l.replace(&tmp, "<dir>").trim_end().chars() {
                let c = if c.is_ascii_digit() { '#' } else { c };
                if !(matches!(c, '#' | '─' | '·') && out.ends_with(c)) {
                    out.push(c);
                }
            }
            out + "\n"
        })
        .collect();
    insta::assert_snapshot!(masked);
    // `>` while paused: 10x, still paused; space: on at 10x to the end, where the hot
    // function leads Top symbols.
    s.send(">");
    s.wait_for("10x, paused", Duration::from_secs(5), |t| {
        t.contains("replay: PAUSED (10x on space)")
    });
    let hot = |t: &str| {
        t.lines()
            .any(|l| l.contains("pwhot_spin") && l.contains("pwhot "))
    };
    s.send(" ");
    s.wait_for("the end at 10x", Duration::from_secs(20), |t| {
        t.contains("replay: END") && hot(t)
    });
    // `<` back to 1x, `[`: 10 s back from a 3 s end is the start (the file read again).
    s.send("<[");
    s.wait_for("back at the start, at 1x", Duration::from_secs(10), |t| {
        t.contains("replay: PLAYING 1x") && replay_position(t).is_some_and(|(p, _)| p < 1.0)
    });
    // `}`: the end, at once.
    s.send("}");
    s.wait_for("the end again", Duration::from_secs(20), |t| {
        t.contains("replay: END") && hot(t)
    });
    s.quit_restored("q after a replay");
}

#[test]
fn a_piped_recording_refuses_jumps_back_in_the_status_bar() {
    require_perf!();
    let dir = tempfile::tempdir().expect("tempdir");
    let data = hot_recording(dir.path());
    // perf inject writes the file in perf's pipe format.
    let mut cmd = CommandBuilder::new("sh");
    cmd.args([
        "-c",
        &format!(
            "perf inject -i '{}' -o - | '{}' -i -",
            data.display(),
            env!("CARGO_BIN_EXE_perfwatch")
        ),
    ]);
    cmd.env("TERM", "xterm-256color");
    let mut s = Screen::spawn_sized(cmd, 45, 160);
    s.wait_for("the replay of the pipe", Duration::from_secs(20), |t| {
        replay_position(t).is_some_and(|(p, _)| p > 0.5)
    });
    s.send("[");
    s.wait_for("the refusal", Duration::from_secs(5), |t| {
        t.contains("a pipe (-i -) cannot be read again")
    });
    s.send("q");
    assert!(exit_status(&mut s, "q").success());
    assert!(!s.parser.screen().alternate_screen());
}

/// A pty running a command: its child, the master (and its writer), and what the master
/// reads, in chunks, from a thread of its own. The tui group's screens stand on it.
pub(crate) struct Pty {
    pub child: Box<dyn Child + Send + Sync>,
    pub writer: Box<dyn Write + Send>,
    pub rx: Receiver<Vec<u8>>,
    pub master: Box<dyn portable_pty::MasterPty + Send>,
}

impl Pty {
    /// `cmd` on a new `cols`×`rows` pty.
    pub(crate) fn open(cmd: CommandBuilder, rows: u16, cols: u16) -> Pty {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let child = pair.slave.spawn_command(cmd).expect("spawn perfwatch");
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().expect("reader");
        let writer = pair.master.take_writer().expect("writer");
        let (tx, rx) = unbounded();
        std::thread::spawn(move || {
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
        Pty {
            child,
            writer,
            rx,
            master: pair.master,
        }
    }
}
