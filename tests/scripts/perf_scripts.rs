//! Scripts written for `perf script -s` run live under `perfwatch --script`, and print what
//! perf script prints for the same workload: perf's shipped scripts (Debian's linux-perf
//! puts them in /usr/lib/perf-core/scripts/python), run side by side with `perf record` +
//! `perf script -s` on C programs with known counts, and scripts of the convention written
//! here.
#![cfg(feature = "python")]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{InTime, Run, run, temp_script};

/// Where Debian's `linux-perf` puts perf's own Python scripts.
const PERF_SCRIPTS: &str = "/usr/lib/perf-core/scripts/python";

/// N failing `openat`s (EBADF: a directory descriptor that is not open), which nothing
/// else in the program makes.
const FAIL_OPEN: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 0;
    for (int i = 0; i < n; i++) openat(12345, "perfwatch-no-such-file", O_RDONLY);
    return 0;
}
"#;

/// N `FUTEX_WAIT`s on a word that does not hold the value waited for: each returns EAGAIN
/// at once, and each is a wait futex-contention.py counts.
const FUTEX_WAIT: &str = r#"
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
static int word = 1;
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 0;
    for (int i = 0; i < n; i++) syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    return 0;
}
"#;

/// Spins in main -> outer -> inner (frame pointers kept) for about `argv[1]` ms of CPU.
const SPIN: &str = r#"
#include <stdlib.h>
#include <time.h>
static volatile unsigned long sink;
__attribute__((noinline)) static void spin_inner(void) { for (int i = 0; i < 100000; i++) sink += i; }
__attribute__((noinline)) static void spin_outer(void) { spin_inner(); }
int main(int argc, char **argv) {
    long ms = argc > 1 ? atol(argv[1]) : 100;
    struct timespec t0, t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    do {
        spin_outer();
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
    return 0;
}
"#;

/// A C program built here (`cc -O1 -fno-omit-frame-pointer`).
fn cc(dir: &Path, name: &str, src: &str) -> PathBuf {
    common::cc(dir, name, src, &["-O1", "-fno-omit-frame-pointer"])
}

fn shipped(name: &str) -> Option<PathBuf> {
    let p = Path::new(PERF_SCRIPTS).join(name);
    p.is_file().then_some(p)
}

/// The perf script `name` as Debian's linux-perf ships it, or return from the calling test
/// with a visible skip.
macro_rules! shipped {
    ($name:expr) => {
        match shipped($name) {
            Some(path) => path,
            None => skip!("{} is not in {PERF_SCRIPTS} (Debian: linux-perf)", $name),
        }
    };
}

/// `perf record -e EVENTS -- PROG ARGS`, then `perf script -s SCRIPT SCRIPT_ARGS`: its stdout.
fn perf_side(dir: &Path, events: &str, prog: &[&str], script: &Path, args: &[&str]) -> String {
    let data = dir.join("perf.data");
    let rec = Command::new("perf")
        .args(["record", "-q", "-e", events, "-o"])
        .arg(&data)
        .arg("--")
        .args(prog)
        .output_in_time()
        .unwrap();
    assert!(rec.status.success(), "perf record: {rec:?}");
    let out = Command::new("perf")
        .args(["script", "-i"])
        .arg(&data)
        .arg("-s")
        .arg(script)
        .args(args)
        .output_in_time()
        .unwrap();
    assert!(out.status.success(), "perf script: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `perfwatch --plain -e EVENTS --script SCRIPT --script-arg ARGS... -- PROG`.
fn perfwatch_side(events: &str, prog: &[&str], script: &Path, args: &[&str]) -> Run {
    let mut c = common::perfwatch();
    c.args(["--plain", "-e", events, "--script"]).arg(script);
    for a in args {
        c.arg(format!("--script-arg={a}"));
    }
    let r = run(c.arg("--").args(prog));
    r.exited(0);
    r
}

/// The lines of a script's output that say something about the workload: without perf's
/// audit notice (perfwatch's own Util says it on stderr instead), and with `[PID]` made
/// `[PID]` (two runs, two pids).
fn lines(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| {
            !(l.contains("audit-libs-python")
                || l.starts_with("For example:")
                || l.starts_with("  # ")
                || l.trim() == "etc.")
        })
        .map(|l| {
            let mut s = l.trim_end().to_string();
            if let (Some(a), Some(b)) = (s.rfind('['), s.rfind(']')) {
                if a < b && s[a + 1..b].bytes().all(|c| c.is_ascii_digit()) && b > a + 1 {
                    s.replace_range(a + 1..b, "PID");
                }
            }
            s
        })
        // perf's audit notice ends with an empty line.
        .skip_while(|l| l.is_empty())
        .collect()
}

macro_rules! require_perf_tool {
    () => {
        if !common::installed("perf") {
            skip!("perf is not installed (Debian: linux-perf)");
        }
    };
}

#[test]
fn failed_syscalls_and_syscall_counts_print_what_perf_script_prints() {
    let _tracefs = require_tracefs!();
    require_perf_tool!();
    let dir = tempfile::tempdir().unwrap();
    let prog = cc(dir.path(), "pwfailopen", FAIL_OPEN);
    let prog = prog.to_str().unwrap();
    const N: usize = 173;
    let n = N.to_string();
    for (script, event) in [
        ("failed-syscalls-by-pid.py", "raw_syscalls:sys_exit"),
        ("syscall-counts.py", "raw_syscalls:sys_enter"),
        ("syscall-counts-by-pid.py", "raw_syscalls:sys_enter"),
    ] {
        let Some(path) = shipped(script) else {
            skip!("{script} is not in {PERF_SCRIPTS} (Debian: linux-perf)");
        };
        let perf = perf_side(dir.path(), event, &[prog, &n], &path, &["pwfailopen"]);
        let ours = perfwatch_side(event, &[prog, &n], &path, &["pwfailopen"]);
        assert_eq!(
            lines(&ours.stdout),
            lines(&perf),
            "{script}: perfwatch's stdout, then perf script's"
        );
        // And the count the program is known to make: N openat (257 on x86_64) from it.
        let words = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let known = ours.stdout.lines().map(words).any(|w| match script {
            "failed-syscalls-by-pid.py" => w == ["err", "=", "EBADF", &n],
            _ => w.len() == 2 && w[0] == "257" && w[1].parse::<usize>().is_ok_and(|c| c >= N),
        });
        assert!(
            known,
            "{script}: the {N} openat are not counted:\n{}",
            ours.stdout
        );
        // Only the script's output on stdout: no record lines.
        assert!(!ours.stdout.contains("cpu: "), "{}", ours.stdout);
    }
}

/// On one recording, `perfwatch -i X --script S` prints what `perf script -i X -s S` prints,
/// for perf's shipped scripts: the syscall counters on a recording of both raw_syscalls
/// tracepoints, stackcollapse on a `-g` one. A recording waits for its scripts: none of its
/// events may pass around them (a fast reader and a slow script once lost 5% here).
#[test]
fn perfs_scripts_print_on_a_recording_what_perf_script_prints() {
    let _tracefs = require_tracefs!();
    require_perf_tool!();
    let dir = tempfile::tempdir().unwrap();
    let failopen = cc(dir.path(), "pwfailopen", FAIL_OPEN);
    let spin = cc(dir.path(), "pwspin", SPIN);
    let record = |name: &str, args: &[&str], prog: &[&std::ffi::OsStr]| -> PathBuf {
        let data = dir.path().join(name);
        let rec = Command::new("perf")
            .args(["record", "-q", "-o"])
            .arg(&data)
            .args(args)
            .arg("--")
            .args(prog)
            .output_in_time()
            .unwrap();
        assert!(rec.status.success(), "perf record: {rec:?}");
        data
    };
    let syscalls = record(
        "sys.data",
        &[
            "-e",
            "raw_syscalls:sys_enter",
            "-e",
            "raw_syscalls:sys_exit",
        ],
        &[failopen.as_os_str(), "30000".as_ref()],
    );
    let stacks = record(
        "g.data",
        &["-g", "-e", "task-clock", "-F", "997"],
        &[spin.as_os_str(), "200".as_ref()],
    );
    // A slow handler (50 µs an event): the recording is read far faster than it runs.
    let slow = dir.path().join("slow-count.py");
    std::fs::write(
        &slow,
        "import time\nn = 0\ndef raw_syscalls__sys_enter(event_name, context, common_cpu, \
         common_secs, common_nsecs, common_pid, common_comm, common_callchain, id, args):\n    \
         global n\n    n += 1\n    time.sleep(0.00005)\n\
         def trace_unhandled(event_name, context, event_fields_dict):\n    pass\n\
         def trace_end():\n    print('sys_enter', n)\n",
    )
    .unwrap();
    // perf_sample_dict's keys, and the values perf gives what a sample did not record
    // (branch stacks, registers, data source, read values) and the binary's build id and
    // mapping.
    let dict = dir.path().join("sample-dict.py");
    std::fs::write(
        &dict,
        r#"keys = set(); consts = set(); maps = set()
def process_event(d):
    keys.update("top." + k for k in d)
    keys.update("sample." + k for k in d["sample"])
    for k in ("brstack", "brstacksym", "iregs", "uregs"):
        consts.add((k, repr(d[k])))
    for k in ("datasrc", "datasrc_decode", "values"):
        consts.add((k, repr(d["sample"][k])))
    if d.get("dso", "").endswith("/pwspin"):
        maps.add(repr((d.get("dso_bid"), d.get("dso_map_start"), d.get("dso_map_end"))))
def trace_end():
    for k in sorted(keys): print(k)
    for c in sorted(consts): print(*c)
    for m in sorted(maps): print("map", m)
"#,
    )
    .unwrap();
    // The frames of the program's own functions as perf gives them: the symbol's start
    // and end in the binary, the offset, the binary; every frame's symbol binding (local,
    // global, weak: libc's and the kernel's have all three); and the sample's CPU, which perf gives
    // as -1 (read as an unsigned 32-bit number) when the samples carry none, as a per-task
    // recording's do.
    let frames = dir.path().join("frames.py");
    std::fs::write(
        &frames,
        r#"seen = set()
def process_event(d):
    seen.add("cpu %d" % d["sample"]["cpu"])
    for f in d.get("callchain", []):
        if "sym" in f:
            seen.add("binding %s %d" % (f["sym"]["name"], f["sym"]["binding"]))
        if f.get("dso", "").endswith("/pwspin") and "sym" in f:
            s = f["sym"]
            seen.add("%s %#x %#x +%#x" % (s["name"], s["start"], s["end"], f["sym_off"]))
def trace_end():
    for l in sorted(seen): print(l)
"#,
    )
    .unwrap();
    for (script, data) in [
        ("frames.py", &stacks),
        ("sample-dict.py", &stacks),
        ("syscall-counts.py", &syscalls),
        ("syscall-counts-by-pid.py", &syscalls),
        ("failed-syscalls-by-pid.py", &syscalls),
        ("stackcollapse.py", &stacks),
        ("slow-count.py", &syscalls),
    ] {
        let path = match shipped(script) {
            Some(p) => p,
            None if script == "slow-count.py" => slow.clone(),
            None if script == "sample-dict.py" => dict.clone(),
            None if script == "frames.py" => frames.clone(),
            None => skip!("{script} is not in {PERF_SCRIPTS} (Debian: linux-perf)"),
        };
        let perf = Command::new("perf")
            .args(["script", "-i"])
            .arg(data)
            .arg("-s")
            .arg(&path)
            .output_in_time()
            .unwrap();
        assert!(perf.status.success(), "perf script: {perf:?}");
        let ours = run(common::perfwatch()
            .arg("-i")
            .arg(data)
            .arg("--script")
            .arg(&path));
        ours.exited(0);
        // Dicts print in hash order in some of them: the same lines, as a set.
        let sorted = |out: &str| {
            let mut v = lines(out);
            v.sort();
            v
        };
        let want = sorted(&String::from_utf8_lossy(&perf.stdout));
        // perf printed what the script is for: the tables' lines, the program's stacks (how
        // many distinct stacks a 200 ms spin leaves is chance: one was two lines, once).
        let enough = match script {
            "slow-count.py" => true,
            "stackcollapse.py" => want.iter().any(|l| l.contains(";spin_inner ")),
            _ => want.len() >= 3,
        };
        assert!(enough, "{script}: perf printed {want:?}");
        assert_eq!(
            sorted(&ours.stdout),
            want,
            "{script}: perfwatch -i, then perf script -i; perfwatch said:\n{}",
            ours.stderr
        );
        assert!(
            ours.stderr.contains("dropped by perfwatch: 0"),
            "{script}: {}",
            ours.stderr
        );
    }
}

#[test]
fn futex_contention_counts_every_wait() {
    let _tracefs = require_tracefs!();
    require_perf_tool!();
    let path = shipped!("futex-contention.py");
    let dir = tempfile::tempdir().unwrap();
    let prog = cc(dir.path(), "pwfutex", FUTEX_WAIT);
    let prog = prog.to_str().unwrap();
    let events = "syscalls:sys_enter_futex,syscalls:sys_exit_futex";
    // "pwfutex[PID] lock ADDR contended N times, ..." (addresses and times vary).
    let counted = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| l.starts_with("pwfutex["))
            .filter_map(|l| l.split(" contended ").nth(1))
            .map(|l| l.split(',').next().unwrap_or("").to_string())
            .collect()
    };
    let perf = perf_side(dir.path(), events, &[prog, "91"], &path, &[]);
    let ours = perfwatch_side(events, &[prog, "91"], &path, &[]);
    assert_eq!(
        counted(&ours.stdout),
        counted(&perf),
        "{}\n{perf}",
        ours.stdout
    );
    assert!(
        ours.stdout.contains("contended 91 times"),
        "{}",
        ours.stdout
    );
    // Without -e: the tracepoints its handlers are for, said on stderr.
    let r = run(common::perfwatch()
        .args(["--plain", "--script"])
        .arg(&path)
        .args(["--", prog, "23"]));
    r.exited(0).said(&[
        "no -e: opening the tracepoints the script's handlers are for: \
         syscalls:sys_enter_futex,syscalls:sys_exit_futex",
    ]);
    assert!(r.stdout.contains("contended 23 times"), "{}", r.stdout);
}

