//! Binaries on a FUSE mount whose server holds perfwatch's reads (tests/helpers/fuse_hold.py):
//! they are not read by default, so nothing waits on them (a run ends on time, SIGTERM ends
//! it at once) and the names of other binaries stay; with `--read-user-fs` a held read costs
//! its wait and blinds no other binary.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SPIN_C: &str = r#"
volatile unsigned long sink;
__attribute__((noinline)) void fuse_hot(void) { for (int i = 0; i < 5000; i++) sink += i; }
int main(void) { for (;;) fuse_hot(); }
"#;

/// A python3 that can import fusepy (Debian's module is `fusepy`, pip's `fuse`).
fn python_with_fusepy() -> Option<&'static str> {
    ["python3", "/usr/bin/python3"].into_iter().find(|py| {
        Command::new(py)
            .args([
                "-c",
                "try:\n import fusepy\nexcept ImportError:\n import fuse",
            ])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// Kills its process (and waits for it) when dropped, so that no test leaves one behind.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The FUSE server, mounted; killed and unmounted (lazily) when dropped, also on failure.
struct HeldMount {
    server: Option<Killed>,
    mnt: PathBuf,
    log: PathBuf,
}

impl HeldMount {
    /// Serve `source` at `mnt`, holding perfwatch's reads `hold` seconds.
    fn start(python: &str, source: &Path, mnt: &Path, hold: u32, log: &Path) -> HeldMount {
        let server = Command::new(python)
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/helpers/fuse_hold.py"
            ))
            .arg(source)
            .arg(mnt)
            .arg(hold.to_string())
            .arg(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("start the FUSE server");
        let m = HeldMount {
            server: Some(Killed(server)),
            mnt: mnt.to_path_buf(),
            log: log.to_path_buf(),
        };
        let t0 = Instant::now();
        while !m.mounted() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "the FUSE mount never came"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        m
    }

    fn mounted(&self) -> bool {
        let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mnt = self.mnt.to_string_lossy().into_owned();
        table
            .lines()
            .any(|l| l.split(' ').nth(4) == Some(mnt.as_str()) && l.contains(" - fuse "))
    }

    /// The reads perfwatch made (held by the server).
    fn held_reads(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("held "))
            .count()
    }
}

impl Drop for HeldMount {
    fn drop(&mut self) {
        // Killing the server aborts the connection: held reads fail, the mount goes.
        self.server.take();
        let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
    }
}

/// One test at a time: perfwatch watches the whole system, so a run with `--read-user-fs`
/// would read another test's FUSE binary and count as that test's perfwatch reading it.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Setup {
    _dir: tempfile::TempDir,
    mount: HeldMount,
    on_fuse: PathBuf,
    local: PathBuf,
    /// Declared last, so dropped last: the mount is gone before the next test starts.
    _alone: std::sync::MutexGuard<'static, ()>,
}

/// A spin program built in a temporary directory (local), and served from a held FUSE mount.
/// For the test `name`, which is refused (a failure under `CI=true`) without fusepy.
fn setup(name: &str, hold: u32) -> Option<Setup> {
    let Some(python) = python_with_fusepy() else {
        common::refuse(
            name,
            "no python3 with fusepy (Debian: apt-get install python3-fusepy)",
        );
        return None;
    };
    let alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&source).unwrap();
    std::fs::create_dir(&mnt).unwrap();
    let c = dir.path().join("spin.c");
    std::fs::write(&c, SPIN_C).unwrap();
    let local = dir.path().join("pwlocalspin");
    let st = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&local)
        .arg(&c)
        .status()
        .expect("cc");
    assert!(st.success());
    std::fs::copy(&local, source.join("pwfusespin")).unwrap();
    let mount = HeldMount::start(python, &source, &mnt, hold, &dir.path().join("log"));
    Some(Setup {
        on_fuse: mnt.join("pwfusespin"),
        local,
        mount,
        _dir: dir,
        _alone: alone,
    })
}

