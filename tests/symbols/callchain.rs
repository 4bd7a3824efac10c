//! Call chains against the real kernel: programs built here with frame pointers (C with `cc`,
//! and Rust with `rustc -C force-frame-pointers=yes`) whose hot function is reached from
//! `main` through a known path. Their chains, as `--json`, `--plain`, scripts and `--folded`
//! print them, are named in the test through perfwatch's symbolizer library from the MMAP
//! records of the same run, and must show that path; `--folded` counts must match the
//! samples; a syscall-heavy load shows kernel frames above its user frames; a real consumer
//! (inferno) accepts the folded output, in `--plain` and in the TUI.

use crate::common;

use common::InTime;

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use perfwatch::symbols::{FileIdentity, MappedFile, Mapping, Request, Symbolizer};

use common::run_args;

/// The C program: [`common::CALL_PATH_C`].
const PROG_C: &str = common::CALL_PATH_C;

/// The same path in Rust.
const PROG_RS: &str = r#"
use std::hint::black_box;
#[inline(never)]
fn tick(s: u64) -> u64 { black_box(s) }
#[inline(never)]
fn hot(n: u64) -> u64 {
    let mut s = 0u64;
    for i in 0..n { s = s.wrapping_add(black_box(i.wrapping_mul(i))); }
    tick(s)
}
#[inline(never)]
fn middle(n: u64) -> u64 { hot(n).wrapping_add(1) }
#[inline(never)]
fn outer(n: u64) -> u64 { middle(n).wrapping_add(1) }
fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(100);
    let mut t = 0;
    for _ in 0..n { t ^= outer(black_box(1_000_000)); }
    black_box(t);
}
"#;

/// The path from the hot function out, as the symbolizer names it.
const PATH_C: [&str; 4] = common::CALL_PATH;

fn cc(dir: &Path) -> PathBuf {
    common::cc(dir, "fpprog", PROG_C, &["-O1", "-fno-omit-frame-pointer"])
}

/// The Rust program, when rustc is at hand (it is wherever these tests were built).
fn rustc(dir: &Path) -> Option<PathBuf> {
    let out = dir.join("fp_rs");
    let src = dir.join("fp_rs.rs");
    std::fs::write(&src, PROG_RS).unwrap();
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let st = Command::new(rustc)
        .args(["-C", "force-frame-pointers=yes", "-C", "opt-level=1", "-o"])
        .arg(&out)
        .arg(&src)
        .status_in_time()
        .ok()?;
    st.success().then_some(out)
}

/// A symbolizer that waits for slow reads (kallsyms takes seconds on a loaded machine) rather
/// than answering `[unknown]` at its live-view deadline.
fn symbolizer() -> Symbolizer {
    Symbolizer::new(perfwatch::symbols::Config {
        load_timeout: Duration::from_secs(60),
        ..Default::default()
    })
}

/// perfwatch with `args`, run to a successful end; its stdout is UTF-8.
fn perfwatch(args: &[&str]) -> common::Run {
    println!("perfwatch {args:?}");
    let out = common::perfwatch().args(args).output_in_time().unwrap();
    assert!(
        std::str::from_utf8(&out.stdout).is_ok(),
        "stdout is not UTF-8"
    );
    let out = common::Run::from(out);
    out.exited(0);
    out
}

/// perfwatch `FORMAT -g -e cpu-clock -F 4000 EXTRA -- PROG N`: call chains of a program.
fn chains_of(format: &str, extra: &[&str], prog: &std::path::Path, n: &str) -> common::Run {
    let mut args = vec![format, "-g", "-e", "cpu-clock", "-F", "4000"];
    args.extend_from_slice(extra);
    args.extend(["--", prog.to_str().unwrap(), n]);
    perfwatch(&args)
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim().trim_start_matches("0x"), 16)
        .unwrap_or_else(|_| panic!("not a hex address: {s:?}"))
}

fn num(v: &serde_json::Value) -> u64 {
    v.as_u64()
        .or_else(|| v.as_str().map(hex))
        .unwrap_or_else(|| panic!("not a number: {v}"))
}

fn is_kernel(addr: u64) -> bool {
    addr >= 0xffff_8000_0000_0000
}

