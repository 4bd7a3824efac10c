//! Recordings (`-i FILE`, `-i -`) against perf itself: what `perf record` wrote, perfwatch
//! reads as `perf script` / `perf report` do (exactly for counts and sample times; symbol
//! shares within 0.01 total variation), live from perf's pipe, and bad files give a clear
//! error or a counted skip, never a hang or a panic.

use crate::common;

use common::InTime;

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A program with two hot functions, `hot_a` taking three times the work of `hot_b`, for
/// about `argv[1]` milliseconds; it forks `argv[2]` children that exit at once first.
const PROG_C: &str = r#"
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include <sys/prctl.h>
volatile unsigned long sink;
__attribute__((noinline)) void hot_a(void) { for (int i = 0; i < 300000; i++) sink += i; }
__attribute__((noinline)) void hot_b(void) { for (int i = 0; i < 100000; i++) sink ^= i; }
static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9;
}
int main(int argc, char **argv) {
    double ms = argc > 1 ? atof(argv[1]) : 300;
    int forks = argc > 2 ? atoi(argv[2]) : 0;
    if (argc > 3) prctl(PR_SET_NAME, argv[3]);
    for (int i = 0; i < forks; i++) {
        pid_t p = fork();
        if (p == 0) _exit(0);
        if (p > 0) waitpid(p, 0, 0);
    }
    double end = now() + ms / 1000;
    while (now() < end) { hot_a(); hot_b(); }
    return 0;
}
"#;

pub(crate) fn build(dir: &Path) -> PathBuf {
    common::cc(
        dir,
        "prog",
        PROG_C,
        &["-O1", "-g", "-fno-omit-frame-pointer"],
    )
}

/// `perf record -o FILE ARGS...`, which must succeed.
#[track_caller]
pub(crate) fn perf_record(file: &Path, args: &[&str]) {
    let mut argv = vec!["record".as_ref(), "-o".as_ref(), file.as_os_str()];
    argv.extend(args.iter().map(std::ffi::OsStr::new));
    common::perf_ok(&argv);
}

/// [`PROG_C`] built in a new directory and recorded there into `name` by `perf record
/// PERF_ARGS -- prog PROG_ARGS`: the directory, the program and the recording.
#[track_caller]
pub(crate) fn record_prog(
    name: &str,
    perf_args: &[&str],
    prog_args: &[&str],
) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    let data = dir.path().join(name);
    let mut args = perf_args.to_vec();
    args.push("--");
    args.push(prog.to_str().unwrap());
    args.extend(prog_args);
    perf_record(&data, &args);
    (dir, prog, data)
}

/// `perf ARGS...` on `file`, its stdout.
#[track_caller]
pub(crate) fn perf_out(args: &[&str], file: &Path) -> String {
    let mut argv: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    argv.extend(["-i".as_ref(), file.as_os_str()]);
    String::from_utf8_lossy(&common::perf_ok(&argv).stdout).into_owned()
}

/// What `perf record -o - -e cpu-clock -- sh -c true` writes: a short recording in perf's
/// pipe format.
fn perf_pipe_of_true() -> Vec<u8> {
    perf_record_to_pipe(&[])
        .args(["sh", "-c", "true"])
        .output_in_time()
        .unwrap()
        .stdout
}

/// `perf record` options for a compressed recording (`-z`, one zstd stream) of samples with
/// call chains.
const COMPRESSED_WITH_CHAINS: &[&str] = &["-z", "-e", "cpu-clock", "-F", "2000", "-g"];

/// `perf record -o - -e cpu-clock OPTIONS --`, the command to follow: a recording in perf's
/// pipe format on stdout.
fn perf_record_to_pipe(options: &[&str]) -> Command {
    let mut perf = Command::new("perf");
    perf.args(["record", "-o", "-", "-e", "cpu-clock"])
        .args(options)
        .arg("--");
    perf
}

/// `cmd` run with `bytes` written to its stdin (by a thread, so that a full pipe cannot
/// hold both ends), within the deadline.
#[track_caller]
fn output_fed(cmd: &mut Command, bytes: Vec<u8>) -> std::process::Output {
    let mut child = cmd.stdin(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &bytes));
    let out = child.output_in_time().unwrap();
    writer.join().unwrap().unwrap();
    out
}

/// perfwatch `-i FILE --json`: its records.
#[track_caller]
fn perfwatch_json(file: &Path) -> (Vec<serde_json::Value>, String) {
    let r = common::run(perfwatch_cmd().arg("-i").arg(file).arg("--json"));
    r.exited(0).never_said(&["not decoded"]);
    order_said_as_perf_says_it(file, &r.stderr);
    (r.json(), r.stderr)
}

/// perfwatch says records came "out of time order" only where perf script warns of "out of
/// order events" in the same file: perf's files break its round promise now and then (a
/// record a few µs older than the round before last), and both then release it as perf does.
#[track_caller]
fn order_said_as_perf_says_it(file: &Path, ours: &str) {
    if !ours.contains("out of time order") {
        return;
    }
    let perf = common::perf_ok(&["script".as_ref(), "-i".as_ref(), file.as_os_str()]);
    let theirs = String::from_utf8_lossy(&perf.stderr);
    assert!(
        theirs.contains("out of order events recorded"),
        "perfwatch says records came out of time order, perf script does not:\n{ours}\n--- perf script:\n{theirs}"
    );
}

pub(crate) fn perfwatch_cmd() -> Command {
    common::perfwatch()
}

/// `perf report --stats`: records by type (`FORK`, `SAMPLE`, `MMAP2`, ...).
fn perf_stats(file: &Path) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for line in perf_out(&["report", "--stats"], file).lines() {
        let Some((name, rest)) = line.trim().split_once(" events:") else {
            continue;
        };
        let n = rest.split_whitespace().next().and_then(|n| n.parse().ok());
        if let (Some(n), false) = (n, name.contains(' ')) {
            // The per-event SAMPLE lines come after the totals: keep the first.
            m.entry(name.to_string()).or_insert(n);
        }
    }
    m
}

