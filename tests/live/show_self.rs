//! Watching the whole system, perfwatch's own records (its threads' samples, their exits)
//! are hidden and counted; `--show-self` shows them.

use crate::common;

use common::InTime;

use std::process::{Command, Stdio};

use assert_cmd::cargo::CommandCargoExt;

/// A program that spins in anonymous executable memory (as a JIT's code runs) for 1.5 s of
/// its own CPU time: perfwatch looks for its perf map, and as the test writes one for it,
/// opens it as the program's owner in a short-lived helper child of its own, whose records
/// are perfwatch's too. (Without a map in perfwatch's own /tmp, perfwatch knows there is none
/// without forking.)
const ANON_SPIN_C: &str = r#"
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>
int main(void) {
    unsigned char *code = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED) return 1;
    code[0] = 0x90; code[1] = 0xeb; code[2] = 0xfd;   /* nop; jmp back to the nop */
    struct itimerval cpu = { { 0, 0 }, { 1, 500000 } };
    setitimer(ITIMER_PROF, &cpu, 0);
    alarm(30);
    ((void (*)(void))code)();
    return 0;
}
"#;

/// A perf map written for the test's program, removed when dropped.
struct PerfMap(String);

impl Drop for PerfMap {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `perfwatch --plain -a -e cpu-clock -F 4000 --duration 2 [extra]`, with [`ANON_SPIN_C`]
/// running: (its pid, stdout, stderr).
fn run(extra: &[&str]) -> (u32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("spin.c"), ANON_SPIN_C).unwrap();
    let spin = dir.path().join("pw_anon_spin");
    let cc = Command::new("cc")
        .arg("-O1")
        .arg("-o")
        .arg(&spin)
        .arg(dir.path().join("spin.c"))
        .status_in_time()
        .unwrap();
    assert!(cc.success(), "cc failed");
    let mut spinner = Command::new(&spin).spawn().unwrap();
    let map = PerfMap(format!("/tmp/perf-{}.map", spinner.id()));
    std::fs::write(&map.0, "1000 10 pw_jitted\n").unwrap();
    let child = Command::cargo_bin("perfwatch")
        .unwrap()
        .args([
            "--plain",
            "-a",
            "-e",
            "cpu-clock",
            "-F",
            "4000",
            "--duration",
            "2",
        ])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.output_in_time().unwrap();
    let _ = spinner.kill();
    common::wait_in_time(&mut spinner);
    drop(map);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        pid,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Lines about process `pid`: all but the records about the events themselves (losses,
/// throttling), which are never hidden, whoever was running when the kernel wrote them.
fn mine(pid: u32, out: &str) -> Vec<&str> {
    let me = format!(" pid: {pid}, ");
    out.lines()
        .filter(|l| l.contains(&me))
        .filter(|l| {
            !["lost", "throttle", "unthrottle"]
                .iter()
                .any(|t| l.contains(&format!("type: {t},")))
        })
        .collect()
}

#[test]
fn its_own_records_are_hidden_and_counted_unless_show_self() {
    require_perf!();
    let (pid, out, err) = run(&[]);
    let shown = mine(pid, &out);
    assert!(shown.is_empty(), "perfwatch's own records shown: {shown:?}");
    let hidden: u64 = err
        .lines()
        .find_map(|l| l.trim().strip_prefix("hidden: "))
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no 'hidden:' line in the summary:\n{err}"));
    assert!(hidden > 0, "{err}");
    assert!(err.contains("--show-self shows them"), "{err}");
    // Writing 8 000 lines a second, perfwatch is on a CPU often enough to be sampled.
    let (pid, out, err) = run(&["--show-self"]);
    assert!(
        !mine(pid, &out).is_empty(),
        "--show-self shows none:\n{err}"
    );
    // The helpers were there to hide: perfwatch forked to look for the spinner's perf map.
    let helper = " type: fork, pid: ";
    let parent = format!(", ppid: {pid}, ");
    assert!(
        out.lines().any(|l| l.contains(helper)
            && l.contains(&parent)
            && !l.contains(&format!(" type: fork, pid: {pid},"))),
        "no helper of perfwatch's own was forked (the test did not test what it says):\n{err}"
    );
    assert!(!err.contains("hidden:"), "{err}");
}
