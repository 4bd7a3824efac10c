//! Tests that need no perf events: property tests of the decoders, the ring reader, the
//! symbolizer and the line formats; the TUI on ratatui's `TestBackend` (insta snapshots in
//! snapshots/, the whole loop); generated man page and completions; the filters refused
//! before the kernel is asked; the build without Python (`no_python`: run it with
//! `cargo test --no-default-features --test offline no_python`).
//!
//! One test binary of several modules: each file was a test binary of its own, and each
//! linked perfwatch and libpython. `cargo test --test offline NAME` runs one module's tests.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod filter_values;
mod generate;
mod no_python;
mod props;
mod symbols_props;
mod tracepoint_names;
mod tui_loop;
mod tui_snapshots;
