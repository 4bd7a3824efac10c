//! What a perf.data file says about itself: the file header (`struct perf_file_header`), the
//! events' attributes with their ids, and the feature sections (host, OS release, perf
//! version, command line, CPUs, event names, build ids, tracepoint formats), as
//! `tools/perf/util/header.c` writes them. Every size and offset comes from the file, so
//! each is checked against what is there before anything is read or allocated.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};

use crate::event::BuildId;

pub use super::format::MAGIC;

pub(crate) use super::format::{
    FEAT_ARCH, FEAT_BUILD_ID, FEAT_CLOCKID, FEAT_CMDLINE, FEAT_COMPRESSED, FEAT_EVENT_DESC,
    FEAT_HOSTNAME, FEAT_NRCPUS, FEAT_OSRELEASE, FEAT_SAMPLE_TIME, FEAT_TRACING_DATA, FEAT_VERSION,
    FILE_HEADER_SIZE, MAGIC_BIG, PIPE_HEADER_SIZE,
};

/// The smallest `perf_event_attr` (PERF_ATTR_SIZE_VER0) and the largest this reader takes.
const ATTR_MIN: usize = 64;
const ATTR_MAX: usize = 4096;
/// At most this many events, and ids of all events together.
const MAX_ATTRS: usize = 4096;
const MAX_IDS: usize = 1 << 20;
/// A feature section larger than this is not read (said in a note).
pub(crate) const FEATURE_MAX: u64 = 64 << 20;

/// Why a recording cannot be read at all.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HeaderError {
    #[error("not a perf.data file (its magic is {0:?}, perf writes \"PERFILE2\")")]
    Magic(String),
    #[error(
        "a big-endian recording (made on a big-endian machine): perfwatch reads little-endian recordings only"
    )]
    BigEndian,
    #[error("the file is too short for a perf.data header ({0} bytes)")]
    Short(u64),
    #[error("{0}")]
    Bad(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

fn bad(s: impl Into<String>) -> HeaderError {
    HeaderError::Bad(s.into())
}

#[inline]
pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

#[inline]
pub(crate) fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// One event's `perf_event_attr`, the fields perfwatch reads of it, and its ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileAttr {
    pub type_: u32,
    pub config: u64,
    pub sample_period: u64,
    pub sample_type: u64,
    pub flags: u64,
    pub clockid: Option<i32>,
    /// `sample_regs_user`: the registers REGS_USER holds (`--call-graph dwarf`).
    pub regs_user: u64,
    pub ids: Vec<u64>,
    /// From EVENT_DESC (or an EVENT_UPDATE record in pipe mode).
    pub name: Option<String>,
    /// The attribute's bytes as the file has them (`-o` beside `-i` writes them again).
    pub raw: Vec<u8>,
}

impl FileAttr {
    /// Parse a `perf_event_attr` of `b.len()` bytes (its `size` field may say less).
    pub fn parse(b: &[u8]) -> Option<FileAttr> {
        if b.len() < ATTR_MIN {
            return None;
        }
        let flags = u64_at(b, 40)?;
        let use_clockid = flags & (1 << 25) != 0;
        Some(FileAttr {
            type_: u32_at(b, 0)?,
            config: u64_at(b, 8)?,
            sample_period: u64_at(b, 16)?,
            sample_type: u64_at(b, 24)?,
            flags,
            clockid: if use_clockid {
                u32_at(b, 92).map(|c| c as i32)
            } else {
                None
            },
            regs_user: u64_at(b, 80).unwrap_or(0),
            ids: Vec::new(),
            name: None,
            raw: b.to_vec(),
        })
    }

    /// `freq`: the period field is a frequency, and samples carry their period.
    pub fn freq(&self) -> bool {
        self.flags & (1 << 10) != 0
    }

    pub fn sample_id_all(&self) -> bool {
        self.flags & (1 << 18) != 0
    }

