//! The records of a recording, one after another: framed by their headers (every size
//! checked against what is left), decoded by perfwatch's ring decoder with the layout of the
//! attribute their id names, counted, and sent to the pipeline a round at a time.

use std::collections::HashMap;
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_channel::Sender;

use super::header::{self, FileAttr, FileHeader, u32_at, u64_at};
use super::{Input, ReadCounts, RecordingInfo};
use crate::event::tracepoint::Format;
use crate::event::{Batch, BufferPool, Event, EventDesc, EventKind, Mmap2Extra, RecordType};
use crate::perf::record::{
    self, DecodeError, HEADER_SIZE, RECORD_SAMPLE, SAMPLE_IDENTIFIER, SAMPLE_PERIOD,
    SAMPLE_REGS_USER, SAMPLE_STACK_USER, SampleLayout,
};
use crate::stats::Stats;

pub(crate) use super::format::{
    AUXTRACE, COMPRESSED, COMPRESSED2, EVENT_UPDATE, FINISHED_INIT, FINISHED_ROUND, HEADER_ATTR,
    HEADER_BUILD_ID, HEADER_EVENT_TYPE, HEADER_FEATURE, HEADER_TRACING_DATA,
};

/// The name of a record type, as perf spells it.
pub(crate) fn record_type_name(t: u32) -> String {
    let known = match t {
        1 => "MMAP",
        2 => "LOST",
        3 => "COMM",
        4 => "EXIT",
        5 => "THROTTLE",
        6 => "UNTHROTTLE",
        7 => "FORK",
        8 => "READ",
        9 => "SAMPLE",
        10 => "MMAP2",
        11 => "AUX",
        12 => "ITRACE_START",
        13 => "LOST_SAMPLES",
        14 => "SWITCH",
        15 => "SWITCH_CPU_WIDE",
        16 => "NAMESPACES",
        17 => "KSYMBOL",
        18 => "BPF_EVENT",
        19 => "CGROUP",
        20 => "TEXT_POKE",
        21 => "AUX_OUTPUT_HW_ID",
        64 => "HEADER_ATTR",
        65 => "HEADER_EVENT_TYPE",
        66 => "HEADER_TRACING_DATA",
        67 => "HEADER_BUILD_ID",
        68 => "FINISHED_ROUND",
        69 => "ID_INDEX",
        70 => "AUXTRACE_INFO",
        71 => "AUXTRACE",
        72 => "AUXTRACE_ERROR",
        73 => "THREAD_MAP",
        74 => "CPU_MAP",
        75 => "STAT_CONFIG",
        76 => "STAT",
        77 => "STAT_ROUND",
        78 => "EVENT_UPDATE",
        79 => "TIME_CONV",
        80 => "HEADER_FEATURE",
        81 => "COMPRESSED",
        82 => "FINISHED_INIT",
        83 => "COMPRESSED2",
        _ => return format!("type-{t}"),
    };
    known.to_string()
}

/// PERF_SAMPLE_READ: its values sit before the call chain, laid out by `read_format`.
const SAMPLE_READ: u64 = 0x10;

/// The sample_type bits of fields that come after RAW in a sample: perfwatch reads nothing
/// there, so they do not change where what it reads is.
const AFTER_RAW: u64 = !(0x7ff | SAMPLE_IDENTIFIER);
/// REGS_USER and STACK_USER: what `--call-graph dwarf` adds to a sample.
pub const DWARF: u64 = SAMPLE_REGS_USER | SAMPLE_STACK_USER;
const SAMPLE_BRANCH_STACK: u64 = 0x800;
/// The bits of the sample_id trailer of non-sample records.
const TRAILER_BITS: u64 = 0x2 | 0x4 | 0x40 | 0x200 | 0x80 | SAMPLE_IDENTIFIER;

/// How each attribute's records are decoded: its descriptor, its sample layout (when
/// perfwatch can lay its samples out), the layout of its side-band trailer, and the id index.
#[derive(Clone, Debug, Default)]
pub struct Decoding {
    pub descs: Vec<&'static EventDesc>,
    samples: Vec<Option<SampleLayout>>,
    trailers: Vec<SampleLayout>,
    ids: HashMap<u64, usize>,
    /// Every attribute carries PERF_SAMPLE_IDENTIFIER: the id is at a fixed place.
    identifier: bool,
}

