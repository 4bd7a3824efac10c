//! What the symbolizer answers: interned, cheap to clone, safe to print.
//!
//! Every name here is already in the escaped form of [`crate::text`] (a symbol name comes
//! from a binary anyone may have written, a path from the monitored system), so frontends
//! print them as they are.

use std::fmt;
use std::sync::Arc;

/// What kind of object a [`Dso`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DsoKind {
    /// The kernel image: `[kernel.kallsyms]`.
    Kernel,
    /// A kernel module, or another kallsyms owner such as `[bpf]`: `[NAME]`.
    KernelModule,
    /// A mapped file, named by its path.
    File,
    /// A JIT's perf map, named by its path (`/tmp/perf-PID.map`).
    PerfMap,
    /// `[vdso]`.
    Vdso,
    /// Memory without symbols: anonymous memory without a perf map, `[stack]`, devices.
    Other,
    /// An address that no known mapping covers: `[unknown]`.
    Unknown,
}

/// A binary (or what stands in for one): the `dso` member of a sample.
#[derive(Debug, PartialEq, Eq)]
pub struct Dso {
    name: Box<str>,
    kind: DsoKind,
    /// What a frame in it without a function name is called: `unnamed_label`.
    label: Box<str>,
    /// The build id of the file its symbols were read from, once read (pprof's mappings).
    build_id: std::sync::OnceLock<super::request::BuildId>,
    /// `--plain` quotes the name, the label (see [`crate::text::needs_quotes`]): decided
    /// once, as both never change.
    plain_quoted: (bool, bool),
}

/// How stack collapsers name a frame whose function is not known (FlameGraph's
/// `stackcollapse-perf.pl`): its binary's file name in brackets, `[liblzma.so.5.4.1]`; a
/// name in brackets already (`[kernel.kallsyms]`, `[vdso]`, `[stack]`) as it is; and
/// `[unknown]` where no binary is known. So that every unnamed frame of one binary folds into
/// one node of a flame graph, and says where it was.
pub(crate) fn unnamed_label(dso: &str, kind: DsoKind) -> String {
    if kind == DsoKind::Unknown {
        return UNKNOWN.to_string();
    }
    if dso.len() > 2 && dso.starts_with('[') && dso.ends_with(']') {
        return dso.to_string();
    }
    let base = dso.rsplit('/').next().unwrap_or("");
    if base.is_empty() {
        return UNKNOWN.to_string();
    }
    format!("[{base}]")
}

impl Dso {
    pub(crate) fn new(name: impl Into<Box<str>>, kind: DsoKind) -> Arc<Dso> {
        let name = name.into();
        let label: Box<str> = unnamed_label(&name, kind).into();
        let plain_quoted = (
            crate::text::needs_quotes(name.as_bytes()),
            crate::text::needs_quotes(label.as_bytes()),
        );
        Arc::new(Dso {
            name,
            kind,
            label,
            build_id: std::sync::OnceLock::new(),
            plain_quoted,
        })
    }

    /// `--plain` writes the name, the [`Dso::unnamed`] label in double quotes.
    pub fn plain_quoted(&self) -> (bool, bool) {
        self.plain_quoted
    }

    /// What an unnamed frame in this binary is called, `[liblzma.so.5.4.1]` (see
    /// `unnamed_label`).
    pub fn unnamed(&self) -> &str {
        &self.label
    }

    /// The escaped name: a path, `[kernel.kallsyms]`, `[MODULE]`, `[vdso]`, `//anon`, ...
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The build id of the file its symbols were read from, once read.
    pub(crate) fn build_id(&self) -> Option<&super::request::BuildId> {
        self.build_id.get()
    }

    pub(crate) fn set_build_id(&self, b: super::request::BuildId) {
        let _ = self.build_id.set(b);
    }

    pub fn kind(&self) -> DsoKind {
        self.kind
    }

    /// Kernel or kernel module (perf top's `[k]`; everything else is `[.]`).
    pub fn is_kernel(&self) -> bool {
        matches!(self.kind, DsoKind::Kernel | DsoKind::KernelModule)
    }
}

