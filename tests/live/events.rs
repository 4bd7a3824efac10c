//! Event lists and tracepoint fields against the real kernel: real tracepoints (tracefs is
//! mounted for the test when it is missing, and unmounted after), real programs built with
//! `cc`, the real binary.

use crate::common;

use common::InTime;
use common::SpawnDrained;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use common::{perfwatch, run, run_args};

/// Build a C program into `dir` under `name`.
fn cc(dir: &Path, name: &str, src: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let exe = dir.join(name);
    let st = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&exe)
        .arg(&c)
        .status_in_time()
        .expect("cc");
    assert!(st.success(), "cc failed");
    exe
}

/// Sleeps 1 ms 30 times (30 context switches out), then spins 60 ms of its own CPU time
/// (not wall time: the samples it gets do not depend on the machine's load).
const SLEEPER: &str = r#"
#include <time.h>
#include <unistd.h>
int main(void) {
    struct timespec ts = {0, 1000000};
    for (int i = 0; i < 30; i++) nanosleep(&ts, 0);
    struct timespec a, b;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    volatile unsigned long x = 0;
    do {
        for (int i = 0; i < 100000; i++) x += i;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 60000000L);
    return 0;
}
"#;

/// Run `perfwatch --json` with `args` to a successful end: its lines, and its stderr.
fn json_run(args: &[&str]) -> (Vec<Value>, String) {
    let out = run(perfwatch().arg("--json").args(args));
    out.exited(0);
    (out.json(), out.stderr)
}

fn samples_of<'a>(lines: &'a [Value], event: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|v| v["type"] == "sample" && v["event"] == event)
        .collect()
}

