//! Decoding of perf ring-buffer records into [`Event`]s.
//!
//! Layouts follow `include/uapi/linux/perf_event.h`. Everything is keyed by the attr's
//! `sample_type` in one place, [`SampleLayout`], computed once per event. Decoding never
//! trusts a size: a record that is too short for what its type claims is an error, not a
//! panic or an out-of-bounds read.

use perf_event_open_sys::bindings as sys;

use crate::callchain::Callchain;
use crate::event::{
    BuildId, Event, EventDesc, EventKind, Mmap2Extra, MmapRecord, TaskRecord, UNNAMED, UserRegs,
    UserStack,
};
use crate::text::until_nul;

pub(crate) const HEADER_SIZE: usize = 8;

/// The record types (`PERF_RECORD_*`) perfwatch reads.
pub use sys::PERF_RECORD_COMM as RECORD_COMM;
pub(crate) use sys::{
    PERF_RECORD_EXIT as RECORD_EXIT, PERF_RECORD_FORK as RECORD_FORK,
    PERF_RECORD_LOST as RECORD_LOST, PERF_RECORD_LOST_SAMPLES as RECORD_LOST_SAMPLES,
    PERF_RECORD_MMAP as RECORD_MMAP, PERF_RECORD_MMAP2 as RECORD_MMAP2,
    PERF_RECORD_SAMPLE as RECORD_SAMPLE, PERF_RECORD_SWITCH as RECORD_SWITCH,
    PERF_RECORD_SWITCH_CPU_WIDE as RECORD_SWITCH_CPU_WIDE, PERF_RECORD_THROTTLE as RECORD_THROTTLE,
    PERF_RECORD_UNTHROTTLE as RECORD_UNTHROTTLE,
};

pub(crate) const MISC_COMM_EXEC: u16 = sys::PERF_RECORD_MISC_COMM_EXEC as u16;
pub(crate) const MISC_SWITCH_OUT: u16 = sys::PERF_RECORD_MISC_SWITCH_OUT as u16;
pub(crate) const MISC_SWITCH_OUT_PREEMPT: u16 = sys::PERF_RECORD_MISC_SWITCH_OUT_PREEMPT as u16;
pub(crate) const MISC_MMAP_BUILD_ID: u16 = sys::PERF_RECORD_MISC_MMAP_BUILD_ID as u16;

pub(crate) const SAMPLE_IP: u64 = sys::PERF_SAMPLE_IP as u64;
pub(crate) const SAMPLE_TID: u64 = sys::PERF_SAMPLE_TID as u64;
pub(crate) const SAMPLE_TIME: u64 = sys::PERF_SAMPLE_TIME as u64;
pub(crate) const SAMPLE_ADDR: u64 = sys::PERF_SAMPLE_ADDR as u64;
pub(crate) const SAMPLE_ID: u64 = sys::PERF_SAMPLE_ID as u64;
pub(crate) const SAMPLE_STREAM_ID: u64 = sys::PERF_SAMPLE_STREAM_ID as u64;
pub(crate) const SAMPLE_CPU: u64 = sys::PERF_SAMPLE_CPU as u64;
pub const SAMPLE_PERIOD: u64 = sys::PERF_SAMPLE_PERIOD as u64;
pub(crate) const SAMPLE_IDENTIFIER: u64 = sys::PERF_SAMPLE_IDENTIFIER as u64;
pub const SAMPLE_RAW: u64 = sys::PERF_SAMPLE_RAW as u64;
pub const SAMPLE_CALLCHAIN: u64 = sys::PERF_SAMPLE_CALLCHAIN as u64;
pub(crate) const SAMPLE_REGS_USER: u64 = sys::PERF_SAMPLE_REGS_USER as u64;
pub(crate) const SAMPLE_STACK_USER: u64 = sys::PERF_SAMPLE_STACK_USER as u64;

/// The user registers `--call-graph dwarf` asks for (`sample_regs_user`), x86_64's
/// `PERF_REG_X86_BP`, `_SP` and `_IP` (bits 6, 7, 8 of arch/x86/include/uapi/asm/perf_regs.h):
/// what the unwinder needs to start (perf's DWARF_MINIMAL_REGS is IP and SP; BP lets a frame
/// without unwind rules fall back to its frame pointer). The kernel writes them in bit order.
pub(crate) const DWARF_REGS_MASK: u64 = (1 << 6) | (1 << 7) | (1 << 8);

/// The sample_type perfwatch asks for: enough for the `sample_*` fields of every record.
pub const DEFAULT_SAMPLE_TYPE: u64 =
    SAMPLE_IDENTIFIER | SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_PERIOD;

/// The sample_type bits this decoder can lay out. Others change the layout in ways it does
/// not follow, so they are refused when the layout is built.
const SUPPORTED_SAMPLE_TYPE: u64 = SAMPLE_IDENTIFIER
    | SAMPLE_IP
    | SAMPLE_TID
    | SAMPLE_TIME
    | SAMPLE_ADDR
    | SAMPLE_ID
    | SAMPLE_STREAM_ID
    | SAMPLE_CPU
    | SAMPLE_PERIOD
    | SAMPLE_CALLCHAIN
    | SAMPLE_RAW
    | SAMPLE_REGS_USER
    | SAMPLE_STACK_USER;

