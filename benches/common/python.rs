//! Running a Python 3 (standard library) harness from a cargo bench target, on the binaries
//! cargo has just built (in the bench profile, i.e. optimised). The harnesses are Python
//! because they drive processes, pseudo-terminals and perf's own tools, and parse their
//! output. Arguments after `--` are passed on (`cargo bench --bench NAME -- --smoke`).

use std::process::{Command, ExitCode};

/// Run `benches/<script>` with `fixed` arguments, then the bench's own; its status.
pub fn run_harness(name: &str, script: &str, fixed: &[&str]) -> ExitCode {
    let path = format!("{}/benches/{script}", env!("CARGO_MANIFEST_DIR"));
    // cargo passes --bench to every bench target; the harness has no use for it.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let status = Command::new("python3")
        .arg(&path)
        .args(fixed)
        .args(&args)
        .status();
    match status {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(s) => {
            eprintln!("{name}: benches/{script} ended with {s}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("{name}: cannot run python3 {path}: {e}");
            ExitCode::from(1)
        }
    }
}
