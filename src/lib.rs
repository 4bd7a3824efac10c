//! perfwatch: a live Linux event monitor.
//!
//! Per-CPU reader threads drain perf mmap rings ([`perf`]), decode every record into one
//! [`event::Event`] model and send batches over a bounded channel; a frontend consumes them:
//! `--plain`/`--json` ([`plain`]), or the TUI.

pub mod cli;
pub mod command;
pub mod event;
pub mod filter;
pub mod merge;
pub mod monitor;
pub mod pane;
pub mod perf;
pub mod plain;
pub mod run;
pub mod script;
pub mod signals;
pub mod stats;
pub mod text;
pub mod tui;