#[test]
fn check_perf_trace_counts_the_unhandled_and_names_symbolic_values() {
    let _tracefs = require_tracefs!();
    require_perf_tool!();
    let path = shipped!("check-perf-trace.py");
    let dir = tempfile::tempdir().unwrap();
    let prog = cc(dir.path(), "pwcheck", FAIL_OPEN);
    let prog = prog.to_str().unwrap();
    let events = "syscalls:sys_enter_openat";
    let perf = perf_side(dir.path(), events, &[prog, "57"], &path, &[]);
    let ours = perfwatch_side(events, &[prog, "57"], &path, &[]);
    // trace_unhandled counted every openat, as perf's did.
    let unhandled = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| l.starts_with("syscalls__sys_enter_openat"))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect()
    };
    assert_eq!(unhandled(&ours.stdout), unhandled(&perf), "{}", ours.stdout);
    assert_eq!(unhandled(&ours.stdout).len(), 1, "{}", ours.stdout);
    assert_eq!(lines(&ours.stdout), lines(&perf));
    // Its softirq handler names `vec` through the symbolic values defined from the print
    // fmt, and reads the common fields through perf_trace_context (the whole system for a
    // second: softirqs run every tick somewhere).
    let r = run(common::perfwatch()
        .args([
            "--plain",
            "-a",
            "-e",
            "irq:softirq_entry",
            "-d",
            "1",
            "--script",
        ])
        .arg(&path));
    r.exited(0);
    let vecs: Vec<&str> = r.stdout.lines().filter(|l| l.starts_with("vec=")).collect();
    assert!(!vecs.is_empty(), "no softirq:\n{}", r.stdout);
    let names = [
        "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER",
        "RCU",
    ];
    assert!(
        vecs.iter().all(|l| names.contains(&&l["vec=".len()..])),
        "{vecs:?}"
    );
    assert!(
        r.stdout.contains("common_preempt_count=") && r.stdout.contains("common_lock_depth=-1"),
        "{}",
        r.stdout
    );
}

