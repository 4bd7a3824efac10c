//! The fuzz targets' (fuzz/) ways into glue the crate keeps to itself: the perf.data reader
//! (`-i FILE`, `-i -`) and the DWARF unwinder's walk over crafted unwind tables.

use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwinderX86_64};
use framehop::{Module, Unwinder as _};

use crate::event::{Batch, UserRegs, UserStack};
use crate::unwind::tables::{Segment, UnwindTables};
use crate::unwind::{Coverage, End, walk};

/// What reading a recording gave: what it says about itself (`--info`'s text), and the
/// batches its reader sent.
pub struct Read {
    pub about: String,
    pub describe: String,
    pub event_names: Vec<String>,
    pub batches: Vec<Batch>,
    pub summary: Vec<String>,
}

/// `bytes` as a perf.data file (`pipe` false: `-i FILE`) or as perf's pipe format (`-i -`),
/// through the reader `-i` uses, on this thread; `Err` is a refusal with its reason.
pub fn read_recording(bytes: &[u8], pipe: bool, common_fields: bool) -> Result<Read, String> {
    let (info, batches, counts) =
        crate::record_file::read_bytes(bytes, pipe, common_fields).map_err(|e| format!("{e:#}"))?;
    Ok(Read {
        about: info.about(),
        describe: info.describe(),
        event_names: info.event_names().into_iter().map(String::from).collect(),
        batches,
        summary: counts.summary(),
    })
}

/// Unwind tables of sections alone, placed as a linker would: text at `0x1000..0x9000`,
/// `.eh_frame` at `0x9000`, `.eh_frame_hdr` at `0xa000`, one segment at file offset 0.
pub fn tables(eh_frame: Vec<u8>, hdr: Vec<u8>, debug_frame: Vec<u8>) -> UnwindTables {
    UnwindTables {
        segments: vec![Segment {
            offset: 0,
            filesz: 0x10000,
            vaddr: 0,
        }],
        text_svma: Some(0x1000..0x9000),
        eh_frame_svma: Some(0x9000..0x9000 + eh_frame.len() as u64),
        eh_frame: (!eh_frame.is_empty()).then(|| Arc::from(eh_frame)),
        eh_frame_hdr_svma: Some(0xa000..0xa000 + hdr.len() as u64),
        eh_frame_hdr: (!hdr.is_empty()).then(|| Arc::from(hdr)),
        debug_frame: (!debug_frame.is_empty()).then(|| Arc::from(debug_frame)),
        ..Default::default()
    }
}

/// The range the one module is mapped at (file offset 0).
pub const MODULE: std::ops::Range<u64> = 0x400000..0x410000;

/// Walk `stack` (registers `ip`, `sp`, `bp`) over one module with tables `t` mapped at
/// [`MODULE`] (`replaced`: its binary was replaced since), as the unwind step does, at most
/// `max_frames` frames: the frames and why the chain ended.
pub fn unwind(
    t: &UnwindTables,
    regs: Option<(u64, u64, u64)>,
    stack: &[u8],
    replaced: bool,
    max_frames: usize,
) -> (Vec<u64>, End) {
    let mut u = UnwinderX86_64::new();
    u.add_module(Module::new(
        String::new(),
        MODULE,
        MODULE.start,
        t.section_info(),
    ));
    let coverage = Coverage {
        covered: vec![MODULE],
        replaced: if replaced { vec![MODULE] } else { vec![] },
    };
    let s = UserStack {
        regs: regs.map(|(ip, sp, bp)| UserRegs { ip, sp, bp }),
        stack: stack.into(),
    };
    let mut out = Vec::new();
    let end = walk(
        &u,
        &coverage,
        &mut CacheX86_64::new(),
        &s,
        max_frames,
        &mut out,
    );
    (out, end)
}
