//! Names for PLT stubs (`memcmp@plt`), which no symbol table lists: a call to a shared
//! library's function goes through its stub in the caller's `.plt` (`.plt.sec` with IBT,
//! `.plt.got` for functions bound at load), and a sample in one is otherwise `[unknown]`.
//!
//! Synthesized as perf does (`dso__synthesize_plt_symbols` in `tools/perf/util/symbol-elf.c`):
//! the relocations of `.rela.plt` (`.rel.plt`) are in the order of the stubs, each naming the
//! `.dynsym` symbol its stub jumps to; a lazy `.plt` starts with a header stub (`.plt`); a
//! `.plt.got` stub is named by the `.rela.dyn` relocation of the GOT slot its `jmp *slot(%rip)`
//! reads. What cannot be named this way is `offset_0x...@plt`, as perf calls it. Always from
//! the binary itself: a debug file has the PLT's sections but not their bytes.

use object::elf;
use object::read::elf::{FileHeader, Rel, Rela, SectionHeader, SectionTable, Sym};
use object::read::{ReadRef, StringTable};

use rustc_hash::{FxHashMap, FxHashSet};

use super::section::section_bytes;
use super::table::rank;

/// One synthesized stub symbol, at its ELF address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PltSymbol {
    pub start: u64,
    pub size: u64,
    pub name: Vec<u8>,
}

/// Stubs named at most: real binaries have hundreds, a large C++ program some thousands; a
/// crafted relocation section is not read past this (nor allocated for).
const MAX_STUBS: usize = 1 << 16;

/// Relocation sections larger than this are not read for stub names.
const MAX_RELOC_BYTES: u64 = 8 << 20;

/// The stub sizes of a machine's PLT: (header, entry); `None` when unknown.
fn sizes(machine: elf::Machine, entsize: u64, addralign: u64) -> Option<(u64, u64)> {
    let (header, entry) = match machine {
        elf::EM_ARM => (20, 12),
        elf::EM_AARCH64 | elf::EM_LOONGARCH => (32, 16),
        elf::EM_SPARC => (48, 12),
        elf::EM_SPARCV9 => (128, 32),
        elf::EM_386 | elf::EM_X86_64 => {
            // 8 or 16; else the alignment says which.
            let e = match entsize {
                8 | 16 => entsize,
                _ if addralign == 8 => 8,
                _ => 16,
            };
            (e, e)
        }
        _ => (entsize, entsize),
    };
    (entry > 0).then_some((header, entry))
}

fn is_x86(machine: elf::Machine) -> bool {
    machine == elf::EM_386 || machine == elf::EM_X86_64
}

/// The sections the PLT is made of, by name.
const PLT_SECTIONS: [&[u8]; 6] = [
    b".plt",
    b".plt.sec",
    b".plt.got",
    b".rela.plt",
    b".rel.plt",
    b".rela.dyn",
];

/// The sections of one ELF file, the PLT's found by name once.
struct Sections<'a, 'd, Elf: FileHeader, R: ReadRef<'d>> {
    table: &'a SectionTable<'d, Elf, R>,
    found: [Option<&'d Elf::SectionHeader>; PLT_SECTIONS.len()],
    endian: Elf::Endian,
    data: R,
    max: u64,
}