/// What a run printed: processes' names and mappings, and samples with their chains.
#[derive(Default)]
struct Run {
    comms: HashMap<u32, String>,
    maps: HashMap<u32, Vec<Mapping>>,
    /// (pid, time, ip, chain innermost first).
    samples: Vec<(u32, u64, u64, Vec<u64>)>,
    /// The names perfwatch gave each sample's frames (`[unknown]` when it had none), by
    /// the sample's index.
    named: Vec<Vec<String>>,
    /// The binary perfwatch gave each sample's frames (None: `null`), by the sample's index.
    dsos: Vec<Vec<Option<String>>>,
}

impl Run {
    fn from_json(stdout: &str) -> Run {
        let mut run = Run::default();
        for v in common::json_lines(stdout) {
            match v["type"].as_str() {
                Some("comm") => {
                    run.comms
                        .insert(num(&v["pid"]) as u32, v["comm"].as_str().unwrap().into());
                }
                Some("mmap") => {
                    let id = FileIdentity::from_mmap2(
                        v["maj"].as_u64().unwrap_or(0) as u32,
                        v["min"].as_u64().unwrap_or(0) as u32,
                        v["ino"].as_u64().unwrap_or(0),
                        v["ino_generation"].as_u64().unwrap_or(0),
                    );
                    run.maps
                        .entry(num(&v["pid"]) as u32)
                        .or_default()
                        .push(Mapping {
                            start: num(&v["start"]),
                            len: num(&v["len"]),
                            pgoff: num(&v["pgoff"]),
                            file: MappedFile::new(v["filename"].as_str().unwrap().as_bytes(), id),
                        });
                }
                Some("sample") => {
                    let ip = num(&v["sample_ip"]);
                    let frames = v["callchain"]
                        .as_array()
                        .expect("a sample with -g has a callchain");
                    let mut chain: Vec<u64> = frames
                        .iter()
                        .map(|f| f["ip"].as_str().map(hex).expect("ip as a hex string"))
                        .collect();
                    let mut named: Vec<String> = frames
                        .iter()
                        .map(|f| f["sym"].as_str().unwrap_or("[unknown]").to_string())
                        .collect();
                    if chain.is_empty() {
                        // As --folded takes it: the sample's own ip.
                        chain.push(ip);
                        named.push(v["sym"].as_str().unwrap_or("[unknown]").to_string());
                    }
                    // The innermost frame is the sample's own address, named alike.
                    assert_eq!(
                        v["sym"].as_str(),
                        frames
                            .first()
                            .map_or(v["sym"].as_str(), |f| f["sym"].as_str()),
                        "{v}"
                    );
                    let mut dsos: Vec<Option<String>> = frames
                        .iter()
                        .map(|f| f["dso"].as_str().map(String::from))
                        .collect();
                    if dsos.is_empty() {
                        dsos.push(v["dso"].as_str().map(String::from));
                    }
                    run.named.push(named);
                    run.dsos.push(dsos);
                    run.samples.push((
                        v["sample_pid"].as_i64().unwrap() as u32,
                        num(&v["sample_time"]),
                        ip,
                        chain,
                    ));
                }
                _ => {}
            }
        }
        run
    }

    /// The pid named `comm`.
    fn pid_of(&self, comm: &str) -> u32 {
        *self
            .comms
            .iter()
            .find(|(_, c)| *c == comm)
            .unwrap_or_else(|| panic!("no comm record of {comm}: {:?}", self.comms))
            .0
    }

    /// Name frames of `pid` (innermost first: the first is exact, the others return
    /// addresses, named by the byte before them).
    fn name(&self, sym: &mut Symbolizer, pid: u32, chain: &[u64]) -> Vec<String> {
        let maps = self.maps.get(&pid).map(Vec::as_slice).unwrap_or(&[]);
        chain
            .iter()
            .enumerate()
            .map(|(i, &ip)| {
                let at = if i == 0 { ip } else { ip.saturating_sub(1) };
                let r = if is_kernel(at) {
                    Request::kernel(at)
                } else {
                    match maps.iter().rev().find(|m| m.contains(at)) {
                        Some(m) => Request::user(pid, at, m),
                        None => Request::unmapped(pid, at),
                    }
                };
                let s = sym.resolve_one(&r);
                s.name().unwrap_or("[unknown]").to_string()
            })
            .collect()
    }
}

