//! Names of what ran: the symbolizer on real binaries, perf maps read as their owner, call
//! chains (frame pointers and `--call-graph dwarf`) and `--folded`, beside `perf report`.
//!
//! One test binary of several modules: each file was a test binary of its own, and each
//! linked perfwatch and libpython. `cargo test --test symbols NAME` runs one module's tests.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod as_perf;
mod callchain;
mod dwarf;
mod perf_maps;
mod symbols;
