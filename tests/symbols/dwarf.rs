//! `--call-graph dwarf` against the real kernel: programs built without frame pointers (a C
//! program with `-O2 -fomit-frame-pointer`, with its rules in `.eh_frame` or only in
//! `.debug_frame`, stripped with its debug file under a build-id path; Debian's `python3`)
//! are unwound from their stack copies to `main`, and held against `perf record --call-graph
//! dwarf` + `perf script` on the same run (both watch one workload, started stopped): the
//! share of samples whose chain reaches `main` or `_start`, and the folded stacks.
//! Bad input (a stack copy too small, a binary whose unwind tables are garbage) ends chains,
//! counted in the summary, never the run.

use crate::common;

use common::InTime;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The path the C program ([`common::CALL_PATH_C`]) is held to.
const PATH_C: [&str; 4] = common::CALL_PATH;

const PY_LOOP: &str = "x = 0\nfor i in range(40000000):\n    x += i * i\n";

/// [`common::CALL_PATH_C`] built without frame pointers (`cc -O2 -fomit-frame-pointer FLAGS`).
fn cc(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let all = [&["-O2", "-fomit-frame-pointer"][..], flags].concat();
    common::cc(dir, name, common::CALL_PATH_C, &all)
}

fn tool(cmd: &mut Command) {
    let st = cmd.status_in_time().unwrap();
    assert!(st.success(), "{cmd:?} failed");
}

/// The names of an ELF file's sections.
fn sections(bin: &Path) -> Vec<String> {
    use object::{Object, ObjectSection};
    let data = std::fs::read(bin).unwrap();
    let f = object::File::parse(&*data).unwrap();
    f.sections()
        .filter_map(|s| s.name().ok().map(str::to_string))
        .collect()
}

/// One sample of `--json`: pid, and its chain's (sym, dso), innermost first.
struct Sample {
    pid: u32,
    frames: Vec<(String, String)>,
}

