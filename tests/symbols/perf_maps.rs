//! Issue 31: the perf maps of JIT runtimes, read by root perfwatch from files a user
//! controls. Each test runs the real binary as root, with the JITs as an unprivileged user.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// An unprivileged uid for the monitored programs (no passwd entry needed).
const USER: u32 = 1001;

/// A JIT's code at a fixed address (so that a map written before it runs can name it): a
/// two-instruction loop in anonymous executable memory, ended by SIGPROF after one second of
/// its own CPU time (so that it takes as many samples on a loaded machine, where perfwatch
/// may read its map seconds after it started, as on an idle one), or by SIGALRM after a
/// minute.
const JIT_C: &str = r#"
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>
int main(void) {
    unsigned char *code = mmap((void *)0x10000000, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (code != (void *)0x10000000) return 1;
    code[0] = 0x90; code[1] = 0xeb; code[2] = 0xfd;   /* nop; jmp back to the nop */
    struct itimerval cpu = { { 0, 0 }, { 1, 0 } };
    setitimer(ITIMER_PROF, &cpu, 0);
    alarm(60);
    ((void (*)(void))code)();
    return 0;
}
"#;

/// A directory every user can search, outside `/tmp` (which the tests hide under a tmpfs of
/// the user's).
fn shared_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::Builder::new()
        .prefix("pw-perfmap")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// Compile `JIT_C` to `dir/name` (readable and executable by everyone).
fn jit(dir: &Path, name: &str) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, JIT_C).unwrap();
    let out = dir.join(name);
    let st = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success(), "cc failed");
    out
}

/// One `--plain` sample line's pid and `sym`.
fn plain_sample(line: &str) -> Option<(u32, String)> {
    common::plain_sample(line).map(|(pid, sym, _)| (pid, sym))
}

/// The pid of each command name, from the comm records of `--plain` output.
fn comms(text: &str) -> std::collections::HashMap<u32, String> {
    let mut comms = std::collections::HashMap::new();
    for line in text.lines().filter(|l| l.contains("{ type: comm,")) {
        let pid = line
            .split("{ type: comm, pid: ")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .and_then(|p| p.parse::<u32>().ok());
        let comm = line
            .split(", comm: ")
            .nth(1)
            .map(|c| c.trim_end_matches(" }"));
        if let (Some(pid), Some(comm)) = (pid, comm) {
            comms.insert(pid, comm.to_string());
        }
    }
    comms
}