/// Where the fields are, for one `sample_type`: computed once, used for every record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleLayout {
    sample_type: u64,
    /// Whether non-sample records carry the sample_id trailer (`sample_id_all`).
    sample_id_all: bool,
    /// Size of the sample_id trailer of non-sample records.
    trailer_len: usize,
    // Offsets inside the trailer, from its start.
    tr_tid: Option<usize>,
    tr_time: Option<usize>,
    tr_id: Option<usize>,
    tr_cpu: Option<usize>,
    /// The period samples report when the layout has no PERIOD (a fixed `sample_period`).
    fixed_period: u64,
    /// `sample_regs_user`: which registers REGS_USER holds (perfwatch's own: BP, SP, IP).
    regs_mask: u64,
}

impl SampleLayout {
    pub fn new(sample_type: u64, sample_id_all: bool) -> Result<SampleLayout, DecodeError> {
        if sample_type & !SUPPORTED_SAMPLE_TYPE != 0 {
            return Err(DecodeError::UnsupportedSampleType(sample_type));
        }
        let mut off = 0;
        let mut take = |bit: u64| {
            if sample_type & bit != 0 {
                let at = off;
                off += 8;
                Some(at)
            } else {
                None
            }
        };
        // struct sample_id order: TID, TIME, ID, STREAM_ID, CPU, IDENTIFIER.
        let tr_tid = take(SAMPLE_TID);
        let tr_time = take(SAMPLE_TIME);
        let id = take(SAMPLE_ID);
        let _stream = take(SAMPLE_STREAM_ID);
        let tr_cpu = take(SAMPLE_CPU);
        let ident = take(SAMPLE_IDENTIFIER);
        Ok(SampleLayout {
            sample_type,
            sample_id_all,
            trailer_len: if sample_id_all { off } else { 0 },
            tr_tid,
            tr_time,
            tr_id: ident.or(id),
            tr_cpu,
            fixed_period: 0,
            regs_mask: DWARF_REGS_MASK,
        })
    }

    /// The layout of samples whose REGS_USER holds the registers of `sample_regs_user` (a
    /// recording's: `perf record --call-graph dwarf` asks for all of them).
    pub fn with_regs_mask(self, mask: u64) -> SampleLayout {
        SampleLayout {
            regs_mask: mask,
            ..self
        }
    }

    /// The period to report for samples of an event with a fixed `sample_period`, which
    /// does not ask the kernel for PERIOD.
    pub fn with_fixed_period(self, period: u64) -> SampleLayout {
        SampleLayout {
            fixed_period: period,
            ..self
        }
    }

    pub fn sample_type(&self) -> u64 {
        self.sample_type
    }

    /// Whether non-sample records carry the sample_id trailer.
    pub fn sample_id_all(&self) -> bool {
        self.sample_id_all
    }

    /// Length of the sample_id trailer on non-sample records.
    #[cfg(test)]
    pub(crate) fn trailer_len(&self) -> usize {
        self.trailer_len
    }

    fn has(&self, bit: u64) -> bool {
        self.sample_type & bit != 0
    }
}

impl Default for SampleLayout {
    fn default() -> Self {
        // DEFAULT_SAMPLE_TYPE only has supported bits.
        match SampleLayout::new(DEFAULT_SAMPLE_TYPE, true) {
            Ok(l) => l,
            Err(_) => unreachable!("the default sample type is supported"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("record of {0} bytes is shorter than its header")]
    TooShort(usize),
    #[error("record type {ty} of {size} bytes is too short for its fields")]
    Truncated { ty: u32, size: usize },
    #[error("unknown record type {0}")]
    UnknownType(u32),
    #[error("sample_type {0:#x} has fields this decoder does not lay out")]
    UnsupportedSampleType(u64),
}

/// The fixed header of every record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub ty: u32,
    pub misc: u16,
    pub size: u16,
}

impl Header {
    pub fn parse(b: &[u8]) -> Option<Header> {
        Some(Header {
            ty: u32::from_ne_bytes(b.get(0..4)?.try_into().ok()?),
            misc: u16::from_ne_bytes(b.get(4..6)?.try_into().ok()?),
            size: u16::from_ne_bytes(b.get(6..8)?.try_into().ok()?),
        })
    }
}

#[inline]
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

#[inline]
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Which event each record of a ring belongs to, and so how to lay it out: several events
/// write into one ring (PERF_EVENT_IOC_SET_OUTPUT), each with its own `sample_type` (RAW for
/// tracepoints only), told apart by PERF_SAMPLE_IDENTIFIER, which sits at a fixed place in
/// every record whatever the rest of the layout: first after the header in a sample, last in
/// the sample_id trailer of the others.
#[derive(Clone, Debug)]
pub struct EventDecoder {
    /// By event index: the layout and the descriptor samples carry.
    events: Vec<(SampleLayout, &'static EventDesc)>,
    /// (kernel event id, event index), sorted by id. Inherited events report their parent's
    /// id, so the ids of the fds perfwatch opened are all there is to know.
    ids: Vec<(u64, u16)>,
}

impl EventDecoder {
    /// One event: no lookup at all.
    pub fn single(layout: SampleLayout, desc: &'static EventDesc) -> EventDecoder {
        EventDecoder {
            events: vec![(layout, desc)],
            ids: Vec::new(),
        }
    }

