//! The perf mmap ring buffer.
//!
//! The mapping is one metadata page followed by a power-of-two data area; the kernel writes
//! records at `data_head`, we consume from `data_tail`. Protocol (see `tools/lib/perf/mmap.c`):
//! load `data_head` with acquire ordering, read every record up to it, then store the new
//! `data_tail` with release ordering so that the kernel may reuse the space. Records are
//! 8-byte aligned, so a header never straddles the end of the data area, but a body may: such a
//! record is copied into a scratch buffer, every other record is handed out in place.
//!
//! [`drain`] is the whole consuming logic over a raw data area and is what the unit tests and
//! the fuzz target exercise; [`RingBuffer`] only adds the mapping and the atomics.
// Still its own `unsafe` (the ring's mapping, its head/tail atomics and `drain` over raw memory):
// not moved into src/sys/ yet (issue 24).
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use perf_event_open_sys::bindings::perf_event_mmap_page;

use super::record::{HEADER_SIZE, Header};

/// What one pass over the ring found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrainOutcome {
    /// The tail to publish.
    pub new_tail: u64,
    /// Records handed to the callback.
    pub records: u64,
    /// Bytes that could not be parsed as records and were skipped (reader resynchronised).
    pub skipped_bytes: u64,
    /// Bytes that were waiting (`head - tail`): how full the ring was.
    pub bytes: u64,
}

/// Hand every record between `tail` and `head` to `f`, in order.
///
/// `data` points to a data area of `size` bytes (a power of two). Only the bytes between
/// `tail` and `head` are read, and `f` gets a slice that is valid only for the call: either
/// into the area, or into `scratch` for a record that wraps around the end.
///
/// If `head - tail` is larger than the area, or a header is impossible (size < 8, not
/// 8-aligned, past `head`), the reader cannot trust anything up to `head`: it counts those
/// bytes as skipped and resumes at `head`, as perf does.
///
/// # Safety
///
/// `data .. data + size` must be readable for the duration of the call, and the bytes between
/// `tail` and `head` (modulo `size`) must not be written concurrently (the kernel guarantees
/// this for a ring whose `data_tail` is still at `tail`).
pub unsafe fn drain(
    data: *const u8,
    size: usize,
    tail: u64,
    head: u64,
    scratch: &mut Vec<u8>,
    mut f: impl FnMut(&[u8]),
) -> DrainOutcome {
    debug_assert!(size.is_power_of_two());
    let avail = head.wrapping_sub(tail);
    let mut out = DrainOutcome {
        new_tail: tail,
        bytes: avail,
        ..Default::default()
    };
    if avail == 0 {
        return out;
    }
    if avail > size as u64 || tail % 8 != 0 {
        out.skipped_bytes = avail;
        out.new_tail = head;
        return out;
    }
    let mask = size as u64 - 1;
    let mut pos = tail;
    while pos != head {
        let left = head.wrapping_sub(pos);
        let off = (pos & mask) as usize;
        if left < HEADER_SIZE as u64 || off + HEADER_SIZE > size {
            break;
        }
        // SAFETY: off + 8 <= size, inside the area, and before head.
        let hbytes = unsafe { std::slice::from_raw_parts(data.add(off), HEADER_SIZE) };
        let Some(h) = Header::parse(hbytes) else {
            break;
        };
        let len = h.size as usize;
        if len < HEADER_SIZE || len % 8 != 0 || len as u64 > left {
            break;
        }
        if off + len <= size {
            // SAFETY: the record lies inside the area, between tail and head.
            f(unsafe { std::slice::from_raw_parts(data.add(off), len) });
        } else {
            let first = size - off;
            scratch.clear();
            // SAFETY: both pieces lie inside the area, between tail and head.
            unsafe {
                scratch.extend_from_slice(std::slice::from_raw_parts(data.add(off), first));
                scratch.extend_from_slice(std::slice::from_raw_parts(data, len - first));
            }
            f(scratch);
        }
        out.records += 1;
        pos = pos.wrapping_add(len as u64);
    }
    if pos != head {
        out.skipped_bytes = head.wrapping_sub(pos);
    }
    out.new_tail = head;
    out
}

/// An mmap'ed perf ring: the metadata page and the data area.
pub struct RingBuffer {
    base: NonNull<u8>,
    map_len: usize,
    data: *const u8,
    data_size: usize,
}

