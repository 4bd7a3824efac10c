//! Perf map files of JIT runtimes: `/tmp/perf-PID.map`, one `START SIZE NAME` line per
//! function (START and SIZE in hex, with or without `0x`; NAME is the rest of the line), as
//! `tools/perf/Documentation/jit-interface.txt` describes and perf reads them.
//!
//! A JIT appends to its map while it runs, and may reuse memory for new code: a later line
//! covers whatever earlier lines said about its range. The map is fed incrementally (only
//! whole lines; a line still being written waits for its newline), so rereading a growing map
//! costs only what was added.

use std::collections::BTreeMap;
use std::ops::Range;

use super::table::{Names, TooLarge};

/// Bytes counted per entry (B-tree node share, extent, name reference).
const ENTRY_BYTES: usize = 48;
/// A line longer than this is not a perf map line.
const MAX_LINE: usize = 64 * 1024;

/// The functions of one perf map, without overlaps.
#[derive(Default)]
pub struct PerfMap {
    /// start → (end, name offset, name length).
    extents: BTreeMap<u64, (u64, u32, u32)>,
    strings: Names,
    /// The unfinished last line.
    pending: Vec<u8>,
    /// Inside a line too long to be one, until its newline.
    skipping: bool,
    lines: usize,
    bad_lines: usize,
}

impl PerfMap {
    pub fn new() -> PerfMap {
        PerfMap::default()
    }

    /// Add what was appended to the file. `Err` once the map would exceed `max_bytes`.
    pub fn feed(&mut self, mut bytes: &[u8], max_bytes: usize) -> Result<(), TooLarge> {
        loop {
            if self.skipping {
                // The rest of a line too long to be one.
                let Some(nl) = bytes.iter().position(|&b| b == b'\n') else {
                    return Ok(());
                };
                bytes = &bytes[nl + 1..];
                self.skipping = false;
            }
            let Some(nl) = bytes.iter().position(|&b| b == b'\n') else {
                if self.pending.len() + bytes.len() > MAX_LINE {
                    self.too_long();
                } else {
                    self.pending.extend_from_slice(bytes);
                }
                return Ok(());
            };
            let result = if self.pending.is_empty() {
                self.line(&bytes[..nl], max_bytes)
            } else {
                let mut line = std::mem::take(&mut self.pending);
                line.extend_from_slice(&bytes[..nl]);
                self.line(&line, max_bytes)
            };
            bytes = &bytes[nl + 1..];
            result?;
        }
    }

    /// A line longer than any perf map line: counted once, skipped to its end.
    fn too_long(&mut self) {
        self.lines += 1;
        self.bad_lines += 1;
        self.pending.clear();
        self.skipping = true;
    }

    fn line(&mut self, line: &[u8], max_bytes: usize) -> Result<(), TooLarge> {
        if line.len() > MAX_LINE {
            self.too_long();
            self.skipping = false;
            return Ok(());
        }
        self.lines += 1;
        match parse_line(line) {
            Some((start, size, name)) => self.paint(start..start + size, name, max_bytes),
            None => {
                self.bad_lines += 1;
                Ok(())
            }
        }
    }

    /// Make `range` belong to `name`, trimming what was there.
    fn paint(&mut self, range: Range<u64>, name: &[u8], max_bytes: usize) -> Result<(), TooLarge> {
        let Range { start, end } = range;
        // Two entries at the most: the new extent and the tail of one it cuts in two.
        let (name_off, name_len) =
            self.strings
                .push(name, self.bytes() + ENTRY_BYTES * 2, max_bytes)?;
        // An extent that starts before and reaches into the new one keeps its head (and its
        // tail, if it also reaches past the new one).
        if let Some((&s, &(e, off, len))) = self.extents.range(..start).next_back()
            && e > start
        {
            self.extents.insert(s, (start, off, len));
            if e > end {
                self.extents.insert(end, (e, off, len));
            }
        }
        let inside: Vec<u64> = self.extents.range(start..end).map(|(&s, _)| s).collect();
        for s in inside {
            if let Some((e, off, len)) = self.extents.remove(&s)
                && e > end
            {
                self.extents.insert(end, (e, off, len));
            }
        }
        self.extents.insert(start, (end, name_off, name_len));
        Ok(())
    }

    /// The function holding `addr`: its start and raw name.
    pub fn find(&self, addr: u64) -> Option<(u64, &[u8])> {
        self.find_keyed(addr).map(|(s, _, n)| (s, n))
    }

    /// [`find`](Self::find), with a key unique to the line that named the function.
    pub(crate) fn find_keyed(&self, addr: u64) -> Option<(u64, u64, &[u8])> {
        let (&s, &(e, off, len)) = self.extents.range(..=addr).next_back()?;
        (addr < e).then(|| (s, off as u64, self.strings.get(off, len)))
    }

    pub fn len(&self) -> usize {
        self.extents.len()
    }

    pub fn is_empty(&self) -> bool {
        self.extents.is_empty()
    }

    /// Lines read so far, and how many of them were not `START SIZE NAME`.
    pub fn lines(&self) -> (usize, usize) {
        (self.lines, self.bad_lines)
    }

