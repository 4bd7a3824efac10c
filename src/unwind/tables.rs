//! A binary's unwind tables: the sections framehop reads (`.eh_frame_hdr`, `.eh_frame`,
//! `.debug_frame`, with the addresses of `.text`, `.got` and the two `.eh_frame*`) and its
//! loadable segments (to place a mapping's file offset at its stated address), read once per
//! binary with object. Only those sections are read, each at most [`MAX_SECTION`] bytes; a
//! table that is not what it claims is refused or, past this point, stops the unwinder at the
//! frame it cannot trust (framehop checks every read against the section's bounds).

use std::fs::File;
use std::ops::Range;
use std::sync::Arc;

use object::read::elf::{ElfFile64, ProgramHeader};
use object::{Object, ObjectSection, ReadCache};

/// A section larger than this is not read (the unwinder then has less to go on).
pub(crate) const MAX_SECTION: u64 = 64 << 20;

/// One loadable segment: file bytes `[offset, offset + filesz)` at stated address `vaddr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub offset: u64,
    pub filesz: u64,
    pub vaddr: u64,
}

/// The unwind sections of one binary, shared by every process that maps it.
#[derive(Debug, Default)]
pub struct UnwindTables {
    pub segments: Vec<Segment>,
    pub text_svma: Option<Range<u64>>,
    pub got_svma: Option<Range<u64>>,
    pub eh_frame_svma: Option<Range<u64>>,
    pub eh_frame: Option<Arc<[u8]>>,
    pub eh_frame_hdr_svma: Option<Range<u64>>,
    pub eh_frame_hdr: Option<Arc<[u8]>>,
    pub debug_frame: Option<Arc<[u8]>>,
    /// The binary's build id (a recording's mapping names the build it means).
    pub build_id: Option<crate::symbols::BuildId>,
}

impl UnwindTables {
    /// The bytes it holds (for the cache's bound).
    pub fn bytes(&self) -> usize {
        let len = |d: &Option<Arc<[u8]>>| d.as_ref().map_or(0, |d| d.len());
        len(&self.eh_frame)
            + len(&self.eh_frame_hdr)
            + len(&self.debug_frame)
            + self.segments.len() * std::mem::size_of::<Segment>()
            + std::mem::size_of::<Self>()
    }

    /// Has any unwind rules at all.
    pub fn has_rules(&self) -> bool {
        self.eh_frame.is_some() || self.debug_frame.is_some()
    }

    /// The stated address of file offset `offset` (a mapping's page-aligned offset), from
    /// the segment that holds it: a segment's offset and address agree modulo the page
    /// size, so a mapping that starts on the page before the segment's first byte is placed
    /// by the same difference.
    pub(crate) fn svma_of_offset(&self, offset: u64) -> Option<u64> {
        const PAGE: u64 = 4096;
        self.segments
            .iter()
            .find(|s| {
                s.offset & !(PAGE - 1) <= offset
                    && s.offset
                        .checked_add(s.filesz)
                        .is_some_and(|end| offset < end)
            })
            .map(|s| s.vaddr.wrapping_sub(s.offset).wrapping_add(offset))
    }

    /// The framehop view of these tables. framehop reads one kind of rules per module, the
    /// `.eh_frame` when there is one: a binary that also has a `.debug_frame` was built
    /// (partly) without unwind tables (`-fno-asynchronous-unwind-tables -g`), and its
    /// `.eh_frame` then holds the start files' rules only, so the `.debug_frame` is the one
    /// that covers its own code and is given instead.
    pub(crate) fn section_info(&self) -> framehop::ExplicitModuleSectionInfo<Arc<[u8]>> {
        if self.debug_frame.is_some() {
            return framehop::ExplicitModuleSectionInfo {
                base_svma: 0,
                text_svma: self.text_svma.clone(),
                got_svma: self.got_svma.clone(),
                debug_frame: self.debug_frame.clone(),
                ..Default::default()
            };
        }
        framehop::ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: self.text_svma.clone(),
            got_svma: self.got_svma.clone(),
            eh_frame_svma: self.eh_frame_svma.clone(),
            eh_frame: self.eh_frame.clone(),
            eh_frame_hdr_svma: self.eh_frame_hdr_svma.clone(),
            eh_frame_hdr: self.eh_frame_hdr.clone(),
            debug_frame: self.debug_frame.clone(),
            ..Default::default()
        }
    }
}