impl Decoding {
    /// The decoding of these attributes (with tracepoint formats from `formats` by id).
    pub fn new(attrs: &[FileAttr], facts: &header::Facts, common_fields: bool) -> Decoding {
        let shown = attrs.iter().filter(|a| !a.is_dummy()).count();
        let mut d = Decoding {
            identifier: attrs.iter().all(|a| a.sample_type & SAMPLE_IDENTIFIER != 0),
            ..Decoding::default()
        };
        for (i, a) in attrs.iter().enumerate() {
            let format = (a.type_ == 2)
                .then(|| facts.formats.get(&a.config))
                .flatten()
                .and_then(|f| Format::parse(&f.name, &f.text).ok());
            let name = a
                .name
                .clone()
                .unwrap_or_else(|| format!("event-{}:{:#x}", a.type_, a.config));
            let desc = EventDesc {
                index: i.min(u16::MAX as usize) as u16,
                name: EventDesc::leak_name(&name),
                type_: a.type_,
                config: a.config,
                show_name: shown > 1 || format.is_some(),
                format,
                show_common: common_fields,
            }
            .intern();
            if a.sample_type & record::SAMPLE_CPU == 0 {
                super::side::mark_no_cpu(desc);
            }
            d.descs.push(desc);
            let mut st = a.sample_type & !AFTER_RAW;
            // `--call-graph dwarf`: the registers and stack copy follow RAW (unless a branch
            // stack comes between), for the pipeline's unwind step.
            if a.sample_type & DWARF == DWARF && a.sample_type & SAMPLE_BRANCH_STACK == 0 {
                st |= DWARF;
            }
            let sample = if st & SAMPLE_READ != 0 {
                None
            } else {
                SampleLayout::new(st, a.sample_id_all()).ok().map(|l| {
                    let l = l.with_regs_mask(a.regs_user);
                    if !a.freq() && st & SAMPLE_PERIOD == 0 {
                        l.with_fixed_period(a.sample_period)
                    } else {
                        l
                    }
                })
            };
            d.samples.push(sample);
            d.trailers.push(
                SampleLayout::new(a.sample_type & TRAILER_BITS, a.sample_id_all())
                    .unwrap_or_default(),
            );
            for &id in &a.ids {
                d.ids.insert(id, i);
            }
        }
        d
    }

    /// The attribute (its index) whose ids include `id`.
    pub(super) fn index_of(&self, id: u64) -> Option<usize> {
        self.ids.get(&id).copied()
    }

    /// The attribute a record belongs to.
    fn attr_of(&self, rec: &[u8], ty: u32) -> usize {
        if self.descs.len() <= 1 {
            return 0;
        }
        let id = if self.identifier {
            if ty == RECORD_SAMPLE {
                u64_at(rec, HEADER_SIZE)
            } else {
                rec.len().checked_sub(8).and_then(|at| u64_at(rec, at))
            }
        } else {
            // perf requires the id at the same place in every event's records: the first
            // event's layout finds it.
            let l = if ty == RECORD_SAMPLE {
                self.samples.first().copied().flatten()
            } else {
                self.trailers.first().copied()
            };
            l.and_then(|l| record::decode(rec, &l, 0).ok())
                .map(|e| e.id)
        };
        id.and_then(|id| self.ids.get(&id).copied()).unwrap_or(0)
    }

    /// Decode one record; `Ok(None)` for a sample whose layout perfwatch cannot read (its
    /// event's index is returned in the error slot instead).
    pub fn decode(&self, rec: &[u8]) -> Result<Result<Event, usize>, DecodeError> {
        let h = record::Header::parse(rec).ok_or(DecodeError::TooShort(rec.len()))?;
        if self.descs.is_empty() {
            return Err(DecodeError::UnsupportedSampleType(0));
        }
        let i = self.attr_of(rec, h.ty).min(self.descs.len() - 1);
        let layout = if h.ty == RECORD_SAMPLE {
            match self.samples[i] {
                Some(l) => l,
                None => return Ok(Err(i)),
            }
        } else {
            self.trailers[i]
        };
        record::decode_with(rec, &layout, self.descs[i], 0).map(Ok)
    }
}

/// A record's framing went wrong: reading stops here.
#[derive(Debug)]
enum Frame {
    End,
    Fail(String),
}

