//! `--json`: one JSON object per event.
//!
//! # Numbers in `--json`
//!
//! JSON readers that hold numbers as doubles (jq 1.6, JavaScript) keep integers exact only up
//! to 2^53; a kernel address such as `0xffffffff81e3c4a1` comes out of `jq .` as a different
//! address. So:
//!
//! - **addresses** are strings, `"0x"` and lower-case hex without padding (`"0x0"` for zero),
//!   as perf's own JSON writes them: `sample_ip`, mmap `start`, tracepoint fields that the
//!   format declares as pointers ([`Value::Hex`]), and every address field added later
//!   (call-chain frames, symbol addresses) through [`push_address`];
//! - **sizes, offsets and counts** (`len`, `pgoff`, `sample_period`, `lost`) and identifiers
//!   (`pid`, `sample_id`, `ino`, ...) stay numbers;
//! - **times** stay integer nanoseconds of the event clock (`sample_time`, fork/exit and
//!   throttle `time`), exact in the text. CLOCK_MONOTONIC passes 2^53 after 104.2 days of
//!   uptime, after which a double-based reader is off by a few nanoseconds (1 ns up to 208
//!   days, 2 ns up to 417; `-k realtime` is always past it, by up to 128 ns);
//!   `sample_time_s` gives the record's time in seconds with nine decimals (the unit of
//!   `time.monotonic()` and of perf script's time column), for readers and people that work in
//!   seconds.

use std::io::{self, Write};

use crate::callchain::{Callchain, FrameNames};
use crate::event::tracepoint::Value;
use crate::event::{Event, EventKind};
use crate::process::ProcessModel;

/// Append `v` as a JSON address: `"0x..."`, lower-case hex, `"0x0"` for zero.
pub(crate) fn push_address(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(b"\"0x");
    crate::text::push_hex_digits(out, v);
    out.push(b'"');
}

/// Append nanoseconds as seconds with nine decimals: the exact decimal text of the instant.
fn push_seconds(out: &mut Vec<u8>, ns: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(ns / 1_000_000_000).as_bytes());
    let mut frac = [b'0'; 10];
    frac[0] = b'.';
    let mut buf = itoa::Buffer::new();
    let digits = buf.format(ns % 1_000_000_000).as_bytes();
    frac[10 - digits.len()..].copy_from_slice(digits);
    out.extend_from_slice(&frac);
}

/// The members of one JSON line, appended to a buffer: `,"name":value`.
struct Members<'a> {
    out: &'a mut Vec<u8>,
    scratch: &'a mut Vec<u8>,
}

impl Members<'_> {
    fn key(&mut self, name: &str) -> &mut Self {
        self.out.extend_from_slice(b",\"");
        self.out.extend_from_slice(name.as_bytes());
        self.out.extend_from_slice(b"\":");
        self
    }
    fn uint(&mut self, name: &str, v: u64) -> &mut Self {
        self.key(name);
        self.out
            .extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
        self
    }
    fn int(&mut self, name: &str, v: i64) -> &mut Self {
        self.key(name);
        self.out
            .extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
        self
    }
    fn boolean(&mut self, name: &str, v: bool) -> &mut Self {
        self.key(name);
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        self
    }
    fn address(&mut self, name: &str, v: u64) -> &mut Self {
        self.key(name);
        push_address(self.out, v);
        self
    }
    fn text(&mut self, name: &str, raw: &[u8]) -> &mut Self {
        self.key(name);
        json_text(raw, self.out, self.scratch);
        self
    }
}

