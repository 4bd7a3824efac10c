//! Python scripts (the `python` feature): perfwatch's own hooks, perf's script API beside
//! `perf script -s`, the interpreter's isolation as root. (The `perfwatch` wheel is
//! tests/pymod.rs, a binary of its own: building it compiles the crate again, minutes of CPU
//! that would make the timed stops here fail.)
//!
//! One test binary of several modules: each file was a test binary of its own, and each
//! linked perfwatch and libpython. `cargo test --test scripts NAME` runs one module's tests.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod perf_scripts;
mod script;
mod script_security;
