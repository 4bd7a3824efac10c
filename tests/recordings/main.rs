//! Recordings and outputs: `-i perf.data` beside perf, files written whole (`--folded`,
//! `--script-output`), and the fleet outputs (`--metrics` scraped by Prometheus, `--pprof`
//! read by `go tool pprof`).
//!
//! One test binary of several modules: each file was a test binary of its own, and each
//! linked perfwatch and libpython. `cargo test --test recordings NAME` runs one module's tests.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod fleet;
mod format_perf;
mod outputs;
mod recording;
