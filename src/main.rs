//! The `perfwatch` binary: parse the command line, run, map errors to exit codes.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = perfwatch::cli::Cli::parse();
    if let Some(kind) = cli.generate {
        return generate(kind);
    }
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

/// `--generate KIND`: the man page or a completion script on stdout. A closed pipe is not an
/// error (`perfwatch --generate man | head`).
fn generate(kind: perfwatch::cli::Generate) -> ExitCode {
    match perfwatch::generate::generate(kind, &mut std::io::stdout().lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("perfwatch: error: cannot write the generated text: {e}");
            ExitCode::from(1)
        }
    }
}
