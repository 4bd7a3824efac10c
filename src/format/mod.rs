//! The line formats, in one home: `--plain` ([`plain`]: perf's Python binding's shape) and
//! `--json` ([`json`]), with a call chain's part of each ([`chain`]). Every frontend and the
//! script stage write events through here; nothing here knows where a line goes.

pub mod chain;
pub mod json;
pub mod plain;

use std::io::{self, Write};

use crate::event::Event;
pub use json::{Address, push_address, write_json, write_json_in, write_json_with};

/// The line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// perf's Python binding: `cpu: 0, pid: 1, tid: 1 { type: fork, ... }`.
    Plain,
    /// One JSON object per line.
    Json,
}

/// Write one event as a line.
pub fn write_event(out: &mut impl Write, ev: &Event, format: Format) -> io::Result<()> {
    match format {
        Format::Plain => LINE.with_borrow_mut(|buf| {
            buf.clear();
            ev.write_line(buf);
            buf.push(b'\n');
            out.write_all(buf)
        }),
        Format::Json => write_json(out, ev),
    }
}

thread_local! {
    /// The line being formatted, reused so that no line allocates.
    static LINE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}
