//! Call chains: the PERF_SAMPLE_CALLCHAIN part of a sample (`-g`), as frames.
//!
//! The kernel writes a chain as `nr` u64 entries, innermost first: return addresses, and
//! between them *context markers* (`PERF_CONTEXT_KERNEL`, `PERF_CONTEXT_USER`, ...: values in
//! the last 4095 of the u64 range) that say where the kernel part ends and the user part
//! starts. A [`Callchain`] keeps those entries exactly as the kernel wrote them, in one boxed
//! slice (one allocation per sample, none per frame; cloning copies one block), and
//! [`Callchain::frames`] walks them: markers are not frames, each frame knows its context.
//!
//! The first frame of each context is the exact address where that context was interrupted
//! (the sample's own ip for the innermost one); every other frame is a return address, which
//! points just past its call. [`Frame::lookup_ip`] gives the address to name a frame by (a
//! return address less one, inside the call: a call that ends a function, to a `noreturn`
//! function, would otherwise be named after the next function).
//!
//! How a frame is shown lives here too (`--plain`'s `callchain: a <- b <- c`, `--json`'s list
//! of `{ip, sym, dso}`), through [`FrameNames`]: until the symbolizer is wired in, frames are
//! shown as addresses ([`NoNames`]); the symbol glue supplies a [`Symbolized`] per frame and
//! the formats stay the same.

use std::fmt;

use perf_event_open_sys::bindings as sys;

use crate::symbols::Symbolized;

pub(crate) use sys::{
    PERF_CONTEXT_GUEST as CONTEXT_GUEST, PERF_CONTEXT_GUEST_KERNEL as CONTEXT_GUEST_KERNEL,
    PERF_CONTEXT_GUEST_USER as CONTEXT_GUEST_USER, PERF_CONTEXT_HV as CONTEXT_HV,
    PERF_CONTEXT_USER_DEFERRED as CONTEXT_USER_DEFERRED,
};
/// The context markers; entries at or above `CONTEXT_MAX` are markers, not addresses.
pub use sys::{
    PERF_CONTEXT_KERNEL as CONTEXT_KERNEL, PERF_CONTEXT_MAX as CONTEXT_MAX,
    PERF_CONTEXT_USER as CONTEXT_USER,
};

/// The kernel's default `perf_event_max_stack` (PERF_MAX_STACK_DEPTH), used when
/// `/proc/sys/kernel/perf_event_max_stack` cannot be read.
pub(crate) const DEFAULT_MAX_STACK: u16 = sys::PERF_MAX_STACK_DEPTH as u16;

/// `kernel.perf_event_max_stack`: the deepest chain the kernel records, and the most an
/// event may ask for in `sample_max_stack`.
pub(crate) fn kernel_max_stack() -> Option<u16> {
    let t = std::fs::read_to_string("/proc/sys/kernel/perf_event_max_stack").ok()?;
    let v: u64 = t.trim().parse().ok()?;
    Some(v.min(u16::MAX as u64) as u16)
}

/// The `--max-stack` to use: what was asked, at most the kernel's limit (with a note saying
/// so), or the kernel's limit when nothing was asked.
pub(crate) fn resolve_max_stack(asked: Option<u16>, kernel: Option<u16>) -> (u16, Option<String>) {
    let kernel = kernel.filter(|&k| k > 0);
    match (asked, kernel) {
        (Some(n), Some(k)) if n > k => (
            k,
            Some(format!(
                "--max-stack {n} is above kernel.perf_event_max_stack ({k}); using {k} (sysctl kernel.perf_event_max_stack={n} raises the limit)"
            )),
        ),
        (Some(n), _) => (n, None),
        (None, Some(k)) => (k, None),
        (None, None) => (DEFAULT_MAX_STACK, None),
    }
}

/// Where a frame ran, from the last context marker before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Context {
    Kernel,
    User,
    Hypervisor,
    /// A guest's frames without a finer marker (`PERF_CONTEXT_GUEST`).
    Guest,
    GuestKernel,
    GuestUser,
    /// Before any marker, or after one this decoder does not know.
    Unknown,
}

impl Context {
    /// The context a marker starts; `Unknown` for a marker of a newer kernel.
    pub(crate) fn of_marker(m: u64) -> Context {
        match m {
            CONTEXT_KERNEL => Context::Kernel,
            CONTEXT_USER | CONTEXT_USER_DEFERRED => Context::User,
            CONTEXT_HV => Context::Hypervisor,
            CONTEXT_GUEST => Context::Guest,
            CONTEXT_GUEST_KERNEL => Context::GuestKernel,
            CONTEXT_GUEST_USER => Context::GuestUser,
            _ => Context::Unknown,
        }
    }