#[test]
fn stackcollapse_folds_the_live_stacks() {
    require_perf!();
    let path = shipped!("stackcollapse.py");
    let dir = tempfile::tempdir().unwrap();
    let prog = cc(dir.path(), "pwspin", SPIN);
    // With perfwatch's own Core and EventClass (it imports both); the folded stacks into a
    // file, bare as `perf script -s stackcollapse.py > FILE` writes them.
    let folded = dir.path().join("stacks.folded");
    let r = run(common::perfwatch()
        .env("PERFWATCH_BUILTIN_PERF_TRACE", "1")
        .args(["--plain", "-g", "-e", "task-clock", "-F", "997", "--script"])
        .arg(&path)
        .arg("--script-output")
        .arg(&folded)
        .arg("--")
        .arg(&prog)
        .arg("400"));
    r.exited(0);
    assert_eq!(
        r.stdout, "",
        "neither records nor the script's output on stdout"
    );
    let text = std::fs::read_to_string(&folded).unwrap();
    let mut total = 0;
    for l in text.lines() {
        let (stack, n) = l.rsplit_once(' ').unwrap_or_else(|| panic!("{l:?}"));
        assert!(stack.starts_with("pwspin;"), "{l}");
        total += n.parse::<u64>().unwrap_or_else(|_| panic!("{l:?}"));
    }
    assert!(
        text.lines()
            .any(|l| l.contains(";main;") && l.contains("spin_inner")),
        "{text}"
    );
    assert!(total >= 100, "{total} samples:\n{text}");
}

