//! A CPU taken offline while perfwatch runs: its reader ends cleanly, the others go on, and
//! the summary says which CPU went away. In a test binary of its own, because taking a CPU
//! offline would disturb tests running beside it.

mod common;

use std::time::Duration;

/// Puts the CPU back online however the test ends (the guard drops while a failed
/// assertion unwinds), and says so loudly if the kernel will not have it back.
struct Online(u32);

impl Drop for Online {
    fn drop(&mut self) {
        let ctl = format!("/sys/devices/system/cpu/cpu{}/online", self.0);
        // Onlining can fail for a moment (EBUSY) while the offlining is still settling.
        for _ in 0..50 {
            if std::fs::write(&ctl, "1").is_ok()
                || std::fs::read_to_string(&ctl).is_ok_and(|s| s.trim() == "1")
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        common::say(&format!(
            "hotplug test: COULD NOT PUT CPU {} BACK ONLINE; do it by hand: echo 1 > {ctl}",
            self.0
        ));
    }
}

#[test]
fn a_cpu_going_offline_ends_its_reader_and_the_others_go_on() {
    require_perf!();
    let online = perfwatch::perf::cpus::online_cpus().unwrap();
    let Some(&cpu) = online.iter().rev().find(|&&c| c != 0) else {
        skip!("only CPU 0 is online");
    };
    let ctl = format!("/sys/devices/system/cpu/cpu{cpu}/online");
    if std::fs::metadata(&ctl).is_err() {
        skip!("{ctl} does not exist (CPU {cpu} cannot be taken offline)");
    }
    let mut mon = common::spawn_piped(&["--json", "-e", "cpu-clock", "-F", "200", "-d", "4"]);
    common::wait_until_watching(&mut mon);
    std::thread::sleep(Duration::from_millis(500));
    // The guard exists before the CPU goes offline, so nothing between the two can leave it
    // offline.
    let guard = Online(cpu);
    if let Err(e) = std::fs::write(&ctl, "0") {
        drop(guard);
        let _ = mon.output_in_time();
        skip!("cannot take CPU {cpu} offline here: {e}");
    }
    let offline_at = perfwatch::clock::monotonic_ns();
    std::thread::sleep(Duration::from_millis(1500));
    drop(guard);
    assert_eq!(
        perfwatch::perf::cpus::online_cpus().unwrap(),
        online,
        "CPU {cpu} is back online"
    );
    let out = mon.output_in_time().unwrap();
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
