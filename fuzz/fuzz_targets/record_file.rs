//! The perf.data reader (`-i FILE`, `-i -`) on arbitrary bytes, through the entry points `-i`
//! uses: the bytes as a file (header, attributes, feature sections, tracing data, then the
//! data section's records) or as perf's pipe stream (header records, then records), the first
//! byte choosing which. Each event read is then written as `--plain` and `--json` would; the
//! reader must refuse or read, never panic, and end its stream with exactly one last batch.
#![no_main]

use libfuzzer_sys::fuzz_target;
use perfwatch::format::{Format, write_event};
use perfwatch::testkit::fuzz::read_recording;

/// The two magics perf writes: most inputs that start with one get past the header check.
const MAGIC: &[u8; 8] = b"PERFILE2";

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let pipe = sel & 1 != 0;
    // Bit 1: put the magic (and, for a pipe, its 16-byte header size) in front, so that
    // the fuzzer spends its time past the header check.
    let mut bytes = Vec::with_capacity(rest.len() + 16);
    if sel & 2 != 0 {
        bytes.extend_from_slice(MAGIC);
        if pipe {
            bytes.extend_from_slice(&16u64.to_le_bytes());
        }
    }
    bytes.extend_from_slice(rest);
    let Ok(read) = read_recording(&bytes, pipe, sel & 4 != 0) else {
        return;
    };
    for s in [&read.about, &read.describe] {
        assert!(
            !s.chars().any(|c| c.is_control() && c != '\n' && c != '\t'),
            "{s:?}"
        );
    }
    let mut ended = false;
    let mut events = 0usize;
    for b in &read.batches {
        assert!(!ended, "a batch after the last");
        ended = b.end;
        for ev in &b.events {
            events += 1;
            for format in [Format::Plain, Format::Json] {
                let mut out = Vec::new();
                write_event(&mut out, ev, format).unwrap();
                assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1);
                assert!(std::str::from_utf8(&out).is_ok());
            }
        }
    }
    assert!(ended, "no last batch");
    // Every event comes from a record of at least 8 bytes.
    assert!(events <= bytes.len() / 8);
    let _ = read.summary;
});
