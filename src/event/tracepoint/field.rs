//! One field of a tracepoint's record: its declaration as the format file gives it
//! ([`Field`], parsed by [`parse_field`]) and its value in a sample's RAW bytes ([`Value`]),
//! decoded with bounds checks everywhere.

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
pub(super) fn parse_field(line: &str) -> Option<Field> {
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

    /// This field's bytes in a sample's RAW bytes as they are (perf script hands arrays
    /// and unprintable strings to its scripts so); None when they lie outside the record.
    pub fn raw_bytes<'a>(&self, raw: &'a [u8]) -> Option<&'a [u8]> {
        self.bytes(raw)
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
    pub(crate) fn write_elements(&self, out: &mut Vec<u8>) {
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
