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

use std::fmt;

/// How a field's bytes are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldType {
    /// An integer of 1, 2, 4 or 8 bytes. `hex` for pointers (shown as addresses).
    Int { size: u8, signed: bool, hex: bool },
    /// Text: `char` arrays (fixed, `__data_loc`, `__rel_loc`), up to the first NUL.
    Str,
    /// An array of integers of `elem` bytes (fixed or dynamic); also any other blob, as bytes.
    Array { elem: u8, signed: bool },
}

/// Where a field's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// `size` bytes at `offset`.
    Fixed { offset: u16, size: u16 },
    /// A `__data_loc` (or, with `rel`, `__rel_loc`) descriptor of `size` (2 or 4) bytes at
    /// `offset`.
    Dynamic { offset: u16, size: u8, rel: bool },
    /// Everything from `offset` to the end of the record (`size:0`).
    Rest { offset: u16 },
}

/// One field of a tracepoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// The field's own name, as the format file (and perf) spell it. Where it is the name of
    /// one of the record's own members in some output, that output says how it keeps both
    /// (see `crate::names`).
    pub name: Box<str>,
    /// The C declaration as the kernel wrote it, e.g. `__data_loc char[] filename`.
    pub decl: Box<str>,
    /// A `common_*` field (type, flags, preempt count, pid), shown only when asked for.
    pub common: bool,
    pub ty: FieldType,
    pub loc: Location,
}

/// A parsed format file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    /// `SYS:NAME`.
    pub name: Box<str>,
    /// The tracepoint id (`ID:`), which is the perf_event_attr config.
    pub id: u64,
    pub fields: Box<[Field]>,
    /// The `print fmt` line, when it could be read: what turns some fields into text.
    pub print: Option<super::printfmt::PrintFmt>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot read the format of tracepoint '{tracepoint}': {reason}")]
pub struct FormatError {
    pub tracepoint: String,
    pub reason: String,
}

