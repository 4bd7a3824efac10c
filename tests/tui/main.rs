//! The TUI in a real pseudo-terminal (portable-pty, read back through vt100): keys, sizes,
//! signals, the terminal restored on every way out, and its command-line refusals.
//!
//! One test binary of several modules: each file was a test binary of its own, and each
//! linked perfwatch and libpython. `cargo test --test tui NAME` runs one module's tests.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod tui_cli;
mod tui_pty;
mod tui_sizes;
