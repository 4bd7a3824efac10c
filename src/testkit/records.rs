//! Builders of raw records: the exact bytes the kernel writes, for tests and benchmarks.

use crate::perf::record::*;

/// Builds one record: header, body, padding to 8 bytes, then the sample_id trailer.
pub(crate) struct RecordBuilder {
    ty: u32,
    misc: u16,
    body: Vec<u8>,
}

/// The sample_id fields to put in a trailer (or a sample).
#[derive(Clone, Copy, Debug, Default)]
pub struct Ids {
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub id: u64,
    pub cpu: u32,
}

impl Ids {
    /// Task 100 (thread 101) on CPU 1 at 5 µs, event id 42: what unit tests use.
    #[cfg(test)]
    pub(crate) const EXAMPLE: Ids = Ids {
        pid: 100,
        tid: 101,
        time: 5_000,
        id: 42,
        cpu: 1,
    };
}

impl RecordBuilder {
    pub fn new(ty: u32, misc: u16) -> Self {
        RecordBuilder {
            ty,
            misc,
            body: Vec::new(),
        }
    }
    pub fn u32(mut self, v: u32) -> Self {
        self.body.extend_from_slice(&v.to_ne_bytes());
        self
    }
    pub fn u64(mut self, v: u64) -> Self {
        self.body.extend_from_slice(&v.to_ne_bytes());
        self
    }
    /// A NUL-terminated string padded to 8 bytes, as the kernel writes names.
    pub fn str(mut self, s: &[u8]) -> Self {
        self.body.extend_from_slice(s);
        self.body.push(0);
        while self.body.len() % 8 != 0 {
            self.body.push(0);
        }
        self
    }
    /// ID, STREAM_ID and CPU, those of them `st` has, in the order both a sample and the
    /// sample_id trailer lay them out.
    fn id_stream_cpu(mut self, st: u64, ids: Ids) -> Self {
        if st & SAMPLE_ID != 0 {
            self = self.u64(ids.id);
        }
        if st & SAMPLE_STREAM_ID != 0 {
            self = self.u64(ids.id);
        }
        if st & SAMPLE_CPU != 0 {
            self = self.u32(ids.cpu).u32(0);
        }
        self
    }
    /// Finish with the sample_id trailer laid out for `layout`.
    pub fn finish(mut self, layout: &SampleLayout, ids: Ids) -> Vec<u8> {
        if layout.sample_id_all() {
            let st = layout.sample_type();
            if st & SAMPLE_TID != 0 {
                self = self.u32(ids.pid).u32(ids.tid);
            }
            if st & SAMPLE_TIME != 0 {
                self = self.u64(ids.time);
            }
            self = self.id_stream_cpu(st, ids);
            if st & SAMPLE_IDENTIFIER != 0 {
                self = self.u64(ids.id);
            }
        }
        self.raw()
    }
    /// Finish without a trailer.
    pub fn raw(self) -> Vec<u8> {
        let size = HEADER_SIZE + self.body.len();
        let mut out = Vec::with_capacity(size);
        out.extend_from_slice(&self.ty.to_ne_bytes());
        out.extend_from_slice(&self.misc.to_ne_bytes());
        out.extend_from_slice(&(size as u16).to_ne_bytes());
        out.extend_from_slice(&self.body);
        out
    }
}

/// A FORK or EXIT record of the main thread `pid`, child of `ppid`.
fn task(ty: u32, layout: &SampleLayout, ids: Ids, pid: u32, ppid: u32, time: u64) -> Vec<u8> {
    RecordBuilder::new(ty, 0)
        .u32(pid)
        .u32(ppid)
        .u32(pid)
        .u32(ppid)
        .u64(time)
        .finish(layout, ids)
}

pub fn fork(layout: &SampleLayout, ids: Ids, pid: u32, ppid: u32, time: u64) -> Vec<u8> {
    task(RECORD_FORK, layout, ids, pid, ppid, time)
}

pub fn exit(layout: &SampleLayout, ids: Ids, pid: u32, ppid: u32, time: u64) -> Vec<u8> {
    task(RECORD_EXIT, layout, ids, pid, ppid, time)
}

