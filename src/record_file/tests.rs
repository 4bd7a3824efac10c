//! The recording reader's own glue (header, features, tracing data, framing, id lookup) on
//! crafted and arbitrary bytes: right answers on what perf writes, no panic, no hang and no
//! unbounded allocation on anything else.

use std::io::Cursor;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::ReadCounts;
use super::header::{self, Facts, FileAttr, FileHeader};
use super::stream::{Decoding, Stream};
use crate::event::{Batch, BufferPool, EventKind};
use crate::perf::record::{DEFAULT_SAMPLE_TYPE, SampleLayout};
use crate::stats::Stats;
use crate::testkit::records::*;

fn attr(sample_type: u64, ids: &[u64]) -> FileAttr {
    FileAttr {
        type_: 1,
        config: 0,
        sample_period: 4000,
        sample_type,
        flags: (1 << 18) | (1 << 10),
        clockid: None,
        regs_user: 0,
        ids: ids.to_vec(),
        name: Some("cpu-clock".into()),
        raw: Vec::new(),
    }
}

/// The batches a stream over `data` (records as a file's data section holds them) sends,
/// counting into `counts`.
fn stream(attrs: Vec<FileAttr>, data: &[u8], counts: Arc<ReadCounts>) -> Vec<Batch> {
    let header = FileHeader {
        attrs,
        data: header::Section {
            offset: 0,
            size: data.len() as u64,
        },
        ..FileHeader::default()
    };
    let mut s = Stream::new(
        Box::new(Cursor::new(data.to_vec())),
        header,
        false,
        false,
        counts,
    );
    let (tx, rx) = crossbeam_channel::unbounded();
    let stats = Stats::new(&[0, 1]);
    s.run(&tx, &BufferPool::new(4), &stats, &AtomicBool::new(false));
    drop(tx);
    rx.iter().collect()
}

/// Run a stream over `data` (records as a file's data section holds them); the events and
/// what was counted.
fn read(attrs: Vec<FileAttr>, data: &[u8]) -> (Vec<crate::event::Event>, Arc<ReadCounts>) {
    let counts = Arc::new(ReadCounts::default());
    let batches = stream(attrs, data, counts.clone());
    let mut events = Vec::new();
    let mut ended = false;
    for b in batches {
        assert!(!ended, "a batch after the last");
        ended = b.end;
        events.extend(b.events);
    }
    assert!(ended, "no last batch");
    (events, counts)
}

fn round() -> Vec<u8> {
    let mut r = vec![0u8; 8];
    r[0..4].copy_from_slice(&68u32.to_le_bytes());
    r[6..8].copy_from_slice(&8u16.to_le_bytes());
    r
}

#[test]
fn records_of_two_events_told_apart_by_their_ids() {
    let l = SampleLayout::default();
    let ids = |id, time| Ids {
        id,
        time,
        ..Ids::EXAMPLE
    };
    let mut data = Vec::new();
    data.extend(sample(&l, ids(7, 10), 0x1000, 1));
    data.extend(sample(&l, ids(9, 20), 0x2000, 2));
    data.extend(round());
    data.extend(fork(&l, ids(9, 30), 200, 100, 30));
    data.extend(round());
    let mut second = attr(DEFAULT_SAMPLE_TYPE, &[9]);
    second.name = Some("page-faults".into());
    let (events, counts) = read(vec![attr(DEFAULT_SAMPLE_TYPE, &[7]), second], &data);
    assert_eq!(events.len(), 3);
    assert_eq!(events[0].event_name(), Some("cpu-clock"));
    assert_eq!(events[1].event_name(), Some("page-faults"));
    assert!(matches!(events[2].kind, EventKind::Fork(_)));
    assert!(counts.summary().is_empty());
}

#[test]
fn id_without_identifier_is_found_where_perf_puts_it() {
    // perf record -g: sample_type ID (not IDENTIFIER), the same for both events.
    let st = 0x1 | 0x2 | 0x4 | 0x40 | 0x80 | 0x100;
    let l = SampleLayout::new(st, true).unwrap();
    let ids = |id| Ids { id, ..Ids::EXAMPLE };
    let mut data = sample(&l, ids(5), 0x1, 1);
    data.extend(sample(&l, ids(6), 0x2, 1));
    let mut dummy = attr(st, &[6]);
    dummy.name = Some("dummy:HG".into());
    let (events, _) = read(vec![attr(st, &[5]), dummy], &data);
    let names: Vec<_> = events.iter().map(|e| e.event_name()).collect();
    assert_eq!(names, [Some("cpu-clock"), Some("dummy:HG")]);
}

