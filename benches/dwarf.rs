//! The `--call-graph dwarf` unwind step's speed, on real stacks: samples per second on one
//! core, the number the issue's `--plain` figure (>= 200 k samples/s/core) is about.
//!
//! A busy Debian `python3` (or the program given as arguments) is stopped 400 times with
//! ptrace, 5 ms apart; each time its user registers and 8 KiB of its stack from `sp` are
//! copied, as the kernel copies them for PERF_SAMPLE_REGS_USER/STACK_USER. Then the unwind
//! step ([`perfwatch::unwind::Unwinder`] and the chain join of `perfwatch::unwinding`, what
//! the pipeline runs per sample) goes through the 400 samples again and again for 2 s,
//! after one warm-up pass (the tables read and the rule cache filled, as in a live run).
//! It prints samples/s, the frames per chain and how the chains ended.
//!
//! Run: `cargo bench --bench dwarf` (as root: ptrace of a child), or
//! `cargo bench --bench dwarf -- /usr/bin/xz -9 -c /some/file`.

use std::hint::black_box;
use std::os::unix::fs::FileExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use perfwatch::event::{UserRegs, UserStack};
use perfwatch::unwind::{Config, End, ModuleMap, Unwinder};

#[path = "common/maps.rs"]
mod maps;

const SNAPSHOTS: usize = 400;
const STACK: usize = 8192;

/// The executable file mappings of process `pid`.
fn modules(pid: u32) -> Vec<ModuleMap> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    maps::exec_maps(&maps)
        .into_iter()
        .map(|m| ModuleMap {
            start: m.start,
            end: m.end,
            pgoff: m.pgoff,
            file: m.file,
        })
        .collect()
}

/// Stop `pid`, copy its registers and stack, let it go.
fn snapshot(pid: i32, mem: &std::fs::File) -> Option<UserStack> {
    // SAFETY: ptrace of our own child; every call's result is checked.
    unsafe {
        if libc::ptrace(libc::PTRACE_ATTACH, pid, 0, 0) != 0 {
            return None;
        }
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        let mut regs: libc::user_regs_struct = std::mem::zeroed();
        let ok = libc::ptrace(libc::PTRACE_GETREGS, pid, 0, &mut regs as *mut _) == 0;
        let mut stack = vec![0u8; STACK];
        let n = if ok {
            mem.read_at(&mut stack, regs.rsp).unwrap_or(0)
        } else {
            0
        };
        libc::ptrace(libc::PTRACE_DETACH, pid, 0, 0);
        stack.truncate(n);
        ok.then(|| UserStack {
            regs: Some(UserRegs {
                ip: regs.rip,
                sp: regs.rsp,
                bp: regs.rbp,
            }),
            stack: stack.into(),
        })
    }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let argv: Vec<String> = if args.is_empty() {
        vec![
            "/usr/bin/python3".into(),
            "-c".into(),
            "x = 0\nwhile True:\n    x += 1\n".into(),
        ]
    } else {
        args
    };
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("the workload");
    let pid = child.id() as i32;
    std::thread::sleep(Duration::from_millis(300));
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).expect("ptrace rights (root)");
    let maps = modules(pid as u32);
    let mut samples = Vec::new();
    while samples.len() < SNAPSHOTS {
        match snapshot(pid, &mem) {
            Some(s) => samples.push(s),
            None => break,
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut unwinder = Unwinder::new(Config::default());
    let mut frames = Vec::new();
    let mut chain_frames = 0usize;
    let mut ends = std::collections::HashMap::<End, usize>::new();
    let key = (1usize, 1u64);
    let unwind_all = |u: &mut Unwinder,
                      frames: &mut Vec<u64>,
                      count: bool,
                      cf: &mut usize,
                      ends: &mut std::collections::HashMap<End, usize>| {
        for s in &samples {
            frames.clear();
            let end = u.unwind(
                pid as u32,
                key,
                |out| out.extend(maps.iter().cloned()),
                s,
                127,
                frames,
            );
            let chain = perfwatch::unwinding::join(None, frames);
            black_box(&chain);
            if count {
                *cf += frames.len();
                *ends.entry(end).or_default() += 1;
            }
        }
    };
    // Warm-up: tables read, rules cached (the workload still runs: its files are there).
    unwind_all(
        &mut unwinder,
        &mut frames,
        true,
        &mut chain_frames,
        &mut ends,
    );
    let _ = child.kill();
    let _ = child.wait();
    let t0 = Instant::now();
    let mut done = 0usize;
    let mut dummy = 0usize;
    let mut no_ends = std::collections::HashMap::new();
    while t0.elapsed() < Duration::from_secs(2) {
        unwind_all(&mut unwinder, &mut frames, false, &mut dummy, &mut no_ends);
        done += samples.len();
    }
    let secs = t0.elapsed().as_secs_f64();
    let n = samples.len().max(1);
    println!(
        "dwarf unwind step ({}): {} samples of {} B stacks, {:.1} frames per chain; {:.0} samples/s on one core",
        argv[0],
        samples.len(),
        STACK,
        chain_frames as f64 / n as f64,
        done as f64 / secs
    );
    let mut ends: Vec<(End, usize)> = ends.into_iter().collect();
    ends.sort_by_key(|(_, c)| std::cmp::Reverse(*c));
    for (end, c) in ends {
        println!("  ended by {}: {c}", end.name());
    }
}
