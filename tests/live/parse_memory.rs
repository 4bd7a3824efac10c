//! Issue 31: one user binary with a huge symbol table must not make perfwatch's memory
//! burst. The symbol budget covers the parse itself; a binary whose parse would exceed it is
//! named by its binary, with a note.

use crate::common;

use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Symbols in the generated binary (the figure).
const SYMBOLS: usize = 600_000;
const TEXT_OFF: u64 = 0x1000;

/// Write an ELF64 shared object of `n` 4-byte functions whose code is `jmp .` loops, with a
/// `.symtab` naming each.
fn write_elf(path: &Path, n: usize) {
    let text_size = (n * 4) as u64;
    let mut strtab = vec![0u8];
    let mut symtab = vec![0u8; 24];
    for i in 0..n {
        let name_off = strtab.len() as u32;
        strtab.extend_from_slice(format!("generated_function_number_{i:07}\0").as_bytes());
        symtab.extend_from_slice(&name_off.to_le_bytes());
        symtab.push(0x12); // STB_GLOBAL, STT_FUNC
        symtab.push(0);
        symtab.extend_from_slice(&1u16.to_le_bytes()); // .text
        symtab.extend_from_slice(&(TEXT_OFF + i as u64 * 4).to_le_bytes());
        symtab.extend_from_slice(&4u64.to_le_bytes());
    }
    let shstrtab = b"\0.text\0.symtab\0.strtab\0.shstrtab\0";
    let symtab_off = TEXT_OFF + text_size;
    let strtab_off = symtab_off + symtab.len() as u64;
    let shstr_off = strtab_off + strtab.len() as u64;
    let shoff = (shstr_off + shstrtab.len() as u64 + 7) & !7;
    let mut f = Vec::with_capacity(shoff as usize + 5 * 64);
    // ELF header.
    f.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    f.extend_from_slice(&3u16.to_le_bytes()); // ET_DYN
    f.extend_from_slice(&62u16.to_le_bytes()); // x86-64
    f.extend_from_slice(&1u32.to_le_bytes());
    f.extend_from_slice(&0u64.to_le_bytes()); // entry
    f.extend_from_slice(&64u64.to_le_bytes()); // phoff
    f.extend_from_slice(&shoff.to_le_bytes());
    f.extend_from_slice(&0u32.to_le_bytes()); // flags
    for v in [64u16, 56, 1, 64, 5, 4] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    // PT_LOAD of the headers and the code, read and execute.
    f.extend_from_slice(&1u32.to_le_bytes());
    f.extend_from_slice(&5u32.to_le_bytes());
    for v in [
        0u64,
        0,
        0,
        TEXT_OFF + text_size,
        TEXT_OFF + text_size,
        0x1000,
    ] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    f.resize(TEXT_OFF as usize, 0);
    for _ in 0..n {
        f.extend_from_slice(&[0xeb, 0xfe, 0xeb, 0xfe]); // jmp . (twice)
    }
    f.extend_from_slice(&symtab);
    f.extend_from_slice(&strtab);
    f.extend_from_slice(shstrtab);
    f.resize(shoff as usize, 0);
    let section = |f: &mut Vec<u8>,
                   name: u32,
                   ty: u32,
                   flags: u64,
                   addr: u64,
                   off: u64,
                   size: u64,
                   link: u32,
                   info: u32,
                   align: u64,
                   entsize: u64| {
        f.extend_from_slice(&name.to_le_bytes());
        f.extend_from_slice(&ty.to_le_bytes());
        for v in [flags, addr, off, size] {
            f.extend_from_slice(&v.to_le_bytes());
        }
        f.extend_from_slice(&link.to_le_bytes());
        f.extend_from_slice(&info.to_le_bytes());
        f.extend_from_slice(&align.to_le_bytes());
        f.extend_from_slice(&entsize.to_le_bytes());
    };
    section(&mut f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    section(&mut f, 1, 1, 6, TEXT_OFF, TEXT_OFF, text_size, 0, 0, 16, 0);
    section(
        &mut f,
        7,
        2,
        0,
        0,
        symtab_off,
        symtab.len() as u64,
        3,
        1,
        8,
        24,
    );
    section(
        &mut f,
        15,
        3,
        0,
        0,
        strtab_off,
        strtab.len() as u64,
        0,
        0,
        1,
        0,
    );
    section(
        &mut f,
        23,
        3,
        0,
        0,
        shstr_off,
        shstrtab.len() as u64,
        0,
        0,
        1,
        0,
    );
    std::fs::File::create(path).unwrap().write_all(&f).unwrap();
}

/// A python program that maps `elf` and runs one of its loops for `secs` seconds.
fn spinner(elf: &Path, secs: u32) -> String {
    format!(
        "import ctypes, os, signal\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         libc.mmap.restype = ctypes.c_void_p\n\
         libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]\n\
         fd = os.open('{}', os.O_RDONLY)\n\
         size = os.fstat(fd).st_size\n\
         base = libc.mmap(None, size, 5, 2, fd, 0)\n\
         signal.alarm({secs})\n\
         ctypes.CFUNCTYPE(None)(base + {TEXT_OFF} + 4 * 123456)()\n",
        elf.display()
    )
}

/// `VmHWM` of `pid` in bytes.
fn vm_hwm(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let l = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = l.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// A cgroup v2 memory group of its own, removed when dropped (`None`: no cgroup v2 with
/// the memory controller here).
struct MemoryGroup(std::path::PathBuf);

impl MemoryGroup {
    fn new(max: u64) -> Option<MemoryGroup> {
        let root = Path::new("/sys/fs/cgroup");
        let controllers = std::fs::read_to_string(root.join("cgroup.controllers")).ok()?;
        if !controllers.split_whitespace().any(|c| c == "memory") {
            return None;
        }
        let _ = std::fs::write(root.join("cgroup.subtree_control"), "+memory");
        let dir = root.join(format!("perfwatch-test-{}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let g = MemoryGroup(dir);
        std::fs::write(g.0.join("memory.max"), max.to_string()).ok()?;
        let _ = std::fs::write(g.0.join("memory.swap.max"), "0");
        Some(g)
    }

    fn oom_kills(&self) -> u64 {
        std::fs::read_to_string(self.0.join("memory.events"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for MemoryGroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn a_600k_symbol_binary_stays_within_the_symbol_budget_and_is_named_by_its_binary() {
    require_perf!();
    if std::process::Command::new("python3")
        .arg("-c")
        .arg("import ctypes")
        .status()
        .map_or(true, |s| !s.success())
    {
        skip!("python3 with ctypes is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let elf = dir.path().join("libhuge.so");
    write_elf(&elf, SYMBOLS);
    let script = dir.path().join("spin.py");
    std::fs::write(&script, spinner(&elf, 3)).unwrap();
    const LIMIT: u64 = 64 << 20;
    let group = if common::is_root() {
        MemoryGroup::new(LIMIT)
    } else {
        None
    };
    if group.is_none() {
        common::say(&format!(
            "NOTE {}: no cgroup v2 memory controller to limit perfwatch to 64 MiB: its peak \
             memory (VmHWM) is checked alone",
            test_name!()
        ));
    }
    let perfwatch = assert_cmd::cargo::cargo_bin("perfwatch");
    let cmd = format!(
        "{} --plain -e cpu-clock -F 999 -- python3 {}",
        perfwatch.display(),
        script.display()
    );
    let enter = match &group {
        Some(g) => format!("echo $$ > {}/cgroup.procs && exec {cmd}", g.0.display()),
        None => format!("exec {cmd}"),
    };
    let mut child = std::process::Command::new("sh")
        .args(["-c", &enter])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let mut peak = 0;
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if let Some(h) = vm_hwm(pid) {
            peak = peak.max(h);
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("perfwatch did not end in 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = child.wait().unwrap();
    let mut errors = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut errors).unwrap();
    let out = reader.join().unwrap();
    if let Some(g) = &group {
        assert_eq!(g.oom_kills(), 0, "perfwatch was OOM-killed under 64 MiB");
    }
    // perfwatch ends with its command's status: the spinner's alarm (SIGALRM).
    assert_eq!(
        status.code(),
        Some(128 + libc::SIGALRM),
        "{status:?}: {errors}"
    );
    // The README's bound: about 41 MiB at most (a debug build, with some slack).
    assert!(
        peak > 0 && peak < 48 << 20,
        "perfwatch's VmHWM reached {} MiB",
        peak >> 20
    );
    let elf_name = elf.display().to_string();
    let samples: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("{ type: sample,") && l.contains(&elf_name))
        .collect();
    assert!(
        samples.len() >= 100,
        "{} samples in the binary",
        samples.len()
    );
    assert!(
        samples.iter().all(|l| l.contains("sym: [unknown]")),
        "{:?}",
        &samples[..3]
    );
    assert!(
        errors.contains("libhuge.so: cannot read its symbols: symbol tables too large"),
        "{errors}"
    );
    common::say(&format!(
        "{}: perfwatch VmHWM {:.1} MiB with a {SYMBOLS}-symbol binary",
        test_name!(),
        peak as f64 / (1 << 20) as f64
    ));
}