#[test]
fn an_exec_gives_the_file_it_executed() {
    let _t = require_tracefs!();
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(dir.path(), "pw-exec-target", "int main(void) { return 0; }");
    let exe_s = exe.to_str().unwrap();
    let (lines, stderr) = json_run(&["-e", "sched:sched_process_exec", "--", exe_s]);
    let execs = samples_of(&lines, "sched:sched_process_exec");
    assert_eq!(execs.len(), 1, "{stderr}");
    let e = execs[0];
    assert_eq!(e["filename"], exe_s);
    assert_eq!(e["pid"], e["sample_pid"]);
    assert_eq!(e["old_pid"], e["pid"]);
    assert!(e["pid"].is_i64(), "numbers as numbers: {e}");
    assert!(e.get("common_pid").is_none(), "common_* left out: {e}");

    // The same in --plain, with the fields after the sample's own members.
    let out = run_args(&["--plain", "-e", "sched:sched_process_exec", "--", exe_s]);
    let stdout = &out.stdout;
    let line = stdout
        .lines()
        .find(|l| l.contains("type: sample"))
        .unwrap_or_else(|| panic!("no sample: {stdout}"));
    let pid = line
        .split("tid: ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .unwrap();
    // The sample's ip is in the kernel's tracepoint code, named like any sample's.
    let member = |key: &str| {
        line.split(&format!(" {key}: "))
            .nth(1)
            .and_then(|s| s.split(',').next())
            .unwrap_or_else(|| panic!("no {key}: {line}"))
    };
    assert!(
        line.ends_with(&format!(
            "{{ type: sample, event: sched:sched_process_exec, ip: {}, sym: {}, dso: [kernel.kallsyms], period: 1, filename: {exe_s}, pid: {pid}, old_pid: {pid} }}",
            member("ip"),
            member("sym"),
        )),
        "{line}"
    );

    // --common-fields adds them.
    let (lines, _) = json_run(&[
        "--common-fields",
        "-e",
        "sched:sched_process_exec",
        "--",
        exe_s,
    ]);
    let e = samples_of(&lines, "sched:sched_process_exec")[0];
    assert_eq!(e["common_pid"], e["pid"]);
}

#[test]
fn sched_switch_gives_prev_and_next_mixed_with_cpu_clock() {
    let _t = require_tracefs!();
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(dir.path(), "pwsleeper", SLEEPER);
    let events = "cpu-clock/freq=1000/,sched:sched_switch";
    let (lines, stderr) = json_run(&["-e", events, "--", exe.to_str().unwrap()]);
    let pid = lines
        .iter()
        .find(|v| v["type"] == "comm" && v["exec"] == true && v["comm"] == "pwsleeper")
        .map(|v| v["pid"].as_i64().unwrap())
        .unwrap_or_else(|| panic!("no exec of pwsleeper: {stderr}"));
    let switches = samples_of(&lines, "sched:sched_switch");
    let mine: Vec<_> = switches
        .iter()
        .filter(|v| v["prev_pid"] == pid && v["prev_comm"] == "pwsleeper")
        .collect();
    assert!(mine.len() >= 30, "{} switches out: {stderr}", mine.len());
    for s in &mine {
        assert!(s["next_pid"].is_i64() && s["next_comm"].is_string(), "{s}");
        assert_eq!(s["sample_pid"], pid);
        assert_eq!(s["sample_period"], 1);
    }
    let clock = samples_of(&lines, "cpu-clock");
    assert!(
        clock.len() >= 10,
        "{} cpu-clock samples: {stderr}",
        clock.len()
    );
    assert!(clock.iter().all(|v| v.get("prev_pid").is_none()));
    // Side-band records come from the tracking event only: one exec, one exit.
    let execs = lines
        .iter()
        .filter(|v| v["type"] == "comm" && v["exec"] == true && v["pid"] == pid)
        .count();
    let exits = lines
        .iter()
        .filter(|v| v["type"] == "exit" && v["pid"] == pid)
        .count();
    assert_eq!((execs, exits), (1, 1), "{stderr}");
    // Every line is in time order.
    let times: Vec<u64> = lines
        .iter()
        .filter_map(|v| v["sample_time"].as_u64())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
}

#[test]
fn system_wide_switches_name_the_next_task() {
    let _t = require_tracefs!();
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(dir.path(), "pwsleeper2", SLEEPER);
    // Counted on the way out: each of the sleeper's 30 sleeps switches it out. (Switches *in*
    // from the idle task are not a reliable count on this kind of VM: with CPU 1 idle, the
    // kernel writes no sched_switch for swapper/1 -> task at all, for perf record as well.)
    let out = run_args(&[
        "--plain",
        "-a",
        "-e",
        "sched:sched_switch",
        "-e",
        "dummy",
        "--filter",
        "prev_comm:pwsleeper2",
        "--",
        exe.to_str().unwrap(),
    ]);
    let stderr = &out.exited(0).stderr;
    let stdout = &out.stdout;
    let switches_out = stdout
        .lines()
        .filter(|l| {
            l.contains("event: sched:sched_switch")
                && l.contains("prev_comm: pwsleeper2,")
                && l.contains(", next_comm: ")
                && l.contains(", next_pid: ")
        })
        .count();
    assert!(switches_out >= 30, "{switches_out}: {stdout}\n{stderr}");
    assert!(
        stdout.lines().all(|l| l.contains("prev_comm: pwsleeper2,")),
        "the filter keeps only those: {stdout}"
    );
}

#[test]
fn a_script_reads_tracepoint_fields() {
    let _t = require_tracefs!();
    if !cfg!(feature = "python") {
        skip!("built without the python feature");
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(
        dir.path(),
        "pw-script-target",
        "int main(void) { return 0; }",
    );
    let script = dir.path().join("fields.py");
    std::fs::write(
        &script,
        "def on_event(event):\n    if event.type == 'sample':\n        print('exec', event.name, event.filename, event.pid == event.sample_pid, type(event.old_pid).__name__)\n",
    )
    .unwrap();
    let out = run(perfwatch()
        .args(["--plain", "-e", "sched:sched_process_exec", "--script"])
        .arg(&script)
        .arg("--")
        .arg(&exe));
    let stderr = &out.exited(0).stderr;
    assert!(
        stderr.contains(&format!(
            "[fields.py] exec sched:sched_process_exec {} True int",
            exe.display()
        )),
        "{stderr}"
    );
}

#[test]
fn user_only_samples_have_no_kernel_addresses() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(dir.path(), "pwspin", SLEEPER);
    let (lines, stderr) = json_run(&[
        "-e",
        "cpu-clock:u",
        "-F",
        "2000",
        "--",
        exe.to_str().unwrap(),
    ]);
    let ips: Vec<u64> = lines
        .iter()
        .filter(|v| v["type"] == "sample")
        .map(|v| {
            // An address: a "0x..." string (see src/plain.rs).
            let hex = v["sample_ip"].as_str().unwrap();
            u64::from_str_radix(hex.trim_start_matches("0x"), 16).unwrap()
        })
        .collect();
    assert!(ips.len() >= 20, "{} samples: {stderr}", ips.len());
    let kernel = ips
        .iter()
        .filter(|ip| **ip >= 0x8000_0000_0000_0000)
        .count();
    assert_eq!(kernel, 0, "{kernel} kernel addresses among {}", ips.len());
    // A lone event is not named in --plain, but is in --json.
    assert!(
        lines
            .iter()
            .filter(|v| v["type"] == "sample")
            .all(|v| v["event"] == "cpu-clock:u")
    );
}

#[test]
fn tracepoints_sample_every_nth_hit_with_c() {
    let _t = require_tracefs!();
    // -t (no inheritance): with inherited events the kernel swaps the contexts of parent and
    // child at context switches, splitting the period count between their copies.
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    common::mkfifo(&go);
    let mut target = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "read x < '{}'; (exit 0) & (exit 0) & (exit 0) & (exit 0) & (exit 0) & (exit 0) & wait",
            go.display()
        ))
        .spawn()
        .unwrap();
    let tid = target.id().to_string();
    let mut mon = common::spawn_piped(&[
        "--json",
        "-e",
        "sched:sched_process_fork",
        "-c",
        "2",
        "-t",
        &tid,
    ]);
    common::wait_until_watching(&mut mon);
    std::fs::write(&go, "go\n").unwrap();
    common::wait_in_time(&mut target);
    let out = common::Run::from(mon.output_in_time().unwrap());
    let stderr = &out.exited(0).stderr;
    let lines = out.json();
    let samples = samples_of(&lines, "sched:sched_process_fork");
    assert_eq!(samples.len(), 3, "every second of 6 forks: {stderr}");
    assert!(samples.iter().all(|v| v["sample_period"] == 2));
    assert!(
        samples
            .iter()
            .all(|v| v["child_pid"].is_i64() && v["parent_comm"] == "sh")
    );
}