thread_local! {
    /// The line being formatted and a scratch buffer for escaped text, reused so that no
    /// line allocates.
    static JSON_LINE: std::cell::RefCell<(Vec<u8>, Vec<u8>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// One JSON object per line. Field names follow perf's Python binding; text from the
/// monitored system carries the same escaping as `--plain` (so `jq -r` never prints raw
/// control characters), inside a valid JSON string; addresses are hex strings (see the
/// module documentation). The line is built in a reused buffer and written at once.
pub fn write_json(out: &mut impl Write, ev: &Event) -> io::Result<()> {
    write_json_with(out, ev, &crate::callchain::NoNames)
}

/// As [`write_json`], with a call chain's frames named by `names`.
pub(crate) fn write_json_with(
    out: &mut impl Write,
    ev: &Event,
    names: &dyn FrameNames,
) -> io::Result<()> {
    write_json_line(out, ev, names, None)
}

/// As [`write_json`], with what the process model knows: an exec's command line (`argv`).
pub(crate) fn write_json_in(
    out: &mut impl Write,
    ev: &Event,
    tasks: &ProcessModel,
) -> io::Result<()> {
    write_json_line(out, ev, &crate::callchain::NoNames, Some(tasks))
}

fn write_json_line(
    out: &mut impl Write,
    ev: &Event,
    names: &dyn FrameNames,
    tasks: Option<&ProcessModel>,
) -> io::Result<()> {
    JSON_LINE.with_borrow_mut(|(line, scratch)| {
        line.clear();
        json_line(line, scratch, ev, names, tasks);
        out.write_all(line)
    })
}

fn json_line(
    line: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    ev: &Event,
    names: &dyn FrameNames,
    tasks: Option<&ProcessModel>,
) {
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(ev.record_type().name().as_bytes());
    line.push(b'"');
    let mut m = Members { out: line, scratch };
    m.uint("sample_cpu", ev.cpu as u64)
        .int("sample_pid", ev.pid as i32 as i64)
        .int("sample_tid", ev.tid as i32 as i64)
        .uint("sample_time", ev.time)
        .key("sample_time_s");
    push_seconds(m.out, ev.time);
    m.uint("sample_id", ev.id);
    match &ev.kind {
        EventKind::Sample { ip, period, .. } => {
            m.address("sample_ip", *ip);
            if let Some(s) = ev.sym() {
                // Names and binaries come escaped from the symbolizer: quoted, not escaped
                // again. The offset is a number (small, unlike an address).
                m.key("sym");
                json_str_or_null(s.name(), m.out);
                m.key("dso");
                json_str_or_null(Some(s.dso().name()), m.out);
                match s.offset() {
                    Some(off) => {
                        m.uint("sym_offset", off);
                    }
                    None => {
                        m.key("sym_offset").out.extend_from_slice(b"null");
                    }
                }
            }
            m.uint("sample_period", *period);
            json_event_members(&mut m, ev);
            if let Some(chain) = ev.callchain() {
                m.key("callchain");
                let names: &dyn FrameNames = match ev.names() {
                    Some(n) => n,
                    None => names,
                };
                write_chain(chain, names, m.out);
            }
        }
        EventKind::Fork(t) | EventKind::Exit(t) => {
            m.uint("pid", t.pid as u64)
                .uint("ppid", t.ppid as u64)
                .uint("tid", t.tid as u64)
                .uint("ptid", t.ptid as u64)
                .uint("time", t.time);
        }
        EventKind::Comm {
            pid,
            tid,
            comm,
            exec,
        } => {
            m.uint("pid", *pid as u64)
                .uint("tid", *tid as u64)
                .text("comm", comm)
                .boolean("exec", *exec);
            // An exec's command line (see crate::cmdline): null when the process was gone
            // first (or too many execs came that second to read them all); where it was
            // read, and how many bytes were cut (the last argument ends with the mark).
            if let (true, Some(tasks)) = (*exec, tasks) {
                m.key("argv");
                match tasks.exec_argv(*pid, ev.time).filter(|a| !a.is_gone()) {
                    Some(argv) => {
                        m.out.push(b'[');
                        for (i, arg) in argv.escaped_args().iter().enumerate() {
                            if i > 0 {
                                m.out.push(b',');
                            }
                            json_quoted(arg.as_bytes(), m.out);
                        }
                        m.out.push(b']');
                        m.key("argv_source");
                        json_quoted(argv.source().name().as_bytes(), m.out);
                        if argv.cut() > 0 {
                            m.uint("argv_cut", argv.cut());
                        }
                    }
                    None => m.out.extend_from_slice(b"null"),
                }
            }
        }
        EventKind::Mmap(mm) => {
            m.uint("pid", mm.pid as u64)
                .uint("tid", mm.tid as u64)
                .address("start", mm.start)
                .uint("len", mm.len)
                .uint("pgoff", mm.pgoff)
                .text("filename", &mm.filename);
            if let Some(x) = mm.mmap2 {
                m.uint("maj", x.maj as u64)
                    .uint("min", x.min as u64)
                    .uint("ino", x.ino)
                    .uint("ino_generation", x.ino_generation)
                    .uint("prot", x.prot as u64)
                    .uint("flags", x.flags as u64);
            }
        }
        EventKind::Lost { id, lost } => {
            m.uint("id", *id).uint("lost", *lost);
        }
        EventKind::LostSamples { lost } => {
            m.uint("lost", *lost);
        }
        EventKind::Throttle {
            time,
            id,
            stream_id,
            ..
        } => {
            m.uint("time", *time)
                .uint("id", *id)
                .uint("stream_id", *stream_id);
        }
        EventKind::Switch {
            out: sw_out,
            preempt,
            next_prev,
        } => {
            m.boolean("switch_out", *sw_out)
                .boolean("preempt", *preempt);
            if let Some((p, t)) = next_prev {
                m.int("next_prev_pid", *p as i32 as i64)
                    .int("next_prev_tid", *t as i32 as i64);
            }
        }
    }
    line.extend_from_slice(b"}\n");
}

/// A sample's `"event"` name and its tracepoint fields as JSON members: numbers as numbers,
/// pointers as addresses, text as (escaped) strings, arrays as lists, a field outside the
/// record as null.
fn json_event_members(m: &mut Members<'_>, ev: &Event) {
    use crate::event::members::{JSON_OWN, Member, visit_for};
    if let Some(name) = ev.event_name() {
        m.text("event", name.as_bytes());
    }
    // Fields named like one of the line's own keys go in a "fields" object
    // (crate::event::members); the others are members under their own names.
    let mut opened = false;
    let grouped = visit_for(&ev.kind, JSON_OWN, &mut |name, v, grouped| {
        if grouped && !opened {
            m.out.extend_from_slice(b",\"fields\":{\"");
            opened = true;
            m.out.extend_from_slice(name.as_bytes());
            m.out.extend_from_slice(b"\":");
        } else if grouped {
            m.out.push(b',');
            m.out.push(b'"');
            m.out.extend_from_slice(name.as_bytes());
            m.out.extend_from_slice(b"\":");
        } else {
            m.key(name);
        }
        let out = &mut *m.out;
        match v {
            Member::Field(Value::Int(n)) => {
                out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes())
            }
            Member::Field(Value::UInt(n)) => {
                out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes())
            }
            Member::Field(Value::Hex(n)) => push_address(out, n),
            Member::Field(Value::Str(s)) | Member::Text(s) => json_text(s, out, m.scratch),
            Member::Field(v @ Value::Array { .. }) => v.write_elements(out),
            Member::Field(Value::Missing) => out.extend_from_slice(b"null"),
        }
    });
    if grouped {
        m.out.push(b'}');
    }
}

