//! `--plain`: an event as perf's Python binding (and its `twatch.py` example) prints it,
//! `cpu: 0, pid: 1, tid: 1 { type: fork, pid: 2, ppid: 1, tid: 2, ptid: 1, time: 123}`.
//! [`Event::body`] is the `{ ... }` part alone, which is what `str(event)` gives in Python.
//! `Display` for [`Event`] is the whole line.

use std::fmt;

use crate::callchain::{Callchain, FrameNames, NoNames};
use crate::event::{Event, EventKind};
use crate::text::push_c_hex;

impl Event {
    /// The `{ type: ..., ... }` part, as `str(event)` in perf's Python binding.
    pub fn body(&self) -> Body<'_> {
        Body(&self.kind)
    }
}

/// Display adapter for the `{ ... }` part of an event.
pub struct Body<'a>(&'a EventKind);

/// Appends the pieces of a line to a byte buffer: integers through `itoa`, untrusted text
/// through [`crate::text::escape_to`]. `--plain` writes hundreds of thousands of lines a
/// second, which `core::fmt` would make the bottleneck.
struct Line<'a>(&'a mut Vec<u8>);

impl Line<'_> {
    #[inline]
    fn s(&mut self, s: &str) -> &mut Self {
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    #[inline]
    fn u(&mut self, v: impl itoa::Integer) -> &mut Self {
        self.0
            .extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
        self
    }
    /// `%#x` as C prints it: `0` for zero, `0x...` otherwise.
    #[inline]
    fn alt_hex(&mut self, v: u64) -> &mut Self {
        crate::text::push_c_hex(self.0, v);
        self
    }
    /// Untrusted text: escaped, and quoted when it holds a separator of the line.
    #[inline]
    fn text(&mut self, t: &[u8]) -> &mut Self {
        crate::text::push_plain_value(t, self.0);
        self
    }
}

impl EventKind {
    /// Append the `{ type: ..., ... }` text, as perf's Python binding prints it.
    pub fn write_body(&self, buf: &mut Vec<u8>) {
        self.write_body_with(buf, &NoNames)
    }

    /// As [`EventKind::write_body`], with a call chain's frames named by `names`.
    pub(crate) fn write_body_with(&self, buf: &mut Vec<u8>, names: &dyn FrameNames) {
        let mut w = Line(buf);
        match self {
            EventKind::Sample {
                ip,
                period,
                event,
                raw,
                callchain,
                sym,
                ..
            } => {
                w.s("{ type: sample, ");
                if event.show_name {
                    w.s("event: ").s(event.name).s(", ");
                }
                w.s("ip: ").alt_hex(*ip);
                if let Some(s) = sym.as_ref().and_then(|n| n.sym()) {
                    // Names and binaries are escaped by the symbolizer; a name or binary
                    // that holds a separator is quoted.
                    w.s(", sym: ");
                    push_plain_symbol(s, w.0);
                    w.s(", dso: ");
                    push_plain_dso(s.dso(), w.0);
                }
                w.s(", period: ").u(*period);
                if event.format.is_some() && raw.is_some() {
                    self.write_tracepoint_members(&mut w);
                }
                if let Some(chain) = callchain {
                    w.s(", ");
                    let names: &dyn FrameNames = match sym {
                        Some(n) => &**n,
                        None => names,
                    };
                    write_plain(chain, names, w.0);
                }
                w.s(" }");
            }
            EventKind::Fork(t) | EventKind::Exit(t) => {
                let ty = if matches!(self, EventKind::Fork(_)) {
                    "{ type: fork, pid: "
                } else {
                    "{ type: exit, pid: "
                };
                // No space before the closing brace: this is how perf prints it.
                w.s(ty)
                    .u(t.pid)
                    .s(", ppid: ")
                    .u(t.ppid)
                    .s(", tid: ")
                    .u(t.tid)
                    .s(", ptid: ")
                    .u(t.ptid);
                w.s(", time: ").u(t.time).s("}");
            }
            EventKind::Comm { pid, tid, comm, .. } => {
                w.s("{ type: comm, pid: ")
                    .u(*pid)
                    .s(", tid: ")
                    .u(*tid)
                    .s(", comm: ")
                    .text(comm)
                    .s(" }");
            }
            EventKind::Mmap(m) => {
                w.s("{ type: mmap, pid: ")
                    .u(m.pid)
                    .s(", tid: ")
                    .u(m.tid)
                    .s(", start: ")
                    .alt_hex(m.start);
                w.s(", length: ")
                    .alt_hex(m.len)
                    .s(", offset: ")
                    .alt_hex(m.pgoff);
                w.s(", filename: ").text(&m.filename).s(" }");
            }
            EventKind::Lost { id, lost } => {
                w.s("{ type: lost, id: ")
                    .alt_hex(*id)
                    .s(", lost: ")
                    .alt_hex(*lost)
                    .s(" }");
            }
            EventKind::LostSamples { lost } => {
                w.s("{ type: lost_samples, lost: ").u(*lost).s(" }");
            }
            EventKind::Throttle {
                throttled,
                time,
                id,
                stream_id,
            } => {
                w.s(if *throttled {
                    "{ type: throttle, time: "
                } else {
                    "{ type: unthrottle, time: "
                });
                w.u(*time)
                    .s(", id: ")
                    .u(*id)
                    .s(", stream_id: ")
                    .u(*stream_id)
                    .s(" }");
            }
            EventKind::Switch { out, next_prev, .. } => {
                let (pid, tid) = next_prev.unwrap_or((u32::MAX, u32::MAX));
                w.s("{ type: context_switch, next_prev_pid: ")
                    .u(pid as i32)
                    .s(", next_prev_tid: ")
                    .u(tid as i32);
                w.s(", switch_out: ").u(*out as u8).s(" }");
            }
        }
    }
}

