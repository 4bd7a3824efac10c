//! `--plain` and `--json`: one line per record on stdout, in global time order.

use std::io::{self, Write};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, never, select, tick};

use crate::event::{Event, EventKind};
use crate::merge::Reorder;
use crate::monitor::Monitor;
use crate::output::StdoutQueue;
use crate::perf::reader::{Batch, collect_last_batches};
use crate::perf::tracepoint::Value;
use crate::signals::StopSignals;
use crate::text::escape;

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

/// A JSON string literal of already-escaped (control-free) text.
struct JsonStr<'a>(&'a str);

impl std::fmt::Display for JsonStr<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("\"")?;
        let mut rest = self.0;
        while let Some(i) = rest.find(|c: char| c == '"' || c == '\\' || c.is_control()) {
            f.write_str(&rest[..i])?;
            let c = rest[i..].chars().next().unwrap_or(' ');
            match c {
                '"' => f.write_str("\\\"")?,
                '\\' => f.write_str("\\\\")?,
                c => write!(f, "\\u{:04x}", c as u32)?,
            }
            rest = &rest[i + c.len_utf8()..];
        }
        f.write_str(rest)?;
        f.write_str("\"")
    }
}

/// One JSON object per line. Field names follow perf's Python binding; text from the
/// monitored system carries the same escaping as `--plain` (so `jq -r` never prints raw
/// control characters), inside a valid JSON string.
pub fn write_json(out: &mut impl Write, ev: &Event) -> io::Result<()> {
    write!(
        out,
        "{{\"type\":\"{}\",\"sample_cpu\":{},\"sample_pid\":{},\"sample_tid\":{},\"sample_time\":{},\"sample_id\":{}",
        ev.record_type().name(),
        ev.cpu,
        ev.pid as i32,
        ev.tid as i32,
        ev.time,
        ev.id
    )?;
    match &ev.kind {
        EventKind::Sample { ip, period, .. } => {
            write!(out, ",\"sample_ip\":{ip},\"sample_period\":{period}")?;
            write_json_event(out, ev)?;
            write_json_callchain(out, ev, &crate::callchain::NoNames)?;
        }
        EventKind::Fork(t) | EventKind::Exit(t) => write!(
            out,
            ",\"pid\":{},\"ppid\":{},\"tid\":{},\"ptid\":{},\"time\":{}",
            t.pid, t.ppid, t.tid, t.ptid, t.time
        )?,
        EventKind::Comm {
            pid,
            tid,
            comm,
            exec,
        } => write!(
            out,
            ",\"pid\":{pid},\"tid\":{tid},\"comm\":{},\"exec\":{exec}",
            JsonStr(&escape(comm))
        )?,
        EventKind::Mmap(m) => {
            write!(
                out,
                ",\"pid\":{},\"tid\":{},\"start\":{},\"len\":{},\"pgoff\":{},\"filename\":{}",
                m.pid,
                m.tid,
                m.start,
                m.len,
                m.pgoff,
                JsonStr(&escape(&m.filename))
            )?;
            if let Some(x) = m.mmap2 {
                write!(
                    out,
                    ",\"maj\":{},\"min\":{},\"ino\":{},\"ino_generation\":{},\"prot\":{},\"flags\":{}",
                    x.maj, x.min, x.ino, x.ino_generation, x.prot, x.flags
                )?;
            }
        }
        EventKind::Lost { id, lost } => write!(out, ",\"id\":{id},\"lost\":{lost}")?,
        EventKind::LostSamples { lost } => write!(out, ",\"lost\":{lost}")?,
        EventKind::Throttle {
            time,
            id,
            stream_id,
            ..
        } => write!(
            out,
            ",\"time\":{time},\"id\":{id},\"stream_id\":{stream_id}"
        )?,
        EventKind::Switch {
            out: sw_out,
            preempt,
            next_prev,
        } => {
            write!(out, ",\"switch_out\":{sw_out},\"preempt\":{preempt}")?;
            if let Some((p, t)) = next_prev {
                write!(
                    out,
                    ",\"next_prev_pid\":{},\"next_prev_tid\":{}",
                    *p as i32, *t as i32
                )?;
            }
        }
    }
    out.write_all(b"}\n")
}

