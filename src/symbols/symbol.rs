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
}

impl Dso {
    pub(crate) fn new(name: impl Into<Box<str>>, kind: DsoKind) -> Arc<Dso> {
        Arc::new(Dso {
            name: name.into(),
            kind,
        })
    }

    /// The escaped name: a path, `[kernel.kallsyms]`, `[MODULE]`, `[vdso]`, `//anon`, ...
    pub fn name(&self) -> &str {
        &self.name
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
}

impl Symbol {
    pub(crate) fn new(name: Option<Box<str>>, dso: Arc<Dso>, key: SymbolKey) -> Arc<Symbol> {
        Arc::new(Symbol { name, dso, key })
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

    pub fn dso(&self) -> &Arc<Dso> {
        &self.dso
    }

    pub fn key(&self) -> SymbolKey {
        self.key
    }
}

/// What an unknown symbol is shown as.
pub const UNKNOWN: &str = "[unknown]";

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
    }
}
