//! Where perf does the same job, perfwatch gives the same answer: perfwatch and `perf record`
//! watch one run of a workload side by side (the workload starts stopped, both attach with
//! `-p`, then it is let go), and what perfwatch says is held against what `perf script` says
//! of the same run: the folded stacks of a binary built without frame pointers (Debian's
//! `xz`), the names of PLT stubs, and the name perf chooses among aliases at one address
//! (libc's `write`, kernel functions with several names).
//!
//! perf is the oracle here: these tests skip, visibly, where it is not installed.

use crate::common;

use common::InTime;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `perf`, when it is installed and runs.
fn perf() -> Option<&'static str> {
    let ok = Command::new("perf")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status_in_time()
        .is_ok_and(|s| s.success());
    ok.then_some("perf")
}

macro_rules! require_perf_tool {
    () => {
        if perf().is_none() {
            skip!("perf is not installed (.ci/run installs linux-perf)");
        }
    };
}

/// One run of `argv`, watched by `perf record -g -e cpu-clock -F 1000 -p PID` and
/// `perfwatch ARGS -g -e cpu-clock -F 1000 -p PID` (its stdout into `dir/perfwatch.out`):
/// the perf.data file, and perfwatch's stderr.
fn side_by_side(dir: &Path, argv: &[&str], perfwatch_args: &[&str]) -> (PathBuf, String) {
    // `sh` stops itself, then execs `argv` once continued: both monitors are watching
    // before it runs a single instruction of the workload.
    let target = common::Stopped::before_exec(argv);
    let watch = ["-g", "-e", "cpu-clock", "-F", "1000"];
    let out = dir.join("perfwatch.out");
    common::side_by_side(dir, target, &watch, perfwatch_args, &out)
}

/// One sample as `perf script -F comm,pid,ip,sym,dso` prints it: its frames, innermost
/// first, as (address, symbol, dso).
struct PerfSample {
    comm: String,
    frames: Vec<(u64, String, String)>,
}

fn perf_script(data: &Path) -> Vec<PerfSample> {
    perf_script_with(data, "comm,pid,ip,sym,dso")
}

/// As [`perf_script`], with the `-F` fields `fields` (`symoff` makes symbols `name+0x10`).
fn perf_script_with(data: &Path, fields: &str) -> Vec<PerfSample> {
    common::perf_script_samples(data, fields)
        .into_iter()
        .map(|s| {
            let head = s.head.trim();
            PerfSample {
                // `COMM PID`: the name may hold spaces; perf pads it to the widest one seen.
                comm: head
                    .rsplit_once(' ')
                    .map_or(head, |(c, _)| c)
                    .trim()
                    .to_string(),
                frames: s
                    .frames
                    .into_iter()
                    .filter_map(|(addr, sym, dso)| {
                        Some((u64::from_str_radix(&addr, 16).ok()?, sym, dso))
                    })
                    .collect(),
            }
        })
        .collect()
}

/// perf's samples folded as FlameGraph's `stackcollapse-perf.pl` folds `perf script`: the
/// comm (spaces as `_`), then the frames outermost first; an unnamed frame is its binary's
/// file name in brackets, or `[unknown]` when perf knew no binary either.
fn collapse(samples: &[PerfSample]) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    for s in samples {
        let mut line = s.comm.replace(' ', "_");
        for (_, sym, dso) in s.frames.iter().rev() {
            line.push(';');
            if sym == "[unknown]" {
                if dso == "[unknown]" {
                    line.push_str("[unknown]");
                } else {
                    let base = dso.rsplit('/').next().unwrap_or(dso);
                    line.push_str(&format!("[{base}]"));
                }
            } else {
                line.push_str(&sym.replace(';', ":"));
            }
        }
        *out.entry(line).or_default() += 1;
    }
    out
}