/// A sample's `"event"` name and its tracepoint fields as JSON members: numbers as numbers,
/// text as (escaped) strings, arrays as lists, a field outside the record as null. Built
/// with itoa and byte pushes into one buffer: tracepoint lines carry many fields.
fn write_json_event(out: &mut impl Write, ev: &Event) -> io::Result<()> {
    JSON_FIELDS.with_borrow_mut(|(buf, text)| {
        buf.clear();
        if let Some(name) = ev.event_name() {
            buf.extend_from_slice(b",\"event\":");
            json_text(name.as_bytes(), buf, text);
        }
        for (f, v) in ev.fields(false) {
            buf.extend_from_slice(b",\"");
            buf.extend_from_slice(f.name.as_bytes());
            buf.extend_from_slice(b"\":");
            match v {
                Value::Int(n) => buf.extend_from_slice(itoa::Buffer::new().format(n).as_bytes()),
                Value::UInt(n) | Value::Hex(n) => {
                    buf.extend_from_slice(itoa::Buffer::new().format(n).as_bytes())
                }
                Value::Str(s) => json_text(s, buf, text),
                Value::Array { .. } => {
                    buf.push(b'[');
                    for (i, e) in v.elements().enumerate() {
                        if i > 0 {
                            buf.push(b',');
                        }
                        buf.extend_from_slice(itoa::Buffer::new().format(e).as_bytes());
                    }
                    buf.push(b']');
                }
                Value::Missing => buf.extend_from_slice(b"null"),
            }
        }
        out.write_all(buf)
    })
}

/// A sample's `"callchain"` member (`-g`), its frames named by `names`.
pub fn write_json_callchain(
    out: &mut impl Write,
    ev: &Event,
    names: &dyn crate::callchain::FrameNames,
) -> io::Result<()> {
    let Some(chain) = ev.callchain() else {
        return Ok(());
    };
    JSON_FIELDS.with_borrow_mut(|(buf, _)| {
        buf.clear();
        buf.push(b',');
        crate::callchain::write_json(chain, names, buf);
        out.write_all(buf)
    })
}

thread_local! {
    /// The members being formatted and a scratch buffer for escaped text.
    static JSON_FIELDS: std::cell::RefCell<(Vec<u8>, Vec<u8>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// Untrusted text as a JSON string: escaped as in `--plain` (no control characters are
/// left), then `"` and `\` escaped for JSON.
fn json_text(raw: &[u8], out: &mut Vec<u8>, scratch: &mut Vec<u8>) {
    scratch.clear();
    crate::text::escape_to(raw, scratch);
    out.push(b'"');
    for &b in scratch.iter() {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b => out.push(b),
        }
    }
    out.push(b'"');
}

/// Why a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// A signal asked perfwatch to stop.
    Signal(i32),
    /// `--duration` elapsed.
    Duration,
    /// The `-- COMMAND` exited with this status.
    CommandExited(i32),
    /// Every monitored task is gone (`-p`/`-t`), or every reader ended.
    TargetsGone,
    /// The reader of stdout went away (`| head`).
    BrokenPipe,
    /// A reader thread failed (see `Stats::failure`).
    ReaderFailed,
    /// The frontend itself panicked.
    Panicked,
}

/// A predicate deciding which events are written.
pub type EventFilter = Box<dyn FnMut(&Event) -> bool>;

/// Options of a plain run.
pub struct PlainOptions {
    pub format: Format,
    pub duration: Option<Duration>,
    /// Events kept back for ordering at most (bounds memory).
    pub max_reorder: usize,
    /// A predicate on events; those it rejects are not written (counters still count them).
    pub filter: Option<EventFilter>,
    /// `--folded [FILE]`: fed with every event in time order (before `filter`, which it
    /// applies itself); with stdout as its output, no record is written.
    pub folded: Option<crate::folded::Folding>,
}

