//! `cargo bench --bench switch_storm`: runs `benches/switch_storm.py` (perfwatch against
//! perf record + perf script on a sched_switch storm) on the perfwatch cargo has just built.

#[path = "common/python.rs"]
mod python;

fn main() -> std::process::ExitCode {
    python::run_harness(
        "switch_storm",
        "switch_storm.py",
        &["--perfwatch", env!("CARGO_BIN_EXE_perfwatch")],
    )
}
