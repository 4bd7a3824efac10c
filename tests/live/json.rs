//! `--json` as jq reads it: real kernel samples, whose addresses are above 2^53, come out of
//! jq unchanged, because perfwatch writes addresses as hex strings.

use crate::common;

use common::InTime;

use std::io::Write;
use std::process::{Command, Stdio};

use assert_cmd::cargo::cargo_bin;
use serde_json::Value;

/// Lowest kernel-half address on x86-64 and arm64: every kernel text address is above it.
const KERNEL_HALF: u64 = 0xffff_0000_0000_0000;

fn jq_version() -> Option<String> {
    let out = Command::new("jq").arg("--version").output_in_time().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Run jq with `args` on `input`; its stdout.
fn jq(args: &[&str], input: &[u8]) -> String {
    let mut child = Command::new("jq")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.output_in_time().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "jq {args:?} failed");
    String::from_utf8(out.stdout).unwrap()
}

fn hex(s: &str) -> u64 {
    let digits = s
        .strip_prefix("0x")
        .unwrap_or_else(|| panic!("not 0x...: {s}"));
    assert!(
        !digits.is_empty()
            && digits
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "not lower-case hex: {s}"
    );
    u64::from_str_radix(digits, 16).unwrap()
}

/// `_stext` and `_etext` from /proc/kallsyms, when this process may see real addresses.
fn kernel_text() -> Option<(u64, u64)> {
    let syms = std::fs::read_to_string("/proc/kallsyms").ok()?;
    let find = |name: &str| {
        syms.lines().find_map(|l| {
            let mut f = l.split_whitespace();
            let addr = f.next()?;
            f.next()?;
            (f.next()? == name).then(|| u64::from_str_radix(addr, 16).ok())?
        })
    };
    let (start, end) = (find("_stext")?, find("_etext")?);
    (start != 0 && end > start).then_some((start, end))
}

#[test]
fn jq_prints_kernel_sample_addresses_unchanged() {
    require_perf!();
    let Some(version) = jq_version() else {
        skip!("jq is not installed (.ci/run installs it)");
    };
    // The whole system while a command makes system calls: idle and syscall samples land in
    // the kernel. A short mapping-heavy command brings mmap records too.
    let out = Command::new(cargo_bin("perfwatch"))
        .args(["--json", "-e", "cpu-clock", "-F", "2000", "-a", "--"])
        .args(["dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=300000"])
        .stderr(Stdio::piped())
        .output_in_time()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let lines: Vec<Value> = out
        .stdout
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();

    // What perfwatch wrote, read exactly (serde_json keeps strings as they are).
    let ips: Vec<&str> = lines
        .iter()
        .filter(|v| v["type"] == "sample")
        .map(|v| v["sample_ip"].as_str().expect("sample_ip is a string"))
        .collect();
    let kernel: Vec<&str> = ips
        .iter()
        .copied()
        .filter(|s| hex(s) >= KERNEL_HALF)
        .collect();
    assert!(!kernel.is_empty(), "no kernel samples: {stderr}");
    let starts: Vec<&str> = lines
        .iter()
        .filter(|v| v["type"] == "mmap")
        .map(|v| v["start"].as_str().expect("mmap start is a string"))
        .collect();
    assert!(
        !starts.is_empty(),
        "no mmap records (dd maps its libraries)"
    );
    for s in &starts {
        hex(s);
    }

    // jq prints every address as perfwatch wrote it.
    let by_jq = jq(
        &["-r", r#"select(.type=="sample") | .sample_ip"#],
        &out.stdout,
    );
    assert_eq!(by_jq.lines().collect::<Vec<_>>(), ips, "{version}");
    let by_jq = jq(&["-r", r#"select(.type=="mmap") | .start"#], &out.stdout);
    assert_eq!(by_jq.lines().collect::<Vec<_>>(), starts, "{version}");
    // And a whole record passes through `jq -c .` with its address intact.
    let line = lines
        .iter()
        .find(|v| v["type"] == "sample" && v["sample_ip"] == kernel[0])
        .unwrap()
        .to_string();
    let again = jq(&["-c", "."], line.as_bytes());
    assert!(
        again.contains(&format!("\"sample_ip\":\"{}\"", kernel[0])),
        "{again}"
    );

    // The addresses are the kernel's: some fall in its text (the idle loop, system calls).
    if let Some((stext, etext)) = kernel_text() {
        assert!(
            kernel.iter().any(|s| (stext..etext).contains(&hex(s))),
            "no sample in kernel text {stext:#x}..{etext:#x}: {kernel:?}"
        );
    }
}
