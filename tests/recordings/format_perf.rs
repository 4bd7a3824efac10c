//! `--format perf`: perf script's own lines, from a recording (the same text, line for
//! line, as `perf script` prints of it) and live (lines that parse as perf script's do).

use crate::common;
use crate::recording::{
    build, frameless_builds, perf_out, perf_record, perfwatch_cmd, record_dwarf, record_prog,
};

use std::path::Path;

/// `perfwatch -i FILE --format perf`: its stdout (and it must have decoded every sample).
/// Records out of time order are not refused here: on a loaded machine perf's rounds can
/// overlap more than perf promises, and the lines compared say whether the order is perf's.
#[track_caller]
fn perfwatch_perf_lines(file: &Path) -> String {
    let r = common::run(
        perfwatch_cmd()
            .arg("-i")
            .arg(file)
            .args(["--format", "perf"]),
    );
    r.exited(0).never_said(&["not decoded"]);
    r.stdout.clone()
}

/// The two texts are the same lines; else the first lines where they differ.
#[track_caller]
fn same_lines(what: &str, perf: &str, ours: &str) {
    if perf == ours {
        return;
    }
    let (p, o): (Vec<&str>, Vec<&str>) = (perf.lines().collect(), ours.lines().collect());
    let at = p
        .iter()
        .zip(&o)
        .position(|(a, b)| a != b)
        .unwrap_or(p.len().min(o.len()));
    let show = |l: &[&str]| l[at.saturating_sub(2)..(at + 4).min(l.len())].join("\n");
    panic!(
        "{what}: perf script printed {} lines, perfwatch --format perf {}; first difference at line {}:\n--- perf script\n{}\n--- perfwatch\n{}",
        p.len(),
        o.len(),
        at + 1,
        show(&p),
        show(&o)
    );
}

