//! Function symbols of an ELF file, read with the `object` crate: the glue between its
//! structures and a [`SymbolTable`], plus what is needed around it (where file offsets land in
//! the address space, the build id, the debug link, and finding a separate debug file).
//!
//! Only what is needed is read, each piece once and bounded: the headers, the note sections,
//! the symbol tables and their string tables (read whole: one read each, not one per name).
//! A file is never mapped: a binary truncated while perfwatch reads it gives a read error, not
//! a SIGBUS.

use std::fs::File;

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader, SectionTable, Sym};
use object::read::{ReadCache, ReadRef, StringTable};

use super::plt::{self, PltSymbol};
use super::request::BuildId;
pub(crate) use super::section::ElfError;
use super::section::section_bytes;
use super::table::{TableBuilder, TooLarge, rank};

/// A `PT_LOAD` segment: file bytes `[offset, offset + filesz)` at `vaddr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub offset: u64,
    pub filesz: u64,
    pub vaddr: u64,
}

/// The ELF address of a file offset, through the loadable segments.
pub(crate) fn offset_to_vaddr(segments: &[Segment], offset: u64) -> Option<u64> {
    segments
        .iter()
        .find(|s| offset >= s.offset && offset - s.offset < s.filesz)
        .map(|s| s.vaddr.wrapping_add(offset - s.offset))
}

/// A compressed `.gnu_debugdata` section larger than this is not MiniDebugInfo.
pub(crate) const MAX_PACKED: u64 = 16 << 20;

/// What one ELF file says besides its symbols.
#[derive(Debug, Default)]
pub(crate) struct ElfFacts {
    pub build_id: Option<BuildId>,
    /// The `.gnu_debuglink` file name.
    pub debuglink: Option<Vec<u8>>,
    pub segments: Vec<Segment>,
    /// Functions found in `.symtab` (0: stripped).
    pub symtab_functions: usize,
    /// Functions found in `.dynsym`.
    pub dynsym_functions: usize,
    /// The PLT stubs, named (when asked for).
    pub plt: Vec<PltSymbol>,
    /// The `.gnu_debugdata` section, still compressed (when asked for).
    pub gnu_debugdata: Option<Vec<u8>>,
}

/// Which symbol tables to read.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Want {
    pub symtab: bool,
    pub dynsym: bool,
    /// The binary itself (not a debug file): name its PLT stubs ([`super::plt`]) and keep
    /// its `.gnu_debugdata` (MiniDebugInfo).
    pub runtime: bool,
}

/// Note sections larger than this are not searched for a build id.
const MAX_NOTES: u64 = 1 << 16;
/// A `.gnu_debuglink` section larger than this is not one.
const MAX_DEBUGLINK: u64 = 4096;
/// The section-name string table.
const MAX_SHSTRTAB: u64 = 1 << 20;

/// Read `data` as ELF: its facts, and its function symbols into `builder`. `max_section`
/// bounds every symbol or string table read.
pub(crate) fn read<'d, R: ReadRef<'d>>(
    data: R,
    want: Want,
    builder: &mut TableBuilder,
    max_section: u64,
) -> Result<ElfFacts, ElfError> {
    read_from(data, want, builder, max_section, None)
}

/// [`read`]; with `file` (the file `data` reads), symbol tables are read from it in chunks
/// instead of whole through `data`.
fn read_from<'d, R: ReadRef<'d>>(
    data: R,
    want: Want,
    builder: &mut TableBuilder,
    max_section: u64,
    file: Option<&File>,
) -> Result<ElfFacts, ElfError> {
    let ident = data.read_bytes_at(0, 16).map_err(|_| ElfError::NotElf)?;
    if ident[..4] != elf::ELFMAG {
        return Err(ElfError::NotElf);
    }
    // e_ident: the magic, then the class.
    match elf::FileClass(ident[4]) {
        elf::ELFCLASS64 => read_as::<elf::FileHeader64<object::Endianness>, R>(
            data,
            want,
            builder,
            max_section,
            file,
        ),
        elf::ELFCLASS32 => read_as::<elf::FileHeader32<object::Endianness>, R>(
            data,
            want,
            builder,
            max_section,
            file,
        ),
        _ => Err(ElfError::Corrupt("ELF class")),
    }
}

