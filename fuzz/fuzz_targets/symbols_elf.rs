//! The symbolizer's ELF glue on arbitrary bytes: headers, sections, notes and symbol tables
//! that lie about their sizes and offsets; every symbol of the table built must have an
//! extent and a displayable name.
#![no_main]

use libfuzzer_sys::fuzz_target;
use perfwatch::symbols::elf::parse_bytes;

fuzz_target!(|data: &[u8]| {
    let _ = parse_bytes(data);
});
