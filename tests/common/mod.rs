//! Shared helpers for the integration tests.
#![allow(dead_code)]

use std::sync::OnceLock;
use std::sync::{Arc, Mutex};

mod tools;
#[allow(unused_imports)]
pub use tools::*;

/// True under `CI=true`: there, a test that cannot run for lack of privilege fails instead
/// of skipping, because CI runs as root and must exercise the real kernel.
pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Say that `test` skips, and why, where a plain `cargo test` shows it. libtest captures what
/// `eprintln!` prints (and shows it only for a failing test), so this writes to the process's
/// real stderr, in one write so that it is not cut by other tests' output.
pub fn skip(test: &str, why: &str) {
    say(&format!("SKIPPED {test}: {why}"));
}

/// One line on the process's real stderr, past libtest's capture, on a line of its own.
pub fn say(line: &str) {
    use std::io::Write;
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("\n{line}\n").as_bytes());
}

/// `refused` (e.g. "perf_event_open refused: ...") is why `test` cannot run: a failure under
/// `CI=true`, else a visible skip (the caller then returns).
pub fn refuse(test: &str, refused: &str) {
    assert!(
        !ci(),
        "{test}: {refused}; under CI=true this is a failure (CI must run every test, as root)"
    );
    skip(test, refused);
}

/// The name of the test (or function) a macro is expanded in, as libtest prints it.
#[macro_export]
macro_rules! test_name {
    () => {{
        fn f() {}
        let full = std::any::type_name_of_val(&f);
        let full = full.strip_suffix("::f").unwrap_or(full);
        // Drop the test crate's own name: `cli::a_test` is listed as `a_test`.
        full.split_once("::").map_or(full, |(_, rest)| rest)
    }};
}

/// Skip the calling test (return from it) with a visible message saying why. For what the
/// machine lacks (a second CPU, a tool, a hardware PMU); for missing privileges use
/// [`require_perf!`] or [`require_root!`], which fail under `CI=true`.
#[macro_export]
macro_rules! skip {
    ($($why:tt)+) => {{
        $crate::common::skip($crate::test_name!(), &format!($($why)+));
        return;
    }};
}