    pub(crate) fn is_dummy(&self) -> bool {
        self.type_ == 1 && self.config == 9
    }
}

/// A `{offset, size}` pair of the file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Section {
    pub offset: u64,
    pub size: u64,
}

fn section(b: &[u8], at: usize) -> Option<Section> {
    Some(Section {
        offset: u64_at(b, at)?,
        size: u64_at(b, at + 8)?,
    })
}

/// A tracepoint's format as the recording's tracing data holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceFormat {
    pub name: String,
    pub text: String,
}

/// What the file says about itself (file header features, or pipe-mode header records).
#[derive(Clone, Debug, Default)]
pub struct Facts {
    pub hostname: Option<String>,
    pub osrelease: Option<String>,
    pub version: Option<String>,
    pub arch: Option<String>,
    /// (available, online).
    pub nr_cpus: Option<(u32, u32)>,
    pub cmdline: Vec<String>,
    /// Event names by id (EVENT_DESC).
    pub names: HashMap<u64, String>,
    /// File name -> build id (BUILD_ID), and the kernel's (`[kernel.kallsyms]`).
    pub build_ids: HashMap<Box<[u8]>, BuildId>,
    pub clockid: Option<i32>,
    /// HEADER_COMPRESSED's ring size (`perf record -z`): what one compressed record may
    /// decompress to.
    pub compressed_mmap_len: Option<u32>,
    /// The tracing data as the file has it (`-o` beside `-i` writes it again).
    pub tracing_raw: Option<Vec<u8>>,
    /// The times of the first and the last sample (SAMPLE_TIME, written by `perf record`
    /// when it reads the samples for their build ids): the span a replay shows.
    pub sample_time: Option<(u64, u64)>,
    /// Tracepoint formats by tracepoint id (TRACING_DATA).
    pub formats: HashMap<u64, TraceFormat>,
    /// Things worth saying about the header (a section not read).
    pub notes: Vec<String>,
}

/// A perf.data file's header: the events and where the records are.
#[derive(Clone, Debug, Default)]
pub(crate) struct FileHeader {
    pub attrs: Vec<FileAttr>,
    pub data: Section,
    /// The file is shorter than its header says, or the data size is 0 (perf writes the
    /// sizes at the end): the records are read up to the end of the file.
    pub unfinished: bool,
    pub facts: Facts,
}