/// flamegraph.py binds its handlers under `if __name__ == "__main__":`: perf runs a script
/// as `__main__`, and so does perfwatch.
#[test]
fn flamegraph_runs_as_main_and_writes_its_json() {
    require_perf!();
    let path = shipped!("flamegraph.py");
    let dir = tempfile::tempdir().unwrap();
    let prog = cc(dir.path(), "pwflame", SPIN);
    let json = dir.path().join("flame.json");
    let r = run(common::perfwatch()
        .args(["--plain", "-g", "-e", "task-clock", "-F", "997", "--script"])
        .arg(&path)
        .args([
            "--script-arg=--format=json",
            "--script-arg=-o",
            "--script-arg",
        ])
        .arg(&json)
        .arg("--")
        .arg(&prog)
        .arg("300"));
    r.exited(0);
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("{e}: {}", r.stderr));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["n"], "all", "{text}");
    assert!(
        text.contains("\"pwflame (") && text.contains("spin_inner"),
        "{text}"
    );
}

/// A perf script written here: perf's argument lists and types (an array as a bytearray,
/// the perf_sample_dict as the last argument of a handler that takes one more), trace_unhandled
/// with the dict form, sys.argv, perf_trace_context; run with perfwatch's own Core and Util.
const OWN: &str = r#"
import os, struct, sys
sys.path.append(os.environ['PERF_EXEC_PATH'] + '/scripts/python/Perf-Trace-Util/lib/Perf/Trace')
from perf_trace_context import *
from Core import *
from Util import *