    /// The context a sample's `misc` cpumode says its ip was taken in (for a sample without a
    /// chain).
    pub(crate) fn of_cpumode(misc: u16) -> Context {
        match misc as u32 & sys::PERF_RECORD_MISC_CPUMODE_MASK {
            sys::PERF_RECORD_MISC_KERNEL => Context::Kernel,
            sys::PERF_RECORD_MISC_USER => Context::User,
            sys::PERF_RECORD_MISC_HYPERVISOR => Context::Hypervisor,
            sys::PERF_RECORD_MISC_GUEST_KERNEL => Context::GuestKernel,
            sys::PERF_RECORD_MISC_GUEST_USER => Context::GuestUser,
            _ => Context::Unknown,
        }
    }

    /// Kernel (host or guest) or hypervisor code.
    pub fn is_kernel(self) -> bool {
        matches!(
            self,
            Context::Kernel | Context::GuestKernel | Context::Hypervisor
        )
    }

    #[cfg(test)]
    pub(crate) fn is_user(self) -> bool {
        matches!(self, Context::User | Context::GuestUser)
    }
}

/// True for an entry that is a context marker rather than an address.
#[inline]
pub(crate) fn is_marker(entry: u64) -> bool {
    entry >= CONTEXT_MAX
}

/// One frame of a chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    pub ip: u64,
    pub context: Context,
    /// The first frame of its context: the exact interrupted address, not a return address.
    pub exact: bool,
}

impl Frame {
    pub fn is_kernel(&self) -> bool {
        self.context.is_kernel()
    }

    #[cfg(test)]
    pub(crate) fn is_user(&self) -> bool {
        self.context.is_user()
    }

    /// The address to name the frame by: a return address less one, so that it lies inside
    /// the call instruction (and so inside the calling function).
    pub fn lookup_ip(&self) -> u64 {
        if self.exact {
            self.ip
        } else {
            self.ip.saturating_sub(1)
        }
    }
}

/// A sample's call chain, as the kernel wrote it: innermost first, with its context markers.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Callchain(Box<[u64]>);

impl Callchain {
    /// A chain from the kernel's entries (markers included), innermost first.
    pub fn new(entries: impl Into<Box<[u64]>>) -> Callchain {
        Callchain(entries.into())
    }

    /// The entries as the kernel wrote them, markers included.
    pub fn entries(&self) -> &[u64] {
        &self.0
    }

    /// The frames, innermost first; markers are skipped and set each frame's context.
    pub fn frames(&self) -> Frames<'_> {
        frames_of(&self.0)
    }

    /// The number of frames (markers not counted).
    pub fn len(&self) -> usize {
        self.0.iter().filter(|&&e| !is_marker(e)).count()
    }

    /// No frames at all (an empty chain, or markers only).
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&e| is_marker(e))
    }

    /// Whether the kernel may have cut the chain: it holds `max_stack` frames, the most the
    /// event asked for (`sample_max_stack`; markers do not count against it).
    #[cfg(test)]
    pub(crate) fn may_be_truncated(&self, max_stack: u16) -> bool {
        max_stack > 0 && self.len() >= max_stack as usize
    }
}

impl fmt::Debug for Callchain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.frames().map(|fr| {
                let c = match fr.context {
                    Context::Kernel => "k",
                    Context::User => "u",
                    Context::Hypervisor => "hv",
                    Context::Guest => "g",
                    Context::GuestKernel => "gk",
                    Context::GuestUser => "gu",
                    Context::Unknown => "?",
                };
                format!("{:#x}{c}", fr.ip)
            }))
            .finish()
    }
}

/// The frames of a chain's raw entries (markers included), innermost first.
pub(crate) fn frames_of(entries: &[u64]) -> Frames<'_> {
    Frames {
        entries: entries.iter(),
        context: Context::Unknown,
        exact: true,
    }
}

/// The frames of a [`Callchain`], innermost first.
#[derive(Clone)]
pub struct Frames<'a> {
    entries: std::slice::Iter<'a, u64>,
    context: Context,
    exact: bool,
}

impl Iterator for Frames<'_> {
    type Item = Frame;

    #[inline]
    fn next(&mut self) -> Option<Frame> {
        loop {
            let &e = self.entries.next()?;
            if is_marker(e) {
                self.context = Context::of_marker(e);
                self.exact = true;
                continue;
            }
            let f = Frame {
                ip: e,
                context: self.context,
                exact: self.exact,
            };
            self.exact = false;
            return Some(f);
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.entries.len()))
    }
}

