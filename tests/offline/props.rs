//! Property tests (seconds in CI): the decoder and the ring reader take arbitrary bytes,
//! arbitrary head/tail and lying sizes without panicking or reading out of bounds, and
//! formatting keeps every line one line, whatever the names hold.

use perfwatch::event::{Event, EventKind, MmapRecord};
use perfwatch::format::{Format, write_event};
use perfwatch::perf::record::{DEFAULT_SAMPLE_TYPE, SampleLayout, decode};
use perfwatch::perf::ring::drain;
use perfwatch::testkit::records::{self as craft, Ids};
use proptest::prelude::*;

fn layouts() -> impl Strategy<Value = SampleLayout> {
    // Any subset of the bits the decoder lays out, with and without sample_id_all (call
    // chains, RAW, and --call-graph dwarf's user registers and stack copy among them).
    (0u64..(1 << 13), any::<bool>()).prop_map(|(bits, all)| {
        let chosen = [
            1u64,
            2,
            4,
            8,
            64,
            128,
            256,
            512,
            1 << 16,
            1 << 5,
            1 << 10,
            1 << 12,
            1 << 13,
        ];
        let st = chosen
            .iter()
            .enumerate()
            .filter(|(i, _)| bits & (1 << i) != 0)
            .fold(0, |a, (_, b)| a | b);
        SampleLayout::new(st, all).unwrap()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512), layout in layouts(), cpu in any::<u32>()) {
        let _ = decode(&bytes, &layout, cpu);
    }

    #[test]
    fn decode_of_typed_garbage_never_panics(ty in 0u32..25, misc in any::<u16>(), body in proptest::collection::vec(any::<u8>(), 0..200), layout in layouts()) {
        let mut rec = Vec::new();
        rec.extend_from_slice(&ty.to_ne_bytes());
        rec.extend_from_slice(&misc.to_ne_bytes());
        rec.extend_from_slice(&((8 + body.len()) as u16).to_ne_bytes());
        rec.extend_from_slice(&body);
        let _ = decode(&rec, &layout, 0);
    }

    #[test]
    fn ring_reader_survives_arbitrary_rings(
        data in proptest::collection::vec(any::<u8>(), 64..2048),
        tail in any::<u64>(),
        len in 0u64..4096,
    ) {
        let size = data.len().next_power_of_two() / 2;
        let data = &data[..size];
        let head = tail.wrapping_add(len);
        let mut scratch = Vec::new();
        let mut seen = 0u64;
        // SAFETY: `data` is a live buffer of `size` bytes.
        let out = unsafe { drain(data.as_ptr(), size, tail, head, &mut scratch, |r| {
            assert!(r.len() >= 8 && r.len() % 8 == 0);
            seen += r.len() as u64;
        }) };
        prop_assert_eq!(out.new_tail, head);
        prop_assert_eq!(seen + out.skipped_bytes, len);
    }

    #[test]
    fn well_formed_rings_decode_exactly(pids in proptest::collection::vec(1u32..100_000, 1..60), start in 0u64..100_000) {
        let l = SampleLayout::new(DEFAULT_SAMPLE_TYPE, true).unwrap();
        let recs: Vec<Vec<u8>> = pids.iter().enumerate().map(|(i, &p)| {
            let ids = Ids { pid: p, tid: p, time: i as u64, id: 1, cpu: 0 };
            match i % 4 {
                0 => craft::fork(&l, ids, p, 1, 5),
                1 => craft::comm(&l, ids, p, b"name", true),
                2 => craft::mmap2(&l, ids, p, 0x1000, 0x2000, b"/lib/x.so"),
                _ => craft::sample(&l, ids, 0xffff, 10),
            }
        }).collect();
        let size = 8192usize;
        let start = start * 8;
        let mut data = vec![0u8; size];
        let mut pos = start;
        for r in &recs {
            for (k, b) in r.iter().enumerate() {
                data[((pos + k as u64) % size as u64) as usize] = *b;
            }
            pos += r.len() as u64;
        }
        prop_assume!(pos - start <= size as u64);
        let mut scratch = Vec::new();
        let mut got = Vec::new();
        // SAFETY: `data` is a live buffer of `size` bytes.
        let out = unsafe { drain(data.as_ptr(), size, start, pos, &mut scratch, |r| got.push(decode(r, &l, 0).unwrap())) };
        prop_assert_eq!(out.skipped_bytes, 0);
        prop_assert_eq!(got.len(), recs.len());
        for (e, &p) in got.iter().zip(&pids) {
            prop_assert_eq!(e.pid, p);
        }
    }

    #[test]
    fn lines_stay_one_line_and_json_stays_json(name in proptest::collection::vec(any::<u8>(), 0..64)) {
        let kinds = [
            EventKind::Comm { pid: 1, tid: 1, comm: name.clone().into(), exec: true },
            EventKind::Mmap(Box::new(MmapRecord { pid: 1, tid: 1, start: 0, len: 1, pgoff: 0, filename: name.clone().into(), mmap2: None })),
        ];
        for kind in kinds {
            let ev = Event { cpu: 0, pid: 1, tid: 1, time: 0, id: 0, kind };
            let mut plain = Vec::new();
            write_event(&mut plain, &ev, Format::Plain).unwrap();
            let line = String::from_utf8(plain).unwrap();
            prop_assert_eq!(line.matches('\n').count(), 1);
            prop_assert!(!line.trim_end_matches('\n').chars().any(|c| c.is_control()));
            let mut json = Vec::new();
            write_event(&mut json, &ev, Format::Json).unwrap();
            let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
            let text = v.get("comm").or(v.get("filename")).and_then(|s| s.as_str()).unwrap().to_string();
            prop_assert!(!text.chars().any(|c| c.is_control()));
            // The same escaped text in both formats (in `--plain`, quoted when it holds a
            // separator of the line).
            let mut value = Vec::new();
            perfwatch::text::push_plain_escaped(text.as_bytes(), &mut value);
            let shown = format!("{} }}", String::from_utf8(value).unwrap());
            prop_assert!(line.contains(&shown));
        }
    }
}
