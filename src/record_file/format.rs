//! perf.data's numbers, in one place for the reader (`-i`) and the writer (`-o`): the magic,
//! the header sizes, the feature bits of `tools/perf/util/header.h` and perf's own record
//! types (`PERF_RECORD_HEADER_*` and the others `perf record` writes), and how perf pads a
//! string in a header (`struct perf_header_string`).

/// `PERFILE2` in a little-endian file.
pub const MAGIC: &[u8; 8] = b"PERFILE2";
/// `PERFILE2` as a big-endian file has it.
pub(crate) const MAGIC_BIG: &[u8; 8] = b"2ELIFREP";
/// Size of the file header perf writes (pipe mode: 16).
pub(crate) const FILE_HEADER_SIZE: u64 = 104;
pub(crate) const PIPE_HEADER_SIZE: u64 = 16;

/// Feature bits (`HEADER_*` in `tools/perf/util/header.h`).
pub const FEAT_TRACING_DATA: u32 = 1;
pub const FEAT_BUILD_ID: u32 = 2;
pub const FEAT_HOSTNAME: u32 = 3;
pub const FEAT_OSRELEASE: u32 = 4;
pub const FEAT_VERSION: u32 = 5;
pub const FEAT_ARCH: u32 = 6;
pub const FEAT_NRCPUS: u32 = 7;
pub const FEAT_CMDLINE: u32 = 11;
pub const FEAT_EVENT_DESC: u32 = 12;
pub const FEAT_SAMPLE_TIME: u32 = 21;
pub const FEAT_CLOCKID: u32 = 23;
pub const FEAT_COMPRESSED: u32 = 27;

/// perf's own record types (`PERF_RECORD_HEADER_*` and the others `perf record` writes).
pub(crate) const HEADER_ATTR: u32 = 64;
pub(crate) const HEADER_EVENT_TYPE: u32 = 65;
pub(crate) const HEADER_TRACING_DATA: u32 = 66;
pub(crate) const HEADER_BUILD_ID: u32 = 67;
pub(crate) const FINISHED_ROUND: u32 = 68;
pub(crate) const AUXTRACE: u32 = 71;
pub(crate) const EVENT_UPDATE: u32 = 78;
pub(crate) const HEADER_FEATURE: u32 = 80;
pub(crate) const COMPRESSED: u32 = 81;
pub(crate) const FINISHED_INIT: u32 = 82;
pub(crate) const COMPRESSED2: u32 = 83;

/// `PERF_RECORD_MISC_BUILD_ID_SIZE`: a build id record's size byte is valid.
pub(crate) const MISC_BUILD_ID_SIZE: u16 = 1 << 15;

/// perf pads header strings to this (`NAME_ALIGN`).
pub(crate) const NAME_ALIGN: usize = 64;

/// The first bytes of a tracing data blob (`tools/perf/util/trace-event-info.c`).
pub(crate) const TRACING_MAGIC: &[u8; 10] = b"\x17\x08\x44tracing";

/// A `perf_header_string` as perf writes one: u32 length (the string, its NUL, padded to
/// [`NAME_ALIGN`]), then the bytes, NUL-padded.
pub(crate) fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    let len = (s.len() + 1).div_ceil(NAME_ALIGN) * NAME_ALIGN;
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(s);
    out.resize(out.len() + len - s.len(), 0);
}