/// How often the loop looks at signals, the clock and the command when no batch arrives.
/// Readers send a batch at least every 250 ms, which wakes the loop too.
const TICK: Duration = Duration::from_millis(200);
/// How long to wait for the readers' last batches at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// Run until stopped, writing every event to `out`.
///
/// `rx` is the stream of batches: the monitor's own channel, or the output of a stage that
/// filters it (the script stage). `out` never blocks: while its writer is behind, the loop
/// takes no batches (the kernel rings take the strain) but still sees signals, the clock
/// and the command; the caller finishes it with a bounded wait.
pub fn run(
    mon: &mut Monitor,
    rx: &Receiver<Batch>,
    mut opts: PlainOptions,
    signals: &StopSignals,
    out: &mut StdoutQueue,
) -> io::Result<StopReason> {
    let mut reorder = Reorder::new(&mon.info.cpus, opts.max_reorder);
    let ticker = tick(TICK);
    let start = Instant::now();
    let mut write_err: Option<io::Error> = None;
    let format = opts.format;
    let folded = opts.folded.take();
    let records = !folded.as_ref().is_some_and(|f| f.replaces_records());
    let mut emit = |ev: Event, out: &mut dyn Write, err: &mut Option<io::Error>| {
        if let Some(f) = &folded {
            f.observe(&ev);
        }
        if err.is_some() || !records {
            return;
        }
        if let Some(f) = opts.filter.as_mut() {
            if !f(&ev) {
                return;
            }
        }
        let mut w = out;
        if let Err(e) = write_event(&mut w, &ev, format) {
            *err = Some(e);
        }
    };

    let no_batches = never();
    let no_room = never();
    let reason = loop {
        let mut wrote = false;
        // A stalled reader of stdout: take no more batches until the writer catches up (and
        // only then listen for it: a wake-up per chunk written would cost more than it saves).
        let has_room = out.has_room();
        let batches = if has_room { rx } else { &no_batches };
        let room = if has_room { &no_room } else { out.room() };
        select! {
            recv(batches) -> msg => match msg {
                Ok(b) => {
                    reorder.push(b);
                    // Take whatever else is queued before writing: fewer flushes.
                    for b in rx.try_iter().take(64) {
                        reorder.push(b);
                    }
                    reorder.pop_ready(|ev| { wrote = true; emit(ev, out, &mut write_err) });
                }
                Err(_) => break StopReason::TargetsGone,
            },
            recv(room) -> _ => {}
            recv(ticker) -> _ => {}
        }
        if wrote && write_err.is_none() {
            if let Err(e) = out.flush() {
                write_err = Some(e);
            }
        }
        if write_err.is_none() {
            write_err = out.error();
        }
        if let Some(e) = write_err.take() {
            if e.kind() == io::ErrorKind::BrokenPipe {
                break StopReason::BrokenPipe;
            }
            return Err(e);
        }
        if let Some(sig) = signals.pending() {
            break StopReason::Signal(sig);
        }
        if mon.stats.failure().is_some() {
            break StopReason::ReaderFailed;
        }
        crate::debug_panic_point("frontend");
        if opts.duration.is_some_and(|d| start.elapsed() >= d) {
            break StopReason::Duration;
        }
        if let Some(status) = mon.command_exit() {
            break StopReason::CommandExited(status);
        }
        if reorder.all_ended() {
            break StopReason::TargetsGone;
        }
    };

    mon.request_stop();
    if reason == StopReason::BrokenPipe {
        return Ok(reason);
    }
    // Collect the readers' last batches, then write out everything that is left.
    collect_last_batches(
        rx,
        SHUTDOWN_GRACE,
        &mut reorder,
        Reorder::all_ended,
        Reorder::push,
    );
    reorder.flush(|ev| emit(ev, out, &mut write_err));
    if write_err.is_none() {
        if let Err(e) = out.flush() {
            write_err = Some(e);
        }
    }
    if write_err.is_none() {
        write_err = out.error();
    }
    match write_err {
        Some(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(StopReason::BrokenPipe),
        Some(e) => Err(e),
        None => Ok(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Mmap2Extra, MmapRecord, TaskRecord};

    fn json(ev: &Event) -> String {
        let mut v = Vec::new();
        write_json(&mut v, ev).unwrap();
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn json_fork_has_perf_field_names() {
        let e = Event {
            cpu: 0,
            pid: 13783,
            tid: 13783,
            time: 99,
            id: 5,
            kind: EventKind::Fork(TaskRecord {
                pid: 13790,
                ppid: 13783,
                tid: 13790,
                ptid: 13783,
                time: 7162303959197,
            }),
        };
        assert_eq!(
            json(&e),
            "{\"type\":\"fork\",\"sample_cpu\":0,\"sample_pid\":13783,\"sample_tid\":13783,\"sample_time\":99,\"sample_id\":5,\"pid\":13790,\"ppid\":13783,\"tid\":13790,\"ptid\":13783,\"time\":7162303959197}\n"
        );
    }

    #[test]
    fn json_tracepoint_fields_are_typed() {
        use crate::event::EventDesc;
        use crate::perf::tracepoint::{Format, craft};
        let desc = EventDesc {
            index: 1,
            name: "sched:sched_switch",
            type_: 2,
            config: 372,
            format: Some(Format::parse("sched:sched_switch", craft::SCHED_SWITCH).unwrap()),
            show_name: true,
            show_common: false,
        }
        .intern();
        let raw = craft::sched_switch(b"ba\"sh\x1b", -3, 2, b"swapper/1", 0);
        let e = Event {
            cpu: 1,
            pid: 5,
            tid: 5,
            time: 1,
            id: 9,
            kind: EventKind::Sample {
                ip: 0xffff,
                period: 1,
                misc: 1,
                event: desc,
                raw: Some(raw.into()),
                callchain: None,
            },
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
                mmap2: Some(Mmap2Extra {
                    maj: 8,
                    min: 1,
                    ino: 4,
                    ino_generation: 0,
                    prot: 5,
                    flags: 2,
                }),
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
}