/// [`read`] on a file, through a read cache (reads only the pieces asked for).
pub(crate) fn read_file(
    file: File,
    want: Want,
    builder: &mut TableBuilder,
    max_section: u64,
) -> Result<ElfFacts, ElfError> {
    let cache = ReadCache::new(&file);
    read_from(&cache, want, builder, max_section, Some(&file))
}

fn read_as<'d, Elf: FileHeader<Endian = object::Endianness>, R: ReadRef<'d>>(
    data: R,
    want: Want,
    builder: &mut TableBuilder,
    max_section: u64,
    file: Option<&File>,
) -> Result<ElfFacts, ElfError> {
    let header = Elf::parse(data).map_err(|_| ElfError::Corrupt("file header"))?;
    let endian = header
        .endian()
        .map_err(|_| ElfError::Corrupt("byte order"))?;
    let e_type = header.e_type(endian);
    if e_type != elf::ET_EXEC && e_type != elf::ET_DYN {
        return Err(ElfError::NotLoadable);
    }
    let mut facts = ElfFacts::default();
    let phdrs = header
        .program_headers(endian, data)
        .map_err(|_| ElfError::Corrupt("program headers"))?;
    for ph in phdrs {
        if ph.p_type(endian) == elf::PT_LOAD {
            facts.segments.push(Segment {
                offset: ph.p_offset(endian).into(),
                filesz: ph.p_filesz(endian).into(),
                vaddr: ph.p_vaddr(endian).into(),
            });
        }
    }
    let shdrs = header
        .section_headers(endian, data)
        .map_err(|_| ElfError::Corrupt("section headers"))?;
    // Section names are only needed for .gnu_debuglink: a file without them (e_shstrndx 0)
    // still has its symbol tables.
    let names = header
        .section_strings(endian, data, shdrs)
        .unwrap_or_default();
    let sections = SectionTable::new(shdrs, names);

    facts.build_id = build_id::<Elf, R>(&sections, phdrs, endian, data);
    if sections.is_empty() {
        return Ok(facts);
    }
    let shstrtab = section_names::<Elf, R>(header, &sections, endian, data);

    for sh in sections.iter() {
        let ty = sh.sh_type(endian);
        let name = shstrtab
            .as_ref()
            .and_then(|s| sh.name(endian, *s).ok())
            .unwrap_or(b"");
        if name == b".gnu_debuglink" && ty != elf::SHT_NOBITS {
            facts.debuglink = debuglink::<Elf, R>(sh, endian, data);
        }
        if name == b".gnu_debugdata" && ty != elf::SHT_NOBITS && want.runtime {
            let max = max_section.min(MAX_PACKED);
            facts.gnu_debugdata = section_bytes::<Elf, R>(sh, endian, data, max)
                .ok()
                .map(<[u8]>::to_vec);
        }
        let is_symtab = ty == elf::SHT_SYMTAB;
        if !(is_symtab && want.symtab || ty == elf::SHT_DYNSYM && want.dynsym) {
            continue;
        }
        let n = symbols::<Elf, R>(&sections, sh, endian, data, builder, max_section, file)?;
        if is_symtab {
            facts.symtab_functions += n;
        } else {
            facts.dynsym_functions += n;
        }
    }
    if want.runtime {
        facts.plt = plt::synthesize(
            header,
            &sections,
            shstrtab.as_ref(),
            endian,
            data,
            max_section,
        );
    }
    Ok(facts)
}

/// Add the synthesized PLT stubs to a table being built (as sized global functions, as perf
/// inserts them); stops quietly where the table is full.
pub(crate) fn push_plt(builder: &mut TableBuilder, plt: &[PltSymbol]) {
    for p in plt {
        let end = p.start.saturating_add(p.size);
        let r = rank(true, false, true, &p.name);
        if builder.push(p.start, p.size, end, r, &p.name, 0).is_err() {
            return;
        }
    }
}

fn section_names<'d, Elf: FileHeader, R: ReadRef<'d>>(
    header: &Elf,
    sections: &SectionTable<'d, Elf, R>,
    endian: Elf::Endian,
    data: R,
) -> Option<StringTable<'d>> {
    let index = header.shstrndx(endian, data).ok()?;
    let sh = sections
        .section(object::SectionIndex(index as usize))
        .ok()?;
    let bytes = section_bytes::<Elf, R>(sh, endian, data, MAX_SHSTRTAB).ok()?;
    Some(StringTable::new(bytes, 0, bytes.len() as u64))
}