/// Names for the frames of one sample's chain, for the output formats. The symbol glue
/// implements it with what the symbolizer answered; [`NoNames`] shows addresses.
pub trait FrameNames {
    /// The symbol of frame `index` (innermost first) of the chain, when known.
    fn symbol(&self, index: usize, frame: Frame) -> Option<&Symbolized>;
}

/// No symbols: frames are shown as addresses.
pub(crate) struct NoNames;

impl FrameNames for NoNames {
    fn symbol(&self, _: usize, _: Frame) -> Option<&Symbolized> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(e: &[u64]) -> Callchain {
        Callchain::new(e.to_vec())
    }

    /// A chain of two kernel frames and two user frames, with their context markers.
    const KCHAIN: [u64; 6] = [
        CONTEXT_KERNEL,
        0xffff_ffff_8100_0010,
        0xffff_ffff_8100_0020,
        CONTEXT_USER,
        0x40_1136,
        0x40_1156,
    ];

    #[test]
    fn markers_set_the_context_and_are_not_frames() {
        let c = chain(&[&KCHAIN[..], &[0x7f00_0000_1234]].concat());
        let f: Vec<Frame> = c.frames().collect();
        assert_eq!(c.len(), 5);
        assert_eq!(f.len(), 5);
        assert!(f[..2].iter().all(|f| f.is_kernel()));
        assert!(f[2..].iter().all(|f| f.is_user()));
        assert_eq!(
            f.iter().map(|f| f.exact).collect::<Vec<_>>(),
            [true, false, true, false, false]
        );
        assert_eq!(f[0].lookup_ip(), 0xffff_ffff_8100_0010);
        assert_eq!(f[1].lookup_ip(), 0xffff_ffff_8100_001f);
        assert_eq!(f[3].lookup_ip(), 0x40_1155);
        assert!(!c.is_empty());
    }

    #[test]
    fn odd_chains() {
        // Empty, markers only, and frames before any marker.
        assert!(chain(&[]).is_empty());
        assert_eq!(chain(&[]).frames().count(), 0);
        assert!(chain(&[CONTEXT_KERNEL, CONTEXT_USER]).is_empty());
        let f: Vec<Frame> = chain(&[0x10, 0x20]).frames().collect();
        assert_eq!(f[0].context, Context::Unknown);
        assert!(f[0].exact && !f[1].exact);
        // A marker of a newer kernel, guest contexts, and the hypervisor.
        let f: Vec<Frame> = chain(&[
            CONTEXT_MAX,
            1,
            CONTEXT_GUEST_KERNEL,
            2,
            CONTEXT_GUEST_USER,
            3,
            CONTEXT_HV,
            4,
            CONTEXT_GUEST,
            5,
            u64::MAX,
            6,
        ])
        .frames()
        .collect();
        let ctx: Vec<Context> = f.iter().map(|f| f.context).collect();
        assert_eq!(
            ctx,
            [
                Context::Unknown,
                Context::GuestKernel,
                Context::GuestUser,
                Context::Hypervisor,
                Context::Guest,
                Context::Unknown
            ]
        );
        // A frame at address 0 names as 0 - 0, never wraps.
        let f: Vec<Frame> = chain(&[CONTEXT_USER, 5, 0]).frames().collect();
        assert_eq!(f[1].lookup_ip(), 0);
    }

    #[test]
    fn max_stack_is_the_kernels_unless_asked_and_never_above_it() {
        assert_eq!(resolve_max_stack(None, Some(127)), (127, None));
        assert_eq!(resolve_max_stack(None, None), (DEFAULT_MAX_STACK, None));
        assert_eq!(resolve_max_stack(Some(16), Some(127)), (16, None));
        assert_eq!(resolve_max_stack(Some(16), None), (16, None));
        let (n, note) = resolve_max_stack(Some(500), Some(127));
        assert_eq!(n, 127);
        assert!(
            note.unwrap()
                .contains("sysctl kernel.perf_event_max_stack=500")
        );
        assert_eq!(resolve_max_stack(None, Some(0)), (DEFAULT_MAX_STACK, None));
        assert!(kernel_max_stack().is_none_or(|k| k > 0));
    }

