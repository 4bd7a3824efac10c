//! Tracepoint formats: the `format` file of a tracepoint, parsed once, and the decoding of a
//! sample's PERF_SAMPLE_RAW bytes into named, typed fields.
//!
//! A format file (`/sys/kernel/tracing/events/SYS/NAME/format`) lists each field of the
//! record the tracepoint writes, as a C declaration with its offset, size and signedness:
//!
//! ```text
//! name: sched_process_exec
//! ID: 365
//! format:
//!     field:unsigned short common_type;  offset:0;  size:2;  signed:0;
//!     ...
//!     field:__data_loc char[] filename;  offset:8;  size:4;  signed:0;
//!     field:pid_t pid;                   offset:12; size:4;  signed:1;
//! ```
//!
//! Offsets are from the start of the RAW data. `__data_loc` fields hold `(len << 16) | offset`
//! of their data elsewhere in the record; `__rel_loc` fields the same with the offset counted
//! from the end of the field itself. The RAW bytes come from the kernel ring and are decoded
//! with bounds checks everywhere: a field that does not fit is [`Value::Missing`], never a
//! panic.

mod field;
pub mod printfmt;

pub use field::Value;
use field::parse_field;
pub(crate) use field::{Field, FieldType};
use printfmt::PrintFmt;

/// A parsed format file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    /// `SYS:NAME`.
    pub name: Box<str>,
    /// The tracepoint id (`ID:`), which is the perf_event_attr config.
    pub id: u64,
    pub fields: Box<[Field]>,
    /// The `print fmt` line, when it could be read: what turns some fields into text.
    pub print: Option<PrintFmt>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot read the format of tracepoint '{tracepoint}': {reason}")]
pub struct FormatError {
    pub tracepoint: String,
    pub reason: String,
}

impl Format {
    /// Parse the text of a format file for the tracepoint `sys:name`. Field lines that do not
    /// parse are left out (the others keep their offsets); a file without `ID:` or without a
    /// single field is an error.
    pub fn parse(tracepoint: &str, text: &str) -> Result<Format, FormatError> {
        let err = |reason: &str| FormatError {
            tracepoint: tracepoint.to_string(),
            reason: reason.to_string(),
        };
        let mut id = None;
        let mut fields = Vec::new();
        let mut in_format = false;
        let mut print = None;
        for line in text.lines() {
            let t = line.trim();
            if let Some(v) = t.strip_prefix("ID:") {
                id = Some(
                    v.trim()
                        .parse::<u64>()
                        .map_err(|_| err("its ID is not a number"))?,
                );
            } else if t == "format:" {
                in_format = true;
            } else if let Some(p) = t.strip_prefix("print fmt:") {
                in_format = false;
                print = Some(p.trim());
            } else if in_format && (t.starts_with("field:") || t.starts_with("field special:")) {
                if let Some(f) = parse_field(t) {
                    if !fields.iter().any(|g: &Field| g.name == f.name) {
                        fields.push(f);
                    }
                }
            }
        }
        let id = id.ok_or_else(|| err("no ID line"))?;
        if fields.is_empty() {
            return Err(err("no field could be read"));
        }
        let print = print.and_then(|p| PrintFmt::parse(p, &fields));
        Ok(Format {
            name: tracepoint.into(),
            id,
            fields: fields.into(),
            print,
        })
    }