/// Read the unwind tables of a 64-bit ELF file.
pub(crate) fn read_file(file: File) -> Result<UnwindTables, String> {
    let cache = ReadCache::new(file);
    read(&cache)
}

/// Read the unwind tables of 64-bit ELF `data`.
pub fn read<'d, R: object::ReadRef<'d>>(data: R) -> Result<UnwindTables, String> {
    let elf = ElfFile64::<object::Endianness, R>::parse(data)
        .map_err(|e| format!("not a 64-bit ELF file ({e})"))?;
    let endian = elf.endian();
    let mut t = UnwindTables::default();
    for ph in elf.elf_program_headers() {
        if ph.p_type(endian) == object::elf::PT_LOAD {
            t.segments.push(Segment {
                offset: ph.p_offset(endian),
                filesz: ph.p_filesz(endian),
                vaddr: ph.p_vaddr(endian),
            });
        }
    }
    let range = |name: &str| {
        elf.section_by_name(name).and_then(|s| {
            let end = s.address().checked_add(s.size())?;
            Some(s.address()..end)
        })
    };
    let bytes = |name: &str| -> Option<Arc<[u8]>> {
        let s = elf.section_by_name(name)?;
        if s.size() > MAX_SECTION {
            return None;
        }
        // SHT_NOBITS (a debug file's stripped copy of .eh_frame) reads as empty.
        let d = s.data().ok()?;
        (!d.is_empty()).then(|| Arc::from(d))
    };
    t.text_svma = range(".text");
    t.got_svma = range(".got");
    t.eh_frame_svma = range(".eh_frame");
    t.eh_frame = bytes(".eh_frame");
    t.eh_frame_hdr_svma = range(".eh_frame_hdr");
    t.eh_frame_hdr = bytes(".eh_frame_hdr");
    t.debug_frame = bytes(".debug_frame");
    t.build_id = elf
        .build_id()
        .ok()
        .flatten()
        .and_then(crate::symbols::BuildId::new);
    if t.eh_frame.is_none() {
        t.eh_frame_hdr = None;
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfwatchs_own_test_binary_has_eh_frame_and_its_segments() {
        let exe = std::fs::File::open("/proc/self/exe").unwrap();
        let t = read_file(exe).unwrap();
        assert!(t.has_rules() && t.eh_frame_hdr.is_some());
        assert!(!t.segments.is_empty());
        let text = t.text_svma.clone().unwrap();
        assert!(t.eh_frame.as_ref().unwrap().len() > 16);
        assert!(text.end > text.start);
    }

    #[test]
    fn garbage_is_refused_not_a_panic() {
        assert!(read(&b"\x7fELF\x02\x01\x01garbage"[..]).is_err());
        assert!(read(&[][..]).is_err());
        let t = UnwindTables {
            segments: vec![Segment {
                offset: 0x1000,
                filesz: 0x2000,
                vaddr: 0x401000,
            }],
            ..Default::default()
        };
        assert_eq!(t.svma_of_offset(0x1800), Some(0x401800));
        assert_eq!(t.svma_of_offset(0x3000), None);
        let t = UnwindTables {
            segments: vec![Segment {
                offset: 0x1234,
                filesz: 0x2000,
                vaddr: 0x402234,
            }],
            ..Default::default()
        };
        assert_eq!(t.svma_of_offset(0x1000), Some(0x402000));
    }
}