pub(crate) struct Stream {
    r: Box<dyn Read + Send>,
    pipe: bool,
    header: FileHeader,
    common_fields: bool,
    counts: Arc<ReadCounts>,
    decoding: Decoding,
    /// Attributes or features changed since `decoding` was built (pipe mode).
    stale: bool,
    offset: u64,
    buf: Vec<u8>,
    /// A record read ahead (pipe mode: the first one after the header records).
    pending: bool,
    /// `perf record -z`: the records decompressed from COMPRESSED records, handed out first.
    inflater: Option<Box<super::compressed::Inflater>>,
    /// `-o` beside `-i`: where each record read also goes.
    copy: Option<Box<dyn super::RecordCopy>>,
}

/// Events sent in one batch at most, rounds or not (a file without FINISHED_ROUND records).
const BATCH_MAX: usize = 4096;
/// Record bytes read without a FINISHED_ROUND after which the stream is taken as complete up
/// to its newest record: what the ordering window holds stays bounded in bytes, not only in
/// events, whatever a file (without rounds, or with huge records) does. Anything older
/// that comes after is passed on and counted as out of time order.
const ROUND_BYTES_MAX: u64 = if cfg!(test) { 4096 } else { 256 << 20 };

impl Stream {
    pub fn new(
        r: Box<dyn Read + Send>,
        header: FileHeader,
        pipe: bool,
        common_fields: bool,
        counts: Arc<ReadCounts>,
    ) -> Stream {
        let decoding = Decoding::new(&header.attrs, &header.facts, common_fields);
        Stream {
            r,
            pipe,
            offset: if pipe {
                header::PIPE_HEADER_SIZE
            } else {
                header.data.offset
            },
            header,
            common_fields,
            counts,
            decoding,
            stale: false,
            buf: Vec::with_capacity(1 << 16),
            pending: false,
            inflater: None,
            copy: None,
        }
    }

    pub(super) fn info(&mut self, input: Input) -> RecordingInfo {
        self.refresh();
        let f = &self.header.facts;
        let n = f.nr_cpus.map_or(1, |(avail, _)| avail.clamp(1, 4096));
        let mut notes = f.notes.clone();
        if self.header.attrs.iter().any(|a| a.type_ == 2)
            && f.formats.is_empty()
            && !self.pipe
            && !self.header.unfinished
        {
            notes.push(
                "the recording has no tracing data: tracepoint fields are not decoded".into(),
            );
        }
        RecordingInfo {
            input,
            facts: f.clone(),
            attrs: self.header.attrs.clone(),
            descs: self.decoding.descs.clone(),
            cpus: (0..n).collect(),
            notes,
        }
    }

    fn refresh(&mut self) {
        if self.stale {
            self.header.facts.name_events(&mut self.header.attrs);
            self.decoding =
                Decoding::new(&self.header.attrs, &self.header.facts, self.common_fields);
            self.stale = false;
        }
    }

    /// Read the next record into `self.buf`.
    fn next(&mut self) -> Result<(), Frame> {
        if self.pending {
            self.pending = false;
            return Ok(());
        }
        if let Some(z) = &mut self.inflater
            && let Some(r) = z.next_record(&mut self.buf)
        {
            return r.map_err(Frame::Fail);
        }
        self.buf.clear();
        self.buf.resize(HEADER_SIZE, 0);
        let at = self.offset;
        match read_full(&mut self.r, &mut self.buf[..]) {
            Ok(0) => return Err(self.end()),
            Ok(n) if n < HEADER_SIZE => {
                return Err(Frame::Fail(format!(
                    "the recording ends in the middle of a record's header, at byte {at}"
                )));
            }
            Ok(_) => {}
            Err(e) => return Err(Frame::Fail(format!("read error at byte {at}: {e}"))),
        }
        let size = u16::from_le_bytes([self.buf[6], self.buf[7]]) as usize;
        if size < HEADER_SIZE {
            return Err(Frame::Fail(format!(
                "the record at byte {at} says it is {size} bytes, less than its own header: the data cannot be followed past it"
            )));
        }
        self.buf.resize(size, 0);
        match read_full(&mut self.r, &mut self.buf[HEADER_SIZE..]) {
            Ok(n) if n == size - HEADER_SIZE => {}
            Ok(n) => {
                return Err(Frame::Fail(format!(
                    "the recording ends in the middle of a record: the record at byte {at} says it is {size} bytes, {} are there",
                    n + HEADER_SIZE
                )));
            }
            Err(e) => return Err(Frame::Fail(format!("read error at byte {at}: {e}"))),
        }
        self.offset += size as u64;
        Ok(())
    }