// SAFETY: the mapping is owned by this value; the kernel is the only other writer and the
// protocol (acquire head / release tail) is followed by the single thread that owns it.
unsafe impl Send for RingBuffer {}

impl RingBuffer {
    /// Map `1 + data_pages` pages of `fd` read-write (a read-only mapping would put the ring
    /// into overwrite mode). `data_pages` must be a power of two.
    pub fn map(fd: BorrowedFd<'_>, data_pages: usize) -> io::Result<RingBuffer> {
        let page = page_size();
        let map_len = (data_pages + 1)
            .checked_mul(page)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: a fresh shared mapping of a perf fd; failure is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base =
            NonNull::new(p as *mut u8).ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        let meta = base.as_ptr() as *const perf_event_mmap_page;
        // SAFETY: the first page is the metadata page. data_offset/data_size exist since
        // Linux 4.1; older kernels leave them zero and the data area follows the first page.
        let (mut off, mut size) =
            unsafe { ((*meta).data_offset as usize, (*meta).data_size as usize) };
        if off == 0 || size == 0 {
            off = page;
            size = data_pages * page;
        }
        if off.checked_add(size) != Some(map_len) || !size.is_power_of_two() {
            // SAFETY: unmapping what we just mapped.
            unsafe { libc::munmap(p, map_len) };
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        Ok(RingBuffer {
            base,
            map_len,
            // SAFETY: off < map_len.
            data: unsafe { base.as_ptr().add(off) },
            data_size: size,
        })
    }

    fn meta(&self) -> *mut perf_event_mmap_page {
        self.base.as_ptr() as *mut perf_event_mmap_page
    }

    fn head_atomic(&self) -> &AtomicU64 {
        // SAFETY: data_head is an aligned u64 in the live mapping, written by the kernel.
        unsafe { AtomicU64::from_ptr(std::ptr::addr_of_mut!((*self.meta()).data_head)) }
    }

    fn tail_atomic(&self) -> &AtomicU64 {
        // SAFETY: data_tail is an aligned u64 in the live mapping, read by the kernel.
        unsafe { AtomicU64::from_ptr(std::ptr::addr_of_mut!((*self.meta()).data_tail)) }
    }

    /// Bytes in the data area.
    pub(crate) fn data_size(&self) -> usize {
        self.data_size
    }

    /// Bytes of records waiting.
    pub(crate) fn pending(&self) -> u64 {
        let head = self.head_atomic().load(Ordering::Acquire);
        head.wrapping_sub(self.tail_atomic().load(Ordering::Relaxed))
    }

    /// Consume everything written so far: one head load, one tail store.
    pub fn read(&mut self, scratch: &mut Vec<u8>, f: impl FnMut(&[u8])) -> DrainOutcome {
        let head = self.head_atomic().load(Ordering::Acquire);
        let tail = self.tail_atomic().load(Ordering::Relaxed);
        // SAFETY: the data area is mapped for self's lifetime, and the kernel does not write
        // between data_tail and data_head until we move data_tail.
        let out = unsafe { drain(self.data, self.data_size, tail, head, scratch, f) };
        if out.new_tail != tail {
            self.tail_atomic().store(out.new_tail, Ordering::Release);
        }
        out
    }
}

impl Drop for RingBuffer {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe { libc::munmap(self.base.as_ptr() as *mut libc::c_void, self.map_len) };
    }
}

