//! The pipeline's unwind step (`--call-graph dwarf`): each sample's user registers and stack
//! copy become the user part of its call chain, between the process model and the symbolize
//! step, so that everything downstream (names, `--plain`, `--json`, `--folded`, scripts, Top
//! symbols) reads the chain exactly as it reads a `-g` chain.
//!
//! ```text
//!  ordering ─► process model ─► unwind ─► symbolize ─► [script stage] ─► frontend
//! ```
//!
//! The chain is joined as perf joins it: the kernel's part of the sample's chain (the event
//! asked the kernel for no user part, `exclude_callchain_user`), then `PERF_CONTEXT_USER`,
//! the interrupted user address, and the unwound return addresses. The modules are the
//! executable mappings the process model says the process had *at the sample's time*. The
//! stack copy is dropped from the sample once it is unwound. Runs on the pipeline's thread,
//! never on a reader thread.

use std::sync::{Arc, Mutex};

use crate::callchain::{CONTEXT_USER, Callchain, is_marker};
use crate::event::{Event, EventKind};
use crate::process::ProcessModel;
use crate::unwind::{Config, ModuleMap, Stats, Unwinder};

/// The unwind step and its reused buffers.
pub(crate) struct Unwind {
    unwinder: Unwinder,
    max_frames: usize,
    frames: Vec<u64>,
    /// Where the counters go for the summary.
    shared: Option<Arc<Mutex<Stats>>>,
    /// [`Unwind::callers_less_one`].
    less_one: bool,
}

impl Unwind {
    /// An unwind step that keeps at most `max_frames` user frames per chain and publishes its
    /// counters into `shared`.
    pub fn new(config: Config, max_frames: u16, shared: Option<Arc<Mutex<Stats>>>) -> Unwind {
        Unwind {
            unwinder: Unwinder::new(config),
            max_frames: max_frames.max(1) as usize,
            frames: Vec::new(),
            shared,
            less_one: false,
        }
    }

    /// Give each caller's address less one (inside its call), as perf's DWARF unwinders
    /// (libdw's and libunwind's) put them in the chain perf script prints: where perf's names
    /// are wanted ([`crate::pipeline::PipelineOptions::perf_names`]), every address is then
    /// named by itself.
    pub fn callers_less_one(self, on: bool) -> Unwind {
        Unwind {
            less_one: on,
            ..self
        }
    }

    /// See [`Unwinder::take_notes`].
    pub fn take_notes(&mut self) -> Vec<String> {
        self.unwinder.take_notes()
    }

    /// Unwind the samples of `events` (ordered, and already learnt by `model`).
    pub fn unwind(&mut self, events: &mut [Event], model: &ProcessModel) {
        let mut any = false;
        for ev in events.iter_mut() {
            let EventKind::Sample {
                callchain,
                user_stack,
                ..
            } = &mut ev.kind
            else {
                continue;
            };
            let Some(stack) = user_stack.take() else {
                continue;
            };
            any = true;
            self.frames.clear();
            let space = model
                .process_at(ev.pid, ev.time)
                .map(|p| p.space_at(ev.time));
            let key = space.map_or((0, 0), |s| (s as *const _ as usize, s.stamp()));
            let modules = |out: &mut Vec<ModuleMap>| {
                if let Some(s) = space {
                    out.extend(s.iter().map(|m| ModuleMap {
                        start: m.start,
                        end: m.end(),
                        pgoff: m.pgoff,
                        file: m.file.sym.clone(),
                    }));
                }
            };
            self.unwinder.unwind(
                ev.pid,
                key,
                modules,
                &stack,
                self.max_frames,
                &mut self.frames,
            );
            if self.less_one {
                for f in self.frames.iter_mut().skip(1) {
                    *f = f.saturating_sub(1);
                }
            }
            *callchain = Some(join(callchain.as_ref(), &self.frames));
        }
        if any && let Some(shared) = &self.shared {
            if let Ok(mut s) = shared.lock() {
                *s = self.unwinder.stats();
            }
        }
    }
}

/// The kernel's part of `kernel` (up to any user part), then the user frames `user` (the
/// interrupted address first) after `PERF_CONTEXT_USER`.
pub fn join(kernel: Option<&Callchain>, user: &[u64]) -> Callchain {
    let kernel = kernel.map_or(&[][..], |c| c.entries());
    let cut = kernel
        .iter()
        .position(|&e| e == CONTEXT_USER)
        .unwrap_or(kernel.len());
    let mut entries = Vec::with_capacity(cut + 1 + user.len());
    entries.extend_from_slice(&kernel[..cut]);
    if !user.is_empty() {
        entries.push(CONTEXT_USER);
        // A user "frame" that reads as a marker would change the chain's contexts.
        entries.extend(user.iter().copied().filter(|&a| !is_marker(a)));
    }
    Callchain::new(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callchain::CONTEXT_KERNEL;
    use proptest::prelude::*;

    #[test]
    fn user_frames_follow_the_kernel_part() {
        let k = Callchain::new(vec![CONTEXT_KERNEL, 0xffffffff81000010]);
        let c = join(Some(&k), &[0x401000, 0x402000]);
        assert_eq!(
            c.entries(),
            &[
                CONTEXT_KERNEL,
                0xffffffff81000010,
                CONTEXT_USER,
                0x401000,
                0x402000
            ]
        );
        let f: Vec<_> = c.frames().collect();
        assert!(f[0].exact && f[1].exact && !f[2].exact);
        // A user part the kernel wrote anyway is replaced, not doubled.
        let both = Callchain::new(vec![CONTEXT_KERNEL, 1 << 63, CONTEXT_USER, 0x401000]);
        assert_eq!(
            join(Some(&both), &[0x401000]).entries(),
            &[CONTEXT_KERNEL, 1 << 63, CONTEXT_USER, 0x401000]
        );
        assert_eq!(join(None, &[]).entries(), &[] as &[u64]);
    }

    proptest! {
        #[test]
        fn joining_keeps_the_kernel_part_and_every_user_address(
            kernel in proptest::collection::vec(any::<u64>(), 0..16),
            user in proptest::collection::vec(any::<u64>(), 0..16),
        ) {
            let k = Callchain::new(kernel.clone());
            let c = join(Some(&k), &user);
            let e = c.entries();
            let cut = kernel.iter().position(|&x| x == CONTEXT_USER).unwrap_or(kernel.len());
            prop_assert_eq!(&e[..cut], &kernel[..cut]);
            let users: Vec<u64> = user.iter().copied().filter(|&a| !is_marker(a)).collect();
            if user.is_empty() {
                prop_assert_eq!(e.len(), cut);
            } else {
                prop_assert_eq!(e[cut], CONTEXT_USER);
                prop_assert_eq!(&e[cut + 1..], &users[..]);
            }
        }
    }
}