    /// Skip `n` bytes that follow a record (tracing data, AUXTRACE data), keeping at most
    /// `keep` of them.
    fn payload(&mut self, n: u64, keep: u64) -> Result<Vec<u8>, Frame> {
        let at = self.offset;
        let mut kept = Vec::new();
        let got = if n <= keep {
            kept.resize(n as usize, 0);
            read_full(&mut self.r, &mut kept).map(|k| k as u64)
        } else {
            std::io::copy(&mut (&mut self.r).take(n), &mut std::io::sink())
        }
        .map_err(|e| Frame::Fail(format!("read error at byte {at}: {e}")))?;
        if got < n {
            return Err(Frame::Fail(format!(
                "the recording ends inside the {n} bytes that follow the record before byte {at}"
            )));
        }
        self.offset += n;
        Ok(kept)
    }

    /// A header record (pipe mode, or any that turns up in a file): learn it. False when the
    /// record is not one.
    fn header_record(&mut self, ty: u32) -> Result<bool, Frame> {
        let body = &self.buf[HEADER_SIZE..];
        match ty {
            HEADER_ATTR => {
                let size = u32_at(body, 4).unwrap_or(0) as usize;
                let attr = (size >= 64)
                    .then(|| body.get(..size))
                    .flatten()
                    .and_then(FileAttr::parse);
                match attr {
                    Some(mut a)
                        if self.header.attrs.len() < 4096
                            && self.header.attrs.iter().map(|a| a.ids.len()).sum::<usize>()
                                < 1 << 20 =>
                    {
                        a.ids = body[size..]
                            .chunks_exact(8)
                            .filter_map(|c| u64_at(c, 0))
                            .collect();
                        self.header.attrs.push(a);
                    }
                    _ => self.count_unused(ty),
                }
            }
            HEADER_FEATURE => {
                if let Some(bit) = u64_at(body, 0) {
                    let bit = bit.min(u32::MAX as u64) as u32;
                    let data = body[8..].to_vec();
                    self.header.facts.feature(bit, &data);
                }
            }
            HEADER_BUILD_ID => {
                let rec = self.buf.clone();
                self.header.facts.build_id_record(&rec);
            }
            EVENT_UPDATE => {
                // {u64 type, u64 id, data}; type 2 (PERF_EVENT_UPDATE__NAME; 0 is the unit,
                // 1 the scale, 3 the CPUs): a NUL-terminated name.
                if let (Some(2), Some(id)) = (u64_at(body, 0), u64_at(body, 8)) {
                    let name = crate::text::until_nul(&body[16..]);
                    let name = String::from_utf8_lossy(name).into_owned();
                    if self.header.facts.names.len() < 1 << 20 {
                        self.header.facts.names.insert(id, name);
                    }
                }
            }
            HEADER_TRACING_DATA => {
                let n = u32_at(body, 0).unwrap_or(0) as u64;
                let data = self.payload(n, header::FEATURE_MAX)?;
                if data.len() as u64 == n {
                    self.header.facts.feature(header::FEAT_TRACING_DATA, &data);
                }
            }
            HEADER_EVENT_TYPE | FINISHED_INIT | 69 | 73 | 74 | 79 => self.count_unused(ty),
            _ => return Ok(false),
        }
        self.stale = true;
        Ok(true)
    }

    /// Pipe mode: the header records, up to the first record of the kernel's.
    pub(super) fn read_header_records(&mut self) -> anyhow::Result<()> {
        loop {
            match self.next() {
                Ok(()) => {}
                Err(Frame::End) => break,
                Err(Frame::Fail(why)) => anyhow::bail!(why),
            }
            let ty = u32_at(&self.buf, 0).unwrap_or(0);
            if ty < HEADER_ATTR || matches!(ty, FINISHED_ROUND | COMPRESSED | COMPRESSED2) {
                self.pending = true;
                break;
            }
            if !self.header_record(ty).map_err(|f| match f {
                Frame::Fail(s) => anyhow::anyhow!(s),
                Frame::End => anyhow::anyhow!("the recording ended"),
            })? {
                self.count_unused(ty);
            }
        }
        if self.header.attrs.is_empty() {
            anyhow::bail!(
                "the stream has no event attributes (HEADER_ATTR records): it is not perf's pipe format"
            );
        }
        self.stale = true;
        self.refresh();
        Ok(())
    }

