//! A sorted table of function symbols with their extents: what every source (ELF symbol
//! tables, kallsyms, perf maps) is turned into, and what lookups search.
//!
//! Honesty rules: an address is named only when it lies inside a symbol's extent. A symbol
//! with a size covers `[start, start + size)`; a symbol without a size (hand-written assembly)
//! is extended to the next symbol only when the table is complete (a `.symtab`, kallsyms),
//! never in a `.dynsym`-only table, where the code between two exported functions belongs to
//! functions the table does not list.

/// One symbol before the table is built.
struct Raw {
    start: u64,
    size: u64,
    /// Where a sizeless symbol may extend to at most (its section's end).
    bound: u64,
    /// Higher wins when several symbols start at the same address.
    rank: u64,
    name_off: u32,
    name_len: u32,
    /// Who owns the symbol (a kernel module's index; 0 for ELF files).
    tag: u16,
}

/// Collects symbols, then sorts and bounds them into a [`SymbolTable`].
///
/// Its byte limit covers the parse (beyond [`PARSE_FLOOR`]), not only the table it ends with: the entries as they
/// are collected (their vectors' whole capacity, grown within the limit), the table built
/// from them (both are alive while it is built), and what the parse holds besides
/// ([`TableBuilder::hold`]: the symbol and string tables read from the file). A binary whose
/// parse would need more is refused before the memory is taken.
pub(crate) struct TableBuilder {
    raw: Vec<Raw>,
    strings: Names,
    /// The built table's limit.
    max_bytes: usize,
    /// The parse's limit: the table's, or [`PARSE_FLOOR`] for a small one.
    parse_max: usize,
    /// Bytes the parse holds outside the builder.
    held: usize,
}

/// What any parse may take whatever the table's limit: a small binary's tables, read whole,
/// and its entries take more than the table built from them.
pub(crate) const PARSE_FLOOR: usize = 1 << 20;

/// Symbol names end to end, each cut to [`MAX_NAME`] bytes, found again by `(offset, length)`.
#[derive(Default)]
pub(crate) struct Names(Vec<u8>);

impl Names {
    /// Store `name` when `used` bytes (the names so far among them) and the name fit within
    /// `max_bytes`; its offset and length.
    pub(crate) fn push(
        &mut self,
        name: &[u8],
        used: usize,
        max_bytes: usize,
    ) -> Result<(u32, u32), TooLarge> {
        let name = &name[..name.len().min(MAX_NAME)];
        if used + name.len() > max_bytes || self.0.len() + name.len() > u32::MAX as usize {
            return Err(TooLarge);
        }
        let off = self.0.len() as u32;
        self.0.extend_from_slice(name);
        Ok((off, name.len() as u32))
    }

    /// Make room for `more` bytes of names, growing to at most `limit` bytes of capacity.
    fn reserve_within(&mut self, more: usize, limit: usize) -> Result<(), TooLarge> {
        let (len, cap) = (self.0.len(), self.0.capacity());
        if len + more <= cap {
            return Ok(());
        }
        let want = (cap * 2).max(len + more).max(4096).min(limit);
        if want < len + more {
            return Err(TooLarge);
        }
        self.0.reserve_exact(want - len);
        Ok(())
    }

    pub(crate) fn get(&self, off: u32, len: u32) -> &[u8] {
        &self.0[off as usize..off as usize + len as usize]
    }

    /// Bytes held.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

/// The most bytes of name kept per symbol; longer names (only crafted binaries have them)
/// are cut, which keeps the memory bound honest.
pub(crate) const MAX_NAME: usize = 4096;

impl TableBuilder {
    /// A builder that refuses to grow past `max_bytes` of table.
    pub(crate) fn new(max_bytes: usize) -> TableBuilder {
        TableBuilder {
            raw: Vec::new(),
            strings: Names::default(),
            max_bytes,
            parse_max: max_bytes.max(PARSE_FLOOR),
            held: 0,
        }
    }

    /// The bytes the built table will take.
    pub(crate) fn bytes(&self) -> usize {
        self.raw.len() * ENTRY_BYTES + self.strings.len()
    }

    /// The bytes the parse takes at its peak so far: the entries' and names' capacity, the
    /// table built from them, and what is held.
    pub(crate) fn parse_bytes(&self) -> usize {
        self.raw.capacity() * RAW_BYTES
            + self.raw.len() * ENTRY_BYTES
            + self.strings.0.capacity()
            + self.held
    }

