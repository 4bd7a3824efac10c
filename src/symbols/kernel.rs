//! Kernel symbols from `/proc/kallsyms` (`ADDR TYPE NAME[\t[MODULE]]` per line), with module
//! extents from `/proc/modules` (`NAME SIZE REFS DEPS STATE ADDR ...`).
//!
//! Only text symbols (`t T w W`) are named; every symbol's address bounds the one before it,
//! and a module's extent bounds its last symbol. When the kernel hides addresses
//! (`kptr_restrict`, or an unprivileged reader), kallsyms lists every symbol at 0: the result
//! says so instead of naming everything after the first symbol.

use rustc_hash::FxHashMap;

use super::table::{SymbolTable, TableBuilder, TooLarge, rank};

/// The kernel's function symbols.
pub struct KernelSymbols {
    pub(crate) table: SymbolTable,
    /// Owner names by tag: 0 is the kernel image, then modules (`[bpf]`, `[ext4]`, ...).
    pub(crate) owners: Vec<Box<[u8]>>,
    /// kallsyms listed symbols, all at address 0.
    pub(crate) hidden: bool,
    /// Lines that were not `ADDR TYPE NAME`.
    pub(crate) bad_lines: usize,
}

impl KernelSymbols {
    /// How many functions are named.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The function at `addr` (for tests and tools).
    pub fn lookup(&self, addr: u64) -> Option<KernelSymbol<'_>> {
        let (i, off) = self.table.find(addr)?;
        let tag = self.table.tag(i);
        Some(KernelSymbol {
            name: self.table.name(i),
            offset: off,
            module: (tag != 0).then(|| &*self.owners[tag as usize]),
        })
    }
}

/// No kernel function is this long: a symbol followed by a gap (the end of text, freed init
/// code) covers at most this much, so that the gap is not named after it.
const MAX_EXTENT: u64 = 1 << 20;

/// A kernel function as [`KernelSymbols::lookup`] finds it.
#[derive(Debug, PartialEq, Eq)]
pub struct KernelSymbol<'a> {
    pub name: &'a [u8],
    pub offset: u64,
    /// The module that holds it; `None`: the kernel image.
    pub module: Option<&'a [u8]>,
}

struct Line<'a> {
    addr: u64,
    text: bool,
    weak: bool,
    global: bool,
    name: &'a [u8],
    owner: u16,
}

fn parse_hex(s: &[u8]) -> Option<u64> {
    let s = s.strip_prefix(b"0x").unwrap_or(s);
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v = 0u64;
    for &c in s {
        v = v << 4 | (c as char).to_digit(16)? as u64;
    }
    Some(v)
}

/// `[start, end)` of each loaded module, by name.
fn module_extents(modules: &[u8]) -> FxHashMap<&[u8], (u64, u64)> {
    let mut out = FxHashMap::default();
    for line in modules.split(|&b| b == b'\n') {
        let mut f = line.split(|&b| b == b' ').filter(|f| !f.is_empty());
        let (Some(name), Some(size)) = (f.next(), f.next()) else {
            continue;
        };
        let Some(addr) = f.nth(3).and_then(parse_hex) else {
            continue;
        };
        let Some(size) = std::str::from_utf8(size)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
        else {
            continue;
        };
        if addr != 0 {
            out.insert(name, (addr, addr.saturating_add(size)));
        }
    }
    out
}

