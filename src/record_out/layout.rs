//! The bytes of a perf.data file as `perf record` lays them out (`tools/perf/util/header.c`,
//! `synthetic-events.c`): the file header, the attributes and their ids, the feature
//! sections, perf's pipe-mode header records, and the COMM and MMAP2 records perf
//! synthesises for what existed before the events were enabled. The numbers are
//! [`crate::record_file::format`]'s, the reader's own.

use crate::perf::open::OpenedAttr;
use crate::process::proc::SeedProcess;
use crate::record_file::format::{self as f, put_string};
use crate::symbols::{BuildId, FileIdentity};

/// The largest `perf_event_attr` perf 6.1 reads (PERF_ATTR_SIZE_VER7): an attribute whose
/// bytes beyond it are all zero is written that long, so that older perfs read the file.
const ATTR_SIZE_VER7: usize = 128;

/// An attribute's bytes as written: cut to [`ATTR_SIZE_VER7`] when nothing beyond it is
/// set, with its `size` field saying so.
pub(crate) fn attr_for_file(a: &OpenedAttr) -> Vec<u8> {
    let mut b = a.bytes.clone();
    if b.len() > ATTR_SIZE_VER7 && b[ATTR_SIZE_VER7..].iter().all(|&x| x == 0) {
        b.truncate(ATTR_SIZE_VER7);
        b[4..8].copy_from_slice(&(ATTR_SIZE_VER7 as u32).to_le_bytes());
    }
    b
}

/// The `sample_type` of an attribute's bytes (offset 24).
pub fn sample_type(attr: &[u8]) -> u64 {
    crate::record_file::header::u64_at(attr, 24).unwrap_or(0)
}

/// The size of the `sample_id` trailer records other than samples carry
/// (`sample_id_all`): TID, TIME, ID, STREAM_ID, CPU, IDENTIFIER, eight bytes each.
pub(crate) fn id_trailer_size(sample_type: u64, sample_id_all: bool) -> usize {
    if !sample_id_all {
        return 0;
    }
    [0x2u64, 0x4, 0x40, 0x200, 0x80, 0x10000]
        .iter()
        .filter(|&&bit| sample_type & bit != 0)
        .count()
        * 8
}