/// perfwatch's folded lines, without the `_[k]` mark of kernel frames (perf's collapse
/// without `--kernel` leaves it out).
fn folded(text: &str) -> HashMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (stack, n) = l.rsplit_once(' ')?;
            Some((stack.replace("_[k]", ""), n.parse::<u64>().ok()?))
        })
        .fold(HashMap::new(), |mut m: HashMap<String, u64>, (s, n)| {
            *m.entry(s).or_default() += n;
            m
        })
}

fn total(m: &HashMap<String, u64>) -> u64 {
    m.values().sum()
}

fn share(m: &HashMap<String, u64>, stack: &str) -> f64 {
    m.get(stack).copied().unwrap_or(0) as f64 / total(m).max(1) as f64
}

/// `n` bytes of text from a fixed seed: words a compressor has to work at.
fn text(n: usize) -> Vec<u8> {
    const WORDS: [&str; 16] = [
        "perf", "ring", "sample", "stack", "frame", "kernel", "symbol", "fold", "mmap", "exec",
        "fork", "exit", "comm", "lost", "chain", "watch",
    ];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut out = Vec::with_capacity(n + 16);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(WORDS[(x & 15) as usize].as_bytes());
        out.push(if x >> 60 == 0 { b'\n' } else { b' ' });
        if x >> 58 == 1 {
            out.extend_from_slice(format!("{}", x >> 40).as_bytes());
        }
    }
    out
}