/// Parse kallsyms (and, when readable, `/proc/modules`) into a table of at most
/// `max_bytes`.
pub fn parse(
    kallsyms: &[u8],
    modules: Option<&[u8]>,
    max_bytes: usize,
) -> Result<KernelSymbols, TooLarge> {
    let extents = modules.map(module_extents).unwrap_or_default();
    let mut owners: Vec<Box<[u8]>> = vec![Box::from(&b"kernel"[..])];
    let mut owner_of: FxHashMap<&[u8], u16> = FxHashMap::default();
    let mut lines = Vec::new();
    let mut bad_lines = 0;
    let mut listed = 0usize;
    for raw in kallsyms.split(|&b| b == b'\n') {
        if raw.is_empty() {
            continue;
        }
        let mut f = raw.splitn(3, |&b| b == b' ');
        let (Some(addr), Some(ty), Some(rest)) = (f.next(), f.next(), f.next()) else {
            bad_lines += 1;
            continue;
        };
        let (Some(addr), [ty]) = (parse_hex(addr), ty) else {
            bad_lines += 1;
            continue;
        };
        listed += 1;
        let (name, module) = match rest.iter().position(|&b| b == b'\t') {
            Some(tab) => {
                let m = &rest[tab + 1..];
                let m = m
                    .strip_prefix(b"[")
                    .and_then(|m| m.strip_suffix(b"]"))
                    .unwrap_or(m);
                (&rest[..tab], Some(m))
            }
            None => (rest, None),
        };
        if name.is_empty() || addr == 0 {
            continue;
        }
        let owner = match module {
            None => 0,
            Some(m) => match owner_of.get(m) {
                Some(&o) => o,
                None if owners.len() < u16::MAX as usize => {
                    let o = owners.len() as u16;
                    owners.push(m.into());
                    owner_of.insert(m, o);
                    o
                }
                None => 0,
            },
        };
        lines.push(Line {
            addr,
            text: matches!(ty, b't' | b'T' | b'w' | b'W'),
            // The bindings perf gives kallsyms types (`kallsyms2elf_binding`): `W` weak,
            // other upper case global, lower case (`w` too) local.
            weak: *ty == b'W',
            global: ty.is_ascii_uppercase() && *ty != b'W',
            name,
            owner,
        });
    }
    let hidden = listed > 0 && lines.is_empty();
    lines.sort_by_key(|l| l.addr);

    let mut builder = TableBuilder::new(max_bytes);
    // Walk backwards so that the next higher address is at hand.
    let mut next_higher = u64::MAX;
    let mut ends = vec![0u64; lines.len()];
    for i in (0..lines.len()).rev() {
        ends[i] = next_higher;
        if i > 0 && lines[i - 1].addr < lines[i].addr {
            next_higher = lines[i].addr;
        }
    }
    for (l, &next) in lines.iter().zip(&ends) {
        if !l.text {
            continue;
        }
        let module_end = (l.owner != 0)
            .then(|| extents.get(&*owners[l.owner as usize]))
            .flatten()
            .filter(|&&(s, e)| l.addr >= s && l.addr < e)
            .map(|&(_, e)| e);
        let end = match (next, module_end) {
            (u64::MAX, None) => l.addr.saturating_add(1),
            (n, None) => n,
            (n, Some(e)) => n.min(e),
        }
        .min(l.addr.saturating_add(MAX_EXTENT));
        builder.push(
            l.addr,
            end - l.addr,
            u64::MAX,
            // kallsyms gives no sizes: of several names at one address, the last listed
            // is the one perf shows (`__x64_sys_getuid`, not `__ia32_sys_getuid`).
            rank(false, l.weak, l.global, l.name),
            l.name,
            l.owner,
        )?;
    }
    Ok(KernelSymbols {
        table: builder.build(true),
        owners,
        hidden,
        bad_lines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const KALLSYMS: &[u8] = b"\
ffffffff81000000 T _stext
ffffffff81000000 T _text
ffffffff81001000 T do_one
ffffffff81001040 t helper
ffffffff81001080 r some_rodata
ffffffff810010c0 W weak_fn
ffffffff81002000 T _etext
ffffffffc0200000 t mod_fn\t[ext4]
ffffffffc0200100 t mod_last\t[ext4]
ffffffffc0300000 t bpf_prog_1234_x\t[bpf]
";
    const MODULES: &[u8] = b"ext4 4096 1 - Live 0xffffffffc0200000\n";

    fn name(k: &KernelSymbols, addr: u64) -> Option<(String, u64, Option<String>)> {
        k.lookup(addr).map(|s| {
            (
                String::from_utf8_lossy(s.name).into_owned(),
                s.offset,
                s.module.map(|m| String::from_utf8_lossy(m).into_owned()),
            )
        })
    }

    #[test]
    fn text_symbols_are_bounded_by_the_next_symbol_of_any_kind() {
        let k = parse(KALLSYMS, Some(MODULES), usize::MAX).unwrap();
        assert!(!k.hidden);
        assert_eq!(
            name(&k, 0xffffffff81001004),
            Some(("do_one".into(), 4, None))
        );
        assert_eq!(
            name(&k, 0xffffffff8100107f),
            Some(("helper".into(), 0x3f, None))
        );
        // Read-only data between helper and weak_fn is no function.
        assert_eq!(name(&k, 0xffffffff81001090), None);
        // Two names at one address: the last listed, as perf shows it.
        assert_eq!(
            name(&k, 0xffffffff81000010),
            Some(("_text".into(), 0x10, None))
        );
    }

    #[test]
    fn of_several_names_at_one_address_the_last_listed_is_perfs() {
        // As Linux 6.x lists them (perf names these __x64_sys_getuid, __pi_memcpy,
        // __x86_indirect_thunk_rax and cpu_show_ghostwrite).
        let k = parse(
            b"\
ffffffff81382ec0 t __do_sys_getuid
ffffffff81382ec0 T __ia32_sys_getuid
ffffffff81382ec0 T __x64_sys_getuid
ffffffff81382f00 t __do_sys_geteuid
ffffffff822424e0 T memcpy
ffffffff822424e0 T __memcpy
ffffffff822424e0 T __pi_memcpy
ffffffff822424f0 T memset
ffffffff82250fc0 T __pi___x86_indirect_thunk_rax
ffffffff82250fc0 T __x86_indirect_thunk_array
ffffffff82250fc0 T __x86_indirect_thunk_rax
ffffffff82250fe0 T __x86_indirect_thunk_rcx
ffffffff81d984b0 t cpu_show_not_affected
ffffffff81d984b0 W cpu_show_ghostwrite
ffffffff81d984c0 t next
",
            None,
            usize::MAX,
        )
        .unwrap();
        let at = |a| name(&k, a).map(|n| n.0);
        assert_eq!(at(0xffffffff81382ee3).as_deref(), Some("__x64_sys_getuid"));
        assert_eq!(at(0xffffffff822424e0).as_deref(), Some("__pi_memcpy"));
        assert_eq!(
            at(0xffffffff82250fc6).as_deref(),
            Some("__x86_indirect_thunk_rax")
        );
        assert_eq!(
            at(0xffffffff81d984b8).as_deref(),
            Some("cpu_show_ghostwrite")
        );
    }

    #[test]
    fn module_symbols_name_their_module_and_stop_at_its_end() {
        let k = parse(KALLSYMS, Some(MODULES), usize::MAX).unwrap();
        assert_eq!(
            name(&k, 0xffffffffc0200010),
            Some(("mod_fn".into(), 0x10, Some("ext4".into())))
        );
        assert_eq!(
            name(&k, 0xffffffffc0200ff0),
            Some(("mod_last".into(), 0xef0, Some("ext4".into())))
        );
        // Past ext4's 4096 bytes.
        assert_eq!(name(&k, 0xffffffffc0201000), None);
        assert_eq!(
            name(&k, 0xffffffffc0300000),
            Some(("bpf_prog_1234_x".into(), 0, Some("bpf".into())))
        );
        // Without /proc/modules the last symbol of a module ends at the next one.
        let k = parse(KALLSYMS, None, usize::MAX).unwrap();
        assert!(name(&k, 0xffffffffc0201000).is_some());
    }

    #[test]
    fn kallsyms_full_of_zeros_is_hidden_not_misread() {
        let zeros =
            b"0000000000000000 T _stext\n0000000000000000 T do_one\n0000000000000000 t x\t[ext4]\n";
        let k = parse(
            zeros,
            Some(b"ext4 4096 1 - Live 0x0000000000000000\n"),
            usize::MAX,
        )
        .unwrap();
        assert!(k.hidden);
        assert!(k.is_empty());
        assert_eq!(name(&k, 0xffffffff81001000), None);
    }

    #[test]
    fn garbage_lines_are_skipped_and_counted() {
        let text = b"garbage\nffffffff81000000 T ok\nzzzz T bad\nffffffff81000100 TT bad\n\xff\xfe\n ffffffff81000200 T\n";
        let k = parse(text, None, usize::MAX).unwrap();
        assert_eq!(k.len(), 1);
        assert_eq!(k.bad_lines, 5);
        assert!(parse(b"", None, usize::MAX).unwrap().is_empty());
    }

    #[test]
    fn the_running_kernel_parses() {
        let Ok(text) = std::fs::read("/proc/kallsyms") else {
            crate::skip_test(
                "symbols::kernel::tests::the_running_kernel_parses",
                "/proc/kallsyms cannot be read",
            );
            return;
        };
        let modules = std::fs::read("/proc/modules").ok();
        let k = parse(&text, modules.as_deref(), usize::MAX).unwrap();
        if k.hidden {
            crate::skip_test(
                "symbols::kernel::tests::the_running_kernel_parses",
                "kallsyms hides its addresses here: nothing more to check",
            );
            return;
        }
        assert!(k.len() > 1000, "{} functions", k.len());
        eprintln!(
            "kallsyms: {} functions in {} bytes",
            k.len(),
            k.table.bytes()
        );
    }
}
