//! `cargo bench --bench overhead`: runs the overhead harness, `benches/overhead.py`, on the
//! binaries cargo has just built (in the bench profile, i.e. optimised).
//!
//! The harness itself is a Python 3 (standard library) script because it drives processes,
//! pseudo-terminals and perf's own tools, and parses their output; see its docstring for
//! what it measures. Arguments after `--` are passed on (`cargo bench --bench overhead --
//! --smoke`).

use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/overhead.py");
    // cargo passes --bench to every bench target; the harness has no use for it.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let status = Command::new("python3")
        .arg(script)
        .args(["--perfwatch", env!("CARGO_BIN_EXE_perfwatch")])
        .args(["--stress", env!("CARGO_BIN_EXE_perfwatch-stress")])
        .args(&args)
        .status();
    match status {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(s) => {
            eprintln!("overhead: benches/overhead.py ended with {s}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("overhead: cannot run python3 {script}: {e}");
            ExitCode::from(1)
        }
    }
}
