//! A CPU taken offline while perfwatch runs: its reader ends cleanly, the others go on, and
//! the summary says which CPU went away. In a test binary of its own, because taking a CPU
//! offline would disturb tests running beside it.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use assert_cmd::cargo::cargo_bin;

/// Puts the CPU back online however the test ends.
struct Online(u32);

impl Drop for Online {
    fn drop(&mut self) {
        let _ = std::fs::write(format!("/sys/devices/system/cpu/cpu{}/online", self.0), "1");
    }
}

#[test]
fn a_cpu_going_offline_ends_its_reader_and_the_others_go_on() {
    require_perf!();
    let online = perfwatch::perf::cpus::online_cpus().unwrap();
    let Some(&cpu) = online.iter().rev().find(|&&c| c != 0) else {
        eprintln!("SKIPPING hotplug test: only CPU 0 is online");
        return;
    };
    let ctl = format!("/sys/devices/system/cpu/cpu{cpu}/online");
    if std::fs::metadata(&ctl).is_err() {
        eprintln!(
            "SKIPPING hotplug test: {ctl} does not exist (CPU {cpu} cannot be taken offline)"
        );
        return;
    }
    let mon = Command::new(cargo_bin("perfwatch"))
        .args(["--json", "-e", "cpu-clock", "-F", "200", "-d", "4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    if let Err(e) = std::fs::write(&ctl, "0") {
        eprintln!("SKIPPING hotplug test: cannot take CPU {cpu} offline here: {e}");
        let _ = mon.wait_with_output();
        return;
    }
    let guard = Online(cpu);
    let offline_at = perfwatch::clock::monotonic_ns();
    std::thread::sleep(Duration::from_millis(1500));
    drop(guard);
    let out = mon.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("cpu {cpu}:")) && stderr.contains("(went offline)"),
        "{stderr}"
    );
    // CPU 0 kept being read after the other went offline.
    let later_on_cpu0 = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| {
            v["sample_cpu"] == 0
                && v["sample_time"].as_u64().unwrap_or(0) > offline_at + 500_000_000
        })
        .count();
    assert!(
        later_on_cpu0 > 0,
        "no records from CPU 0 after CPU {cpu} went offline: {stderr}"
    );
}
