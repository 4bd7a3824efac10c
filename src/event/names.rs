//! The names a sample carries once the symbolize stage has seen it ([`SampleNames`]): part of
//! the event model, so that the model does not depend on the stage that fills it in.

use crate::callchain::{Frame, FrameNames};
use crate::symbols::Symbolized;

/// The names of one sample: its own address's, and its call chain's frames' (innermost
/// first, as [`crate::callchain::Callchain::frames`] gives them; `None` for a frame that
/// cannot be named at all, such as a guest's).
#[derive(Clone, Debug)]
pub struct SampleNames {
    pub ip: Option<Symbolized>,
    pub frames: Box<[Option<Symbolized>]>,
    /// The kernel addresses a tracepoint's print fmt shows as functions (`%ps`, e.g.
    /// hrtimer_expire_entry's `function`), with their names.
    pub args: Box<[(u64, Option<Symbolized>)]>,
}

impl SampleNames {
    /// The sample's own symbol, when named.
    pub fn sym(&self) -> Option<&Symbolized> {
        self.ip.as_ref()
    }
}

fn same(a: &Option<Symbolized>, b: &Option<Symbolized>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.symbol().key() == b.symbol().key() && a.offset() == b.offset(),
        _ => false,
    }
}

impl crate::event::tracepoint::printfmt::KernelSymbols for SampleNames {
    fn symbol(&self, addr: u64) -> Option<(&str, u64)> {
        let (_, s) = self.args.iter().find(|(a, _)| *a == addr)?;
        let s = s.as_ref()?;
        Some((s.name()?, s.offset()?))
    }
}

impl PartialEq for SampleNames {
    fn eq(&self, other: &SampleNames) -> bool {
        same(&self.ip, &other.ip)
            && self.args.len() == other.args.len()
            && self
                .args
                .iter()
                .zip(&other.args[..])
                .all(|((a, x), (b, y))| a == b && same(x, y))
            && self.frames.len() == other.frames.len()
            && self
                .frames
                .iter()
                .zip(&other.frames[..])
                .all(|(a, b)| same(a, b))
    }
}

impl Eq for SampleNames {}

impl FrameNames for SampleNames {
    fn symbol(&self, index: usize, _: Frame) -> Option<&Symbolized> {
        self.frames.get(index)?.as_ref()
    }
}