fn json_samples(stdout: &str) -> Vec<Sample> {
    common::json_lines(stdout)
        .into_iter()
        .filter(|v| v["type"] == "sample")
        .map(|v| Sample {
            pid: v["sample_pid"].as_u64().unwrap_or(0) as u32,
            frames: v["callchain"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|f| {
                            (
                                f["sym"].as_str().unwrap_or("").to_string(),
                                f["dso"].as_str().unwrap_or("").to_string(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect()
}

/// The names of the frames, innermost first.
fn names(s: &Sample) -> Vec<&str> {
    s.frames.iter().map(|(n, _)| n.as_str()).collect()
}

/// Whether the chain's frames from the innermost on are `path`.
fn starts_with_path(s: &Sample, path: &[&str]) -> bool {
    let n = names(s);
    n.len() >= path.len() && n[..path.len()] == *path
}

/// What both monitors watch with: cpu-clock at 1000 Hz, stacks unwound from their copies.
const DWARF_AT_1000: [&str; 6] = ["--call-graph", "dwarf", "-e", "cpu-clock", "-F", "1000"];

/// `perfwatch --json --call-graph dwarf -e cpu-clock -F 1000 [extra] -- argv`: its samples
/// of the command's own process, and its stderr.
fn watch(argv: &[&str], extra: &[&str]) -> (Vec<Sample>, String) {
    let run = common::run(
        common::perfwatch()
            .arg("--json")
            .args(DWARF_AT_1000)
            .args(extra)
            .arg("--")
            .args(argv),
    );
    run.exited(0).never_said(&["panicked"]);
    (json_samples(&run.stdout), run.stderr)
}

/// The samples in `hot` (the program's spinning function).
fn in_hot(samples: &[Sample]) -> Vec<&Sample> {
    samples
        .iter()
        .filter(|s| s.frames.first().is_some_and(|(n, _)| n == "hot"))
        .collect()
}

/// Most samples in `hot` show `hot <- middle <- outer <- main`.
#[track_caller]
fn assert_unwound_to_main(samples: &[Sample], said: &str) {
    let hot = in_hot(samples);
    let full = hot.iter().filter(|s| starts_with_path(s, &PATH_C)).count();
    assert!(
        hot.len() >= 50,
        "only {} samples in hot of {}; stderr:\n{said}",
        hot.len(),
        samples.len()
    );
    assert!(
        full * 100 >= hot.len() * 95,
        "{full} of {} samples in hot unwound to main; e.g. {:?}\nstderr:\n{said}",
        hot.len(),
        hot.iter()
            .find(|s| !starts_with_path(s, &PATH_C))
            .map(|s| names(s))
    );
    assert!(said.contains("dwarf unwinding: "), "{said}");
}

#[test]
fn a_c_program_without_frame_pointers_unwinds_to_main_from_eh_frame_and_from_debug_frame() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let eh = cc(dir.path(), "eh", &[]);
    assert!(sections(&eh).iter().any(|s| s == ".eh_frame_hdr"));
    let (samples, said) = watch(&[eh.to_str().unwrap(), "400"], &[]);
    assert_unwound_to_main(&samples, &said);
    // The same samples under -g (frame pointers) cannot get there: the test tells them apart.
    let run = common::run(
        common::perfwatch()
            .args(["--json", "-g", "-e", "cpu-clock", "-F", "1000", "--"])
            .args([eh.to_str().unwrap(), "200"]),
    );
    let fp = json_samples(&run.stdout);
    let fp_hot = in_hot(&fp);
    let fp_full = fp_hot
        .iter()
        .filter(|s| starts_with_path(s, &PATH_C))
        .count();
    assert!(
        fp_full * 2 < fp_hot.len().max(1),
        "frame pointers unwound {fp_full} of {} without frame pointers",
        fp_hot.len()
    );

    // Only .debug_frame describes the program's own functions.
    let df = cc(
        dir.path(),
        "df",
        &[
            "-g",
            "-fno-asynchronous-unwind-tables",
            "-fno-unwind-tables",
        ],
    );
    assert!(sections(&df).iter().any(|s| s == ".debug_frame"));
    let (samples, said) = watch(&[df.to_str().unwrap(), "400"], &[]);
    assert_unwound_to_main(&samples, &said);
}

/// A debug file put under `/usr/lib/debug/.build-id/` for the test, removed after (with
/// the directories the test made for it).
struct PlacedDebugFile(PathBuf, Vec<PathBuf>);

impl PlacedDebugFile {
    fn new(at: &Path) -> PlacedDebugFile {
        let made: Vec<PathBuf> = at
            .ancestors()
            .skip(1)
            .take_while(|d| !d.exists())
            .map(Path::to_path_buf)
            .collect();
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        PlacedDebugFile(at.to_path_buf(), made)
    }
}

impl Drop for PlacedDebugFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        for d in &self.1 {
            let _ = std::fs::remove_dir(d);
        }
    }
}

#[test]
fn a_stripped_binary_is_unwound_and_named_from_its_debug_file_and_never_from_another_builds() {
    require_perf!();
    require_root!("it puts a debug file under /usr/lib/debug/.build-id");
    let dir = tempfile::tempdir().unwrap();
    // A build id no package has, so that the file placed there is the test's own.
    let id = format!(
        "{:040x}",
        u128::from(std::process::id()) << 64 | 0x27d0_a4f0
    );
    let bin = cc(
        dir.path(),
        "stripped",
        &["-g", &format!("-Wl,--build-id=0x{id}")],
    );
    let debug = dir.path().join("stripped.debug");
    tool(
        Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&bin)
            .arg(&debug),
    );
    tool(Command::new("strip").arg("--strip-all").arg(&bin));
    assert!(!sections(&bin).iter().any(|s| s == ".symtab"));
    let at = PathBuf::from("/usr/lib/debug/.build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]));
    let _placed = PlacedDebugFile::new(&at);
    std::fs::copy(&debug, &at).unwrap();
    let (samples, said) = watch(&[bin.to_str().unwrap(), "300"], &[]);
    assert_unwound_to_main(&samples, &said);

    // A debug file of another build at the same place: not used (no `hot` named).
    let other = cc(
        dir.path(),
        "other",
        &["-g", "-DOTHER=1", "-Wl,--build-id=0x1234"],
    );
    tool(
        Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&other)
            .arg(&at),
    );
    let (samples, said) = watch(&[bin.to_str().unwrap(), "200"], &[]);
    let mine = samples
        .iter()
        .filter(|s| {
            s.frames
                .first()
                .is_some_and(|(_, d)| d.ends_with("/stripped"))
        })
        .count();
    assert!(mine >= 20, "{mine} samples in the program; stderr:\n{said}");
    assert!(
        in_hot(&samples).is_empty(),
        "named from another build's debug file; stderr:\n{said}"
    );
}

/// Bad input ends chains, counted by reason, and never the run: a stack copy of 8 bytes
/// holds one return address at most; a binary whose unwind tables are garbage.
#[test]
fn a_small_stack_copy_and_garbage_unwind_tables_end_chains_counted() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let bin = cc(dir.path(), "small", &[]);
    let run = common::run(
        common::perfwatch()
            .args([
                "--json",
                "--call-graph",
                "dwarf,8",
                "-e",
                "cpu-clock",
                "-F",
                "1000",
                "--",
            ])
            .args([bin.to_str().unwrap(), "200"]),
    );
    run.exited(0).never_said(&["panicked"]);
    let samples = json_samples(&run.stdout);
    let hot = in_hot(&samples);
    assert!(hot.len() >= 20, "stderr:\n{}", run.stderr);
    assert!(hot.iter().all(|s| s.frames.len() <= 3));
    assert!(
        run.stderr.contains("end of the stack copy: "),
        "{}",
        run.stderr
    );

    // Garbage over .eh_frame_hdr and .eh_frame (the program never throws: it still runs).
    let garbage = dir.path().join("garbage");
    std::fs::copy(&bin, &garbage).unwrap();
    let mut data = std::fs::read(&garbage).unwrap();
    let ranges: Vec<(usize, usize)> = {
        use object::{Object, ObjectSection};
        let f = object::File::parse(&*data).unwrap();
        f.sections()
            .filter(|s| matches!(s.name(), Ok(".eh_frame") | Ok(".eh_frame_hdr")))
            .filter_map(|s| s.file_range())
            .map(|(o, n)| (o as usize, n as usize))
            .collect()
    };
    assert_eq!(ranges.len(), 2);
    let mut x: u32 = 0x2545_f491;
    for (o, n) in ranges {
        for b in &mut data[o + 4..o + n] {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *b = x as u8;
        }
    }
    std::fs::write(&garbage, &data).unwrap();
    let (samples, said) = watch(&[garbage.to_str().unwrap(), "200"], &[]);
    let hot = in_hot(&samples);
    assert!(hot.len() >= 20, "stderr:\n{said}");
    assert!(said.contains("dwarf unwinding: "), "{said}");
}

// --- Against perf, on one run ---

/// `perf`, when it is installed and runs.
fn perf() -> bool {
    Command::new("perf")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status_in_time()
        .is_ok_and(|s| s.success())
}

/// One run of `argv` watched by `perf record --call-graph dwarf` and `perfwatch --json
/// --call-graph dwarf` (both `-e cpu-clock -F 1000 -p PID`): perf's samples as `perf script`
/// prints them (frames innermost first, as (sym, dso)), perfwatch's, and its stderr.
fn side_by_side(dir: &Path, argv: &[&str]) -> (Vec<Sample>, Vec<Sample>, String) {
    // Stopped right after its exec, so that both monitors watch it from its first steps:
    // attached to a shell that then execs the workload, perf 6.1 keeps the shell's libc
    // mapping in some runs and cannot unwind out of libc.
    let target = common::Stopped::after_exec(argv);
    let json = dir.join("perfwatch.json");
    let (data, said) = common::side_by_side(dir, target, &DWARF_AT_1000, &["--json"], &json);
    let ours = json_samples(&std::fs::read_to_string(&json).unwrap());
    (perf_script(&data), ours, said)
}

/// `perf script -F pid,ip,sym,dso`: each sample's pid and frames, without the inlined
/// functions perf adds from DWARF (`(inlined)`; perfwatch names the function that holds
/// the address. `--no-inline` would do, but perf 6.1 then drops the frames after one, up
/// to `_start`).
fn perf_script(data: &Path) -> Vec<Sample> {
    common::perf_script_samples(data, "pid,ip,sym,dso")
        .into_iter()
        .map(|s| Sample {
            pid: s.head.trim().parse().unwrap_or(0),
            frames: s
                .frames
                .into_iter()
                .filter(|(_, _, dso)| dso != "inlined")
                .map(|(_, sym, dso)| {
                    let sym = sym.split("+0x").next().unwrap_or(&sym).to_string();
                    (sym, dso)
                })
                .collect(),
        })
        .collect()
}

/// The share of `samples` whose chain reaches `main` (or glibc's `__libc_start_call_main`,
/// which calls it: python3's `main` is a tail call to `Py_BytesMain`, and stripped) or
/// `_start`.
fn reaching_main(samples: &[&Sample]) -> f64 {
    let n = samples
        .iter()
        .filter(|s| {
            s.frames
                .iter()
                .any(|(n, _)| matches!(n.as_str(), "main" | "__libc_start_call_main" | "_start"))
        })
        .count();
    n as f64 / samples.len().max(1) as f64
}

/// Samples folded by `key` (outermost first), as shares.
fn fold(samples: &[&Sample], key: impl Fn(&Sample) -> String) -> HashMap<String, f64> {
    let mut m: HashMap<String, f64> = HashMap::new();
    for s in samples {
        *m.entry(key(s)).or_default() += 1.0;
    }
    let n = samples.len().max(1) as f64;
    m.values_mut().for_each(|v| *v /= n);
    m
}

/// Total variation distance: half the sum of the differences of the shares.
fn total_variation(a: &HashMap<String, f64>, b: &HashMap<String, f64>) -> f64 {
    let keys: std::collections::HashSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .map(|k| (a.get(k).unwrap_or(&0.0) - b.get(k).unwrap_or(&0.0)).abs())
        .sum::<f64>()
        / 2.0
}

/// The total variation two samplers of one distribution show by chance alone, with `n1` and
/// `n2` samples: each stack's share differs by a normal variable of deviation
/// sqrt(p(1-p)(1/n1+1/n2)) (p from both samplers pooled), whose mean size is sqrt(2/pi) of it.
/// perf and perfwatch sample the same run, but on timers of their own: at a thousand samples
/// spread over a hundred stacks this is 0.03-0.05 of total variation by itself.
fn chance_variation(
    a: &HashMap<String, f64>,
    b: &HashMap<String, f64>,
    n1: usize,
    n2: usize,
) -> f64 {
    let (n1, n2) = (n1.max(1) as f64, n2.max(1) as f64);
    let keys: std::collections::HashSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .map(|k| {
            let p = (a.get(k).unwrap_or(&0.0) * n1 + b.get(k).unwrap_or(&0.0) * n2) / (n1 + n2);
            (p * (1.0 - p) * (1.0 / n1 + 1.0 / n2)).sqrt() * (2.0 / std::f64::consts::PI).sqrt()
        })
        .sum::<f64>()
        / 2.0
}

/// perf and perfwatch watch one run: the shares reaching main, and the folded stacks (within
/// 0.05 total variation, or within 2.5 times what chance alone gives where that is more).
fn compare(
    what: &str,
    perf: &[Sample],
    ours: &[Sample],
    pid: Option<u32>,
    key: impl Fn(&Sample) -> String,
    said: &str,
) {
    fn of(v: &[Sample], pid: Option<u32>) -> Vec<&Sample> {
        v.iter()
            .filter(|s| pid.is_none_or(|p| s.pid == p))
            .filter(|s| !s.frames.is_empty())
            .collect()
    }
    let (p, w) = (of(perf, pid), of(ours, pid));
    let (rp, rw) = (reaching_main(&p), reaching_main(&w));
    let (fp, fw) = (fold(&p, &key), fold(&w, &key));
    let tv = total_variation(&fp, &fw);
    let chance = chance_variation(&fp, &fw, p.len(), w.len());
    let mut diffs: Vec<(f64, &String)> = fp
        .keys()
        .chain(fw.keys())
        .map(|k| (fp.get(k).unwrap_or(&0.0) - fw.get(k).unwrap_or(&0.0), k))
        .collect();
    diffs.sort_by(|a, b| b.0.abs().total_cmp(&a.0.abs()));
    diffs.dedup_by(|a, b| a.1 == b.1);
    for (d, k) in diffs.iter().take(4) {
        println!("{what}: perf - perfwatch {d:+.3}: {k}");
    }
    println!(
        "{what}: perf {} samples, {:.1}% reach main; perfwatch {} samples, {:.1}% reach main; folded stacks' total variation {tv:.3} (by chance alone {chance:.3})",
        p.len(),
        rp * 100.0,
        w.len(),
        rw * 100.0
    );
    assert!(p.len() >= 200 && w.len() >= 200, "too few samples\n{said}");
    assert!(rw >= 0.90, "{what}: {:.1}% reach main\n{said}", rw * 100.0);
    assert!(
        (rp - rw).abs() <= 0.05,
        "{what}: perf {:.1}%, perfwatch {:.1}%",
        rp * 100.0,
        rw * 100.0
    );
    assert!(
        tv <= 0.05_f64.max(2.5 * chance),
        "{what}: folded stacks {tv:.3} apart (chance alone: {chance:.3})"
    );
}

/// User frames only (perf 6.1 and perfwatch name kernel and libc frames apart), without
/// `_start`: perf 6.1 loses the frames past glibc's `__libc_start_call_main` in some runs of
/// a process it attached to before its exec (the same samples, every one, in such a run).
fn user_frames(s: &Sample) -> impl Iterator<Item = &(String, String)> {
    s.frames
        .iter()
        .rev()
        .filter(|(n, d)| !d.starts_with("[kernel") && n != "_start")
}

#[test]
fn a_c_program_unwinds_as_perf_unwinds_it() {
    require_perf!();
    if !perf() {
        skip!("perf is not installed (.ci/run installs linux-perf)");
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = cc(dir.path(), "prog", &[]);
    let (perf, ours, said) = side_by_side(dir.path(), &[bin.to_str().unwrap(), "1500"]);
    // Folded by the program's own frames (perf 6.1 names libc's start differently).
    let key = |s: &Sample| {
        user_frames(s)
            .filter(|(_, d)| d.ends_with("/prog"))
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(";")
    };
    compare("C -O2 -fomit-frame-pointer", &perf, &ours, None, key, &said);
}

#[test]
fn debians_python3_busy_loop_unwinds_to_main_as_perf_unwinds_it() {
    require_perf!();
    if !perf() {
        skip!("perf is not installed (.ci/run installs linux-perf)");
    }
    if !Path::new("/usr/bin/python3").exists() {
        skip!("Debian's /usr/bin/python3 is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let (perf, ours, said) = side_by_side(dir.path(), &["/usr/bin/python3", "-c", PY_LOOP]);
    // Folded by python3's own frames, an unnamed one as its binary (as stackcollapse-perf.pl
    // folds perf's; perf 6.1 and perfwatch name libc's start differently).
    let key = |s: &Sample| {
        user_frames(s)
            .filter(|(_, d)| d.ends_with("/python3.11") || d.ends_with("/python3"))
            .map(|(n, _)| match n.as_str() {
                "" | "[unknown]" => "[python3]",
                n => n,
            })
            .collect::<Vec<_>>()
            .join(";")
    };
    compare("python3 busy loop", &perf, &ours, None, key, &said);
}

// --- A binary replaced while it runs; the vDSO ---

/// Another program than [`common::CALL_PATH_C`]: other names, and where the first one has
/// `hot`, `middle` and `outer` (whose frames are `CFA = rsp + 8` throughout) it has the body
/// of `other_pad`, whose frame is 4 KiB: its unwind rules and symbols, applied to the first
/// one's addresses, are wrong (checked: read from the path, the chains did not reach main).
const OTHER_C: &str = r#"
#include <stdlib.h>
volatile unsigned long sink;
__attribute__((noinline)) void other_pad(void) {
    volatile char big[4096];
    for (int i = 0; i < 4096; i++) big[i] = (char)i;
    __asm__ volatile(".skip 8192, 0x90");
    sink += big[7];
}
__attribute__((noinline)) void other_tick(void) { sink++; }
__attribute__((noinline)) void other_hot(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) sink += i;
    other_tick();
}
__attribute__((noinline)) void other_outer(unsigned long n) { other_hot(n); other_pad(); }
int main(int argc, char **argv) {
    for (int i = 0; i < 10; i++) other_outer(1000);
    return argc > 5;
}
"#;

/// A package upgrade renames a new build over a running program's file: the running one's
/// frames are unwound with the unwind tables of the file it mapped, and named from it, not
/// from the file now at its path (the binary is first read after the rename: the program is
/// held stopped until then).
#[test]
fn a_binary_replaced_while_it_runs_is_unwound_and_named_from_the_one_it_mapped() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    // The first build lingers 5 s after main returns: perfwatch reads the file a process
    // mapped through /proc/PID/map_files, which goes with the process, and on a loaded
    // machine its first read of a 0.4 s program came after the program had ended (then the
    // file at the path is the other build, rightly refused: 0 samples named).
    let lingering = format!(
        "{}\n#include <unistd.h>\n__attribute__((destructor)) static void pw_linger(void) {{ sleep(5); }}\n",
        common::CALL_PATH_C
    );
    let first = common::cc(
        dir.path(),
        "first",
        &lingering,
        &["-O2", "-fomit-frame-pointer"],
    );
    let other = common::cc(
        dir.path(),
        "other",
        OTHER_C,
        &["-O2", "-fomit-frame-pointer"],
    );
    let prog = dir.path().join("prog");
    std::fs::copy(&first, &prog).unwrap();
    let mut target = common::Stopped::after_exec(&[prog.to_str().unwrap(), "400"]);
    let pid = target.pid().to_string();
    let json = dir.path().join("perfwatch.json");
    let mut pw = common::perfwatch()
        .arg("--json")
        .args(DWARF_AT_1000)
        .args(["-p", &pid])
        .stdout(std::fs::File::create(&json).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_until_watching(&mut pw);
    let new = dir.path().join("prog.new");
    std::fs::copy(&other, &new).unwrap();
    std::fs::rename(&new, &prog).unwrap();
    target.run(std::time::Duration::from_secs(120));
    let out = common::monitor_end(pw, "perfwatch");
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    let samples = json_samples(&std::fs::read_to_string(&json).unwrap());
    assert_unwound_to_main(&samples, &said);
    let wrong = samples
        .iter()
        .flat_map(|s| names(s))
        .find(|n| n.starts_with("other_"));
    assert!(
        wrong.is_none(),
        "named from the new file: {wrong:?}\n{said}"
    );
}

/// `clock_gettime` in a loop: most samples are in the vDSO, whose unwind tables are
/// perfwatch's own vDSO's (the same image, checked): they unwind through it to `main`.
/// (This kernel's vDSO keeps frame pointers, so framehop's guess for a module without
/// tables gets as far: 592 of 598 without the tables, 581 of 588 with them. The test holds
/// the path through the vDSO; `unwind::tests::our_own_vdso_has_unwind_rules` its tables.)
const VDSO_C: &str = r#"
#include <stdlib.h>
#include <time.h>
volatile unsigned long sink;
__attribute__((noinline)) void clocks(unsigned long n) {
    struct timespec t;
    for (unsigned long i = 0; i < n; i++) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        sink += t.tv_nsec;
    }
}
__attribute__((noinline)) void outer(unsigned long n) { clocks(n); sink++; }
int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 100;
    for (unsigned long i = 0; i < n; i++) outer(100000);
    return 0;
}
"#;

#[test]
fn samples_in_the_vdso_unwind_through_it_to_main() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let bin = common::cc(
        dir.path(),
        "clocks",
        VDSO_C,
        &["-O2", "-fomit-frame-pointer"],
    );
    let (samples, said) = watch(&[bin.to_str().unwrap(), "300"], &[]);
    let in_vdso: Vec<&Sample> = samples
        .iter()
        .filter(|s| {
            s.frames
                .iter()
                .find(|(_, d)| !d.starts_with("[kernel"))
                .is_some_and(|(_, d)| d == "[vdso]")
        })
        .collect();
    let through = in_vdso
        .iter()
        .filter(|s| {
            let n = names(s);
            let at = |f: &str| n.iter().position(|x| *x == f);
            matches!((at("clocks"), at("outer"), at("main")), (Some(a), Some(b), Some(c)) if a < b && b < c)
        })
        .count();
    assert!(
        in_vdso.len() >= 30,
        "{} samples in the vDSO of {}; stderr:\n{said}",
        in_vdso.len(),
        samples.len()
    );
    assert!(
        through * 100 >= in_vdso.len() * 90,
        "{through} of {} samples in the vDSO unwound through it to main; e.g. {:?}\n{said}",
        in_vdso.len(),
        in_vdso.first().map(|s| names(s))
    );
}