    #[test]
    fn truncation_counts_frames_not_markers() {
        let c = chain(&[CONTEXT_KERNEL, 1, 2, CONTEXT_USER, 3]);
        assert!(c.may_be_truncated(3));
        assert!(!c.may_be_truncated(4));
        assert!(!c.may_be_truncated(0));
    }

    mod decode {
        use super::KCHAIN;
        use crate::event::EventKind;
        use crate::perf::record::{
            DEFAULT_SAMPLE_TYPE, DecodeError, SAMPLE_CALLCHAIN, SAMPLE_RAW, SampleLayout, decode,
        };
        use crate::testkit::records::Ids;
        use crate::testkit::records::sample_chain as sample;

        fn ids() -> Ids {
            Ids::EXAMPLE
        }

        #[test]
        fn a_chain_is_decoded_with_its_markers_after_the_fixed_fields() {
            let l = SampleLayout::new(DEFAULT_SAMPLE_TYPE | SAMPLE_CALLCHAIN, true).unwrap();
            let rec = sample(&l, ids(), 0xffff_ffff_8100_0010, 7, &KCHAIN, &[]);
            let e = decode(&rec, &l, 0).unwrap();
            assert_eq!((e.pid, e.tid, e.time, e.cpu), (100, 101, 5_000, 1));
            let EventKind::Sample {
                ip,
                period,
                callchain: Some(c),
                ..
            } = &e.kind
            else {
                panic!("{e:?}")
            };
            assert_eq!((*ip, *period), (0xffff_ffff_8100_0010, 7));
            assert_eq!(c.entries(), KCHAIN);
            assert_eq!(c.len(), 4);
            assert_eq!(
                e.to_string(),
                "cpu: 1, pid: 100, tid: 101 { type: sample, ip: 0xffffffff81000010, period: 7, callchain: 0xffffffff81000010 <- 0xffffffff81000020 <- 0x401136 <- 0x401156 }"
            );
            // An empty chain (a kernel thread with nothing to walk) is a chain of no frames.
            let rec = sample(&l, ids(), 1, 7, &[], &[]);
            let e = decode(&rec, &l, 0).unwrap();
            assert!(e.callchain().is_some_and(|c| c.is_empty()));
            // Without CALLCHAIN in the layout, samples have none, as before.
            let l = SampleLayout::default();
            let e = decode(&sample(&l, ids(), 1, 7, &KCHAIN, &[]), &l, 0).unwrap();
            assert!(e.callchain().is_none());
        }

        #[test]
        fn raw_data_follows_the_chain() {
            let l = SampleLayout::new(DEFAULT_SAMPLE_TYPE | SAMPLE_CALLCHAIN | SAMPLE_RAW, true)
                .unwrap();
            let rec = sample(&l, ids(), 1, 1, &KCHAIN, &[1, 2, 3, 4, 5]);
            let e = decode(&rec, &l, 0).unwrap();
            let EventKind::Sample { raw, callchain, .. } = &e.kind else {
                panic!()
            };
            assert_eq!(callchain.as_ref().unwrap().entries(), KCHAIN);
            assert_eq!(&raw.as_ref().unwrap()[..5], &[1, 2, 3, 4, 5]);
        }

        #[test]
        fn a_chain_longer_than_its_record_is_an_error_never_a_crash() {
            let l = SampleLayout::new(DEFAULT_SAMPLE_TYPE | SAMPLE_CALLCHAIN, true).unwrap();
            let good = sample(&l, ids(), 1, 1, &KCHAIN, &[]);
            // nr sits right before the entries.
            let nr_at = good.len() - 8 * (KCHAIN.len() + 1);
            for nr in [7u64, 100, 1 << 40, u64::MAX / 8 + 1, u64::MAX] {
                let mut rec = good.clone();
                rec[nr_at..nr_at + 8].copy_from_slice(&nr.to_ne_bytes());
                assert!(
                    matches!(decode(&rec, &l, 0), Err(DecodeError::Truncated { .. })),
                    "nr {nr}"
                );
            }
            // A record cut anywhere is an error too.
            for n in 8..good.len() {
                assert!(decode(&good[..n], &l, 0).is_err(), "cut at {n}");
            }
            // A shorter nr leaves bytes unread, which is allowed (the kernel pads nothing
            // here, but the record is still within bounds).
            let mut rec = good.clone();
            rec[nr_at..nr_at + 8].copy_from_slice(&2u64.to_ne_bytes());
            let e = decode(&rec, &l, 0).unwrap();
            assert_eq!(e.callchain().unwrap().entries(), &KCHAIN[..2]);
        }
    }
}