impl EventKind {
    /// A tracepoint sample's fields (and their print fmt text) after the sample's own
    /// members; those named like one of them in a `fields: { ... }` group ([`crate::event::members`]).
    fn write_tracepoint_members(&self, w: &mut Line<'_>) {
        use crate::event::members::{Member, PLAIN_OWN, visit_for};
        let mut opened = false;
        let grouped = visit_for(self, PLAIN_OWN, &mut |name, m, grouped| {
            if grouped && !opened {
                w.s(", fields: { ");
                opened = true;
            } else {
                w.s(", ");
            }
            w.s(name).s(": ");
            match m {
                Member::Field(v) => v.write_plain(w.0),
                Member::Text(t) => {
                    w.text(t);
                }
            }
        });
        if grouped {
            w.s(" }");
        }
    }
}

impl Event {
    /// Append the whole `--plain` line (without the newline), as `twatch.py` prints it.
    pub fn write_line(&self, buf: &mut Vec<u8>) {
        self.write_line_with(buf, &NoNames)
    }

    /// As [`Event::write_line`], with a call chain's frames named by `names`.
    pub(crate) fn write_line_with(&self, buf: &mut Vec<u8>, names: &dyn FrameNames) {
        if let EventKind::Fork(t) | EventKind::Exit(t) = &self.kind {
            return self.write_task_line(t, buf);
        }
        // sample_pid/sample_tid are signed ints in perf's binding (-1 when unknown).
        Line(buf)
            .s("cpu: ")
            .u(self.cpu)
            .s(", pid: ")
            .u(self.pid as i32)
            .s(", tid: ")
            .u(self.tid as i32)
            .s(" ");
        self.kind.write_body_with(buf, names);
    }
}

impl Event {
    /// A FORK or EXIT line, the fork storm's records: built on the stack and copied into
    /// `buf` once, each distinct number formatted once (a process's pid and tid, the parent's
    /// pid in the header and in the body are usually the same numbers). Callgrind, 100 000
    /// lines: 716 instructions a line through [`Line`], 560 this way (benches/line_writers.py
    /// has the live figure).
    fn write_task_line(&self, t: &crate::event::TaskRecord, buf: &mut Vec<u8>) {
        // sample_pid/sample_tid are signed ints in perf's binding (-1 when unknown).
        let pid = Digits::signed(self.pid as i32);
        let tid = if self.tid == self.pid {
            pid
        } else {
            Digits::signed(self.tid as i32)
        };
        let ppid = if t.ppid == self.pid && (self.pid as i32) >= 0 {
            pid
        } else {
            Digits::new(t.ppid.into())
        };
        let child = Digits::new(t.pid.into());
        let child_tid = if t.tid == t.pid {
            child
        } else {
            Digits::new(t.tid.into())
        };
        let ptid = if t.ptid == t.ppid {
            ppid
        } else {
            Digits::new(t.ptid.into())
        };
        let mut l = StackLine::new();
        l.s(b"cpu: ")
            .d(&Digits::new(self.cpu.into()))
            .s(b", pid: ")
            .d(&pid)
            .s(b", tid: ")
            .d(&tid);
        // No space before the closing brace: this is how perf prints it.
        l.s(if matches!(self.kind, EventKind::Fork(_)) {
            b" { type: fork, pid: "
        } else {
            b" { type: exit, pid: "
        });
        l.d(&child)
            .s(b", ppid: ")
            .d(&ppid)
            .s(b", tid: ")
            .d(&child_tid)
            .s(b", ptid: ")
            .d(&ptid)
            .s(b", time: ")
            .d(&Digits::new(t.time))
            .s(b"}");
        buf.extend_from_slice(l.bytes());
    }
}

