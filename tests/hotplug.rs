//! A CPU taken offline while perfwatch runs: the other CPUs' readers go on, and when it
//! comes back its events are opened again (a system-wide run) or the summary says why not.
//! In a test binary of its own, because taking a CPU offline would disturb tests running
//! beside it; its tests take turns.

mod common;

use std::time::Duration;

/// The tests of this binary take the same CPU offline: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

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

/// A CPU other than 0 that can be taken offline, or a visible skip.
macro_rules! offline_cpu {
    () => {{
        let online = perfwatch::perf::cpus::online_cpus().unwrap();
        let Some(&cpu) = online.iter().rev().find(|&&c| c != 0) else {
            skip!("only CPU 0 is online");
        };
        let ctl = format!("/sys/devices/system/cpu/cpu{cpu}/online");
        if std::fs::metadata(&ctl).is_err() {
            skip!("{ctl} does not exist (CPU {cpu} cannot be taken offline)");
        }
        (cpu, online)
    }};
}

/// perfwatch `ARGS` while `cpu` goes offline for 1.5 s and comes back: its output, and when
/// the CPU went and came back (CLOCK_MONOTONIC, as the records' times). None: the kernel
/// would not take it offline here (said).
fn away_and_back(cpu: u32, args: &[&str]) -> Option<(std::process::Output, u64, u64)> {
    let online = perfwatch::perf::cpus::online_cpus().unwrap();
    let ctl = format!("/sys/devices/system/cpu/cpu{cpu}/online");
    let mut mon = common::spawn_piped(args);
    common::wait_until_watching(&mut mon);
    std::thread::sleep(Duration::from_millis(500));
    // The guard exists before the CPU goes offline, so nothing between the two can leave it
    // offline.
    let guard = Online(cpu);
    if let Err(e) = std::fs::write(&ctl, "0") {
        drop(guard);
        let _ = mon.output_in_time();
        common::say(&format!("cannot take CPU {cpu} offline here: {e}"));
        return None;
    }
    let offline_at = perfwatch::clock::monotonic_ns();
    std::thread::sleep(Duration::from_millis(1500));
    drop(guard);
    let online_at = perfwatch::clock::monotonic_ns();
    assert_eq!(
        perfwatch::perf::cpus::online_cpus().unwrap(),
        online,
        "CPU {cpu} is back online"
    );
    let out = mon.output_in_time().unwrap();
    Some((out, offline_at, online_at))
}

/// The samples of `--json` output: (cpu, time).
fn samples(stdout: &[u8]) -> Vec<(u64, u64)> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["type"] == "sample")
        .filter_map(|v| Some((v["sample_cpu"].as_u64()?, v["sample_time"].as_u64()?)))
        .collect()
}

#[test]
fn a_cpu_going_offline_and_back_is_watched_again_and_the_others_go_on() {
    require_perf!();
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (cpu, _) = offline_cpu!();
    let args = ["--json", "-a", "-e", "cpu-clock", "-F", "200", "-d", "5"];
    let Some((out, offline_at, online_at)) = away_and_back(cpu, &args) else {
        skip!("the kernel would not take CPU {cpu} offline");
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("cpu {cpu}:"))
            && stderr.contains("(went offline; its events opened again when it came back)"),
        "{stderr}"
    );
    let samples = samples(&out.stdout);
    // CPU 0 kept being read while the other was away.
    let cpu0_while_away = samples
        .iter()
        .filter(|&&(c, t)| c == 0 && t > offline_at + 500_000_000 && t < online_at)
        .count();
    assert!(
        cpu0_while_away > 0,
        "no samples from CPU 0 while CPU {cpu} was offline: {stderr}"
    );
    // The CPU is watched again once back: its samples from the second after.
    let back = samples
        .iter()
        .filter(|&&(c, t)| c == u64::from(cpu) && t > online_at + 1_000_000_000)
        .count();
    assert!(
        back >= 20,
        "{back} samples from CPU {cpu} after it came back: {stderr}"
    );
    // And the lines stayed in time order across its going and coming back.
    let times: Vec<u64> = samples.iter().map(|&(_, t)| t).collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "samples out of time order around the CPU's return"
    );
}

/// Where the events cannot be opened again (a command's, which follow the tasks it forks
/// from their start), the summary says the CPU came back unwatched, and why.
#[test]
fn a_cpu_that_comes_back_unwatched_is_said_with_the_reason() {
    require_perf!();
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (cpu, _) = offline_cpu!();
    let args = [
        "--json",
        "-e",
        "cpu-clock",
        "-F",
        "200",
        "--",
        "sh",
        "-c",
        "sleep 4",
    ];
    let Some((out, _, _)) = away_and_back(cpu, &args) else {
        skip!("the kernel would not take CPU {cpu} offline");
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("cpu {cpu}:"))
            && stderr.contains("(went offline; back online, not watched since: a task's events"),
        "{stderr}"
    );
}

/// A CPU offline when perfwatch starts and brought online during the run: its events were
/// never opened, and the summary says so rather than passing it over.
#[test]
fn a_cpu_that_comes_online_after_the_start_is_said_unwatched() {
    require_perf!();
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (cpu, _) = offline_cpu!();
    let ctl = format!("/sys/devices/system/cpu/cpu{cpu}/online");
    let guard = Online(cpu);
    if let Err(e) = std::fs::write(&ctl, "0") {
        drop(guard);
        skip!("cannot take CPU {cpu} offline here: {e}");
    }
    let mut mon =
        common::spawn_piped(&["--plain", "-a", "-e", "cpu-clock", "-F", "100", "-d", "3"]);
    common::wait_until_watching(&mut mon);
    drop(guard);
    let out = mon.output_in_time().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cpu {cpu}: came online after the start: not watched"
        )),
        "{stderr}"
    );
}