#[test]
fn unknown_records_are_counted_and_a_short_size_stops_with_a_reason() {
    let l = SampleLayout::default();
    let mut data = sample(&l, Ids::EXAMPLE, 1, 1);
    data.extend(RecordBuilder::new(17, 0).u64(0).finish(&l, Ids::EXAMPLE)); // KSYMBOL
    data.extend([9, 0, 0, 0, 0, 0, 4, 0]); // a size less than the header
    data.extend(sample(&l, Ids::EXAMPLE, 2, 1));
    let (events, counts) = read(vec![attr(DEFAULT_SAMPLE_TYPE, &[])], &data);
    assert_eq!(events.len(), 1);
    assert!(
        counts.summary()[0].contains("1 KSYMBOL"),
        "{:?}",
        counts.summary()
    );
    assert!(
        counts
            .failure
            .get()
            .is_some_and(|f| f.contains("less than its own header"))
    );
}

#[test]
fn samples_with_read_values_are_counted_not_decoded() {
    let st = DEFAULT_SAMPLE_TYPE | 0x10;
    let data = sample(&SampleLayout::default(), Ids::EXAMPLE, 1, 1);
    let (events, counts) = read(vec![attr(st, &[])], &data);
    assert!(events.is_empty());
    assert!(counts.summary()[0].contains("1 samples of 'cpu-clock'"));
}

#[test]
fn rounds_say_how_far_the_stream_is_complete() {
    let l = SampleLayout::default();
    let at = |t| Ids {
        time: t,
        ..Ids::EXAMPLE
    };
    let mut data = Vec::new();
    for (t, r) in [
        (100, false),
        (300, true),
        (200, false),
        (500, true),
        (400, true),
    ] {
        data.extend(sample(&l, at(t), 1, 1));
        if r {
            data.extend(round());
        }
    }
    let batches = stream(vec![attr(DEFAULT_SAMPLE_TYPE, &[])], &data, Arc::default());
    let nows: Vec<u64> = batches
        .iter()
        .map(|b| b.now.saturating_sub(crate::event::SLACK_NS))
        .collect();
    // Round 1 ends at 300, round 2 at 500: after round 2, up to 300 is complete; after round
    // 3, up to 500; then the end.
    assert_eq!(nows, [0, 300, 500, u64::MAX - crate::event::SLACK_NS]);
}

#[test]
fn a_stream_without_rounds_is_released_as_it_grows() {
    // No FINISHED_ROUND at all: the ordering window must not hold everything to the end.
    let l = SampleLayout::default();
    let mut data = Vec::new();
    for t in 1..=400u64 {
        data.extend(sample(
            &l,
            Ids {
                time: t,
                ..Ids::EXAMPLE
            },
            1,
            1,
        ));
    }
    let batches = stream(vec![attr(DEFAULT_SAMPLE_TYPE, &[])], &data, Arc::default());
    let complete: Vec<u64> = batches
        .iter()
        .filter(|b| !b.end)
        .map(|b| b.now.saturating_sub(crate::event::SLACK_NS))
        .collect();
    assert!(complete.iter().any(|&t| t > 0), "{complete:?}");
    assert!(complete.is_sorted());
}

#[test]
fn feature_sections_as_perf_writes_them() {
    let string = |s: &str| {
        let mut b = Vec::new();
        let mut body = s.as_bytes().to_vec();
        body.push(0);
        body.resize(body.len().div_ceil(64) * 64, 0);
        b.extend((body.len() as u32).to_le_bytes());
        b.extend(body);
        b
    };
    let mut f = Facts::default();
    f.feature(header::FEAT_HOSTNAME, &string("box\x1b[2J"));
    f.feature(header::FEAT_NRCPUS, &[4, 0, 0, 0, 2, 0, 0, 0]);
    let mut cmd = 2u32.to_le_bytes().to_vec();
    cmd.extend(string("perf"));
    cmd.extend(string("record"));
    f.feature(header::FEAT_CMDLINE, &cmd);
    assert_eq!(f.hostname.as_deref(), Some("box\x1b[2J"));
    assert_eq!(f.nr_cpus, Some((4, 2)));
    assert_eq!(f.cmdline, ["perf", "record"]);
    let info = super::RecordingInfo {
        input: super::Input::Stdin,
        facts: f,
        attrs: vec![],
        descs: vec![],
        cpus: vec![0],
        notes: vec![],
    };
    assert!(!info.describe().contains('\x1b'), "{}", info.describe());
}

#[test]
fn decoding_of_no_events_is_an_error_not_a_panic() {
    let d = Decoding::new(&[], &Facts::default(), false);
    assert!(
        d.decode(&sample(&SampleLayout::default(), Ids::EXAMPLE, 1, 1))
            .is_err()
    );
}

