//! perfwatch-stress does what its JSON report says it did: the counts add up, and (under
//! perfwatch, against the real kernel) every pid, tid, exec and mapping it reports was made.

use crate::common;

use common::InTime;

use std::collections::{HashMap, HashSet};
use std::process::Command;

use serde_json::Value;

const STRESS: &str = env!("CARGO_BIN_EXE_perfwatch-stress");
const PERFWATCH: &str = env!("CARGO_BIN_EXE_perfwatch");

fn stress(args: &[&str]) -> Value {
    let out = Command::new(STRESS)
        .args(args)
        .output_in_time()
        .expect("run perfwatch-stress");
    assert!(
        out.status.success(),
        "perfwatch-stress {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("perfwatch-stress prints one JSON object")
}

fn ids(v: &Value, key: &str) -> Vec<i64> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} is a list: {v}"))
        .iter()
        .map(|p| p.as_i64().expect("ids are numbers"))
        .collect()
}

/// Run `perfwatch --json -e dummy -- perfwatch-stress ARGS`; returns the stress report and
/// perfwatch's records.
fn under_perfwatch(args: &[&str]) -> (Value, Vec<Value>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let report = dir.path().join("stress.json");
    let out = Command::new(PERFWATCH)
        .args(["--json", "-e", "dummy", "--", STRESS])
        .args(args)
        .arg("-o")
        .arg(&report)
        .output_in_time()
        .expect("run perfwatch");
    assert!(
        out.status.success(),
        "perfwatch failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "lost by the kernel: 0 records (ring full), 0 samples; dropped by perfwatch: 0"
        ),
        "records were lost, the check below would be meaningless: {stderr}"
    );
    let records = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let report = std::fs::read(&report).expect("the stress report");
    (
        serde_json::from_slice(&report).expect("JSON report"),
        records,
    )
}

fn of_type<'a>(records: &'a [Value], t: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    records.iter().filter(move |r| r["type"] == t)
}

fn check_common(v: &Value, mode: &str, n: u64) {
    assert_eq!(v["tool"], "perfwatch-stress");
    assert_eq!(v["mode"], mode);
    assert_eq!(v["done"].as_u64(), Some(n), "{v}");
    assert_eq!(v["errors"].as_u64(), Some(0), "{v}");
    assert!(v["first_error"].is_null());
    let (s, e) = (
        v["start_ns"].as_u64().unwrap(),
        v["end_ns"].as_u64().unwrap(),
    );
    assert!(s > 0 && e >= s, "{v}");
    assert!(v["elapsed_s"].as_f64().unwrap() >= 0.0);
}

#[test]
fn fork_reports_distinct_reaped_children() {
    let v = stress(&["fork", "--count", "100"]);
    check_common(&v, "fork", 100);
    let pids = ids(&v, "pids");
    assert_eq!(pids.len(), 100);
    assert_eq!(
        pids.iter().collect::<HashSet<_>>().len(),
        100,
        "pids repeat"
    );
    let me = v["pid"].as_i64().unwrap();
    assert!(!pids.contains(&me));
    // Every child was reaped: none is left as a zombie of the (now gone) stress process.
    for p in &pids {
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) {
            let ppid: i64 = stat
                .rsplit(')')
                .next()
                .and_then(|s| s.split_whitespace().nth(1))
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            assert_ne!(ppid, me, "pid {p} is still a child of the stress process");
        }
    }
}

#[test]
fn every_mode_counts_what_it_was_asked() {
    let v = stress(&["threads", "-n", "50"]);
    check_common(&v, "threads", 50);
    let tids = ids(&v, "tids");
    assert_eq!(tids.iter().collect::<HashSet<_>>().len(), 50);
    assert!(!tids.contains(&v["pid"].as_i64().unwrap()));

    let v = stress(&["mmap", "-n", "500"]);
    check_common(&v, "mmap", 500);
    let file = v["file"].as_str().unwrap().to_string();
    assert!(
        !std::path::Path::new(&file).exists(),
        "the temporary file {file} is removed"
    );

    let v = stress(&["exec", "-n", "20"]);
    check_common(&v, "exec", 20);
    assert_eq!(v["comm"], "true");
    assert_eq!(ids(&v, "pids").len(), 20);
}

#[test]
fn duration_and_rate_are_honoured() {
    let v = stress(&["fork", "--duration", "500ms", "--rate", "100"]);
    let done = v["done"].as_u64().unwrap();
    assert!((40..=51).contains(&done), "100/s for 0.5 s made {done}");
    let el = v["elapsed_s"].as_f64().unwrap();
    assert!((0.45..1.5).contains(&el), "elapsed {el}");
    assert_eq!(v["requested"]["rate"].as_f64(), Some(100.0));
    assert_eq!(ids(&v, "pids").len() as u64, done);
}

#[test]
fn spin_busies_each_cpu_it_is_given() {
    let v = stress(&["spin", "--duration", "300ms", "-C", "0"]);
    let per_cpu = v["per_cpu"].as_array().unwrap();
    assert_eq!(per_cpu.len(), 1);
    assert_eq!(per_cpu[0]["cpu"], 0);
    assert_eq!(per_cpu[0]["pinned"], true);
    assert!(per_cpu[0]["slices"].as_u64().unwrap() > 0);
    assert!(per_cpu[0]["cpu_time_s"].as_f64().unwrap() > 0.0);
    assert_eq!(v["done"], per_cpu[0]["slices"]);
    // A count is slices per CPU.
    let v = stress(&["spin", "--count", "5"]);
    for c in v["per_cpu"].as_array().unwrap() {
        assert_eq!(c["slices"], 5);
    }
}

