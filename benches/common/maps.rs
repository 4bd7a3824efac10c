//! The executable file mappings of a process, read from `/proc/PID/maps` for the benches
//! that name or unwind addresses of a live process (as MMAP2 records would give them).

use perfwatch::symbols::{FileIdentity, MappedFile};

/// One executable mapping of a file: where it starts and ends, its offset in the file, and
/// the file.
pub struct ExecMap {
    pub start: u64,
    pub end: u64,
    pub pgoff: u64,
    pub file: std::sync::Arc<MappedFile>,
}

/// The executable file mappings in `/proc/PID/maps`'s text `maps`.
pub fn exec_maps(maps: &str) -> Vec<ExecMap> {
    let mut out = Vec::new();
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || !f[1].contains('x') || !f[5].starts_with('/') {
            continue;
        }
        let (s, e) = f[0].split_once('-').unwrap();
        let (maj, min) = f[3].split_once(':').unwrap();
        out.push(ExecMap {
            start: u64::from_str_radix(s, 16).unwrap(),
            end: u64::from_str_radix(e, 16).unwrap(),
            pgoff: u64::from_str_radix(f[2], 16).unwrap(),
            file: MappedFile::new(
                f[5].as_bytes(),
                FileIdentity::from_mmap2(
                    u32::from_str_radix(maj, 16).unwrap(),
                    u32::from_str_radix(min, 16).unwrap(),
                    f[4].parse().unwrap(),
                    0,
                ),
            ),
        });
    }
    out
}
