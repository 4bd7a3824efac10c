//! `perf record -z`: the kernel's records arrive inside PERF_RECORD_COMPRESSED (and perf
//! 6.14's COMPRESSED2) records as one zstd stream that runs across them. perf compresses with
//! `ZSTD_compressStream` + `ZSTD_flushStream` and never ends the frame, so the decompression
//! context is kept from one compressed record to the next, a block may straddle two records,
//! and a decompressed record may too (its start waits here for the rest).
//!
//! Memory is bounded: one compressed record (at most 64 KiB) decompresses to at most what
//! perf itself allows (the ring size the file's HEADER_COMPRESSED feature names, clamped to
//! [`MIN_OUT`]..[`MAX_OUT`]); more is a lying record, an error that stops the read, as is a
//! zstd error (the stream cannot be picked up again after either: its later records continue
//! the same frame).

use zstd_safe::{DCtx, InBuffer, OutBuffer};

/// The least a compressed record may decompress to, whatever the header says.
const MIN_OUT: usize = 1 << 20;
/// The most a compressed record may decompress to, whatever the header says (also when
/// there is no HEADER_COMPRESSED feature: a file still being written, or a pipe without it).
const MAX_OUT: usize = 64 << 20;
/// Output grown at least this much at a time.
const STEP: usize = 64 << 10;

/// The decompressed records of a recording's compressed records, handed out one at a time.
pub struct Inflater {
    dctx: DCtx<'static>,
    /// Decompressed bytes; `out[pos..]` not handed out yet.
    out: Vec<u8>,
    pos: usize,
    /// What one compressed record may decompress to.
    limit: usize,
}

impl Inflater {
    /// `mmap_len`: the HEADER_COMPRESSED feature's ring size, when the recording has it.
    pub fn new(mmap_len: Option<u32>) -> Result<Inflater, String> {
        let limit = mmap_len.map_or(MAX_OUT, |n| (n as usize).clamp(MIN_OUT, MAX_OUT));
        let dctx = DCtx::try_create().ok_or("cannot create a zstd decompression context")?;
        Ok(Inflater {
            dctx,
            out: Vec::new(),
            pos: 0,
            limit,
        })
    }

    /// Decompress the compressed record `rec` (its header included; type `ty`, read at byte
    /// `at`) after what is left of the last one.
    pub fn feed(&mut self, rec: &[u8], ty: u32, at: u64) -> Result<(), String> {
        let data = payload(rec, ty).ok_or_else(|| {
            format!(
                "the compressed record at byte {at} says it holds more than its {} bytes",
                rec.len()
            )
        })?;
        // What is left is at most part of one record: move it to the front.
        self.out.drain(..self.pos);
        self.pos = 0;
        let cap = self.out.len() + self.limit;
        let mut input = InBuffer::around(data);
        loop {
            let len = self.out.len();
            if len >= cap {
                return Err(format!(
                    "the compressed record at byte {at} decompresses to more than {} bytes, more than perf's ring holds: the data is corrupt",
                    self.limit
                ));
            }
            let grow = (len.max(STEP)).min(cap - len);
            if self.out.capacity() - len < grow {
                self.out.reserve_exact(grow);
            }
            let room = self.out.capacity().min(cap) - len;
            let mut o = OutBuffer::around_pos(&mut self.out, len);
            let r = self.dctx.decompress_stream(&mut o, &mut input);
            let wrote = o.pos() - len;
            if let Err(code) = r {
                return Err(format!(
                    "the compressed record at byte {at} does not decompress ({}): the data is corrupt",
                    zstd_safe::get_error_name(code)
                ));
            }
            // Done when the input is used up and zstd had room to spare (it holds nothing back).
            if input.pos() == data.len() && wrote < room {
                return Ok(());
            }
        }
    }

    /// The next whole decompressed record, copied into `buf`: `None` when none is left whole
    /// (the rest waits for the next compressed record).
    pub fn next_record(&mut self, buf: &mut Vec<u8>) -> Option<Result<(), String>> {
        let rest = &self.out[self.pos..];
        let size = u16::from_le_bytes([*rest.get(6)?, *rest.get(7)?]) as usize;
        if size < 8 {
            return Some(Err(format!(
                "a record inside the compressed data says it is {size} bytes, less than its own header: the data cannot be followed past it"
            )));
        }
        let rec = rest.get(..size)?;
        buf.clear();
        buf.extend_from_slice(rec);
        self.pos += size;
        Some(Ok(()))
    }