/// The bytes a section takes in the file (none for `SHT_NOBITS`).
fn section_size<Elf: FileHeader>(sh: &Elf::SectionHeader, endian: Elf::Endian) -> usize {
    if sh.sh_type(endian) == elf::SHT_NOBITS {
        return 0;
    }
    let size: u64 = sh.sh_size(endian).into();
    size.try_into().unwrap_or(usize::MAX)
}

fn build_id<'d, Elf: FileHeader, R: ReadRef<'d>>(
    sections: &SectionTable<'d, Elf, R>,
    phdrs: &'d [Elf::ProgramHeader],
    endian: Elf::Endian,
    data: R,
) -> Option<BuildId> {
    let find = |mut notes: object::read::elf::NoteIterator<'d, Elf>| -> Option<BuildId> {
        while let Ok(Some(note)) = notes.next() {
            if note.name() == elf::ELF_NOTE_GNU && note.n_type(endian) == elf::NT_GNU_BUILD_ID {
                return BuildId::new(note.desc());
            }
        }
        None
    };
    // The notes in the sections; with no section headers (sstrip), in the program headers.
    // A note area larger than MAX_NOTES is passed over.
    let small = |size: u64| size <= MAX_NOTES;
    let areas: Vec<_> = if !sections.is_empty() {
        sections
            .iter()
            .filter(|sh| sh.sh_type(endian) == elf::SHT_NOTE && small(sh.sh_size(endian).into()))
            .filter_map(|sh| sh.notes(endian, data).ok().flatten())
            .collect()
    } else {
        phdrs
            .iter()
            .filter(|ph| ph.p_type(endian) == elf::PT_NOTE && small(ph.p_filesz(endian).into()))
            .filter_map(|ph| ph.notes(endian, data).ok().flatten())
            .collect()
    };
    areas.into_iter().find_map(find)
}

fn debuglink<'d, Elf: FileHeader, R: ReadRef<'d>>(
    sh: &Elf::SectionHeader,
    endian: Elf::Endian,
    data: R,
) -> Option<Vec<u8>> {
    let bytes = section_bytes::<Elf, R>(sh, endian, data, MAX_DEBUGLINK).ok()?;
    let name = &bytes[..bytes.iter().position(|&b| b == 0)?];
    // A file name, not a path: a link that climbs out of the debug directories is ignored.
    if name.is_empty() || name.contains(&b'/') || name == b"." || name == b".." {
        return None;
    }
    Some(name.to_vec())
}

/// Symbol table bytes read from a file at a time.
const SYMTAB_CHUNK: usize = 64 << 10;