/// Run perfwatch `--plain` over `sh -c script` (after `prefix`, a command that runs
/// perfwatch), killed after a minute at most; (stdout, stderr).
fn watch_in(prefix: &[&str], script: &str) -> (String, String) {
    let perfwatch = assert_cmd::cargo::cargo_bin("perfwatch");
    let mut argv: Vec<&std::ffi::OsStr> = prefix.iter().map(|a| a.as_ref()).collect();
    argv.push(perfwatch.as_os_str());
    for a in [
        "--plain",
        "-e",
        "cpu-clock",
        "-F",
        "2000",
        "--",
        "sh",
        "-c",
        script,
    ] {
        argv.push(a.as_ref());
    }
    let child = Command::new(argv[0])
        .args(&argv[1..])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let killer = std::thread::spawn(move || {
        if finished.recv_timeout(Duration::from_secs(60)).is_err() {
            // SAFETY: signalling the child this test started, which has not been reaped
            // (the test waits for it, and says so through `done` first).
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    });
    let out = child.wait_with_output().unwrap();
    let _ = done.send(());
    let _ = killer.join();
    assert!(
        out.status.success(),
        "{:?} ended with {:?}; its stderr:\n{}",
        argv[0],
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn watch(script: &str) -> (String, String) {
    watch_in(&[], script)
}

/// Issue 31: a user who makes a mount namespace of their own (`unshare -Urm`) and bind-mounts
/// a file they cannot read (or a root-owned one they can, or a procfs file) over their
/// `/tmp/perf-PID.map` does not get root perfwatch to read it: the map is opened as the
/// user, must be the user's own file, and never a kernel file. The user's own map still names
/// the user's code.
#[test]
fn a_perf_map_bind_mounted_in_a_users_namespace_is_opened_as_that_user() {
    require_root!("to run the JITs as another user with setpriv");
    require_perf!();
    let probe = Command::new("setpriv")
        .arg(format!("--reuid={USER}"))
        .arg(format!("--regid={USER}"))
        .args(["--clear-groups", "unshare", "-Urm", "true"])
        .stderr(Stdio::null())
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        common::refuse(
            test_name!(),
            "an unprivileged user cannot make a user namespace here (unshare -Urm)",
        );
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = shared_dir();
    let map = "10000000 10 root_secret_fn\n";
    let hidden = dir.path().join("secret600");
    std::fs::write(&hidden, map).unwrap();
    std::fs::set_permissions(&hidden, std::fs::Permissions::from_mode(0o600)).unwrap();
    let readable = dir.path().join("secret644");
    std::fs::write(&readable, map).unwrap();
    std::fs::set_permissions(&readable, std::fs::Permissions::from_mode(0o644)).unwrap();
    let jits = ["pwj_own", "pwj_600", "pwj_644", "pwj_proc"].map(|n| jit(dir.path(), n));
    let covers = [
        "echo '10000000 10 user_own_fn' > /tmp/perf-$$.map".to_string(),
        format!("mount --bind {} /tmp/perf-$$.map", hidden.display()),
        format!("mount --bind {} /tmp/perf-$$.map", readable.display()),
        "mount --bind /proc/version /tmp/perf-$$.map".to_string(),
    ];
    let mut script = String::new();
    for (j, cover) in jits.iter().zip(&covers) {
        let inner = format!(
            "mount -t tmpfs none /tmp && touch /tmp/perf-$$.map && {cover} && exec {}",
            j.display()
        );
        script.push_str(&format!(
            "setpriv --reuid={USER} --regid={USER} --clear-groups unshare -Urm sh -c \"{}\" & ",
            inner.replace('$', "\\$")
        ));
    }
    script.push_str("wait");
    let (text, errors) = watch(&script);
    let comms = comms(&text);
    let syms_of = |comm: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.contains("{ type: sample,"))
            .filter_map(plain_sample)
            .filter(|(pid, _)| comms.get(pid).is_some_and(|c| c == comm))
            .map(|(_, s)| s)
            .collect()
    };
    assert!(
        !text.contains("root_secret_fn") && !errors.contains("root_secret_fn"),
        "a root-only map named a user's code"
    );
    let own = syms_of("pwj_own");
    assert!(
        own.len() >= 50,
        "{} samples of the user's own JIT",
        own.len()
    );
    // Samples taken before perfwatch read the map (seconds on a loaded machine: it is read
    // on a loader thread, never waited for without bound) cannot be named; from the first
    // named one on, the map names the user's code.
    let is_named = |s: &String| s.starts_with("user_own_fn+0x");
    let first = own.iter().position(is_named).unwrap_or(own.len());
    let after = &own[first..];
    let named = after.iter().filter(|s| is_named(s)).count();
    assert!(
        named >= 50 && named * 10 >= after.len() * 9,
        "{named} of {} samples from the first named one named ({} before it): {:?}; \
         perfwatch said: {errors}",
        after.len(),
        first,
        &own[..own.len().min(10)]
    );
    for comm in ["pwj_600", "pwj_644", "pwj_proc"] {
        // Its loop's samples (the bulk of them) are unnamed; the rest are its start's, in
        // the kernel and ld.so.
        let syms = syms_of(comm);
        let unknown = syms.iter().filter(|s| *s == "[unknown]").count();
        assert!(
            unknown >= 50,
            "{unknown} unnamed samples of {comm}: {syms:?}"
        );
    }
    // Each refusal is said, as what it is.
    for said in [
        "Permission denied",
        "owned by uid 0, not by the process's user",
        "a kernel file on procfs",
    ] {
        assert!(errors.contains(said), "{said:?} not in {errors}");
    }
}

/// Issue 31: a user's JIT writes its perf map and exits; a root JIT that then gets the same
/// pid (made certain by a pid namespace of the test's own and `ns_last_pid`) is named by its
/// own map, never by the user's one that was read (and cached) for the pid before.
#[test]
fn a_reused_pid_is_never_named_by_the_perf_map_of_the_process_before() {
    require_root!("to run the first JIT as another user and to set ns_last_pid");
    require_perf!();
    let dir = shared_dir();
    let user_jit = jit(dir.path(), "pwj_user");
    let root_jit = jit(dir.path(), "pwj_root");
    const PID: u32 = 2000;
    // Each JIT is started until it gets the pid (perfwatch, inside the namespace too, may
    // take a pid between the write to ns_last_pid and the fork): one that does not exits 3
    // before it writes a map or runs.
    let script = format!(
        "run() {{ n=0; while [ $n -lt 10 ]; do echo {last} > /proc/sys/kernel/ns_last_pid; \
           \"$@\"; [ $? = 3 ] || return; n=$((n+1)); done; }}; \
         run setpriv --reuid={USER} --regid={USER} --clear-groups sh -c \
           '[ $$ = {PID} ] || exit 3; echo 10000000 10 user_jit_fn > /tmp/perf-$$.map; \
           exec {user}'; \
         run sh -c '[ $$ = {PID} ] || exit 3; rm -f /tmp/perf-$$.map; \
           echo 10000000 10 root_jit_fn > /tmp/perf-$$.map; exec {root}'; \
         rm -f /tmp/perf-{PID}.map",
        last = PID - 1,
        user = user_jit.display(),
        root = root_jit.display()
    );
    let (text, _) = watch_in(
        &["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"],
        &script,
    );
    // Samples by the program that ran under each pid at their time (the stream is ordered).
    let mut current = std::collections::HashMap::new();
    let mut syms: std::collections::HashMap<String, Vec<(u32, String)>> = Default::default();
    for line in text.lines() {
        if line.contains("{ type: comm,") {
            let c = comms(line);
            current.extend(c);
        } else if line.contains("{ type: sample,") {
            if let Some((pid, sym)) = plain_sample(line) {
                if let Some(comm) = current.get(&pid) {
                    syms.entry(comm.clone()).or_default().push((pid, sym));
                }
            }
        }
    }
    let of = |comm: &str| syms.get(comm).cloned().unwrap_or_default();
    let (user, root) = (of("pwj_user"), of("pwj_root"));
    assert!(
        user.iter().chain(&root).all(|(pid, _)| *pid == PID),
        "the JITs did not both get pid {PID}: {:?} {:?}",
        user.first(),
        root.first()
    );
    let named = |v: &[(u32, String)], f: &str| {
        v.iter()
            .filter(|(_, s)| s.starts_with(&format!("{f}+0x")))
            .count()
    };
    assert!(
        named(&user, "user_jit_fn") >= 50,
        "the user's JIT was not named by its map: {user:?}"
    );
    let wrong = named(&root, "user_jit_fn");
    assert_eq!(
        wrong,
        0,
        "{wrong} of {} samples of the root JIT named by the user's map",
        root.len()
    );
    // From the first sample its own map named (the map is read on a loader thread: on a
    // loaded machine, some samples come before), its map names it.
    let first = root
        .iter()
        .position(|(_, s)| s.starts_with("root_jit_fn+0x"))
        .unwrap_or(root.len());
    let ok = named(&root[first..], "root_jit_fn");
    assert!(
        ok >= 50 && ok * 10 >= (root.len() - first) * 8,
        "{ok} of {} samples of the root JIT from the first named one named by its map",
        root.len() - first
    );
}
