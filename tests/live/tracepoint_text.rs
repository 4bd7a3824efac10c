//! Tracepoint values as perf prints them: the same run recorded by `perf record -k mono`
//! and watched by `perfwatch --json`, each event perf printed matched to perfwatch's by
//! CPU, tracepoint and time (the two files stamp a hit ~1 µs apart), and perf script's text of it rebuilt from perfwatch's members alone
//! (raw values, and the `_str` text of the fields the print fmt renders): every matched
//! event must read the same.

use crate::common;

use common::InTime;
use common::SpawnDrained;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const EVENTS: &[&str] = &[
    "sched:sched_switch",
    "sched:sched_wakeup",
    "irq:softirq_entry",
    "irq:softirq_exit",
    "irq:irq_handler_entry",
    "timer:hrtimer_expire_entry",
    "sched:sched_process_exec",
    "sched:sched_process_exit",
    "sched:sched_process_fork",
    "raw_syscalls:sys_enter",
    "raw_syscalls:sys_exit",
];

fn s(v: &Value, k: &str) -> String {
    match &v[k] {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => format!("{other}"),
    }
}

fn n(v: &Value, k: &str) -> i64 {
    v[k].as_i64().unwrap_or(i64::MIN)
}

/// What perf script prints after the event name, made from perfwatch's members: the
/// expectation is written here, by hand from each tracepoint's print fmt, not by
/// perfwatch's own renderer.
fn perf_text(event: &str, v: &Value) -> Option<String> {
    Some(match event {
        "sched:sched_switch" => format!(
            "prev_comm={} prev_pid={} prev_prio={} prev_state={} ==> next_comm={} next_pid={} next_prio={}",
            s(v, "prev_comm"),
            n(v, "prev_pid"),
            n(v, "prev_prio"),
            s(v, "prev_state_str"),
            s(v, "next_comm"),
            n(v, "next_pid"),
            n(v, "next_prio")
        ),
        "sched:sched_wakeup" => format!(
            "comm={} pid={} prio={} target_cpu={:03}",
            s(v, "comm"),
            n(v, "pid"),
            n(v, "prio"),
            n(v, "target_cpu")
        ),
        "irq:softirq_entry" | "irq:softirq_exit" => {
            format!("vec={} [action={}]", n(v, "vec"), s(v, "vec_str"))
        }
        "irq:irq_handler_entry" => format!("irq={} name={}", n(v, "irq"), s(v, "name")),
        "timer:hrtimer_expire_entry" => format!(
            "hrtimer={} function={} now={}",
            s(v, "hrtimer"),
            s(v, "function_str"),
            n(v, "now")
        ),
        "sched:sched_process_exec" => format!(
            "filename={} pid={} old_pid={}",
            s(v, "filename"),
            n(v, "pid"),
            n(v, "old_pid")
        ),
        "sched:sched_process_exit" => format!(
            "comm={} pid={} prio={} group_dead={}",
            s(v, "comm"),
            n(v, "pid"),
            n(v, "prio"),
            s(v, "group_dead_str")
        ),
        "sched:sched_process_fork" => format!(
            "comm={} pid={} child_comm={} child_pid={}",
            s(v, "parent_comm"),
            n(v, "parent_pid"),
            s(v, "child_comm"),
            n(v, "child_pid")
        ),
        "raw_syscalls:sys_enter" => {
            let args: Vec<String> = v["args"]
                .as_array()?
                .iter()
                .map(|a| format!("{:x}", a.as_u64().unwrap_or(0)))
                .collect();
            format!("NR {} ({})", n(v, "id"), args.join(", "))
        }
        "raw_syscalls:sys_exit" => format!("NR {} = {}", n(v, "id"), n(v, "ret")),
        _ => return None,
    })
}

/// perf script's lines (`-F cpu,time,event,trace --ns`): (cpu, event) → (time ns, text),
/// in time order.
fn perf_events(text: &str) -> HashMap<(u64, String), Vec<(u64, String)>> {
    let mut out: HashMap<(u64, String), Vec<(u64, String)>> = HashMap::new();
    for line in text.lines() {
        // "[000]  5291.101018710:      raw_syscalls:sys_exit: NR 16 = 0"
        let Some(rest) = line.trim_start().strip_prefix('[') else {
            continue;
        };
        let Some((cpu, rest)) = rest.split_once(']') else {
            continue;
        };
        let Some((time, rest)) = rest.trim_start().split_once(": ") else {
            continue;
        };
        let Some((event, text)) = rest.trim_start().split_once(": ") else {
            continue;
        };
        let (Ok(cpu), Some((secs, ns))) = (cpu.parse::<u64>(), time.split_once('.')) else {
            continue;
        };
        let (Ok(secs), Ok(ns)) = (secs.parse::<u64>(), ns.parse::<u64>()) else {
            continue;
        };
        out.entry((cpu, event.to_string()))
            .or_default()
            .push((secs * 1_000_000_000 + ns, text.to_string()));
    }
    for v in out.values_mut() {
        v.sort();
    }
    out
}