target = sys.argv[1]
bad_dirfd = 0
failed = 0
unhandled = {}
problems = []

def trace_begin():
    # Defined from the print fmt before trace_begin, for a tracepoint a handler names.
    print("argv", sys.argv[1:], symbol_str("irq__softirq_entry", "vec", 1))

def irq__softirq_entry(event_name, context, common_cpu, common_secs, common_nsecs,
                       common_pid, common_comm, common_callchain, vec):
    pass

def raw_syscalls__sys_enter(event_name, context, common_cpu, common_secs, common_nsecs,
                            common_pid, common_comm, common_callchain, id, args):
    global bad_dirfd
    if common_comm != target:
        return
    if not isinstance(args, bytearray) or len(args) != 48:
        problems.append("args %r" % (args,))
    if id == 257 and struct.unpack("6q", args)[0] == 12345:
        bad_dirfd += 1
    if not isinstance(common_pc(context), int):
        problems.append("common_pc")

def raw_syscalls__sys_exit(event_name, context, common_cpu, common_secs, common_nsecs,
                           common_pid, common_comm, common_callchain, id, ret,
                           perf_sample_dict):
    global failed
    if common_comm != target:
        return
    s = perf_sample_dict["sample"]
    if perf_sample_dict["ev_name"] != "raw_syscalls:sys_exit" or s["pid"] != common_pid \
            or s["cpu"] != common_cpu or nsecs(common_secs, common_nsecs) != s["time"] \
            or s["cpumode"] != 1:
        problems.append("sample dict %r" % (s,))
    if event_name != "raw_syscalls__sys_exit" or common_callchain != []:
        problems.append("common args")
    if id == 257 and ret == -9:
        failed += 1