    /// Count `bytes` the parse holds until it ends (a symbol or string table read whole);
    /// `Err` when they do not fit beside what is taken already.
    pub(crate) fn hold(&mut self, bytes: usize) -> Result<(), TooLarge> {
        if self.parse_bytes().saturating_add(bytes) > self.parse_max {
            return Err(TooLarge);
        }
        self.held += bytes;
        Ok(())
    }

    /// Room for `entries` more symbols with `names` bytes of names, taken at once: `Err`,
    /// before anything is allocated, when the parse would not fit.
    pub(crate) fn reserve(&mut self, entries: usize, names: usize) -> Result<(), TooLarge> {
        self.fits(entries, names, 0)?;
        self.raw.reserve_exact(entries);
        self.strings.0.reserve_exact(names);
        Ok(())
    }

    /// Whether `entries` more symbols with `names` bytes of names fit, with `extra` bytes
    /// more held by the parse.
    pub(crate) fn fits(&self, entries: usize, names: usize, extra: usize) -> Result<(), TooLarge> {
        let len = self.raw.len().saturating_add(entries);
        let need = len
            .saturating_mul(RAW_BYTES + ENTRY_BYTES)
            .saturating_add(self.strings.len() + names)
            .saturating_add(self.held + extra);
        let table = self
            .bytes()
            .saturating_add(entries.saturating_mul(ENTRY_BYTES))
            .saturating_add(names);
        if need > self.parse_max || table > self.max_bytes {
            return Err(TooLarge);
        }
        Ok(())
    }

    /// Room for one more entry, its vector grown within the limit.
    fn reserve_entry(&mut self, name_len: usize) -> Result<(), TooLarge> {
        let (len, cap) = (self.raw.len(), self.raw.capacity());
        let others = self.strings.0.capacity().max(self.strings.len() + name_len) + self.held;
        let per = RAW_BYTES + ENTRY_BYTES;
        if len < cap {
            return match others + cap * RAW_BYTES + (len + 1) * ENTRY_BYTES > self.parse_max {
                true => Err(TooLarge),
                false => Ok(()),
            };
        }
        let fits = self.parse_max.saturating_sub(others) / per;
        let want = (cap * 2).max(1024).min(fits);
        if want <= len {
            return Err(TooLarge);
        }
        self.raw.reserve_exact(want - len);
        Ok(())
    }

    /// Add a symbol, with an owner tag the table keeps per symbol (0: none). `Err` once the
    /// table would exceed its byte limit.
    pub(crate) fn push(
        &mut self,
        start: u64,
        size: u64,
        bound: u64,
        rank: u64,
        name: &[u8],
        tag: u16,
    ) -> Result<(), TooLarge> {
        let cut = name.len().min(MAX_NAME);
        self.reserve_entry(cut)?;
        let names_limit = self.parse_max.saturating_sub(
            self.raw.capacity() * RAW_BYTES + (self.raw.len() + 1) * ENTRY_BYTES + self.held,
        );
        self.strings.reserve_within(cut, names_limit)?;
        let (name_off, name_len) =
            self.strings
                .push(name, self.bytes() + ENTRY_BYTES, self.max_bytes)?;
        self.raw.push(Raw {
            start,
            size,
            bound,
            rank,
            name_off,
            name_len,
            tag,
        });
        Ok(())
    }

    pub(crate) fn len(&self) -> usize {
        self.raw.len()
    }

