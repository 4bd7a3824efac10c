//! The real binary against the real kernel: events, signals and stops, the command line
//! and its refusals, exec command lines, `--plain`/`--json`, tracepoint text beside perf,
//! orphans, hostile names, the symbol budget, the stress tool and the overhead harness's
//! smoke run.
//!
//! One test binary of several modules: each file was a test binary of its own, and each
//! linked perfwatch and libpython. `cargo test --test live NAME` runs one module's tests.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod argv;
mod cli;
mod events;
mod hostile;
mod json;
mod kernel;
mod orphans;
mod overhead_smoke;
mod parse_memory;
mod plain_parse;
mod show_self;
mod signals;
mod stop;
mod stress;
mod tracepoint_text;
