//! Samples named as the symbolizer names them, without a symbolizer: for the panes that
//! count functions (Top symbols) in unit tests, snapshots and benchmarks.

use std::sync::Arc;

use crate::event::SampleNames;
use crate::event::{Event, EventKind};
use crate::symbols::{Dso, DsoKind, Symbol, SymbolKey, Symbolized};
use crate::testkit::events::sample_at;

/// Symbols of a program and of the kernel, as the symbolizer would hand them out.
pub struct Names {
    prog: Arc<Dso>,
    kernel: Arc<Dso>,
}

impl Names {
    pub fn new() -> Names {
        Names {
            prog: Dso::new("/usr/local/bin/spin", DsoKind::File),
            kernel: Dso::new("[kernel.kallsyms]", DsoKind::Kernel),
        }
    }

    pub fn sym(&self, name: &str) -> Symbolized {
        let kernel = name.starts_with("k_");
        let (dso, dso_key) = if kernel {
            (&self.kernel, 1)
        } else {
            (&self.prog, 2)
        };
        // The start stands for the function: a stable number per name.
        let start = name
            .bytes()
            .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
        Symbolized::new(
            Symbol::new(
                Some(name.into()),
                Arc::clone(dso),
                SymbolKey {
                    dso: dso_key,
                    start,
                },
            ),
            4,
        )
    }

    /// A sample of `pid` at `time` whose chain is `chain` (innermost first); without
    /// call chains when `g` is false (only the innermost counts then).
    pub fn sample(&self, pid: u32, time: u64, chain: &[&str], g: bool) -> Event {
        let mut ev = sample_at(0, pid, time, 0x401000, 1);
        if let EventKind::Sample { sym, .. } = &mut ev.kind {
            *sym = Some(std::sync::Arc::new(SampleNames {
                ip: Some(self.sym(chain[0])),
                args: Box::new([]),
                frames: if g {
                    chain.iter().map(|n| Some(self.sym(n))).collect()
                } else {
                    Box::new([])
                },
            }));
        }
        ev
    }
}

impl Default for Names {
    fn default() -> Names {
        Names::new()
    }
}