/// perfwatch's records by type.
fn types(records: &[serde_json::Value]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for r in records {
        *m.entry(r["type"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    m
}

/// perfwatch's counts equal perf's for every record type both know.
#[track_caller]
fn same_counts(perf: &BTreeMap<String, u64>, ours: &BTreeMap<String, u64>) {
    let p = |k: &str| perf.get(k).copied().unwrap_or(0);
    let o = |k: &str| ours.get(k).copied().unwrap_or(0);
    assert_eq!(
        o("sample"),
        p("SAMPLE"),
        "samples: perf {perf:?}, perfwatch {ours:?}"
    );
    assert_eq!(
        o("fork"),
        p("FORK"),
        "forks: perf {perf:?}, perfwatch {ours:?}"
    );
    assert_eq!(
        o("exit"),
        p("EXIT"),
        "exits: perf {perf:?}, perfwatch {ours:?}"
    );
    assert_eq!(
        o("comm"),
        p("COMM"),
        "comms: perf {perf:?}, perfwatch {ours:?}"
    );
    assert_eq!(
        o("mmap"),
        p("MMAP") + p("MMAP2"),
        "mmaps: perf {perf:?}, perfwatch {ours:?}"
    );
}

/// Total variation distance between two distributions given as counts.
fn total_variation(a: &HashMap<String, u64>, b: &HashMap<String, u64>) -> f64 {
    let (na, nb) = (
        a.values().sum::<u64>() as f64,
        b.values().sum::<u64>() as f64,
    );
    let keys: std::collections::HashSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .map(|k| {
            let pa = a.get(k).copied().unwrap_or(0) as f64 / na.max(1.0);
            let pb = b.get(k).copied().unwrap_or(0) as f64 / nb.max(1.0);
            (pa - pb).abs()
        })
        .sum::<f64>()
        / 2.0
}

#[test]
fn a_c_program_reads_as_perf_script_reads_it() {
    require_perf!();
    let (_dir, _prog, data) = record_prog(
        "prog.data",
        &["-e", "cpu-clock", "-F", "2000", "-g"],
        &["1000", "20"],
    );
    let (records, stderr) = perfwatch_json(&data);
    assert!(stderr.contains("recording "), "{stderr}");
    assert!(stderr.contains("events cpu-clock"), "{stderr}");
    // The header line: what perf's own header says.
    let head = &records[0];
    assert_eq!(head["type"], "recording");
    let header = perf_out(&["report", "--header-only"], &data);
    let said = |key: &str| {
        header
            .lines()
            .find_map(|l| l.strip_prefix(&format!("# {key}")))
            .and_then(|v| v.split_once(": "))
            .map(|(_, v)| v.trim().to_string())
    };
    assert_eq!(
        head["hostname"].as_str().map(str::to_string),
        said("hostname")
    );
    assert_eq!(
        head["osrelease"].as_str().map(str::to_string),
        said("os release")
    );
    assert_eq!(
        head["perf_version"].as_str().map(str::to_string),
        said("perf version")
    );
    assert_eq!(
        head["nr_cpus_avail"].as_u64().map(|n| n.to_string()),
        said("nrcpus avail")
    );
    assert_eq!(head["events"][0], "cpu-clock");
    assert_eq!(head["cmdline"][1], "record");
    same_counts(&perf_stats(&data), &types(&records));

    // The same samples: (tid, time) for each, exactly.
    let mut theirs: Vec<(u64, u64)> = perf_out(&["script", "-F", "tid,time", "--ns"], &data)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let tid = w.next()?.parse().ok()?;
            let t = w.next()?.trim_end_matches(':');
            let (s, ns) = t.split_once('.')?;
            Some((
                tid,
                s.parse::<u64>().ok()? * 1_000_000_000 + ns.parse::<u64>().ok()?,
            ))
        })
        .collect();
    let samples: Vec<&serde_json::Value> =
        records.iter().filter(|r| r["type"] == "sample").collect();
    let mut ours: Vec<(u64, u64)> = samples
        .iter()
        .map(|r| {
            (
                r["sample_tid"].as_u64().unwrap(),
                r["sample_time"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(samples.len() > 100, "only {} samples", samples.len());
    theirs.sort_unstable();
    ours.sort_unstable();
    assert_eq!(ours, theirs, "the samples' threads and times");
    // perfwatch writes them in time order.
    let times: Vec<u64> = samples
        .iter()
        .map(|r| r["sample_time"].as_u64().unwrap())
        .collect();
    assert!(times.is_sorted(), "samples out of time order");

    // Symbol shares.
    let mut theirs: HashMap<String, u64> = HashMap::new();
    for l in perf_out(&["script", "-G", "-F", "ip,sym"], &data).lines() {
        let s = l.trim().split_once(' ').map_or("", |(_, s)| s.trim());
        *theirs
            .entry(if s.is_empty() {
                "[unknown]".into()
            } else {
                s.into()
            })
            .or_default() += 1;
    }
    let mut ours: HashMap<String, u64> = HashMap::new();
    for r in &samples {
        let s = r["sym"].as_str().unwrap_or("[unknown]").to_string();
        *ours.entry(s).or_default() += 1;
    }
    let tv = total_variation(&ours, &theirs);
    assert!(
        tv <= 0.01,
        "symbol shares differ by {tv}: perfwatch {ours:?}, perf {theirs:?}"
    );
    let a = ours.get("hot_a").copied().unwrap_or(0);
    let b = ours.get("hot_b").copied().unwrap_or(0);
    assert!(a > b && b > 0, "hot_a {a}, hot_b {b}: {ours:?}");
    // Call chains are read: hot_a's start at hot_a and go on into the C library.
    let chained = samples
        .iter()
        .filter(|r| r["sym"] == "hot_a")
        .filter(|r| {
            r["callchain"].as_array().is_some_and(|c| {
                c.len() >= 2
                    && c[0]["sym"] == "hot_a"
                    && c[1..]
                        .iter()
                        .any(|f| f["dso"].as_str().is_some_and(|d| d.contains("libc")))
            })
        })
        .count();
    assert!(
        chained * 2 > a as usize,
        "{chained} of {a} hot_a samples have a chain into libc"
    );
}

#[test]
fn tracepoints_read_as_perf_script_reads_them() {
    require_perf!();
    require_tracefs!();
    let (_dir, _prog, data) = record_prog(
        "tp.data",
        &[
            "-e",
            "sched:sched_switch",
            "-e",
            "raw_syscalls:sys_enter",
            "-a",
        ],
        &["200", "10"],
    );
    let (records, _) = perfwatch_json(&data);
    same_counts(&perf_stats(&data), &types(&records));
    // Per event, and the fields perf renders: (time, event, next_pid or syscall id).
    let mut theirs: Vec<(u64, String, i64)> =
        perf_out(&["script", "-F", "time,event,trace", "--ns"], &data)
            .lines()
            .filter_map(|l| {
                let (t, rest) = l.trim().split_once(": ")?;
                let (s, ns) = t.split_once('.')?;
                let time = s.parse::<u64>().ok()? * 1_000_000_000 + ns.parse::<u64>().ok()?;
                let (event, fields) = rest.split_once(": ")?;
                let key = if event.contains("sched_switch") {
                    "next_pid="
                } else {
                    "NR "
                };
                let v = fields
                    .split(key)
                    .nth(1)?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()?;
                Some((time, event.trim().to_string(), v))
            })
            .collect();
    let mut ours: Vec<(u64, String, i64)> = records
        .iter()
        .filter(|r| r["type"] == "sample")
        .map(|r| {
            let event = r["event"].as_str().unwrap().to_string();
            let v = if event.contains("sched_switch") {
                &r["next_pid"]
            } else {
                &r["id"]
            };
            (
                r["sample_time"].as_u64().unwrap(),
                event,
                v.as_i64().unwrap_or(i64::MIN),
            )
        })
        .collect();
    assert!(ours.len() > 100, "only {} tracepoint samples", ours.len());
    theirs.sort();
    ours.sort();
    assert_eq!(ours.len(), theirs.len());
    assert_eq!(ours, theirs, "tracepoint samples and their fields");
}

/// Samples as `perf script -F cpu,time,event --ns` prints them: (time, cpu, event), in its
/// order.
fn perf_sample_order(file: &Path) -> Vec<(u64, u64, String)> {
    perf_out(&["script", "-F", "cpu,time,event", "--ns"], file)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let cpu = w.next()?.trim_matches(['[', ']']).parse().ok()?;
            let (s, ns) = w.next()?.trim_end_matches(':').split_once('.')?;
            let time = s.parse::<u64>().ok()? * 1_000_000_000 + ns.parse::<u64>().ok()?;
            Some((time, cpu, w.next()?.trim_end_matches(':').to_string()))
        })
        .collect()
}

#[test]
fn a_recording_comes_out_in_perf_scripts_order_ties_and_all() {
    require_perf!();
    require_tracefs!();
    // System-wide syscalls and switches for a second: rounds full of records from both CPUs,
    // many of the same nanosecond, and now and then a record of a round older than the round
    // before last (perf script then warns "N out of order events recorded" and prints it
    // where it came: perfwatch must release it as perf does, in every read).
    let (_dir, _prog, data) = record_prog(
        "order.data",
        &[
            "-e",
            "sched:sched_switch",
            "-e",
            "raw_syscalls:sys_enter",
            "-a",
        ],
        &["1000", "20"],
    );
    // "out of time order" only where perf warns too (perfwatch_json checks it).
    let (records, _) = perfwatch_json(&data);
    let ours: Vec<(u64, u64, String)> = records
        .iter()
        .filter(|r| r["type"] == "sample")
        .map(|r| {
            (
                r["sample_time"].as_u64().unwrap(),
                r["sample_cpu"].as_u64().unwrap(),
                r["event"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let theirs = perf_sample_order(&data);
    assert!(ours.len() > 1000, "only {} samples", ours.len());
    assert_eq!(
        ours.len(),
        theirs.len(),
        "samples: perfwatch vs perf script"
    );
    let unordered = |s: &[(u64, u64, String)]| s.windows(2).filter(|w| w[1].0 < w[0].0).count();
    let ties = theirs.windows(2).filter(|w| w[1].0 == w[0].0).count();
    println!(
        "perf script: {} samples out of time order, {ties} ties; perfwatch: {}",
        unordered(&theirs),
        unordered(&ours)
    );
    // perfwatch says "out of time order" only where perf script warns of out-of-order
    // events too (perfwatch_json checked it): the record perf reorders may be a fork, comm
    // or mmap, which the samples' order above does not show.
    if let Some(i) = (0..ours.len()).find(|&i| ours[i] != theirs[i]) {
        panic!(
            "sample {i} of {}: perfwatch {:?}, perf script {:?}",
            ours.len(),
            &ours[i.saturating_sub(2)..(i + 3).min(ours.len())],
            &theirs[i.saturating_sub(2)..(i + 3).min(theirs.len())]
        );
    }
}

#[test]
fn a_system_wide_recording_reads_the_same_every_time() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    let data = dir.path().join("same.data");
    // Several processes (two programs, their forks, the shell) and the rest of the machine,
    // with call chains: many binaries to read, kernel frames, maps that come and go.
    let p = prog.to_str().unwrap();
    let load = format!("{p} 700 30 & {p} 700 30 second & ls -R /usr/lib >/dev/null & wait");
    perf_record(&data, &["-g", "-a", "-F", "5000", "--", "sh", "-c", &load]);
    // Three reads at once: each is what the others' load makes slow (a binary's read, the
    // kernel's symbols, the threads' interleaving), as on a busy machine.
    let runs: Vec<common::Run> = std::thread::scope(|s| {
        let reads: Vec<_> = (0..3)
            .map(|_| s.spawn(|| common::run(perfwatch_cmd().arg("-i").arg(&data).arg("--json"))))
            .collect();
        reads.into_iter().map(|r| r.join().unwrap()).collect()
    });
    for r in &runs {
        r.exited(0);
        order_said_as_perf_says_it(&data, &r.stderr);
    }
    let records = runs[0].json();
    let samples: Vec<&serde_json::Value> =
        records.iter().filter(|r| r["type"] == "sample").collect();
    assert!(samples.len() > 1000, "only {} samples", samples.len());
    let named = |name: &str| samples.iter().filter(|r| r["sym"] == name).count();
    assert!(named("hot_a") > 10, "hot_a named {} times", named("hot_a"));
    let kernel = samples
        .iter()
        .filter(|r| r["dso"] == "[kernel.kallsyms]" && r["sym"] != "[unknown]")
        .count();
    assert!(kernel > 0, "no kernel sample named");
    println!(
        "{} samples, {} hot_a, {kernel} named in the kernel",
        samples.len(),
        named("hot_a")
    );
    for (i, r) in runs.iter().enumerate().skip(1) {
        if r.stdout != runs[0].stdout {
            let (a, b) = (runs[0].stdout.lines(), r.stdout.lines());
            let differ: Vec<(usize, (&str, &str))> =
                a.zip(b).enumerate().filter(|(_, (x, y))| x != y).collect();
            panic!(
                "read {} differs from read 1 in {} lines (of {}); the first: {:?}",
                i + 1,
                differ.len(),
                records.len(),
                differ.first()
            );
        }
    }
}

#[test]
fn a_fork_storm_gives_perfs_task_records() {
    require_perf!();
    let (_dir, _prog, data) = record_prog("forks.data", &["-e", "cpu-clock"], &["10", "300"]);
    let (records, _) = perfwatch_json(&data);
    let stats = perf_stats(&data);
    same_counts(&stats, &types(&records));
    assert!(stats.get("FORK").copied().unwrap_or(0) >= 300, "{stats:?}");
    // The same children: perf script's fork records' pids.
    let mut theirs: Vec<u64> = perf_out(&["script", "--show-task-events"], &data)
        .lines()
        .filter_map(|l| {
            l.split("PERF_RECORD_FORK(")
                .nth(1)?
                .split(':')
                .next()?
                .parse()
                .ok()
        })
        .collect();
    let mut ours: Vec<u64> = records
        .iter()
        .filter(|r| r["type"] == "fork")
        .map(|r| r["pid"].as_u64().unwrap())
        .collect();
    theirs.sort_unstable();
    ours.sort_unstable();
    assert_eq!(ours, theirs, "forked pids");
}

#[test]
fn perfs_pipe_is_read_while_perf_records() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    // perf runs the program for 3 s; perfwatch must print a sample well before that.
    // A small ring (-m 2): perf writes what it has every few dozen samples, rather than once
    // its 512 KiB ring is half full.
    let mut perf = perf_record_to_pipe(&["-m", "2", "-F", "1000"])
        .arg(&prog)
        .args(["3000", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("perf record");
    let mut pw = perfwatch_cmd()
        .args(["-i", "-", "--json"])
        .stdin(perf.stdout.take().unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(pw.stdout.take().unwrap()).lines();
    let mut first_sample_while_recording = None;
    let mut samples = 0;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if line.contains("\"type\":\"sample\"") {
            samples += 1;
            if first_sample_while_recording.is_none() {
                first_sample_while_recording = Some(perf.try_wait().unwrap().is_none());
            }
        }
    }
    assert!(common::wait_in_time(&mut perf).success());
    let out = pw.output_in_time().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        first_sample_while_recording,
        Some(true),
        "no sample came while perf recorded"
    );
    assert!(samples > 100, "{samples} samples");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("by type: sample {samples}")),
        "{stderr}"
    );
    // The event named as perf names it (EVENT_UPDATE records carry its unit, scale, name).
    assert!(stderr.contains("events cpu-clock; "), "{stderr}");
}

/// A small real recording's bytes, for the bad-input tests to cut and break.
fn small_recording(dir: &Path) -> Vec<u8> {
    let data = dir.join("small.data");
    perf_record(
        &data,
        &["-e", "cpu-clock", "-F", "1000", "--", "sh", "-c", "true"],
    );
    std::fs::read(&data).unwrap()
}

#[track_caller]
fn read_bytes(dir: &Path, name: &str, bytes: &[u8]) -> common::Run {
    let f = dir.join(name);
    std::fs::write(&f, bytes).unwrap();
    common::run(perfwatch_cmd().arg("-i").arg(&f).arg("--plain"))
}

#[test]
fn bad_files_are_said_not_crashed_on() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let good = small_recording(dir.path());
    let d = dir.path();
    read_bytes(d, "empty", b"").exited(1).said(&["too short"]);
    read_bytes(
        d,
        "text",
        b"hello, this is not a recording at all, not even close....",
    )
    .exited(1)
    .said(&["not a perf.data file"]);
    let mut big = good.clone();
    big[..8].copy_from_slice(b"2ELIFREP");
    read_bytes(d, "big", &big).exited(1).said(&["big-endian"]);
    read_bytes(d, "header-only", &good[..104])
        .exited(1)
        .said(&["attribute section"]);
    // The data cut in the middle of a record: what is before it, and the error.
    let data_at = u64::from_le_bytes(good[40..48].try_into().unwrap()) as usize;
    let data_len = u64::from_le_bytes(good[48..56].try_into().unwrap()) as usize;
    let cut = read_bytes(d, "cut", &good[..data_at + data_len / 2 + 3]);
    cut.exited(1)
        .said(&["unfinished", "ends in the middle of a record"]);
    assert!(cut.stdout.lines().count() > 0, "the records before the cut");
    // A record whose size lies (less than its own header).
    let mut lie = good.clone();
    lie[data_at + 6..data_at + 8].copy_from_slice(&4u16.to_le_bytes());
    read_bytes(d, "lie", &lie)
        .exited(1)
        .said(&["less than its own header"]);
    // A record type nobody knows: counted, not fatal.
    let mut unknown = good.clone();
    unknown[data_at..data_at + 4].copy_from_slice(&250u32.to_le_bytes());
    read_bytes(d, "unknown", &unknown)
        .exited(0)
        .said(&["1 type-250"]);
    // A data section said to be past the end.
    let mut past = good.clone();
    past[48..56].copy_from_slice(&(1u64 << 40).to_le_bytes());
    // (Read to the end of the file: the feature sections after the records do not frame.)
    read_bytes(d, "past", &past)
        .exited(1)
        .said(&["unfinished", "error: "]);
    // A file as a pipe, and a pipe that stops mid-record.
    let from_stdin = |file: &Path| -> common::Run {
        perfwatch_cmd()
            .args(["-i", "-", "--plain"])
            .stdin(std::fs::File::open(file).unwrap())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
            .output_in_time()
            .unwrap()
            .into()
    };
    from_stdin(&d.join("cut"))
        .exited(1)
        .said(&["not in perf's pipe format"]);
    let piped = perf_pipe_of_true();
    let half = d.join("half-pipe");
    std::fs::write(&half, &piped[..piped.len() - 5]).unwrap();
    from_stdin(&half)
        .exited(1)
        .said(&["ends in the middle of a record"]);
    from_stdin(&d.join("empty"))
        .exited(1)
        .said(&["ended before perf's pipe header"]);
}

#[test]
fn hostile_names_in_a_recording_are_escaped() {
    require_perf!();
    let (_dir, _prog, data) = record_prog(
        "hostile.data",
        &["-e", "cpu-clock"],
        &["50", "0", "\x1b[2Jevil\x07"],
    );
    let r = common::run(perfwatch_cmd().arg("-i").arg(&data).arg("--plain"));
    r.exited(0);
    assert!(r.stdout.contains("evil"), "{}", r.stdout);
    assert!(
        !r.stdout.contains('\x1b') && !r.stdout.contains('\x07'),
        "raw control bytes written"
    );
    assert!(!r.stderr.contains('\x1b'), "raw control bytes on stderr");
}

#[test]
fn live_options_do_not_combine_with_a_recording() {
    let r = common::run(perfwatch_cmd().args(["-i", "x.data", "-a", "--plain"]));
    r.exited(2).said(&["cannot be used with"]);
}

#[test]
fn a_binary_is_used_only_where_its_build_id_matches_or_from_perfs_cache() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    let src = std::fs::read_to_string(dir.path().join("prog.c")).unwrap();
    // Each build of its own (a build id no earlier run put in perf's cache), at one path.
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let rebuild = |variant: &str| {
        let c = dir.path().join("prog.c");
        std::fs::write(
            &c,
            format!("{src}\nconst char *pw_build = \"{nonce}-{variant}\";\n"),
        )
        .unwrap();
        let st = Command::new("cc")
            .args(["-O1", "-g", "-fno-omit-frame-pointer", "-o"])
            .arg(&prog)
            .arg(&c)
            .status_in_time()
            .unwrap();
        assert!(st.success());
    };
    let record = |name: &str, cache: bool| {
        let data = dir.path().join(name);
        let mut args = vec!["-e", "cpu-clock", "--", prog.to_str().unwrap(), "300", "0"];
        if !cache {
            // Not into perf's build-id cache: only the file at the path can name them.
            args.insert(0, "-N");
        }
        perf_record(&data, &args);
        data
    };
    let named = |records: &[serde_json::Value], sym: &str| {
        records
            .iter()
            .filter(|r| r["type"] == "sample" && r["sym"] == sym)
            .count()
    };
    let of_prog = |records: &[serde_json::Value]| {
        records
            .iter()
            .filter(|r| r["type"] == "sample" && r["dso"] == prog.to_str().unwrap())
            .count()
    };
    rebuild("a");
    let data = record("ids.data", false);
    let (records, _) = perfwatch_json(&data);
    assert!(
        named(&records, "hot_a") > 0,
        "the same binary names its samples"
    );
    // Another build at the same path: never used, its samples are the binary's alone.
    rebuild("b");
    let (records, stderr) = perfwatch_json(&data);
    assert_eq!(named(&records, "hot_a"), 0, "a mismatched binary was used");
    assert!(of_prog(&records) > 0, "samples named by their binary");
    assert!(
        stderr.contains("not the one that was mapped") && stderr.contains("build id"),
        "{stderr}"
    );
    // A recording whose binary perf also kept in its build-id cache: once the binary at the
    // path is another, named from the cache (as perf script names them), under its own path.
    let cached = record("cached.data", true);
    rebuild("c");
    let (records, _) = perfwatch_json(&cached);
    assert!(
        named(&records, "hot_a") > 0,
        "not named from perf's build-id cache"
    );
    assert!(of_prog(&records) > 0);
    // Gone: named by their binary (or from the cache, for the recording perf cached).
    std::fs::remove_file(&prog).unwrap();
    let (records, stderr) = perfwatch_json(&data);
    assert_eq!(named(&records, "hot_a"), 0);
    assert!(of_prog(&records) > 0, "samples named by their binary");
    assert!(stderr.contains("the file is gone"), "{stderr}");
    let (records, _) = perfwatch_json(&cached);
    assert!(
        named(&records, "hot_a") > 0,
        "not named from perf's build-id cache"
    );
}

#[test]
fn kernel_samples_are_named_only_on_the_kernel_that_recorded_them() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("kernel.data");
    // Kernel time: a process that reads /proc over and over.
    perf_record(
        &data,
        &[
            "-e",
            "cpu-clock",
            "-F",
            "2000",
            "--",
            "sh",
            "-c",
            "for i in $(seq 200); do cat /proc/self/maps >/dev/null; done",
        ],
    );
    let kernel_named = |records: &[serde_json::Value]| {
        records
            .iter()
            .filter(|r| {
                r["type"] == "sample" && r["dso"] == "[kernel.kallsyms]" && r["sym"].is_string()
            })
            .count()
    };
    let (records, _) = perfwatch_json(&data);
    assert!(
        kernel_named(&records) > 0,
        "no kernel sample named on the same kernel"
    );
    // The same file, said to come from another kernel (the release string changed in place).
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let release = release.trim().as_bytes();
    let mut bytes = std::fs::read(&data).unwrap();
    let at = bytes
        .windows(release.len() + 1)
        .rposition(|w| &w[..release.len()] == release && w[release.len()] == 0)
        .expect("the OS release in the header");
    bytes[at] = if bytes[at] == b'9' { b'8' } else { b'9' };
    let other = dir.path().join("other.data");
    std::fs::write(&other, bytes).unwrap();
    let (records, stderr) = perfwatch_json(&other);
    assert_eq!(
        kernel_named(&records),
        0,
        "kernel samples named from another kernel's recording"
    );
    assert!(stderr.contains("kernel samples are not named"), "{stderr}");
}

#[test]
fn a_stop_is_not_held_up_by_a_pipe_that_writes_nothing() {
    require_perf!();
    use std::io::{Read, Write};
    let piped = perf_pipe_of_true();
    let mut pw = perfwatch_cmd()
        .args(["-i", "-", "--plain"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The recording, and then nothing, the pipe kept open (a perf that records a quiet CPU).
    let mut input = pw.stdin.take().unwrap();
    input.write_all(&piped).unwrap();
    let mut err = pw.stderr.take().unwrap();
    let mut said = Vec::new();
    let mut chunk = [0u8; 4096];
    while !String::from_utf8_lossy(&said).contains("recording stdin") {
        let n = err.read(&mut chunk).unwrap();
        assert!(n > 0, "perfwatch ended: {}", String::from_utf8_lossy(&said));
        said.extend_from_slice(&chunk[..n]);
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pw.id() as i32, libc::SIGINT) };
    let sent = std::time::Instant::now();
    let status = common::wait_in_time(&mut pw);
    assert!(
        sent.elapsed() < std::time::Duration::from_secs(2),
        "the stop took {:?}",
        sent.elapsed()
    );
    assert_eq!(status.code(), Some(0));
    err.read_to_end(&mut said).unwrap();
    let said = String::from_utf8_lossy(&said);
    assert!(said.contains("records in"), "{said}");
    assert!(!said.contains("error"), "{said}");
    drop(input);
}

#[test]
fn a_recording_that_cannot_be_opened_is_said_before_the_full_screen_view_starts() {
    // A terminal on stdout (script(1) gives one), no line format: the TUI replays; a file
    // it cannot open is said on the normal screen, which is never taken.
    let bin = assert_cmd::cargo::cargo_bin("perfwatch");
    let r = common::run(
        Command::new("script")
            .args(["-qec"])
            .arg(format!("{} -i /nonexistent.data", bin.display()))
            .arg("/dev/null")
            .env("TERM", "xterm"),
    );
    assert_eq!(r.code, 1, "{} {}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("cannot open the recording '/nonexistent.data'"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("\x1b[?1049h"), "{:?}", r.stdout);
}

/// Each sample's program frames (those in `/prog`), outermost first, joined by `;`, as
/// shares of the samples; and the share whose chain reaches `main`.
fn prog_stacks(
    samples: impl Iterator<Item = Vec<(String, String)>>,
) -> (HashMap<String, u64>, f64) {
    let mut folded: HashMap<String, u64> = HashMap::new();
    let (mut n, mut main) = (0, 0);
    for frames in samples {
        n += 1;
        main += frames.iter().any(|(f, _)| f == "main") as usize;
        let key: Vec<&str> = frames
            .iter()
            .rev()
            .filter(|(_, d)| d.ends_with("/prog"))
            .map(|(f, _)| f.as_str())
            .collect();
        *folded.entry(key.join(";")).or_default() += 1;
    }
    (folded, main as f64 / n.max(1) as f64)
}

/// Builds of [`common::CALL_PATH_C`] without frame pointers at `dir/prog`, each with a build
/// id of its own (one that no earlier run put in perf's cache), by a variant's name.
pub(crate) fn frameless_builds(dir: &Path) -> impl Fn(&str) -> PathBuf + '_ {
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    move |variant: &str| {
        let src = format!(
            "{}\nconst char *pw_build = \"{nonce}-{variant}\";\n",
            common::CALL_PATH_C
        );
        common::cc(dir, "prog", &src, &["-O2", "-fomit-frame-pointer"])
    }
}

/// `perf record --call-graph dwarf` of `prog ARG` (cpu-clock at 1 kHz), beside it in
/// `dwarf.data`; not into perf's build-id cache: only the file at the path has the tables.
pub(crate) fn record_dwarf(prog: &Path, arg: &str) -> PathBuf {
    let data = prog.with_file_name("dwarf.data");
    perf_record(
        &data,
        &[
            "-N",
            "-e",
            "cpu-clock",
            "-F",
            "1000",
            "--call-graph",
            "dwarf",
            "--",
            prog.to_str().unwrap(),
            arg,
        ],
    );
    data
}

#[test]
fn dwarf_call_graph_recordings_are_unwound_as_perf_script_unwinds_them() {
    require_perf!();
    // A program without frame pointers: only its stack copies and .eh_frame say who called.
    // Each build of its own (a build id no earlier run put in perf's cache), at one path.
    let dir = tempfile::tempdir().unwrap();
    let build = frameless_builds(dir.path());
    let prog = build("a");
    let data = record_dwarf(&prog, "800");
    let (records, stderr) = perfwatch_json(&data);
    same_counts(&perf_stats(&data), &types(&records));
    let ours = records.iter().filter(|r| r["type"] == "sample").map(|r| {
        r["callchain"]
            .as_array()
            .map(|c| {
                c.iter()
                    .map(|f| {
                        let s = |k: &str| f[k].as_str().unwrap_or("").to_string();
                        (s("sym"), s("dso"))
                    })
                    .collect()
            })
            .unwrap_or_default()
    });
    // perf's inlined frames left out: perfwatch names the function holding the address.
    let theirs = common::perf_script_samples(&data, "pid,ip,sym,dso")
        .into_iter()
        .map(|s| {
            s.frames
                .into_iter()
                .filter(|(_, _, d)| d != "inlined")
                .map(|(_, sym, dso)| (sym.split("+0x").next().unwrap_or(&sym).to_string(), dso))
                .collect()
        });
    let (ours, our_main) = prog_stacks(ours);
    let (theirs, their_main) = prog_stacks(theirs);
    let n: u64 = ours.values().sum();
    assert!(n >= 200, "{n} samples\n{stderr}");
    println!("perfwatch {ours:?}, {our_main}\nperf {theirs:?}, {their_main}");
    let path = common::CALL_PATH
        .iter()
        .rev()
        .copied()
        .collect::<Vec<_>>()
        .join(";");
    let on_path: u64 = ours
        .iter()
        .filter(|(k, _)| k.ends_with(&path))
        .map(|(_, n)| n)
        .sum();
    assert!(
        on_path * 2 > n,
        "most samples are in {path}: {ours:?}\n{stderr}"
    );
    assert!(our_main >= 0.9, "{our_main} reach main\n{stderr}");
    assert!(stderr.contains("dwarf unwinding: "), "{stderr}");
    assert!(
        (our_main - their_main).abs() <= 0.05,
        "main: perfwatch {our_main}, perf {their_main}"
    );
    let tv = total_variation(&ours, &theirs);
    assert!(
        tv <= 0.05,
        "folded stacks {tv} apart: perfwatch {ours:?}, perf {theirs:?}"
    );
    // Another build at the same path: its tables are never used (a build id of its own).
    build("b");
    let r = common::run(perfwatch_cmd().arg("-i").arg(&data).arg("--json"));
    r.exited(0);
    let reach = r
        .json()
        .iter()
        .filter(|r| r["type"] == "sample")
        .filter(|r| {
            r["callchain"]
                .as_array()
                .is_some_and(|c| c.iter().any(|f| f["sym"] == "main"))
        })
        .count();
    assert_eq!(reach, 0, "another build's unwind tables were used");
    assert!(
        r.stderr.contains("unwind tables not read: build id"),
        "{}",
        r.stderr
    );
}

/// `perf script -F FIELDS -i -` on `bytes` (perf's pipe format): its stdout.
fn perf_script_of_pipe(dir: &Path, fields: &str, bytes: &[u8]) -> String {
    let f = dir.join("piped.bytes");
    std::fs::write(&f, bytes).unwrap();
    let out = Command::new("perf")
        .args(["script", "-F", fields, "-i", "-"])
        .stdin(std::fs::File::open(&f).unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
        .output_in_time()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn o_beside_i_copies_the_recording_for_perf_script() {
    require_perf!();
    // A compressed file with call chains, copied: perf script reads the copy (its records
    // decompressed) as it reads the input.
    let (dir, prog, data) = record_prog("z.data", COMPRESSED_WITH_CHAINS, &["500", "5"]);
    let fields = "comm,tid,time,event,ip,sym";
    let want = perf_out(&["script", "-F", fields], &data);
    assert!(want.lines().count() > 100, "{want}");
    let copy = dir.path().join("copy.data");
    common::run(
        perfwatch_cmd()
            .arg("-i")
            .arg(&data)
            .arg("-o")
            .arg(&copy)
            .arg("--quiet"),
    )
    .exited(0)
    .said(&["copied from the input"]);
    assert_eq!(
        perf_out(&["script", "-F", fields], &copy),
        want,
        "perf script of the copy"
    );
    let stats = perf_stats(&copy);
    assert_eq!(stats.get("COMPRESSED"), None, "{stats:?}");
    let input = perf_stats(&data);
    for k in [
        "SAMPLE",
        "FORK",
        "EXIT",
        "COMM",
        "MMAP",
        "MMAP2",
        "FINISHED_ROUND",
    ] {
        assert_eq!(
            stats.get(k),
            input.get(k),
            "{k}: copy {stats:?}, input {input:?}"
        );
    }
    // The copy in perf's pipe format (-o -), and perfwatch reads the copy back.
    let piped = perfwatch_cmd()
        .arg("-i")
        .arg(&data)
        .args(["-o", "-"])
        .output_in_time()
        .unwrap();
    assert!(
        piped.status.success(),
        "{}",
        String::from_utf8_lossy(&piped.stderr)
    );
    assert_eq!(perf_script_of_pipe(dir.path(), fields, &piped.stdout), want);
    let (records, _) = perfwatch_json(&copy);
    let (theirs, _) = perfwatch_json(&data);
    assert_eq!(json_samples(&records), json_samples(&theirs));

    // perf's pipe to a file: perf record -o - | perfwatch -i - -o FILE.
    let bytes = perf_record_to_pipe(&["-F", "2000"])
        .arg(&prog)
        .args(["300", "0"])
        .output_in_time()
        .unwrap()
        .stdout;
    let kept = dir.path().join("kept.data");
    let out = output_fed(
        perfwatch_cmd()
            .args(["-i", "-", "--plain", "-o"])
            .arg(&kept)
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
        bytes.clone(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fields = "tid,time,event,ip,sym";
    let want = perf_script_of_pipe(dir.path(), fields, &bytes);
    assert!(want.lines().count() > 50, "{want}");
    assert_eq!(
        perf_out(&["script", "-F", fields], &kept),
        want,
        "perf script of the kept pipe"
    );
}

/// The shares of `hot_a` and `hot_b` among a `--json`'s samples.
fn hot_shares(records: &[serde_json::Value]) -> (f64, f64) {
    let samples: Vec<_> = records.iter().filter(|r| r["type"] == "sample").collect();
    let share = |name: &str| {
        samples.iter().filter(|r| r["sym"] == name).count() as f64 / samples.len().max(1) as f64
    };
    (share("hot_a"), share("hot_b"))
}

#[test]
fn compressed_recordings_read_as_perf_script_reads_them() {
    require_perf!();
    // perf record -z: the kernel's records inside COMPRESSED records, one zstd stream.
    let (dir, prog, data) = record_prog("z.data", COMPRESSED_WITH_CHAINS, &["1000", "20"]);
    let stats = perf_stats(&data);
    assert!(stats.get("COMPRESSED").is_some_and(|&n| n > 0), "{stats:?}");
    let (records, stderr) = perfwatch_json(&data);
    assert!(!stderr.contains("COMPRESSED"), "{stderr}");
    same_counts(&stats, &types(&records));
    let ours = json_samples(&records);
    assert!(ours.len() > 200, "{} samples", ours.len());
    assert_eq!(ours, perf_samples(&data), "the samples (tid, time, ip)");
    // The same workload recorded without -z reads alike.
    let plain = dir.path().join("plain.data");
    perf_record(
        &plain,
        &[
            "-e",
            "cpu-clock",
            "-F",
            "2000",
            "-g",
            "--",
            prog.to_str().unwrap(),
            "1000",
            "20",
        ],
    );
    let (plain_records, _) = perfwatch_json(&plain);
    let (za, zb) = hot_shares(&records);
    let (pa, pb) = hot_shares(&plain_records);
    // Two executions of the workload: their shares differ by chance (0.75 and 0.62 for hot_a
    // in one CI run), so only what does not: both name both functions, hot_a the most.
    assert!(za > zb && zb > 0.0, "-z: hot_a {za}, hot_b {zb}");
    assert!(pa > pb && pb > 0.0, "without -z: hot_a {pa}, hot_b {pb}");

    // Pipe mode: perf record -z -o - | perfwatch -i -, and perf script on the same bytes.
    let mut perf = perf_record_to_pipe(&["-z", "-F", "2000"])
        .arg(&prog)
        .args(["500", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("perf record");
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut perf.stdout.take().unwrap(), &mut bytes).unwrap();
    assert!(common::wait_in_time(&mut perf).success());
    let piped = dir.path().join("z.pipe");
    std::fs::write(&piped, &bytes).unwrap();
    let out = output_fed(
        perfwatch_cmd()
            .args(["-i", "-", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
        bytes,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("COMPRESSED"), "{stderr}");
    let ours = json_samples(&common::json_lines(&String::from_utf8_lossy(&out.stdout)));
    let perf = Command::new("perf")
        .args(["script", "-i", "-", "-F", "tid,time,ip", "--ns"])
        .stdin(std::fs::File::open(&piped).unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
        .output_in_time()
        .unwrap();
    let theirs = tid_time_ip(&String::from_utf8_lossy(&perf.stdout));
    assert!(ours.len() > 100, "{} samples from the pipe", ours.len());
    assert_eq!(ours, theirs, "the piped samples (tid, time, ip)");

    // A compressed record whose zstd bytes are broken: a clear error, exit 1, no panic.
    let mut broken = std::fs::read(&data).unwrap();
    let start = u64::from_le_bytes(broken[40..48].try_into().unwrap()) as usize;
    let mut at = start;
    let first = loop {
        let ty = u32::from_le_bytes(broken[at..at + 4].try_into().unwrap());
        let size = u16::from_le_bytes([broken[at + 6], broken[at + 7]]) as usize;
        if ty == 81 {
            break at;
        }
        at += size;
    };
    broken[first + 8..first + 12].copy_from_slice(b"nope");
    read_bytes(dir.path(), "broken-z.data", &broken)
        .exited(1)
        .said(&["compressed record at byte", "does not decompress"])
        .never_said(&["panicked"]);
}

// ---- Out: `-o FILE` and `-o -` ----

/// `perf script -F tid,time,ip --ns -i FILE`: each sample's (tid, time, ip) (a tid of -1
/// where the kernel took a sample outside any task).
fn perf_samples(file: &Path) -> Vec<(i64, u64, u64)> {
    tid_time_ip(&perf_out(
        &["script", "-G", "-F", "tid,time,ip", "--ns"],
        file,
    ))
}

/// `perf script -F tid,time,ip --ns`'s lines as (tid, time, ip), sorted.
fn tid_time_ip(text: &str) -> Vec<(i64, u64, u64)> {
    let mut v: Vec<(i64, u64, u64)> = text
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let tid = w.next()?.parse().ok()?;
            let (s, ns) = w.next()?.trim_end_matches(':').split_once('.')?;
            let ip = u64::from_str_radix(w.next()?, 16).ok()?;
            Some((
                tid,
                s.parse::<u64>().ok()? * 1_000_000_000 + ns.parse::<u64>().ok()?,
                ip,
            ))
        })
        .collect();
    v.sort_unstable();
    v
}

/// `--json`'s samples: (tid, time, ip).
fn json_samples(records: &[serde_json::Value]) -> Vec<(i64, u64, u64)> {
    let mut v: Vec<(i64, u64, u64)> = records
        .iter()
        .filter(|r| r["type"] == "sample")
        .map(|r| {
            let ip = r["sample_ip"].as_str().unwrap().trim_start_matches("0x");
            (
                r["sample_tid"]
                    .as_i64()
                    .or_else(|| r["sample_tid"].as_u64().map(|t| t as u32 as i32 as i64))
                    .unwrap_or_else(|| panic!("a sample without its tid: {r}")),
                r["sample_time"].as_u64().unwrap(),
                u64::from_str_radix(ip, 16).unwrap(),
            )
        })
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn a_recording_written_with_o_reads_in_perf_as_perfwatch_saw_it() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    let data = dir.path().join("out.data");
    let r = common::run(
        perfwatch_cmd()
            .arg("-o")
            .arg(&data)
            .args(["--json", "-e", "cpu-clock", "-F", "2000", "-g", "--"])
            .arg(&prog)
            .args(["800", "5"]),
    );
    r.exited(0).said(&["recording '-o "]);
    let records = r.json();
    // Root's file is private.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&data).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "mode {mode:o}");

    // perf script: the same samples (thread, time, address) as --json showed.
    let ours = json_samples(&records);
    assert!(ours.len() > 20, "only {} samples", ours.len());
    assert_eq!(perf_samples(&data), ours, "perf script -i vs --json");
    // perf report names the hot function, from the build ids and mappings in the file.
    let report = perf_out(
        &["report", "--stdio", "--no-children", "--sort", "sym"],
        &data,
    );
    let top = report
        .lines()
        .find(|l| !l.starts_with('#') && l.contains('%'))
        .unwrap_or("");
    assert!(
        top.contains("hot_a"),
        "perf report's top line: {top}\n{report}"
    );
    let header = perf_out(&["report", "--header-only"], &data);
    assert!(
        header.contains(&prog.display().to_string()) || header.contains("build id"),
        "{header}"
    );
    // The build ids are those the symbolizer read: where it named the program's samples
    // (a loaded machine can leave a binary unread at the end), the program's is in the file.
    let buildids = perf_out(&["buildid-list"], &data);
    if records.iter().any(|r| r["sym"] == "hot_a") {
        assert!(
            buildids.contains(prog.to_str().unwrap()),
            "the program's build id: {buildids}"
        );
    }
    // The processes of the command's fork storm, as perf counts them.
    let stats = perf_stats(&data);
    assert_eq!(stats.get("FORK"), Some(&5), "{stats:?}");

    // perfwatch reads it back: the same samples again.
    let (back, _) = perfwatch_json(&data);
    assert_eq!(json_samples(&back), ours, "perfwatch -i vs --json");

    // System-wide (perfwatch's own records shown, as the file has them): the same samples,
    // also where the stop time cut the last drains.
    let all = dir.path().join("all.data");
    let r = common::run(perfwatch_cmd().arg("-o").arg(&all).args([
        "--json",
        "--show-self",
        "-a",
        "-e",
        "cpu-clock",
        "-d",
        "1.5",
    ]));
    r.exited(0);
    let ours = json_samples(&r.json());
    assert!(!ours.is_empty());
    assert_eq!(perf_samples(&all), ours, "-a: perf script -i vs --json");
    // What existed before the run, as perf record synthesises it: pid 1's name at time 0
    // (a command's run has none of it: its exec comes as records, as with perf record).
    let comm_of_1 = |f: &Path| {
        perf_out(&["script", "--show-task-events", "-F", "comm,tid,time"], f)
            .lines()
            .any(|l| l.contains("PERF_RECORD_COMM") && l.contains(":1/1"))
    };
    assert!(comm_of_1(&all), "no COMM of pid 1 synthesised system-wide");
    assert!(!comm_of_1(&data), "pid 1 synthesised for a command");
}

#[test]
fn tracepoints_written_with_o_are_decoded_by_perf_script() {
    require_perf!();
    require_tracefs!();
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    let data = dir.path().join("tp.data");
    let r = common::run(
        perfwatch_cmd()
            .arg("-o")
            .arg(&data)
            .args(["--json", "-e", "sched:sched_switch", "--"])
            .arg(&prog)
            .args(["300", "20"]),
    );
    r.exited(0);
    let ours = json_samples(&r.json());
    assert!(!ours.is_empty(), "no sched_switch");
    assert_eq!(perf_samples(&data), ours, "perf script -i vs --json");
    // Their fields, decoded by perf from the tracing data in the file.
    let script = perf_out(&["script"], &data);
    let decoded = script
        .lines()
        .filter(|l| l.contains("sched:sched_switch: prev_comm=prog prev_pid="))
        .filter(|l| l.contains("==> next_comm="))
        .count();
    assert_eq!(decoded, ours.len(), "{script}");
}

#[test]
fn o_dash_writes_perfs_pipe_format_for_perf_script() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    let mut pw = perfwatch_cmd()
        .args(["-o", "-", "-e", "cpu-clock", "-F", "2000", "--"])
        .arg(&prog)
        .args(["1000", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let script = Command::new("perf")
        .args(["script", "-F", "comm,ip,sym", "-i", "-"])
        .stdin(pw.stdout.take().unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
        .output_in_time()
        .unwrap();
    let out = common::finish(pw, common::deadline());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines = String::from_utf8_lossy(&script.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stderr}\nperf script: {}\n{lines}",
        String::from_utf8_lossy(&script.stderr)
    );
    let samples = lines
        .lines()
        .filter(|l| l.trim().starts_with("prog"))
        .count();
    // The symbol of each sample (comm, ip, then the symbol): hot_a the most frequent.
    let mut by_sym: HashMap<&str, usize> = HashMap::new();
    for l in lines.lines() {
        let sym = l.split_whitespace().nth(2).unwrap_or("");
        *by_sym
            .entry(sym.split('+').next().unwrap_or(""))
            .or_default() += 1;
    }
    let hot = by_sym.get("hot_a").copied().unwrap_or(0);
    let said: u64 = stderr
        .split("sample ")
        .nth(1)
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        samples > 20 && by_sym.values().all(|&n| n <= hot),
        "{samples} samples, {hot} in hot_a: {by_sym:?}"
    );
    assert_eq!(
        samples as u64, said,
        "perf script's samples vs perfwatch's summary: {stderr}"
    );
    // The event names perf shows for the pipe are those it shows for a file (the pipe names
    // them in EVENT_UPDATE records, as perf record's pipe does).
    let events = |data: &[u8]| -> std::collections::BTreeSet<String> {
        let f = dir.path().join("names.data");
        std::fs::write(&f, data).unwrap();
        let out = Command::new("perf")
            .args(["script", "-F", "event", "-i", "-"])
            .stdin(std::fs::File::open(&f).unwrap())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
            .output_in_time()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect()
    };
    let two = ["-e", "cpu-clock,page-faults", "-F", "2000", "--"];
    let piped = perfwatch_cmd()
        .args(["-o", "-"])
        .args(two)
        .arg(&prog)
        .args(["200", "0"])
        .output_in_time()
        .unwrap();
    assert!(piped.status.success());
    let file = dir.path().join("two.data");
    let r = common::run(
        perfwatch_cmd()
            .arg("-o")
            .arg(&file)
            .arg("--plain")
            .args(two)
            .arg(&prog)
            .args(["200", "0"]),
    );
    r.exited(0);
    let in_file = perf_out(&["script", "-F", "event"], &file)
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect::<std::collections::BTreeSet<_>>();
    assert_eq!(
        in_file,
        ["cpu-clock:", "page-faults:"].map(String::from).into(),
        "a file's names"
    );
    assert_eq!(events(&piped.stdout), in_file, "the pipe's names");
    // Nothing else may write stdout.
    let r = common::run(perfwatch_cmd().args(["-o", "-", "--plain", "-d", "1"]));
    r.exited(2).said(&["-o - writes the recording to stdout"]);
}

#[test]
fn o_refuses_links_and_other_users_files_and_survives_a_full_disk() {
    require_root!("to make another user's file and a tiny tmpfs");
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let record = |to: &Path| {
        common::run(perfwatch_cmd().arg("-o").arg(to).args([
            "--quiet",
            "-a",
            "-e",
            "cpu-clock",
            "-F",
            "999",
            "-d",
            "2",
        ]))
    };
    let target = dir.path().join("target");
    std::fs::write(&target, "keep").unwrap();
    let link = dir.path().join("link.data");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    record(&link).exited(1).said(&["symbolic link"]);
    let theirs = dir.path().join("theirs.data");
    std::fs::write(&theirs, "theirs").unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    record(&theirs).exited(1).said(&["belongs to uid 65534"]);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "theirs");

    // A full disk: said once with the file, the run goes on to its summary, status 1.
    let tiny = common::Tmpfs::mount(dir.path(), "64k");
    let full = tiny.path().join("full.data");
    let r = record(&full);
    r.exited(1)
        .said(&["records in ", "No space left on device", "full.data"]);
    assert_eq!(r.stderr.matches("No space left").count(), 1, "{}", r.stderr);
    assert!(!full.exists(), "a partial recording left under its name");
}

#[test]
fn records_the_writer_cannot_take_are_counted_and_written_as_lost() {
    require_perf!();
    if !cfg!(debug_assertions) {
        return; // the queue's size is a test hook of debug builds
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("lost.data");
    // A queue of 512 bytes: most drains do not fit.
    let r = common::run(
        perfwatch_cmd()
            .env("PERFWATCH_DEBUG_RECORD_QUEUE", "512")
            .arg("-o")
            .arg(&data)
            .args(["--quiet", "-a", "-e", "cpu-clock", "-F", "999", "-d", "1.5"]),
    );
    r.exited(1)
        .said(&["were not written: the writer fell behind"]);
    let not_written: u64 = r
        .stderr
        .lines()
        .find(|l| l.contains("were not written"))
        .and_then(|l| l.split("lost.data: ").nth(1))
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(not_written > 0, "{}", r.stderr);
    // perf counts them as lost, from the LOST records the writer put in their place.
    let stats = perf_stats(&data);
    assert!(stats.get("LOST").copied().unwrap_or(0) > 0, "{stats:?}");
}

#[test]
fn o_writes_beside_the_full_screen_view() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    let data = dir.path().join("tui.data");
    let bin = assert_cmd::cargo::cargo_bin("perfwatch");
    let r = common::run(
        Command::new("script")
            .args(["-qec"])
            .arg(format!(
                "{} -o {} -e cpu-clock -F 2000 -- {} 1000 0",
                bin.display(),
                data.display(),
                prog.display()
            ))
            .arg("/dev/null")
            .env("TERM", "xterm"),
    );
    assert_eq!(r.code, 0, "{} {}", r.stdout, r.stderr);
    let script = perf_out(&["script", "-F", "ip,sym"], &data);
    let hot = script.lines().filter(|l| l.contains("hot_a")).count();
    assert!(hot > 20, "{hot} samples in hot_a: {script}");
}