    /// Decompressed bytes not handed out (at the end of the recording: a record cut short).
    pub fn pending(&self) -> usize {
        self.out.len() - self.pos
    }
}

/// The zstd bytes of a compressed record: after the header (COMPRESSED), or after the header
/// and a u64 count of them (COMPRESSED2, whose record is padded to 8 bytes).
fn payload(rec: &[u8], ty: u32) -> Option<&[u8]> {
    if ty == super::format::COMPRESSED2 {
        let n = usize::try_from(super::header::u64_at(rec, 8)?).ok()?;
        rec.get(16..16usize.checked_add(n)?)
    } else {
        rec.get(8..)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// `records` compressed as perf does (one stream, flushed, never ended), cut into
    /// COMPRESSED records of at most `max` zstd bytes each.
    pub(crate) fn compress(
        c: &mut zstd_safe::CCtx<'static>,
        records: &[u8],
        max: usize,
    ) -> Vec<Vec<u8>> {
        let mut z = Vec::with_capacity(records.len() + 1024);
        let mut input = InBuffer::around(records);
        while input.pos() < records.len() {
            let len = z.len();
            let mut o = OutBuffer::around_pos(&mut z, len);
            c.compress_stream(&mut o, &mut input).unwrap();
            z.reserve(1024);
        }
        loop {
            z.reserve(1024);
            let len = z.len();
            let mut o = OutBuffer::around_pos(&mut z, len);
            if c.flush_stream(&mut o).unwrap() == 0 {
                break;
            }
        }
        z.chunks(max)
            .map(|chunk| {
                let mut rec = Vec::new();
                rec.extend_from_slice(&super::super::format::COMPRESSED.to_le_bytes());
                rec.extend_from_slice(&0u16.to_le_bytes());
                rec.extend_from_slice(&((chunk.len() + 8) as u16).to_le_bytes());
                rec.extend_from_slice(chunk);
                rec
            })
            .collect()
    }

    fn record(ty: u32, body: usize) -> Vec<u8> {
        let mut r = ty.to_le_bytes().to_vec();
        r.extend_from_slice(&0u16.to_le_bytes());
        r.extend_from_slice(&((body + 8) as u16).to_le_bytes());
        r.extend((0..body).map(|i| (i * 7 % 251) as u8));
        r
    }

    #[test]
    fn records_split_across_compressed_records_come_out_whole() {
        let want: Vec<Vec<u8>> = (0..200).map(|i| record(9, 8 + (i % 40) * 8)).collect();
        let all: Vec<u8> = want.concat();
        let mut z = Inflater::new(None).unwrap();
        let mut got = Vec::new();
        for (i, rec) in compress(&mut zstd_safe::CCtx::create(), &all, 97)
            .iter()
            .enumerate()
        {
            z.feed(rec, super::super::format::COMPRESSED, i as u64)
                .unwrap();
            let mut buf = Vec::new();
            while let Some(r) = z.next_record(&mut buf) {
                r.unwrap();
                got.push(buf.clone());
            }
        }
        assert_eq!(got, want);
        assert_eq!(z.pending(), 0);
    }

    #[test]
    fn a_record_that_decompresses_past_the_bound_is_an_error() {
        let big = vec![0u8; 3 * MIN_OUT];
        let recs = compress(&mut zstd_safe::CCtx::create(), &big, 60000);
        assert_eq!(recs.len(), 1, "zeros compress to one record");
        let mut z = Inflater::new(Some(4096)).unwrap();
        let e = z
            .feed(&recs[0], super::super::format::COMPRESSED, 0)
            .unwrap_err();
        assert!(e.contains("decompresses to more than"), "{e}");
        assert!(
            z.out.capacity() <= 2 * MIN_OUT + STEP,
            "{}",
            z.out.capacity()
        );
    }

    #[test]
    fn garbage_is_an_error_and_a_short_compressed2_too() {
        let mut z = Inflater::new(None).unwrap();
        let mut rec = record(super::super::format::COMPRESSED, 64);
        rec[8..12].copy_from_slice(&[0x28, 0xb5, 0x2f, 0xfd]);
        assert!(z.feed(&rec, super::super::format::COMPRESSED, 0).is_err());
        let mut z = Inflater::new(None).unwrap();
        let mut rec = record(super::super::format::COMPRESSED2, 16);
        rec[8..16].copy_from_slice(&1000u64.to_le_bytes());
        let e = z
            .feed(&rec, super::super::format::COMPRESSED2, 0)
            .unwrap_err();
        assert!(e.contains("more than its"), "{e}");
    }
}