/// Read the header of a perf.data file of `len` bytes.
pub(crate) fn read_file_header<F: Read + Seek>(
    f: &mut F,
    len: u64,
) -> Result<FileHeader, HeaderError> {
    let mut magic = [0u8; 8];
    if len < 8 {
        return Err(HeaderError::Short(len));
    }
    f.read_exact(&mut magic)?;
    check_magic(&magic)?;
    if len < FILE_HEADER_SIZE {
        return Err(HeaderError::Short(len));
    }
    let mut h = [0u8; FILE_HEADER_SIZE as usize];
    h[..8].copy_from_slice(&magic);
    f.read_exact(&mut h[8..])?;
    let size = u64_at(&h, 8).unwrap_or(0);
    if size == PIPE_HEADER_SIZE {
        return Err(bad(
            "a recording in perf's pipe format (perf record -o -): give it on stdin, -i -",
        ));
    }
    if size != FILE_HEADER_SIZE {
        return Err(bad(format!(
            "its header says it is {size} bytes; perf's is {FILE_HEADER_SIZE}"
        )));
    }
    let attr_size = u64_at(&h, 16).unwrap_or(0) as usize;
    let attrs_sec = section(&h, 24).unwrap_or_default();
    let data = section(&h, 40).unwrap_or_default();
    let within = |s: Section| s.offset.checked_add(s.size).is_some_and(|e| e <= len);
    if !(ATTR_MIN + 16..=ATTR_MAX + 16).contains(&attr_size) {
        return Err(bad(format!(
            "its attribute size {attr_size} is not one perf writes"
        )));
    }
    if !within(attrs_sec) || attrs_sec.size % attr_size as u64 != 0 {
        return Err(bad(format!(
            "its attribute section ({} bytes at {}) is not inside the file ({len} bytes) or not whole attributes",
            attrs_sec.size, attrs_sec.offset
        )));
    }
    let n = (attrs_sec.size / attr_size as u64) as usize;
    if n == 0 || n > MAX_ATTRS {
        return Err(bad(format!("it lists {n} events")));
    }
    let mut raw = vec![0u8; attrs_sec.size as usize];
    f.seek(SeekFrom::Start(attrs_sec.offset))?;
    f.read_exact(&mut raw)?;
    let mut attrs = Vec::with_capacity(n);
    for rec in raw.chunks_exact(attr_size) {
        let (a, ids) = rec.split_at(attr_size - 16);
        let mut attr = FileAttr::parse(a).ok_or_else(|| bad("an event attribute is too short"))?;
        let ids = section(ids, 0).unwrap_or_default();
        let so_far: usize = attrs.iter().map(|a: &FileAttr| a.ids.len()).sum();
        if ids.size % 8 != 0 || so_far as u64 + ids.size / 8 > MAX_IDS as u64 || !within(ids) {
            return Err(bad(format!(
                "the ids of event {} ({} bytes at {}) are not inside the file",
                attrs.len(),
                ids.size,
                ids.offset
            )));
        }
        let mut b = vec![0u8; ids.size as usize];
        f.seek(SeekFrom::Start(ids.offset))?;
        f.read_exact(&mut b)?;
        attr.ids = b.chunks_exact(8).filter_map(|c| u64_at(c, 0)).collect();
        attrs.push(attr);
    }
    let mut header = FileHeader {
        attrs,
        data,
        ..FileHeader::default()
    };
    // perf writes the data size at the end of the recording: 0 while it records.
    let data_end = data.offset.checked_add(data.size);
    if data.offset < FILE_HEADER_SIZE || data.offset > len {
        return Err(bad(format!(
            "its data section starts at {}, outside the file ({len} bytes)",
            data.offset
        )));
    }
    if data.size == 0 || data_end.is_none_or(|e| e > len) {
        header.unfinished = true;
        header.data.size = len - data.offset;
        header.facts.notes.push(format!(
            "the recording is unfinished (perf still writing it, or cut short): its header says {} bytes of records, the file has {}; reading what is there, without its features",
            data.size,
            len - data.offset
        ));
        return Ok(header);
    }
    // The feature sections' table follows the data, one entry per bit set.
    let bits: Vec<u32> = (0..256u32)
        .filter(|&bit| {
            u64_at(&h, 72 + (bit as usize / 64) * 8).is_some_and(|w| w & (1 << (bit % 64)) != 0)
        })
        .collect();
    let table_at = data.offset + data.size;
    let mut table = vec![0u8; bits.len() * 16];
    if table_at + table.len() as u64 > len {
        header
            .facts
            .notes
            .push("the recording's feature table is cut short: its features are not read".into());
        return Ok(header);
    }
    f.seek(SeekFrom::Start(table_at))?;
    f.read_exact(&mut table)?;
    for (i, &bit) in bits.iter().enumerate() {
        let s = section(&table, i * 16).unwrap_or_default();
        if !within(s) || s.size > FEATURE_MAX {
            header.facts.notes.push(format!(
                "feature section {bit} ({} bytes at {}) is not read: outside the file or too large",
                s.size, s.offset
            ));
            continue;
        }
        let mut b = vec![0u8; s.size as usize];
        f.seek(SeekFrom::Start(s.offset))?;
        f.read_exact(&mut b)?;
        header.facts.feature(bit, &b);
    }
    header.facts.name_events(&mut header.attrs);
    Ok(header)
}