#[test]
fn list_events_lists_hardware_software_and_tracepoints() {
    let _t = require_tracefs!();
    let out = run_args(&["--list-events", "sched"]);
    let s = &out.exited(0).stdout;
    assert!(
        s.lines()
            .any(|l| l.trim_start().starts_with("sched:sched_switch ")
                && l.ends_with("[Tracepoint event]")),
        "{s}"
    );
    assert!(!s.contains("cpu-clock"), "filtered: {s}");
    let out = run_args(&["--list-events"]);
    let s = &out.stdout;
    assert!(s.contains("cycles OR cpu-cycles"), "{s}");
    assert!(
        s.lines()
            .any(|l| l.contains("cpu-clock") && l.ends_with("[Software event]"))
    );
    assert!(
        s.lines()
            .any(|l| l.contains("instructions") && l.ends_with("[Hardware event]"))
    );
    assert!(s.lines().count() > 100, "tracepoints too");
}

#[test]
fn clear_refusals() {
    let _t = require_tracefs!();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--plain", "-e", "cpu-clock,sched:sched_switch", "-F", "100"],
            "-F 100 sets a sampling frequency, which tracepoint 'sched:sched_switch' does not have",
        ),
        (&["--plain", "-e", "cpu-clock:p"], "only hardware events"),
        (
            &["--plain", "-e", "sched:sched_switch:u"],
            "would never sample",
        ),
        (
            &["--plain", "-e", "cpu-clock:x"],
            "modifier 'x' in 'cpu-clock:x'",
        ),
        (
            &["--plain", "-e", "sched:sched_switch/freq=10/"],
            "no sampling frequency",
        ),
        (
            &["--plain", "-e", "cpu-clock/color=red/"],
            "term 'color=red'",
        ),
        (&["--plain", "-e", "cpu-clock,"], "unknown event"),
        (
            &["--plain", "-e", "dummy", "-G", "no/such/cgroup/here"],
            "cgroup 'no/such/cgroup/here'",
        ),
    ];
    for (args, msg) in cases {
        let out = run_args(args);
        let stderr = &out.exited(1).said(&[msg]).stderr;
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one line: {stderr}");
    }
    // Bad command lines: status 2.
    run_args(&["--plain", "-e", "dummy", "-k", "sideways"]).exited(2);
    let out = run_args(&[
        "--plain",
        "-e",
        "sched:sched_switch",
        "--filter",
        "nxt_pid:0",
    ]);
    out.exited(2)
        .said(&["unknown filter key 'nxt_pid' in 'nxt_pid:0'"]);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
}