    /// Several events, each with its layout, and the ids of the fds opened for them. With
    /// more than one event, every layout must carry PERF_SAMPLE_IDENTIFIER and the same
    /// trailer.
    pub fn new(
        events: Vec<(SampleLayout, &'static EventDesc)>,
        mut ids: Vec<(u64, u16)>,
    ) -> Result<EventDecoder, DecodeError> {
        let Some((first, _)) = events.first() else {
            return Err(DecodeError::UnsupportedSampleType(0));
        };
        if events.len() > 1 {
            for (l, _) in &events {
                if !l.has(SAMPLE_IDENTIFIER)
                    || l.trailer_len != first.trailer_len
                    || l.sample_id_all != first.sample_id_all
                {
                    return Err(DecodeError::UnsupportedSampleType(l.sample_type));
                }
            }
        }
        ids.sort_unstable();
        ids.retain(|&(_, i)| (i as usize) < events.len());
        Ok(EventDecoder { events, ids })
    }

    /// The number of events.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The event index of a kernel event id; the first event (which writes the side-band
    /// records) for an id perfwatch did not open.
    #[inline]
    fn index(&self, id: u64) -> usize {
        if self.ids.len() <= 8 {
            self.ids
                .iter()
                .find(|(i, _)| *i == id)
                .map_or(0, |&(_, e)| e as usize)
        } else {
            self.ids
                .binary_search_by_key(&id, |&(i, _)| i)
                .map_or(0, |k| self.ids[k].1 as usize)
        }
    }

    /// Decode one whole record (header included) with its event's layout.
    #[inline]
    pub fn decode(&self, rec: &[u8], ring_cpu: u32) -> Result<Event, DecodeError> {
        let (layout, desc) = if self.events.len() == 1 {
            self.events[0]
        } else {
            let id = match Header::parse(rec) {
                Some(h) if h.ty == RECORD_SAMPLE => u64_at(rec, HEADER_SIZE),
                Some(_) => rec.len().checked_sub(8).and_then(|at| u64_at(rec, at)),
                None => None,
            };
            self.events[id.map_or(0, |id| self.index(id))]
        };
        decode_with(rec, &layout, desc, ring_cpu)
    }
}

/// Decode one whole record (header included). `ring_cpu` is used when the record carries no
/// CPU of its own.
pub fn decode(rec: &[u8], layout: &SampleLayout, ring_cpu: u32) -> Result<Event, DecodeError> {
    decode_with(rec, layout, &UNNAMED, ring_cpu)
}

/// The part MMAP and MMAP2 share (pid, tid, start, len, pgoff), the file name at `name_at`,
/// and the MMAP2 fields when there are.
fn mmap(b: &[u8], name_at: usize, mmap2: Option<Mmap2Extra>) -> Option<EventKind> {
    Some(EventKind::Mmap(Box::new(MmapRecord {
        pid: u32_at(b, 0)?,
        tid: u32_at(b, 4)?,
        start: u64_at(b, 8)?,
        len: u64_at(b, 16)?,
        pgoff: u64_at(b, 24)?,
        filename: until_nul(b.get(name_at..)?).into(),
        mmap2,
    })))
}

/// As [`decode`], for a record of the event `desc`.
pub(crate) fn decode_with(
    rec: &[u8],
    layout: &SampleLayout,
    desc: &'static EventDesc,
    ring_cpu: u32,
) -> Result<Event, DecodeError> {
    let h = Header::parse(rec).ok_or(DecodeError::TooShort(rec.len()))?;
    let truncated = DecodeError::Truncated {
        ty: h.ty,
        size: rec.len(),
    };
    let mut ev = Event {
        cpu: ring_cpu,
        pid: u32::MAX,
        tid: u32::MAX,
        time: 0,
        id: 0,
        kind: EventKind::LostSamples { lost: 0 },
    };

    if h.ty == RECORD_SAMPLE {
        decode_sample(rec, h, layout, desc, &mut ev).ok_or(truncated)?;
        return Ok(ev);
    }

    // Non-sample record: body, then the sample_id trailer at the end.
    let body_end = rec
        .len()
        .checked_sub(layout.trailer_len)
        .filter(|&e| e >= HEADER_SIZE)
        .ok_or(truncated)?;
    if layout.trailer_len > 0 {
        let tr = &rec[body_end..];
        if let Some(at) = layout.tr_tid {
            ev.pid = u32_at(tr, at).ok_or(truncated)?;
            ev.tid = u32_at(tr, at + 4).ok_or(truncated)?;
        }
        if let Some(at) = layout.tr_time {
            ev.time = u64_at(tr, at).ok_or(truncated)?;
        }
        if let Some(at) = layout.tr_id {
            ev.id = u64_at(tr, at).ok_or(truncated)?;
        }
        if let Some(at) = layout.tr_cpu {
            ev.cpu = u32_at(tr, at).ok_or(truncated)?;
        }
    }
    let body = &rec[HEADER_SIZE..body_end];
    ev.kind = decode_body(h, body).ok_or(truncated)??;
    Ok(ev)
}

fn decode_sample(
    rec: &[u8],
    h: Header,
    l: &SampleLayout,
    desc: &'static EventDesc,
    ev: &mut Event,
) -> Option<()> {
    let mut at = HEADER_SIZE;
    let mut next = || {
        let v = u64_at(rec, at);
        at += 8;
        v
    };
    // Sample order: IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID, CPU, PERIOD.
    if l.has(SAMPLE_IDENTIFIER) {
        ev.id = next()?;
    }
    let mut ip = 0;
    if l.has(SAMPLE_IP) {
        ip = next()?;
    }
    if l.has(SAMPLE_TID) {
        let v = next()?;
        ev.pid = v as u32;
        ev.tid = (v >> 32) as u32;
    }
    if l.has(SAMPLE_TIME) {
        ev.time = next()?;
    }
    if l.has(SAMPLE_ADDR) {
        next()?;
    }
    if l.has(SAMPLE_ID) {
        let id = next()?;
        if !l.has(SAMPLE_IDENTIFIER) {
            ev.id = id;
        }
    }
    if l.has(SAMPLE_STREAM_ID) {
        next()?;
    }
    if l.has(SAMPLE_CPU) {
        ev.cpu = next()? as u32;
    }
    let mut period = l.fixed_period;
    if l.has(SAMPLE_PERIOD) {
        period = next()?;
    }
    // READ would come here; the layout refuses it.
    let mut callchain = None;
    if l.has(SAMPLE_CALLCHAIN) {
        // { u64 nr; u64 ips[nr]; }: an nr the record cannot hold is an error (counted as
        // malformed by the reader), never a read past the record or a huge allocation.
        let nr = usize::try_from(next()?).ok()?;
        let bytes = rec.get(at..at.checked_add(nr.checked_mul(8)?)?)?;
        at += bytes.len();
        callchain = Some(Callchain::new(
            bytes
                .chunks_exact(8)
                .map(|b| u64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
                .collect::<Box<[u64]>>(),
        ));
    }
    let mut raw = None;
    if l.has(SAMPLE_RAW) {
        // { u32 size; char data[size]; }: size counts the padding to the next u64.
        let size = u32_at(rec, at)? as usize;
        raw = Some(rec.get(at + 4..(at + 4).checked_add(size)?)?.into());
        at += 4 + size;
    }
    // BRANCH_STACK would come here; the layout refuses it.
    let user_stack = (l.has(SAMPLE_REGS_USER) || l.has(SAMPLE_STACK_USER))
        .then(|| Box::new(user_stack(rec, at, l)));
    ev.kind = EventKind::Sample {
        ip,
        period,
        misc: h.misc,
        event: desc,
        raw,
        callchain,
        user_stack,
        sym: None,
    };
    Some(())
}

/// REGS_USER `{ u64 abi; u64 regs[weight(mask)]; }` (no regs when abi is NONE) then
/// STACK_USER `{ u64 size; char data[size]; u64 dyn_size; }` (no dyn_size when size is 0),
/// from `at` on. What the record does not hold is left out (no registers, or an empty copy)
/// and the unwinder counts why; the rest of the sample stays good.
fn user_stack(rec: &[u8], mut at: usize, l: &SampleLayout) -> UserStack {
    let mut regs = None;
    if l.has(SAMPLE_REGS_USER) {
        let abi = u64_at(rec, at);
        at += 8;
        if abi.is_some_and(|abi| abi != sys::PERF_SAMPLE_REGS_ABI_NONE as u64) {
            // In bit order: a register's place is the number of lower bits the mask has.
            let reg = |bit: u32| {
                (l.regs_mask & (1 << bit) != 0)
                    .then(|| {
                        u64_at(
                            rec,
                            at + 8 * (l.regs_mask & ((1 << bit) - 1)).count_ones() as usize,
                        )
                    })
                    .flatten()
            };
            let (bp, sp, ip) = (reg(6), reg(7), reg(8));
            at += 8 * l.regs_mask.count_ones() as usize;
            if let (Some(bp), Some(sp), Some(ip)) = (bp, sp, ip) {
                regs = Some(UserRegs { ip, sp, bp });
            }
        }
    }
    let mut stack: Box<[u8]> = Box::new([]);
    if l.has(SAMPLE_STACK_USER) && regs.is_some() {
        let size = u64_at(rec, at).and_then(|s| usize::try_from(s).ok());
        if let Some(size) = size.filter(|&s| s > 0) {
            let data = at
                .checked_add(8)
                .and_then(|from| rec.get(from..from.checked_add(size)?));
            let dyn_size = at
                .checked_add(8 + size)
                .and_then(|d| u64_at(rec, d))
                .and_then(|d| usize::try_from(d).ok());
            if let (Some(data), Some(dyn_size)) = (data, dyn_size) {
                stack = data[..dyn_size.min(size)].into();
            }
        }
    }
    UserStack { regs, stack }
}

/// Decode the body of a non-sample record. `None` when the body is too short.
fn decode_body(h: Header, b: &[u8]) -> Option<Result<EventKind, DecodeError>> {
    let kind = match h.ty {
        RECORD_FORK | RECORD_EXIT => {
            let t = TaskRecord {
                pid: u32_at(b, 0)?,
                ppid: u32_at(b, 4)?,
                tid: u32_at(b, 8)?,
                ptid: u32_at(b, 12)?,
                time: u64_at(b, 16)?,
            };
            if h.ty == RECORD_FORK {
                EventKind::Fork(t)
            } else {
                EventKind::Exit(t)
            }
        }
        RECORD_COMM => EventKind::Comm {
            pid: u32_at(b, 0)?,
            tid: u32_at(b, 4)?,
            comm: until_nul(b.get(8..)?).into(),
            exec: h.misc & MISC_COMM_EXEC != 0,
        },
        RECORD_MMAP => mmap(b, 32, None)?,
        RECORD_MMAP2 => {
            // After pgoff: either {maj, min, ino, ino_generation} or, with
            // MISC_MMAP_BUILD_ID, {build_id_size, reserved, build_id[20]}: 24 bytes either way.
            let build_id = h.misc & MISC_MMAP_BUILD_ID != 0;
            let extra = Mmap2Extra {
                maj: if build_id { 0 } else { u32_at(b, 32)? },
                min: if build_id { 0 } else { u32_at(b, 36)? },
                ino: if build_id { 0 } else { u64_at(b, 40)? },
                ino_generation: if build_id { 0 } else { u64_at(b, 48)? },
                prot: u32_at(b, 56)?,
                flags: u32_at(b, 60)?,
                build_id: if build_id {
                    let size = (*b.get(32)? as usize).min(BuildId::MAX);
                    BuildId::new(b.get(36..36 + size)?)
                } else {
                    None
                },
            };
            mmap(b, 64, Some(extra))?
        }
        RECORD_LOST => EventKind::Lost {
            id: u64_at(b, 0)?,
            lost: u64_at(b, 8)?,
        },
        RECORD_LOST_SAMPLES => EventKind::LostSamples {
            lost: u64_at(b, 0)?,
        },
        RECORD_THROTTLE | RECORD_UNTHROTTLE => EventKind::Throttle {
            throttled: h.ty == RECORD_THROTTLE,
            time: u64_at(b, 0)?,
            id: u64_at(b, 8)?,
            stream_id: u64_at(b, 16)?,
        },
        RECORD_SWITCH => EventKind::Switch {
            out: h.misc & MISC_SWITCH_OUT != 0,
            preempt: h.misc & MISC_SWITCH_OUT_PREEMPT != 0,
            next_prev: None,
        },
        RECORD_SWITCH_CPU_WIDE => EventKind::Switch {
            out: h.misc & MISC_SWITCH_OUT != 0,
            preempt: h.misc & MISC_SWITCH_OUT_PREEMPT != 0,
            next_prev: Some((u32_at(b, 0)?, u32_at(b, 4)?)),
        },
        other => return Some(Err(DecodeError::UnknownType(other))),
    };
    Some(Ok(kind))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::records::*;

    fn ids() -> Ids {
        Ids::EXAMPLE
    }

    /// A `--call-graph dwarf` sample of a tracepoint: IP, TID, CALLCHAIN, RAW (padded), then
    /// REGS_USER and STACK_USER, as perf_event.h orders them.
    fn dwarf_sample(abi: u64, stack: &[u8], dyn_size: u64, cut: usize) -> Vec<u8> {
        let mut b = Vec::new();
        let u = |b: &mut Vec<u8>, v: u64| b.extend_from_slice(&v.to_ne_bytes());
        u(&mut b, 0x401000); // ip
        u(&mut b, (7u64 << 32) | 7); // pid, tid
        u(&mut b, 1); // callchain nr
        u(&mut b, crate::callchain::CONTEXT_KERNEL);
        b.extend_from_slice(&4u32.to_ne_bytes()); // raw size: 4 bytes of padding-inclusive data
        b.extend_from_slice(&[9, 9, 9, 9]);
        u(&mut b, abi);
        if abi != 0 {
            for r in [0x7000u64, 0x6000, 0x401000] {
                u(&mut b, r); // bp, sp, ip
            }
        }
        u(&mut b, stack.len() as u64);
        b.extend_from_slice(stack);
        if !stack.is_empty() {
            u(&mut b, dyn_size);
        }
        b.truncate(b.len() - cut);
        let mut rec = Vec::new();
        rec.extend_from_slice(&RECORD_SAMPLE.to_ne_bytes());
        rec.extend_from_slice(&0u16.to_ne_bytes());
        rec.extend_from_slice(&((8 + b.len()) as u16).to_ne_bytes());
        rec.extend_from_slice(&b);
        rec
    }

    #[test]
    fn dwarf_samples_decode_registers_and_the_stack_copy_after_raw() {
        let st = SAMPLE_IP
            | SAMPLE_TID
            | SAMPLE_CALLCHAIN
            | SAMPLE_RAW
            | SAMPLE_REGS_USER
            | SAMPLE_STACK_USER;
        let l = SampleLayout::new(st, false).unwrap();
        let stack_of = |rec: &[u8]| match decode(rec, &l, 0).unwrap().kind {
            EventKind::Sample {
                user_stack, raw, ..
            } => (user_stack.unwrap(), raw.unwrap()),
            _ => unreachable!(),
        };
        let (s, raw) = stack_of(&dwarf_sample(
            2,
            &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16],
            8,
            0,
        ));
        assert_eq!(&*raw, &[9, 9, 9, 9]);
        assert_eq!(
            s.regs,
            Some(UserRegs {
                ip: 0x401000,
                sp: 0x6000,
                bp: 0x7000
            })
        );
        // Only dyn_size bytes were copied.
        assert_eq!(&*s.stack, &[1, 2, 3, 4, 5, 6, 7, 8]);
        // A kernel thread: ABI none, no registers, no copy.
        let (s, _) = stack_of(&dwarf_sample(0, &[], 0, 0));
        assert_eq!((s.regs, s.stack.len()), (None, 0));
        // A dyn_size larger than the copy is held to the copy.
        let (s, _) = stack_of(&dwarf_sample(2, &[1; 16], 1 << 40, 0));
        assert_eq!(s.stack.len(), 16);
        // Cut short (no dyn_size, then part of the registers): an empty copy, then no
        // registers; the sample itself still decodes.
        let (s, _) = stack_of(&dwarf_sample(2, &[1; 16], 8, 8));
        assert!(s.regs.is_some() && s.stack.is_empty());
        let (s, _) = stack_of(&dwarf_sample(2, &[], 0, 16));
        assert_eq!(s.regs, None);
    }

    #[test]
    fn fork_and_exit() {
        let l = SampleLayout::default();
        let e = decode(&fork(&l, ids(), 200, 100, 4_999), &l, 0).unwrap();
        assert_eq!(
            (e.cpu, e.pid, e.tid, e.time, e.id),
            (1, 100, 101, 5_000, 42)
        );
        assert_eq!(
            e.kind,
            EventKind::Fork(TaskRecord {
                pid: 200,
                ppid: 100,
                tid: 200,
                ptid: 100,
                time: 4_999
            })
        );
        let e = decode(&exit(&l, ids(), 200, 100, 6_000), &l, 0).unwrap();
        assert!(matches!(e.kind, EventKind::Exit(t) if t.pid == 200 && t.time == 6_000));
    }

    #[test]
    fn comm_with_exec_flag() {
        let l = SampleLayout::default();
        let e = decode(&comm(&l, ids(), 200, b"true", true), &l, 0).unwrap();
        assert_eq!(
            e.kind,
            EventKind::Comm {
                pid: 200,
                tid: 200,
                comm: (*b"true").into(),
                exec: true
            }
        );
        let e = decode(&comm(&l, ids(), 200, b"renamed-thread", false), &l, 0).unwrap();
        assert!(matches!(e.kind, EventKind::Comm { exec: false, .. }));
    }

    #[test]
    fn mmap_and_mmap2() {
        let l = SampleLayout::default();
        let e = decode(
            &mmap2(&l, ids(), 7, 0x7000, 0x2000, b"/usr/lib/libc.so.6"),
            &l,
            0,
        )
        .unwrap();
        let EventKind::Mmap(m) = e.kind else {
            panic!("not mmap")
        };
        assert_eq!(
            (m.pid, m.start, m.len, m.pgoff),
            (7, 0x7000, 0x2000, 0x1000)
        );
        assert_eq!(&*m.filename, b"/usr/lib/libc.so.6");
        assert_eq!(
            m.mmap2,
            Some(Mmap2Extra {
                maj: 8,
                min: 1,
                ino: 1234,
                ino_generation: 0,
                prot: 5,
                flags: 2,
                build_id: None,
            })
        );

        let rec = RecordBuilder::new(RECORD_MMAP, 0)
            .u32(7)
            .u32(8)
            .u64(0x1000)
            .u64(0x3000)
            .u64(0)
            .str(b"[vdso]")
            .finish(&l, ids());
        let e = decode(&rec, &l, 0).unwrap();
        let EventKind::Mmap(m) = e.kind else {
            panic!("not mmap")
        };
        assert_eq!(
            (m.pid, m.tid, &*m.filename, m.mmap2),
            (7, 8, &b"[vdso]"[..], None)
        );
    }

    #[test]
    fn mmap2_with_build_id() {
        let l = SampleLayout::default();
        let rec = RecordBuilder::new(RECORD_MMAP2, MISC_MMAP_BUILD_ID)
            .u32(7)
            .u32(7)
            .u64(0x1000)
            .u64(0x1000)
            .u64(0)
            .u64(0x14) // build_id_size 20, reserved, first bytes of the id
            .u64(0xdead)
            .u64(0xbeef)
            .u32(5)
            .u32(2)
            .str(b"/bin/x")
            .finish(&l, ids());
        let EventKind::Mmap(m) = decode(&rec, &l, 0).unwrap().kind else {
            panic!()
        };
        assert_eq!(&*m.filename, b"/bin/x");
        assert_eq!(m.mmap2.map(|x| (x.prot, x.flags, x.ino)), Some((5, 2, 0)));
        let mut id = [0u8; 20];
        id[4..12].copy_from_slice(&0xdeadu64.to_ne_bytes());
        id[12..20].copy_from_slice(&0xbeefu64.to_ne_bytes());
        assert_eq!(
            m.mmap2.and_then(|x| x.build_id),
            crate::event::BuildId::new(&id)
        );
    }

    #[test]
    fn lost_lost_samples_throttle_switch() {
        let l = SampleLayout::default();
        let record = |ty, misc| RecordBuilder::new(ty, misc);
        let throttle = |throttled| EventKind::Throttle {
            throttled,
            time: 10,
            id: 42,
            stream_id: 43,
        };
        let switch = |out, preempt, next_prev| EventKind::Switch {
            out,
            preempt,
            next_prev,
        };
        let t = |ty| record(ty, 0).u64(10).u64(42).u64(43).finish(&l, ids());
        let cases = [
            (lost(&l, ids(), 77), EventKind::Lost { id: 42, lost: 77 }),
            (
                record(RECORD_LOST_SAMPLES, 0).u64(9).finish(&l, ids()),
                EventKind::LostSamples { lost: 9 },
            ),
            (t(RECORD_THROTTLE), throttle(true)),
            (t(RECORD_UNTHROTTLE), throttle(false)),
            (
                record(RECORD_SWITCH, MISC_SWITCH_OUT | MISC_SWITCH_OUT_PREEMPT).finish(&l, ids()),
                switch(true, true, None),
            ),
            (
                record(RECORD_SWITCH_CPU_WIDE, 0)
                    .u32(3)
                    .u32(4)
                    .finish(&l, ids()),
                switch(false, false, Some((3, 4))),
            ),
        ];
        for (rec, want) in cases {
            assert_eq!(decode(&rec, &l, 0).unwrap().kind, want);
        }
    }

    #[test]
    fn sample_fields_in_order() {
        let l = SampleLayout::default();
        let e = decode(&sample(&l, ids(), 0xffff_ffff_8100_0000, 250_000), &l, 0).unwrap();
        assert_eq!(
            (e.cpu, e.pid, e.tid, e.time, e.id),
            (1, 100, 101, 5_000, 42)
        );
        assert_eq!(e.kind, EventKind::sample(0xffff_ffff_8100_0000, 250_000, 1));
    }

    #[test]
    fn other_layouts() {
        // twatch.py's own choice: PERIOD | TID | CPU, no time, no identifier.
        let l = SampleLayout::new(SAMPLE_PERIOD | SAMPLE_TID | SAMPLE_CPU, true).unwrap();
        assert_eq!(l.trailer_len(), 16);
        let e = decode(&fork(&l, ids(), 9, 8, 1), &l, 5).unwrap();
        assert_eq!((e.cpu, e.pid, e.tid, e.time, e.id), (1, 100, 101, 0, 0));
        let e = decode(&sample(&l, ids(), 0, 77), &l, 5).unwrap();
        assert_eq!((e.cpu, e.pid), (1, 100));
        assert!(matches!(e.kind, EventKind::Sample { period: 77, .. }));

        // Without sample_id_all, the ring's CPU is used.
        let l = SampleLayout::new(DEFAULT_SAMPLE_TYPE, false).unwrap();
        let e = decode(&fork(&l, ids(), 9, 8, 1), &l, 5).unwrap();
        assert_eq!((e.cpu, e.pid), (5, u32::MAX));

        // ID without IDENTIFIER, with STREAM_ID and ADDR between.
        let st = SAMPLE_TID
            | SAMPLE_TIME
            | SAMPLE_ADDR
            | SAMPLE_ID
            | SAMPLE_STREAM_ID
            | SAMPLE_CPU
            | SAMPLE_PERIOD;
        let l = SampleLayout::new(st, true).unwrap();
        let e = decode(&sample(&l, ids(), 0, 3), &l, 0).unwrap();
        assert_eq!((e.id, e.cpu, e.time), (42, 1, 5_000));
        let e = decode(&exit(&l, ids(), 9, 8, 1), &l, 0).unwrap();
        assert_eq!((e.id, e.cpu, e.time), (42, 1, 5_000));

        assert!(SampleLayout::new(DEFAULT_SAMPLE_TYPE | 16 /* READ */, true).is_err());
    }

    #[test]
    fn unknown_type_is_an_error_not_a_crash() {
        let l = SampleLayout::default();
        let rec = RecordBuilder::new(99, 0).u64(1).finish(&l, ids());
        assert_eq!(decode(&rec, &l, 0), Err(DecodeError::UnknownType(99)));
    }

    #[test]
    fn short_records_are_errors() {
        let l = SampleLayout::default();
        assert!(decode(&[1, 0, 0], &l, 0).is_err());
        // A fork whose body was cut: header says fork, body has 8 bytes + trailer.
        let rec = RecordBuilder::new(RECORD_FORK, 0).u64(1).finish(&l, ids());
        assert!(matches!(
            decode(&rec, &l, 0),
            Err(DecodeError::Truncated { .. })
        ));
        // Only a header: shorter than the trailer.
        let rec = RecordBuilder::new(RECORD_COMM, 0).raw();
        assert!(decode(&rec, &l, 0).is_err());
        let full = sample(&l, ids(), 1, 2);
        for n in 8..full.len() {
            assert!(decode(&full[..n], &l, 0).is_err(), "cut at {n}");
        }
    }

    #[test]
    fn filename_without_nul_is_kept_whole() {
        let l = SampleLayout::new(DEFAULT_SAMPLE_TYPE, false).unwrap();
        let rec = RecordBuilder::new(RECORD_COMM, 0)
            .u32(1)
            .u32(1)
            .u64(u64::from_ne_bytes(*b"abcdefgh"))
            .raw();
        let EventKind::Comm { comm, .. } = decode(&rec, &l, 0).unwrap().kind else {
            panic!()
        };
        assert_eq!(&*comm, b"abcdefgh");
    }

    fn tp_desc(index: u16) -> &'static EventDesc {
        use crate::testkit::tracepoints::{SCHED_SWITCH, desc};
        desc(index, "sched:sched_switch", SCHED_SWITCH)
    }

