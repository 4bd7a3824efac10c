//! A process's address space as MMAP/MMAP2 records (and `/proc/PID/maps` at start) describe
//! it: the executable mappings, by start address, each with the file it maps and where in
//! the file it starts. The question it answers is the symbolizer's: which mapping holds
//! address A, and at what offset in which file.
//!
//! The kernel reports mappings as they are made, never their removal (there is no munmap
//! record): a new mapping replaces what it overlaps, as `perf` does, and a space keeps at
//! most [`MAX_MAPPINGS`] (the oldest go first).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::event::MmapRecord;
use crate::symbols::FileIdentity;

/// Mappings one address space keeps at most.
pub(crate) const MAX_MAPPINGS: usize = 8192;

/// The file behind a mapping, as the record named it (untrusted bytes, maybe with the
/// kernel's ` (deleted)` suffix; `//anon` for anonymous executable memory). Shared by the
/// mappings that come from one record and by the address spaces a fork copies.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct MappedFile {
    pub path: Box<[u8]>,
    pub id: FileIdentity,
    /// The same file as the symbolizer knows it (built once per record: a sample's request
    /// then costs a reference count).
    pub sym: Arc<crate::symbols::MappedFile>,
}

impl MappedFile {
    pub fn new(path: Box<[u8]>, id: FileIdentity) -> MappedFile {
        // The generation is left out of the symbolizer's identity: `/proc/PID/maps` does not
        // give it while MMAP2 does, and the same file must be one binary (one symbol key) for
        // both.
        let identity = match id {
            FileIdentity::Inode { maj, min, ino, .. } => FileIdentity::Inode {
                maj,
                min,
                ino,
                generation: 0,
            },
            other => other,
        };
        let sym = crate::symbols::MappedFile::new(&path, identity);
        MappedFile { path, id, sym }
    }
}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFile")
            .field("path", &crate::text::Untrusted(&self.path))
            .field("id", &self.id)
            .finish()
    }
}

/// One mapping: `[start, start + len)` maps `file` from byte `pgoff` on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub len: u64,
    pub pgoff: u64,
    /// `PROT_*` and `MAP_*` bits (MMAP2; 0 when not known).
    pub prot: u32,
    pub flags: u32,
    pub file: Arc<MappedFile>,
    /// When the record was written (0 for what was read from `/proc` at start).
    pub time: u64,
}

impl Mapping {
    /// A mapping as an MMAP/MMAP2 record at `time` describes it.
    pub(crate) fn from_record(m: &MmapRecord, time: u64) -> Mapping {
        let (id, prot, flags) = match &m.mmap2 {
            None => (FileIdentity::Unknown, 0, 0),
            Some(x) => {
                let id = match x.build_id {
                    Some(b) => FileIdentity::BuildId(b),
                    None => FileIdentity::from_mmap2(x.maj, x.min, x.ino, x.ino_generation),
                };
                (id, x.prot, x.flags)
            }
        };
        Mapping {
            start: m.start,
            len: m.len,
            pgoff: m.pgoff,
            prot,
            flags,
            file: Arc::new(MappedFile::new(m.filename.clone(), id)),
            time,
        }
    }

    /// One past the last address.
    pub fn end(&self) -> u64 {
        self.start.saturating_add(self.len)
    }

    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.start && addr - self.start < self.len
    }

    /// The offset in the file of `addr` (which the mapping contains).
    pub(crate) fn file_offset(&self, addr: u64) -> u64 {
        addr.wrapping_sub(self.start).wrapping_add(self.pgoff)
    }
}

/// The mappings of one address space (shared by a process's threads), sorted by start.
#[derive(Clone, Debug, Default)]
pub struct AddressSpace {
    maps: BTreeMap<u64, Mapping>,
    /// Changes with every mapping added (a number no other change of any space had), so
    /// that a reader that derived something from the mappings (the unwinder's module list)
    /// can tell that they changed without comparing them.
    stamp: u64,
}

/// The last stamp given to a change of an address space.
static STAMPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl PartialEq for AddressSpace {
    fn eq(&self, other: &AddressSpace) -> bool {
        self.maps == other.maps
    }
}

impl Eq for AddressSpace {}

impl AddressSpace {
    pub const fn new() -> AddressSpace {
        AddressSpace {
            maps: BTreeMap::new(),
            stamp: 0,
        }
    }

    /// See the field: equal stamps of the same space mean the same mappings.
    pub fn stamp(&self) -> u64 {
        self.stamp
    }

    pub fn len(&self) -> usize {
        self.maps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.maps.is_empty()
    }

    /// The mappings, by start address.
    pub fn iter(&self) -> impl Iterator<Item = &Mapping> {
        self.maps.values()
    }

    /// The mapping that holds `addr`.
    pub fn find(&self, addr: u64) -> Option<&Mapping> {
        self.maps
            .range(..=addr)
            .next_back()
            .map(|(_, m)| m)
            .filter(|m| m.contains(addr))
    }

