//! Helpers for the tests that build and watch workloads of their own: a C program compiled
//! here, a workload held stopped until its monitors watch, `perf` run to its end.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::InTime;

/// Can `tool` be run (`tool --version` starts and ends within the deadline)? For the tests
/// that skip, visibly, when a tool they compare with is missing.
pub fn installed(tool: &str) -> bool {
    Command::new(tool).arg("--version").output_in_time().is_ok()
}

/// `main -> outer -> middle -> hot`; `hot` spins (and calls `tick` once per call, so that it
/// is not a leaf function, which gcc builds without a frame even with frame pointers on).
/// `argv[1]`: how many calls of `outer` (100).
pub const CALL_PATH_C: &str = r#"
#include <stdlib.h>
volatile unsigned long sink;
__attribute__((noinline)) void tick(void) { sink++; }
__attribute__((noinline)) void hot(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) sink += i * i;
    tick();
}
__attribute__((noinline)) void middle(unsigned long n) { hot(n); sink++; }
__attribute__((noinline)) void outer(unsigned long n) { middle(n); sink++; }
int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 100;
    for (unsigned long i = 0; i < n; i++) outer(1000000);
    return 0;
}
"#;

/// [`CALL_PATH_C`]'s path from the hot function out, as the symbolizer names it.
pub const CALL_PATH: [&str; 4] = ["hot", "middle", "outer", "main"];

/// A FIFO at `path` (`mkfifo`); the test fails if it cannot be made.
#[track_caller]
pub fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status_in_time().unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
}

/// The C program `src`, written to `dir/NAME.c` and built as `dir/NAME` with `cc FLAGS`;
/// the test fails if it does not build.
#[track_caller]
pub fn cc(dir: &Path, name: &str, src: &str, flags: &[&str]) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let out = dir.join(name);
    let st = Command::new("cc")
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&c)
        .status_in_time()
        .expect("cc (a C compiler is needed: .ci/run installs one)");
    assert!(st.success(), "cc {flags:?} failed");
    out
}