/// A number's decimal text, left-aligned in a fixed array, so that it is appended with a
/// copy of constant length (inlined) rather than a `memcpy` call of its own length.
#[derive(Clone, Copy)]
struct Digits {
    b: [u8; DIGITS],
    n: usize,
}

/// Room for any u64 or i32 in decimal (20 bytes), rounded up.
const DIGITS: usize = 24;

impl Digits {
    #[inline]
    fn new(v: u64) -> Digits {
        Digits::of(itoa::Buffer::new().format(v).as_bytes())
    }
    #[inline]
    fn signed(v: i32) -> Digits {
        Digits::of(itoa::Buffer::new().format(v).as_bytes())
    }
    #[inline]
    fn of(s: &[u8]) -> Digits {
        let mut b = [0u8; DIGITS];
        let n = s.len().min(DIGITS);
        b[..n].copy_from_slice(&s[..n]);
        Digits { b, n }
    }
}

/// A line of bounded length (a FORK or EXIT line is at most about 175 bytes) built in a
/// stack array. A piece that would not fit is left out, which cannot happen for the pieces
/// [`Event::write_task_line`] writes.
struct StackLine {
    buf: [u8; STACK_LINE],
    len: usize,
}

/// A FORK/EXIT line at its widest, plus a [`Digits`] copied whole at the end.
const STACK_LINE: usize = 224;

impl StackLine {
    #[inline]
    fn new() -> StackLine {
        StackLine {
            buf: [0; STACK_LINE],
            len: 0,
        }
    }

    /// A constant piece: a copy of constant length.
    #[inline(always)]
    fn s<const N: usize>(&mut self, s: &[u8; N]) -> &mut Self {
        if let Some(dst) = self.buf.get_mut(self.len..self.len + N) {
            dst.copy_from_slice(s);
            self.len += N;
        }
        self
    }

    /// A number: its whole array copied, the length advanced by its digits only.
    #[inline(always)]
    fn d(&mut self, d: &Digits) -> &mut Self {
        if let Some(dst) = self.buf.get_mut(self.len..self.len + DIGITS) {
            dst.copy_from_slice(&d.b);
            self.len += d.n;
        }
        self
    }

    #[inline]
    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len.min(STACK_LINE)]
    }
}

/// Write bytes produced by the writers above (always UTF-8) to a formatter.
fn write_utf8(f: &mut fmt::Formatter<'_>, buf: &[u8]) -> fmt::Result {
    f.write_str(std::str::from_utf8(buf).map_err(|_| fmt::Error)?)
}

impl fmt::Display for Body<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = Vec::with_capacity(128);
        self.0.write_body(&mut buf);
        write_utf8(f, &buf)
    }
}

impl fmt::Display for Event {
    /// The whole `--plain` line (without the newline).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = Vec::with_capacity(160);
        self.write_line(&mut buf);
        write_utf8(f, &buf)
    }
}