    /// Add a mapping; what it overlaps is cut away (the parts outside it stay, with their
    /// file offsets adjusted).
    pub fn insert(&mut self, m: Mapping) {
        if m.len == 0 {
            return;
        }
        let (start, end) = (m.start, m.end());
        // Overlapping entries start before `end` and end after `start`: at most one starts
        // before `start`, the rest start inside [start, end).
        let mut hit: Vec<u64> = self.maps.range(start..end).map(|(s, _)| *s).collect();
        if let Some((s, prev)) = self.maps.range(..start).next_back() {
            if prev.end() > start {
                hit.push(*s);
            }
        }
        for s in hit {
            let Some(old) = self.maps.remove(&s) else {
                continue;
            };
            if old.start < start {
                let mut left = old.clone();
                left.len = start - old.start;
                self.maps.insert(left.start, left);
            }
            if old.end() > end {
                let mut right = old;
                let cut = end - right.start;
                right.start = end;
                right.len -= cut;
                right.pgoff = right.pgoff.wrapping_add(cut);
                self.maps.insert(right.start, right);
            }
        }
        self.maps.insert(start, m);
        self.stamp = STAMPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if self.maps.len() > MAX_MAPPINGS {
            self.forget_oldest();
        }
    }

    /// Past the cap: forget the eighth of the mappings recorded first.
    fn forget_oldest(&mut self) {
        let mut times: Vec<u64> = self.maps.values().map(|m| m.time).collect();
        let k = times.len() / 8;
        let (_, cut, _) = times.select_nth_unstable(k);
        let cut = *cut;
        let mut over = self.maps.len() - MAX_MAPPINGS * 7 / 8;
        self.maps.retain(|_, m| {
            if over > 0 && m.time <= cut {
                over -= 1;
                false
            } else {
                true
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(start: u64, len: u64, pgoff: u64, path: &str, time: u64) -> Mapping {
        Mapping {
            start,
            len,
            pgoff,
            prot: 5,
            flags: 2,
            file: Arc::new(MappedFile::new(
                path.as_bytes().into(),
                FileIdentity::Unknown,
            )),
            time,
        }
    }

    /// The mappings as `start+len@pgoff file`, in hex, in address order.
    fn layout(s: &AddressSpace) -> String {
        let each: Vec<String> = s
            .iter()
            .map(|m| {
                let file = String::from_utf8_lossy(&m.file.path);
                format!("{:x}+{:x}@{:x} {file}", m.start, m.len, m.pgoff)
            })
            .collect();
        each.join(", ")
    }

    #[test]
    fn finds_the_mapping_and_the_file_offset() {
        let mut s = AddressSpace::default();
        s.insert(map(0x1000, 0x2000, 0x5000, "/bin/a", 1));
        s.insert(map(0x8000, 0x1000, 0, "/lib/b.so", 2));
        let m = s.find(0x2fff).unwrap();
        assert_eq!(&*m.file.path, b"/bin/a");
        assert_eq!(m.file_offset(0x2fff), 0x6fff);
        assert!(s.find(0x3000).is_none(), "end is exclusive");
        assert!(s.find(0xfff).is_none());
        assert_eq!(&*s.find(0x8000).unwrap().file.path, b"/lib/b.so");
    }

    #[test]
    fn a_new_mapping_cuts_what_it_overlaps() {
        let mut s = AddressSpace::default();
        s.insert(map(0x1000, 0x4000, 0, "/old", 1));
        s.insert(map(0x6000, 0x1000, 0, "/other", 1));
        // Covers the middle of /old and the start of nothing else.
        s.insert(map(0x2000, 0x1000, 0x9000, "/new", 2));
        assert_eq!(
            layout(&s),
            "1000+1000@0 /old, 2000+1000@9000 /new, 3000+2000@2000 /old, 6000+1000@0 /other"
        );
        // Covers the tail of /old and all of /other.
        s.insert(map(0x4000, 0x4000, 0, "/big", 3));
        assert_eq!(
            layout(&s),
            "1000+1000@0 /old, 2000+1000@9000 /new, 3000+1000@2000 /old, 4000+4000@0 /big"
        );
        // The same range again replaces it.
        s.insert(map(0x4000, 0x4000, 0x1000, "/big2", 4));
        assert_eq!(s.len(), 4);
        assert_eq!(&*s.find(0x4000).unwrap().file.path, b"/big2");
    }

    #[test]
    fn an_address_space_is_bounded() {
        let mut s = AddressSpace::default();
        for i in 0..(MAX_MAPPINGS as u64 + 10) {
            s.insert(map(i * 0x2000, 0x1000, 0, "/x", i + 1));
        }
        assert!(s.len() <= MAX_MAPPINGS);
        assert!(s.len() >= MAX_MAPPINGS * 7 / 8);
        // The newest are kept.
        let last = (MAX_MAPPINGS as u64 + 9) * 0x2000;
        assert!(s.find(last).is_some());
        assert!(s.find(0).is_none(), "the oldest went first");
    }

    #[test]
    fn zero_length_and_edge_addresses_are_harmless() {
        let mut s = AddressSpace::default();
        s.insert(map(0x1000, 0, 0, "/empty", 1));
        assert!(s.is_empty());
        s.insert(map(u64::MAX - 0x1000, 0x5000, 0, "/wraps", 1));
        assert!(s.find(u64::MAX).is_some());
        s.insert(map(u64::MAX - 0x800, 0x10, 0, "/in", 2));
        assert_eq!(s.len(), 3);
    }
}