/// Untrusted text as a JSON string: escaped as in `--plain` (no control characters are
/// left), then `"` and `\` escaped for JSON.
fn json_text(raw: &[u8], out: &mut Vec<u8>, scratch: &mut Vec<u8>) {
    scratch.clear();
    crate::text::escape_to(raw, scratch);
    json_quoted(scratch, out);
}

/// Text already escaped for a screen (one line, nothing raw), as a JSON string.
fn json_quoted(escaped: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in escaped {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b => out.push(b),
        }
    }
    out.push(b'"');
}

/// Append `--json`'s value of `"callchain"`, `[{"ip":"0x...","sym":...,"dso":...},...]`
/// (innermost first): addresses as the `--json` convention writes them
/// ([`push_address`]), `sym` the symbol's name and `dso` its binary when known,
/// else `null`.
pub(crate) fn write_chain(chain: &Callchain, names: &dyn FrameNames, out: &mut Vec<u8>) {
    out.push(b'[');
    for (i, f) in chain.frames().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"ip\":");
        push_address(out, f.ip);
        out.extend_from_slice(b",\"sym\":");
        let s = names.symbol(i, f);
        match s.and_then(|s| s.name()) {
            Some(name) => json_str(name, out),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"dso\":");
        match s {
            Some(s) => json_str(s.dso().name(), out),
            None => out.extend_from_slice(b"null"),
        }
        out.push(b'}');
    }
    out.push(b']');
}

/// Already-escaped text as a JSON string, or `null`.
pub(crate) fn json_str_or_null(s: Option<&str>, out: &mut Vec<u8>) {
    match s {
        Some(s) => json_str(s, out),
        None => out.extend_from_slice(b"null"),
    }
}