/// Two event files stamp the same tracepoint hit a little apart (each takes its own time
/// as it writes its sample), by an offset that hardly varies. The perf event on the same CPU
/// nearest to `time + offset`, within `tolerance`, when no other one of the same tracepoint
/// is that near (else it is left unmatched).
fn nearest(list: &[(u64, String)], time: u64, offset: i64, tolerance: u64) -> Option<(u64, &str)> {
    let at = time.checked_add_signed(offset)?;
    let i = list.partition_point(|(t, _)| *t < at);
    let near: Vec<&(u64, String)> = list[i.saturating_sub(2)..(i + 2).min(list.len())]
        .iter()
        .filter(|(t, _)| t.abs_diff(at) <= tolerance)
        .collect();
    match near[..] {
        [(t, text)] => Some((*t, text)),
        _ => None,
    }
}

/// The offset between perf's stamps and perfwatch's, per event: the median over that event's
/// hits matched within 5 µs. Per event, because the two stamps of one hit are taken one after
/// the other as each tool's record is written, and how long the first write takes depends on
/// the event (an exec's record, with its file name, takes longer than a timer's).
fn offsets(
    ours: &[(u64, String, u64)],
    theirs: &HashMap<(u64, String), Vec<(u64, String)>>,
) -> HashMap<String, i64> {
    let mut d: HashMap<String, Vec<i64>> = HashMap::new();
    for (cpu, event, time) in ours {
        let Some(list) = theirs.get(&(*cpu, event.clone())) else {
            continue;
        };
        if let Some((t, _)) = nearest(list, *time, 0, 5_000) {
            d.entry(event.clone())
                .or_default()
                .push(t as i64 - *time as i64);
        }
    }
    d.into_iter()
        .map(|(event, mut d)| {
            d.sort();
            (event, d[d.len() / 2])
        })
        .collect()
}