#[test]
fn bad_input_is_a_clear_error() {
    for (args, msg) in [
        (&["exec", "--program", "/no/such/prog"][..], "/no/such/prog"),
        (&["fork", "--rate=-3"][..], "--rate"),
        (&["spin", "-C", "x"][..], "'x'"),
        (&["mmap", "--file", "/no/such/file"][..], "/no/such/file"),
    ] {
        let out = Command::new(STRESS).args(args).output_in_time().unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(msg), "{args:?}: {err}");
    }
}

#[test]
fn perfwatch_sees_every_fork_and_exit_it_reports() {
    require_perf!();
    let (v, records) = under_perfwatch(&["fork", "-n", "200"]);
    check_common(&v, "fork", 200);
    let me = v["pid"].as_i64().unwrap();
    let forked: HashSet<i64> = of_type(&records, "fork")
        .filter(|r| r["ppid"].as_i64() == Some(me))
        .map(|r| r["pid"].as_i64().unwrap())
        .collect();
    let exited: HashSet<i64> = of_type(&records, "exit")
        .map(|r| r["pid"].as_i64().unwrap())
        .collect();
    for p in ids(&v, "pids") {
        assert!(forked.contains(&p), "no fork record for pid {p}");
        assert!(exited.contains(&p), "no exit record for pid {p}");
    }
}

#[test]
fn perfwatch_sees_every_exec_thread_and_mapping_it_reports() {
    require_perf!();
    let (v, records) = under_perfwatch(&["exec", "-n", "20"]);
    check_common(&v, "exec", 20);
    let execs: HashSet<i64> = of_type(&records, "comm")
        .filter(|r| r["exec"] == true && r["comm"] == v["comm"])
        .map(|r| r["pid"].as_i64().unwrap())
        .collect();
    for p in ids(&v, "pids") {
        assert!(execs.contains(&p), "no exec comm record for pid {p}");
    }

    let (v, records) = under_perfwatch(&["threads", "-n", "30"]);
    check_common(&v, "threads", 30);
    let me = v["pid"].as_i64().unwrap();
    let threads: HashSet<i64> = of_type(&records, "fork")
        .filter(|r| r["pid"].as_i64() == Some(me))
        .map(|r| r["tid"].as_i64().unwrap())
        .collect();
    for t in ids(&v, "tids") {
        assert!(threads.contains(&t), "no fork record for thread {t}");
    }

    let (v, records) = under_perfwatch(&["mmap", "-n", "300"]);
    check_common(&v, "mmap", 300);
    let mut maps: HashMap<String, u64> = HashMap::new();
    for r in of_type(&records, "mmap").filter(|r| r["pid"] == v["pid"]) {
        *maps
            .entry(r["filename"].as_str().unwrap_or("").to_string())
            .or_default() += 1;
    }
    let file = v["file"].as_str().unwrap();
    assert_eq!(maps.get(file), Some(&300), "mmap records by file: {maps:?}");
}

#[test]
fn sleepers_are_alive_together_until_the_hold_ends_then_reaped() {
    use std::io::BufRead;
    let mut child = Command::new(STRESS)
        .args(["sleepers", "--count", "40", "--hold", "3"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run perfwatch-stress sleepers");
    let me = child.id();
    // Readiness: the line it writes once every child is started (the stress ends after the
    // hold whatever happens, which closes stderr).
    let mut line = String::new();
    std::io::BufReader::new(child.stderr.take().expect("stderr"))
        .read_line(&mut line)
        .expect("read stderr");
    assert_eq!(line.trim(), "perfwatch-stress: 40 sleepers ready");
    let children: Vec<u32> = std::fs::read_to_string(format!("/proc/{me}/task/{me}/children"))
        .expect("the stress's children")
        .split_whitespace()
        .map(|p| p.parse().expect("a pid"))
        .collect();
    assert_eq!(children.len(), 40, "all alive at once: {children:?}");
    // Each child goes to sleep soon after its fork (on a loaded machine, not at once).
    let state = |c: u32| {
        let stat = std::fs::read_to_string(format!("/proc/{c}/stat")).expect("a live child");
        let s = stat
            .rsplit(')')
            .next()
            .and_then(|s| s.split_whitespace().next());
        (s.map(str::to_string), stat)
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
    for &c in &children {
        loop {
            let (s, stat) = state(c);
            if s.as_deref() == Some("S") {
                break;
            }
            assert!(
                std::time::Instant::now() < until,
                "child {c} never slept: {stat}"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
    let out = child.output_in_time().expect("perfwatch-stress ends");
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    check_common(&v, "sleepers", 40);
    let mut reported: Vec<u32> = ids(&v, "pids").iter().map(|&p| p as u32).collect();
    let mut made = children.clone();
    reported.sort_unstable();
    made.sort_unstable();
    assert_eq!(
        reported, made,
        "the report names the children that were alive"
    );
    for c in &children {
        // Reaped: gone, or the pid already reused by a process that is not its child.
        let parent = std::fs::read_to_string(format!("/proc/{c}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit(')')
                    .next()?
                    .split_whitespace()
                    .nth(1)?
                    .parse::<u32>()
                    .ok()
            });
        assert_ne!(
            parent,
            Some(me),
            "child {c} still there after the stress ended"
        );
    }
}
