//! Builders of tracepoint RAW records and formats, for tests, benchmarks and the fuzz target.

use crate::event::tracepoint::Format;
use crate::event::{EventDesc, EventKind};

/// The descriptor of event `index` of a list: tracepoint `name` (`SYS:NAME`) with the
/// `format` file text (interned; its `ID:` is the config).
pub fn desc(index: u16, name: &'static str, format: &str) -> &'static EventDesc {
    let format = Format::parse(name, format).expect("a valid format");
    EventDesc {
        index,
        name,
        type_: perf_event_open_sys::bindings::PERF_TYPE_TRACEPOINT,
        config: format.id,
        format: Some(format),
        show_name: true,
        show_common: false,
    }
    .intern()
}

/// A sample of tracepoint `event` at `ip` with its `raw` record (period 1).
pub fn sample(event: &'static EventDesc, ip: u64, misc: u16, raw: Vec<u8>) -> EventKind {
    EventKind::Sample {
        ip,
        period: 1,
        misc,
        event,
        raw: Some(raw.into()),
        callchain: None,
        user_stack: None,
        sym: None,
    }
}

/// The common fields every tracepoint record starts with.
pub fn common(out: &mut Vec<u8>, ty: u16, pid: i32) {
    out.extend_from_slice(&ty.to_ne_bytes());
    out.push(0);
    out.push(1);
    out.extend_from_slice(&pid.to_ne_bytes());
}

fn comm16(out: &mut Vec<u8>, name: &[u8]) {
    let mut c = [0u8; 16];
    let n = name.len().min(15);
    c[..n].copy_from_slice(&name[..n]);
    out.extend_from_slice(&c);
}

/// The `format` file of tracepoint `$name` (`ID: $id`): the four common fields every
/// record starts with, then `$rest` (its own fields and `print fmt`), as Linux 6.x writes it.
macro_rules! format_file {
    ($name:literal, $id:literal, $rest:literal) => {
        concat!(
            "name: ",
            $name,
            "\nID: ",
            $id,
            "\nformat:\n",
            "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n",
            "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n",
            "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n",
            "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n",
            $rest
        )
    };
}
#[allow(unused_imports)] // used by the crate's own tests only
pub(crate) use format_file;

/// A `sched:sched_switch` format, as Linux 6.x writes it.
pub const SCHED_SWITCH: &str = format_file!(
    "sched_switch",
    "372",
    "
\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;
\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;
\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;
\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;

print fmt: \"prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d\", REC->prev_comm, REC->prev_pid, REC->prev_prio, (REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1)) ? __print_flags(REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1), \"|\", { 0x00000001, \"S\" }, { 0x00000002, \"D\" }, { 0x00000004, \"T\" }, { 0x00000008, \"t\" }, { 0x00000010, \"X\" }, { 0x00000020, \"Z\" }, { 0x00000040, \"P\" }, { 0x00000080, \"I\" }) : \"R\", REC->prev_state & (((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) ? \"+\" : \"\", REC->next_comm, REC->next_pid, REC->next_prio
"
);

/// A `sched:sched_process_exec` format, as Linux 6.x writes it.
pub const SCHED_PROCESS_EXEC: &str = format_file!(
    "sched_process_exec",
    "365",
    "
\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;
\tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;
\tfield:pid_t old_pid;\toffset:16;\tsize:4;\tsigned:1;

print fmt: \"filename=%s pid=%d old_pid=%d\", __get_str(filename), REC->pid, REC->old_pid
"
);

/// RAW bytes of a sched_switch record (as the kernel pads them: a multiple of 8 bytes
/// less the 4-byte size word).
#[allow(clippy::too_many_arguments)]
pub fn sched_switch(
    prev: &[u8],
    prev_pid: i32,
    prev_state: i64,
    next: &[u8],
    next_pid: i32,
) -> Vec<u8> {
    let mut r = Vec::with_capacity(68);
    common(&mut r, 372, prev_pid);
    comm16(&mut r, prev);
    r.extend_from_slice(&prev_pid.to_ne_bytes());
    r.extend_from_slice(&120i32.to_ne_bytes());
    r.extend_from_slice(&prev_state.to_ne_bytes());
    comm16(&mut r, next);
    r.extend_from_slice(&next_pid.to_ne_bytes());
    r.extend_from_slice(&120i32.to_ne_bytes());
    pad(r)
}

/// RAW bytes of a sched_process_exec record.
pub fn sched_process_exec(filename: &[u8], pid: i32, old_pid: i32) -> Vec<u8> {
    let mut r = Vec::with_capacity(64);
    common(&mut r, 365, pid);
    let len = filename.len() as u32 + 1;
    r.extend_from_slice(&((len << 16) | 20).to_ne_bytes());
    r.extend_from_slice(&pid.to_ne_bytes());
    r.extend_from_slice(&old_pid.to_ne_bytes());
    r.extend_from_slice(filename);
    r.push(0);
    pad(r)
}

fn pad(mut r: Vec<u8>) -> Vec<u8> {
    while (r.len() + 4) % 8 != 0 {
        r.push(0);
    }
    r
}