/// Records with a fork and a round between, as perf writes them, with `max`-byte compressed
/// records (`-z`) in place of the kernel's records.
fn compressed_data(n: u64, max: usize) -> (Vec<u8>, Vec<u8>) {
    let l = SampleLayout::default();
    let ids = |time| Ids {
        time,
        ..Ids::EXAMPLE
    };
    let mut plain = Vec::new();
    let mut packed = Vec::new();
    let mut z = zstd_safe::CCtx::create();
    for part in 0..2 {
        let mut kernel = Vec::new();
        for i in 0..n {
            kernel.extend(sample(&l, ids(part * 1000 + i), 0x1000 + i, 1));
        }
        kernel.extend(fork(&l, ids(part * 1000 + n), 200, 100, 30));
        plain.extend(&kernel);
        plain.extend(round());
        for r in super::compressed::tests::compress(&mut z, &kernel, max) {
            packed.extend(r);
        }
        packed.extend(round());
    }
    (plain, packed)
}

#[test]
fn compressed_records_read_as_the_records_they_hold() {
    let (plain, packed) = compressed_data(300, 211);
    let attrs = || vec![attr(DEFAULT_SAMPLE_TYPE, &[])];
    let (want, _) = read(attrs(), &plain);
    let (got, counts) = read(attrs(), &packed);
    assert_eq!(got.len(), 602, "{:?}", counts.failure.get());
    let key = |e: &crate::event::Event| (e.time, e.pid, e.record_type().index());
    assert_eq!(
        got.iter().map(key).collect::<Vec<_>>(),
        want.iter().map(key).collect::<Vec<_>>()
    );
    assert!(counts.summary().is_empty(), "{:?}", counts.summary());
    assert!(counts.failure.get().is_none());
}

#[test]
fn a_compressed_stream_cut_or_broken_stops_with_a_reason() {
    let attrs = || vec![attr(DEFAULT_SAMPLE_TYPE, &[])];
    // The compressed data ends inside its last record.
    let l = SampleLayout::default();
    let mut kernel = Vec::new();
    for i in 0..50 {
        kernel.extend(sample(&l, Ids::EXAMPLE, 0x1000 + i, 1));
    }
    let mut cut = Vec::new();
    for r in super::compressed::tests::compress(
        &mut zstd_safe::CCtx::create(),
        &kernel[..kernel.len() - 10],
        97,
    ) {
        cut.extend(r);
    }
    let (events, counts) = read(attrs(), &cut);
    assert_eq!(events.len(), 49);
    let why = counts.failure.get().cloned().unwrap_or_default();
    assert!(
        why.contains("inside a record of its compressed data"),
        "{why}"
    );
    // A zstd stream that is not one.
    let (_, mut broken) = compressed_data(300, 211);
    broken[8..12].copy_from_slice(b"nope");
    let (events, counts) = read(attrs(), &broken);
    assert!(events.is_empty());
    let why = counts.failure.get().cloned().unwrap_or_default();
    assert!(
        why.contains("compressed record at byte 0 does not decompress"),
        "{why}"
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

    #[test]
    fn any_compressed_bytes_end_the_stream(at in 0usize..4000, flips in proptest::collection::vec(proptest::prelude::any::<u8>(), 1..32), garbage in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
        let (_, mut packed) = compressed_data(60, 97);
        let at = at % packed.len();
        for (i, f) in flips.iter().enumerate() {
            if let Some(b) = packed.get_mut(at + i) {
                *b ^= f;
            }
        }
        // Arbitrary bytes in a COMPRESSED record of their own too.
        let mut rec = super::format::COMPRESSED.to_le_bytes().to_vec();
        rec.extend_from_slice(&0u16.to_le_bytes());
        rec.extend_from_slice(&((garbage.len() + 8) as u16).to_le_bytes());
        rec.extend(&garbage);
        packed.extend(rec);
        let (events, _) = read(vec![attr(DEFAULT_SAMPLE_TYPE, &[])], &packed);
        proptest::prop_assert!(events.len() <= 122);
    }

    #[test]
    fn any_file_header_is_read_or_refused(mut bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600), magic in proptest::prelude::any::<bool>()) {
        if magic && bytes.len() >= 8 {
            bytes[..8].copy_from_slice(header::MAGIC);
        }
        let len = bytes.len() as u64;
        let _ = header::read_file_header(&mut Cursor::new(bytes), len);
    }

    #[test]
    fn any_feature_and_tracing_data_is_read_or_refused(bit in 0u32..40, bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)) {
        let mut f = Facts::default();
        f.feature(bit, &bytes);
        let mut t = b"\x17\x08\x44tracing0.6\0\0\x08".to_vec();
        t.extend(&bytes);
        let _ = header::parse_tracing_data(&t);
    }

    #[test]
    fn any_record_bytes_end_the_stream(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..2000), two in proptest::prelude::any::<bool>()) {
        let mut attrs = vec![attr(DEFAULT_SAMPLE_TYPE, &[42])];
        if two {
            attrs.push(attr(DEFAULT_SAMPLE_TYPE | 0x400 | 0x20, &[43]));
        }
        let (events, _) = read(attrs, &bytes);
        proptest::prop_assert!(events.len() <= bytes.len() / 8);
    }
}