/// Append `--plain`'s `callchain: a <- b <- c` (innermost first): each frame as its symbol
/// (`hot_b+0x16`) when `names` knows it, a frame in a binary without a name for it as that
/// binary (`[liblzma.so.5.4.1]`, as folded stacks name it; `[unknown]` outside any mapping),
/// else its address. Symbol names are escaped by the symbolizer already.
pub fn write_plain(chain: &Callchain, names: &dyn FrameNames, out: &mut Vec<u8>) {
    out.extend_from_slice(b"callchain:");
    for (i, f) in chain.frames().enumerate() {
        out.extend_from_slice(if i == 0 { b" " } else { b" <- " });
        match names.symbol(i, f) {
            Some(s) if s.is_known() => push_plain_symbol(s, out),
            // Unknown: the binary's label ([`crate::symbols::Symbol::frame_name`]).
            Some(s) if !s.dso().plain_quoted().1 => {
                out.extend_from_slice(s.dso().unnamed().as_bytes())
            }
            // The binary knows its label is quoted: no scan per frame.
            Some(s) => {
                out.push(b'"');
                crate::text::push_quote_escaped(s.dso().unnamed().as_bytes(), out);
                out.push(b'"');
            }
            None => push_c_hex(out, f.ip),
        }
    }
}

/// A symbol as `--plain` writes it, `name+0xOFFSET` (escaped by the symbolizer), in double
/// quotes when the name holds a separator of the line ([`crate::text::push_plain_escaped`]).
pub fn push_plain_symbol(s: &crate::symbols::Symbolized, out: &mut Vec<u8>) {
    // The common case without `core::fmt` nor a scan of the name: the symbol knows whether
    // it is quoted.
    if let (Some(name), Some(off)) = (s.name(), s.offset()) {
        let quoted = s.symbol().plain_quoted();
        if quoted {
            // What `push_plain_escaped` writes for a value that needs quotes: each `"` as
            // `\"` (the `+0xOFF` suffix holds none). C++ names (`f(int, char)`) take this
            // path: no `core::fmt`, no scan, no temporary copy of the line's tail.
            out.push(b'"');
            crate::text::push_quote_escaped(name.as_bytes(), out);
        } else {
            out.extend_from_slice(name.as_bytes());
        }
        out.extend_from_slice(b"+0x");
        crate::text::push_hex_digits(out, off);
        if quoted {
            out.push(b'"');
        }
        return;
    }
    if s.name().is_none() {
        // `sym: [unknown]`, which holds no separator.
        out.extend_from_slice(crate::symbols::UNKNOWN.as_bytes());
        return;
    }
    push_plain_symbol_slow(s, out)
}

/// [`push_plain_symbol`] as it always was: formatted, then scanned for separators.
fn push_plain_symbol_slow(s: &crate::symbols::Symbolized, out: &mut Vec<u8>) {
    let start = out.len();
    {
        use std::io::Write;
        let _ = write!(out, "{s}");
    }
    if crate::text::needs_quotes(&out[start..]) {
        let shown = out.split_off(start);
        crate::text::push_plain_escaped(&shown, out);
    }
}

/// A binary's (escaped) name as a `--plain` value: quoted when the binary says so.
fn push_plain_dso(dso: &crate::symbols::Dso, out: &mut Vec<u8>) {
    if dso.plain_quoted().0 {
        crate::text::push_plain_escaped(dso.name().as_bytes(), out);
    } else {
        out.extend_from_slice(dso.name().as_bytes());
    }
}