/// Issue 22: an unnamed frame is folded by its binary (`[liblzma.so.5.4.1]`), as
/// stackcollapse-perf.pl folds perf's, never by its address: the flame graph of a binary
/// without frame pointers has as many stacks as perf's (it had 18x as many), and its top
/// stacks have the same shares.
#[test]
fn folded_stacks_of_a_frameless_binary_fold_as_perfs_do() {
    require_perf!();
    require_perf_tool!();
    if !common::installed("xz") {
        skip!("xz is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("words");
    std::fs::write(&input, text(4 << 20)).unwrap();
    let out = dir.path().join("pw.folded");
    let (data, said) = side_by_side(
        dir.path(),
        &["xz", "-9", "-c", input.to_str().unwrap()],
        &["--folded", out.to_str().unwrap()],
    );
    let perf = collapse(&perf_script(&data));
    let pw = folded(&std::fs::read_to_string(&out).unwrap());
    let (np, nw) = (perf.len(), pw.len());
    let (sp, sw) = (total(&perf), total(&pw));
    println!("perf: {np} stacks, {sp} samples; perfwatch: {nw} stacks, {sw} samples\n{said}");
    assert!(
        sp > 500 && sw > 500,
        "too few samples: perf {sp}, perfwatch {sw}"
    );
    // The folding bug this guards against made 18 times as many stacks. The rare stacks
    // (one or two samples each, from frame-pointer walks through frameless code) are noise
    // between two samplers of one run (29 against 19 in a fresh root, with the same 1 585
    // samples): all stacks within 3x, and those that carry 0.5% of the samples or more
    // within 1.5x (give or take two).
    assert!(
        nw as f64 <= 3.0 * np as f64 && np as f64 <= 3.0 * nw as f64,
        "perf folded {sp} samples into {np} stacks, perfwatch {sw} into {nw}"
    );
    let common = |m: &HashMap<String, u64>| {
        let t = total(m).max(1);
        m.values().filter(|&&n| n * 200 >= t).count() as f64
    };
    let (cp, cw) = (common(&perf), common(&pw));
    assert!(
        cw <= 1.5 * cp + 2.0 && cp <= 1.5 * cw + 2.0,
        "stacks with 0.5% of the samples or more: perf {cp}, perfwatch {cw}"
    );
    assert!(
        pw.keys().all(|s| !s.contains(";0x")),
        "a frame named by its address"
    );
    // The top stacks, perf's first: each at the same share (both sampled the same run).
    let mut top: Vec<(&String, &u64)> = perf.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for (stack, _) in top.iter().take(5) {
        let (a, b) = (share(&perf, stack), share(&pw, stack));
        println!("{a:.3} {b:.3} {stack}");
        if a >= 0.02 {
            assert!(
                (a - b).abs() <= 0.05,
                "{stack}: perf {a:.3}, perfwatch {b:.3}"
            );
        }
    }
    assert!(
        top.first().is_some_and(|(s, _)| s.contains("[liblzma.so")),
        "xz's time is in liblzma: {:?}",
        top.first()
    );
    // Over every stack, the shares differ by a total variation distance of at most 0.1.
    let keys: std::collections::HashSet<&String> = perf.keys().chain(pw.keys()).collect();
    let tvd: f64 = keys
        .iter()
        .map(|k| (share(&perf, k) - share(&pw, k)).abs())
        .sum::<f64>()
        / 2.0;
    println!("total variation distance {tvd:.3}");
    assert!(tvd <= 0.1, "total variation distance {tvd:.3}");
}

/// A C program built here (`cc -O1 FLAGS`).
fn cc(dir: &Path, name: &str, src: &str, flags: &[&str]) -> PathBuf {
    common::cc(dir, name, src, &[&["-O1"][..], flags].concat())
}

/// The names perf gave addresses of the run: each sample's own address (`perf script -G`,
/// where user addresses are absolute), and the kernel frames of every chain.
fn perf_names(data: &Path) -> HashMap<u64, String> {
    let mut names = HashMap::new();
    let own = Command::new("perf")
        .args(["script", "-G", "-F", "ip,sym,dso", "-i"])
        .arg(data)
        .stderr(Stdio::null())
        .output_in_time()
        .unwrap();
    for l in String::from_utf8_lossy(&own.stdout).lines() {
        let l = l.trim();
        if let Some((addr, rest)) = l.split_once(' ')
            && let Ok(addr) = u64::from_str_radix(addr, 16)
            && let Some((sym, _)) = rest.rsplit_once(" (")
        {
            names.insert(addr, sym.to_string());
        }
    }
    // Kernel frames. perf names a return address by itself, perfwatch by the byte before it
    // (inside the call): they differ where that address starts a function (the call was the
    // last instruction of the one before, or an interrupted address at a function's first
    // byte, which the kernel's chain does not mark): such frames are left out.
    for s in perf_script_with(data, "comm,pid,ip,sym,symoff,dso") {
        for (i, (addr, sym, _)) in s.frames.into_iter().enumerate() {
            let (name, off) = sym.rsplit_once("+0x").unwrap_or((&sym, "1"));
            if addr >> 63 == 1 && (i == 0 || off != "0") {
                names.entry(addr).or_insert_with(|| name.to_string());
            }
        }
    }
    names.retain(|_, n| n != "[unknown]");
    names
}

/// perf 6.1 (before Linux 6.2's fix) stretches the sizeless `_init` over the `.plt` that
/// follows it, and names the first stubs `_init`; perfwatch bounds a sizeless symbol by its
/// section, as newer perfs do.
fn perf_61_init_over_plt(perf: &str, perfwatch: &str) -> bool {
    perf == "_init" && perfwatch.ends_with("@plt")
}

/// The names perfwatch's `--json` gave the same: each sample's address, and its chain's
/// kernel frames.
fn perfwatch_names(out: &Path) -> HashMap<u64, String> {
    let hex = |v: &serde_json::Value| {
        v.as_str()
            .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
            .or_else(|| v.as_u64())
    };
    let mut names = HashMap::new();
    let text = std::fs::read_to_string(out).unwrap();
    let samples: Vec<serde_json::Value> = common::json_lines(&text)
        .into_iter()
        .filter(|v| v["type"] == "sample")
        .collect();
    // The samples' own addresses first: named as they are (a chain's return addresses are
    // named by the byte before them).
    for v in &samples {
        let ip = hex(&v["sample_ip"]).or_else(|| hex(&v["ip"]));
        if let (Some(ip), Some(sym)) = (ip, v["sym"].as_str()) {
            names.insert(ip, sym.to_string());
        }
    }
    for v in &samples {
        for f in v["callchain"].as_array().into_iter().flatten() {
            if let (Some(ip), Some(sym)) = (hex(&f["ip"]), f["sym"].as_str())
                && ip >> 63 == 1
            {
                names.entry(ip).or_insert_with(|| sym.to_string());
            }
        }
    }
    names
}

/// Issue 22: where the symbol table offers several names for one address, perfwatch shows
/// the one perf shows (perf's `choose_best_symbol`): libc's `write` (with libc6-dbg's
/// `.symtab`, `__GI___libc_write` among six aliases; with `.dynsym` alone, `write`), the
/// kernel's zero-argument syscalls (`__ia32_sys_getuid`, `__x64_sys_getuid` and
/// `__do_sys_getuid` at one address), and every other address of the run that both name.
#[test]
fn aliases_are_named_as_perf_names_them() {
    require_perf!();
    require_perf_tool!();
    let dir = tempfile::tempdir().unwrap();
    let prog = cc(
        dir.path(),
        "aliases",
        r#"
#include <fcntl.h>
#include <unistd.h>
int main(void) {
    int fd = open("/dev/null", O_WRONLY);
    char c = 'x';
    unsigned long n = 0;
    for (long i = 0; i < 3000000; i++) {
        n += getuid();
        n += write(fd, &c, 1);
    }
    return n == 0;
}
"#,
        &[],
    );
    let (data, said) = side_by_side(dir.path(), &[prog.to_str().unwrap()], &["--json"]);
    let perf = perf_names(&data);
    let pw = perfwatch_names(&dir.path().join("perfwatch.out"));
    let mut compared = 0;
    let mut differ = Vec::new();
    for (addr, p) in &perf {
        // perf shows a symbol as it is (`name`), perfwatch demangled: compare C names.
        if let Some(w) = pw.get(addr) {
            compared += 1;
            if w != p && !perf_61_init_over_plt(p, w) {
                differ.push(format!("{addr:#x}: perf {p}, perfwatch {w}"));
            }
        }
    }
    println!("{compared} addresses named by both\n{said}");
    assert!(compared >= 10, "only {compared} addresses to compare");
    assert!(differ.is_empty(), "names differ:\n{}", differ.join("\n"));
    // The aliased functions were among them.
    let both: std::collections::HashSet<&String> = perf
        .iter()
        .filter(|(a, _)| pw.contains_key(a))
        .map(|(_, n)| n)
        .collect();
    println!("{both:?}");
    assert!(
        both.iter().any(|n| n.ends_with("sys_getuid")),
        "no getuid frame named by both: {both:?}"
    );
    let user: Vec<&String> = perf
        .iter()
        .filter(|(a, _)| *a >> 63 == 0 && pw.contains_key(a))
        .map(|(_, n)| n)
        .collect();
    println!("user: {user:?}");
    assert!(
        user.iter().any(|n| n.ends_with("write")),
        "no libc write named by both: {user:?}"
    );
}

/// Issue 22: a sample in a PLT stub is named as perf names it, `memcmp@plt`, not
/// `[unknown]`: a program that spends a fair share of its time going through `memcmp`'s stub,
/// built with a lazy PLT and with IBT stubs (`.plt.sec`, which perf 6.1 leaves `[unknown]`
/// and newer perfs and binutils name `memcmp@plt` too).
#[test]
fn plt_stubs_are_named_as_perf_names_them() {
    require_perf!();
    require_perf_tool!();
    let dir = tempfile::tempdir().unwrap();
    let src = r#"
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
int main(int argc, char **argv) {
    long n = argc > 1 ? strtol(argv[1], 0, 10) : 1000;
    char a[8] = "abcdefg", b[8] = "abcdefh";
    long s = 0;
    for (long i = 0; i < n; i++) s += memcmp(a, b, (size_t)(i & 7));
    printf("%ld\n", s);
    return 0;
}
"#;
    for (name, flags) in [
        ("lazy", &["-fno-builtin"][..]),
        (
            "ibt",
            &["-fno-builtin", "-fcf-protection", "-Wl,-z,ibtplt"][..],
        ),
    ] {
        let sub = dir.path().join(name);
        std::fs::create_dir(&sub).unwrap();
        let prog = cc(&sub, name, src, flags);
        let (data, _) = side_by_side(&sub, &[prog.to_str().unwrap(), "60000000"], &["--json"]);
        let perf = perf_names(&data);
        let pw = perfwatch_names(&sub.join("perfwatch.out"));
        let stubs: Vec<&String> = pw.values().filter(|n| n.ends_with("@plt")).collect();
        println!("{name}: perfwatch's stubs {stubs:?}");
        assert!(
            stubs.iter().any(|n| *n == "memcmp@plt"),
            "{name}: no sample named memcmp@plt: {pw:?}"
        );
        let mut differ = Vec::new();
        let mut compared = 0;
        for (addr, p) in &perf {
            if let Some(w) = pw.get(addr) {
                compared += 1;
                if w != p && !perf_61_init_over_plt(p, w) {
                    differ.push(format!("{addr:#x}: perf {p}, perfwatch {w}"));
                }
            }
        }
        assert!(compared > 0, "{name}: no address named by both");
        assert!(differ.is_empty(), "{name}: {}", differ.join("\n"));
        if name == "lazy" {
            assert!(
                perf.values().any(|n| n == "memcmp@plt"),
                "perf named no sample memcmp@plt"
            );
        }
    }
}

/// perf counts more than functions as symbols: labels (`STT_NOTYPE`) in text sections and
/// objects (ld.so's `_dl_start_user`, an assembler routine's entry, a table of code marked
/// `@object`). A program whose hot loops start at a global label, a local label and an
/// object in `.text` is named as perf names it, not after the function before them.
#[test]
fn labels_and_objects_in_text_are_named_as_perf_names_them() {
    require_perf!();
    require_perf_tool!();
    let dir = tempfile::tempdir().unwrap();
    let prog = cc(
        dir.path(),
        "labels",
        r#"
#include <stdlib.h>
void spin_global(long n);
void spin_local(long n);
void spin_object(long n);
__asm__(".text\n"
        ".globl spin_global\n"
        "spin_global: mov %rdi, %rax\n"
        "1: dec %rax\n jnz 1b\n ret\n"
        "spin_local: mov %rdi, %rax\n"
        "2: dec %rax\n jnz 2b\n ret\n"
        ".type spin_object, @object\n"
        "spin_object: mov %rdi, %rax\n"
        "3: dec %rax\n jnz 3b\n ret\n"
        ".size spin_object, 13\n");
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    for (int i = 0; i < 4; i++) {
        spin_global(n);
        spin_local(n);
        spin_object(n);
    }
    return 0;
}
"#,
        &[],
    );
    let (data, said) = side_by_side(
        dir.path(),
        &[prog.to_str().unwrap(), "60000000"],
        &["--json"],
    );
    let perf = perf_names(&data);
    let pw = perfwatch_names(&dir.path().join("perfwatch.out"));
    let mut differ = Vec::new();
    let mut both = std::collections::HashSet::new();
    for (addr, p) in &perf {
        if let Some(w) = pw.get(addr) {
            if w != p && !perf_61_init_over_plt(p, w) {
                differ.push(format!("{addr:#x}: perf {p}, perfwatch {w}"));
            }
            both.insert(p.as_str());
        }
    }
    println!("named by both: {both:?}\n{said}");
    assert!(differ.is_empty(), "names differ:\n{}", differ.join("\n"));
    for name in ["spin_global", "spin_local", "spin_object"] {
        assert!(
            both.contains(name),
            "no sample in {name} named by both: {both:?}"
        );
    }
}