pub fn comm(layout: &SampleLayout, ids: Ids, pid: u32, name: &[u8], exec: bool) -> Vec<u8> {
    let misc = if exec { MISC_COMM_EXEC } else { 0 };
    RecordBuilder::new(RECORD_COMM, misc)
        .u32(pid)
        .u32(pid)
        .str(name)
        .finish(layout, ids)
}

pub fn mmap2(
    layout: &SampleLayout,
    ids: Ids,
    pid: u32,
    start: u64,
    len: u64,
    file: &[u8],
) -> Vec<u8> {
    RecordBuilder::new(RECORD_MMAP2, 0)
        .u32(pid)
        .u32(pid)
        .u64(start)
        .u64(len)
        .u64(0x1000)
        .u32(8)
        .u32(1)
        .u64(1234)
        .u64(0)
        .u32(5)
        .u32(2)
        .str(file)
        .finish(layout, ids)
}

pub fn lost(layout: &SampleLayout, ids: Ids, lost: u64) -> Vec<u8> {
    RecordBuilder::new(RECORD_LOST, 0)
        .u64(ids.id)
        .u64(lost)
        .finish(layout, ids)
}

/// A sample laid out for `layout`, with `raw` as its PERF_SAMPLE_RAW data when the
/// layout has RAW (the kernel pads it so that the record ends 8-byte aligned).
pub fn sample_raw(layout: &SampleLayout, ids: Ids, ip: u64, period: u64, raw: &[u8]) -> Vec<u8> {
    let mut rec = sample(layout, ids, ip, period);
    if layout.sample_type() & SAMPLE_RAW != 0 {
        let mut body = raw.to_vec();
        while (body.len() + 4) % 8 != 0 {
            body.push(0);
        }
        rec.extend_from_slice(&(body.len() as u32).to_ne_bytes());
        rec.extend_from_slice(&body);
        let size = rec.len() as u16;
        rec[6..8].copy_from_slice(&size.to_ne_bytes());
    }
    rec
}

/// A sample laid out for `layout` (without RAW data).
pub fn sample(layout: &SampleLayout, ids: Ids, ip: u64, period: u64) -> Vec<u8> {
    let st = layout.sample_type();
    let mut b = RecordBuilder::new(RECORD_SAMPLE, 1);
    if st & SAMPLE_IDENTIFIER != 0 {
        b = b.u64(ids.id);
    }
    if st & SAMPLE_IP != 0 {
        b = b.u64(ip);
    }
    if st & SAMPLE_TID != 0 {
        b = b.u32(ids.pid).u32(ids.tid);
    }
    if st & SAMPLE_TIME != 0 {
        b = b.u64(ids.time);
    }
    if st & SAMPLE_ADDR != 0 {
        b = b.u64(0);
    }
    b = b.id_stream_cpu(st, ids);
    if st & SAMPLE_PERIOD != 0 {
        b = b.u64(period);
    }
    b.raw()
}

/// A sample laid out for `layout`: its fixed fields, then `chain` (the kernel's entries,
/// markers included) when the layout has CALLCHAIN, then `raw` when it has RAW.
pub fn sample_chain(
    layout: &SampleLayout,
    ids: Ids,
    ip: u64,
    period: u64,
    chain: &[u64],
    raw: &[u8],
) -> Vec<u8> {
    let st = layout.sample_type();
    // The fixed fields: CALLCHAIN and RAW come after all of them.
    let mut rec = sample(layout, ids, ip, period);
    if st & SAMPLE_CALLCHAIN != 0 {
        rec.extend_from_slice(&(chain.len() as u64).to_ne_bytes());
        for e in chain {
            rec.extend_from_slice(&e.to_ne_bytes());
        }
    }
    if st & SAMPLE_RAW != 0 {
        let mut body = raw.to_vec();
        while (body.len() + 4) % 8 != 0 {
            body.push(0);
        }
        rec.extend_from_slice(&(body.len() as u32).to_ne_bytes());
        rec.extend_from_slice(&body);
    }
    let size = u16::try_from(rec.len()).unwrap_or(u16::MAX);
    rec[6..8].copy_from_slice(&size.to_ne_bytes());
    rec
}