/// PERF_RECORD_LOST for records perfwatch's queue dropped (the writer fell behind), so that
/// perf's readers count them as they count the kernel's: the first event's id, the count,
/// and a `sample_id` trailer with that id and `time`.
pub(crate) fn lost_record(
    sample_type: u64,
    sample_id_all: bool,
    id: u64,
    lost: u64,
    time: u64,
) -> Vec<u8> {
    const LOST: u32 = 2;
    let mut out = Vec::new();
    header(&mut out, LOST, 0, 0);
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&lost.to_le_bytes());
    if sample_id_all {
        // TID, TIME, ID, STREAM_ID, CPU, IDENTIFIER, in perf_event.h's order.
        for (bit, v) in [
            (0x2u64, 0),
            (0x4, time),
            (0x40, id),
            (0x200, id),
            (0x80, 0),
            (0x10000, id),
        ] {
            if sample_type & bit != 0 {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
    let size = out.len() as u16;
    out[6..8].copy_from_slice(&size.to_le_bytes());
    out
}

/// Where a record's time is, as its attribute lays records out: a sample's after
/// IDENTIFIER, IP and TID from the front; another record's in its `sample_id` trailer, after
/// TID. `None` without PERF_SAMPLE_TIME.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TimeAt {
    sample: usize,
    trailer_from_end: usize,
}

impl TimeAt {
    pub fn new(sample_type: u64, sample_id_all: bool) -> Option<TimeAt> {
        const TIME: u64 = 0x4;
        if sample_type & TIME == 0 {
            return None;
        }
        let has = |bit: u64| usize::from(sample_type & bit != 0) * 8;
        let trailer = id_trailer_size(sample_type, sample_id_all);
        Some(TimeAt {
            sample: 8 + has(0x10000) + has(0x1) + has(0x2),
            trailer_from_end: if sample_id_all { trailer - has(0x2) } else { 0 },
        })
    }

    /// The time of one whole record; `None` when it carries none.
    pub fn of(&self, rec: &[u8]) -> Option<u64> {
        const RECORD_SAMPLE: u32 = 9;
        let u64_at = crate::record_file::header::u64_at;
        if crate::record_file::header::u32_at(rec, 0)? == RECORD_SAMPLE {
            u64_at(rec, self.sample)
        } else if self.trailer_from_end > 0 {
            u64_at(rec, rec.len().checked_sub(self.trailer_from_end)?)
        } else {
            None
        }
    }
}

/// The records of `bytes` (whole records, one after another) stamped at or before `stop`,
/// and how many were left out.
pub(crate) fn up_to(bytes: &[u8], at: TimeAt, stop: u64) -> (Vec<u8>, u64) {
    let mut out = Vec::with_capacity(bytes.len());
    let mut cut = 0;
    let mut pos = 0;
    while let Some(size) = bytes.get(pos + 6..pos + 8) {
        let size = u16::from_le_bytes([size[0], size[1]]) as usize;
        let Some(rec) = bytes.get(pos..pos + size).filter(|_| size >= 8) else {
            break;
        };
        match at.of(rec) {
            Some(t) if t > stop => cut += 1,
            _ => out.extend_from_slice(rec),
        }
        pos += size;
    }
    (out, cut)
}

/// Whether the attribute asks for `sample_id_all` (flags bit 18, at offset 40).
pub fn sample_id_all(attr: &[u8]) -> bool {
    crate::record_file::header::u64_at(attr, 40).is_some_and(|fl| fl & (1 << 18) != 0)
}

fn header(out: &mut Vec<u8>, ty: u32, misc: u16, size: usize) {
    out.extend_from_slice(&ty.to_le_bytes());
    out.extend_from_slice(&misc.to_le_bytes());
    out.extend_from_slice(&(size as u16).to_le_bytes());
}

/// A record of perf's own with no body (FINISHED_ROUND, FINISHED_INIT).
pub(crate) fn bare_record(ty: u32) -> [u8; 8] {
    let mut b = Vec::with_capacity(8);
    header(&mut b, ty, 0, 8);
    b.try_into().unwrap_or([0; 8])
}

/// A NUL-terminated name padded to 8 bytes, as COMM and MMAP2 carry it (cut to what a
/// record's u16 size can hold).
fn put_name(out: &mut Vec<u8>, name: &[u8], max: usize) {
    let name = &name[..name.len().min(max)];
    let len = (name.len() + 1).div_ceil(8) * 8;
    out.extend_from_slice(name);
    out.resize(out.len() + len - name.len(), 0);
}

/// PERF_RECORD_COMM and PERF_RECORD_MMAP2 for every thread and executable mapping the `/proc`
/// snapshot found, as `perf record` synthesises them (`sample_id` trailer zeroed: perf's
/// readers take id 0 as "synthesised" and give it to the first event).
pub(crate) fn synthesize(snapshot: &[SeedProcess], trailer: usize) -> (Vec<u8>, u64) {
    const COMM: u32 = 3;
    const MMAP2: u32 = 10;
    const MISC_USER: u16 = 2;
    let mut out = Vec::new();
    let mut records = 0;
    for p in snapshot {
        for (tid, name) in &p.threads {
            let start = out.len();
            header(&mut out, COMM, 0, 0);
            out.extend_from_slice(&p.pid.to_le_bytes());
            out.extend_from_slice(&tid.to_le_bytes());
            put_name(&mut out, name, 15);
            out.resize(out.len() + trailer, 0);
            let size = (out.len() - start) as u16;
            out[start + 6..start + 8].copy_from_slice(&size.to_le_bytes());
            records += 1;
        }
        for m in &p.maps {
            let start = out.len();
            header(&mut out, MMAP2, MISC_USER, 0);
            out.extend_from_slice(&p.pid.to_le_bytes());
            out.extend_from_slice(&p.pid.to_le_bytes());
            for v in [m.start, m.len, m.pgoff] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            let (maj, min, ino, generation) = match m.file.id {
                FileIdentity::Inode {
                    maj,
                    min,
                    ino,
                    generation,
                } => (maj, min, ino, generation),
                _ => (0, 0, 0, 0),
            };
            out.extend_from_slice(&maj.to_le_bytes());
            out.extend_from_slice(&min.to_le_bytes());
            out.extend_from_slice(&ino.to_le_bytes());
            out.extend_from_slice(&generation.to_le_bytes());
            out.extend_from_slice(&m.prot.to_le_bytes());
            out.extend_from_slice(&m.flags.to_le_bytes());
            put_name(&mut out, &m.file.path, 4096);
            out.resize(out.len() + trailer, 0);
            let size = (out.len() - start) as u16;
            out[start + 6..start + 8].copy_from_slice(&size.to_le_bytes());
            records += 1;
        }
    }
    (out, records)
}

/// The kernel's own mapping, as `perf record` synthesises it first (PERF_RECORD_MMAP of
/// `[kernel.kallsyms]_text`, pid -1, from `_text` to `_etext`), so that perf's readers place
/// kernel samples in the kernel. `None` when `/proc/kallsyms` hides the addresses.
#[cfg(test)]
pub fn kernel_mmap(kallsyms: &str, trailer: usize) -> Option<Vec<u8>> {
    let (text, etext) = kallsyms_text(kallsyms.lines())?;
    kernel_text_mmap(text, etext, trailer)
}

/// `_text` and `_etext` from kallsyms' lines (`None` when hidden or missing).
pub fn kallsyms_text<'a>(lines: impl Iterator<Item = &'a str>) -> Option<(u64, u64)> {
    let (mut text, mut etext) = (None, None);
    for l in lines {
        let mut w = l.split_ascii_whitespace();
        let (Some(addr), Some(_), Some(name)) = (w.next(), w.next(), w.next()) else {
            continue;
        };
        let slot = match name {
            "_text" => &mut text,
            "_etext" => &mut etext,
            _ => continue,
        };
        *slot = u64::from_str_radix(addr, 16).ok().filter(|&a| a != 0);
        if text.is_some() && etext.is_some() {
            break;
        }
    }
    Some((text?, etext?))
}

