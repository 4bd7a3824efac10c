//! The record decoder on arbitrary bytes, with a sample layout chosen by the input (call
//! chains and RAW data included).
#![no_main]

use libfuzzer_sys::fuzz_target;
use perfwatch::perf::record::{SampleLayout, decode};

/// The sample_type bits the decoder lays out: IP, TID, TIME, ADDR, ID, CPU, PERIOD,
/// STREAM_ID, CALLCHAIN, RAW, IDENTIFIER.
const BITS: [u64; 11] = [1, 2, 4, 8, 64, 128, 256, 512, 32, 1024, 1 << 16];

fuzz_target!(|data: &[u8]| {
    let Some((sel, rec)) = data.split_first_chunk::<2>() else {
        return;
    };
    let sel = u16::from_le_bytes(*sel);
    let st = BITS
        .iter()
        .enumerate()
        .filter(|(i, _)| sel >> i & 1 == 1)
        .fold(0, |a, (_, b)| a | b);
    let Ok(layout) = SampleLayout::new(st, sel & 0x8000 != 0) else {
        return;
    };
    if let Ok(ev) = decode(rec, &layout, 0) {
        // A chain never holds more entries than the record had bytes for.
        if let Some(c) = ev.callchain() {
            assert!(c.entries().len() * 8 <= rec.len());
            for f in c.frames() {
                let _ = f.lookup_ip();
            }
        }
        // Formatting must hold for whatever decoded.
        let mut line = Vec::new();
        ev.write_line(&mut line);
        assert!(!line.contains(&b'\n'));
        assert!(std::str::from_utf8(&line).is_ok());
        let mut json = Vec::new();
        perfwatch::format::write_json(&mut json, &ev).unwrap();
        assert_eq!(json.iter().filter(|&&b| b == b'\n').count(), 1);
    }
});