#[test]
fn tracepoint_values_read_as_perf_script_prints_them() {
    let _tracefs = require_tracefs!();
    if Command::new("perf")
        .arg("--version")
        .output_in_time()
        .is_err()
    {
        skip!("perf is not installed (Debian: linux-perf)");
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("perf.data");
    // The workload: a shell that waits for a line, then forks, execs, exits and does I/O.
    let mut work = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "read go; for i in 1 2 3 4 5; do /bin/true; sh -c 'exit 0'; done; \
             dd if=/dev/zero of={} bs=4k count=64 oflag=dsync 2>/dev/null; sleep 0.3",
            dir.path().join("io").display()
        ))
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let wpid = work.id();
    // The workload's own system calls only (a busy machine makes millions): perf's
    // tracepoint filter, and perfwatch's --filter.
    // perfwatch watches from before perf and the workload start until its SIGINT after the
    // workload: no -d to outlast a loaded machine's slow start of perf. (perfwatch's events
    // are opened first, as the time offset between the two tools' stamps was measured.)
    let mut pw = common::perfwatch()
        .args(["--json", "-a", "-e", &EVENTS.join(",")])
        .arg("--filter")
        .arg(format!(
            "!event:raw_syscalls:* | event:raw_syscalls:* common_pid:{wpid}"
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn_drained()
        .unwrap();
    common::wait_until_watching(&mut pw);
    // perf records from when it says so (its /proc read behind it, seconds on a loaded
    // machine), until the SIGINT after the workload.
    let mut perf = common::PerfRecord::start(dir.path(), |c| {
        c.args(["-B", "-k", "mono", "-a", "-o"]).arg(&data);
        for e in EVENTS {
            c.args(["-e", e]);
            if e.starts_with("raw_syscalls") {
                c.arg("--filter").arg(format!("common_pid == {wpid}"));
            }
        }
    });
    perf.enable();
    {
        use std::io::Write;
        let mut stdin = work.stdin.take().unwrap();
        let _ = stdin.write_all(b"go\n");
    }
    let t0 = Instant::now();
    while work.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(30), "the workload hangs");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(perf.child.id() as i32, libc::SIGINT) };
    let perf_out = perf.child.output_in_time().unwrap();
    // perf record ends by the SIGINT it was stopped with (it raises it again), having
    // written its data.
    use std::os::unix::process::ExitStatusExt;
    assert!(
        perf_out.status.success() || perf_out.status.signal() == Some(libc::SIGINT),
        "perf record: {perf_out:?}"
    );
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pw.id() as i32, libc::SIGINT) };
    let pw_out = pw.output_in_time().unwrap();
    let pw_run: common::Run = pw_out.into();
    pw_run.exited(0);
    let script = Command::new("perf")
        .args(["script", "-i"])
        .arg(&data)
        .args(["-F", "cpu,time,event,trace", "--ns"])
        .output_in_time()
        .unwrap();
    assert!(script.status.success(), "perf script: {script:?}");
    let theirs = perf_events(&String::from_utf8_lossy(&script.stdout));

    // event → (matched, agreeing), and the first disagreement of each.
    let mut tally: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut wrong: Vec<String> = Vec::new();
    let lines = pw_run.json();
    let stamps: Vec<(u64, String, u64)> = lines
        .iter()
        .filter_map(|v| {
            Some((
                v["sample_cpu"].as_u64()?,
                v["event"].as_str()?.to_string(),
                v["sample_time"].as_u64()?,
            ))
        })
        .collect();
    let offs = offsets(&stamps, &theirs);
    for v in lines {
        let (Some(event), Some(cpu), Some(time)) = (
            v["event"].as_str(),
            v["sample_cpu"].as_u64(),
            v["sample_time"].as_u64(),
        ) else {
            continue;
        };
        let Some(event) = EVENTS.iter().find(|e| **e == event) else {
            continue;
        };
        *seen.entry(event.to_string()).or_default() += 1;
        let Some((_, text)) = theirs
            .get(&(cpu, event.to_string()))
            .and_then(|l| nearest(l, time, offs.get(*event).copied().unwrap_or(0), 1_000))
        else {
            continue;
        };
        // perf prints names raw; perfwatch escapes them (a backslash is then doubled):
        // leave out the few events whose names needed it.
        if serde_json::to_string(&v).unwrap().contains("\\\\") {
            continue;
        }
        let t = tally.entry(event).or_default();
        t.0 += 1;
        let ours = perf_text(event, &v).unwrap_or_default();
        if ours == *text {
            t.1 += 1;
        } else if wrong.len() < 10 {
            wrong.push(format!(
                "{event}:\n  perf:      {text}\n  perfwatch: {ours}\n  {v}"
            ));
        }
    }
    let ours_n = pw_run.stdout.lines().count();
    let mut report: Vec<String> = EVENTS
        .iter()
        .map(|e| {
            let (m, a) = tally.get(e).copied().unwrap_or_default();
            let perf_n: usize = theirs
                .iter()
                .filter(|((_, ev), _)| ev == e)
                .map(|(_, l)| l.len())
                .sum();
            let ours_n = seen.get(*e).copied().unwrap_or(0);
            format!("{e} {a}/{m} (perf {perf_n}, perfwatch {ours_n})")
        })
        .collect();
    report.sort();
    common::say(&format!(
        "tracepoint_values_read_as_perf_script_prints_them: agree/matched {} (perf script: {} events, perfwatch: {ours_n} lines; perf's stamps after perfwatch's, in ns: {offs:?})",
        report.join(", "),
        theirs.values().map(Vec::len).sum::<usize>()
    ));

    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Every tracepoint the workload surely hits was matched at least once.
    for e in [
        "sched:sched_switch",
        "sched:sched_wakeup",
        "timer:hrtimer_expire_entry",
        "sched:sched_process_exec",
        "sched:sched_process_exit",
        "sched:sched_process_fork",
        "raw_syscalls:sys_enter",
        "raw_syscalls:sys_exit",
        "irq:softirq_entry",
    ] {
        assert!(
            tally.get(e).is_some_and(|t| t.0 > 0),
            "no {e} matched: {report:?}\nperfwatch stderr: {}",
            pw_run.stderr
        );
    }
}

/// Every format file of this kernel: its print fmt is read (or left, without a panic), and
/// the share read is said.
#[test]
fn the_print_fmt_of_every_tracepoint_here_is_read() {
    let _tracefs = require_tracefs!();
    let (mut total, mut read, mut rendered, mut lines) = (0, 0, 0, 0);
    let events = std::path::Path::new(common::TRACEFS).join("events");
    for sys in std::fs::read_dir(&events).unwrap().flatten() {
        let Ok(tps) = std::fs::read_dir(sys.path()) else {
            continue;
        };
        for tp in tps.flatten() {
            let Ok(text) = std::fs::read_to_string(tp.path().join("format")) else {
                continue;
            };
            let name = format!(
                "{}:{}",
                sys.file_name().to_string_lossy(),
                tp.file_name().to_string_lossy()
            );
            let Ok(f) = perfwatch::event::tracepoint::Format::parse(&name, &text) else {
                continue;
            };
            total += 1;
            let Some(p) = &f.print else { continue };
            read += 1;
            rendered += p.renders().len();
            // A record of zeros renders (or not) without a panic.
            let zeros = vec![0u8; 4096];
            if p.render_line(
                &f.fields,
                &zeros,
                &perfwatch::event::tracepoint::printfmt::NoSymbols,
            )
            .is_some()
            {
                lines += 1;
            }
        }
    }
    common::say(&format!(
        "the_print_fmt_of_every_tracepoint_here_is_read: {read} of {total} print fmts read, \
         {rendered} fields rendered as text, {lines} whole lines rendered from a zero record"
    ));
    assert!(total > 0);
    assert!(read * 100 >= total * 95, "only {read} of {total} read");
}