/// Open (disabled) and close at once a system-wide event of `type_`/`config` on CPU 0: the
/// error when the kernel refuses it.
pub fn try_open(type_: u32, config: u64) -> std::io::Result<()> {
    let mut attr = perf_event_open_sys::bindings::perf_event_attr {
        type_,
        size: std::mem::size_of::<perf_event_open_sys::bindings::perf_event_attr>() as u32,
        config,
        ..Default::default()
    };
    attr.set_disabled(1);
    // SAFETY: a valid attr; the fd is closed right away.
    let fd = unsafe { perf_event_open_sys::perf_event_open(&mut attr, -1, 0, -1, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is ours.
    unsafe { libc::close(fd) };
    Ok(())
}

/// True when the machine has a hardware counter for `config` (PERF_COUNT_HW_*).
pub fn has_hardware(config: u32) -> bool {
    try_open(
        perf_event_open_sys::bindings::PERF_TYPE_HARDWARE,
        config as u64,
    )
    .is_ok()
}

/// Why this process may not open system-wide perf events, if it may not.
pub fn perf_refusal() -> Option<&'static str> {
    static REFUSAL: OnceLock<Option<String>> = OnceLock::new();
    REFUSAL
        .get_or_init(|| {
            use perf_event_open_sys::bindings as sys;
            try_open(sys::PERF_TYPE_SOFTWARE, sys::PERF_COUNT_SW_DUMMY as u64)
                .err()
                .map(|e| {
                    format!(
                        "perf_event_open refused ({e}); run as root or with \
                         kernel.perf_event_paranoid <= 0 to run this test"
                    )
                })
        })
        .as_deref()
}

/// True when this process may open system-wide perf events. Under `CI=true` a refusal is a
/// failure. Prints nothing: tests that need perf use [`require_perf!`], which says it skips.
pub fn perf_allowed() -> bool {
    match perf_refusal() {
        None => true,
        Some(why) => {
            assert!(
                !ci(),
                "CI=true but {why}: CI must run these tests for real, as root"
            );
            false
        }
    }
}

/// The effective uid of the tests.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// True when running as root (uid 0).
pub fn is_root() -> bool {
    euid() == 0
}

/// Skip the calling test, visibly, unless perf events may be opened; under `CI=true` a
/// refusal is a failure.
#[macro_export]
macro_rules! require_perf {
    () => {
        if let Some(why) = $crate::common::perf_refusal() {
            $crate::common::refuse($crate::test_name!(), why);
            return;
        }
    };
}

/// Skip the calling test, visibly, unless it runs as root; under `CI=true` (which runs as
/// root) not being root is a failure.
#[macro_export]
macro_rules! require_root {
    ($what:expr) => {
        if !$crate::common::is_root() {
            $crate::common::refuse(
                $crate::test_name!(),
                &format!(
                    "needs root ({}), running as uid {}",
                    $what,
                    $crate::common::euid()
                ),
            );
            return;
        }
    };
}

/// Where perfwatch looks for tracepoints first.
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// tracefs, mounted at [`TRACEFS`] for as long as a guard lives. When it was not mounted, the
/// first guard mounts it and the last one of this test process to drop unmounts it, also when
/// the test fails (the guard drops while the panic unwinds): the host is left as it was found.
pub struct Tracefs(());

/// Users of tracefs in this process, and whether this process mounted it.
static TRACEFS_USERS: std::sync::Mutex<(usize, bool)> = std::sync::Mutex::new((0, false));

fn tracefs_mounted() -> bool {
    std::fs::read_to_string("/proc/self/mounts").is_ok_and(|m| {
        m.lines()
            .any(|l| l.split(' ').nth(1) == Some(TRACEFS) && l.split(' ').nth(2) == Some("tracefs"))
    })
}

/// tracefs at [`TRACEFS`], mounting it if needed (root only); `Err` says why not.
pub fn tracefs() -> Result<Tracefs, String> {
    let mut users = TRACEFS_USERS.lock().unwrap_or_else(|e| e.into_inner());
    if users.0 == 0 && !tracefs_mounted() {
        let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
        let (src, dir, fstype) = (c("nodev"), c(TRACEFS), c("tracefs"));
        // SAFETY: valid NUL-terminated strings; no data argument.
        let r = unsafe {
            libc::mount(
                src.as_ptr(),
                dir.as_ptr(),
                fstype.as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        if r != 0 {
            return Err(format!(
                "tracefs is not mounted at {TRACEFS} and mounting it failed: {}",
                std::io::Error::last_os_error()
            ));
        }
        users.1 = true;
    }
    users.0 += 1;
    let guard = Tracefs(());
    if !std::path::Path::new(TRACEFS).join("events").is_dir() {
        return Err(format!("tracefs at {TRACEFS} has no events directory"));
    }
    Ok(guard)
}

/// tracefs mounted for the calling test (see [`tracefs`]), or return from it: a failure under
/// `CI=true`, else a visible skip. Needs perf events too, as [`require_perf!`].
#[macro_export]
macro_rules! require_tracefs {
    () => {{
        if let Some(why) = $crate::common::perf_refusal() {
            $crate::common::refuse($crate::test_name!(), why);
            return;
        }
        match $crate::common::tracefs() {
            Ok(guard) => guard,
            Err(why) => {
                $crate::common::refuse($crate::test_name!(), &why);
                return;
            }
        }
    }};
}

impl Drop for Tracefs {
    fn drop(&mut self) {
        let mut users = TRACEFS_USERS.lock().unwrap_or_else(|e| e.into_inner());
        users.0 -= 1;
        if users.0 == 0 && users.1 {
            users.1 = false;
            let dir = std::ffi::CString::new(TRACEFS).expect("no NUL");
            // SAFETY: a valid path. A busy mount (a perfwatch still running) is detached
            // lazily: it disappears from the namespace now and goes once unused.
            let r = unsafe { libc::umount2(dir.as_ptr(), 0) };
            if r != 0 {
                // SAFETY: as above.
                unsafe { libc::umount2(dir.as_ptr(), libc::MNT_DETACH) };
            }
        }
    }
}

/// How a run of the binary ended: its exit status (-1 for a signal) and its output as text.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Asserts that the run exited with `code`; shows its stderr if not.
    #[track_caller]
    pub fn exited(&self, code: i32) -> &Self {
        assert_eq!(self.code, code, "exit status; stderr:\n{}", self.stderr);
        self
    }

    /// Asserts that stderr says each of `said`; shows what is missing and stderr if not.
    #[track_caller]
    pub fn said(&self, said: &[&str]) -> &Self {
        for s in said {
            assert!(
                self.stderr.contains(s),
                "stderr does not say {s:?}:\n{}",
                self.stderr
            );
        }
        self
    }

    /// Asserts that stderr says none of `unsaid`.
    #[track_caller]
    pub fn never_said(&self, unsaid: &[&str]) -> &Self {
        for s in unsaid {
            assert!(
                !self.stderr.contains(s),
                "stderr says {s:?}:\n{}",
                self.stderr
            );
        }
        self
    }

    /// stdout as JSON lines (`--json`); a line that is not JSON fails the test.
    #[track_caller]
    pub fn json(&self) -> Vec<serde_json::Value> {
        json_lines(&self.stdout)
    }
}

/// Each line of `text` as JSON; a line that is not JSON fails the test.
#[track_caller]
pub fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("invalid JSON {l:?}: {e}")))
        .collect()
}

