//! Property tests of the symbolizer's parsers (seconds in CI; `fuzz/` has the long runs):
//! ELF files with arbitrary corruption, kallsyms and perf maps of arbitrary bytes, perf maps
//! fed in arbitrary pieces and checked against a plain model, and names of any bytes.

use perfwatch::symbols::demangle::{MAX_DISPLAY, display_name};
use perfwatch::symbols::elf::parse_bytes;
use perfwatch::symbols::kernel;
use perfwatch::symbols::perfmap::PerfMap;
use proptest::prelude::*;

/// A small real ELF file to corrupt.
fn seed_elf() -> &'static [u8] {
    static SEED: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    SEED.get_or_init(|| std::fs::read("/bin/true").expect("/bin/true"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn corrupt_elf_files_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..40),
        cut in any::<prop::sample::Index>(),
        header_only in any::<bool>(),
    ) {
        let mut elf = seed_elf().to_vec();
        // Most of the interesting fields are in the first 4 KiB (headers) and the section
        // headers at the end; hit both.
        for (i, v) in flips {
            let at = if header_only { i.index(elf.len().min(4096)) } else { i.index(elf.len()) };
            elf[at] = v;
        }
        if !header_only {
            elf.truncate(cut.index(elf.len() + 1));
        }
        let _ = parse_bytes(&elf);
    }

    #[test]
    fn arbitrary_bytes_are_never_taken_for_elf_symbols(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = parse_bytes(&bytes);
    }

    #[test]
    fn kallsyms_of_any_bytes_parses_and_names_only_within_extents(
        text in proptest::collection::vec(any::<u8>(), 0..4096),
        lines in proptest::collection::vec((0x1000u64..0x2000, "[tTwWdDr]", "[a-z_]{1,8}"), 0..40),
        probes in proptest::collection::vec(0x1000u64..0x2100, 0..20),
    ) {
        let _ = kernel::parse(&text, Some(&text), 1 << 20);
        let mut k = String::new();
        for (a, t, n) in &lines {
            k.push_str(&format!("{a:016x} {t} {n}\n"));
        }
        let parsed = kernel::parse(k.as_bytes(), None, 1 << 20).unwrap();
        for p in probes {
            if let Some(s) = parsed.lookup(p) {
                // The named symbol starts at p - offset and is a text symbol of the input.
                let start = p - s.offset;
                prop_assert!(lines.iter().any(|(a, t, n)| *a == start
                    && "tTwW".contains(t.as_str())
                    && n.as_bytes() == s.name));
                // No symbol of any kind starts between it and p.
                prop_assert!(!lines.iter().any(|(a, _, _)| *a > start && *a <= p));
            }
        }
    }

    #[test]
    fn perf_maps_name_each_address_after_the_last_line_that_covers_it(
        entries in proptest::collection::vec((0u64..64, 1u64..16, 0u8..8), 0..30),
        garbage in proptest::collection::vec(any::<u8>(), 0..64),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..4),
    ) {
        let mut text = Vec::new();
        for (i, (s, z, g)) in entries.iter().enumerate() {
            if *g == 0 {
                text.extend_from_slice(&garbage);
                text.push(b'\n');
            }
            text.extend_from_slice(format!("{:x} {:x} f{i}\n", 0x1000 + s, z).as_bytes());
        }
        // Fed in arbitrary pieces.
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(text.len() + 1)).collect();
        points.sort();
        let mut map = PerfMap::new();
        let mut from = 0;
        for p in points.into_iter().chain([text.len()]) {
            map.feed(&text[from..p], usize::MAX).unwrap();
            from = p;
        }
        for addr in 0x1000u64..0x1000 + 80 {
            let want = entries
                .iter()
                .enumerate()
                .rev()
                .find(|(_, (s, z, _))| addr >= 0x1000 + s && addr < 0x1000 + s + z)
                .map(|(i, _)| format!("f{i}"));
            let got = map.find(addr).map(|(_, n)| String::from_utf8_lossy(n).into_owned());
            prop_assert_eq!(got, want, "at {:#x}", addr);
        }
        let mut whole = PerfMap::new();
        whole.feed(&text, usize::MAX).unwrap();
        prop_assert!(whole.extents().eq(map.extents()));
    }

    #[test]
    fn names_of_any_bytes_are_one_escaped_bounded_line(name in proptest::collection::vec(any::<u8>(), 0..3000)) {
        let shown = display_name(&name);
        prop_assert!(shown.len() <= MAX_DISPLAY + 3);
        prop_assert!(!shown.chars().any(|c| c.is_control()));
    }

    #[test]
    fn mangled_looking_names_never_panic(tail in "[A-Za-z0-9_$.]{0,200}", prefix in prop::sample::select(vec!["_Z", "_ZN", "_R", "_RNv", "_ZZ", "_ZTV"])) {
        let shown = display_name(format!("{prefix}{tail}").as_bytes());
        prop_assert!(shown.len() <= MAX_DISPLAY + 3);
    }
}
