//! The symbolizer's text parsers on arbitrary bytes: kallsyms (with /proc/modules), perf
//! maps fed in arbitrary pieces (against a one-shot parse), and name demangling.
#![no_main]

use libfuzzer_sys::fuzz_target;
use perfwatch::symbols::demangle::display_name;
use perfwatch::symbols::kernel;
use perfwatch::symbols::perfmap::PerfMap;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let (a, b) = rest.split_at(rest.len() / 2);
    match sel % 3 {
        0 => {
            if let Ok(k) = kernel::parse(a, Some(b), 1 << 24) {
                for probe in b.chunks(8).filter(|c| c.len() == 8) {
                    let addr = u64::from_le_bytes(probe.try_into().unwrap());
                    let _ = k.lookup(addr);
                }
            }
        }
        1 => {
            let mut whole = PerfMap::new();
            let _ = whole.feed(rest, 1 << 24);
            let mut pieces = PerfMap::new();
            let cut = (sel as usize * 7) % (rest.len() + 1);
            let _ = pieces.feed(&rest[..cut], 1 << 24);
            let _ = pieces.feed(&rest[cut..], 1 << 24);
            // Feeding in pieces gives the same map as feeding at once.
            assert!(whole.extents().eq(pieces.extents()));
            let mut last_end = 0;
            for (s, e, _) in whole.extents() {
                assert!(s < e && s >= last_end);
                last_end = e;
            }
        }
        _ => {
            let shown = display_name(rest);
            assert!(shown.len() <= perfwatch::symbols::demangle::MAX_DISPLAY + 3);
            assert!(!shown.chars().any(|c| c.is_control()));
        }
    }
});
