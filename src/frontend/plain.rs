//! `--plain` and `--json`: one line per record on stdout, in global time order.
//!
//! The line formats themselves live in [`crate::format`].

use std::io::{self, Write};
use std::time::Duration;

use crossbeam_channel::{never, select};

use crate::event::Event;
use crate::format::{Format, write_json, write_json_in};
use crate::output::StdoutQueue;
use crate::pipeline::Pipeline;
use crate::process::ProcessModel;
use crate::stop::{StopReason, StopRule, Watched};

use super::Outcome;

/// A predicate deciding which events are written; it may look tasks up in the model (as of
/// the event's time).
pub(crate) type EventFilter = Box<dyn FnMut(&Event, &ProcessModel) -> bool>;

/// Options of a plain run.
pub struct PlainOptions {
    pub format: Format,
    /// A predicate on events; those it rejects are not written (counters still count them).
    pub filter: Option<EventFilter>,
    /// `--folded [FILE]`: fed with every event in time order (before `filter`, which it
    /// applies itself); with stdout as its output, no record is written.
    pub folded: Option<crate::folded::Folding>,
    /// Where lines are formatted (reused).
    buf: Vec<u8>,
}

impl PlainOptions {
    pub fn new(
        format: Format,
        filter: Option<EventFilter>,
        folded: Option<crate::folded::Folding>,
    ) -> PlainOptions {
        PlainOptions {
            format,
            filter,
            folded,
            buf: Vec::with_capacity(OUT_BUFFER + 4096),
        }
    }
}

/// The longest the loop sleeps without a batch before it looks at signals and the command.
/// Readers send a batch at least every idle poll timeout (250 ms), and those wake the loop
/// anyway: it has no clock of its own to wake for, but for `--duration`'s end.
const WAIT: Duration = Duration::from_millis(250);

/// Run until stopped, writing every event the pipeline hands on to `out`; returns why it
/// stopped, and the `--folded` stacks it fed.
///
/// `out` never blocks: while its writer is behind, the loop takes no batches (the kernel rings
/// take the strain, and count what they cannot hold) but still sees signals, the clock and
/// the command; the caller finishes it with a bounded wait.
pub fn run(
    pipe: &mut Pipeline,
    watched: &mut dyn Watched,
    stop: &StopRule,
    mut opts: PlainOptions,
    out: &mut StdoutQueue,
) -> io::Result<Outcome> {
    let mut write_err: Option<io::Error> = None;
    let no_batches = never();
    let no_chunks = never();
    let no_room = never();
    let reason = loop {
        // A stalled reader of stdout: take nothing more until the writer catches up (and
        // only then listen for it: a wake-up per chunk written would cost more than it saves).
        let has_room = out.has_room();
        let batches = if has_room {
            pipe.batches()
        } else {
            &no_batches
        };
        let staged = if has_room { pipe.staged() } else { &no_chunks };
        let room = if has_room { &no_room } else { out.room() };
        select! {
            recv(batches) -> msg => pipe.take(msg),
            recv(staged) -> msg => pipe.take_staged(msg),
            recv(room) -> _ => {}
            default(stop.wait_at_most(WAIT)) => {}
        }
        if write_ready(pipe, &mut opts, out, &mut write_err) && write_err.is_none() {
            if let Err(e) = out.flush() {
                write_err = Some(e);
            }
        }
        if write_err.is_none() {
            write_err = out.error();
        }
        say_notes(pipe);
        if let Some(e) = write_err.take() {
            if e.kind() == io::ErrorKind::BrokenPipe {
                break StopReason::BrokenPipe;
            }
            return Err(e);
        }
        if let Some(reason) = stop.check(watched, pipe.all_ended()) {
            break reason;
        }
    };

    if reason == StopReason::BrokenPipe {
        watched.request_stop();
        return Ok(Outcome {
            reason,
            folded: opts.folded,
        });
    }
    // The readers' last batches and whatever is held, then written out. At a natural end,
    // scripts get every event first, however long they take (a signal cuts that short).
    pipe.shut_down(
        watched,
        reason.is_natural(),
        &|| stop.signal().is_some(),
        &mut |line| crate::output::stderr_bounded(format!("perfwatch: {line}\n").as_bytes()),
    );
    write_ready(pipe, &mut opts, out, &mut write_err);
    say_notes(pipe);
    if write_err.is_none() {
        if let Err(e) = out.flush() {
            write_err = Some(e);
        }
    }
    if write_err.is_none() {
        write_err = out.error();
    }
    let reason = match write_err {
        Some(e) if e.kind() == io::ErrorKind::BrokenPipe => StopReason::BrokenPipe,
        Some(e) => return Err(e),
        None => reason,
    };
    Ok(Outcome {
        reason,
        folded: opts.folded,
    })
}

/// What the symbolizer had to say (once per binary), on stderr.
fn say_notes(pipe: &mut Pipeline) {
    for note in pipe.take_notes() {
        crate::output::stderr_bounded(format!("perfwatch: {note}\n").as_bytes());
    }
}

/// Write the chunks that are ready; true when something was written. Lines are formatted
/// into one buffer per chunk (no per-line copy, handed to `out` per 64 KiB without a copy
/// when it holds nothing else). After a write error the rest is dropped (the caller stops).
fn write_ready(
    pipe: &mut Pipeline,
    opts: &mut PlainOptions,
    out: &mut StdoutQueue,
    err: &mut Option<io::Error>,
) -> bool {
    let mut wrote = false;
    let model = pipe.model().clone();
    let mut buf = std::mem::take(&mut opts.buf);
    // The buffer swapped in by `append` may be smaller.
    buf.reserve(OUT_BUFFER + 4096);
    let records = !opts.folded.as_ref().is_some_and(|f| f.replaces_records());
    while let Some(chunk) = pipe.next_chunk() {
        if let Some(folded) = &mut opts.folded {
            let tasks = model.read();
            for ev in &chunk.events {
                folded.observe(ev, &*tasks);
            }
        }
        if err.is_none() && records {
            // One read lock per chunk, and only when a filter or --json (argv) looks at the
            // model.
            let named = matches!(opts.format, Format::Json | Format::Perf(_));
            let tasks = (opts.filter.is_some() || named).then(|| model.read());
            for ev in &chunk.events {
                if let (Some(f), Some(tasks)) = (opts.filter.as_mut(), tasks.as_deref()) {
                    if !f(ev, tasks) {
                        continue;
                    }
                }
                wrote = true;
                match &opts.format {
                    Format::Plain => {
                        ev.write_line(&mut buf);
                        buf.push(b'\n');
                    }
                    Format::Perf(style) => {
                        crate::format::perf::write_perf(&mut buf, ev, style, tasks.as_deref());
                    }
                    // Into a Vec: cannot fail.
                    Format::Json => {
                        let _ = match tasks.as_deref() {
                            Some(tasks) => write_json_in(&mut buf, ev, tasks),
                            None => write_json(&mut buf, ev),
                        };
                    }
                }
                if buf.len() >= OUT_BUFFER {
                    out.append(&mut buf);
                }
            }
            if err.is_none() && !buf.is_empty() {
                out.append(&mut buf);
            }
            buf.clear();
        }
        pipe.recycle(chunk.events);
    }
    opts.buf = buf;
    wrote
}

/// Bytes of lines formatted before they are written.
const OUT_BUFFER: usize = 1 << 16;
