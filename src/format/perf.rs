//! `--format perf`: a sample as `perf script` prints it by default, so that perfwatch's lines
//! (live or from `-i FILE`) go where perf script's went: `diff`, stackcollapse-perf.pl, the
//! scripts people wrote around it.
//!
//! ```text
//!             perf  1272 [000] 11105.161329:    1001001 cpu-clock:      7fb01e8c60ce strlen+0xbe (/usr/lib/x86_64-linux-gnu/libc.so.6)
//!             bash  1316 [000] 11105.161369: sched:sched_switch: prev_comm=bash prev_pid=1316 ...
//! ```
//!
//! The rules are perf 6.1's `tools/perf/builtin-script.c` (the `perf` installed beside
//! perfwatch, and the oracle of the tests): the command right-aligned to 16 (left as it is
//! when the sample's call chain follows), the thread id to 5, the CPU as `[%03d]` only when
//! the first event of its type recorded PERF_SAMPLE_CPU (a per-task `perf record` does not),
//! the time as seconds with microseconds truncated, the period to 10 (not for tracepoints),
//! the event name right-aligned to the longest name of the session; then the address
//! (`%16x`), `sym+0xoff` or `[unknown]`, and `(dso)`; with a call chain, a line per frame
//! (`\t%16x sym+off (dso)`) and a blank line. A tracepoint prints its `print fmt` as
//! libtraceevent renders it ([`crate::event::tracepoint::printfmt`]). Side-band records (fork,
//! comm, mmap, lost, ...) are not printed, as perf script does not print them by default.
//!
//! Untrusted text (commands, names, paths, tracepoint strings) is escaped as everywhere else:
//! a name made of printable ASCII prints as perf prints it.

use crate::callchain::{
    CONTEXT_HV, CONTEXT_KERNEL, CONTEXT_USER, Frame, FrameNames, NoNames, is_marker,
};
use crate::event::{Event, EventKind};
use crate::process::ProcessModel;
use crate::process::maps::AddressSpace;
use crate::symbols::Symbolized;

/// `perf_event_attr.sample_type` bits the output rules look at.
const SAMPLE_IP: u64 = 1 << 0;
const SAMPLE_TID: u64 = 1 << 1;
const SAMPLE_TIME: u64 = 1 << 2;
const SAMPLE_CALLCHAIN: u64 = 1 << 5;
const SAMPLE_CPU: u64 = 1 << 7;

/// perf's output types: PERF_TYPE_HARDWARE .. PERF_TYPE_BREAKPOINT, then every other PMU.
const TYPES: usize = 7;
const TRACEPOINT: usize = 2;
/// The most frames perf script prints of one chain (`scripting_max_stack`,
/// PERF_MAX_STACK_DEPTH).
const MAX_FRAMES: usize = 127;

/// One event of a session, as perf script's output rules see it.
#[derive(Clone, Copy, Debug)]
pub struct SessionEvent<'a> {
    /// Its name as perf spells it (`cpu-clock`, `sched:sched_switch`, `dummy:HG`).
    pub name: &'a str,
    /// `perf_event_attr.type`.
    pub type_: u32,
    /// `perf_event_attr.sample_type`.
    pub sample_type: u64,
    /// The `dummy` software event (side-band only): never decides what a type shows.
    pub dummy: bool,
}

/// What perf script shows for the samples of one output type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shown {
    tid: bool,
    cpu: bool,
    time: bool,
    period: bool,
    /// The address, its symbol and binary (and the call chain).
    ip: bool,
    /// A tracepoint's fields.
    trace: bool,
}

/// The session-wide choices of perf script's default output: which fields each type of
/// event shows and how wide the event name column is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerfStyle {
    name_width: usize,
    types: [Shown; TYPES],
    /// Some event records call chains (perf's `symbol_conf.use_callchain`).
    callchains: bool,
}

fn output_type(type_: u32) -> usize {
    (type_ as usize).min(TYPES - 1)
}

