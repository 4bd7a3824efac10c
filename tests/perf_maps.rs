//! Issue 31: the perf maps of JIT runtimes, read by root perfwatch from files a user
//! controls. Each test runs the real binary as root, with the JITs as an unprivileged user.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// An unprivileged uid for the monitored programs (no passwd entry needed).
const USER: u32 = 1001;

/// A JIT's code at a fixed address (so that a map written before it runs can name it): a
/// two-instruction loop in anonymous executable memory, ended by SIGALRM after a second.
const JIT_C: &str = r#"
#include <sys/mman.h>
#include <unistd.h>
int main(void) {
    unsigned char *code = mmap((void *)0x10000000, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (code != (void *)0x10000000) return 1;
    code[0] = 0x90; code[1] = 0xeb; code[2] = 0xfd;   /* nop; jmp back to the nop */
    alarm(1);
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
    let pid = line
        .split(", pid: ")
        .nth(1)?
        .split(',')
        .next()?
        .parse()
        .ok()?;
    let rest = line.split(", sym: ").nth(1)?;
    let (sym, _) = rest.split_once(", dso: ")?;
    Some((pid, sym.to_string()))
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

/// Run perfwatch `--plain` over `sh -c script`, with a deadline; (stdout, stderr).
fn watch(script: &str) -> (String, String) {
    let child = Command::new(assert_cmd::cargo::cargo_bin("perfwatch"))
        .args([
            "--plain",
            "-e",
            "cpu-clock",
            "-F",
            "2000",
            "--",
            "sh",
            "-c",
            script,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(60));
        // SAFETY: signalling the child this test started (a no-op once it has been reaped
        // and the pid is unused; the test has failed by then anyway).
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    });
    let out = child.wait_with_output().unwrap();
    drop(killer);
    assert!(out.status.success(), "perfwatch: {:?}", out.status);
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
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
    let named = own
        .iter()
        .filter(|s| s.starts_with("user_own_fn+0x"))
        .count();
    assert!(
        named * 10 >= own.len() * 9,
        "{named} of {} named: {own:?}",
        own.len()
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