/// Whether `names` (innermost first) starts with `path`, after at most one frame called from
/// the hot function (`tick`).
fn starts_with_path(names: &[String], path: &[&str]) -> bool {
    let at = |skip: usize| {
        names.len() >= skip + path.len()
            && names[skip..skip + path.len()]
                .iter()
                .zip(path)
                .all(|(n, p)| n == p || n.ends_with(&format!("::{p}")))
    };
    at(0) || at(1)
}

#[test]
fn a_c_programs_chains_show_its_call_path_and_folded_counts_match_the_samples() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let prog = cc(dir.path());
    let folded = dir.path().join("out.folded");
    let out = chains_of(
        "--json",
        &["--folded", folded.to_str().unwrap()],
        &prog,
        "300",
    );
    let run = Run::from_json(&out.stdout);
    let pid = run.pid_of("fpprog");
    let mut sym = symbolizer();
    let ours: Vec<&(u32, u64, u64, Vec<u64>)> = run.samples.iter().filter(|s| s.0 == pid).collect();
    assert!(ours.len() >= 100, "{} samples of fpprog", ours.len());
    let mut on_path = 0;
    let mut shown = Vec::new();
    let mut agree = 0;
    for (i, (_, _, ip, chain)) in run.samples.iter().enumerate().filter(|(_, s)| s.0 == pid) {
        assert_eq!(
            chain.first(),
            Some(ip),
            "the innermost frame is the sample's ip"
        );
        // perfwatch's names, against the same symbolizer asked here from the mmap records
        // of the output: they agree for the user-space chains of the program.
        let names = run.named[i].clone();
        if chain.iter().all(|&a| !is_kernel(a)) && run.name(&mut sym, pid, chain) == names {
            agree += 1;
        }
        if starts_with_path(&names, &PATH_C) && names[0] != "tick" {
            on_path += 1;
        }
        if shown.len() < 10 {
            shown.push(names.join(" <- "));
        }
    }
    assert!(
        on_path * 10 >= ours.len() * 8,
        "{on_path} of {} chains are hot <- middle <- outer <- main: {shown:#?}",
        ours.len()
    );
    assert!(
        agree * 10 >= ours.len() * 8,
        "perfwatch's names agree with the symbolizer's for {agree} of {} chains",
        ours.len()
    );

    // The folded file: every sample once; the lines that end main;outer;middle;hot (once
    // named) count exactly the samples whose chain is that path.
    let text = std::fs::read_to_string(&folded).unwrap();
    out.said(&[&format!("folded stacks: {} samples in", run.samples.len())]);
    let mut total = 0;
    let mut path_count = 0;
    for line in text.lines() {
        let (stack, count) = line.rsplit_once(' ').expect("stack COUNT");
        let count: u64 = count.parse().expect("a count");
        total += count;
        let mut frames = stack.split(';');
        let comm = frames.next().unwrap();
        assert_eq!(comm, "fpprog", "{line}");
        // Named, outermost first: reverse into a chain, innermost first.
        let mut names: Vec<String> = frames.map(String::from).collect();
        names.reverse();
        if starts_with_path(&names, &PATH_C) && names[0] != "tick" {
            path_count += count;
        }
    }
    assert_eq!(total as usize, run.samples.len(), "{text}");
    assert_eq!(path_count, on_path as u64, "{text}");
}