def trace_unhandled(event_name, context, event_fields_dict, perf_sample_dict):
    if event_fields_dict["common_comm"] == target and event_fields_dict["ret"] == -9:
        unhandled[event_name] = unhandled.get(event_name, 0) + 1
        if perf_sample_dict["comm"] != target:
            problems.append("unhandled dict")

def trace_end():
    print("bad dirfd %d, EBADF %d, %s, problems %s" % (bad_dirfd, failed, sorted(unhandled.items()), problems[:3]))
    print("flags", flag_str("x", "y", 1) == "", strerror(-9), syscall_name(257) in ("257", "openat"),
          perf_set_itrace_options(perf_script_context, "i") == -1)
"#;

#[test]
fn a_perf_script_written_here_gets_perfs_arguments_and_types() {
    let _tracefs = require_tracefs!();
    let dir = tempfile::tempdir().unwrap();
    let prog = cc(dir.path(), "pwown", FAIL_OPEN);
    let (_d, script) = temp_script("own_perf_style.py", OWN);
    let r = run(common::perfwatch()
        .env("PERFWATCH_BUILTIN_PERF_TRACE", "1")
        .args([
            "--plain",
            "-e",
            "raw_syscalls:sys_enter,raw_syscalls:sys_exit,syscalls:sys_exit_openat",
            "--script",
        ])
        .arg(&script)
        .args(["--script-arg", "pwown", "--"])
        .arg(&prog)
        .arg("61"));
    r.exited(0);
    assert_eq!(
        r.stdout.lines().collect::<Vec<_>>(),
        [
            "argv ['pwown'] TIMER",
            "bad dirfd 61, EBADF 61, [('syscalls__sys_exit_openat', 61)], problems []",
            "flags True EBADF True True",
        ],
        "stderr:\n{}",
        r.stderr
    );
    // perfwatch's own Util says why syscall_name gives numbers, on stderr.
    r.said(&["perfwatch's Util: the audit module cannot be imported"]);
}

