//! The `perfwatch` binary: parse the command line, run, map errors to exit codes.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = perfwatch::cli::Cli::parse();
    match perfwatch::run::run(cli) {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            // One line (or a short paragraph for permission help) naming the offending value.
            eprintln!("perfwatch: error: {e:#}");
            if e.downcast_ref::<perfwatch::run::UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