/// Names one symbol for grouping (a Top symbols view): equal keys are the same function of the
/// same binary, also across cache evictions and reloads, which give new `Arc`s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SymbolKey {
    /// A stable hash of the binary's identity (device/inode or build id, or the kernel
    /// module's name).
    pub dso: u64,
    /// The symbol's start address in the binary; `u64::MAX` for the unknown symbol.
    pub start: u64,
}

/// A function, or the unknown symbol of a dso.
#[derive(Debug)]
pub struct Symbol {
    name: Option<Box<str>>,
    dso: Arc<Dso>,
    key: SymbolKey,
    /// `--plain` quotes `name+0xOFF` (see [`crate::text::needs_quotes`]): decided once, when
    /// the symbol is made (it never changes), not for every frame written.
    plain_quoted: bool,
    /// Where it ends in the binary (exclusive; `key.start` when not known).
    end: u64,
    /// Its ELF binding, as perf gives it to scripts: 0 local, 1 global (where the source has
    /// none: perf's JIT maps and synthesized names), 2 weak.
    binding: u8,
}

impl Symbol {
    pub(crate) fn new(name: Option<Box<str>>, dso: Arc<Dso>, key: SymbolKey) -> Arc<Symbol> {
        let end = key.start;
        Symbol::sized(name, dso, key, end)
    }

    /// A symbol whose extent in the binary is known: `[key.start, end)`.
    pub(crate) fn sized(
        name: Option<Box<str>>,
        dso: Arc<Dso>,
        key: SymbolKey,
        end: u64,
    ) -> Arc<Symbol> {
        Symbol::of_table(name, dso, key, end, 1)
    }

    /// A symbol of a table, with its binding ([`Symbol::sized`] otherwise).
    pub(crate) fn of_table(
        name: Option<Box<str>>,
        dso: Arc<Dso>,
        key: SymbolKey,
        end: u64,
        binding: u8,
    ) -> Arc<Symbol> {
        // `name+0xOFF` ends in a hex digit and its suffix holds no separator: only the name's
        // first byte and its separators decide.
        let plain_quoted = name
            .as_deref()
            .is_some_and(|n| n.starts_with(' ') || crate::text::holds_separator(n.as_bytes()));
        Arc::new(Symbol {
            name,
            dso,
            key,
            plain_quoted,
            end,
            binding,
        })
    }

    /// Its ELF binding (perf's `sym['binding']`): 0 local, 1 global, 2 weak.
    pub fn binding(&self) -> u8 {
        self.binding
    }

    /// `--plain` writes this symbol's `name+0xOFF` in double quotes.
    pub fn plain_quoted(&self) -> bool {
        self.plain_quoted
    }

    /// Its start and end in the binary (the symbol table's addresses, perf's `sym.start` and
    /// `sym.end`); the end is the start when the extent is not known.
    pub fn extent(&self) -> (u64, u64) {
        (self.key.start, self.end)
    }

    pub(crate) fn unknown(dso: Arc<Dso>, dso_key: u64) -> Arc<Symbol> {
        Symbol::new(
            None,
            dso,
            SymbolKey {
                dso: dso_key,
                start: u64::MAX,
            },
        )
    }

    /// The escaped, demangled name; `None` when unknown.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The name, or `[unknown]`.
    pub fn display_name(&self) -> &str {
        self.name.as_deref().unwrap_or(UNKNOWN)
    }

    /// The name, or for an unknown function its binary's [`Dso::unnamed`] label: how a frame
    /// is named in folded stacks and `--plain` call chains.
    pub(crate) fn frame_name(&self) -> &str {
        self.name.as_deref().unwrap_or(self.dso.unnamed())
    }

    pub fn dso(&self) -> &Arc<Dso> {
        &self.dso
    }

    pub fn key(&self) -> SymbolKey {
        self.key
    }
}

