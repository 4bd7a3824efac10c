//! The line formats, in one home: `--plain` ([`plain`]: perf's Python binding's shape),
//! `--json` ([`json`]) and `--format perf` ([`perf`]: perf script's default lines), a call
//! chain's part included in each. Every frontend writes events through here; nothing here
//! knows where a line goes.

pub mod json;
pub mod perf;
pub mod plain;

use std::io::{self, Write};

use crate::event::Event;
pub use json::write_json;
pub(crate) use json::write_json_in;

/// The line format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Format {
    /// perf's Python binding: `cpu: 0, pid: 1, tid: 1 { type: fork, ... }`.
    Plain,
    /// One JSON object per line.
    Json,
    /// perf script's default lines, with the session's choices of fields and widths.
    Perf(std::sync::Arc<perf::PerfStyle>),
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
        // Without the process model every thread is `:TID`, as perf names one it never saw.
        Format::Perf(style) => LINE.with_borrow_mut(|buf| {
            buf.clear();
            perf::write_perf(buf, ev, &style, None);
            out.write_all(buf)
        }),
    }
}

thread_local! {
    /// The line being formatted, reused so that no line allocates.
    static LINE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callchain::Callchain;
    use crate::callchain::{CONTEXT_USER, Frame, FrameNames, NoNames};
    use crate::symbols::Symbolized;

    fn chain(e: &[u64]) -> Callchain {
        Callchain::new(e.to_vec())
    }

    #[test]
    fn formats_without_names_show_addresses() {
        let c = chain(&[CONTEXT_USER, 0x40_1136, 0x40_1156, 0]);
        let mut out = Vec::new();
        plain::write_plain(&c, &NoNames, &mut out);
        assert_eq!(out, b"callchain: 0x401136 <- 0x401156 <- 0");
        out.clear();
        json::write_chain(&c, &NoNames, &mut out);
        let v: serde_json::Value =
            serde_json::from_slice(&[b"{\"callchain\":".as_slice(), &out, b"}"].concat()).unwrap();
        assert_eq!(v["callchain"][0]["ip"], "0x401136");
        assert_eq!(v["callchain"][2]["ip"], "0x0");
        assert!(v["callchain"][1]["sym"].is_null() && v["callchain"][1]["dso"].is_null());
        assert_eq!(v["callchain"].as_array().unwrap().len(), 3);
        out.clear();
        plain::write_plain(&chain(&[]), &NoNames, &mut out);
        assert_eq!(out, b"callchain:");
    }

    #[test]
    fn frames_are_named_by_what_the_glue_supplies() {
        use crate::symbols::{Dso, DsoKind, Symbol, SymbolKey};
        struct Names(Vec<Option<Symbolized>>);
        impl FrameNames for Names {
            fn symbol(&self, i: usize, _: Frame) -> Option<&Symbolized> {
                self.0.get(i)?.as_ref()
            }
        }
        let dso = Dso::new("/usr/local/bin/sp\\\"in", DsoKind::File);
        let sym = |name: &str, start, off| {
            Symbolized::new(
                Symbol::new(Some(name.into()), dso.clone(), SymbolKey { dso: 1, start }),
                off,
            )
        };
        let lib = Dso::new("/usr/lib/liblzma.so.5", DsoKind::File);
        let unnamed = Symbolized::unknown(&Symbol::unknown(lib, 2));
        let names = Names(vec![
            Some(sym("hot_b", 0x1120, 0x16)),
            Some(sym("main", 0x1000, 0x2a)),
            None,
            Some(unnamed),
        ]);
        let c = chain(&[
            CONTEXT_USER,
            0x1136,
            0x102a,
            0x7f00_0000_0001,
            0x7f00_0000_2000,
        ]);
        let mut out = Vec::new();
        plain::write_plain(&c, &names, &mut out);
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            "callchain: hot_b+0x16 <- main+0x2a <- 0x7f0000000001 <- [liblzma.so.5]"
        );
        out.clear();
        out.extend_from_slice(b"{\"callchain\":");
        json::write_chain(&c, &names, &mut out);
        out.push(b'}');
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["callchain"][0]["sym"], "hot_b");
        assert_eq!(v["callchain"][1]["dso"], "/usr/local/bin/sp\\\"in");
        assert_eq!(v["callchain"][1]["ip"], "0x102a");
        assert!(v["callchain"][2]["sym"].is_null());
        // An unnamed frame keeps its binary in JSON, with no name.
        assert!(v["callchain"][3]["sym"].is_null());
        assert_eq!(v["callchain"][3]["dso"], "/usr/lib/liblzma.so.5");
    }
}