impl<'a, 'd, Elf: FileHeader, R: ReadRef<'d>> Sections<'a, 'd, Elf, R> {
    fn new(
        table: &'a SectionTable<'d, Elf, R>,
        names: Option<&StringTable<'d>>,
        endian: Elf::Endian,
        data: R,
        max: u64,
    ) -> Self {
        let mut found = [None; PLT_SECTIONS.len()];
        if let Some(names) = names {
            for sh in table.iter() {
                let Ok(name) = sh.name(endian, *names) else {
                    continue;
                };
                if let Some(i) = PLT_SECTIONS.iter().position(|&n| n == name) {
                    found[i].get_or_insert(sh);
                }
            }
        }
        Sections {
            table,
            found,
            endian,
            data,
            max,
        }
    }

    /// The first section named `name` (one of [`PLT_SECTIONS`]).
    fn by_name(&self, name: &[u8]) -> Option<&'d Elf::SectionHeader> {
        let i = PLT_SECTIONS.iter().position(|&n| n == name)?;
        self.found[i]
    }

    fn bytes(&self, sh: &Elf::SectionHeader) -> Option<&'d [u8]> {
        section_bytes::<Elf, R>(sh, self.endian, self.data, self.max).ok()
    }

    /// A relocation section's bytes, unless it is larger than any real PLT's needs (a huge
    /// library's `.rela.dyn` is not read whole to name a few `.plt.got` stubs).
    fn relocations(&self, sh: &Elf::SectionHeader) -> Option<&'d [u8]> {
        section_bytes::<Elf, R>(sh, self.endian, self.data, self.max.min(MAX_RELOC_BYTES)).ok()
    }

    /// The symbols of the symbol table at `index`, and their names.
    fn symbols(&self, index: u32) -> Option<(&'d [Elf::Sym], StringTable<'d>)> {
        let sh = self
            .table
            .section(object::SectionIndex(index as usize))
            .ok()?;
        let ty = sh.sh_type(self.endian);
        if ty != elf::SHT_DYNSYM && ty != elf::SHT_SYMTAB {
            return None;
        }
        let syms = object::pod::slice_from_all_bytes(self.bytes(sh)?).ok()?;
        let strtab = self.table.section(sh.link(self.endian)).ok()?;
        let strings = self.bytes(strtab)?;
        Some((syms, StringTable::new(strings, 0, strings.len() as u64)))
    }
}

/// `NAME@plt` for symbol `index` of `symbols`; `None` when it has no name.
fn stub_name<'d, Elf: FileHeader>(
    symbols: &(&'d [Elf::Sym], StringTable<'d>),
    index: u32,
    endian: Elf::Endian,
) -> Option<Vec<u8>> {
    let sym = symbols.0.get(index as usize)?;
    let name = sym.name(endian, symbols.1).ok()?;
    if name.is_empty() {
        return None;
    }
    Some([name, b"@plt"].concat())
}

/// perf's name for a stub it cannot name: by its file offset.
fn by_offset(offset: u64) -> Vec<u8> {
    format!("offset_{offset:#x}@plt").into_bytes()
}

/// The file offset of address `addr` in section `sh`.
fn file_offset<Elf: FileHeader>(sh: &Elf::SectionHeader, endian: Elf::Endian, addr: u64) -> u64 {
    let base: u64 = sh.sh_addr(endian).into();
    let off: u64 = sh.sh_offset(endian).into();
    off.wrapping_add(addr.wrapping_sub(base))
}