/// Add the function symbols of one symbol table; returns how many. Its string table is read
/// whole (names are found by offset); the symbols themselves, from `file` when there is one,
/// in chunks of [`SYMTAB_CHUNK`] bytes. What the parse holds is counted against the
/// builder's limit before it is read.
fn symbols<'d, Elf: FileHeader, R: ReadRef<'d>>(
    sections: &SectionTable<'d, Elf, R>,
    sh: &Elf::SectionHeader,
    endian: Elf::Endian,
    data: R,
    builder: &mut TableBuilder,
    max_section: u64,
    file: Option<&File>,
) -> Result<usize, ElfError> {
    let too_large = |TooLarge| ElfError::TooLarge { limit: max_section };
    let size = section_size::<Elf>(sh, endian);
    if size as u64 > max_section {
        return Err(ElfError::TooLarge { limit: max_section });
    }
    let strtab = sections
        .section(sh.link(endian))
        .map_err(|_| ElfError::Corrupt("symbol string table index"))?;
    let strtab_size = section_size::<Elf>(strtab, endian);
    let entry = std::mem::size_of::<Elf::Sym>();
    if size % entry != 0 {
        return Err(ElfError::Corrupt("symbol table size"));
    }
    let admits = admits::<Elf, R>(sections, endian);
    let read_strings = |builder: &mut TableBuilder| -> Result<StringTable<'d>, ElfError> {
        builder.hold(strtab_size).map_err(too_large)?;
        let strings = section_bytes::<Elf, R>(strtab, endian, data, max_section)?;
        Ok(StringTable::new(strings, 0, strings.len() as u64))
    };
    let Some(file) = file.filter(|_| sh.sh_type(endian) != elf::SHT_NOBITS) else {
        let strings = read_strings(builder)?;
        builder.hold(size).map_err(too_large)?;
        let bytes = section_bytes::<Elf, R>(sh, endian, data, max_section)?;
        let syms: &[Elf::Sym] = object::pod::slice_from_all_bytes(bytes)
            .map_err(|_| ElfError::Corrupt("symbol table size"))?;
        return add_symbols::<Elf, R>(
            sections,
            &admits,
            syms,
            endian,
            Some(strings),
            Some(builder),
            &mut 0,
        )
        .map_err(too_large);
    };
    use std::os::unix::fs::FileExt;
    let chunk = SYMTAB_CHUNK / entry * entry;
    builder.hold(chunk.min(size)).map_err(too_large)?;
    let offset: u64 = sh.sh_offset(endian).into();
    let mut buf = vec![0u8; chunk.min(size)];
    // Three times over the chunks, so that nothing is allocated for a table that will not
    // fit: the functions, before their names are read (each takes an entry); their names'
    // bytes; then their entries, in vectors of exactly the size counted.
    let mut strings = None;
    let mut n = 0;
    for pass in 0..3 {
        let (mut done, mut names, mut functions) = (0, 0, 0);
        while done < size {
            let len = chunk.min(size - done);
            file.read_exact_at(&mut buf[..len], offset + done as u64)
                .map_err(|_| ElfError::Corrupt("section outside the file"))?;
            let syms: &[Elf::Sym] = object::pod::slice_from_all_bytes(&buf[..len])
                .map_err(|_| ElfError::Corrupt("symbol table size"))?;
            let to = (pass == 2).then_some(&mut *builder);
            functions +=
                add_symbols::<Elf, R>(sections, &admits, syms, endian, strings, to, &mut names)
                    .map_err(too_large)?;
            done += len;
        }
        match pass {
            0 => {
                builder.fits(functions, 0, strtab_size).map_err(too_large)?;
                strings = Some(read_strings(builder)?);
            }
            1 => builder.reserve(functions, names).map_err(too_large)?,
            _ => n = functions,
        }
    }
    Ok(n)
}

/// A section whose labels count as functions: its name has "text" in it (perf's
/// `elf_sec__is_text`).
const TEXT: u8 = 1;
/// A section whose objects an instruction pointer can fall in: executable. perf keeps every
/// object; only these can ever be a sample's symbol.
const EXECUTABLE: u8 = 2;

/// For each section, by index: which symbols besides functions it gives the table. perf
/// (`dso__load_sym`) keeps labels (STT_NOTYPE, not hidden or internal) in text sections and
/// objects beside the functions: `_dl_start_user` in ld.so, an assembler routine's entry.
fn admits<'d, Elf: FileHeader, R: ReadRef<'d>>(
    sections: &SectionTable<'d, Elf, R>,
    endian: Elf::Endian,
) -> Vec<u8> {
    sections
        .iter()
        .map(|sh| {
            let flags: u64 = sh.sh_flags(endian).0;
            let name = sections.section_name(endian, sh).unwrap_or(&[]);
            let text = name.windows(4).any(|w| w == b"text");
            (if text { TEXT } else { 0 })
                | (if flags & elf::SHF_EXECINSTR.0 != 0 {
                    EXECUTABLE
                } else {
                    0
                })
        })
        .collect()
}

