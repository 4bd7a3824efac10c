//! Tracepoint formats and RAW decoding on arbitrary bytes: a format file chosen or written by
//! the input, then RAW data decoded with it into every field and formatted as `--plain` and
//! `--json` would.
#![no_main]

use libfuzzer_sys::fuzz_target;
use perfwatch::event::tracepoint::Format;
use perfwatch::event::{Event, EventDesc, EventKind};
use perfwatch::format::{self, write_event};
use perfwatch::testkit::tracepoints as craft;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    // Either a real format (the RAW bytes are then the fuzzed part), or a format file made of
    // the input up to its first NUL, followed by the RAW bytes.
    let (text, raw) = match sel % 3 {
        0 => (craft::SCHED_SWITCH.to_string(), rest),
        1 => (craft::SCHED_PROCESS_EXEC.to_string(), rest),
        _ => {
            let cut = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            (
                String::from_utf8_lossy(&rest[..cut]).into_owned(),
                rest.get(cut + 1..).unwrap_or(&[]),
            )
        }
    };
    let Ok(format) = Format::parse("fuzz:tp", &text) else {
        return;
    };
    for f in format.fields.iter() {
        let v = f.value(raw);
        let mut line = Vec::new();
        v.write_plain(&mut line);
        assert!(!line.contains(&b'\n'));
        assert!(std::str::from_utf8(&line).is_ok());
    }
    // Descriptors live for the process (they are interned): make them of the real formats
    // only, so that the fuzzer's millions of formats do not pile up.
    if sel % 3 == 2 {
        return;
    }
    let desc = EventDesc {
        index: 0,
        name: "fuzz:tp",
        type_: 2,
        config: format.id,
        format: Some(format),
        show_name: true,
        show_common: sel & 0x80 != 0,
    }
    .intern();
    let ev = Event {
        cpu: 0,
        pid: 1,
        tid: 1,
        time: 1,
        id: 1,
        kind: EventKind::Sample {
            ip: 1,
            period: 1,
            misc: 0,
            event: desc,
            raw: Some(raw.into()),
            callchain: None,
            user_stack: None,
            sym: None,
        },
    };
    for format in [format::Format::Plain, format::Format::Json] {
        let mut out = Vec::new();
        write_event(&mut out, &ev, format).unwrap();
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1);
        let s = std::str::from_utf8(&out).unwrap();
        assert!(!s.chars().any(|c| c.is_control() && c != '\n'), "{s:?}");
    }
});
