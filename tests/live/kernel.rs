//! Against the real kernel: children that fork a known number of times must yield exactly
//! that many fork and exit records, with the right pids, in every target mode.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};

use assert_cmd::cargo::cargo_bin;
use serde_json::Value;

use common::{InTime, Run, json_lines, perfwatch, run_args};

/// Forks `n` subshells that exit at once (dash forks once per `( ... ) &`, without exec),
/// then one child that execs `sleep`.
fn forker_script(n: usize, pidfile: Option<&std::path::Path>) -> String {
    let write_pid = pidfile
        .map(|p| format!("echo $$ > '{}'; ", p.display()))
        .unwrap_or_default();
    format!(
        "{write_pid}i=0; while [ $i -lt {n} ]; do (exit 0) & i=$((i+1)); done; wait; /bin/sleep 0 & wait"
    )
}

/// Attach `perfwatch --json -e dummy -p` to `target`, wait until it has opened its events, let
/// the target go (it waits reading the FIFO `go`), and collect perfwatch's output once the
/// target (and so perfwatch) has exited.
fn watch_pid_then_release(target: &mut std::process::Child, go: &std::path::Path) -> Run {
    let mut mon = common::spawn_piped(&["--json", "-e", "dummy", "-p", &target.id().to_string()]);
    common::wait_until_watching(&mut mon);
    std::fs::write(go, "go\n").unwrap();
    common::wait_in_time(target);
    mon.output_in_time().unwrap().into()
}

/// Children of `parent` seen forking, exiting, and exec'ing.
struct Family {
    forked: BTreeSet<u64>,
    exited: BTreeSet<u64>,
    fork_records: usize,
    exit_records: usize,
    execs: BTreeMap<u64, String>,
}

fn family(lines: &[Value], parent: u64) -> Family {
    let mut f = Family {
        forked: BTreeSet::new(),
        exited: BTreeSet::new(),
        fork_records: 0,
        exit_records: 0,
        execs: BTreeMap::new(),
    };
    for v in lines {
        match v["type"].as_str() {
            // Processes only: pid == tid.
            Some("fork") if v["ppid"] == parent && v["pid"] == v["tid"] => {
                f.fork_records += 1;
                f.forked.insert(v["pid"].as_u64().unwrap());
            }
            _ => {}
        }
    }
    for v in lines {
        let pid = v["pid"].as_u64().unwrap_or(0);
        match v["type"].as_str() {
            Some("exit") if f.forked.contains(&pid) && v["pid"] == v["tid"] => {
                f.exit_records += 1;
                f.exited.insert(pid);
            }
            Some("comm") if f.forked.contains(&pid) && v["exec"] == true => {
                f.execs
                    .insert(pid, v["comm"].as_str().unwrap_or("").to_string());
            }
            _ => {}
        }
    }
    f
}

fn check_family(f: &Family, n: usize) {
    assert_eq!(f.fork_records, n + 1, "fork records");
    assert_eq!(f.forked.len(), n + 1, "distinct forked pids");
    assert_eq!(f.exit_records, n + 1, "exit records");
    assert_eq!(f.exited, f.forked, "every forked child exited");
    assert_eq!(
        f.execs.values().filter(|c| *c == "sleep").count(),
        1,
        "one exec of sleep: {:?}",
        f.execs
    );
}

#[test]
fn command_mode_sees_every_fork_exit_and_exec() {
    require_perf!();
    let n = 200;
    let out = run_args(&[
        "--json",
        "-e",
        "dummy",
        "--",
        "sh",
        "-c",
        &forker_script(n, None),
    ]);
    let stderr = &out.exited(0).stderr;
    let lines = out.json();
    // The command itself: the first exec'ing comm record is sh's.
    let sh = lines
        .iter()
        .find(|v| v["type"] == "comm" && v["comm"] == "sh")
        .and_then(|v| v["pid"].as_u64())
        .expect("comm record of the command");
    check_family(&family(&lines, sh), n);
    assert!(stderr.contains("lost by the kernel: 0 records"), "{stderr}");
    assert!(stderr.contains(&format!("fork {}", n + 1)), "{stderr}");
}