impl PerfStyle {
    /// The style of a session of `events` (every event of the recording or of the live run,
    /// in their order: the first non-dummy event of a type decides what the type shows).
    pub fn new(events: &[SessionEvent<'_>]) -> PerfStyle {
        let default = Shown {
            tid: true,
            cpu: true,
            time: true,
            period: true,
            ip: true,
            trace: false,
        };
        let mut types = [default; TYPES];
        types[TRACEPOINT] = Shown {
            period: false,
            ip: false,
            trace: true,
            ..default
        };
        let callchains = events.iter().any(|e| e.sample_type & SAMPLE_CALLCHAIN != 0);
        for (t, shown) in types.iter_mut().enumerate() {
            let Some(first) = events
                .iter()
                .find(|e| !e.dummy && output_type(e.type_) == t)
            else {
                continue;
            };
            // Fields the samples do not carry are dropped from the defaults.
            let st = first.sample_type;
            shown.tid &= st & SAMPLE_TID != 0;
            shown.time &= st & SAMPLE_TIME != 0;
            shown.cpu &= st & SAMPLE_CPU != 0;
            shown.ip &= st & SAMPLE_IP != 0;
        }
        // Tracepoints show where they were hit only when they recorded call chains.
        if callchains
            && events.iter().any(|e| {
                output_type(e.type_) == TRACEPOINT && e.sample_type & SAMPLE_CALLCHAIN != 0
            })
        {
            types[TRACEPOINT].ip = true;
        }
        PerfStyle {
            name_width: events.iter().map(|e| e.name.len()).max().unwrap_or(0),
            types,
            callchains,
        }
    }

    /// A live run's style: perfwatch's samples always carry the thread, time, CPU, address
    /// and period; call chains when an event records them.
    pub fn live<'a>(events: impl IntoIterator<Item = (&'a str, u32, bool)>) -> PerfStyle {
        let all = SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU;
        let events: Vec<SessionEvent<'_>> = events
            .into_iter()
            .map(|(name, type_, chain)| SessionEvent {
                name,
                type_,
                sample_type: all | if chain { SAMPLE_CALLCHAIN } else { 0 },
                dummy: type_ == 1 && name.starts_with("dummy"),
            })
            .collect();
        PerfStyle::new(&events)
    }
}

/// Append `s` right-aligned to `width` (C's `%*s`).
#[inline]
fn right(buf: &mut Vec<u8>, s: &[u8], width: usize) {
    buf.extend(std::iter::repeat_n(b' ', width.saturating_sub(s.len())));
    buf.extend_from_slice(s);
}

/// Append `v` in hex, right-aligned to 16 (`%16lx`).
#[inline]
fn hex16(buf: &mut Vec<u8>, v: u64) {
    let digits = (16 - v.leading_zeros() as usize / 4).max(1);
    buf.extend(std::iter::repeat_n(b' ', 16 - digits));
    crate::text::push_hex_digits(buf, v);
}

/// `sym+0xoff (dso)`, `[unknown] (dso)` or `[unknown] ([unknown])`, as
/// `sample__fprintf_sym` prints them (after the address).
fn symbol(buf: &mut Vec<u8>, s: Option<&Symbolized>) {
    buf.push(b' ');
    match s.and_then(|s| Some((s.name()?, s.offset()?))) {
        Some((name, off)) => {
            // Names come escaped from the symbolizer.
            buf.extend_from_slice(name.as_bytes());
            buf.extend_from_slice(b"+0x");
            crate::text::push_hex_digits(buf, off);
        }
        None => buf.extend_from_slice(crate::symbols::UNKNOWN.as_bytes()),
    }
    buf.extend_from_slice(b" (");
    match s {
        Some(s) => buf.extend_from_slice(s.dso().name().as_bytes()),
        None => buf.extend_from_slice(crate::symbols::UNKNOWN.as_bytes()),
    }
    buf.push(b')');
}

/// The address perf script shows for a frame of a call chain: where it is in its binary
/// (perf's `map__map_ip`: the file offset) when a file maps it; as it is in the kernel, in
/// anonymous memory (a JIT's, perf's `identity__map_ip`), or where nothing maps it.
fn frame_address(frame: Frame, space: Option<&AddressSpace>) -> u64 {
    if frame.is_kernel() {
        return frame.ip;
    }
    match space.and_then(|s| s.find(frame.ip)) {
        Some(m) if !anonymous(&m.file.path) => m.file_offset(frame.ip),
        _ => frame.ip,
    }
}

/// perf's `is_anon_memory` and `is_no_dso_memory`: mappings whose addresses are their own.
fn anonymous(path: &[u8]) -> bool {
    path == b"//anon"
        || path == b"[heap]"
        || path.starts_with(b"/dev/zero")
        || path.starts_with(b"/anon_hugepage")
        || path.starts_with(b"[stack")
        || path.starts_with(b"/SYSV")
}

