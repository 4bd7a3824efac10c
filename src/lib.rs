//! perfwatch: a live Linux event monitor.
//!
//! Per-CPU reader threads drain perf mmap rings ([`perf`]), decode every record into one
//! [`event::Event`] model and send batches over a bounded channel; a frontend consumes them:
//! `--plain`/`--json` ([`plain`]), or the TUI.
//!
//! `unsafe` lives in [`sys`] (safe wrappers of the system calls); the files that still allow it
//! themselves are listed there, and every other file is denied it.
#![deny(unsafe_code)]

pub(crate) mod agent;
pub mod callchain;
pub(crate) mod callgraph;
pub mod cli;
pub mod clock;
pub mod cmdline;
pub mod command;
pub mod embed;
pub mod event;
pub(crate) mod exec_table;
pub mod filter;
pub(crate) mod filter_fields;
pub mod folded;
pub mod format;
pub mod frontend;
pub mod generate;

pub(crate) mod metrics;
pub mod monitor;
pub mod order;
pub(crate) mod output;
pub mod pane;
pub mod perf;
pub mod pipeline;
pub(crate) mod pprof;
pub mod process;
pub(crate) mod record_file;
pub(crate) mod record_out;
pub mod run;
pub mod script;
pub(crate) mod signals;
pub mod stats;
pub mod stop;
pub(crate) mod symbolize;
pub mod symbols;
#[allow(unsafe_code)]
pub(crate) mod sys;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
pub mod text;
pub mod unwind;
pub mod unwinding;

/// The text of a panic payload.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// Test hook, in debug builds only: panic here when `PERFWATCH_DEBUG_PANIC` names `point`
/// (`reader`, `frontend`), so that tests can check what a bug in a thread does to the
/// terminal, the summary and the exit status. Release builds compile it to nothing.
#[inline]
pub(crate) fn debug_panic_point(point: &str) {
    if cfg!(debug_assertions) && std::env::var("PERFWATCH_DEBUG_PANIC").is_ok_and(|v| v == point) {
        panic!("PERFWATCH_DEBUG_PANIC={point}");
    }
}

/// A unit test that cannot run here says so where a plain `cargo test` shows it: libtest
/// captures `eprintln!` (and shows it only for a failing test), so this writes to the real
/// stderr, in one write, as the integration tests' `skip!` does.
#[cfg(test)]
pub(crate) fn skip_test(test: &str, why: &str) {
    use std::io::Write;
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("\nSKIPPED {test}: {why}\n").as_bytes());
}