#[test]
fn system_wide_sees_every_fork_exit_and_exec() {
    require_perf!();
    let n = 200;
    let pidfile = tempfile::NamedTempFile::new().unwrap();
    let script = forker_script(n, Some(pidfile.path()));
    let out = run_args(&["--json", "-a", "-e", "dummy", "--", "sh", "-c", &script]);
    out.exited(0);
    let sh: u64 = std::fs::read_to_string(pidfile.path())
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let lines = out.json();
    check_family(&family(&lines, sh), n);
    // Global time order across CPUs.
    let times: Vec<u64> = lines
        .iter()
        .map(|v| v["sample_time"].as_u64().unwrap())
        .collect();
    let inversions = times.windows(2).filter(|w| w[1] < w[0]).count();
    assert_eq!(inversions, 0, "lines out of time order");
}

#[test]
fn pid_mode_follows_a_running_process_and_stops_when_it_exits() {
    require_perf!();
    let n = 50;
    // The process waits on a FIFO (without forking), so that perfwatch is surely attached
    // before the first fork.
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    common::mkfifo(&go);
    let script = format!("read x < '{}'; {}", go.display(), forker_script(n, None));
    let mut target = Command::new("sh").args(["-c", &script]).spawn().unwrap();
    let pid = target.id();
    let out = watch_pid_then_release(&mut target, &go);
    let stderr = &out.exited(0).stderr;
    assert!(
        stderr.contains("every monitored task has exited"),
        "{stderr}"
    );
    check_family(&family(&out.json(), pid as u64), n);
}

#[test]
fn plain_lines_have_the_python_binding_shape() {
    require_perf!();
    let out = common::plain_sh("(exit 0) & wait")
        .output_in_time()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let fork = text
        .lines()
        .find(|l| l.contains("type: fork"))
        .expect("a fork line");
    // cpu: N, pid: N, tid: N { type: fork, pid: N, ppid: N, tid: N, ptid: N, time: N}
    let shape: String = fork
        .chars()
        .map(|c| if c.is_ascii_digit() { '9' } else { c })
        .collect();
    let shape = shape
        .split('9')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("9");
    assert_eq!(
        shape,
        "cpu: 9, pid: 9, tid: 9 { type: fork, pid: 9, ppid: 9, tid: 9, ptid: 9, time: 9}"
    );
    assert!(
        text.lines().any(|l| l.contains("{ type: exit, pid: ")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("{ type: mmap, pid: ") && l.contains("filename: /")),
        "{text}"
    );
}