fn is_ident(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// The name and the array part of a declaration: `char prev_comm[16]` gives
/// (`char`, `prev_comm`, Some("16")); `__data_loc char[] filename` gives
/// (`__data_loc char[]`, `filename`, None).
fn split_decl(decl: &str) -> Option<(&str, &str, Option<&str>)> {
    let decl = decl.trim();
    let (head, count) = match decl.strip_suffix(']') {
        Some(rest) => {
            let open = rest.rfind('[')?;
            (&rest[..open], Some(rest[open + 1..].trim()))
        }
        None => (decl, None),
    };
    let head = head.trim_end();
    // The name is the trailing run of identifier characters (ASCII: any other character,
    // multi-byte ones included, ends it).
    let start = head
        .char_indices()
        .rev()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let (ty, name) = head.split_at(start);
    if !is_ident(name) || ty.trim().is_empty() {
        return None;
    }
    Some((ty.trim(), name, count))
}

/// Parse one `field:DECL; offset:N; size:N; signed:N;` line.
fn parse_field(line: &str) -> Option<Field> {
    let (mut decl, mut offset, mut size, mut signed) = (None, None, None, None);
    for part in line.split(';') {
        let Some((k, v)) = part.split_once(':') else {
            continue;
        };
        let v = v.trim();
        match k.trim() {
            "field" | "field special" => decl = Some(v),
            "offset" => offset = v.parse::<u16>().ok(),
            "size" => size = v.parse::<u16>().ok(),
            "signed" => signed = Some(v == "1"),
            _ => {}
        }
    }
    let (decl, offset, size) = (decl?, offset?, size?);
    let (ty, name, count) = split_decl(decl)?;
    let signed = signed.unwrap_or(false);
    let words: Vec<&str> = ty
        .split(|c: char| c.is_whitespace() || c == '*')
        .filter(|w| !w.is_empty() && !matches!(*w, "const" | "volatile" | "struct"))
        .collect();
    let data_loc = words.contains(&"__data_loc");
    let rel_loc = words.contains(&"__rel_loc");
    let pointer = ty.contains('*');
    // The element type, without the location keyword and the `[]` of dynamic arrays.
    let base: Vec<&str> = words
        .iter()
        .map(|w| w.trim_end_matches("[]"))
        .filter(|w| !w.is_empty() && *w != "__data_loc" && *w != "__rel_loc")
        .collect();
    let is_char = !pointer && base == ["char"];
    let elem = if pointer {
        8
    } else {
        elem_size(&base).unwrap_or(1)
    };
    let dynamic = data_loc || rel_loc;
    let loc = if dynamic {
        if size != 2 && size != 4 {
            return None;
        }
        Location::Dynamic {
            offset,
            size: size as u8,
            rel: rel_loc,
        }
    } else if size == 0 {
        Location::Rest { offset }
    } else {
        offset.checked_add(size)?;
        Location::Fixed { offset, size }
    };
    let ty = if is_char && (dynamic || count.is_some() || size == 0) {
        FieldType::Str
    } else if dynamic || count.is_some() || size == 0 {
        let elem = match count.and_then(|c| c.parse::<u16>().ok()) {
            // A fixed array says how many elements its size holds.
            Some(n) if n > 0 && size % n == 0 && matches!(size / n, 1 | 2 | 4 | 8) => {
                (size / n) as u8
            }
            Some(_) => 1,
            None => elem,
        };
        FieldType::Array { elem, signed }
    } else if matches!(size, 1 | 2 | 4 | 8) {
        FieldType::Int {
            size: size as u8,
            signed: signed && !pointer,
            hex: pointer,
        }
    } else {
        // A struct or an odd size: its bytes.
        FieldType::Array {
            elem: 1,
            signed: false,
        }
    };
    Some(Field {
        common: name.starts_with("common_"),
        name: name.into(),
        decl: decl.into(),
        ty,
        loc,
    })
}

/// The element size named by a C base type, when it is a known one.
fn elem_size(base: &[&str]) -> Option<u8> {
    let last = *base.last()?;
    Some(match last {
        "char" | "u8" | "s8" | "__u8" | "__s8" | "uint8_t" | "int8_t" | "bool" | "_Bool" => 1,
        "short" | "u16" | "s16" | "__u16" | "__s16" | "uint16_t" | "int16_t" => 2,
        "u32" | "s32" | "__u32" | "__s32" | "uint32_t" | "int32_t" | "pid_t" | "uid_t"
        | "gid_t" => 4,
        "u64" | "s64" | "__u64" | "__s64" | "uint64_t" | "int64_t" | "size_t" | "loff_t" => 8,
        "long" => {
            if base.iter().filter(|w| **w == "long").count() >= 2 {
                8
            } else {
                std::mem::size_of::<libc::c_long>() as u8
            }
        }
        "int" | "unsigned" | "signed" => {
            if base.contains(&"long") {
                8
            } else if base.contains(&"short") {
                2
            } else {
                4
            }
        }
        _ => return None,
    })
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
        let print = print.and_then(|p| super::printfmt::PrintFmt::parse(p, &fields));
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

/// A decoded field value, borrowing from the RAW bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    Int(i64),
    UInt(u64),
    /// A pointer: shown as an address.
    Hex(u64),
    /// Text, as the kernel wrote it (untrusted: escape before showing).
    Str(&'a [u8]),
    /// Integers of `elem` bytes each, in native byte order.
    Array {
        elem: u8,
        signed: bool,
        bytes: &'a [u8],
    },
    /// The field lies outside the record (a malformed or truncated record).
    Missing,
}

#[inline]
fn int_at(b: &[u8], size: u8, signed: bool) -> Option<(i64, u64)> {
    Some(match size {
        1 => {
            let v = *b.first()?;
            (v as i8 as i64, v as u64)
        }
        2 => {
            let v = u16::from_ne_bytes(b.get(..2)?.try_into().ok()?);
            (v as i16 as i64, v as u64)
        }
        4 => {
            let v = u32::from_ne_bytes(b.get(..4)?.try_into().ok()?);
            (v as i32 as i64, v as u64)
        }
        8 => {
            let v = u64::from_ne_bytes(b.get(..8)?.try_into().ok()?);
            (v as i64, v)
        }
        _ => return None,
    })
    .map(|(s, u)| if signed { (s, u) } else { (u as i64, u) })
}

impl Field {
    /// The bytes of this field in `raw`, if they lie inside it.
    #[inline]
    fn bytes<'a>(&self, raw: &'a [u8]) -> Option<&'a [u8]> {
        match self.loc {
            Location::Fixed { offset, size } => {
                raw.get(offset as usize..offset as usize + size as usize)
            }
            Location::Rest { offset } => raw.get(offset as usize..),
            Location::Dynamic { offset, size, rel } => {
                let at = offset as usize;
                let base = if rel { at + size as usize } else { 0 };
                if size == 4 {
                    let d = u32::from_ne_bytes(raw.get(at..at + 4)?.try_into().ok()?);
                    let start = base + (d & 0xffff) as usize;
                    raw.get(start..start + (d >> 16) as usize)
                } else {
                    let d = u16::from_ne_bytes(raw.get(at..at + 2)?.try_into().ok()?);
                    raw.get(base + d as usize..)
                }
            }
        }
    }

    /// Decode this field from a sample's RAW bytes.
    #[inline]
    pub fn value<'a>(&self, raw: &'a [u8]) -> Value<'a> {
        let Some(b) = self.bytes(raw) else {
            return Value::Missing;
        };
        match self.ty {
            FieldType::Int { size, signed, hex } => match int_at(b, size, signed) {
                Some((_, u)) if hex => Value::Hex(u),
                Some((s, _)) if signed => Value::Int(s),
                Some((_, u)) => Value::UInt(u),
                None => Value::Missing,
            },
            FieldType::Str => Value::Str(crate::text::until_nul(b)),
            FieldType::Array { elem, signed } => Value::Array {
                elem,
                signed,
                bytes: &b[..b.len() - b.len() % elem.max(1) as usize],
            },
        }
    }
}