#[test]
fn plain_lines_carry_the_chain_innermost_first_on_one_line() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let prog = cc(dir.path());
    let text = chains_of("--plain", &[], &prog, "200").stdout;
    let mut samples = 0;
    let mut on_path = 0;
    for line in text.lines().filter(|l| l.contains("type: sample")) {
        samples += 1;
        let chain_text = line
            .split("callchain: ")
            .nth(1)
            .unwrap_or_else(|| panic!("no chain: {line}"))
            .trim_end_matches(" }");
        // Each frame is its function and offset (`hot+0x1c`), innermost first.
        let names: Vec<String> = chain_text
            .split(" <- ")
            .map(|f| f.split('+').next().unwrap().to_string())
            .collect();
        // The sample's own `sym:` is the innermost frame's.
        let sym = line
            .split(" sym: ")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .unwrap_or_else(|| panic!("no sym: {line}"));
        // Unnamed (a stripped ld.so without libc6-dbg), the sample says `sym: [unknown]`
        // beside its `dso:`, and its frame is that binary, `[ld-linux-x86-64.so.2]`, as
        // folded stacks name it.
        let frame = if sym == "[unknown]" {
            let dso = line
                .split(" dso: ")
                .nth(1)
                .and_then(|r| r.split(',').next())
                .unwrap_or_else(|| panic!("no dso: {line}"));
            match dso.rsplit('/').next() {
                Some(base) if dso.starts_with('/') && !base.is_empty() => format!("[{base}]"),
                _ => dso.to_string(),
            }
        } else {
            sym.to_string()
        };
        assert_eq!(frame, chain_text.split(" <- ").next().unwrap(), "{line}");
        if starts_with_path(&names, &PATH_C) {
            on_path += 1;
        }
    }
    assert_eq!(text.lines().count(), text.matches('\n').count());
    assert!(samples >= 100, "{samples} samples");
    assert!(
        on_path * 10 >= samples * 8,
        "{on_path} of {samples} on the path"
    );
}

#[test]
#[cfg_attr(not(feature = "python"), ignore = "needs the python feature")]
fn scripts_see_the_same_chains_as_frames() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let prog = cc(dir.path());
    let script = dir.path().join("chains.py");
    std::fs::write(
        &script,
        r#"
def on_event(event):
    if event.type == "sample":
        c = event.callchain
        assert c[0].ip == c[0]["ip"] and c[0].sym == event.sym and c[0]["dso"] == event.dso
        assert event.as_dict()["callchain"][0]["ip"] == c[0].ip
        assert event.as_dict()["callchain"][0]["sym"] == c[0].sym
        print("sym", event.sample_time, event.sym, " ".join(str(f.sym) for f in c))
        frames = [(f.ip, f.kernel) for f in c] or [(event.sample_ip, event.sample_ip >= 0xffff800000000000)]
        print(event.sample_time, ",".join("%x%s" % (ip, "k" if k else "") for ip, k in frames))
    else:
        assert event.callchain is None
"#,
    )
    .unwrap();
    let lines = dir.path().join("script.out");
    let out = chains_of(
        "--json",
        &[
            "--script",
            script.to_str().unwrap(),
            "--script-output",
            lines.to_str().unwrap(),
        ],
        &prog,
        "200",
    );
    let run = Run::from_json(&out.stdout);
    let text = std::fs::read_to_string(&lines).unwrap();
    let mut seen: HashMap<u64, Vec<u64>> = HashMap::new();
    let mut script_names: HashMap<u64, Vec<String>> = HashMap::new();
    for l in text.lines() {
        let l = l.strip_prefix("[chains.py] ").unwrap_or(l);
        if let Some(rest) = l.strip_prefix("sym ") {
            let mut w = rest.split(' ');
            let t: u64 = w.next().unwrap().parse().unwrap();
            let _own = w.next();
            script_names.insert(t, w.map(String::from).collect());
            continue;
        }
        let (t, chain) = l.split_once(' ').unwrap_or_else(|| panic!("{l}"));
        let frames = chain
            .split(',')
            .map(|f| {
                let k = f.ends_with('k');
                let a = hex(f.trim_end_matches('k'));
                assert_eq!(k, is_kernel(a), "{f}");
                a
            })
            .collect();
        seen.insert(t.parse().unwrap(), frames);
    }
    // The script sees every sample unless it cannot keep up (a loaded machine): then the
    // ones it missed are counted as dropped by perfwatch, never silently gone.
    let dropped: usize = out
        .stderr
        .split_once("dropped by perfwatch: ")
        .and_then(|(_, n)| n.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no dropped count in the summary:\n{}", out.stderr));
    let times: std::collections::HashSet<u64> = run.samples.iter().map(|s| s.1).collect();
    assert!(
        seen.keys().all(|t| times.contains(t)),
        "the script saw samples --json did not print"
    );
    assert!(
        !seen.is_empty() && seen.len() + dropped >= run.samples.len(),
        "the script saw {} of {} samples, {dropped} dropped:\n{}",
        seen.len(),
        run.samples.len(),
        out.stderr
    );
    for (i, (_, t, _, chain)) in run.samples.iter().enumerate() {
        let Some(frames) = seen.get(t) else {
            continue;
        };
        assert_eq!(frames, chain, "sample at {t}");
        // The script's frames have the names --json gave them (None where it said null).
        if let Some(n) = script_names.get(t).filter(|n| !n.is_empty()) {
            let json: Vec<String> = run.named[i]
                .iter()
                .map(|s| {
                    if s == "[unknown]" {
                        "None".into()
                    } else {
                        s.clone()
                    }
                })
                .collect();
            assert_eq!(n, &json, "sample at {t}");
        }
    }
    assert!(!script_names.is_empty());
    let pid = run.pid_of("fpprog");
    let mut sym = symbolizer();
    let on_path = run
        .samples
        .iter()
        .filter(|s| s.0 == pid && starts_with_path(&run.name(&mut sym, pid, &s.3), &PATH_C))
        .count();
    assert!(on_path >= 50, "{on_path} script chains on the path");
}