/// The command perf script shows for a thread: its name at the sample's time; the idle
/// task is `swapper`; a thread never named is `:TID`.
fn comm(buf: &mut Vec<u8>, ev: &Event, tasks: Option<&ProcessModel>) {
    match tasks.and_then(|t| t.comm_at(ev.tid, ev.time)) {
        Some(c) => crate::text::escape_to(c.as_bytes(), buf),
        None if ev.tid == 0 => buf.extend_from_slice(b"swapper"),
        None => {
            buf.push(b':');
            buf.extend_from_slice(itoa::Buffer::new().format(ev.tid as i32).as_bytes());
        }
    }
}

/// Append the lines perf script prints for `ev` (nothing for a record that is not a
/// sample). `tasks` names the threads (without it, every thread is `:TID`).
pub fn write_perf(buf: &mut Vec<u8>, ev: &Event, style: &PerfStyle, tasks: Option<&ProcessModel>) {
    let EventKind::Sample {
        ip,
        period,
        event,
        raw,
        callchain,
        sym,
        ..
    } = &ev.kind
    else {
        return;
    };
    let shown = style.types[output_type(event.type_)];
    let chain = callchain.as_ref().filter(|_| style.callchains && shown.ip);
    // perf takes a chain with a marker other than the kernel's, user's or hypervisor's for
    // corrupt (`add_callchain_ip`: "Discard all") and prints no frame of it.
    let frames = chain.filter(|c| {
        c.entries()
            .iter()
            .all(|&e| !is_marker(e) || matches!(e, CONTEXT_KERNEL | CONTEXT_USER | CONTEXT_HV))
    });
    let start = buf.len();
    comm(buf, ev, tasks);
    if chain.is_none() {
        // `%16s`: the name was appended at `start`; pad in front of it.
        let len = buf.len() - start;
        if len < 16 {
            buf.splice(start..start, std::iter::repeat_n(b' ', 16 - len));
        }
    }
    buf.push(b' ');
    let mut num = itoa::Buffer::new();
    if shown.tid {
        right(buf, num.format(ev.tid as i32).as_bytes(), 5);
        buf.push(b' ');
    }
    if shown.cpu {
        buf.push(b'[');
        right(buf, num.format(ev.cpu).as_bytes(), 3);
        // `%03d`: zeros, not spaces.
        let n = buf.len();
        for b in &mut buf[n - 3..] {
            if *b == b' ' {
                *b = b'0';
            }
        }
        buf.extend_from_slice(b"] ");
    }
    if shown.time {
        let secs = num.format(ev.time / 1_000_000_000);
        let usecs = (ev.time % 1_000_000_000) / 1000;
        // `%12s` of `secs.usecs`.
        let width = secs.len() + 7;
        buf.extend(std::iter::repeat_n(b' ', 12usize.saturating_sub(width)));
        buf.extend_from_slice(secs.as_bytes());
        buf.push(b'.');
        let u = num.format(usecs);
        buf.extend(std::iter::repeat_n(b'0', 6 - u.len()));
        buf.extend_from_slice(u.as_bytes());
        buf.extend_from_slice(b": ");
    }
    if shown.period {
        right(buf, num.format(*period).as_bytes(), 10);
        buf.push(b' ');
    }
    let name = if event.name.is_empty() {
        crate::symbols::UNKNOWN
    } else {
        event.name
    };
    right(buf, name.as_bytes(), style.name_width);
    buf.extend_from_slice(b": ");
    if shown.trace {
        if let (Some(fmt), Some(raw)) = (&event.format, raw) {
            let syms: &dyn crate::event::tracepoint::printfmt::KernelSymbols = match sym {
                Some(names) => &**names,
                None => &crate::event::tracepoint::printfmt::NoSymbols,
            };
            match fmt
                .print
                .as_ref()
                .and_then(|p| p.render_line(&fmt.fields, raw, syms))
            {
                Some(text) => crate::text::escape_to(&text, buf),
                // libtraceevent's words for a format it cannot read, then the fields.
                None => {
                    buf.extend_from_slice(b"[FAILED TO PARSE]");
                    for (f, v) in ev.fields(false) {
                        buf.push(b' ');
                        buf.extend_from_slice(f.name.as_bytes());
                        buf.push(b'=');
                        crate::text::escape_to(v.to_string().as_bytes(), buf);
                    }
                }
            }
        }
    }
    if shown.ip {
        match chain {
            Some(_) => {
                buf.push(b'\n');
                let names: &dyn FrameNames = match sym {
                    Some(n) => &**n,
                    None => &NoNames,
                };
                let space = tasks
                    .and_then(|t| t.process_at(ev.pid, ev.time))
                    .map(|p| p.space_at(ev.time));
                let frames = frames.into_iter().flat_map(|c| c.frames());
                for (i, frame) in frames.enumerate().take(MAX_FRAMES) {
                    buf.push(b'\t');
                    hex16(buf, frame_address(frame, space));
                    symbol(buf, names.symbol(i, frame));
                    buf.push(b'\n');
                }
            }
            None => {
                buf.push(b' ');
                hex16(buf, *ip);
                symbol(buf, sym.as_ref().and_then(|n| n.sym()));
            }
        }
    }
    buf.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callchain::{CONTEXT_KERNEL, CONTEXT_USER, Callchain};
    use crate::event::SampleNames;
    use crate::testkit::events::{comm, desc, mmap, sample_of};
    use crate::testkit::named::Names;
    use crate::testkit::tracepoints as tp;

    const SW: u32 = 1;
    /// What `perf record -a` samples carry (IP|TID|TIME|CPU|PERIOD), and a per-task one.
    const SYSTEM: u64 = SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | (1 << 8);
    const TASK: u64 = SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | (1 << 8);

    fn style(events: &[(&str, u32, u64)]) -> PerfStyle {
        let events: Vec<_> = events
            .iter()
            .map(|&(name, type_, sample_type)| SessionEvent {
                name,
                type_,
                sample_type,
                dummy: name.starts_with("dummy"),
            })
            .collect();
        PerfStyle::new(&events)
    }

    fn line(ev: &Event, style: &PerfStyle, tasks: Option<&ProcessModel>) -> String {
        let mut buf = Vec::new();
        write_perf(&mut buf, ev, style, tasks);
        String::from_utf8(buf).unwrap()
    }

    fn clock_sample(pid: u32, time: u64, ip: u64) -> Event {
        let d = desc(0, "cpu-clock", SW, 0);
        let mut ev = sample_of(d, 1, pid, time, 1001001);
        if let EventKind::Sample { ip: i, .. } = &mut ev.kind {
            *i = ip;
        }
        ev
    }

    fn model(events: &[Event]) -> ProcessModel {
        let mut m = ProcessModel::new();
        m.apply(events);
        m
    }

    #[test]
    fn the_command_is_right_aligned_to_16_the_tid_to_5_and_unknown_threads_are_colon_tid() {
        let s = style(&[("cpu-clock", SW, TASK)]);
        let tasks = model(&[comm(0, 10, 4242, b"sh", true)]);
        let ev = clock_sample(4242, 11_046_805_135_999, 0x7fb01e8c60ce);
        assert_eq!(
            line(&ev, &s, Some(&tasks)),
            "              sh  4242 11046.805135:    1001001 cpu-clock:      7fb01e8c60ce [unknown] ([unknown])\n"
        );
        // Never named: `:TID`; the idle task: `swapper`; a long name is not cut.
        assert!(line(&ev, &s, None).starts_with("           :4242  4242 "));
        let idle = clock_sample(0, 5_000_000_000, 0xffffffff81000000);
        assert!(line(&idle, &s, None).starts_with("         swapper     0 "));
        let tasks = model(&[comm(0, 10, 7, b"a-very-long-name", false)]);
        let ev = clock_sample(7, 20, 1);
        assert!(line(&ev, &s, Some(&tasks)).starts_with("a-very-long-name     7 "));
        // A hostile name is escaped, not written raw.
        let tasks = model(&[comm(0, 10, 8, b"\x1b[2Jx", false)]);
        let ev = clock_sample(8, 20, 1);
        assert!(!line(&ev, &s, Some(&tasks)).contains('\x1b'));
    }

    #[test]
    fn the_cpu_shows_when_the_first_event_of_its_type_recorded_it() {
        let ev = clock_sample(1, 3_000_001_000, 1);
        // perf record -a: `[001]`; the dummy event never decides.
        let s = style(&[("dummy:HG", SW, TASK), ("cpu-clock", SW, SYSTEM)]);
        assert!(line(&ev, &s, None).starts_with("              :1     1 [001]     3.000001: "));
        let s = style(&[("cpu-clock", SW, TASK), ("task-clock", SW, SYSTEM)]);
        assert!(line(&ev, &s, None).starts_with("              :1     1     3.000001: "));
    }

    #[test]
    fn time_is_seconds_and_truncated_microseconds_and_the_event_column_is_the_widest_name() {
        let s = style(&[("cpu-clock", SW, TASK), ("sched:sched_switch", 2, SYSTEM)]);
        let ev = clock_sample(1, 123_456_789_999, 1);
        assert_eq!(
            line(&ev, &s, None),
            "              :1     1   123.456789:    1001001          cpu-clock:                 1 [unknown] ([unknown])\n"
        );
    }

    #[test]
    fn a_named_sample_shows_symbol_offset_and_binary() {
        let s = style(&[("cpu-clock", SW, TASK)]);
        let n = Names::new();
        let mut ev = clock_sample(1, 1_000_000, 0x401136);
        if let EventKind::Sample { sym, .. } = &mut ev.kind {
            *sym = Some(std::sync::Arc::new(SampleNames {
                ip: Some(n.sym("hot_b")),
                frames: Box::new([]),
                args: Box::new([]),
            }));
        }
        assert!(
            line(&ev, &s, None).ends_with("          401136 hot_b+0x4 (/usr/local/bin/spin)\n")
        );
    }

    #[test]
    fn a_call_chain_is_a_line_per_frame_in_file_offsets_then_a_blank_line() {
        let s = style(&[("cpu-clock", SW, SYSTEM | SAMPLE_CALLCHAIN)]);
        let n = Names::new();
        let tasks = model(&[
            comm(0, 10, 9, b"spin", true),
            mmap(
                0,
                11,
                9,
                0x5555_0000_0000,
                0x10000,
                0x1000,
                b"/usr/local/bin/spin",
            ),
        ]);
        let mut ev = clock_sample(9, 2_000_000_000, 0xffffffff81000010);
        if let EventKind::Sample { callchain, sym, .. } = &mut ev.kind {
            *callchain = Some(Callchain::new(vec![
                CONTEXT_KERNEL,
                0xffffffff81000010,
                CONTEXT_USER,
                0x5555_0000_0136,
                0x7f00_0000_0001,
            ]));
            *sym = Some(std::sync::Arc::new(SampleNames {
                ip: Some(n.sym("k_tick")),
                frames: Box::new([Some(n.sym("k_tick")), Some(n.sym("hot_b")), None]),
                args: Box::new([]),
            }));
        }
        assert_eq!(
            line(&ev, &s, Some(&tasks)),
            "spin     9 [001]     2.000000:    1001001 cpu-clock: \n\
             \tffffffff81000010 k_tick+0x4 ([kernel.kallsyms])\n\
             \t            1136 hot_b+0x4 (/usr/local/bin/spin)\n\
             \t    7f0000000001 [unknown] ([unknown])\n\n"
        );
        // A marker perf does not know (here -1): perf discards the chain, frames and all.
        let mut bad = ev.clone();
        if let EventKind::Sample { callchain, .. } = &mut bad.kind {
            *callchain = Some(Callchain::new(vec![
                CONTEXT_USER,
                0x5555_0000_0136,
                u64::MAX,
                7,
            ]));
        }
        assert_eq!(
            line(&bad, &s, Some(&tasks)),
            "spin     9 [001]     2.000000:    1001001 cpu-clock: \n\n"
        );
        // Without the chain's events recording chains, one line.
        let s = style(&[("cpu-clock", SW, SYSTEM)]);
        assert!(!line(&ev, &s, Some(&tasks)).contains("\n\t"));
    }

    #[test]
    fn a_tracepoint_prints_its_print_fmt_and_no_period_or_address() {
        let d = tp::desc(1, "sched:sched_switch", tp::SCHED_SWITCH);
        let s = style(&[("sched:sched_switch", 2, SYSTEM)]);
        let ev = crate::testkit::events::event(
            0,
            42,
            42,
            7_000_000_000,
            tp::sample(d, 0, 0, tp::sched_switch(b"bash", 42, 1, b"swapper/1", 0)),
        );
        let tasks = model(&[comm(0, 1, 42, b"bash", false)]);
        assert_eq!(
            line(&ev, &s, Some(&tasks)),
            "            bash    42 [000]     7.000000: sched:sched_switch: prev_comm=bash prev_pid=42 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120\n"
        );
    }

    #[test]
    fn side_band_records_print_nothing() {
        let s = style(&[("cpu-clock", SW, SYSTEM)]);
        assert_eq!(line(&comm(0, 1, 2, b"x", true), &s, None), "");
    }
}