    pub(crate) fn bytes(&self) -> usize {
        self.extents.len() * ENTRY_BYTES + self.strings.len() + self.pending.len()
    }

    /// Every extent in order (for tests).
    pub fn extents(&self) -> impl Iterator<Item = (u64, u64, &[u8])> {
        self.extents
            .iter()
            .map(|(&s, &(e, off, len))| (s, e, self.strings.get(off, len)))
    }
}

fn hex_field(s: &[u8]) -> Option<(u64, &[u8])> {
    let s = s.strip_prefix(b"0x").unwrap_or(s);
    let n = s.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if n == 0 || n > 16 || s.get(n) != Some(&b' ') {
        return None;
    }
    let v = u64::from_str_radix(std::str::from_utf8(&s[..n]).ok()?, 16).ok()?;
    Some((v, &s[n + 1..]))
}

/// `START SIZE NAME` → (start, size, name); `None` for anything else, for an empty extent,
/// or one that runs past the top of the address space.
pub fn parse_line(line: &[u8]) -> Option<(u64, u64, &[u8])> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let (start, rest) = hex_field(line)?;
    let (size, name) = hex_field(rest)?;
    if size == 0 || name.is_empty() {
        return None;
    }
    start.checked_add(size)?;
    Some((start, size, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(m: &PerfMap) -> Vec<(u64, u64, String)> {
        m.extents()
            .map(|(s, e, n)| (s, e, String::from_utf8_lossy(n).into_owned()))
            .collect()
    }

    #[test]
    fn lines_parse_as_perf_writes_and_reads_them() {
        assert_eq!(
            parse_line(b"7f3c00001000 40 LazyCompile:~fib /app/x.js:3"),
            Some((0x7f3c00001000, 0x40, &b"LazyCompile:~fib /app/x.js:3"[..]))
        );
        assert_eq!(
            parse_line(b"0x1000 0x10 f\r"),
            Some((0x1000, 0x10, &b"f"[..]))
        );
        for bad in [
            &b""[..],
            b"1000",
            b"1000 10",
            b"1000 10 ",
            b"xyz 10 f",
            b"1000 0 empty",
            b"ffffffffffffffff 10 wraps",
            b"11111111111111111 10 too_long",
            b" 1000 10 leading_space",
            b"1000  10 two_spaces",
        ] {
            assert_eq!(parse_line(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn later_lines_cover_earlier_ones() {
        let mut m = PerfMap::new();
        m.feed(b"1000 100 old\n1040 20 new\n", usize::MAX).unwrap();
        assert_eq!(
            names(&m),
            vec![
                (0x1000, 0x1040, "old".into()),
                (0x1040, 0x1060, "new".into()),
                (0x1060, 0x1100, "old".into()),
            ]
        );
        m.feed(b"f00 200 newest\n", usize::MAX).unwrap();
        assert_eq!(names(&m), vec![(0xf00, 0x1100, "newest".into())]);
        assert_eq!(m.find(0x10ff).map(|(s, _)| s), Some(0xf00));
        assert_eq!(m.find(0x1100), None);
        assert_eq!(m.find(0xeff), None);
    }

    #[test]
    fn partial_lines_wait_for_their_newline() {
        let mut m = PerfMap::new();
        m.feed(b"2000 10 fir", usize::MAX).unwrap();
        assert!(m.is_empty());
        m.feed(b"st\n3000 1", usize::MAX).unwrap();
        assert_eq!(m.find(0x2005).map(|(_, n)| n), Some(&b"first"[..]));
        m.feed(b"0 second\n", usize::MAX).unwrap();
        assert_eq!(m.find(0x300f).map(|(_, n)| n), Some(&b"second"[..]));
        assert_eq!(m.lines(), (2, 0));
    }

    #[test]
    fn garbage_lines_are_counted_and_good_ones_kept() {
        let mut m = PerfMap::new();
        m.feed(b"junk\n\x00\xff\n1000 10 good\n1000 zz bad\n", usize::MAX)
            .unwrap();
        assert_eq!(m.len(), 1);
        assert_eq!(m.lines(), (4, 3));
        // A line that never ends is dropped, not buffered without limit, and what follows
        // it up to its newline is not taken for a line of its own.
        m.feed(&vec![b'a'; MAX_LINE + 1], usize::MAX).unwrap();
        assert_eq!(m.lines().1, 4);
        assert!(m.bytes() < 1024);
        m.feed(b"2000 10 tail_of_a_long_line\n3000 10 next\n", usize::MAX)
            .unwrap();
        assert_eq!(m.find(0x2000), None);
        assert!(m.find(0x3000).is_some());
        assert_eq!(m.lines(), (6, 4));
    }

    #[test]
    fn the_byte_limit_holds() {
        let mut m = PerfMap::new();
        let mut text = Vec::new();
        for i in 0..1000u64 {
            text.extend_from_slice(format!("{:x} 10 fn_{i}\n", 0x1000 + i * 0x10).as_bytes());
        }
        assert_eq!(m.feed(&text, 10_000), Err(TooLarge));
        assert!(m.bytes() <= 10_000);
    }
}