/// Append already escaped `text` (an unnamed frame's label, `[libfoo.so]`) as a `--plain`
/// value: quoted when it holds the line's separators, as a named frame is. The reference
/// the tests hold `write_plain`'s unnamed frames to (it decides from the binary's flag).
#[cfg(test)]
fn push_plain_text(text: &[u8], out: &mut Vec<u8>) {
    if crate::text::needs_quotes(text) {
        crate::text::push_plain_escaped(text, out);
    } else {
        out.extend_from_slice(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventKind, TaskRecord};

    fn ev(cpu: u32, pid: u32, tid: u32, kind: EventKind) -> Event {
        Event {
            cpu,
            pid,
            tid,
            time: 0,
            id: 0,
            kind,
        }
    }

    #[test]
    fn fork_line_matches_perf_python_binding() {
        let e = ev(
            0,
            13783,
            13783,
            EventKind::Fork(crate::testkit::events::task(13790, 13783, 7162303959197)),
        );
        assert_eq!(
            e.to_string(),
            "cpu: 0, pid: 13783, tid: 13783 { type: fork, pid: 13790, ppid: 13783, tid: 13790, ptid: 13783, time: 7162303959197}"
        );
    }

    #[test]
    fn fork_and_exit_lines_at_every_width() {
        // The stack-built lines against core::fmt, at each number's edges, with the numbers
        // that are usually equal (pid and tid, parent in the header and the body) equal or not.
        let mut values: Vec<u64> = vec![0, u64::from(u32::MAX), u64::from(u32::MAX >> 1), u64::MAX];
        let mut p = 1u64;
        while let Some(next) = p.checked_mul(10) {
            values.extend([p - 1, p, p + 1]);
            p = next;
        }
        for (i, &v) in values.iter().enumerate() {
            let a = v as u32;
            let b = values[(i * 7 + 3) % values.len()] as u32;
            for (same, fork) in [(true, true), (false, true), (true, false), (false, false)] {
                let t = TaskRecord {
                    pid: b,
                    ppid: a,
                    tid: if same { b } else { b.wrapping_add(1) },
                    ptid: if same { a } else { a.rotate_left(3) },
                    time: v,
                };
                let kind = if fork {
                    EventKind::Fork(t)
                } else {
                    EventKind::Exit(t)
                };
                let e = ev(b % 4, a, if same { a } else { b }, kind);
                let want = format!(
                    "cpu: {}, pid: {}, tid: {} {{ type: {}, pid: {}, ppid: {}, tid: {}, ptid: {}, time: {}}}",
                    b % 4,
                    a as i32,
                    if same { a } else { b } as i32,
                    if fork { "fork" } else { "exit" },
                    t.pid,
                    t.ppid,
                    t.tid,
                    t.ptid,
                    t.time
                );
                assert_eq!(e.to_string(), want);
            }
        }
    }

    #[test]
    fn comm_line_matches_perf_python_binding() {
        let e = ev(
            0,
            13790,
            13790,
            EventKind::Comm {
                pid: 13790,
                tid: 13790,
                comm: (*b"bash").into(),
                exec: true,
            },
        );
        assert_eq!(
            e.to_string(),
            "cpu: 0, pid: 13790, tid: 13790 { type: comm, pid: 13790, tid: 13790, comm: bash }"
        );
    }

    #[test]
    fn mmap_line_matches_perf_python_binding() {
        let e = crate::testkit::events::mmap(
            1,
            0,
            13790,
            0x7ff18040b000,
            0x156000,
            0x26000,
            b"/usr/lib/x86_64-linux-gnu/libc.so.6",
        );
        assert_eq!(
            e.to_string(),
            "cpu: 1, pid: 13790, tid: 13790 { type: mmap, pid: 13790, tid: 13790, start: 0x7ff18040b000, length: 0x156000, offset: 0x26000, filename: /usr/lib/x86_64-linux-gnu/libc.so.6 }"
        );
    }

    #[test]
    fn zero_offset_prints_as_c_does() {
        let e = crate::testkit::events::mmap(1, 0, 2137, 0x7f118073e000, 0x2000, 0, b"[vdso]");
        assert_eq!(
            e.to_string(),
            "cpu: 1, pid: 2137, tid: 2137 { type: mmap, pid: 2137, tid: 2137, start: 0x7f118073e000, length: 0x2000, offset: 0, filename: [vdso] }"
        );
    }

    #[test]
    fn other_types() {
        let exit = ev(
            0,
            2136,
            2136,
            EventKind::Exit(TaskRecord {
                pid: 2136,
                ppid: 2132,
                tid: 2136,
                ptid: 2132,
                time: 114526126517,
            }),
        );
        assert_eq!(
            exit.to_string(),
            "cpu: 0, pid: 2136, tid: 2136 { type: exit, pid: 2136, ppid: 2132, tid: 2136, ptid: 2132, time: 114526126517}"
        );
        let lost = ev(
            1,
            u32::MAX,
            u32::MAX,
            EventKind::Lost { id: 0x2a, lost: 16 },
        );
        assert_eq!(
            lost.to_string(),
            "cpu: 1, pid: -1, tid: -1 { type: lost, id: 0x2a, lost: 0x10 }"
        );
        let thr = ev(
            0,
            0,
            0,
            EventKind::Throttle {
                throttled: true,
                time: 5,
                id: 7,
                stream_id: 7,
            },
        );
        assert_eq!(
            thr.to_string(),
            "cpu: 0, pid: 0, tid: 0 { type: throttle, time: 5, id: 7, stream_id: 7 }"
        );
        let un = ev(
            0,
            0,
            0,
            EventKind::Throttle {
                throttled: false,
                time: 6,
                id: 7,
                stream_id: 7,
            },
        );
        assert_eq!(
            un.to_string(),
            "cpu: 0, pid: 0, tid: 0 { type: unthrottle, time: 6, id: 7, stream_id: 7 }"
        );
        let s = ev(0, 10, 11, EventKind::sample(0xffffffff81000000, 250000, 1));
        assert_eq!(
            s.to_string(),
            "cpu: 0, pid: 10, tid: 11 { type: sample, ip: 0xffffffff81000000, period: 250000 }"
        );
        let sw = ev(
            1,
            5,
            5,
            EventKind::Switch {
                out: true,
                preempt: false,
                next_prev: Some((9, 9)),
            },
        );
        assert_eq!(
            sw.to_string(),
            "cpu: 1, pid: 5, tid: 5 { type: context_switch, next_prev_pid: 9, next_prev_tid: 9, switch_out: 1 }"
        );
    }

    #[test]
    fn a_symbols_cached_quoting_writes_what_scanning_each_frame_wrote() {
        use crate::symbols::{Dso, DsoKind, Symbol, SymbolKey, Symbolized};
        // Each name as the symbolizer keeps it (escaped), with offsets of every width.
        let names = [
            "main",
            "std::vector<int, std::allocator<int> >::push_back",
            "f<-g",
            "a{b}",
            "say \"hi\"",
            " lead",
            "trail ",
            "<",
            "-",
            r"x\\",
            r"\x2c",
            r"bad\u{202e}",
            r"opened\u{",
            r"\",
            "",
        ];
        let paths = [
            "/usr/lib/libc.so.6",
            "/tmp/a, b",
            "/tmp/x{y}",
            " /sp",
            "[vdso]",
        ];
        for (i, name) in names.iter().enumerate() {
            for path in paths {
                let dso = Dso::new(path, DsoKind::File);
                let key = SymbolKey { dso: 1, start: 0 };
                let sym = Symbol::new(Some((*name).into()), dso.clone(), key);
                let unknown = Symbolized::unknown(&Symbol::unknown(dso.clone(), 1));
                for off in [0u64, 1, 0x10, 0xdead_beef, u64::MAX, i as u64] {
                    let s = Symbolized::new(sym.clone(), off);
                    let (mut fast, mut slow) = (Vec::new(), Vec::new());
                    push_plain_symbol(&s, &mut fast);
                    push_plain_symbol_slow(&s, &mut slow);
                    assert_eq!(fast, slow, "{name:?}+{off:#x}");
                }
                // An unknown symbol: as the scan wrote it.
                let (mut fast, mut slow) = (Vec::new(), Vec::new());
                push_plain_symbol(&unknown, &mut fast);
                push_plain_symbol_slow(&unknown, &mut slow);
                assert_eq!(fast, slow, "unknown in {path:?}");
                // A binary's name and an unknown frame's label: as the scan quoted them.
                let (mut fast, mut slow) = (Vec::new(), Vec::new());
                push_plain_dso(&dso, &mut fast);
                crate::text::push_plain_escaped(path.as_bytes(), &mut slow);
                assert_eq!(fast, slow, "{path:?}");
                let chain = Callchain::new(vec![crate::callchain::CONTEXT_USER, 0x10]);
                struct One(Symbolized);
                impl FrameNames for One {
                    fn symbol(&self, _: usize, _: crate::callchain::Frame) -> Option<&Symbolized> {
                        Some(&self.0)
                    }
                }
                let (mut line, mut want) = (Vec::new(), b"callchain: ".to_vec());
                write_plain(&chain, &One(unknown.clone()), &mut line);
                push_plain_text(unknown.symbol().frame_name().as_bytes(), &mut want);
                assert_eq!(line, want, "{path:?}");
            }
        }
    }

    #[test]
    fn hostile_comm_is_escaped_in_the_line() {
        let e = ev(
            0,
            1,
            1,
            EventKind::Comm {
                pid: 1,
                tid: 1,
                comm: (*b"\x1b[31mred\nx").into(),
                exec: false,
            },
        );
        let line = e.to_string();
        assert!(!line.contains('\x1b') && !line.contains('\n'), "{line}");
        assert!(line.contains("comm: \\x1b[31mred\\nx }"), "{line}");
    }
}
