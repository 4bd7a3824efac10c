//! The end of a run loses nothing: every CPU's records up to the stop time are in the
//! output, side by side with `perf record -k mono` over the same window; a script gets every
//! event before `trace_end()` when the run ends by itself. The real binary, the real kernel.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// CPU-bound processes, killed when dropped: the busy machine the tail was lost on.
struct Load(Vec<Child>);

impl Load {
    fn start(n: usize) -> Load {
        Load(
            (0..n)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .stdin(Stdio::null())
                        .spawn()
                        .unwrap()
                })
                .collect(),
        )
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Wait for `child`, at most `limit` (then kill it and fail).
fn wait_for(child: &mut Child, limit: Duration, what: &str) -> std::process::ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Read a pipe to its end on a thread of its own (so that a full pipe never blocks the child).
fn slurp(r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut r = r;
        let mut s = Vec::new();
        let _ = r.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    })
}

/// An hrtimer_expire_entry hit: (cpu, the timer's `now`, the timer's address). The same in
/// both tools (their sample times differ by the microsecond between the two event instances).
type Hit = (u32, u64, u64);

/// The `name: value` or `"name":value` member of a line, as text.
fn member<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let plain = format!(" {name}: ");
    let json = format!("\"{name}\":");
    let (at, len) = line
        .find(&json)
        .map(|i| (i, json.len()))
        .or_else(|| line.find(&plain).map(|i| (i, plain.len())))?;
    let rest = &line[at + len..];
    let end = rest.find([',', ' ', '}']).unwrap_or(rest.len());
    Some(rest[..end].trim_matches('"'))
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}

/// perfwatch's hrtimer_expire_entry hits, from --plain or --json lines.
fn perfwatch_hits(out: &str) -> HashSet<Hit> {
    out.lines()
        .filter(|l| l.contains("timer:hrtimer_expire_entry"))
        .filter_map(|l| {
            let cpu =
                member(l, "sample_cpu").or_else(|| l.strip_prefix("cpu: ")?.split(',').next())?;
            Some((
                cpu.parse().ok()?,
                member(l, "now")?.parse().ok()?,
                hex(member(l, "hrtimer")?)?,
            ))
        })
        .collect()
}

/// perf's hits as `perf script -F pid,cpu,time,trace --ns` prints them, with their time and
/// pid.
fn perf_hits(script: &str) -> Vec<(Hit, u64, u32)> {
    script
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let pid: u32 = w.next()?.parse().ok()?;
            let cpu: u32 = w.next()?.trim_matches(['[', ']']).parse().ok()?;
            let (s, ns) = w.next()?.trim_end_matches(':').split_once('.')?;
            let time = s.parse::<u64>().ok()? * 1_000_000_000 + ns.parse::<u64>().ok()?;
            let field = |name: &str| {
                l.split_whitespace()
                    .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
            };
            let hit = (cpu, field("now")?.parse().ok()?, hex(field("hrtimer")?)?);
            Some((hit, time, pid))
        })
        .collect()
}

/// The sum of `lost by the kernel: N records ..., M samples; dropped by perfwatch: D`.
fn losses(err: &str) -> u64 {
    let Some(line) = err.lines().find(|l| l.contains("lost by the kernel:")) else {
        return 0;
    };
    line.split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse::<u64>().ok())
        .sum()
}