#[test]
fn a_rust_program_built_with_frame_pointers_shows_its_path() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let Some(prog) = rustc(dir.path()) else {
        skip!("no rustc to build the Rust helper with");
    };
    let out = chains_of("--json", &[], &prog, "300");
    let run = Run::from_json(&out.stdout);
    let pid = run.pid_of("fp_rs");
    let mut sym = symbolizer();
    let ours: Vec<Vec<String>> = run
        .samples
        .iter()
        .filter(|s| s.0 == pid)
        .map(|s| run.name(&mut sym, pid, &s.3))
        .collect();
    assert!(ours.len() >= 100, "{} samples", ours.len());
    let path = ["fp_rs::hot", "fp_rs::middle", "fp_rs::outer", "fp_rs::main"];
    let on_path = ours.iter().filter(|n| starts_with_path(n, &path)).count();
    assert!(
        on_path * 10 >= ours.len() * 7,
        "{on_path} of {}: {:#?}",
        ours.len(),
        &ours[..ours.len().min(8)]
    );
}

/// True for a frame perfwatch placed in the kernel: it asks the kernel's table for a frame
/// of the chain's kernel context (after PERF_CONTEXT_KERNEL), the process's maps for one of
/// its user context, which names a user frame by a file, `[unknown]` or a special mapping.
fn kernel_dso(dso: Option<&str>) -> bool {
    dso.is_some_and(|d| {
        d == "[kernel.kallsyms]"
            || (d.starts_with('[')
                && d.ends_with(']')
                && !d.starts_with("[anon")
                && !["[unknown]", "[vdso]", "[vsyscall]", "[stack]", "[heap]"].contains(&d))
    })
}

