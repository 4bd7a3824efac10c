//! `cargo bench --bench switch_storm`: runs `benches/switch_storm.py` (perfwatch against
//! perf record + perf script on a sched_switch storm) on the perfwatch cargo has just built
//! (in the bench profile, i.e. optimised).
//!
//! The harness itself is a Python 3 (standard library) script because it drives processes,
//! pseudo-terminals and perf's own tools, and parses their output; see its docstring for
//! what it measures. Arguments after `--` are passed on (`cargo bench --bench switch_storm --
//! --smoke`).

use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/switch_storm.py");
    // cargo passes --bench to every bench target; the harness has no use for it.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let status = Command::new("python3")
        .arg(script)
        .args(["--perfwatch", env!("CARGO_BIN_EXE_perfwatch")])
        .args(&args)
        .status();
    match status {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(s) => {
            eprintln!("switch_storm: benches/switch_storm.py ended with {s}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("switch_storm: cannot run python3 {script}: {e}");
            ExitCode::from(1)
        }
    }
}