/// The size of the kernel's text, `_etext - _text`, from `/proc/iomem`'s "Kernel code"
/// resource (x86: `__pa_symbol(_text)` to `__pa_symbol(_etext) - 1`); `None` when it is
/// hidden (zeros, not root) or missing.
pub fn iomem_kernel_code(iomem: &str) -> Option<u64> {
    let line = iomem
        .lines()
        .find(|l| l.trim_end().ends_with(": Kernel code"))?;
    let (range, _) = line.trim().split_once(' ')?;
    let (start, end) = range.split_once('-')?;
    let (start, end) = (
        u64::from_str_radix(start, 16).ok()?,
        u64::from_str_radix(end, 16).ok()?,
    );
    (end > start).then(|| end - start + 1)
}

/// [`kernel_mmap`] of a kernel whose text is `text..etext`.
pub fn kernel_text_mmap(text: u64, etext: u64, trailer: usize) -> Option<Vec<u8>> {
    const MMAP: u32 = 1;
    const MISC_KERNEL: u16 = 1;
    let mut out = Vec::new();
    header(&mut out, MMAP, MISC_KERNEL, 0);
    out.extend_from_slice(&u32::MAX.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    for v in [text, etext.checked_sub(text)?, text] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    put_name(&mut out, b"[kernel.kallsyms]_text", 64);
    out.resize(out.len() + trailer, 0);
    let size = out.len() as u16;
    out[6..8].copy_from_slice(&size.to_le_bytes());
    Some(out)
}

/// A binary samples hit, for the BUILD_ID feature.
#[derive(Clone, Debug)]
pub(crate) struct HitBinary {
    pub name: Vec<u8>,
    pub build_id: BuildId,
    pub kernel: bool,
}

/// One `perf_record_header_build_id`: header (`ty`: 0 in the feature section,
/// HEADER_BUILD_ID in a pipe), pid, the id in 20 bytes and its size, the name padded.
pub(crate) fn build_id_record(ty: u32, b: &HitBinary) -> Vec<u8> {
    const MISC_KERNEL: u16 = 1;
    const MISC_USER: u16 = 2;
    let misc = if b.kernel { MISC_KERNEL } else { MISC_USER } | f::MISC_BUILD_ID_SIZE;
    let mut out = Vec::new();
    header(&mut out, ty, misc, 0);
    let pid: i32 = if b.kernel { -1 } else { 0 };
    out.extend_from_slice(&pid.to_le_bytes());
    let id = b.build_id.as_bytes();
    let mut id24 = [0u8; 24];
    id24[..id.len()].copy_from_slice(id);
    id24[20] = id.len() as u8;
    out.extend_from_slice(&id24);
    let name = &b.name[..b.name.len().min(4000)];
    let len = (name.len() + 1).div_ceil(f::NAME_ALIGN) * f::NAME_ALIGN;
    out.extend_from_slice(name);
    out.resize(out.len() + len - name.len(), 0);
    let size = out.len() as u16;
    out[6..8].copy_from_slice(&size.to_le_bytes());
    out
}

/// What the feature sections say.
pub(crate) struct Features {
    pub hostname: Vec<u8>,
    pub osrelease: Vec<u8>,
    pub version: Vec<u8>,
    pub arch: Vec<u8>,
    pub nr_cpus: (u32, u32),
    pub cmdline: Vec<Vec<u8>>,
    /// (attribute as written, name, ids) per event.
    pub events: Vec<(Vec<u8>, String, Vec<u64>)>,
    pub build_ids: Vec<HitBinary>,
    pub tracing_data: Option<Vec<u8>>,
}

impl Features {
    /// The machine's: uname, the CPUs, perfwatch's own command line.
    pub(crate) fn of_this_machine(online: &[u32]) -> Features {
        let [_, nodename, release, _, machine] = crate::sys::uname().unwrap_or_default();
        let max = online.iter().max().map_or(1, |m| m + 1);
        Features {
            hostname: nodename,
            osrelease: release,
            version: format!("perfwatch {}", env!("CARGO_PKG_VERSION")).into_bytes(),
            arch: machine,
            nr_cpus: (max, online.len() as u32),
            cmdline: std::env::args_os()
                .map(|a| a.into_encoded_bytes())
                .collect(),
            events: Vec::new(),
            build_ids: Vec::new(),
            tracing_data: None,
        }
    }

    /// The feature sections' bodies, by bit, in bit order.
    pub fn sections(&self) -> Vec<(u32, Vec<u8>)> {
        let mut out = Vec::new();
        if let Some(t) = &self.tracing_data {
            out.push((f::FEAT_TRACING_DATA, t.clone()));
        }
        let mut b = Vec::new();
        for h in &self.build_ids {
            b.extend(build_id_record(0, h));
        }
        out.push((f::FEAT_BUILD_ID, b));
        for (bit, s) in [
            (f::FEAT_HOSTNAME, &self.hostname),
            (f::FEAT_OSRELEASE, &self.osrelease),
            (f::FEAT_VERSION, &self.version),
            (f::FEAT_ARCH, &self.arch),
        ] {
            let mut b = Vec::new();
            put_string(&mut b, s);
            out.push((bit, b));
        }
        let mut b = Vec::new();
        b.extend_from_slice(&self.nr_cpus.0.to_le_bytes());
        b.extend_from_slice(&self.nr_cpus.1.to_le_bytes());
        out.push((f::FEAT_NRCPUS, b));
        let mut b = Vec::new();
        b.extend_from_slice(&(self.cmdline.len() as u32).to_le_bytes());
        for a in &self.cmdline {
            put_string(&mut b, a);
        }
        out.push((f::FEAT_CMDLINE, b));
        let mut b = Vec::new();
        let attr_size = self.events.first().map_or(0, |e| e.0.len());
        b.extend_from_slice(&(self.events.len() as u32).to_le_bytes());
        b.extend_from_slice(&(attr_size as u32).to_le_bytes());
        for (attr, name, ids) in &self.events {
            let mut a = attr.clone();
            a.resize(attr_size, 0);
            b.extend_from_slice(&a);
            b.extend_from_slice(&(ids.len() as u32).to_le_bytes());
            put_string(&mut b, name.as_bytes());
            for id in ids {
                b.extend_from_slice(&id.to_le_bytes());
            }
        }
        out.push((f::FEAT_EVENT_DESC, b));
        out
    }
}

/// The file header (`struct perf_file_header`).
pub(crate) fn file_header(
    attr_size: usize,
    attrs: (u64, u64),
    data: (u64, u64),
    bits: &[u32],
) -> Vec<u8> {
    let mut b = Vec::with_capacity(f::FILE_HEADER_SIZE as usize);
    b.extend_from_slice(f::MAGIC);
    b.extend_from_slice(&f::FILE_HEADER_SIZE.to_le_bytes());
    b.extend_from_slice(&(attr_size as u64 + 16).to_le_bytes());
    for v in [attrs.0, attrs.1, data.0, data.1, 0, 0] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    let mut features = [0u64; 4];
    for &bit in bits {
        features[(bit / 64) as usize % 4] |= 1 << (bit % 64);
    }
    for w in features {
        b.extend_from_slice(&w.to_le_bytes());
    }
    b
}

/// Pipe mode: perf's 16-byte header.
pub(crate) fn pipe_header() -> Vec<u8> {
    let mut b = f::MAGIC.to_vec();
    b.extend_from_slice(&f::PIPE_HEADER_SIZE.to_le_bytes());
    b
}

/// Pipe mode: PERF_RECORD_HEADER_ATTR (the attribute, then its ids). An event with more ids
/// than one record holds gets several records.
pub(crate) fn attr_records(attr: &[u8], ids: &[u64]) -> Vec<u8> {
    let room = (u16::MAX as usize - 8 - attr.len()) / 8;
    let mut out = Vec::new();
    let chunks: Vec<&[u64]> = if ids.is_empty() {
        vec![&[]]
    } else {
        ids.chunks(room.max(1)).collect()
    };
    for part in chunks {
        header(&mut out, f::HEADER_ATTR, 0, 8 + attr.len() + part.len() * 8);
        out.extend_from_slice(attr);
        for id in part {
            out.extend_from_slice(&id.to_le_bytes());
        }
    }
    out
}

/// Pipe mode: an event's name as perf record writes it there (no EVENT_DESC feature in a
/// pipe), a PERF_RECORD_EVENT_UPDATE of type NAME: `{ u64 type = 2; u64 id; char name[]; }`,
/// naming the event one of whose `id`s it gives; none for an event without ids.
pub fn event_name_record(id: Option<u64>, name: &str) -> Option<Vec<u8>> {
    let id = id?;
    let mut body = Vec::new();
    body.extend_from_slice(&2u64.to_le_bytes());
    body.extend_from_slice(&id.to_le_bytes());
    put_name(&mut body, name.as_bytes(), 4096);
    let mut out = Vec::with_capacity(8 + body.len());
    header(&mut out, f::EVENT_UPDATE, 0, 8 + body.len());
    out.extend_from_slice(&body);
    Some(out)
}

/// Pipe mode: a feature as a PERF_RECORD_HEADER_FEATURE record (none when too large for
/// one record).
pub(crate) fn feature_record(bit: u32, body: &[u8]) -> Option<Vec<u8>> {
    let size = 16 + body.len().div_ceil(8) * 8;
    if size > u16::MAX as usize {
        return None;
    }
    let mut out = Vec::with_capacity(size);
    header(&mut out, f::HEADER_FEATURE, 0, size);
    out.extend_from_slice(&u64::from(bit).to_le_bytes());
    out.extend_from_slice(body);
    out.resize(size, 0);
    Some(out)
}

/// Pipe mode: PERF_RECORD_HEADER_TRACING_DATA, then the data itself, padded to 8 bytes.
pub(crate) fn tracing_data_record(data: &[u8]) -> Vec<u8> {
    let aligned = data.len().div_ceil(8) * 8;
    let mut out = Vec::with_capacity(16 + aligned);
    header(&mut out, f::HEADER_TRACING_DATA, 0, 16);
    out.extend_from_slice(&(aligned as u32).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(data);
    out.resize(16 + aligned, 0);
    out
}

/// The tracing data perf keeps for tracepoints (`trace-event-info.c`, version 0.6): tracefs'
/// page and event headers and the format file of each recorded tracepoint, so that a reader
/// decodes their fields as they were on this kernel. `None` without tracefs.
pub(crate) fn tracing_data(root: &str, tracepoints: &[&str]) -> Option<Vec<u8>> {
    // One large read: tracefs's header files answer a short first read (std's 32-byte
    // probe) and then nothing.
    let read = |p: String| -> Option<Vec<u8>> {
        use std::io::Read;
        let mut b = Vec::with_capacity(1 << 16);
        std::fs::File::open(p).ok()?.read_to_end(&mut b).ok()?;
        Some(b)
    };
    let mut b = f::TRACING_MAGIC.to_vec();
    b.extend_from_slice(b"0.6\0");
    b.push(0); // little-endian
    b.push(std::mem::size_of::<libc::c_long>() as u8);
    let page = crate::sys::sysconf(libc::_SC_PAGESIZE).max(4096) as u32;
    b.extend_from_slice(&page.to_le_bytes());
    for name in ["header_page", "header_event"] {
        let text = read(format!("{root}/events/{name}"))?;
        b.extend_from_slice(name.as_bytes());
        b.push(0);
        b.extend_from_slice(&(text.len() as u64).to_le_bytes());
        b.extend_from_slice(&text);
    }
    b.extend_from_slice(&0u32.to_le_bytes()); // ftrace's own formats: none
    let mut systems: Vec<(&str, Vec<Vec<u8>>)> = Vec::new();
    for tp in tracepoints {
        let Some((sys, name)) = tp.split_once(':') else {
            continue;
        };
        let Some(text) = read(format!("{root}/events/{sys}/{name}/format")) else {
            continue;
        };
        match systems.iter_mut().find(|(s, _)| *s == sys) {
            Some((_, v)) => v.push(text),
            None => systems.push((sys, vec![text])),
        }
    }
    b.extend_from_slice(&(systems.len() as u32).to_le_bytes());
    for (sys, formats) in systems {
        b.extend_from_slice(sys.as_bytes());
        b.push(0);
        b.extend_from_slice(&(formats.len() as u32).to_le_bytes());
        for text in formats {
            b.extend_from_slice(&(text.len() as u64).to_le_bytes());
            b.extend_from_slice(&text);
        }
    }
    b.extend_from_slice(&0u32.to_le_bytes()); // kallsyms: perf reads /proc/kallsyms itself
    b.extend_from_slice(&0u32.to_le_bytes()); // ftrace printk formats
    b.extend_from_slice(&0u64.to_le_bytes()); // saved cmdlines
    Some(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record_file::header::{Facts, parse_tracing_data};

    #[test]
    fn features_written_are_read_back_by_the_reader() {
        let mut fe = Features::of_this_machine(&[0, 1]);
        fe.hostname = b"box".to_vec();
        fe.cmdline = vec![b"perfwatch".to_vec(), b"-o".to_vec(), b"x".to_vec()];
        fe.events = vec![(vec![0; 128], "cpu-clock".into(), vec![7, 8])];
        fe.build_ids = vec![HitBinary {
            name: b"/bin/true".to_vec(),
            build_id: BuildId::new(&[0xab; 20]).unwrap(),
            kernel: false,
        }];
        let mut facts = Facts::default();
        for (bit, body) in fe.sections() {
            facts.feature(bit, &body);
        }
        assert_eq!(facts.hostname.as_deref(), Some("box"));
        assert_eq!(facts.nr_cpus, Some((2, 2)));
        assert_eq!(facts.cmdline, ["perfwatch", "-o", "x"]);
        assert_eq!(facts.names.get(&8).map(String::as_str), Some("cpu-clock"));
        let id = facts.build_ids.get(&b"/bin/true"[..]).unwrap();
        assert_eq!(id.as_bytes(), &[0xab; 20]);
    }

    #[test]
    fn tracing_data_written_is_parsed_by_the_reader() {
        let dir = std::env::temp_dir().join(format!("pw-td-{}", std::process::id()));
        let ev = dir.join("events/sched/sched_switch");
        std::fs::create_dir_all(&ev).unwrap();
        std::fs::write(dir.join("events/header_page"), "page").unwrap();
        std::fs::write(dir.join("events/header_event"), "event").unwrap();
        std::fs::write(ev.join("format"), "name: sched_switch\nID: 316\n").unwrap();
        let b = tracing_data(dir.to_str().unwrap(), &["sched:sched_switch"]).unwrap();
        let formats = parse_tracing_data(&b).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(formats.len(), 1);
        assert_eq!(formats[0].name, "sched:sched_switch");
    }

    #[test]
    fn records_past_the_stop_time_are_cut() {
        // IP | TID | TIME | CPU | PERIOD | IDENTIFIER, sample_id_all.
        let st = 0x1 | 0x2 | 0x4 | 0x80 | 0x100 | 0x10000;
        let at = TimeAt::new(st, true).unwrap();
        let sample = |t: u64| {
            let mut r = Vec::new();
            header(&mut r, 9, 0, 56);
            for v in [7u64, 0x1000, 5, t, 0, 1] {
                r.extend_from_slice(&v.to_le_bytes());
            }
            r
        };
        // An EXIT record: pid, ppid, tid, ptid, time, then the trailer TID TIME CPU IDENTIFIER.
        let exit = |t: u64| {
            let mut r = Vec::new();
            header(&mut r, 4, 0, 8 + 24 + 32);
            for v in [1u64, 2, 99, 5, t, 0, 7] {
                r.extend_from_slice(&v.to_le_bytes());
            }
            r
        };
        let mut b = sample(10);
        b.extend(exit(20));
        b.extend(sample(30));
        b.extend(exit(40));
        let (kept, cut) = up_to(&b, at, 25);
        assert_eq!(cut, 2);
        let mut want = sample(10);
        want.extend(exit(20));
        assert_eq!(kept, want);
        assert!(TimeAt::new(0x1 | 0x2, true).is_none());
    }

    #[test]
    fn a_lost_record_carries_its_time_where_the_cut_reads_it() {
        let st = 0x1 | 0x2 | 0x4 | 0x80 | 0x100 | 0x10000;
        let r = lost_record(st, true, 42, 7, 1234);
        assert_eq!(r.len(), 8 + 16 + 32);
        assert_eq!(u16::from_le_bytes([r[6], r[7]]) as usize, r.len());
        assert_eq!(TimeAt::new(st, true).unwrap().of(&r), Some(1234));
        assert_eq!(&r[16..24], &7u64.to_le_bytes());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

        /// The cut reads sizes and times from the rings' bytes: any bytes are cut or kept
        /// whole, never a panic, never more out than in.
        #[test]
        fn any_bytes_are_cut_at_the_stop_time_without_a_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512),
            st in proptest::prelude::any::<u64>(),
            all in proptest::prelude::any::<bool>(),
            stop in proptest::prelude::any::<u64>(),
        ) {
            if let Some(at) = TimeAt::new(st, all) {
                let (kept, _) = up_to(&bytes, at, stop);
                proptest::prop_assert!(kept.len() <= bytes.len());
            }
        }
    }

    #[test]
    fn the_kernel_mapping_runs_from_text_to_etext() {
        let k = "0000000000000000 A fixed_percpu_data\nffffffff81000000 T _text\nffffffff81000010 T f\nffffffff82000000 T _etext\n";
        let b = kernel_mmap(k, 8).unwrap();
        assert_eq!(u16::from_le_bytes([b[6], b[7]]) as usize, b.len());
        assert_eq!(&b[8..12], &u32::MAX.to_le_bytes());
        assert_eq!(&b[24..32], &0x100_0000u64.to_le_bytes());
        assert!(kernel_mmap("0000000000000000 T _text\n0000000000000000 T _etext\n", 8).is_none());
    }

    #[test]
    fn iomem_gives_the_kernel_texts_size() {
        let m = "00000000-00000fff : Reserved\n  01000000-02259aff : Kernel code\n  02400000-02dfdfff : Kernel rodata\n";
        assert_eq!(iomem_kernel_code(m), Some(0x1259b00));
        // Not root: the addresses read as zeros.
        assert_eq!(
            iomem_kernel_code("  00000000-00000000 : Kernel code\n"),
            None
        );
        assert_eq!(iomem_kernel_code("garbage : Kernel code\n"), None);
    }

    #[test]
    fn synthesized_records_have_their_sizes_and_trailers() {
        let p = SeedProcess {
            pid: 42,
            ppid: Some(1),
            threads: vec![
                (42, b"spin".to_vec().into()),
                (43, b"a-very-long-thread-name".to_vec().into()),
            ],
            maps: Vec::new(),
            argv: None,
            exe: None,
            cgroup: None,
        };
        let (b, n) = synthesize(&[p], 24);
        assert_eq!(n, 2);
        let first = u16::from_le_bytes([b[6], b[7]]) as usize;
        assert_eq!(first, 8 + 8 + 8 + 24);
        assert_eq!(&b[16..20], b"spin");
        let second = u16::from_le_bytes([b[first + 6], b[first + 7]]) as usize;
        assert_eq!(first + second, b.len());
        assert_eq!(second % 8, 0);
    }
}