/// Check the magic: perf's little-endian one, or a clear error.
pub(crate) fn check_magic(magic: &[u8; 8]) -> Result<(), HeaderError> {
    match magic {
        m if m == MAGIC => Ok(()),
        m if m == MAGIC_BIG => Err(HeaderError::BigEndian),
        m => Err(HeaderError::Magic(crate::text::escape(m).to_string())),
    }
}

/// A `perf_header_string`: u32 length (padded), then the NUL-padded bytes.
fn string_at(b: &[u8], at: &mut usize) -> Option<String> {
    let n = u32_at(b, *at)? as usize;
    let s = b.get(*at + 4..(*at + 4).checked_add(n)?)?;
    *at += 4 + n;
    Some(String::from_utf8_lossy(crate::text::until_nul(s)).into_owned())
}

impl Facts {
    /// Learn one feature section (file mode) or HEADER_FEATURE record body (pipe mode).
    pub fn feature(&mut self, bit: u32, b: &[u8]) {
        let one = |b: &[u8]| string_at(b, &mut 0);
        match bit {
            FEAT_HOSTNAME => self.hostname = one(b),
            FEAT_OSRELEASE => self.osrelease = one(b),
            FEAT_VERSION => self.version = one(b),
            FEAT_ARCH => self.arch = one(b),
            FEAT_NRCPUS => self.nr_cpus = u32_at(b, 0).zip(u32_at(b, 4)),
            FEAT_CMDLINE => {
                let n = u32_at(b, 0).unwrap_or(0) as usize;
                let mut at = 4;
                self.cmdline = (0..n.min(4096))
                    .map_while(|_| string_at(b, &mut at))
                    .collect();
            }
            FEAT_EVENT_DESC => self.event_desc(b),
            FEAT_BUILD_ID => {
                let mut at = 0;
                while let Some(size) = b.get(at + 6..at + 8) {
                    let size = u16::from_le_bytes([size[0], size[1]]) as usize;
                    let Some(rec) = b.get(at..at + size).filter(|_| size >= 8) else {
                        break;
                    };
                    self.build_id_record(rec);
                    at += size;
                }
            }
            // u32 version, type (1: zstd), level, ratio, mmap_len.
            FEAT_COMPRESSED => self.compressed_mmap_len = u32_at(b, 16),
            FEAT_CLOCKID => self.clockid = u64_at(b, 0).map(|c| c as i32),
            FEAT_SAMPLE_TIME => {
                self.sample_time = u64_at(b, 0)
                    .zip(u64_at(b, 8))
                    .filter(|&(first, last)| first > 0 && first <= last)
            }
            FEAT_TRACING_DATA => self.tracing_data(b),
            _ => {}
        }
    }

    /// EVENT_DESC: u32 count, u32 attr size; per event: attr, u32 nr ids, name, ids.
    fn event_desc(&mut self, b: &[u8]) {
        let (Some(n), Some(sz)) = (u32_at(b, 0), u32_at(b, 4)) else {
            return;
        };
        let mut at = 8usize;
        for _ in 0..n.min(MAX_ATTRS as u32) {
            let Some(nr) = at.checked_add(sz as usize).and_then(|a| {
                at = a;
                u32_at(b, a)
            }) else {
                return;
            };
            at += 4;
            let Some(name) = string_at(b, &mut at) else {
                return;
            };
            for _ in 0..nr.min(MAX_IDS as u32) {
                let Some(id) = u64_at(b, at) else { return };
                at += 8;
                if self.names.len() < MAX_IDS {
                    self.names.insert(id, name.clone());
                }
            }
        }
    }