/// One `-d` run of perfwatch with `args`, under load, beside `perf record -k mono -a` of the
/// same tracepoint: per CPU, every hit perf stamped between perfwatch's first hit on that CPU
/// and perfwatch's stop time T must be in perfwatch's output (or counted as lost), and none
/// after T. A hit's two
/// stamps (one per tool) are microseconds apart: hits within 1 ms before T are left out of
/// the check, as are perfwatch's own (hidden without --show-self).
fn the_tail_is_complete(args: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("perf.data");
    let _load = Load::start(2);
    // Recording once perf says so (its /proc read behind it), not once its fds are open.
    let mut perf = common::PerfRecord::start(dir.path(), |c| {
        // No build-ids: perf record would read the whole file again after the SIGINT to
        // find them (tens of seconds on a loaded machine), and tracepoints need none.
        c.args([
            "-B",
            "-k",
            "mono",
            "-a",
            "-e",
            "timer:hrtimer_expire_entry",
            "-o",
        ])
        .arg(&data);
    });
    perf.enable();
    let mut pw = common::perfwatch()
        .args(args)
        .args(["-d", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pw_pid = pw.id();
    let out = slurp(pw.stdout.take().unwrap());
    let err = slurp(pw.stderr.take().unwrap());
    let status = wait_for(&mut pw, Duration::from_secs(30), "perfwatch");
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    // SAFETY: signalling our own child.
    unsafe { libc::kill(perf.child.id() as i32, libc::SIGINT) };
    let perf_status = wait_for(&mut perf.child, Duration::from_secs(60), "perf record");
    // perf record ends by the SIGINT it was stopped with (it raises it again), having
    // written its data.
    use std::os::unix::process::ExitStatusExt;
    assert!(
        perf_status.success() || perf_status.signal() == Some(libc::SIGINT),
        "perf record failed: {perf_status:?}"
    );
    let script = Command::new("perf")
        .args(["script", "-i"])
        .arg(&data)
        .args(["-F", "pid,cpu,time,trace", "--ns"])
        .output()
        .unwrap();
    assert_eq!(status.code(), Some(0), "{args:?}: {err}");
    let t = common::stop_time(&err).unwrap_or_else(|| panic!("{args:?}: no stop time said: {err}"));
    let mine = perfwatch_hits(&out);
    let theirs = perf_hits(&String::from_utf8_lossy(&script.stdout));
    assert!(
        !mine.is_empty() && !theirs.is_empty(),
        "{args:?}: no hits: {err}"
    );
    // Per CPU, the perf time of perfwatch's first hit there: its events were on from then.
    let by_hit: HashMap<Hit, u64> = theirs.iter().map(|&(h, time, _)| (h, time)).collect();
    let mut first: HashMap<u32, u64> = HashMap::new();
    for h in &mine {
        if let Some(&time) = by_hit.get(h) {
            let f = first.entry(h.0).or_insert(time);
            *f = (*f).min(time);
        }
    }
    let mut missing: HashMap<u32, Vec<u64>> = HashMap::new();
    let mut checked = 0;
    for &(hit, time, pid) in &theirs {
        let Some(&from) = first.get(&hit.0) else {
            continue;
        };
        if pid == pw_pid || time <= from || time + 1_000_000 > t {
            continue;
        }
        checked += 1;
        if !mine.contains(&hit) {
            missing.entry(hit.0).or_default().push(time);
        }
    }
    // And nothing past T: every CPU's stream ends at the same instant (a CPU whose reader
    // drained later no longer runs on past the others, which read as the others' loss).
    let past: Vec<u64> = mine
        .iter()
        .filter_map(|h| by_hit.get(h))
        .filter(|&&time| time > t + 1_000_000)
        .copied()
        .collect();
    assert!(
        past.is_empty(),
        "{args:?}: {} records more than 1 ms after the stop time, the last {:.1} ms after",
        past.len(),
        past.iter().max().map_or(0, |m| m - t) as f64 / 1e6
    );
    let n: usize = missing.values().map(Vec::len).sum();
    let said = missing
        .iter()
        .map(|(cpu, times)| {
            let last = times.iter().max().copied().unwrap_or(0);
            format!(
                "cpu {cpu}: {} missing, the last {:.1} ms before T",
                times.len(),
                t.saturating_sub(last) as f64 / 1e6
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    common::say(&format!(
        "{args:?}: {checked} of perf's hits checked, {n} missing; {said}"
    ));
    assert!(checked > 100, "{args:?}: too few hits to check ({checked})");
    assert!(
        n as u64 <= losses(&err),
        "{args:?}: {n} hits up to the stop time are missing and not counted: {said}\n{err}"
    );
}

/// `--json`, one event: the end of a `-d` run (the case the tail went missing in); and
/// `--plain` through a script.
#[test]
fn a_duration_run_has_every_cpus_records_up_to_the_stop_time_json_and_script() {
    let _tracefs = require_tracefs!();
    if !common::installed("perf") {
        skip!("perf is not installed (Debian: linux-perf)");
    }
    the_tail_is_complete(&["--json", "-a", "-e", "timer:hrtimer_expire_entry"]);
    // Through a script stage: its chunks come back in the same order, up to the same T.
    #[cfg(feature = "python")]
    {
        let (_d, script) = common::temp_script("pass.py", "def on_event(event):\n    pass\n");
        let script = script.to_str().expect("utf-8 temp path");
        the_tail_is_complete(&[
            "--plain",
            "-a",
            "-e",
            "timer:hrtimer_expire_entry",
            "--script",
            script,
        ]);
    }
}

/// `--plain`, two events, and `--json` with many events sharing each CPU's ring.
#[test]
fn a_duration_run_has_every_cpus_records_up_to_the_stop_time_plain_and_many_events() {
    let _tracefs = require_tracefs!();
    if !common::installed("perf") {
        skip!("perf is not installed (Debian: linux-perf)");
    }
    the_tail_is_complete(&[
        "--plain",
        "-a",
        "-e",
        "timer:hrtimer_expire_entry,sched:sched_switch",
    ]);
    the_tail_is_complete(&[
        "--json",
        "-a",
        "-e",
        "timer:hrtimer_expire_entry,sched:sched_switch,sched:sched_wakeup,timer:hrtimer_start,irq:softirq_entry",
    ]);
}

/// A script that takes 5 ms an event and says in trace_end() how many it saw.
#[cfg(feature = "python")]
const SLOW_SCRIPT: &str = "import time\nn = 0\ndef on_event(event):\n    global n\n    n += 1\n    time.sleep(0.005)\ndef trace_end():\n    print(f'saw {n} events')\n";

/// A command that makes some 800 system calls, then exits: the run ends by itself.
#[cfg(feature = "python")]
const WORKLOAD: [&str; 6] = [
    "dd",
    "if=/dev/zero",
    "of=/dev/null",
    "bs=1",
    "count=400",
    "status=none",
];

/// Run the slow script over the workload's system calls, SIGINT after `signal_after` if
/// given; returns (exit status, records written, what trace_end() said it saw, stderr,
/// how long the exit took after the signal).
#[cfg(feature = "python")]
fn slow_script_run(signal_after: Option<Duration>) -> (Option<i32>, usize, u64, String, Duration) {
    let (_d, script) = common::temp_script("slow.py", SLOW_SCRIPT);
    let mut pw = common::perfwatch()
        .args(["--plain", "-e", "raw_syscalls:sys_enter", "--script"])
        .arg(&script)
        .arg("--")
        .args(WORKLOAD)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = slurp(pw.stdout.take().unwrap());
    let err = slurp(pw.stderr.take().unwrap());
    let mut after_signal = Duration::ZERO;
    if let Some(d) = signal_after {
        std::thread::sleep(d);
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pw.id() as i32, libc::SIGINT) };
        let t0 = Instant::now();
        wait_for(&mut pw, Duration::from_secs(30), "perfwatch");
        after_signal = t0.elapsed();
    }
    let status = wait_for(&mut pw, Duration::from_secs(120), "perfwatch");
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    let lines = out.lines().filter(|l| l.contains("type: ")).count();
    let saw = err
        .lines()
        .find_map(|l| l.strip_prefix("[slow.py] saw "))
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("trace_end() said nothing: {err}"));
    (status.code(), lines, saw, err, after_signal)
}

/// The command exits while the script is far behind (some 800 events at 5 ms each): the
/// script still gets every event before trace_end(), nothing is counted as dropped, and the
/// wait says how far it is on stderr once it lasts more than 2 s.
#[cfg(feature = "python")]
#[test]
fn a_slow_script_gets_every_event_before_trace_end_when_the_command_exits() {
    let _tracefs = require_tracefs!();
    let (code, lines, saw, err, _) = slow_script_run(None);
    assert_eq!(code, Some(0), "{err}");
    assert!(lines > 400, "too few records ({lines}): {err}");
    assert_eq!(
        saw as usize, lines,
        "the script saw {saw} of {lines}: {err}"
    );
    assert!(err.contains("dropped by perfwatch: 0"), "{err}");
    assert!(!err.contains("busy script at exit"), "{err}");
    assert!(
        err.contains("events handed over; the run has ended, waiting for the script"),
        "no progress said: {err}"
    );
}

/// A signal during that wait cuts it short: perfwatch ends within a couple of seconds with
/// status 0, every record is still written, and what the script did not see is counted:
/// seen + not seen = all.
#[cfg(feature = "python")]
#[test]
fn a_signal_cuts_the_wait_for_a_slow_script_short_and_counts_the_rest() {
    let _tracefs = require_tracefs!();
    let (code, lines, saw, err, took) = slow_script_run(Some(Duration::from_secs(3)));
    assert_eq!(code, Some(0), "{err}");
    assert!(
        took < Duration::from_secs(3),
        "took {took:?} after SIGINT: {err}"
    );
    let not_seen: u64 = err
        .lines()
        .find_map(|l| l.strip_prefix("perfwatch: the scripts did not see "))
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("the events the script did not see are not said: {err}"));
    assert!(saw > 0 && not_seen > 0, "{err}");
    assert_eq!(saw + not_seen, lines as u64, "{err}");
    assert!(
        err.contains(&format!("dropped by perfwatch: {not_seen}")),
        "{err}"
    );
}