    /// Sort, keep the best symbol per address, and give each an end. `complete`: the table
    /// lists every function (sizeless symbols may extend to the next one).
    pub(crate) fn build(mut self, complete: bool) -> SymbolTable {
        // Several symbols at one address: perf gives each sizeless one the extent up to the
        // next symbol (`symbols__fixup_end`) before it chooses among them, which leaves all
        // but the last of them (in table order) sizeless still. So the last counts as sized.
        // Then the best rank wins, the first pushed on a tie.
        self.raw.sort_by_key(|r| r.start);
        let (mut kept, mut i) = (0, 0);
        while i < self.raw.len() {
            let start = self.raw[i].start;
            let mut last = i;
            while self.raw.get(last + 1).is_some_and(|n| n.start == start) {
                last += 1;
            }
            self.raw[last].rank |= SIZED;
            let best = (i..=last)
                .rev()
                .max_by_key(|&k| self.raw[k].rank)
                .unwrap_or(i);
            self.raw.swap(kept, best);
            kept += 1;
            i = last + 1;
        }
        self.raw.truncate(kept);
        let n = self.raw.len();
        let mut starts = Vec::with_capacity(n);
        let mut sizes = Vec::with_capacity(n);
        let mut name_offs = Vec::with_capacity(n);
        let mut name_lens = Vec::with_capacity(n);
        let tagged = self.raw.iter().any(|r| r.tag != 0);
        let mut tags = Vec::with_capacity(if tagged { n } else { 0 });
        for (i, r) in self.raw.iter().enumerate() {
            let next = self.raw.get(i + 1).map_or(u64::MAX, |n| n.start);
            let end = if r.size > 0 {
                r.start.saturating_add(r.size)
            } else if complete {
                next.min(r.bound).max(r.start.saturating_add(1))
            } else {
                r.start.saturating_add(1)
            };
            starts.push(r.start);
            // No function is 4 GiB long: an extent past that is cut.
            sizes.push((end - r.start).min(u32::MAX as u64) as u32);
            name_offs.push(r.name_off);
            name_lens.push(r.name_len as u16 | u16::from(binding_of(r.rank)) << BINDING_SHIFT);
            if tagged {
                tags.push(r.tag);
            }
        }
        SymbolTable {
            starts: starts.into_boxed_slice(),
            sizes: sizes.into_boxed_slice(),
            name_offs: name_offs.into_boxed_slice(),
            name_lens: name_lens.into_boxed_slice(),
            tags: tags.into_boxed_slice(),
            strings: self.strings.0.into_boxed_slice(),
        }
    }
}

/// The table would grow past its byte limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge;

/// Bytes per symbol besides its name: start, extent, name offset and length, tag.
pub(crate) const ENTRY_BYTES: usize = 8 + 4 + 4 + 2 + 2;

/// Bytes per symbol while the table is collected.
const RAW_BYTES: usize = std::mem::size_of::<Raw>();

/// Function symbols sorted by start address.
#[derive(Default)]
pub(crate) struct SymbolTable {
    starts: Box<[u64]>,
    /// Extents (end - start).
    sizes: Box<[u32]>,
    /// Offset and length in `strings` (names are at most MAX_NAME bytes).
    name_offs: Box<[u32]>,
    name_lens: Box<[u16]>,
    /// Empty when every tag is 0.
    tags: Box<[u16]>,
    strings: Box<[u8]>,
}

/// How far back a lookup looks for a symbol that encloses the address when the nearest one
/// below it does not (nested symbols: a local label typed as a function inside another).
const ENCLOSING_LOOKBACK: usize = 8;

impl SymbolTable {
    /// The symbol whose extent holds `addr`, and the offset into it.
    #[inline]
    pub(crate) fn find(&self, addr: u64) -> Option<(u32, u64)> {
        let i = self.starts.partition_point(|&s| s <= addr);
        let low = i.saturating_sub(ENCLOSING_LOOKBACK);
        (low..i)
            .rev()
            .find(|&j| addr - self.starts[j] < self.sizes[j] as u64)
            .map(|j| (j as u32, addr - self.starts[j]))
    }

    pub(crate) fn name(&self, i: u32) -> &[u8] {
        let off = self.name_offs[i as usize] as usize;
        &self.strings[off..off + (self.name_lens[i as usize] & NAME_LEN_MASK) as usize]
    }

    /// Its ELF binding as perf gives it (`sym.binding`): 0 local, 1 global, 2 weak.
    pub(crate) fn binding(&self, i: u32) -> u8 {
        (self.name_lens[i as usize] >> BINDING_SHIFT) as u8
    }

    pub(crate) fn tag(&self, i: u32) -> u16 {
        self.tags.get(i as usize).copied().unwrap_or(0)
    }

    pub(crate) fn start(&self, i: u32) -> u64 {
        self.starts[i as usize]
    }

    pub(crate) fn end(&self, i: u32) -> u64 {
        self.starts[i as usize] + self.sizes[i as usize] as u64
    }