    /// `-o` beside `-i`: hand every record read from here on to `copy` too.
    pub(super) fn copy_to(&mut self, copy: Box<dyn super::RecordCopy>) {
        self.copy = Some(copy);
    }

    /// The input ended: the end, unless a decompressed record was cut short.
    fn end(&self) -> Frame {
        match self.inflater.as_ref().map_or(0, |z| z.pending()) {
            0 => Frame::End,
            n => Frame::Fail(format!(
                "the recording ends inside a record of its compressed data ({n} bytes of it)"
            )),
        }
    }

    /// A COMPRESSED record in `self.buf`: decompress it (its records come next).
    fn inflate(&mut self, ty: u32) -> Result<(), String> {
        let at = self.offset - self.buf.len() as u64;
        let z = match &mut self.inflater {
            Some(z) => z,
            None => self
                .inflater
                .insert(Box::new(super::compressed::Inflater::new(
                    self.header.facts.compressed_mmap_len,
                )?)),
        };
        z.feed(&self.buf, ty, at)
    }

    fn count_unused(&self, ty: u32) {
        if let Ok(mut m) = self.counts.unused.lock() {
            *m.entry(ty).or_default() += 1;
        }
    }

    /// Read every record, sending batches, until the end, a failure, or `stop`.
    pub fn run(&mut self, tx: &Sender<Batch>, pool: &BufferPool, stats: &Stats, stop: &AtomicBool) {
        let mut round = Round::default();
        let mut events = pool.take(BATCH_MAX);
        let mut undecoded: HashMap<usize, u64> = HashMap::new();
        let build_ids = !self.header.facts.build_ids.is_empty();
        let mut round_bytes = 0u64;
        let mut side_seen = false;
        let result = loop {
            if stop.load(Ordering::Relaxed) {
                break Ok(());
            }
            match self.next() {
                Ok(()) => {}
                Err(Frame::End) => break Ok(()),
                // A stop while a pipe's writer wrote nothing: not the recording's fault.
                Err(Frame::Fail(_)) if stop.load(Ordering::Relaxed) => break Ok(()),
                Err(Frame::Fail(why)) => break Err(why),
            }
            let ty = u32_at(&self.buf, 0).unwrap_or(0);
            if let Some(c) = &mut self.copy
                && (ty < HEADER_ATTR
                    || matches!(ty, FINISHED_ROUND | 69 | 73 | 74 | 79 | FINISHED_INIT))
            {
                c.record(&self.buf);
            }
            round_bytes += self.buf.len() as u64;
            if ty == FINISHED_ROUND || round_bytes > ROUND_BYTES_MAX {
                let before = round.safe;
                if ty == FINISHED_ROUND {
                    round.finish();
                } else {
                    round.overflow();
                }
                round_bytes = 0;
                if (!events.is_empty() || round.safe != before)
                    && !send(tx, &mut events, pool, round.safe, stats)
                {
                    return;
                }
                if ty == FINISHED_ROUND {
                    continue;
                }
            }
            if ty >= HEADER_ATTR {
                match ty {
                    COMPRESSED | COMPRESSED2 => {
                        if let Err(why) = self.inflate(ty) {
                            break Err(why);
                        }
                        continue;
                    }
                    // perf stat's counts and AUX trace errors: beside the stream, for a
                    // perf script's hooks (see `side`).
                    ty if super::side::is_side(ty) => {
                        let d = &self.decoding;
                        let first = !side_seen;
                        if super::side::offer(ty, &self.buf, first, &d.descs, |id| d.index_of(id)) {
                            side_seen = true;
                        } else {
                            self.count_unused(ty);
                        }
                        continue;
                    }
                    AUXTRACE => {
                        let n = u64_at(&self.buf, HEADER_SIZE).unwrap_or(0);
                        self.count_unused(ty);
                        if let Err(Frame::Fail(why)) = self.payload(n, 0) {
                            break Err(why);
                        }
                        continue;
                    }
                    _ => {}
                }
                match self.header_record(ty) {
                    Ok(true) => {
                        self.refresh();
                        continue;
                    }
                    Ok(false) => {
                        self.count_unused(ty);
                        continue;
                    }
                    Err(Frame::Fail(why)) => break Err(why),
                    Err(Frame::End) => break Ok(()),
                }
            }
            match self.decoding.decode(&self.buf) {
                Ok(Ok(mut ev)) => {
                    if build_ids {
                        self.with_build_id(&mut ev);
                    }
                    round.saw(ev.time);
                    events.push(ev);
                }
                Ok(Err(attr)) => *undecoded.entry(attr).or_default() += 1,
                Err(DecodeError::UnknownType(t)) => self.count_unused(t),
                Err(_) => {
                    if let Some(c) = stats.cpus().first() {
                        c.malformed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            if events.len() >= BATCH_MAX && !send(tx, &mut events, pool, round.safe, stats) {
                return;
            }
        };
        if let Ok(mut m) = self.counts.undecoded.lock() {
            for (attr, n) in undecoded {
                let name = self.decoding.descs.get(attr).map_or("?", |d| d.name);
                *m.entry(name.to_string()).or_default() += n;
            }
        }
        if let Err(why) = result {
            let _ = self.counts.failure.set(why);
        }
        if let Some(c) = self.copy.take() {
            let _ = self.counts.copied.set(c.finish());
        }
        count(stats, &events);
        let _ = tx.send(Batch {
            cpu: 0,
            events,
            now: u64::MAX,
            end: true,
        });
    }

    /// A mapping of a file the recording has a build id for carries it: the symbolizer then
    /// reads that file only where its build id matches.
    fn with_build_id(&self, ev: &mut Event) {
        let EventKind::Mmap(m) = &mut ev.kind else {
            return;
        };
        let Some(id) = self.header.facts.build_ids.get(&m.filename).copied() else {
            return;
        };
        let extra = m.mmap2.get_or_insert(Mmap2Extra {
            maj: 0,
            min: 0,
            ino: 0,
            ino_generation: 0,
            prot: libc::PROT_EXEC as u32 | libc::PROT_READ as u32,
            flags: libc::MAP_PRIVATE as u32,
            build_id: None,
        });
        extra.build_id = Some(id);
        (extra.maj, extra.min, extra.ino, extra.ino_generation) = (0, 0, 0, 0);
    }
}

/// perf's rounds: no record of round N+2 is older than the newest of round N, so once round
/// N+1 is finished, everything up to round N's newest is complete.
#[derive(Default)]
struct Round {
    newest: u64,
    previous: u64,
    safe: u64,
}

impl Round {
    fn saw(&mut self, t: u64) {
        self.newest = self.newest.max(t);
    }

    fn finish(&mut self) {
        self.safe = self.safe.max(self.previous);
        self.previous = self.newest;
    }

    /// Too much without a round: complete up to the newest record seen.
    fn overflow(&mut self) {
        self.safe = self.safe.max(self.newest);
        self.previous = self.newest;
    }
}

/// Count and send `events` as a batch complete up to `safe`; false when nobody listens.
fn send(
    tx: &Sender<Batch>,
    events: &mut Vec<Event>,
    pool: &BufferPool,
    safe: u64,
    stats: &Stats,
) -> bool {
    count(stats, events);
    let batch = Batch {
        cpu: 0,
        events: std::mem::replace(events, pool.take(BATCH_MAX)),
        // The ordering stage keeps a slack for live readers' in-flight records.
        now: safe.saturating_add(crate::event::SLACK_NS),
        end: false,
    };
    tx.send(batch).is_ok()
}

fn count(stats: &Stats, events: &[Event]) {
    let Some(first) = stats.cpus().first() else {
        return;
    };
    // Counted per CPU here, published once per CPU per batch.
    let mut local: Vec<(u32, [u64; RecordType::COUNT], u64, u64)> = Vec::new();
    for e in events {
        let i = match local.iter().position(|l| l.0 == e.cpu) {
            Some(i) => i,
            None => {
                local.push((e.cpu, [0; RecordType::COUNT], 0, 0));
                local.len() - 1
            }
        };
        let l = &mut local[i];
        l.1[e.record_type().index()] += 1;
        match e.kind {
            EventKind::Lost { lost, .. } => l.2 += lost,
            EventKind::LostSamples { lost } => l.3 += lost,
            _ => {}
        }
    }
    for (cpu, records, lost, lost_samples) in local {
        let c = stats.cpu(cpu).unwrap_or(first);
        for (i, n) in records.iter().enumerate().filter(|(_, n)| **n > 0) {
            c.records[i].fetch_add(*n, Ordering::Relaxed);
        }
        c.lost.fetch_add(lost, Ordering::Relaxed);
        c.lost_samples.fetch_add(lost_samples, Ordering::Relaxed);
    }
}

/// Read until `buf` is full or the input ends; the bytes read.
fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