/// True when the machine has a PMU that counts instructions.
fn has_instructions() -> bool {
    common::has_hardware(perf_event_open_sys::bindings::PERF_COUNT_HW_INSTRUCTIONS)
}

#[test]
fn an_explicit_hardware_event_the_machine_lacks_is_an_error() {
    require_perf!();
    if has_instructions() {
        skip!("this machine counts instructions: nothing to refuse");
    }
    run_args(&["--plain", "-e", "cpu-clock,instructions", "-d", "0.2"])
        .exited(1)
        .said(&["event 'instructions' is not supported on this machine"])
        .never_said(&["using cpu-clock"]);
    // cycles, asked for or by default, falls back as in perf (and keeps its modifier).
    run_args(&["--json", "-e", "cycles:u", "-d", "0.2"])
        .exited(0)
        .said(&["cycles:u not supported", "using cpu-clock:u"]);
}

#[test]
fn clockid_stamps_events_with_that_clock() {
    require_perf!();
    let realtime = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    };
    let before = realtime();
    let out = run_args(&["--json", "-k", "realtime", "-e", "dummy", "--", "/bin/true"]);
    let after = realtime();
    let stderr = &out.exited(0).stderr;
    let lines = out.json();
    assert!(!lines.is_empty(), "{stderr}");
    for v in &lines {
        let t = v["sample_time"].as_u64().unwrap();
        assert!(before <= t && t <= after, "{t} not in [{before}, {after}]");
    }
}

/// The cgroup2 mount point, if any.
fn cgroup2_root() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1]))
    })
}