/// The PLT stubs of an ELF file, named; empty when it has no PLT or one this cannot read.
pub(crate) fn synthesize<'d, Elf: FileHeader, R: ReadRef<'d>>(
    header: &Elf,
    table: &SectionTable<'d, Elf, R>,
    names: Option<&StringTable<'d>>,
    endian: Elf::Endian,
    data: R,
    max: u64,
) -> Vec<PltSymbol> {
    let s = Sections::new(table, names, endian, data, max);
    let machine = header.e_machine(endian);
    let mut out = Vec::new();
    let Some(plt) = s.by_name(b".plt") else {
        return out;
    };
    if plt.sh_type(endian) == elf::SHT_NOBITS {
        return out;
    }
    let plt_addr: u64 = plt.sh_addr(endian).into();
    let plt_size: u64 = plt.sh_size(endian).into();
    let Some((header_size, entry_size)) = sizes(
        machine,
        plt.sh_entsize(endian).into(),
        plt.sh_addralign(endian).into(),
    ) else {
        return out;
    };
    out.push(PltSymbol {
        start: plt_addr,
        size: header_size,
        name: b".plt".to_vec(),
    });
    if is_x86(machine) {
        plt_got::<Elf, R>(&s, machine, &mut out);
    }
    let (mut at, entry_size, lazy) = match s.by_name(b".plt.sec").filter(|_| is_x86(machine)) {
        Some(sec) => {
            let Some((_, e)) = sizes(
                machine,
                sec.sh_entsize(endian).into(),
                sec.sh_addralign(endian).into(),
            ) else {
                return out;
            };
            // The header symbol covers the whole .plt: its stubs only jump to the resolver.
            out[0].size = plt_size;
            (sec.sh_addr(endian).into(), e, false)
        }
        None => (plt_addr, entry_size, true),
    };
    let Some(rel) = s.by_name(b".rela.plt").or_else(|| s.by_name(b".rel.plt")) else {
        return out;
    };
    let ty = rel.sh_type(endian);
    let link = rel.sh_link(endian);
    let entsize: u64 = rel.sh_entsize(endian).into();
    if !(ty == elf::SHT_RELA || ty == elf::SHT_REL) || link == 0 || entsize == 0 {
        return out;
    }
    let Some(symbols) = s.symbols(link) else {
        return out;
    };
    let Some(bytes) = s.relocations(rel) else {
        return out;
    };
    // (GOT slot, symbol index, IFUNC resolver) per stub, in the stubs' order: x86 puts
    // IFUNC relocations out of it, so sort by slot there.
    let mut relocs: Vec<(u64, u32, Option<u64>)> = if ty == elf::SHT_RELA {
        let r: &[Elf::Rela] = object::pod::slice_from_all_bytes(bytes).unwrap_or(&[]);
        let mips64el = header.is_mips64el(endian);
        r.iter()
            .take(MAX_STUBS)
            .map(|r| {
                // x86-64 puts an IFUNC's address in the addend of an IRELATIVE relocation.
                let ifunc = (machine == elf::EM_X86_64
                    && r.r_type(endian, mips64el) == R_X86_64_IRELATIVE)
                    .then(|| r.r_addend(endian).into() as u64);
                (r.r_offset(endian).into(), r.r_sym(endian, mips64el), ifunc)
            })
            .collect()
    } else {
        let r: &[Elf::Rel] = object::pod::slice_from_all_bytes(bytes).unwrap_or(&[]);
        r.iter()
            .take(MAX_STUBS)
            .map(|r| (r.r_offset(endian).into(), r.r_sym(endian), None))
            .collect()
    };
    if lazy {
        // A .plt with as many stubs as relocations has no header.
        if (relocs.len() as u64).checked_mul(entry_size) == Some(plt_size) {
            out.remove(0);
        } else {
            at = at.saturating_add(header_size);
        }
    }
    if is_x86(machine) {
        relocs.sort_by_key(|&(slot, _, _)| slot);
    }
    let ifuncs = ifunc_names::<Elf>(&symbols, relocs.iter().filter_map(|r| r.2), endian);
    let stubs_in = if lazy {
        plt
    } else {
        s.by_name(b".plt.sec").unwrap_or(plt)
    };
    for (_, sym, ifunc) in relocs {
        let name = stub_name::<Elf>(&symbols, sym, endian)
            .or_else(|| {
                let n = ifuncs.get(&ifunc?)?;
                Some([&n[..], b"@plt"].concat())
            })
            .unwrap_or_else(|| by_offset(file_offset::<Elf>(stubs_in, endian, at)));
        out.push(PltSymbol {
            start: at,
            size: entry_size,
            name,
        });
        at = at.saturating_add(entry_size);
    }
    out
}

/// `R_X86_64_IRELATIVE`: the GOT slot gets what the IFUNC resolver at the addend returns.
const R_X86_64_IRELATIVE: elf::RelocationType = elf::RelocationType(37);

/// The names of the IFUNCs at `addrs`: of the symbols at each that include an IFUNC, the one
/// the table would show ([`rank`]), as perf names such a stub after the symbol it finds there.
fn ifunc_names<'d, Elf: FileHeader>(
    symbols: &(&'d [Elf::Sym], StringTable<'d>),
    addrs: impl Iterator<Item = u64>,
    endian: Elf::Endian,
) -> FxHashMap<u64, &'d [u8]> {
    let wanted: FxHashSet<u64> = addrs.collect();
    let mut best: FxHashMap<u64, (u64, &'d [u8], bool)> = FxHashMap::default();
    if wanted.is_empty() {
        return best.into_iter().map(|(a, (_, n, _))| (a, n)).collect();
    }
    for sym in symbols.0 {
        let ty = sym.st_type();
        let value: u64 = sym.st_value(endian).into();
        if !(ty == elf::STT_FUNC || ty == elf::STT_GNU_IFUNC)
            || sym.st_shndx(endian) == elf::SHN_UNDEF
            || !wanted.contains(&value)
        {
            continue;
        }
        let Ok(name) = sym.name(endian, symbols.1) else {
            continue;
        };
        if name.is_empty() {
            continue;
        }
        let size: u64 = sym.st_size(endian).into();
        let bind = sym.st_bind();
        let r = rank(
            size > 0,
            bind == elf::STB_WEAK,
            bind == elf::STB_GLOBAL,
            name,
        );
        let ifunc = ty == elf::STT_GNU_IFUNC;
        let e = best.entry(value).or_insert((r, name, ifunc));
        if r > e.0 {
            *e = (r, name, e.2 || ifunc);
        } else {
            e.2 |= ifunc;
        }
    }
    best.into_iter()
        .filter(|(_, (_, _, ifunc))| *ifunc)
        .map(|(a, (_, n, _))| (a, n))
        .collect()
}