impl From<std::process::Output> for Run {
    fn from(o: std::process::Output) -> Run {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

/// Run `c` to its end, within [`deadline`].
#[track_caller]
pub fn run(c: &mut std::process::Command) -> Run {
    c.output_in_time().unwrap().into()
}

/// perfwatch with `args`, run to its end.
pub fn run_args(args: &[&str]) -> Run {
    run(perfwatch().args(args))
}

/// The binary under test, its stdin from /dev/null (a test never waits on a terminal), the
/// signals tests send at their default dispositions ([`default_signals`]).
pub fn perfwatch() -> std::process::Command {
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("perfwatch"));
    c.stdin(std::process::Stdio::null());
    default_signals(&mut c);
    c
}

/// The signals tests send to their children, and that a test runner may have started with
/// ignored or blocked (`nohup cargo test &` ignores SIGHUP, a background job of a shell script
/// SIGINT and SIGQUIT; some CI runners block others).
pub const SENT_SIGNALS: [i32; 6] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGPIPE,
];

/// Start `c`'s child with [`SENT_SIGNALS`] at their default dispositions and nothing blocked,
/// whatever `cargo test` itself inherited: a test that signals a child sets what the child
/// starts with, rather than depending on how the tests were run. A test that wants a signal
/// ignored at start adds its own `pre_exec` after this one (they run in order).
pub fn default_signals(c: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec and calls only signal(2),
    // sigemptyset(3) and sigprocmask(2), which are async-signal-safe; it allocates nothing
    // and takes no lock.
    unsafe {
        c.pre_exec(|| {
            for sig in SENT_SIGNALS {
                libc::signal(sig, libc::SIG_DFL);
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            Ok(())
        })
    }
}

/// How long a test waits for any one child: past it the child is killed and the test fails
/// with what the child printed so far. Generous (a debug build beside four other builds on
/// two cores), but a test never waits forever. `PERFWATCH_TEST_DEADLINE` (seconds) changes it.
pub fn deadline() -> std::time::Duration {
    let secs = std::env::var("PERFWATCH_TEST_DEADLINE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    std::time::Duration::from_secs(secs)
}

/// Waiting on a child process, within [`deadline`]: the test fails (and the child is killed)
/// instead of hanging. The `_in_time` methods replace `output`, `status`, `wait` and
/// `wait_with_output`; `Err` only when the child could not be started.
pub trait InTime {
    /// Run to the end, stdout and stderr captured (stdin from /dev/null unless the caller
    /// gives a child of its own).
    fn output_in_time(self) -> std::io::Result<std::process::Output>;
    /// Run to the end, stdout and stderr as configured.
    fn status_in_time(self) -> std::io::Result<std::process::ExitStatus>;
}

impl InTime for &mut std::process::Command {
    fn output_in_time(self) -> std::io::Result<std::process::Output> {
        use std::process::Stdio;
        let child = self
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        Ok(finish(child, deadline()))
    }
    fn status_in_time(self) -> std::io::Result<std::process::ExitStatus> {
        let mut child = self.spawn()?;
        Ok(wait_in_time(&mut child))
    }
}

impl InTime for std::process::Child {
    fn output_in_time(self) -> std::io::Result<std::process::Output> {
        Ok(finish(self, deadline()))
    }
    fn status_in_time(mut self) -> std::io::Result<std::process::ExitStatus> {
        Ok(wait_in_time(&mut self))
    }
}

/// Wait for `child` to exit, within [`deadline`]; past it, kill it and fail the test.
#[track_caller]
pub fn wait_in_time(child: &mut std::process::Child) -> std::process::ExitStatus {
    let limit = deadline();
    match wait_until(child, std::time::Instant::now() + limit) {
        Some(status) => status,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child {} still running after {limit:?}: killed", child.id());
        }
    }
}

/// The child's exit status once it exits before `until`; `None` if it is still running then.
pub fn wait_until(
    child: &mut std::process::Child,
    until: std::time::Instant,
) -> Option<std::process::ExitStatus> {
    loop {
        if let Some(status) = child.try_wait().expect("waitpid on our own child") {
            return Some(status);
        }
        if std::time::Instant::now() >= until {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A child's piped stdout and stderr, read on threads of their own from the moment they are
/// taken, so that a child writing more than a pipe holds never waits for the test (a child
/// that is made to wait may give up writing, as perfwatch does 2 s after its end).
pub struct Drains {
    out: (Arc<Mutex<Vec<u8>>>, std::sync::mpsc::Receiver<()>),
    err: (Arc<Mutex<Vec<u8>>>, std::sync::mpsc::Receiver<()>),
}

impl Drains {
    /// Start reading `child`'s piped stdout and stderr (those it has).
    pub fn start(child: &mut std::process::Child) -> Drains {
        use std::io::Read;
        fn drain(
            from: Option<impl Read + Send + 'static>,
        ) -> (Arc<Mutex<Vec<u8>>>, std::sync::mpsc::Receiver<()>) {
            let buf = Arc::new(Mutex::new(Vec::new()));
            let (done, ended) = std::sync::mpsc::channel();
            let into = Arc::clone(&buf);
            match from {
                Some(mut from) => {
                    std::thread::spawn(move || {
                        let mut chunk = [0u8; 8192];
                        while let Ok(n) = from.read(&mut chunk) {
                            if n == 0 {
                                break;
                            }
                            into.lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .extend_from_slice(&chunk[..n]);
                        }
                        let _ = done.send(());
                    });
                }
                None => {
                    let _ = done.send(());
                }
            }
            (buf, ended)
        }
        Drains {
            out: drain(child.stdout.take()),
            err: drain(child.stderr.take()),
        }
    }

    /// `child`'s exit status and all it wrote, within `limit` (see [`finish`]).
    #[track_caller]
    fn finish(
        self,
        mut child: std::process::Child,
        limit: std::time::Duration,
    ) -> std::process::Output {
        let until = std::time::Instant::now() + limit;
        let status = wait_until(&mut child, until);
        let left = || until.saturating_duration_since(std::time::Instant::now());
        let closed = status.is_some()
            && self.out.1.recv_timeout(left()).is_ok()
            && self.err.1.recv_timeout(left()).is_ok();
        let take = |b: &Arc<Mutex<Vec<u8>>>| {
            std::mem::take(&mut *b.lock().unwrap_or_else(|e| e.into_inner()))
        };
        let (stdout, stderr) = (take(&self.out.0), take(&self.err.0));
        if !closed {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{} after {limit:?}: killed\n--- stdout so far:\n{}\n--- stderr so far:\n{}",
                match status {
                    None => format!("child {} still running", child.id()),
                    Some(s) => format!(
                        "child {} exited ({s}) but its output stayed open",
                        child.id()
                    ),
                },
                String::from_utf8_lossy(&stdout),
                String::from_utf8_lossy(&stderr)
            );
        }
        std::process::Output {
            status: status.expect("closed implies exited"),
            stdout,
            stderr,
        }
    }
}

/// Collect `child`'s piped stdout and stderr (those it has) and its exit status, within
/// `limit` for all three: past it, the child is killed and the test fails with the output so
/// far. A child that exited while something it started still holds its pipes open fails too,
/// rather than hang `wait_with_output`.
#[track_caller]
pub fn finish(mut child: std::process::Child, limit: std::time::Duration) -> std::process::Output {
    let drains = Drains::start(&mut child);
    drains.finish(child, limit)
}

/// A child whose piped output is read from the start (see [`Drains`]): a test may wait on
/// other things before it collects the output. Derefs to the child (its pid, `try_wait`,
/// [`wait_until_watching`]).
pub struct Drained {
    child: std::process::Child,
    drains: Drains,
}

impl Drained {
    /// Take over `child`, reading its piped output from now on.
    pub fn new(mut child: std::process::Child) -> Drained {
        let drains = Drains::start(&mut child);
        Drained { child, drains }
    }

    /// Its exit status and all it wrote, within [`deadline`].
    #[track_caller]
    pub fn output_in_time(self) -> std::io::Result<std::process::Output> {
        Ok(self.drains.finish(self.child, deadline()))
    }
}

impl std::ops::Deref for Drained {
    type Target = std::process::Child;
    fn deref(&self) -> &std::process::Child {
        &self.child
    }
}

impl std::ops::DerefMut for Drained {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        &mut self.child
    }
}

/// `spawn`, with the child's piped output read from the start: [`Drained`].
pub trait SpawnDrained {
    fn spawn_drained(&mut self) -> std::io::Result<Drained>;
}

impl SpawnDrained for std::process::Command {
    fn spawn_drained(&mut self) -> std::io::Result<Drained> {
        Ok(Drained::new(self.spawn()?))
    }
}

/// `perfwatch --plain -e dummy -- sh -c SHELL`: the task records of one shell command line.
pub fn plain_sh(shell: &str) -> std::process::Command {
    let mut c = perfwatch();
    c.args(["--plain", "-e", "dummy", "--", "sh", "-c", shell]);
    c
}

/// `perfwatch --plain -e dummy --script SCRIPT`, then `args`.
pub fn plain_script(script: &std::path::Path, args: &[&str]) -> std::process::Command {
    let mut c = perfwatch();
    c.args(["--plain", "-e", "dummy", "--script"])
        .arg(script)
        .args(args);
    c
}

/// The script `dir/name` with `body`, mode 0644.
pub fn script(dir: &std::path::Path, name: &str, body: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    p
}

/// The script `name` with `body`, in a temporary directory of its own (kept while the
/// returned guard lives).
pub fn temp_script(name: &str, body: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let s = script(d.path(), name, body);
    (d, s)
}

/// perfwatch with `args`, its stdout and stderr each `io()`.
fn with_io(args: &[&str], io: fn() -> std::process::Stdio) -> std::process::Command {
    let mut c = perfwatch();
    c.args(args).stdout(io()).stderr(io());
    c
}

/// perfwatch with `args`, started with its stdout and stderr piped and read from the start
/// (collected by `output_in_time`).
pub fn spawn_piped(args: &[&str]) -> Drained {
    with_io(args, std::process::Stdio::piped)
        .spawn_drained()
        .unwrap()
}

/// The exit status of perfwatch with `args`, its output thrown away (within [`deadline`]).
#[track_caller]
pub fn status_of(args: &[&str]) -> std::process::ExitStatus {
    with_io(args, std::process::Stdio::null)
        .status_in_time()
        .unwrap()
}

/// The perf event file descriptors `pid` holds.
fn perf_event_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|l| l.as_os_str() == "anon_inode:[perf_event]")
                .count()
        })
        .unwrap_or(0)
}