impl<'a> Value<'a> {
    /// The elements of an array as integers (signed ones sign-extended).
    pub fn elements(&self) -> impl Iterator<Item = i128> + 'a {
        let (elem, signed, bytes) = match *self {
            Value::Array {
                elem,
                signed,
                bytes,
            } => (elem.max(1), signed, bytes),
            _ => (1, false, &[][..]),
        };
        bytes
            .chunks_exact(elem as usize)
            .map(move |c| match int_at(c, elem, signed) {
                Some((s, _)) if signed => s as i128,
                Some((_, u)) => u as i128,
                None => 0,
            })
    }

    /// The value as a number, for numeric filter terms.
    pub fn as_i128(&self) -> Option<i128> {
        match *self {
            Value::Int(v) => Some(v as i128),
            Value::UInt(v) | Value::Hex(v) => Some(v as i128),
            _ => None,
        }
    }

    /// Append the value as `--plain` shows it: numbers in decimal, pointers as `0x...`,
    /// text escaped (and quoted when it holds a separator of the line), arrays as
    /// `[1,2,3]`, a missing field as `?`.
    pub fn write_plain(&self, out: &mut Vec<u8>) {
        match *self {
            Value::Int(v) => out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes()),
            Value::UInt(v) => out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes()),
            Value::Hex(v) => crate::text::push_c_hex(out, v),
            Value::Str(s) => crate::text::push_plain_value(s, out),
            Value::Array { .. } => self.write_elements(out),
            Value::Missing => out.push(b'?'),
        }
    }

    /// Append an array's elements as `[1,2,3]` (decimal, no spaces: both `--plain` and
    /// JSON); nothing for other values.
    pub fn write_elements(&self, out: &mut Vec<u8>) {
        if !matches!(self, Value::Array { .. }) {
            return;
        }
        out.push(b'[');
        for (i, e) in self.elements().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(itoa::Buffer::new().format(e).as_bytes());
        }
        out.push(b']');
    }
}

impl fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut b = Vec::new();
        self.write_plain(&mut b);
        f.write_str(&String::from_utf8_lossy(&b))
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