#[test]
fn command_exit_status_is_passed_through() {
    require_perf!();
    let st = common::status_of(&["--plain", "-e", "dummy", "--", "sh", "-c", "exit 7"]);
    assert_eq!(st.code(), Some(7));
    let st = common::status_of(&["--plain", "-e", "dummy", "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(st.code(), Some(128 + 15));
}

/// True when this machine has a hardware cycles counter.
fn hardware_cycles() -> bool {
    common::has_hardware(perf_event_open_sys::bindings::PERF_COUNT_HW_CPU_CYCLES)
}

#[test]
fn cycles_falls_back_to_a_software_clock_when_there_is_no_pmu() {
    require_perf!();
    let out = run_args(&["--json", "-e", "cycles", "-F", "500", "--duration", "0.5"]);
    let stderr = &out.exited(0).stderr;
    if hardware_cycles() {
        assert!(!stderr.contains("not supported"), "{stderr}");
    } else {
        assert_eq!(
            stderr.matches("cycles not supported").count(),
            1,
            "said once: {stderr}"
        );
        assert!(stderr.contains("using cpu-clock"), "{stderr}");
    }
    // Samples arrive either way, each with a CPU, a period and an ip.
    let samples: Vec<Value> = out
        .json()
        .into_iter()
        .filter(|v| v["type"] == "sample")
        .collect();
    assert!(!samples.is_empty(), "{stderr}");
    assert!(
        samples
            .iter()
            .all(|s| s["sample_period"].as_u64().unwrap() > 0)
    );
}

#[test]
fn task_target_falls_back_to_task_clock() {
    require_perf!();
    if hardware_cycles() {
        skip!("this machine has a hardware cycles counter: there is no fallback to see");
    }
    let out = run_args(&["--plain", "--", "true"]);
    out.exited(0)
        .said(&["cycles not supported", "using task-clock"]);
}

#[test]
fn a_closed_pipe_ends_quietly_with_zero() {
    require_perf!();
    // `perfwatch --plain | head -3`, with a load that keeps records coming.
    let out = Command::new("sh")
        .args([
            "-c",
            &format!(
                "( {} --plain -e cpu-clock -F 2000 -- sh -c 'while :; do (exit 0); done'; echo \"rc=$?\" >&2 ) | head -3",
                cargo_bin("perfwatch").display()
            ),
        ])
        .output_in_time()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stdout.lines().count(), 3, "{stdout}");
    assert!(stderr.contains("rc=0"), "{stderr}");
    assert!(!stderr.contains("error"), "{stderr}");
}

#[test]
fn sigint_and_sigterm_stop_cleanly_with_a_summary() {
    require_perf!();
    // perfwatch() starts the child with these signals at their defaults, also when `cargo
    // test` runs under nohup (SIGHUP ignored, which perfwatch would rightly keep ignoring).
    for (sig, code) in [(libc::SIGINT, 0), (libc::SIGTERM, 143), (libc::SIGHUP, 129)] {
        println!("signal {sig}");
        let mut child = perfwatch()
            .args(["--plain", "-e", "dummy"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Signalled once its events are open (its handlers are installed before), not after
        // a guess at how long a loaded machine takes to start it.
        common::wait_until_watching(&mut child);
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        Run::from(child.output_in_time().unwrap())
            .exited(code)
            .said(&["records in", "lost by the kernel"]);
    }
}

#[test]
fn cpu_list_restricts_the_cpus() {
    require_perf!();
    let out = run_args(&[
        "--json",
        "-C",
        "0",
        "-e",
        "cpu-clock",
        "-F",
        "1000",
        "-d",
        "0.5",
    ]);
    out.exited(0).said(&["cpu 0:"]).never_said(&["cpu 1:"]);
    let lines = out.json();
    assert!(!lines.is_empty());
    assert!(lines.iter().all(|v| v["sample_cpu"] == 0));
}

#[test]
fn context_switch_records_with_switch() {
    require_perf!();
    let out = run_args(&[
        "--json",
        "--switch",
        "-e",
        "dummy",
        "--",
        "sh",
        "-c",
        "sleep 0.05; sleep 0.05",
    ]);
    out.exited(0);
    let lines = out.json();
    assert!(
        lines
            .iter()
            .any(|v| v["type"] == "context_switch" && v["switch_out"] == true)
    );
    assert!(
        lines
            .iter()
            .any(|v| v["type"] == "context_switch" && v["switch_out"] == false)
    );
}

#[test]
fn an_overflowing_ring_is_accounted_as_lost() {
    require_perf!();
    // A one-page ring and a consumer that reads nothing until every fork is done: the
    // readers wait on the full channel, the kernel ring overflows, and LOST records say how
    // much. (A consumer that slept a fixed second let a slow machine fork too little before
    // it, and nothing overflowed.)
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("out.json");
    let err_file = dir.path().join("err.txt");
    let pid_file = dir.path().join("forker.pid");
    let done = dir.path().join("done");
    let forker = dir.path().join("forker.sh");
    std::fs::write(
        &forker,
        format!(
            "{}\n: > '{}'\n",
            forker_script(3000, Some(&pid_file)),
            done.display()
        ),
    )
    .unwrap();
    let cmd = format!(
        "{} --json -a -m 1 -e dummy -- sh '{}' 2>'{}' | \
         (until [ -e '{}' ]; do sleep 0.05; done; cat > '{}')",
        cargo_bin("perfwatch").display(),
        forker.display(),
        err_file.display(),
        done.display(),
        out_file.display()
    );
    assert!(
        Command::new("sh")
            .args(["-c", &cmd])
            .status_in_time()
            .unwrap()
            .success()
    );
    let stderr = std::fs::read_to_string(&err_file).unwrap();
    let lines = json_lines(&std::fs::read_to_string(&out_file).unwrap());
    let lost_in_records: u64 = lines
        .iter()
        .filter(|v| v["type"] == "lost")
        .map(|v| v["lost"].as_u64().unwrap())
        .sum();
    let summary_lost: u64 = stderr
        .split("lost by the kernel: ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no summary: {stderr}"));
    assert!(
        summary_lost > 0,
        "expected an overflow with a one-page ring: {stderr}"
    );
    // LOST records lag (the kernel writes one only when the ring has room again and another
    // record follows); the summary also counts what the events' PERF_FORMAT_LOST reports.
    assert!(
        lost_in_records <= summary_lost,
        "records {lost_in_records} > summary {summary_lost}"
    );
    // No fork of the forker goes unaccounted: each one was either seen or counted as lost.
    // (Only its own: -a also sees whatever else the machine forks meanwhile.)
    let forker: u64 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let forks = lines
        .iter()
        .filter(|v| v["type"] == "fork" && v["ppid"] == forker && v["pid"] == v["tid"])
        .count() as u64;
    assert!(forks <= 3001, "{forks}");
    assert!(
        forks + summary_lost >= 3001,
        "forks seen {forks} + lost {summary_lost} < 3001"
    );
}

#[test]
fn pid_mode_covers_every_thread_of_a_multithreaded_process() {
    require_perf!();
    // Four threads exist before perfwatch attaches; each forks and execs a child once let go.
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    common::mkfifo(&go);
    let py = format!(
        "import os, threading\n\
         gate = threading.Event()\n\
         def work():\n    gate.wait()\n    pid = os.fork()\n    if pid == 0:\n        os.execv('/bin/sleep', ['sleep', '0'])\n    os.waitpid(pid, 0)\n\
         ts = [threading.Thread(target=work) for _ in range(4)]\n\
         [t.start() for t in ts]\n\
         open('{}').read()\n\
         gate.set()\n\
         [t.join() for t in ts]\n",
        go.display()
    );
    let mut target = Command::new("python3").args(["-c", &py]).spawn().unwrap();
    let pid = target.id();
    // Wait until the four threads exist (as long as a loaded machine takes to start Python,
    // within the deadline: going on before would attach to fewer threads).
    let t0 = std::time::Instant::now();
    while std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count()) < 5 {
        assert!(
            t0.elapsed() < common::deadline(),
            "python never started its four threads"
        );
        assert!(
            target.try_wait().unwrap().is_none(),
            "python exited before it started its threads"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = watch_pid_then_release(&mut target, &go);
    let stderr = &out.exited(0).stderr;
    let lines = out.json();
    let children: BTreeSet<u64> = lines
        .iter()
        .filter(|v| v["type"] == "fork" && v["ppid"] == pid as u64 && v["pid"] != pid as u64)
        .map(|v| v["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(children.len(), 4, "a fork from each thread: {stderr}");
    let execs = lines
        .iter()
        .filter(|v| v["type"] == "comm" && v["exec"] == true && v["comm"] == "sleep")
        .count();
    assert_eq!(execs, 4, "{stderr}");
    let thread_exits = lines
        .iter()
        .filter(|v| v["type"] == "exit" && v["pid"] == pid as u64)
        .count();
    assert_eq!(
        thread_exits, 5,
        "four threads and the main thread exit: {stderr}"
    );
}

#[test]
fn tracepoints_sample_every_hit() {
    // tracefs is not mounted by default on this kind of machine; as root the test mounts it,
    // as `perf trace` users do, and the guard unmounts it again however the test ends.
    let _tracefs = require_tracefs!();
    if !std::path::Path::new(common::TRACEFS)
        .join("events/sched/sched_process_fork")
        .exists()
    {
        skip!(
            "no sched:sched_process_fork tracepoint in {}",
            common::TRACEFS
        );
    }
    let out = run_args(&[
        "--json",
        "-e",
        "sched:sched_process_fork",
        "--",
        "sh",
        "-c",
        "(exit 0) & (exit 0) & wait",
    ]);
    let stderr = &out.exited(0).stderr;
    let lines = out.json();
    let samples = lines.iter().filter(|v| v["type"] == "sample").count();
    let forks = lines
        .iter()
        .filter(|v| v["type"] == "fork" && v["pid"] == v["tid"])
        .count();
    assert_eq!(samples, forks, "one tracepoint hit per fork: {stderr}");
    assert_eq!(forks, 2, "{stderr}");
}