    /// The field named `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| &*f.name == name)
    }

    /// The fields shown by default: all but `common_*` unless `common` is set.
    pub fn shown(&self, common: bool) -> impl Iterator<Item = &Field> {
        self.fields.iter().filter(move |f| common || !f.common)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::tracepoints::*;

    fn fields(f: &Format, raw: &[u8], common: bool) -> Vec<(String, String)> {
        f.shown(common)
            .map(|x| (x.name.to_string(), x.value(raw).to_string()))
            .collect()
    }

    #[test]
    fn sched_switch_fields() {
        let f = Format::parse("sched:sched_switch", SCHED_SWITCH).unwrap();
        assert_eq!(f.id, 372);
        assert_eq!(f.fields.len(), 11);
        let raw = sched_switch(b"bash", 42, 1, b"swapper/1", 0);
        assert_eq!(
            fields(&f, &raw, false),
            [
                ("prev_comm", "bash"),
                ("prev_pid", "42"),
                ("prev_prio", "120"),
                ("prev_state", "1"),
                ("next_comm", "swapper/1"),
                ("next_pid", "0"),
                ("next_prio", "120")
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
        let all = fields(&f, &raw, true);
        assert_eq!(all[0], ("common_type".into(), "372".into()));
        assert_eq!(all[3], ("common_pid".into(), "42".into()));
        assert_eq!(f.field("prev_pid").unwrap().value(&raw), Value::Int(42));
    }

    #[test]
    fn data_loc_string() {
        let f = Format::parse("sched:sched_process_exec", SCHED_PROCESS_EXEC).unwrap();
        let raw = sched_process_exec(b"/usr/bin/true", 4242, 4241);
        assert_eq!(
            fields(&f, &raw, false),
            [
                ("filename", "/usr/bin/true"),
                ("pid", "4242"),
                ("old_pid", "4241")
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
        assert_eq!(
            f.field("filename").unwrap().ty,
            FieldType::Str,
            "__data_loc char[] is text"
        );
    }

    #[test]
    fn rel_loc_counts_from_the_end_of_the_field() {
        let f = Format::parse(
            "t:rel",
            "ID: 9\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:__rel_loc char[] msg;\toffset:8;\tsize:4;\tsigned:0;\n",
        )
        .unwrap();
        let mut raw = vec![0u8; 8];
        // Data right after the field: relative offset 0, length 3.
        raw.extend_from_slice(&(3u32 << 16).to_ne_bytes());
        raw.extend_from_slice(b"hi\0");
        assert_eq!(f.field("msg").unwrap().value(&raw), Value::Str(b"hi"));
        // A two-byte __data_loc: offset only, the text runs to its NUL.
        let f = Format::parse(
            "t:dl2",
            "ID: 9\nformat:\n\tfield:__data_loc char[] s;\toffset:0;\tsize:2;\tsigned:0;\n",
        )
        .unwrap();
        let mut raw = 4u16.to_ne_bytes().to_vec();
        raw.extend_from_slice(b"\0\0ok\0junk");
        assert_eq!(f.field("s").unwrap().value(&raw), Value::Str(b"ok"));
    }

    #[test]
    fn signed_unsigned_arrays_pointers() {
        let text = "name: x\nID: 7\nformat:\n\
            \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
            \tfield:int neg;\toffset:8;\tsize:4;\tsigned:1;\n\
            \tfield:unsigned int big;\toffset:12;\tsize:4;\tsigned:0;\n\
            \tfield:s8 tiny;\toffset:16;\tsize:1;\tsigned:1;\n\
            \tfield:u16 ports[3];\toffset:18;\tsize:6;\tsigned:0;\n\
            \tfield:const void * ptr;\toffset:24;\tsize:8;\tsigned:0;\n\
            \tfield:__data_loc s32[] vals;\toffset:32;\tsize:4;\tsigned:1;\n\
            \tfield:u8 type;\toffset:36;\tsize:1;\tsigned:0;\n\
            \tfield:struct foo blob;\toffset:37;\tsize:3;\tsigned:0;\n";
        let f = Format::parse("x:x", text).unwrap();
        let mut raw = vec![0u8; 40];
        raw[8..12].copy_from_slice(&(-5i32).to_ne_bytes());
        raw[12..16].copy_from_slice(&u32::MAX.to_ne_bytes());
        raw[16] = 0xff;
        for (i, v) in [80u16, 443, 65535].iter().enumerate() {
            raw[18 + 2 * i..20 + 2 * i].copy_from_slice(&v.to_ne_bytes());
        }
        raw[24..32].copy_from_slice(&0xffff_8880_0000_1000u64.to_ne_bytes());
        raw[32..36].copy_from_slice(&((8u32 << 16) | 40).to_ne_bytes());
        raw[36] = 3;
        raw[37..40].copy_from_slice(&[1, 2, 3]);
        raw.extend_from_slice(&(-1i32).to_ne_bytes());
        raw.extend_from_slice(&7i32.to_ne_bytes());
        let got = fields(&f, &raw, false);
        let want = [
            ("neg", "-5"),
            ("big", "4294967295"),
            ("tiny", "-1"),
            ("ports", "[80,443,65535]"),
            ("ptr", "0xffff888000001000"),
            ("vals", "[-1,7]"),
            ("type", "3"),
            ("blob", "[1,2,3]"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()));
        assert_eq!(got, want);
    }

    #[test]
    fn fields_outside_the_record_are_missing() {
        let f = Format::parse("sched:sched_process_exec", SCHED_PROCESS_EXEC).unwrap();
        let raw = sched_process_exec(b"/bin/true", 1, 1);
        for n in 0..raw.len() {
            for field in f.fields.iter() {
                let _ = field.value(&raw[..n]).to_string();
            }
        }
        assert_eq!(f.field("pid").unwrap().value(&raw[..12]), Value::Missing);
        // A data_loc pointing past the end.
        let mut bad = raw.clone();
        bad[8..12].copy_from_slice(&((200u32 << 16) | 20).to_ne_bytes());
        assert_eq!(f.field("filename").unwrap().value(&bad), Value::Missing);
    }

    #[test]
    fn malformed_files() {
        let e = Format::parse(
            "a:b",
            "name: b\nformat:\n\tfield:int x;\toffset:8;\tsize:4;\n",
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("'a:b'") && e.to_string().contains("ID"),
            "{e}"
        );
        assert!(Format::parse("a:b", "ID: x\n").is_err());
        assert!(Format::parse("a:b", "ID: 3\nformat:\n\tgarbage\n").is_err());
        assert!(Format::parse("a:b", "").is_err());
        // Lines that do not parse are left out; the others are kept.
        let f = Format::parse(
            "a:b",
            "ID: 3\nformat:\n\tfield:int;\toffset:8;\tsize:4;\n\tfield:int ok;\toffset:x;\tsize:4;\n\tfield:int good;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:int huge;\toffset:65535;\tsize:4;\tsigned:1;\n\tfield:__data_loc char[] odd;\toffset:0;\tsize:3;\n",
        )
        .unwrap();
        assert_eq!(
            f.fields.iter().map(|f| &*f.name).collect::<Vec<_>>(),
            ["good"]
        );
        // Found by the fuzz target: a multi-byte character before the name.
        let f = Format::parse(
            "a:b",
            "ID: 3\nformat:\n\tfield:int \u{fffd}x;\toffset:0;\tsize:4;\n\tfield:int y\u{fffd};\toffset:0;\tsize:4;\n",
        )
        .unwrap();
        assert_eq!(f.fields.iter().map(|f| &*f.name).collect::<Vec<_>>(), ["x"]);
    }

    #[test]
    fn hostile_strings_are_escaped() {
        let f = Format::parse("sched:sched_process_exec", SCHED_PROCESS_EXEC).unwrap();
        let raw = sched_process_exec(b"/tmp/\x1b[2J\nx", 1, 1);
        let s = f.field("filename").unwrap().value(&raw).to_string();
        assert_eq!(s, "/tmp/\\x1b[2J\\nx");
    }
}