/// `perf ARGS...` run to its end, which must succeed: its output.
#[track_caller]
pub fn perf_ok(args: &[&std::ffi::OsStr]) -> Output {
    let out = Command::new("perf")
        .args(args)
        .output_in_time()
        .expect("perf");
    assert!(
        out.status.success(),
        "perf {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A workload held stopped until [`Stopped::run`], so that its monitors watch it from its
/// first steps; killed if the test ends before it does.
pub struct Stopped {
    child: Child,
}

impl Stopped {
    /// `argv` started, and stopped (SIGSTOP) once `spawn` returns, which is after its exec:
    /// the monitors see no other program's mappings in it.
    pub fn after_exec(argv: &[&str]) -> Stopped {
        let child = Command::new(argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        // SAFETY: a plain kill(2) of our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGSTOP) };
        Stopped::once_stopped(child)
    }

    /// `sh` that stops itself and execs `argv` once continued: not one instruction of the
    /// workload runs before [`Stopped::run`].
    pub fn before_exec(argv: &[&str]) -> Stopped {
        let child = Command::new("sh")
            .args(["-c", "kill -STOP $$; exec \"$@\"", "sh"])
            .args(argv)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        Stopped::once_stopped(child)
    }

    /// `child`, once /proc says it is stopped (at most 10 s).
    fn once_stopped(child: Child) -> Stopped {
        let t0 = Instant::now();
        let stat = format!("/proc/{}/stat", child.id());
        loop {
            let s = std::fs::read_to_string(&stat).unwrap_or_default();
            // `pid (comm) STATE ...`: the state follows the last `)`.
            if s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('T')) {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the workload never stopped"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Stopped { child }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Let it run, and wait (at most `limit`) for it to end.
    pub fn run(&mut self, limit: Duration) {
        // SAFETY: a plain kill(2) of our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGCONT) };
        let t0 = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            if t0.elapsed() > limit {
                let _ = self.child.kill();
                panic!("the workload ran longer than {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Wait (at most 60 s) for a monitor to end by itself once its target is gone, SIGINT after
/// 30 s; its output, which must say it succeeded.
pub fn monitor_end(mut c: Child, what: &str) -> Output {
    let t0 = Instant::now();
    while c.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(30) {
            // SAFETY: a plain kill(2) of our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{what} did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = c.output_in_time().unwrap();
    assert!(out.status.success(), "{what} failed: {out:?}");
    out
}

/// One sample as `perf script -F ...,ip,sym,dso` prints it with its call chain: its first
/// line (the fields before `ip`), then its frames innermost first, each as (address, symbol,
/// binary) as perf wrote them.
pub struct ScriptSample {
    pub head: String,
    pub frames: Vec<(String, String, String)>,
}

/// `perf script -F FIELDS -i DATA`, which must succeed, split into its samples.
pub fn perf_script_samples(data: &Path, fields: &str) -> Vec<ScriptSample> {
    let out = Command::new("perf")
        .args(["script", "-F", fields, "-i"])
        .arg(data)
        .stderr(Stdio::null())
        .output_in_time()
        .unwrap();
    assert!(out.status.success(), "perf script failed");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut samples = Vec::new();
    for block in text.split("\n\n") {
        let mut lines = block.lines().filter(|l| !l.trim().is_empty());
        let Some(head) = lines.next() else { continue };
        let mut frames = Vec::new();
        for l in lines {
            let Some((addr, rest)) = l.trim().split_once(' ') else {
                continue;
            };
            let Some((sym, dso)) = rest.rsplit_once(" (") else {
                continue;
            };
            frames.push((
                addr.to_string(),
                sym.to_string(),
                dso.trim_end_matches(')').to_string(),
            ));
        }
        samples.push(ScriptSample {
            head: head.to_string(),
            frames,
        });
    }
    samples
}

/// `target` watched side by side by `perf record -q WATCH -p PID -o DIR/perf.data` and
/// `perfwatch PERFWATCH_ARGS WATCH -p PID` (its stdout into `perfwatch_out`), let run (at most
/// 120 s) once both watch, and both waited for to their end: the perf.data file and
/// perfwatch's stderr.
pub fn side_by_side(
    dir: &Path,
    mut target: Stopped,
    watch: &[&str],
    perfwatch_args: &[&str],
    perfwatch_out: &Path,
) -> (PathBuf, String) {
    let pid = target.pid().to_string();
    let data = dir.join("perf.data");
    // perf record opens its events disabled and turns them on when told through its control
    // fifo, answering `ack` once they are on: it is watching then, and its reading of the
    // target's /proc entries is behind it. (Its fds alone say neither: on a loaded machine
    // the workload could exec before perf had enabled anything, and perf then named the
    // exec'd program's samples after the shell, with no binary.)
    let mut perf = PerfRecord::start(dir, |c| {
        c.args(watch).args(["-p", &pid, "-o"]).arg(&data);
    });
    let mut pw = super::perfwatch()
        .args(perfwatch_args)
        .args(watch)
        .args(["-p", &pid])
        .stdout(std::fs::File::create(perfwatch_out).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    perf.enable();
    super::wait_until_watching(&mut pw);
    target.run(Duration::from_secs(120));
    monitor_end(perf.child, "perf record");
    let out = monitor_end(pw, "perfwatch");
    (data, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `perf record -q -D -1 --control fifo:CTL,ACK ...`: perf record with its events opened
/// disabled, until [`PerfRecord::enable`] turns them on. `enable` returns once perf has
/// answered `ack`, and perf answers only from its main loop, after it has read every
/// process in /proc (seconds with thousands of them on a loaded machine): from then on it
/// records. Its fds alone say neither.
pub struct PerfRecord {
    pub child: Child,
    ctl: PathBuf,
    ack: PathBuf,
}

impl PerfRecord {
    /// Start it, with its control fifos in `dir`; `args` adds what follows `-D -1 --control
    /// ...` (events, targets, `-o`). stdin and stdout null, stderr piped.
    #[track_caller]
    pub fn start(dir: &Path, args: impl FnOnce(&mut Command)) -> PerfRecord {
        let (ctl, ack) = (dir.join("perf.ctl"), dir.join("perf.ack"));
        for f in [&ctl, &ack] {
            mkfifo(f);
        }
        let control = format!("fifo:{},{}", ctl.display(), ack.display());
        let mut c = Command::new("perf");
        c.args(["record", "-q", "-D", "-1", "--control", &control]);
        args(&mut c);
        let child = c
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        PerfRecord { child, ctl, ack }
    }

    /// Turn its events on and wait (at most 60 s) until it says they are.
    #[track_caller]
    pub fn enable(&mut self) {
        perf_enable(&mut self.child, &self.ctl, &self.ack);
    }
}

/// Tell a `perf record -D -1 --control fifo:CTL,ACK` to enable its events and wait, with a
/// deadline, for its `ack`: from then on it records.
#[track_caller]
fn perf_enable(perf: &mut Child, ctl: &Path, ack: &Path) {
    use std::io::{Read, Write};
    use std::os::unix::fs::OpenOptionsExt;
    let t0 = Instant::now();
    let alive = |perf: &mut Child, what: &str| {
        assert!(
            perf.try_wait().unwrap().is_none(),
            "perf record ended before it {what}"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "perf record: no {what} in 60 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    // Opening a fifo without blocking: for writing, it fails until perf has it open.
    let mut w = loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(ctl)
        {
            Ok(f) => break f,
            Err(_) => alive(perf, "opened its control fifo"),
        }
    };
    w.write_all(b"enable\n").unwrap();
    let mut r = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(ack)
        .unwrap();
    let mut said = Vec::new();
    // perf writes `ack\n` and a NUL.
    while !said.windows(4).any(|w| w == b"ack\n") {
        let mut buf = [0u8; 16];
        match r.read(&mut buf) {
            Ok(n) if n > 0 => said.extend_from_slice(&buf[..n]),
            _ => alive(perf, "acknowledged 'enable'"),
        }
    }
}

/// A tmpfs of `size` bytes (mount(8)'s `size=`: `4k`) mounted at the new directory
/// `dir/tiny` for as long as this lives: a full disk, made to order. Root only; the test
/// fails if the mount does.
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    #[track_caller]
    pub fn mount(dir: &Path, size: &str) -> Tmpfs {
        let mnt = dir.join("tiny");
        std::fs::create_dir(&mnt).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "pwtiny"])
            .arg(&mnt)
            .status_in_time()
            .unwrap();
        assert!(mounted.success(), "mount tmpfs");
        Tmpfs(mnt)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status_in_time();
    }
}