/// Add the functions (and the labels and objects perf counts as symbols) among `syms`; how
/// many.
fn add_symbols<'d, Elf: FileHeader, R: ReadRef<'d>>(
    sections: &SectionTable<'d, Elf, R>,
    admits: &[u8],
    syms: &[Elf::Sym],
    endian: Elf::Endian,
    strings: Option<StringTable<'d>>,
    mut builder: Option<&mut TableBuilder>,
    names: &mut usize,
) -> Result<usize, TooLarge> {
    let mut n = 0;
    for sym in syms {
        // `index()`: neither SHN_UNDEF nor SHN_ABS (nor another reserved index).
        let Some(shndx) = sym.st_shndx(endian).index() else {
            continue;
        };
        let admit = admits.get(shndx as usize).copied().unwrap_or(0);
        let wanted = match sym.st_type() {
            elf::STT_FUNC | elf::STT_GNU_IFUNC => true,
            elf::STT_OBJECT => admit & EXECUTABLE != 0,
            elf::STT_NOTYPE => {
                let vis = sym.st_visibility();
                admit & TEXT != 0 && vis != elf::STV_HIDDEN && vis != elf::STV_INTERNAL
            }
            _ => false,
        };
        if !wanted {
            continue;
        }
        let start: u64 = sym.st_value(endian).into();
        if start == 0 {
            continue;
        }
        // Without the string table yet: every candidate counts.
        let Some(strings) = strings else {
            n += 1;
            continue;
        };
        let Ok(name) = sym.name(endian, strings) else {
            continue;
        };
        if name.is_empty() {
            continue;
        }
        n += 1;
        *names += name.len().min(super::table::MAX_NAME);
        let Some(builder) = builder.as_deref_mut() else {
            continue;
        };
        let size: u64 = sym.st_size(endian).into();
        // A sizeless symbol may extend at most to the end of its section.
        let bound = sections
            .section(object::SectionIndex(shndx as usize))
            .ok()
            .map(|s| {
                let a: u64 = s.sh_addr(endian).into();
                let z: u64 = s.sh_size(endian).into();
                a.saturating_add(z)
            })
            .filter(|&end| end > start)
            .unwrap_or(start.saturating_add(1));
        let bind = sym.st_bind();
        // As perf reads bindings: only STB_GLOBAL is global (not STB_GNU_UNIQUE).
        let weak = bind == elf::STB_WEAK;
        let global = bind == elf::STB_GLOBAL;
        builder.push(
            start,
            size,
            bound,
            rank(size > 0, weak, global, name),
            name,
            0,
        )?;
    }
    Ok(n)
}

/// Parse ELF bytes the way a mapped file is parsed (for tests and fuzzing): the facts and
/// the table that would be built.
pub fn parse_bytes(bytes: &[u8]) -> Result<usize, ElfError> {
    let mut builder = TableBuilder::new(64 << 20);
    let facts = read(
        bytes,
        Want {
            symtab: true,
            dynsym: true,
            runtime: true,
        },
        &mut builder,
        64 << 20,
    )?;
    push_plt(&mut builder, &facts.plt);
    let table = builder.build(facts.symtab_functions > 0);
    for i in 0..table.len() as u32 {
        // Empty only at the very top of the address space.
        assert!(table.start(i) < table.end(i) || table.start(i) == u64::MAX);
        let _ = super::demangle::display_name(table.name(i));
    }
    for s in &facts.segments {
        let _ = offset_to_vaddr(&facts.segments, s.offset);
    }
    Ok(table.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_map_through_load_segments() {
        let segs = [
            Segment {
                offset: 0,
                filesz: 0x600,
                vaddr: 0,
            },
            Segment {
                offset: 0x1000,
                filesz: 0x1f5,
                vaddr: 0x1000,
            },
            Segment {
                offset: 0x2db8,
                filesz: 0x258,
                vaddr: 0x3db8,
            },
        ];
        assert_eq!(offset_to_vaddr(&segs, 0x1136), Some(0x1136));
        assert_eq!(offset_to_vaddr(&segs, 0x2dc0), Some(0x3dc0));
        assert_eq!(offset_to_vaddr(&segs, 0x11f5), None);
        assert_eq!(offset_to_vaddr(&segs, u64::MAX), None);
    }

    #[test]
    fn garbage_is_refused_with_a_reason() {
        assert_eq!(parse_bytes(b""), Err(ElfError::NotElf));
        assert_eq!(parse_bytes(b"#!/bin/sh\necho hi\n"), Err(ElfError::NotElf));
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 9;
        assert_eq!(parse_bytes(&h), Err(ElfError::Corrupt("ELF class")));
        h[4] = 2;
        assert!(parse_bytes(&h).is_err());
    }

    #[test]
    fn the_running_test_binary_has_symbols() {
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let n = parse_bytes(&exe).unwrap();
        assert!(n > 100, "{n} functions");
    }
}