/// The system page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::record::{SampleLayout, decode};
    use crate::testkit::records::*;

    /// Write `recs` into a ring of `size` bytes starting at byte position `start`.
    fn ring_with(size: usize, start: u64, recs: &[Vec<u8>]) -> (Vec<u8>, u64, u64) {
        let mut data = vec![0u8; size];
        let mut pos = start;
        for r in recs {
            for (i, b) in r.iter().enumerate() {
                data[((pos + i as u64) % size as u64) as usize] = *b;
            }
            pos += r.len() as u64;
        }
        (data, start, pos)
    }

    fn collect(data: &[u8], tail: u64, head: u64) -> (Vec<Vec<u8>>, DrainOutcome) {
        let mut got = Vec::new();
        let mut scratch = Vec::new();
        let out = unsafe {
            drain(data.as_ptr(), data.len(), tail, head, &mut scratch, |r| {
                got.push(r.to_vec())
            })
        };
        (got, out)
    }

    /// The sample_id of the crafted records.
    const IDS: Ids = Ids {
        pid: 1,
        tid: 1,
        time: 10,
        id: 3,
        cpu: 0,
    };

    #[test]
    fn reads_records_in_order() {
        let l = SampleLayout::default();
        let ids = IDS;
        let recs = vec![
            fork(&l, ids, 2, 1, 9),
            comm(&l, ids, 2, b"sh", true),
            exit(&l, ids, 2, 1, 11),
        ];
        let (data, tail, head) = ring_with(4096, 0, &recs);
        let (got, out) = collect(&data, tail, head);
        assert_eq!(got, recs);
        assert_eq!(
            out,
            DrainOutcome {
                new_tail: head,
                records: 3,
                skipped_bytes: 0,
                bytes: head - tail,
            }
        );
    }

    #[test]
    fn record_split_across_the_end_is_reassembled() {
        let l = SampleLayout::default();
        let ids = IDS;
        let long = mmap2(
            &l,
            ids,
            7,
            0x1000,
            0x2000,
            b"/a/rather/long/path/to/a/library/libsomething.so.1.2.3",
        );
        let short = fork(&l, ids, 2, 1, 9);
        // Place the mmap so that it starts 16 bytes before the end of a 256-byte ring, after
        // the tail has gone round several times.
        let size = 256;
        let start = 10 * size as u64 + (size as u64 - 16);
        let recs = vec![long.clone(), short.clone()];
        let (data, tail, head) = ring_with(size, start, &recs);
        let (got, out) = collect(&data, tail, head);
        assert_eq!(got, recs);
        assert_eq!(out.skipped_bytes, 0);
        let e = decode(&got[0], &l, 0).unwrap();
        let crate::event::EventKind::Mmap(m) = e.kind else {
            panic!()
        };
        assert_eq!(
            &*m.filename,
            b"/a/rather/long/path/to/a/library/libsomething.so.1.2.3"
        );
    }

    #[test]
    fn header_at_the_very_end_is_fine() {
        let l = SampleLayout::default();
        let ids = Ids::default();
        let r = fork(&l, ids, 2, 1, 9);
        let size = 128;
        let start = size as u64 - 8; // header is the last 8 bytes, body wraps entirely
        let (data, tail, head) = ring_with(size, start, std::slice::from_ref(&r));
        let (got, _) = collect(&data, tail, head);
        assert_eq!(got, vec![r]);
    }

    #[test]
    fn lying_sizes_resynchronise_at_head() {
        let size = 256;
        let mut data = vec![0u8; size];
        // A header claiming 0 bytes.
        data[0..4].copy_from_slice(&7u32.to_ne_bytes());
        let (got, out) = collect(&data, 0, 64);
        assert!(got.is_empty());
        assert_eq!(
            out,
            DrainOutcome {
                new_tail: 64,
                records: 0,
                skipped_bytes: 64,
                bytes: 64,
            }
        );
        // A header claiming more than is available.
        data[6..8].copy_from_slice(&200u16.to_ne_bytes());
        let (_, out) = collect(&data, 0, 64);
        assert_eq!(out.skipped_bytes, 64);
        // head - tail larger than the ring: the reader fell behind.
        let (_, out) = collect(&data, 0, 1000);
        assert_eq!(
            out,
            DrainOutcome {
                new_tail: 1000,
                records: 0,
                skipped_bytes: 1000,
                bytes: 1000,
            }
        );
        // An empty ring.
        let (_, out) = collect(&data, 64, 64);
        assert_eq!(
            out,
            DrainOutcome {
                new_tail: 64,
                records: 0,
                skipped_bytes: 0,
                bytes: 0,
            }
        );
    }

    #[test]
    fn good_records_before_a_bad_one_are_kept() {
        let l = SampleLayout::default();
        let r = fork(&l, Ids::default(), 2, 1, 9);
        let (mut data, tail, head) = ring_with(512, 0, &[r.clone(), r.clone()]);
        // Corrupt the second header's size to something unaligned.
        let at = r.len() + 6;
        data[at..at + 2].copy_from_slice(&13u16.to_ne_bytes());
        let (got, out) = collect(&data, tail, head);
        assert_eq!(got, vec![r.clone()]);
        assert_eq!(out.skipped_bytes, r.len() as u64);
        assert_eq!(out.new_tail, head);
    }
}