/// Samples of `pid` in `lines` (perfwatch's `--json`): (sym, dso).
fn samples_of(lines: &[serde_json::Value], pid: u32) -> Vec<(Option<String>, String)> {
    lines
        .iter()
        .filter(|v| v["type"] == "sample" && v["sample_pid"].as_u64() == Some(pid as u64))
        .map(|v| {
            (
                v["sym"].as_str().map(String::from),
                v["dso"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Wait for `child` at most `limit`: its output, and how long it took from `t0`.
fn finish(child: Child, t0: Instant, limit: Duration) -> (std::process::Output, Duration) {
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(limit);
        // SAFETY: kill(2) on the child's pid; at worst it has exited already.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    });
    let out = child.wait_with_output().unwrap();
    let took = t0.elapsed();
    assert!(took < limit, "perfwatch was still running after {limit:?}");
    drop(watchdog);
    (out, took)
}

fn check_names(out: &std::process::Output, fuse_pid: u32, local_pid: u32, on_fuse: &Path) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines = common::json_lines(&stdout);
    let fuse = samples_of(&lines, fuse_pid);
    assert!(
        fuse.len() >= 20,
        "{} samples of the FUSE binary",
        fuse.len()
    );
    let path = on_fuse.to_string_lossy();
    let in_it: Vec<_> = fuse.iter().filter(|(_, d)| *d == path).collect();
    assert!(in_it.len() * 2 >= fuse.len(), "{fuse:?}");
    assert!(in_it.iter().all(|(s, _)| s.is_none()), "{in_it:?}");
    // The innocent binary beside it keeps its names.
    let local = samples_of(&lines, local_pid);
    assert!(
        local.len() >= 20,
        "{} samples of the local binary",
        local.len()
    );
    let named = local
        .iter()
        .filter(|(s, _)| s.as_deref() == Some("fuse_hot"))
        .count();
    assert!(
        named * 10 >= local.len() * 9,
        "{named} of {} local samples named: {:?}",
        local.len(),
        &local[..local.len().min(10)]
    );
}

#[test]
fn a_binary_on_a_held_fuse_mount_is_not_read_and_holds_nothing_up() {
    require_root!("mounting a FUSE filesystem");
    require_perf!();
    let Some(s) = setup(test_name!(), 60) else {
        return;
    };
    let fuse_spin = Killed(Command::new(&s.on_fuse).spawn().unwrap());
    let local_spin = Killed(Command::new(&s.local).spawn().unwrap());
    let t0 = Instant::now();
    let child = common::perfwatch()
        .args(["--json", "-a", "-F", "999", "-e", "cpu-clock", "-d", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // 2 s, the start (kallsyms on a loaded machine) and a margin; 60 s if a read were held.
    let (out, took) = finish(child, t0, Duration::from_secs(20));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(took < Duration::from_secs(12), "{took:?}");
    check_names(&out, fuse_spin.0.id(), local_spin.0.id(), &s.on_fuse);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("pwfusespin: cannot read its symbols: it is on a fuse filesystem"),
        "{stderr}"
    );
    assert_eq!(s.mount.held_reads(), 0, "perfwatch read the FUSE binary");
}

/// Issue 27: `--call-graph dwarf` reads each binary's unwind tables, but not a binary on a
/// FUSE mount (without `--read-user-fs`), as the symbolizer does not.
#[test]
fn dwarf_unwinding_does_not_read_a_binary_on_a_held_fuse_mount() {
    require_root!("mounting a FUSE filesystem");
    require_perf!();
    let Some(s) = setup(test_name!(), 60) else {
        return;
    };
    let fuse_spin = Killed(Command::new(&s.on_fuse).spawn().unwrap());
    let t0 = Instant::now();
    let child = common::perfwatch()
        .args([
            "--json",
            "--call-graph",
            "dwarf",
            "-F",
            "999",
            "-e",
            "cpu-clock",
            "-d",
            "2",
        ])
        .args(["-p", &fuse_spin.0.id().to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (out, took) = finish(child, t0, Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(took < Duration::from_secs(12), "{took:?}");
    assert!(
        stderr.contains("pwfusespin: unwind tables not read: it is on a fuse filesystem"),
        "{stderr}"
    );
    assert!(stderr.contains("dwarf unwinding: "), "{stderr}");
    assert_eq!(s.mount.held_reads(), 0, "perfwatch read the FUSE binary");
}

#[test]
fn sigterm_ends_perfwatch_at_once_with_a_binary_on_a_held_fuse_mount() {
    require_root!("mounting a FUSE filesystem");
    require_perf!();
    let Some(s) = setup(test_name!(), 60) else {
        return;
    };
    let _fuse_spin = Killed(Command::new(&s.on_fuse).spawn().unwrap());
    // `perfwatch | cat`: cat ends when every holder of the pipe's writing end has gone.
    let mut child = common::perfwatch()
        .args(["--plain", "-a", "-F", "999", "-e", "cpu-clock"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pipe = child.stdout.take().unwrap();
    let mut cat = Killed(
        Command::new("cat")
            .stdin(pipe)
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    common::wait_until_watching(&mut child);
    std::thread::sleep(Duration::from_millis(1500));
    let t0 = Instant::now();
    // SAFETY: kill(2) on our child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let (_, took) = finish(child, t0, Duration::from_secs(15));
    assert!(took < Duration::from_secs(5), "{took:?}");
    let t1 = Instant::now();
    loop {
        if cat.0.try_wait().unwrap().is_some() {
            break;
        }
        assert!(
            t1.elapsed() < Duration::from_secs(5),
            "cat never saw the end"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(s.mount.held_reads(), 0, "perfwatch read the FUSE binary");
}

#[test]
fn with_read_user_fs_a_held_read_costs_its_wait_and_blinds_no_other_binary() {
    require_root!("mounting a FUSE filesystem");
    require_perf!();
    // Held 4 s: longer than the 2 s load deadline, so the read is stuck for a while.
    let Some(s) = setup(test_name!(), 4) else {
        return;
    };
    let fuse_spin = Killed(Command::new(&s.on_fuse).spawn().unwrap());
    let local_spin = Killed(Command::new(&s.local).spawn().unwrap());
    let t0 = Instant::now();
    let child = common::perfwatch()
        .args([
            "--json",
            "--read-user-fs",
            "-a",
            "-F",
            "999",
            "-e",
            "cpu-clock",
            "-d",
            "2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (out, _) = finish(child, t0, Duration::from_secs(30));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        s.mount.held_reads() > 0,
        "perfwatch never read the FUSE binary"
    );
    check_names(&out, fuse_spin.0.id(), local_spin.0.id(), &s.on_fuse);
}