    #[test]
    fn several_events_in_one_ring_are_told_apart_by_identifier() {
        use crate::testkit::tracepoints::sched_switch;
        let clock = EventDesc {
            index: 0,
            name: "cpu-clock",
            type_: sys::PERF_TYPE_SOFTWARE,
            config: 0,
            format: None,
            show_name: true,
            show_common: false,
        }
        .intern();
        let tp = tp_desc(1);
        let l0 = SampleLayout::default();
        let l1 = SampleLayout::new(DEFAULT_SAMPLE_TYPE | SAMPLE_RAW, true).unwrap();
        let d =
            EventDecoder::new(vec![(l0, clock), (l1, tp)], vec![(900, 1), (7, 0), (8, 1)]).unwrap();
        let with_id = |id| Ids { id, ..ids() };
        let raw = sched_switch(b"bash", 42, 1, b"swapper/0", 0);
        let e = d
            .decode(&sample_raw(&l1, with_id(900), 0xffff, 1, &raw), 0)
            .unwrap();
        assert_eq!(e.event_name(), Some("sched:sched_switch"));
        assert_eq!(
            e.to_string(),
            "cpu: 1, pid: 100, tid: 101 { type: sample, event: sched:sched_switch, ip: 0xffff, period: 1, prev_comm: bash, prev_pid: 42, prev_prio: 120, prev_state: 1, prev_state_str: S, next_comm: swapper/0, next_pid: 0, next_prio: 120 }"
        );
        assert_eq!(
            e.field("next_comm"),
            Some(crate::event::tracepoint::Value::Str(b"swapper/0"))
        );
        assert_eq!(e.fields(true).count(), 11);
        let e = d.decode(&sample(&l0, with_id(7), 0x10, 5), 0).unwrap();
        assert_eq!(e.event_name(), Some("cpu-clock"));
        assert_eq!(e.fields(true).count(), 0);
        // Side-band records of either event decode with the shared trailer.
        let e = d.decode(&fork(&l0, with_id(8), 5, 4, 3), 0).unwrap();
        assert_eq!((e.id, e.event_name()), (8, None));
        // An id perfwatch did not open: the first event's layout.
        let e = d.decode(&sample(&l0, with_id(12345), 0x10, 5), 0).unwrap();
        assert_eq!(e.event_name(), Some("cpu-clock"));
        // Many ids: the binary search agrees with the linear one.
        let many: Vec<(u64, u16)> = (0..100u64)
            .map(|i| (1000 + i * 3, (i % 2) as u16))
            .collect();
        let d = EventDecoder::new(vec![(l0, clock), (l1, tp)], many).unwrap();
        let e = d
            .decode(&sample_raw(&l1, with_id(1003), 0xffff, 1, &raw), 0)
            .unwrap();
        assert_eq!(e.event_name(), Some("sched:sched_switch"));
        // Layouts whose trailers differ cannot share a ring.
        let bad = SampleLayout::new(SAMPLE_IDENTIFIER | SAMPLE_TID, true).unwrap();
        assert!(EventDecoder::new(vec![(l0, clock), (bad, tp)], vec![]).is_err());
    }

    #[test]
    fn raw_that_overruns_the_record_is_an_error() {
        let l = SampleLayout::new(DEFAULT_SAMPLE_TYPE | SAMPLE_RAW, true).unwrap();
        let mut rec = sample_raw(&l, ids(), 1, 1, &[1, 2, 3, 4]);
        assert!(decode(&rec, &l, 0).is_ok());
        let at = rec.len() - 8;
        rec[at..at + 4].copy_from_slice(&100u32.to_ne_bytes());
        assert!(matches!(
            decode(&rec, &l, 0),
            Err(DecodeError::Truncated { .. })
        ));
        let rec = sample_raw(&l, ids(), 1, 1, &[9; 20]);
        for n in 8..rec.len() {
            assert!(decode(&rec[..n], &l, 0).is_err(), "cut at {n}");
        }
    }
}