/// The sample blocks (a header line and its call chain lines) of `text` whose command is
/// `comm`.
fn blocks_of(text: &str, comm: &str) -> String {
    let mut out = String::new();
    let mut keep = false;
    for line in text.lines() {
        if !line.starts_with('\t') && !line.is_empty() {
            keep = line.split_whitespace().next() == Some(comm);
        }
        if keep {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[test]
fn format_perf_prints_what_perf_script_prints_for_clock_samples() {
    require_perf!();
    let _tracefs = require_tracefs!();
    // A command's recording (no CPU column), with forks, exits, comm and mmap records.
    let (dir, prog, data) = record_prog(
        "task.data",
        &["-e", "cpu-clock", "-F", "2000"],
        &["500", "20"],
    );
    let perf = perf_out(&["script"], &data);
    assert!(perf.contains(" hot_a+0x"), "{perf}");
    same_lines("per task", &perf, &perfwatch_perf_lines(&data));
    // With call chains: a line per frame, a blank line after each sample.
    let chains = dir.path().join("task-g.data");
    let p = prog.to_str().unwrap();
    perf_record(
        &chains,
        &["-e", "cpu-clock", "-F", "2000", "-g", "--", p, "500", "20"],
    );
    let perf = perf_out(&["script"], &chains);
    assert!(
        perf.contains("\n\t") && perf.contains(" hot_a+0x"),
        "{perf}"
    );
    same_lines("per task, -g", &perf, &perfwatch_perf_lines(&chains));
    // A tracepoint beside the clock, with call chains: the tracepoint's fields, then its
    // (kernel) chain; the event column as wide as the longest name.
    let mixed = dir.path().join("mixed.data");
    perf_record(
        &mixed,
        &[
            "-g",
            "-e",
            "sched:sched_process_fork,cpu-clock",
            "-F",
            "2000",
            "--",
            p,
            "300",
            "5",
        ],
    );
    let perf = perf_out(&["script"], &mixed);
    assert!(perf.contains(" sched:sched_process_fork: comm="), "{perf}");
    same_lines(
        "a tracepoint and a clock, -g",
        &perf,
        &perfwatch_perf_lines(&mixed),
    );
    // The whole system with call chains (the CPU column): the program's samples, named
    // after the program renamed itself (the other programs of a shared machine may be
    // binaries replaced since they started, which perfwatch refuses to read by design).
    let wide = dir.path().join("wide.data");
    perf_record(
        &wide,
        &[
            "-a",
            "-e",
            "cpu-clock",
            "-F",
            "2000",
            "-g",
            "--",
            p,
            "500",
            "0",
            "pwfmtwide",
        ],
    );
    let perf = blocks_of(&perf_out(&["script"], &wide), "pwfmtwide");
    assert!(perf.contains("] ") && perf.contains(" hot_b+0x"), "{perf}");
    let ours = blocks_of(&perfwatch_perf_lines(&wide), "pwfmtwide");
    same_lines("system-wide, -g", &perf, &ours);
}

#[test]
fn format_perf_prints_what_perf_script_prints_for_tracepoints() {
    require_perf!();
    let _tracefs = require_tracefs!();
    let events = [
        "sched:sched_switch",
        "sched:sched_wakeup",
        "sched:sched_process_exec",
        "sched:sched_process_exit",
        "sched:sched_process_fork",
        "raw_syscalls:sys_enter",
        "raw_syscalls:sys_exit",
        "irq:irq_handler_entry",
        "irq:irq_handler_exit",
        "irq:softirq_entry",
        "irq:softirq_exit",
        "irq:softirq_raise",
    ];
    let list = events.join(",");
    let (_dir, _prog, data) = record_prog("tp.data", &["-a", "-e", &list], &["300", "10"]);
    let perf = perf_out(&["script"], &data);
    // The program's own: forks, exits, its exec, its system calls, switches.
    for e in &events[..7] {
        assert!(perf.contains(&format!(" {e}: ")), "no {e} in {perf}");
    }
    same_lines("tracepoints", &perf, &perfwatch_perf_lines(&data));
}

#[test]
fn format_perf_works_live_and_its_lines_parse_as_perf_scripts_do() {
    require_perf!();
    let _tracefs = require_tracefs!();
    let dir = tempfile::tempdir().unwrap();
    let prog = build(dir.path());
    let r = common::run(
        perfwatch_cmd()
            .args(["--format", "perf", "-e"])
            .args(["cpu-clock/freq=2000/,sched:sched_process_fork", "--"])
            .arg(&prog)
            .args(["1000", "7", "pwfmtlive"]),
    );
    r.exited(0);
    // `comm tid [cpu] secs.usecs: [period] event: ...`, parsed as perf script's lines are.
    let mut forks = 0;
    let mut named = 0;
    for line in r.stdout.lines() {
        let (head, rest) = line.split_once(": ").unwrap_or_else(|| panic!("{line}"));
        let f: Vec<&str> = head.split_whitespace().collect();
        assert_eq!(f.len(), 4, "comm tid [cpu] time: {line}");
        assert_eq!(head.find(f[0]).map(|i| i + f[0].len()), Some(16), "{line}");
        assert!(f[1].parse::<u32>().is_ok() && f[2].starts_with('[') && f[2].ends_with(']'));
        let (secs, usecs) = f[3].split_once('.').unwrap();
        assert!(secs.parse::<u64>().is_ok() && usecs.len() == 6, "{line}");
        if let Some(fields) = rest.trim_start().strip_prefix("sched:sched_process_fork: ") {
            assert!(fields.starts_with("comm=pwfmtlive pid="), "{line}");
            assert!(
                fields.contains(" child_comm=pwfmtlive child_pid="),
                "{line}"
            );
            forks += 1;
            continue;
        }
        // `period cpu-clock: ip sym+off (dso)`
        let (period, rest) = rest.trim_start().split_once(' ').unwrap();
        assert!(period.parse::<u64>().is_ok(), "{line}");
        let rest = rest.trim_start().strip_prefix("cpu-clock: ").expect(line);
        let (ip, rest) = rest.trim_start().split_once(' ').unwrap();
        assert!(u64::from_str_radix(ip, 16).is_ok(), "{line}");
        let (sym, dso) = rest.split_once(" (").unwrap();
        assert!(dso.ends_with(')'), "{line}");
        if f[0] == "pwfmtlive" && (sym.starts_with("hot_a+0x") || sym.starts_with("hot_b+0x")) {
            assert_eq!(&dso[..dso.len() - 1], prog.to_str().unwrap(), "{line}");
            named += 1;
        }
    }
    assert_eq!(forks, 7, "{}", r.stdout);
    // The program spins for a wall-clock second: on a loaded machine it gets a share of a
    // CPU, so few samples are asked for.
    assert!(named >= 10, "{named} samples in hot_a/hot_b: {}", r.stdout);
}

/// A program whose hot loop is called as the last instruction of `outer_fn`: its return
/// address is the first byte of the label after it, `after_call`, which perf names by the
/// address itself (`after_call+0x0`), where perfwatch's own formats name the call's byte.
const RETURN_AT_LABEL_C: &str = r#"
#include <stdlib.h>
void outer_fn(long n);
__asm__(".text\n"
        "spin_fp: push %rbp\n mov %rsp, %rbp\n mov %rdi, %rax\n"
        "1: dec %rax\n jnz 1b\n pop %rbp\n ret\n"
        ".globl outer_fn\n .type outer_fn, @function\n"
        "outer_fn: push %rbp\n mov %rsp, %rbp\n call spin_fp\n"
        ".globl after_call\n"
        "after_call: pop %rbp\n ret\n");
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    for (int i = 0; i < 4; i++) outer_fn(n);
    return 0;
}
"#;

/// Lines of `ours` against perf's, but for the frames perf names from DWARF's inline
/// information (`(inlined)`), which perfwatch does not read: the same otherwise.
#[track_caller]
fn same_but_inlined(what: &str, perf: &str, ours: &str) {
    let (p, o): (Vec<&str>, Vec<&str>) = (perf.lines().collect(), ours.lines().collect());
    let keep = |l: &[&str], other: &[&str]| -> String {
        l.iter()
            .zip(other)
            .filter(|(a, b)| !a.ends_with(" (inlined)") && !b.ends_with(" (inlined)"))
            .map(|(a, _)| format!("{a}\n"))
            .collect()
    };
    assert_eq!(p.len(), o.len(), "{what}: line counts differ");
    same_lines(what, &keep(&p, &o), &keep(&o, &p));
}

/// perf names each frame of a call chain by its address: a return address at the first byte
/// of a symbol is that symbol's (`after_call+0x0`, ld.so's `_dl_start_user+0x0`), in a `-g`
/// recording; in a `--call-graph dwarf` one, perf's unwinder gives each caller's address
/// less one, and names that.
#[test]
fn format_perf_names_chains_addresses_as_perf_script_does() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let prog = common::cc(
        dir.path(),
        "ret",
        RETURN_AT_LABEL_C,
        &["-O1", "-fno-omit-frame-pointer"],
    );
    let data = dir.path().join("fp.data");
    let p = prog.to_str().unwrap();
    perf_record(
        &data,
        &["-e", "cpu-clock", "-F", "2000", "-g", "--", p, "60000000"],
    );
    let perf = perf_out(&["script"], &data);
    assert!(perf.contains(" after_call+0x0 ("), "{perf}");
    same_lines(
        "a return address at a label",
        &perf,
        &perfwatch_perf_lines(&data),
    );
    // perf's scripts get the same names, and each symbol's binding (local, global).
    let script = dir.path().join("frames.py");
    std::fs::write(
        &script,
        r#"seen = set()
def process_event(d):
    for f in d.get("callchain", []):
        if "sym" in f:
            seen.add("%s %d +%#x" % (f["sym"]["name"], f["sym"]["binding"], f["sym_off"]))
def trace_end():
    for l in sorted(seen): print(l)
"#,
    )
    .unwrap();
    let s = script.to_str().unwrap();
    let perf = perf_out(&["script", "-s", s], &data);
    assert!(perf.contains("after_call 1 +0x0\n"), "{perf}");
    let ours = common::run(perfwatch_cmd().arg("-i").arg(&data).args(["--script", s]));
    ours.exited(0);
    same_lines("a script's frames", &perf, &ours.stdout);
    // Without frame pointers: only .eh_frame says who called.
    let prog = frameless_builds(dir.path())("dw");
    let data = record_dwarf(&prog, "500");
    let perf = perf_out(&["script"], &data);
    assert!(perf.contains(" middle+0x"), "{perf}");
    same_but_inlined("--call-graph dwarf", &perf, &perfwatch_perf_lines(&data));
}
