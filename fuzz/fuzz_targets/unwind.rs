//! The DWARF unwind glue (`--call-graph dwarf`) on arbitrary registers, stack bytes and
//! unwind tables: `.eh_frame`, `.eh_frame_hdr` and `.debug_frame` made of the input, or a
//! whole ELF file of the input read as the unwinder reads a mapped binary, then a walk over
//! the stack copy. The walk must end within its frame bound, with the interrupted address
//! first, never panic and never read outside the copy.
#![no_main]

use libfuzzer_sys::fuzz_target;
use perfwatch::testkit::fuzz::{MODULE, tables, unwind};
use perfwatch::unwind::{End, tables as elf};

/// Take `n` bytes of `data` (fewer at its end).
fn take<'a>(data: &mut &'a [u8], n: usize) -> &'a [u8] {
    let (a, b) = data.split_at(n.min(data.len()));
    *data = b;
    a
}

fn u64_of(data: &mut &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let t = take(data, 8);
    b[..t.len()].copy_from_slice(t);
    u64::from_le_bytes(b)
}

fuzz_target!(|data: &[u8]| {
    let mut data = data;
    let sel = u64_of(&mut data);
    // The ip lands in the module (or just around it) unless the input says otherwise.
    let ip = match sel & 3 {
        0 => u64_of(&mut data),
        _ => MODULE.start - 0x1000 + u64_of(&mut data) % (MODULE.end - MODULE.start + 0x2000),
    };
    let sp = u64_of(&mut data);
    let bp = u64_of(&mut data);
    let regs = (sel & 4 == 0).then_some((ip, sp, bp));
    let max = (sel >> 8) as usize % 300;
    let replaced = sel & 8 != 0;
    let stack_len = (sel >> 16) as usize % 4096;
    let stack = take(&mut data, stack_len).to_vec();
    let t = if sel & 16 != 0 {
        // A whole ELF file: read or refused, as a mapped binary is.
        match elf::read(data) {
            Ok(t) => t,
            Err(_) => return,
        }
    } else {
        let a = (sel >> 32) as usize % 1024;
        let b = (sel >> 42) as usize % 256;
        let eh = take(&mut data, a).to_vec();
        let hdr = take(&mut data, b).to_vec();
        tables(eh, hdr, data.to_vec())
    };
    let _ = t.has_rules();
    let (frames, end) = unwind(&t, regs, &stack, replaced, max);
    match regs {
        None => {
            assert_eq!(end, End::NoRegisters);
            assert!(frames.is_empty());
        }
        Some(_) if max == 0 => assert!(frames.is_empty()),
        Some((ip, _, _)) => {
            assert_eq!(frames.first(), Some(&ip));
            assert!(frames.len() <= max, "{end:?} {} > {max}", frames.len());
        }
    }
    let _ = end.name();
});
