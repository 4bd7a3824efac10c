//! The record decoder on arbitrary bytes, with a sample layout chosen by the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use perfwatch::perf::record::{SampleLayout, decode};

/// The sample_type bits the decoder lays out.
const BITS: [u64; 9] = [1, 2, 4, 8, 64, 128, 256, 512, 1 << 16];

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rec)) = data.split_first() else { return };
    let st = BITS.iter().enumerate().filter(|(i, _)| sel as u64 >> (i % 8) & 1 == 1).fold(0, |a, (_, b)| a | b);
    let Ok(layout) = SampleLayout::new(st, sel & 0x80 != 0) else { return };
    if let Ok(ev) = decode(rec, &layout, 0) {
        // Formatting must hold for whatever decoded.
        let mut line = Vec::new();
        ev.write_line(&mut line);
        assert!(!line.contains(&b'\n'));
        assert!(std::str::from_utf8(&line).is_ok());
    }
});