/// N sleeps of a command: at least N switches out of it, each given to `context_switch`
/// with perf 6.1's eleven arguments.
#[test]
fn context_switch_gets_the_switch_records() {
    require_perf!();
    let (_d, script) = temp_script(
        "switches.py",
        "from perf_trace_context import *\n\
         outs = 0\nbad = []\n\
         def context_switch(ts, cpu, pid, tid, np_pid, np_tid, machine_pid, out, out_preempt, \
         sample_machine_pid, vcpu):\n    global outs\n\
         \x20   if not (isinstance(ts, int) and isinstance(out, bool) and machine_pid == -1):\n\
         \x20       bad.append((ts, out, machine_pid))\n\
         \x20   if out and not out_preempt:\n        outs += 1\n\
         def trace_end():\n    print('voluntary switches out', outs >= 20, 'bad', bad[:2])\n",
    );
    let r = run(common::perfwatch()
        .args(["--plain", "--switch", "-e", "dummy", "--script"])
        .arg(&script)
        .args(["--", "sh", "-c", "for i in $(seq 20); do sleep 0.01; done"]));
    r.exited(0);
    assert_eq!(
        r.stdout.trim(),
        "voluntary switches out True bad []",
        "{}",
        r.stderr
    );
}

#[test]
fn perfwatchs_own_core_and_util_print_what_perfs_do() {
    let _tracefs = require_tracefs!();
    let path = shipped!("failed-syscalls-by-pid.py");
    let dir = tempfile::tempdir().unwrap();
    let prog = cc(dir.path(), "pwbuiltin", FAIL_OPEN);
    let prog = prog.to_str().unwrap();
    let installed = perfwatch_side(
        "raw_syscalls:sys_exit",
        &[prog, "33"],
        &path,
        &["pwbuiltin"],
    );
    let own = run(common::perfwatch()
        .env("PERFWATCH_BUILTIN_PERF_TRACE", "1")
        .args(["--plain", "-e", "raw_syscalls:sys_exit", "--script"])
        .arg(&path)
        .args(["--script-arg", "pwbuiltin", "--", prog, "33"]));
    own.exited(0);
    assert_eq!(lines(&own.stdout), lines(&installed.stdout));
    assert!(own.stdout.contains("EBADF"), "{}", own.stdout);
}

#[test]
fn handlers_made_at_import_are_found_in_the_module() {
    let _tracefs = require_tracefs!();
    // No `def` of a perf handler in the source: it is made at import time.
    let (_d, s) = temp_script(
        "dynamic.py",
        "n = 0\ndef _h(*args):\n    global n\n    n += 1\nglobals()['raw_syscalls__sys_enter'] = _h\ndef trace_end():\n    print('calls', n > 0, perf_script_context is not None)\n",
    );
    let r = run(common::perfwatch()
        .args(["--plain", "-e", "raw_syscalls:sys_enter", "--script"])
        .arg(&s)
        .args(["--", "true"]));
    r.exited(0);
    // perf_script_context is a global of the script, as perf sets it (intel-pt-events.py
    // uses it without importing it).
    assert_eq!(r.stdout.trim(), "calls True True", "{}", r.stderr);
}

#[test]
fn mixed_and_unservable_scripts_are_refused_before_they_run() {
    for (name, body, said) in [
        (
            "mixed.py",
            "def on_event(e):\n    pass\ndef irq__irq_handler_entry(*a):\n    pass\n",
            &[
                "two conventions",
                "on_event()",
                "irq__irq_handler_entry()",
                "rename",
            ][..],
        ),
        (
            "stat.py",
            "import os\nx = os.environ['PERF_EXEC_PATH']\ndef process_stat(*a):\n    pass\ndef trace_end():\n    pass\n",
            &[
                "perfwatch does not call process_stat()",
                "nothing for perfwatch to call",
            ][..],
        ),
    ] {
        let (_d, s) = temp_script(name, body);
        let r = run(common::perfwatch()
            .args(["--plain", "-e", "dummy", "-d", "1", "--script"])
            .arg(&s));
        r.exited(1)
            .said(said)
            .never_said(&["Traceback", "KeyError"]);
        assert!(r.stdout.is_empty(), "{name}: {}", r.stdout);
    }
}