/// Already-escaped text (no control characters) as a JSON string.
fn json_str(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in s.as_bytes() {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b if b < 0x20 => {
                use std::io::Write;
                let _ = write!(out, "\\u{b:04x}");
            }
            b => out.push(b),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{MmapRecord, TaskRecord};

    fn json(ev: &Event) -> String {
        let mut v = Vec::new();
        write_json(&mut v, ev).unwrap();
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn json_fork_has_perf_field_names() {
        use crate::testkit::events as tk;
        let fork = EventKind::Fork(tk::task(13790, 13783, 7162303959197));
        let e = Event {
            id: 5,
            ..tk::event(0, 13783, 13783, 99, fork)
        };
        assert_eq!(
            json(&e),
            "{\"type\":\"fork\",\"sample_cpu\":0,\"sample_pid\":13783,\"sample_tid\":13783,\"sample_time\":99,\"sample_time_s\":0.000000099,\"sample_id\":5,\"pid\":13790,\"ppid\":13783,\"tid\":13790,\"ptid\":13783,\"time\":7162303959197}\n"
        );
    }

    #[test]
    fn json_tracepoint_fields_are_typed() {
        use crate::testkit::tracepoints as craft;
        let desc = craft::desc(1, "sched:sched_switch", craft::SCHED_SWITCH);
        let raw = craft::sched_switch(b"ba\"sh\x1b", -3, 2, b"swapper/1", 0);
        let e = Event {
            cpu: 1,
            pid: 5,
            tid: 5,
            time: 1,
            id: 9,
            kind: craft::sample(desc, 0xffff, 1, raw),
        };
        let v: serde_json::Value = serde_json::from_str(&json(&e)).unwrap();
        assert_eq!(v["event"], "sched:sched_switch");
        assert_eq!(v["prev_comm"], "ba\"sh\\x1b");
        assert_eq!(v["prev_pid"], -3);
        assert_eq!(v["prev_state"], 2);
        assert_eq!(v["next_comm"], "swapper/1");
        assert_eq!(v["next_pid"], 0);
        assert!(v.get("common_pid").is_none(), "common_* left out");
    }

    #[test]
    fn json_strings_are_escaped_and_valid() {
        let e = Event {
            cpu: 1,
            pid: u32::MAX,
            tid: 2,
            time: 1,
            id: 0,
            kind: EventKind::Mmap(Box::new(MmapRecord {
                pid: 2,
                tid: 2,
                start: 1,
                len: 2,
                pgoff: 3,
                filename: (*b"/tmp/\"quoted\"\\\x1b[2J\n\xff").into(),
                mmap2: Some(crate::testkit::events::mmap2_extra(4, 5, 2)),
            })),
        };
        let line = json(&e);
        assert_eq!(line.matches('\n').count(), 1);
        assert!(!line.contains('\x1b'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["filename"], "/tmp/\"quoted\"\\\\\\x1b[2J\\n\\xff");
        assert_eq!(v["sample_pid"], -1);
        assert_eq!(v["ino"], 4);
    }

    /// One record of every type (both forms of MMAP and SWITCH), with every address at the top
    /// of the address space, where a double-based JSON reader would round it.
    fn one_of_each() -> Vec<Event> {
        let top = u64::MAX - 0x5e;
        let task = TaskRecord {
            pid: 2,
            ppid: 1,
            tid: 2,
            ptid: 1,
            time: top,
        };
        let mmap = |mmap2| {
            EventKind::Mmap(Box::new(MmapRecord {
                pid: 2,
                tid: 2,
                start: top,
                len: 0x1000,
                pgoff: 0x2000,
                filename: (*b"/bin/x").into(),
                mmap2,
            }))
        };
        let kinds = vec![
            EventKind::sample(top, 1, 1),
            pointer_tracepoint_sample(top),
            EventKind::Fork(task),
            EventKind::Exit(task),
            EventKind::Comm {
                pid: 2,
                tid: 2,
                comm: (*b"x").into(),
                exec: true,
            },
            mmap(None),
            mmap(Some(crate::testkit::events::mmap2_extra(4, 5, 2))),
            EventKind::Lost { id: 7, lost: 3 },
            EventKind::LostSamples { lost: 3 },
            EventKind::Throttle {
                throttled: true,
                time: top,
                id: 7,
                stream_id: 7,
            },
            EventKind::Throttle {
                throttled: false,
                time: top,
                id: 7,
                stream_id: 7,
            },
            EventKind::Switch {
                out: true,
                preempt: false,
                next_prev: None,
            },
            EventKind::Switch {
                out: false,
                preempt: true,
                next_prev: Some((3, 3)),
            },
        ];
        // Every variant is here: a new one fails to compile until it is added.
        let mut seen = [false; 9];
        for k in &kinds {
            seen[match k {
                EventKind::Sample { .. } => 0,
                EventKind::Fork(_) => 1,
                EventKind::Exit(_) => 2,
                EventKind::Comm { .. } => 3,
                EventKind::Mmap(_) => 4,
                EventKind::Lost { .. } => 5,
                EventKind::LostSamples { .. } => 6,
                EventKind::Throttle { .. } => 7,
                EventKind::Switch { .. } => 8,
            }] = true;
        }
        assert!(seen.iter().all(|&s| s), "{seen:?}");
        kinds
            .into_iter()
            .map(|kind| Event {
                cpu: 1,
                pid: 2,
                tid: 2,
                time: top,
                id: 7,
                kind,
            })
            .collect()
    }

    /// A tracepoint sample whose format declares a pointer (`const void * ptr`, as
    /// kmem:kmalloc does) and a size.
    fn pointer_tracepoint_sample(ptr: u64) -> EventKind {
        use crate::testkit::tracepoints::{self as craft, format_file};
        const KMALLOC: &str = format_file!(
            "kmalloc",
            "500",
            "
\tfield:const void * ptr;\toffset:8;\tsize:8;\tsigned:0;
\tfield:size_t bytes_alloc;\toffset:16;\tsize:8;\tsigned:0;

print fmt: \"ptr=%p bytes_alloc=%zu\", REC->ptr, REC->bytes_alloc
"
        );
        let desc = craft::desc(1, "kmem:kmalloc", KMALLOC);
        let mut raw = Vec::new();
        craft::common(&mut raw, 500, 2);
        raw.extend_from_slice(&ptr.to_ne_bytes());
        raw.extend_from_slice(&64u64.to_ne_bytes());
        raw.extend_from_slice(&[0; 4]);
        craft::sample(desc, ptr, 1, raw)
    }

    /// The address fields of each record type (`ptr`: the pointer of the tracepoint sample);
    /// everything else that is not text is a number or a boolean.
    const ADDRESSES: &[(&str, &[&str])] =
        &[("sample", &["sample_ip", "ptr"]), ("mmap", &["start"])];
    const OPTIONAL: &[&str] = &["ptr"];
    const TEXT: &[&str] = &["type", "comm", "filename", "event"];

    #[test]
    fn every_address_field_of_every_record_type_is_a_hex_string() {
        let top = u64::MAX - 0x5e;
        for ev in one_of_each() {
            let line = json(&ev);
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            let ty = ev.record_type().name();
            let addresses = ADDRESSES
                .iter()
                .find(|(t, _)| *t == ty)
                .map_or(&[][..], |(_, a)| a);
            for (name, value) in v.as_object().unwrap() {
                if addresses.contains(&name.as_str()) {
                    assert_eq!(value, &format!("0x{top:x}"), "{ty}.{name}: {line}");
                } else if TEXT.contains(&name.as_str()) {
                    assert!(value.is_string(), "{ty}.{name}: {line}");
                } else {
                    assert!(
                        value.is_number() || value.is_boolean(),
                        "{ty}.{name} is an address? list it in ADDRESSES: {line}"
                    );
                }
            }
            for a in addresses.iter().filter(|a| !OPTIONAL.contains(a)) {
                assert!(v.get(a).is_some(), "{ty} has no {a}: {line}");
            }
            if v.get("event").is_some() {
                assert!(v.get("ptr").is_some(), "{line}");
                assert_eq!(v["bytes_alloc"], 64, "a size stays a number: {line}");
            }
        }
        let zero = Event {
            kind: EventKind::sample(0, 1, 0),
            ..one_of_each().remove(0)
        };
        assert!(json(&zero).contains("\"sample_ip\":\"0x0\""));
    }

    #[test]
    fn addresses_are_lower_case_hex_strings_without_padding() {
        for (v, want) in [
            (0, "\"0x0\""),
            (1, "\"0x1\""),
            (0xf, "\"0xf\""),
            (0x10, "\"0x10\""),
            (0xffffffff81e3c4a1, "\"0xffffffff81e3c4a1\""),
            (u64::MAX, "\"0xffffffffffffffff\""),
        ] {
            let mut b = Vec::new();
            push_address(&mut b, v);
            assert_eq!(String::from_utf8(b).unwrap(), want);
        }
    }

    /// Times are exact integers in the text, with the seconds beside them; times above 2^53
    /// (104 days of uptime) keep every digit.
    #[test]
    fn times_are_integer_nanoseconds_and_decimal_seconds() {
        for (ns, secs) in [
            (0, "0.000000000"),
            (99, "0.000000099"),
            (7_162_303_959_197, "7162.303959197"),
            ((1 << 53) + 1, "9007199.254740993"),
            (u64::MAX, "18446744073.709551615"),
        ] {
            let ev = Event {
                time: ns,
                ..one_of_each().remove(0)
            };
            let line = json(&ev);
            assert!(
                line.contains(&format!("\"sample_time\":{ns},\"sample_time_s\":{secs},")),
                "{line}"
            );
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            assert_eq!(v["sample_time"].as_u64(), Some(ns));
        }
    }
}