#[test]
fn a_syscall_heavy_load_has_kernel_frames_above_its_user_frames() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let folded = dir.path().join("dd.folded");
    let out = perfwatch(&[
        "--json",
        "-g",
        "-a",
        "-e",
        "cpu-clock",
        "-F",
        "4000",
        "--filter",
        "comm:dd",
        "--folded",
        folded.to_str().unwrap(),
        "--",
        "dd",
        "if=/dev/zero",
        "of=/dev/null",
        "bs=1",
        "count=400000",
    ]);
    let run = Run::from_json(&out.stdout);
    let dd = run.pid_of("dd");
    // Each frame's context as the chain's PERF_CONTEXT_KERNEL / PERF_CONTEXT_USER markers set
    // it (perfwatch places a frame by its context: the kernel's table, or the process's
    // maps): what the kernel guarantees. An address is no guide in the user part: a
    // frame-pointer walk through frameless code (Debian's dd) may read any word off the
    // stack, one that looks like a kernel address included.
    let chains: Vec<Vec<(u64, bool)>> = run
        .samples
        .iter()
        .zip(&run.dsos)
        .filter(|(s, _)| s.0 == dd)
        .map(|(s, d)| {
            s.3.iter()
                .zip(d)
                .map(|(&ip, d)| (ip, kernel_dso(d.as_deref())))
                .collect()
        })
        .collect();
    for c in &chains {
        // Innermost first: the kernel context, then the user context, never mixed.
        let first_user = c.iter().position(|f| !f.1).unwrap_or(c.len());
        assert!(c[first_user..].iter().all(|f| !f.1), "{c:x?}");
        // The kernel's own unwinder writes kernel text addresses only, and the user context
        // starts with the exact interrupted user address.
        assert!(c[..first_user].iter().all(|f| is_kernel(f.0)), "{c:x?}");
        if let Some(f) = c.get(first_user) {
            assert!(!is_kernel(f.0), "{c:x?}");
        }
    }
    let both: Vec<Vec<u64>> = chains
        .iter()
        .filter(|c| c.iter().any(|f| f.1) && c.iter().any(|f| !f.1 && f.0 != 0))
        .map(|c| c.iter().filter(|f| f.1).map(|f| f.0).collect())
        .collect();
    assert!(
        both.len() >= 20,
        "{} of {} dd chains have kernel and user frames",
        both.len(),
        chains.len()
    );
    // Named, the kernel frames are the kernel's read/write path (when kallsyms shows
    // addresses to root).
    let kallsyms_hidden =
        std::fs::read_to_string("/proc/kallsyms").is_ok_and(|t| t.starts_with("0000000000000000"));
    if !kallsyms_hidden {
        let mut sym = symbolizer();
        let names: Vec<Vec<String>> = both.iter().map(|c| run.name(&mut sym, dd, c)).collect();
        assert!(
            names
                .iter()
                .any(|n| n.iter().any(|f| f.contains("read") || f.contains("write"))),
            "{:#?}",
            &names[..names.len().min(5)]
        );
    }
    // In the folded lines (outermost first), the user part comes before the kernel part,
    // and the filter applied: dd only.
    let text = std::fs::read_to_string(&folded).unwrap();
    let mut kernel_on_top = 0;
    for line in text.lines() {
        let (stack, _) = line.rsplit_once(' ').unwrap();
        let mut frames = stack.split(';');
        assert!(frames.next().is_some_and(|c| c.contains("dd")), "{line}");
        // Kernel functions carry `_[k]`, as stackcollapse-perf.pl --kernel marks them
        // (addresses where kallsyms is hidden).
        let kernel: Vec<bool> = frames
            .map(|f| f.ends_with("_[k]") || (f.starts_with("0x") && is_kernel(hex(f))))
            .collect();
        let first_kernel = kernel.iter().position(|&k| k).unwrap_or(kernel.len());
        assert!(kernel[first_kernel..].iter().all(|&k| k), "{line}");
        if first_kernel > 0 && first_kernel < kernel.len() {
            kernel_on_top += 1;
        }
    }
    assert!(
        kernel_on_top >= 5,
        "{kernel_on_top} folded stacks with both:\n{text}"
    );
}

#[test]
fn max_stack_limits_the_frames_the_kernel_records() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let prog = cc(dir.path());
    let out = perfwatch(&[
        "--json",
        "-g",
        "--max-stack",
        "3",
        "-e",
        "cpu-clock",
        "-F",
        "2000",
        "--",
        prog.to_str().unwrap(),
        "100",
    ]);
    let run = Run::from_json(&out.stdout);
    assert!(run.samples.len() >= 20);
    assert!(run.samples.iter().all(|s| s.3.len() <= 3));
    assert!(run.samples.iter().any(|s| s.3.len() == 3));
}

/// inferno's flame graph maker, installed by .ci/run; `None` when absent (a failure under
/// `CI=true`, else a visible skip of `test`, or of the part of it that needs inferno).
fn inferno(test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain(std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo/bin")))
        .map(|d| d.join("inferno-flamegraph"))
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            !common::ci(),
            "CI=true but inferno-flamegraph is not installed (.ci/run installs it)"
        );
        common::skip(
            test,
            "inferno-flamegraph not found (cargo install --locked inferno): no flame graph drawn",
        );
    }
    found
}

fn check_flamegraph(inferno: &Path, folded: &Path) {
    let out = Command::new(inferno).arg(folded).output_in_time().unwrap();
    let svg = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "inferno-flamegraph refused it: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(folded).unwrap()
    );
    assert!(svg.contains("<svg") && svg.contains("fpprog"), "{svg}");
}