    /// A `perf_record_header_build_id` (the BUILD_ID feature's entries, and pipe-mode
    /// HEADER_BUILD_ID records): header, pid, 24 bytes of build id (20 and a size), name.
    pub(crate) fn build_id_record(&mut self, rec: &[u8]) {
        let misc = u16::from_le_bytes([
            rec.get(4).copied().unwrap_or(0),
            rec.get(5).copied().unwrap_or(0),
        ]);
        let Some(id) = rec.get(12..36) else { return };
        // PERF_RECORD_MISC_BUILD_ID_SIZE: the size byte is valid (else 20 bytes).
        let len = if misc & super::format::MISC_BUILD_ID_SIZE != 0 {
            (id[20] as usize).min(20)
        } else {
            20
        };
        let name = crate::text::until_nul(rec.get(36..).unwrap_or(&[]));
        if let Some(b) = BuildId::new(&id[..len]) {
            if self.build_ids.len() < 1 << 16 {
                self.build_ids.insert(name.into(), b);
            }
        }
    }

    /// Give the events their names (EVENT_DESC, else the tracepoint's format).
    pub(crate) fn name_events(&self, attrs: &mut [FileAttr]) {
        for a in attrs.iter_mut() {
            if a.name.is_none() {
                a.name = a.ids.iter().find_map(|id| self.names.get(id).cloned());
            }
            if a.name.is_none() && a.type_ == 2 {
                a.name = self.formats.get(&a.config).map(|f| f.name.clone());
            }
        }
    }

    /// TRACING_DATA (`tools/perf/util/trace-event-read.c`): the tracepoints' format files.
    fn tracing_data(&mut self, b: &[u8]) {
        self.tracing_raw = Some(b.to_vec());
        if let Some(formats) = parse_tracing_data(b) {
            for f in formats {
                if let Some(id) = f.text.lines().find_map(|l| l.trim().strip_prefix("ID:")) {
                    if let Ok(id) = id.trim().parse::<u64>() {
                        self.formats.insert(id, f);
                    }
                }
            }
        } else {
            self.notes.push(
                "the recording's tracing data could not be read: tracepoint fields are not decoded"
                    .into(),
            );
        }
    }
}

/// The event format files of a tracing data blob; `None` when it does not parse.
pub(crate) fn parse_tracing_data(b: &[u8]) -> Option<Vec<TraceFormat>> {
    let mut at = 0usize;
    if b.get(..10)? != super::format::TRACING_MAGIC {
        return None;
    }
    at += 10;
    let version_end = at + b.get(at..)?.iter().position(|&c| c == 0)?;
    at = version_end + 1;
    if *b.get(at)? != 0 {
        return None; // big-endian tracing data
    }
    at += 2; // endianness, long size
    at += 4; // page size
    for name in [&b"header_page\0"[..], b"header_event\0"] {
        if b.get(at..at + name.len())? != name {
            return None;
        }
        at += name.len();
        let n = usize::try_from(u64_at(b, at)?).ok()?;
        at = at.checked_add(8)?.checked_add(n)?;
    }
    // ftrace's own formats.
    let n = u32_at(b, at)?;
    at += 4;
    for _ in 0..n {
        let size = usize::try_from(u64_at(b, at)?).ok()?;
        at = at.checked_add(8)?.checked_add(size)?;
    }
    let systems = u32_at(b, at)?;
    at += 4;
    let mut out = Vec::new();
    for _ in 0..systems {
        let end = at + b.get(at..)?.iter().position(|&c| c == 0)?;
        let system = String::from_utf8_lossy(&b[at..end]).into_owned();
        at = end + 1;
        let count = u32_at(b, at)?;
        at += 4;
        for _ in 0..count {
            let size = usize::try_from(u64_at(b, at)?).ok()?;
            at += 8;
            let text = String::from_utf8_lossy(b.get(at..at.checked_add(size)?)?).into_owned();
            at += size;
            let name = text
                .lines()
                .find_map(|l| l.strip_prefix("name:"))
                .map(|n| n.trim().to_string())
                .unwrap_or_default();
            if out.len() < 1 << 16 {
                out.push(TraceFormat {
                    name: format!("{system}:{name}"),
                    text,
                });
            }
        }
    }
    Some(out)
}