/// What an unknown symbol is shown as.
pub(crate) const UNKNOWN: &str = "[unknown]";

/// The answer for one address: its symbol and the offset into it (a clone costs one
/// reference count).
#[derive(Clone, Debug)]
pub struct Symbolized {
    symbol: Arc<Symbol>,
    offset: u64,
}

impl Symbolized {
    pub(crate) fn new(symbol: Arc<Symbol>, offset: u64) -> Symbolized {
        Symbolized { symbol, offset }
    }

    pub(crate) fn unknown(symbol: &Arc<Symbol>) -> Symbolized {
        Symbolized {
            symbol: Arc::clone(symbol),
            offset: 0,
        }
    }

    pub fn symbol(&self) -> &Arc<Symbol> {
        &self.symbol
    }

    /// The symbol's name, `None` when unknown (`event.sym` in scripts).
    pub fn name(&self) -> Option<&str> {
        self.symbol.name()
    }

    /// The binary (`event.dso`).
    pub fn dso(&self) -> &Dso {
        &self.symbol.dso
    }

    /// The offset from the symbol's start (`sym_offset`); `None` when unknown.
    pub fn offset(&self) -> Option<u64> {
        self.symbol.name.is_some().then_some(self.offset)
    }

    pub fn is_known(&self) -> bool {
        self.symbol.name.is_some()
    }

    pub fn is_kernel(&self) -> bool {
        self.symbol.dso.is_kernel()
    }
}

/// `hot_b+0x16`, or `[unknown]`.
impl fmt::Display for Symbolized {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.symbol.name() {
            Some(name) => write!(f, "{name}+{:#x}", self.offset),
            None => f.write_str(UNKNOWN),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_name_plus_hex_offset_or_unknown() {
        let dso = Dso::new("/usr/local/bin/spin", DsoKind::File);
        let key = SymbolKey {
            dso: 1,
            start: 0x1120,
        };
        let s = Symbolized::new(Symbol::new(Some("hot_b".into()), dso.clone(), key), 0x16);
        assert_eq!(s.to_string(), "hot_b+0x16");
        assert_eq!(s.offset(), Some(0x16));
        assert_eq!(s.dso().name(), "/usr/local/bin/spin");
        assert!(!s.is_kernel());
        let u = Symbolized::unknown(&Symbol::unknown(dso, 1));
        assert_eq!(u.to_string(), "[unknown]");
        assert_eq!(u.offset(), None);
        assert_eq!(u.name(), None);
        assert_eq!(u.symbol().display_name(), "[unknown]");
        assert!(Dso::new("[kernel.kallsyms]", DsoKind::Kernel).is_kernel());
        assert_eq!(u.symbol().frame_name(), "[spin]");
    }

    #[test]
    fn unnamed_frames_are_labelled_by_their_binary_as_stackcollapse_does() {
        let l = |name, kind| unnamed_label(name, kind);
        assert_eq!(
            l("/usr/lib/x86_64-linux-gnu/liblzma.so.5.4.1", DsoKind::File),
            "[liblzma.so.5.4.1]"
        );
        assert_eq!(l("[kernel.kallsyms]", DsoKind::Kernel), "[kernel.kallsyms]");
        assert_eq!(l("[ext4]", DsoKind::KernelModule), "[ext4]");
        assert_eq!(l("[vdso]", DsoKind::Vdso), "[vdso]");
        assert_eq!(l("[stack]", DsoKind::Other), "[stack]");
        assert_eq!(l("//anon", DsoKind::Other), "[anon]");
        assert_eq!(l("/tmp/perf-42.map", DsoKind::PerfMap), "[perf-42.map]");
        assert_eq!(l(UNKNOWN, DsoKind::Unknown), UNKNOWN);
        // Nothing to name it by.
        assert_eq!(l("/", DsoKind::File), UNKNOWN);
        assert_eq!(l("", DsoKind::File), UNKNOWN);
        assert_eq!(l("[]", DsoKind::Other), "[[]]");
    }
}