    pub(crate) fn len(&self) -> usize {
        self.starts.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Memory held by the table.
    pub(crate) fn bytes(&self) -> usize {
        self.starts.len() * ENTRY_BYTES + self.strings.len()
    }
}

/// The rank bit of a symbol with a size.
const SIZED: u64 = 1 << 43;

/// A name's length takes the low 14 bits of its `u16` ([`MAX_NAME`] is 4 096), the symbol's
/// binding the top two.
const BINDING_SHIFT: u32 = 14;
const NAME_LEN_MASK: u16 = (1 << BINDING_SHIFT) - 1;
const _: () = assert!(MAX_NAME <= NAME_LEN_MASK as usize);

/// The binding a [`rank`] was made with: STB_WEAK (2), STB_GLOBAL (1) or STB_LOCAL (0).
fn binding_of(rank: u64) -> u8 {
    if rank & (1 << 42) == 0 {
        2
    } else if rank & (1 << 41) != 0 {
        1
    } else {
        0
    }
}

/// The preference among symbols at one address, perf's (`choose_best_symbol` in
/// `tools/perf/util/symbol.c`), so that perfwatch shows the name perf shows: a sized symbol,
/// then a non-weak one, then a global one, then fewer leading underscores, then the longer
/// name; then not a `SyS`/`compat_SyS` syscall alias; then the first listed. So glibc's
/// `write` is `__GI___libc_write` (local, non-weak, the longest of four such names) where its
/// debug file lists them all, and the kernel's `memcpy` is `memcpy`, not `__memcpy` or
/// `__pi_memcpy`.
///
/// `sized` is the symbol's own size (`st_size`), before the table extends sizeless symbols:
/// kallsyms has none, so there the last of several names at one address is the one perf
/// shows (see [`TableBuilder::build`]).
pub(crate) fn rank(sized: bool, weak: bool, global: bool, name: &[u8]) -> u64 {
    let underscores = name.iter().take_while(|&&b| b == b'_').count().min(255) as u64;
    let syscall_alias = name.starts_with(b"SyS") || name.starts_with(b"compat_SyS");
    (if sized { SIZED } else { 0 })
        | (!weak as u64) << 42
        | (global as u64) << 41
        | (255 - underscores) << 33
        | (name.len().min(u32::MAX as usize) as u64) << 1
        | !syscall_alias as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(syms: &[(u64, u64, &str)], complete: bool) -> SymbolTable {
        let mut b = TableBuilder::new(usize::MAX);
        for &(s, z, n) in syms {
            b.push(
                s,
                z,
                u64::MAX,
                rank(z > 0, false, true, n.as_bytes()),
                n.as_bytes(),
                0,
            )
            .unwrap();
        }
        b.build(complete)
    }

    fn name(t: &SymbolTable, addr: u64) -> Option<(String, u64)> {
        t.find(addr)
            .map(|(i, off)| (String::from_utf8_lossy(t.name(i)).into_owned(), off))
    }

    #[test]
    fn each_symbol_keeps_its_binding_beside_a_name_of_any_length() {
        let long = "x".repeat(MAX_NAME + 10);
        let mut b = TableBuilder::new(usize::MAX);
        for (i, (weak, global)) in [(false, false), (false, true), (true, false)]
            .into_iter()
            .enumerate()
        {
            let name = &long.as_bytes()[..MAX_NAME - i];
            let start = 0x1000 * (i as u64 + 1);
            b.push(
                start,
                0x10,
                u64::MAX,
                rank(true, weak, global, name),
                name,
                0,
            )
            .unwrap();
        }
        let t = b.build(true);
        for (i, binding) in [0, 1, 2].into_iter().enumerate() {
            let (k, _) = t.find(0x1000 * (i as u64 + 1)).unwrap();
            assert_eq!(t.binding(k), binding);
            assert_eq!(t.name(k).len(), MAX_NAME - i);
        }
    }

    #[test]
    fn sized_symbols_cover_exactly_their_extent() {
        let t = table(&[(0x1000, 0x10, "a"), (0x1020, 0x20, "b")], true);
        assert_eq!(name(&t, 0xfff), None);
        assert_eq!(name(&t, 0x1000), Some(("a".into(), 0)));
        assert_eq!(name(&t, 0x100f), Some(("a".into(), 0xf)));
        // The gap between a and b belongs to nobody.
        assert_eq!(name(&t, 0x1010), None);
        assert_eq!(name(&t, 0x1036), Some(("b".into(), 0x16)));
        assert_eq!(name(&t, 0x1040), None);
    }

    #[test]
    fn sizeless_symbols_extend_only_in_complete_tables() {
        let syms = [(0x1000, 0, "asm_fn"), (0x1100, 0x10, "c_fn")];
        let full = table(&syms, true);
        assert_eq!(name(&full, 0x10ff), Some(("asm_fn".into(), 0xff)));
        let dynsym = table(&syms, false);
        assert_eq!(name(&dynsym, 0x1000), Some(("asm_fn".into(), 0)));
        assert_eq!(name(&dynsym, 0x1001), None);
    }

    /// The aliases of one function at 0x100, (name, sized, weak, global), in table order:
    /// the name the table keeps.
    fn best(list: &[(&str, bool, bool, bool)]) -> String {
        let mut b = TableBuilder::new(usize::MAX);
        for (n, sized, weak, global) in list {
            b.push(
                0x100,
                if *sized { 0x40 } else { 0 },
                u64::MAX,
                rank(*sized, *weak, *global, n.as_bytes()),
                n.as_bytes(),
                0,
            )
            .unwrap();
        }
        let t = b.build(true);
        assert_eq!(t.len(), 1);
        name(&t, 0x100).unwrap().0
    }

    #[test]
    fn the_alias_perf_chooses_wins() {
        // glibc's write as libc6-dbg's .symtab lists it (Debian 12): four local names and
        // two weak ones. perf shows __GI___libc_write: non-weak, then the longest.
        let write = [
            ("__GI___write", true, false, false),
            ("__GI_write", true, false, false),
            ("__GI___libc_write", true, false, false),
            ("__libc_write", true, false, false),
            ("__write", true, true, true),
            ("write", true, true, true),
        ];
        assert_eq!(best(&write), "__GI___libc_write");
        // Its .dynsym alone: two weak exports; fewer underscores.
        assert_eq!(best(&write[4..]), "write");
        // A sized symbol before anything else; a global one before a local one.
        assert_eq!(
            best(&[
                ("malloc", false, false, true),
                ("__libc_malloc", true, true, false)
            ]),
            "__libc_malloc"
        );
        assert_eq!(
            best(&[
                ("a_long_local", true, false, false),
                ("g", true, false, true)
            ]),
            "g"
        );
        // A global name before a local one; fewer underscores; the longer name.
        assert_eq!(
            best(&[
                ("__do_sys_getuid", true, false, false),
                ("__ia32_sys_getuid", true, false, true),
                ("__x64_sys_getuid", true, false, true),
            ]),
            "__ia32_sys_getuid"
        );
        assert_eq!(
            best(&[
                ("memcpy", true, false, true),
                ("__memcpy", true, false, true),
                ("__pi_memcpy", true, false, true),
            ]),
            "memcpy"
        );
        assert_eq!(
            best(&[
                ("not_affected", true, false, false),
                ("ghostwrite", true, true, true),
            ]),
            "not_affected"
        );
        // Sizeless names (hand-written assembly): the last listed counts as sized, as
        // perf extends it to the next symbol before choosing.
        assert_eq!(
            best(&[
                ("entry_a", false, false, true),
                ("entry_b", false, false, true)
            ]),
            "entry_b"
        );
        assert_eq!(
            best(&[
                ("__a_sized", true, false, true),
                ("b_sizeless", false, false, true),
            ]),
            "b_sizeless"
        );
        // Everything else equal: not the SyS alias; then the first listed.
        assert_eq!(
            best(&[
                ("SyS_write", true, false, true),
                ("sys_write", true, false, true)
            ]),
            "sys_write"
        );
        assert_eq!(
            best(&[("sys_b", true, false, true), ("sys_a", true, false, true)]),
            "sys_b"
        );
    }

    #[test]
    fn nested_symbols_fall_back_to_the_enclosing_one() {
        let t = table(&[(0x1000, 0x100, "outer"), (0x1010, 0x8, "inner")], true);
        assert_eq!(name(&t, 0x1012), Some(("inner".into(), 2)));
        assert_eq!(name(&t, 0x1050), Some(("outer".into(), 0x50)));
    }

    #[test]
    fn the_byte_limit_is_enforced() {
        let mut b = TableBuilder::new(ENTRY_BYTES * 2 + 2);
        assert!(b.push(1, 1, u64::MAX, 0, b"a", 0).is_ok());
        assert!(b.push(2, 1, u64::MAX, 0, b"b", 0).is_ok());
        assert_eq!(b.push(3, 1, u64::MAX, 0, b"c", 0), Err(TooLarge));
        let t = b.build(true);
        assert!(t.bytes() <= ENTRY_BYTES * 2 + 2);
    }

    #[test]
    fn extents_never_overflow() {
        let t = table(&[(u64::MAX - 1, 0x100, "top"), (u64::MAX, 0, "last")], true);
        assert_eq!(name(&t, u64::MAX - 1), Some(("top".into(), 0)));
        // The very last address cannot be inside an extent that ends at u64::MAX.
        assert!(t.find(u64::MAX).is_none());
        assert!(t.find(0).is_none());
        assert!(SymbolTable::default().find(5).is_none());
    }
}
