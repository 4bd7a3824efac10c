//! The `--format perf` writer (perf script's default lines) on fuzzed tracepoint samples:
//! a real format (sched_switch, sched_process_exec) with RAW bytes, thread, CPU, time,
//! period and call chain of the input, under a session style of the input's choosing (which
//! fields each type shows, name width, call chains), with or without a process model that
//! names the thread (a hostile comm included). Every sample gives UTF-8 without control
//! characters, ending in a newline, and a sample without a chain gives exactly one line (a
//! shown chain adds a line a frame and perf script's blank line).
#![no_main]

use libfuzzer_sys::fuzz_target;
use perfwatch::callchain::Callchain;
use perfwatch::event::{Event, EventDesc};
use perfwatch::format::perf::{PerfStyle, SessionEvent, write_perf};
use perfwatch::process::ProcessModel;
use perfwatch::testkit::events::comm;
use perfwatch::testkit::tracepoints as craft;
use std::sync::OnceLock;

fn u64_of(data: &mut &[u8]) -> u64 {
    let (a, b) = data.split_at(8.min(data.len()));
    *data = b;
    let mut x = [0u8; 8];
    x[..a.len()].copy_from_slice(a);
    u64::from_le_bytes(x)
}

/// The two tracepoint descriptors, interned once (descriptors live for the process).
fn descs() -> &'static [&'static EventDesc; 2] {
    static D: OnceLock<[&'static EventDesc; 2]> = OnceLock::new();
    D.get_or_init(|| {
        [
            craft::desc(0, "sched:sched_switch", craft::SCHED_SWITCH),
            craft::desc(1, "sched:sched_process_exec", craft::SCHED_PROCESS_EXEC),
        ]
    })
}

fuzz_target!(|data: &[u8]| {
    let mut data = data;
    let sel = u64_of(&mut data);
    let desc = descs()[(sel & 1) as usize];
    let (pid, tid) = (u64_of(&mut data) as u32, u64_of(&mut data) as u32);
    let cpu = u64_of(&mut data) as u32;
    let time = u64_of(&mut data);
    let ip = u64_of(&mut data);
    // A call chain of the input's entries (markers included), or none.
    let chain_len = ((sel >> 8) & 0xff) as usize;
    let chain = (sel & 2 != 0).then(|| {
        let entries: Vec<u64> = (0..chain_len.min(data.len() / 8))
            .map(|_| u64_of(&mut data))
            .collect();
        Callchain::new(entries)
    });
    // A comm of up to 24 bytes of the input, the rest RAW.
    let comm_len = ((sel >> 16) & 0x1f) as usize;
    let (name, raw) = data.split_at(comm_len.min(data.len()));
    let mut kind = craft::sample(desc, ip, 0, raw.to_vec());
    if let perfwatch::event::EventKind::Sample {
        callchain, period, ..
    } = &mut kind
    {
        *callchain = chain;
        *period = sel >> 40;
    }
    let ev = Event {
        cpu,
        pid,
        tid,
        time,
        id: 1,
        kind,
    };
    // The session: the two tracepoints with sample types of the input, and a software event.
    let events = [
        SessionEvent {
            name: desc.name,
            type_: 2,
            sample_type: u64::from((sel >> 24) as u16) | if sel & 4 != 0 { 1 << 5 } else { 0 },
            dummy: false,
        },
        SessionEvent {
            name: if sel & 8 != 0 {
                "cpu-clock"
            } else {
                "a-rather-long-event-name"
            },
            type_: (sel >> 56) as u32 & 7,
            sample_type: sel >> 32 & 0x3ff,
            dummy: sel & 16 != 0,
        },
    ];
    let style = PerfStyle::new(&events);
    let tasks = (sel & 32 != 0).then(|| {
        let mut m = ProcessModel::new();
        m.apply(&[comm(cpu, time.saturating_sub(1), pid, name, sel & 64 != 0)]);
        m
    });
    let mut out = Vec::new();
    write_perf(&mut out, &ev, &style, tasks.as_ref());
    let s = std::str::from_utf8(&out).expect("UTF-8");
    assert!(s.ends_with('\n'), "{s:?}");
    assert!(
        !s.chars().any(|c| c.is_control() && c != '\n' && c != '\t'),
        "{s:?}"
    );
    // A shown chain goes one frame a line and ends with a blank line, as perf script's;
    // without a chain the sample is one line.
    if ev.callchain().is_none() {
        assert_eq!(s.matches('\n').count(), 1, "{s:?}");
    }
});
