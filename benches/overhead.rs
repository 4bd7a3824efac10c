//! `cargo bench --bench overhead`: runs the overhead harness, `benches/overhead.py` (see its
//! docstring for what it measures), on the perfwatch and perfwatch-stress cargo has just
//! built.

#[path = "common/python.rs"]
mod python;

fn main() -> std::process::ExitCode {
    python::run_harness(
        "overhead",
        "overhead.py",
        &[
            "--perfwatch",
            env!("CARGO_BIN_EXE_perfwatch"),
            "--stress",
            env!("CARGO_BIN_EXE_perfwatch-stress"),
        ],
    )
}