/// The displacement of a `.plt.got` stub's `jmp *disp(%rip)` (after an `endbr64` and a `bnd`
/// prefix, when there), as the distance from the stub's start to the GOT slot it reads.
fn x86_64_jmp_target(stub: &[u8]) -> Option<u64> {
    let mut n = 0;
    if stub.starts_with(&[0xf3, 0x0f, 0x1e, 0xfa]) {
        n += 4;
    }
    if stub.get(n) == Some(&0xf2) {
        n += 1;
    }
    if stub.get(n..n + 2)? != [0xff, 0x25] {
        return None;
    }
    n += 2;
    let disp = i32::from_le_bytes(stub.get(n..n + 4)?.try_into().ok()?);
    Some(((n + 4) as i64 + disp as i64) as u64)
}

/// The stubs of `.plt.got`, each named by the `.rela.dyn` relocation of the GOT slot it
/// jumps through (x86-64; elsewhere, and where that fails, by offset).
fn plt_got<'d, Elf: FileHeader, R: ReadRef<'d>>(
    s: &Sections<'_, 'd, Elf, R>,
    machine: elf::Machine,
    out: &mut Vec<PltSymbol>,
) {
    let endian = s.endian;
    let Some(got) = s.by_name(b".plt.got") else {
        return;
    };
    let entsize: u64 = got.sh_entsize(endian).into();
    let size: u64 = got.sh_size(endian).into();
    if entsize == 0 || got.sh_type(endian) == elf::SHT_NOBITS {
        return;
    }
    let Some(stubs) = s.bytes(got) else {
        return;
    };
    let addr: u64 = got.sh_addr(endian).into();
    // GOT slot -> symbol, from .rela.dyn.
    let mut slots: Vec<(u64, u32)> = Vec::new();
    let mut symbols = None;
    if machine == elf::EM_X86_64
        && let Some(dyn_rel) = s.by_name(b".rela.dyn")
        && dyn_rel.sh_type(endian) == elf::SHT_RELA
        && let Some(bytes) = s.relocations(dyn_rel)
    {
        let r: &[Elf::Rela] = object::pod::slice_from_all_bytes(bytes).unwrap_or(&[]);
        slots = r
            .iter()
            .map(|r| (r.r_offset(endian).into(), r.r_sym(endian, false)))
            .filter(|&(_, sym)| sym != 0)
            .take(MAX_STUBS)
            .collect();
        slots.sort_unstable();
        symbols = s.symbols(dyn_rel.sh_link(endian));
    }
    let mut i = 0u64;
    while i < size && out.len() < MAX_STUBS {
        let name = stubs
            .get(i as usize..)
            .and_then(x86_64_jmp_target)
            .map(|t| addr.wrapping_add(i).wrapping_add(t))
            .and_then(|slot| {
                let k = slots.binary_search_by_key(&slot, |&(o, _)| o).ok()?;
                stub_name::<Elf>(symbols.as_ref()?, slots[k].1, endian)
            })
            .unwrap_or_else(|| by_offset(file_offset::<Elf>(got, endian, addr + i)));
        out.push(PltSymbol {
            start: addr.wrapping_add(i),
            size: entsize,
            name,
        });
        i += entsize;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plt_got_jumps_are_decoded_with_and_without_ibt() {
        // jmp *0x2fe2(%rip); xchg %ax,%ax
        assert_eq!(
            x86_64_jmp_target(&[0xff, 0x25, 0xe2, 0x2f, 0, 0, 0x66, 0x90]),
            Some(6 + 0x2fe2)
        );
        // endbr64; bnd jmp *-0x10(%rip)
        assert_eq!(
            x86_64_jmp_target(&[
                0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0xf0, 0xff, 0xff, 0xff
            ]),
            Some((11i64 - 0x10) as u64)
        );
        assert_eq!(x86_64_jmp_target(&[0xe9, 0, 0, 0, 0]), None);
        assert_eq!(x86_64_jmp_target(&[0xff, 0x25, 0]), None);
        assert_eq!(x86_64_jmp_target(&[]), None);
    }

    /// `memcmp` through its stub in a loop, `printf` and `strtol` once.
    const PROG: &str = r#"
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
int main(int argc, char **argv) {
    long n = argc > 1 ? strtol(argv[1], 0, 10) : 1000;
    char a[8] = "abcdefg", b[8] = "abcdefh";
    long s = 0;
    for (long i = 0; i < n; i++) s += memcmp(a, b, (size_t)(i & 7));
    printf("%ld\n", s);
    return 0;
}
"#;

    /// The stubs perfwatch synthesizes for a binary, by address.
    fn ours(bin: &std::path::Path) -> Vec<(u64, String)> {
        let bytes = std::fs::read(bin).unwrap();
        let mut b = crate::symbols::table::TableBuilder::new(1 << 20);
        let want = crate::symbols::elf::Want {
            symtab: false,
            dynsym: false,
            runtime: true,
        };
        let facts = crate::symbols::elf::read(&bytes[..], want, &mut b, 1 << 20).unwrap();
        facts
            .plt
            .iter()
            .map(|p| (p.start, String::from_utf8_lossy(&p.name).into_owned()))
            .collect()
    }

    /// The `NAME@plt` labels `objdump -d` gives stubs (binutils synthesizes them too).
    fn objdump(bin: &std::path::Path) -> Option<Vec<(u64, String)>> {
        let out = std::process::Command::new("objdump")
            .arg("-d")
            .arg(bin)
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        Some(
            text.lines()
                .filter_map(|l| {
                    let (addr, rest) = l.split_once(" <")?;
                    let name = rest.strip_suffix(">:")?;
                    name.ends_with("@plt")
                        .then(|| Some((u64::from_str_radix(addr, 16).ok()?, name.to_string())))
                        .flatten()
                })
                .collect(),
        )
    }

    #[test]
    fn stubs_are_named_as_binutils_names_them_lazy_now_and_with_ibt() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("p.c");
        std::fs::write(&src, PROG).unwrap();
        let variants: [&[&str]; 5] = [
            &[],
            &["-Wl,-z,now"],
            &["-fcf-protection"],
            // IBT stubs (.plt.sec) even where the C library's objects lack the IBT note.
            &["-fcf-protection", "-Wl,-z,ibtplt"],
            &["-fcf-protection", "-Wl,-z,ibtplt", "-Wl,-z,now"],
        ];
        let mut ibt = false;
        for (i, flags) in variants.iter().enumerate() {
            let bin = dir.path().join(format!("p{i}"));
            let st = std::process::Command::new("cc")
                .args(["-O1", "-fno-builtin"])
                .args(*flags)
                .arg("-o")
                .arg(&bin)
                .arg(&src)
                .status()
                .expect("cc (a C compiler is needed: .ci/run installs one)");
            assert!(st.success(), "cc {flags:?}");
            let ours = ours(&bin);
            let Some(theirs) = objdump(&bin) else {
                panic!("objdump (binutils, which cc brings) is needed");
            };
            println!("{flags:?}: ours {ours:x?}\nobjdump {theirs:x?}");
            assert!(
                theirs.iter().any(|(_, n)| n == "memcmp@plt"),
                "{flags:?}: {theirs:?}"
            );
            for t in &theirs {
                assert!(ours.contains(t), "{flags:?}: {t:x?} missing from {ours:x?}");
            }
            // Every stub we name is one objdump names, but for the header of a lazy .plt.
            for o in &ours {
                assert!(o.1 == ".plt" || theirs.contains(o), "{flags:?}: {o:x?}");
            }
            let bytes = std::fs::read(&bin).unwrap();
            ibt |= bytes.windows(9).any(|w| w == b".plt.sec\0");
        }
        assert!(ibt, "no variant had IBT stubs (.plt.sec)");
    }

    #[test]
    fn stub_sizes_follow_the_machine() {
        assert_eq!(sizes(elf::EM_X86_64, 16, 16), Some((16, 16)));
        assert_eq!(sizes(elf::EM_X86_64, 0, 8), Some((8, 8)));
        assert_eq!(sizes(elf::EM_X86_64, 5, 16), Some((16, 16)));
        assert_eq!(sizes(elf::EM_AARCH64, 0, 0), Some((32, 16)));
        assert_eq!(sizes(elf::Machine(0x7777), 0, 0), None);
    }
}