#[test]
fn inferno_draws_a_flame_graph_from_folded_stdout() {
    require_perf!();
    let Some(inferno) = inferno(test_name!()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let prog = cc(dir.path());
    // --folded alone: stacks on stdout, no records.
    let out = perfwatch(&[
        "--folded",
        "-e",
        "cpu-clock",
        "-F",
        "4000",
        "--",
        prog.to_str().unwrap(),
        "200",
    ]);
    let text = out.stdout;
    assert!(!text.contains("type:"), "records printed: {text}");
    assert!(text.lines().all(|l| l.starts_with("fpprog;")), "{text}");
    let total: u64 = text
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert!(total >= 100, "{total} samples folded");
    let folded = dir.path().join("stdout.folded");
    std::fs::write(&folded, &text).unwrap();
    check_flamegraph(&inferno, &folded);
}

#[test]
fn the_tui_writes_folded_file_at_the_end() {
    use portable_pty::{CommandBuilder, PtySize, native_pty_system};
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let prog = cc(dir.path());
    let folded = dir.path().join("tui.folded");
    let pair = native_pty_system()
        .openpty(PtySize {
            rows: 40,
            cols: 120,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_perfwatch"));
    cmd.args([
        "-g",
        "-e",
        "cpu-clock",
        "-F",
        "4000",
        "--folded",
        folded.to_str().unwrap(),
        "--",
        prog.to_str().unwrap(),
        "300",
    ]);
    cmd.env("TERM", "xterm-256color");
    let mut child = pair.slave.spawn_command(cmd).unwrap();
    drop(pair.slave);
    let mut reader = pair.master.try_clone_reader().unwrap();
    let screen = std::thread::spawn(move || {
        let mut all = Vec::new();
        let _ = reader.read_to_end(&mut all);
        all
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "perfwatch did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(pair.master);
    let screen = screen.join().unwrap();
    let screen = String::from_utf8_lossy(&screen);
    assert!(status.success(), "{status:?}: {screen}");
    // The TUI drew (the alternate screen), and said where the stacks went after leaving it.
    assert!(screen.contains("\x1b[?1049h"), "no TUI: {screen}");
    assert!(screen.contains("folded stacks: "), "{screen}");
    let text = std::fs::read_to_string(&folded).unwrap();
    let total: u64 = text
        .lines()
        .map(|l| {
            assert!(l.starts_with("fpprog;"), "{l}");
            l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap()
        })
        .sum();
    assert!(total >= 100, "{total} samples folded:\n{text}");
    if let Some(inferno) = inferno(test_name!()) {
        check_flamegraph(&inferno, &folded);
    }
}

#[test]
fn bad_call_graph_options_are_refused_with_the_reason() {
    for (args, code, says) in [
        (&["--call-graph", "dwarf,0"][..], 2, "between 8 and"),
        (&["--call-graph", "lbr"][..], 2, "LBR"),
        (&["--call-graph", "fp,64"][..], 2, "no size"),
        (&["-g", "--max-stack", "0"][..], 2, "'0'"),
        (&["-g", "--max-stack", "70000"][..], 2, "'70000'"),
        (&["--max-stack", "8", "--plain"][..], 2, "-g"),
        (&["--json", "--folded"][..], 2, "--folded FILE"),
    ] {
        println!("{args:?}");
        run_args(args)
            .exited(code)
            .said(&[says])
            .never_said(&["panicked"]);
    }
    // `--folded ./prog` (a command was meant) never writes over the program.
    let dir = tempfile::tempdir().unwrap();
    let prog = cc(dir.path());
    let before = std::fs::read(&prog).unwrap();
    run_args(&["--folded", prog.to_str().unwrap(), "true"])
        .exited(1)
        .said(&["executable"]);
    assert_eq!(std::fs::read(&prog).unwrap(), before);
    // As root, a symbolic link at the output's place is not followed (it could lead to
    // /etc/shadow): the run stops before it starts, and the link's target is untouched.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let target = dir.path().join("precious");
        std::fs::write(&target, b"keep").unwrap();
        let link = dir.path().join("out.folded");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let link = link.to_str().unwrap();
        run_args(&["--folded", link, "--plain", "-e", "dummy", "true"])
            .exited(1)
            .said(&["symbolic link", "--folded"]);
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    }
}