/// Returns once the perfwatch `child` has opened its events: it holds perf event file
/// descriptors and has opened no more for 200 ms (it enables them right after opening the
/// last). Returns at once if it exits first; fails the test after 30 s.
///
/// A test that makes a target act only after this never races perfwatch's start, however
/// loaded the machine (a fixed sleep did, under CI's parallel tests).
pub fn wait_until_watching(child: &mut std::process::Child) {
    let pid = child.id();
    wait_until_pid_watching(pid, || {
        child
            .try_wait()
            .expect("waitpid on our own child")
            .is_some()
    });
}

/// [`wait_until_watching`] for a perfwatch that is not our child (started by a shell), by
/// its pid: returns at once once it is gone.
pub fn wait_until_pid_watching(pid: u32, mut exited: impl FnMut() -> bool) {
    let t0 = std::time::Instant::now();
    let (mut last, mut since) = (0, std::time::Instant::now());
    loop {
        if exited() || !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return;
        }
        let n = perf_event_fds(pid);
        if n != last {
            (last, since) = (n, std::time::Instant::now());
        } else if n > 0 && since.elapsed() >= std::time::Duration::from_millis(200) {
            return;
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(30),
            "perfwatch opened no events in 30 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The stop time perfwatch's summary says (`stopped at S.NNNNNNNNN s`), in ns of
/// CLOCK_MONOTONIC.
pub fn stop_time(err: &str) -> Option<u64> {
    let rest = err.split("stopped at ").nth(1)?;
    let (s, ns) = rest.split_whitespace().next()?.split_once('.')?;
    Some(s.parse::<u64>().ok()? * 1_000_000_000 + ns.parse::<u64>().ok()?)
}

/// One `--plain` sample line's pid, `sym` and `dso`.
pub fn plain_sample(line: &str) -> Option<(u32, String, String)> {
    let pid = line
        .split(", pid: ")
        .nth(1)?
        .split(',')
        .next()?
        .parse()
        .ok()?;
    let rest = line.split(", sym: ").nth(1)?;
    let (sym, rest) = rest.split_once(", dso: ")?;
    let (dso, _) = rest.split_once(", period: ")?;
    Some((pid, sym.to_string(), dso.to_string()))
}
