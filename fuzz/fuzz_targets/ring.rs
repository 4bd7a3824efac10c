//! The ring reader on an arbitrary data area with arbitrary head and tail (records with
//! lying sizes included), decoding everything it hands out.
#![no_main]

use libfuzzer_sys::fuzz_target;
use perfwatch::perf::record::{SampleLayout, decode};
use perfwatch::perf::ring::drain;

fuzz_target!(|data: &[u8]| {
    if data.len() < 16 + 64 {
        return;
    }
    let tail = u64::from_le_bytes(data[0..8].try_into().unwrap());
    let len = u64::from_le_bytes(data[8..16].try_into().unwrap()) % 8192;
    let area = &data[16..];
    let size = 1usize << (usize::BITS - 1 - area.len().leading_zeros());
    let area = &area[..size];
    let head = tail.wrapping_add(len);
    let layout = SampleLayout::default();
    let mut scratch = Vec::new();
    let mut bytes = 0u64;
    // SAFETY: `area` is a live buffer of `size` bytes that nothing else writes.
    let out = unsafe {
        drain(area.as_ptr(), size, tail, head, &mut scratch, |rec| {
            assert!(rec.len() >= 8 && rec.len() % 8 == 0);
            bytes += rec.len() as u64;
            let _ = decode(rec, &layout, 0);
        })
    };
    assert_eq!(out.new_tail, head);
    assert_eq!(bytes + out.skipped_bytes, len);
});