#[test]
fn perfs_shipped_scripts_find_their_environment() {
    require_perf!();
    let Ok(dir) = std::fs::read_dir(PERF_SCRIPTS) else {
        skip!("{PERF_SCRIPTS} is absent (Debian's linux-perf ships perf's scripts there)");
    };
    let mut scripts: Vec<_> = dir
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "py"))
        .collect();
    scripts.sort();
    let mut ran = 0;
    for s in &scripts {
        let r = run(common::perfwatch()
            .args(["--plain", "-e", "dummy", "-d", "300ms", "--script"])
            .arg(s));
        let name = s.file_name().unwrap().to_string_lossy().into_owned();
        // Whatever else a script needs (PySide, a database, an argument), never perf
        // script's environment.
        r.never_said(&[
            "KeyError: 'PERF_EXEC_PATH'",
            "No module named 'perf_trace_context'",
            "No module named 'Core'",
            "No module named 'Util'",
        ]);
        if r.code == 0 {
            ran += 1;
        } else {
            assert_eq!(r.code, 1, "{name}:\n{}", r.stderr);
        }
    }
    // syscall-counts, -by-pid, failed-syscalls-by-pid, futex-contention, check-perf-trace,
    // stackcollapse, sctop, net_dropmonitor, ... at least.
    assert!(ran >= 8, "only {ran} of {scripts:?} ran");
}

/// perf stat's hooks on a `perf stat record` file: perf's own stat-cpi.py on a per-CPU
/// interval recording (`-A`), and a script printing every argument of `stat__EVENT` and
/// `stat__interval` on a system-wide one (perf stat's default, global aggregation: one call
/// per counter and round, the CPUs summed; software events, which count without a hardware
/// PMU), both as `perf script -s` prints them on the same file.
#[test]
fn perf_stat_hooks_print_on_a_stat_recording_what_perf_script_prints() {
    require_perf_tool!();
    let cpi = shipped!("stat-cpi.py");
    let dir = tempfile::tempdir().unwrap();
    let failopen = cc(dir.path(), "pwstatfail", FAIL_OPEN);
    let record = |name: &str, args: &[&str]| -> PathBuf {
        let data = dir.path().join(name);
        let rec = Command::new("perf")
            .args(["stat", "record", "--quiet", "-o"])
            .arg(&data)
            .args(args)
            .arg("--")
            .arg(&failopen)
            .arg("20000")
            .output_in_time()
            .unwrap();
        assert!(rec.status.success(), "perf stat record: {rec:?}");
        data
    };
    let per_cpu = record(
        "cpi.data",
        &["-e", "cycles,instructions", "-I", "10", "-a", "-A"],
    );
    let global = record(
        "global.data",
        &[
            "-e",
            "page-faults,task-clock,context-switches",
            "-I",
            "10",
            "-a",
        ],
    );
    // Every argument, as the file's values give them (perf's hook names for events with a
    // `-` in them are no Python names: a script makes them through globals()).
    let all_args = dir.path().join("stat-args.py");
    std::fs::write(
        &all_args,
        "def _hook(name):\n    def h(*a):\n        print(name, a)\n    return h\n\
         for n in ('page-faults', 'task-clock', 'context-switches'):\n    \
         globals()['stat__' + n] = _hook(n)\n\
         def stat__interval(t):\n    print('interval', t)\n\
         def trace_end():\n    print('end')\n",
    )
    .unwrap();
    for (script, data) in [(&cpi, &per_cpu), (&all_args, &global)] {
        let perf = Command::new("perf")
            .args(["script", "-i"])
            .arg(data)
            .arg("-s")
            .arg(script)
            .output_in_time()
            .unwrap();
        assert!(perf.status.success(), "perf script: {perf:?}");
        let ours = run(common::perfwatch()
            .arg("-i")
            .arg(data)
            .arg("--script")
            .arg(script));
        ours.exited(0);
        let want = lines(&String::from_utf8_lossy(&perf.stdout));
        assert!(want.len() >= 2, "{script:?}: perf printed {want:?}");
        assert_eq!(
            lines(&ours.stdout),
            want,
            "{script:?}: perfwatch -i, then perf script -i; perfwatch said:\n{}",
            ours.stderr
        );
        ours.never_said(&["does not call stat__"]);
    }
}