#[test]
fn a_cgroup_target_sees_only_its_tasks() {
    require_perf!();
    // A perf_event v1 hierarchy would take precedence over cgroup2 in -G; keep to the
    // machines this test knows how to set up.
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    if mounts
        .lines()
        .any(|l| l.contains(" cgroup ") && l.contains("perf_event"))
    {
        skip!("a perf_event v1 cgroup hierarchy is mounted");
    }
    let Some(root) = cgroup2_root() else {
        skip!("no cgroup2 mount");
    };
    let name = format!("perfwatch-test-{}", std::process::id());
    let cg = root.join(&name);
    if let Err(e) = std::fs::create_dir(&cg) {
        skip!("cannot create the cgroup {}: {e}", cg.display());
    }
    struct Cleanup(PathBuf, Option<std::process::Child>);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            if let Some(c) = self.1.as_mut() {
                let _ = c.kill();
                let _ = c.wait();
            }
            let _ = std::fs::remove_dir(&self.0);
        }
    }
    let mut guard = Cleanup(cg.clone(), None);
    let procs = cg.join("cgroup.procs");
    let child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > '{}' && exec sh -c 'while :; do :; done'",
            procs.display()
        ))
        .spawn()
        .unwrap();
    let pid = child.id() as i64;
    guard.1 = Some(child);
    // The loop is in the cgroup before perfwatch starts (however long a loaded machine takes
    // to run its `echo`), else its first samples would be another cgroup's.
    let t0 = std::time::Instant::now();
    while !std::fs::read_to_string(&procs).is_ok_and(|s| s.trim() == pid.to_string()) {
        assert!(
            t0.elapsed() < common::deadline(),
            "the loop never joined {}",
            cg.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // The CPU time the cgroup got while perfwatch watched it, from its cpu.stat: on a loaded
    // machine the loop gets less than a whole CPU, and fewer samples are its due.
    let stat = cg.join("cpu.stat");
    let usage = move || -> u64 {
        std::fs::read_to_string(&stat)
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("usage_usec ")?.trim().parse().ok())
            .expect("cpu.stat has usage_usec")
    };
    // Sampled every 5 ms on a thread of its own, stamped with CLOCK_MONOTONIC, so that the
    // CPU time counted is the cgroup's up to perfwatch's own stop time: a loaded machine may
    // take seconds to end perfwatch after it stopped watching, while the loop runs on.
    let stop_sampling = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let stop = std::sync::Arc::clone(&stop_sampling);
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                seen.push((perfwatch::clock::monotonic_ns(), usage()));
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            seen
        })
    };
    let mut mon = perfwatch()
        .args([
            "--json",
            "-G",
            &name,
            "-e",
            "cpu-clock",
            "-F",
            "500",
            "-d",
            "1",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn_drained()
        .unwrap();
    common::wait_until_watching(&mut mon);
    // Its events were on from before now: the window counted starts late, never early.
    let watching = perfwatch::clock::monotonic_ns();
    let out = common::Run::from(mon.output_in_time().unwrap());
    stop_sampling.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = sampler.join().unwrap();
    let stopped = common::stop_time(&out.stderr).expect("perfwatch says its stop time");
    // The last reading at or before each end of the window.
    let at = |t: u64| {
        seen.iter()
            .take_while(|(when, _)| *when <= t)
            .last()
            .map_or(0, |(_, u)| *u)
    };
    let used_ms = at(stopped).saturating_sub(at(watching)) / 1000;
    let stderr = &out.exited(0).stderr;
    let lines = out.json();
    let pids: std::collections::BTreeSet<i64> = lines
        .iter()
        .filter(|v| v["type"] == "sample")
        .map(|v| v["sample_pid"].as_i64().unwrap())
        .collect();
    assert_eq!(pids, [pid].into(), "{stderr}");
    // One sample per 2 ms of the cgroup's CPU time between the window's two ends.
    let n = lines.iter().filter(|v| v["type"] == "sample").count() as u64;
    println!("{n} samples, {used_ms} ms of CPU");
    assert!(n > 0, "no sample of the loop: {stderr}");
    assert!(
        n * 2 * 10 >= used_ms * 7,
        "{n} samples at 500 Hz of a busy loop that ran {used_ms} ms: {stderr}"
    );
}

#[test]
fn a_fixed_period_is_honoured_for_software_events() {
    require_perf!();
    // 4096 page faults: without -c every one would be a sample.
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(
        dir.path(),
        "pwfaults",
        r#"
#include <sys/mman.h>
int main(void) {
    long n = 4096, page = 4096;
    volatile char *p = mmap(0, n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    for (long i = 0; i < n; i++) p[i * page] = 1;
    return 0;
}
"#,
    );
    let (lines, stderr) = json_run(&[
        "-e",
        "page-faults",
        "-c",
        "100",
        "--",
        exe.to_str().unwrap(),
    ]);
    let samples: Vec<_> = lines.iter().filter(|v| v["type"] == "sample").collect();
    assert!(
        (40..=120).contains(&samples.len()),
        "{} samples for ~4100 faults at -c 100: {stderr}",
        samples.len()
    );
    assert!(samples.iter().all(|v| v["sample_period"] == 100));
}

/// Records that would appear twice if side-band records came from every event (they would
/// differ only in the id of the event that wrote them and the times the kernel read).
fn duplicated(lines: &[Value], ty: &str) -> usize {
    let mut seen = std::collections::BTreeSet::new();
    lines
        .iter()
        .filter(|v| v["type"] == ty)
        .filter(|v| {
            let mut v = (*v).clone();
            if let Some(o) = v.as_object_mut() {
                for k in ["sample_id", "sample_time", "time"] {
                    o.remove(k);
                }
            }
            !seen.insert(v.to_string())
        })
        .count()
}

#[test]
fn any_list_works_with_a_pid_target_and_switch_records() {
    let _t = require_tracefs!();
    let mut target = Command::new("sh")
        .args(["-c", "while :; do /bin/sleep 0.01; done"])
        .spawn()
        .unwrap();
    let pid = target.id().to_string();
    let out = run_args(&[
        "--json",
        "-p",
        &pid,
        "-e",
        "cpu-clock,sched:sched_switch",
        "-e",
        "page-faults",
        "--switch",
        "-d",
        "1",
    ]);
    let _ = target.kill();
    let _ = target.wait();
    let stderr = &out.exited(0).stderr;
    let lines = out.json();
    let pid: i64 = pid.parse().unwrap();
    let switches = samples_of(&lines, "sched:sched_switch");
    assert!(
        switches.iter().any(|v| v["prev_pid"] == pid),
        "the shell switches out: {stderr}"
    );
    let forks = lines
        .iter()
        .filter(|v| v["type"] == "fork" && v["ppid"] == pid)
        .count();
    assert!(forks >= 10, "{forks} sleeps forked: {stderr}");
    assert!(!samples_of(&lines, "page-faults").is_empty(), "{stderr}");
    for ty in ["fork", "exit", "comm", "mmap"] {
        assert_eq!(duplicated(&lines, ty), 0, "{ty} records doubled");
    }
    assert!(
        lines.iter().any(|v| v["type"] == "context_switch"),
        "{stderr}"
    );
}

#[test]
fn hostile_tracepoint_strings_are_escaped() {
    let _t = require_tracefs!();
    let dir = tempfile::tempdir().unwrap();
    let exe = cc(dir.path(), "pw-hostile", "int main(void) { return 0; }");
    let evil = dir.path().join("evil\x1b[2J\nname\u{202e}");
    std::fs::rename(&exe, &evil).unwrap();
    for format in ["--plain", "--json"] {
        let out = perfwatch()
            .args([format, "-e", "sched:sched_process_exec", "--"])
            .arg(&evil)
            .output_in_time()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(!out.stdout.contains(&0x1b), "raw ESC in {format}");
        let stdout = String::from_utf8(out.stdout).expect("UTF-8");
        assert!(
            !stdout.contains('\u{202e}'),
            "raw bidi override in {format}"
        );
        let line = stdout
            .lines()
            .find(|l| l.contains("sched_process_exec"))
            .unwrap_or_else(|| panic!("{stdout}"));
        if format == "--plain" {
            assert!(line.contains("filename: "), "{line}");
            assert!(line.contains("evil\\x1b[2J\\nname\\u{202e},"), "{line}");
        } else {
            let v: Value = serde_json::from_str(line).unwrap();
            assert!(
                v["filename"]
                    .as_str()
                    .unwrap()
                    .ends_with("evil\\x1b[2J\\nname\\u{202e}")
            );
        }
    }
}
