//! A tracepoint's `print fmt` on arbitrary text and RAW bytes: parsed against a real field
//! list (sched_switch's) or fields of the input's own format file, then every text member
//! and the whole line rendered, and the sample written as `--plain` and `--json` would.
#![no_main]

use libfuzzer_sys::fuzz_target;
use perfwatch::event::tracepoint::Format;
use perfwatch::event::tracepoint::printfmt::{KernelSymbols, PrintFmt};
use perfwatch::testkit::tracepoints as craft;

/// Names every address in one page, so that `%ps` renders both ways.
struct Syms;
impl KernelSymbols for Syms {
    fn symbol(&self, addr: u64) -> Option<(&str, u64)> {
        (addr >> 12 == 0xffffffff81000).then(|| ("fuzz_fn", addr & 0xfff))
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    // The print fmt text up to the first NUL, then the RAW bytes.
    let cut = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    let text = String::from_utf8_lossy(&rest[..cut]);
    let raw = rest.get(cut + 1..).unwrap_or(&[]);
    let fields = if sel & 1 == 0 {
        Format::parse("sched:sched_switch", craft::SCHED_SWITCH).map(|f| f.fields)
    } else {
        Format::parse("sched:sched_process_exec", craft::SCHED_PROCESS_EXEC).map(|f| f.fields)
    };
    let Ok(fields) = fields else { return };
    let Some(p) = PrintFmt::parse(&text, &fields) else {
        return;
    };
    let _ = p.render_line(&fields, raw, &Syms);
    for _ in p.symbol_addresses(&fields, raw) {}
    for r in p.renders() {
        let mut out = Vec::new();
        if p.render(r, &fields, raw, &Syms, &mut out) {
            assert!(out.len() <= 1 << 20);
        } else {
            assert!(out.is_empty());
        }
    }
});
