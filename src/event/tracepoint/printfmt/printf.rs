//! The format string of a `print fmt` and its conversions, written as C's printf (and the
//! kernel's vsnprintf, for `%ps`/`%pS`) writes them, with widths and outputs bounded.

use super::expr::{Val, truncate};
use super::{KernelSymbols, MAX_OUT, MAX_WIDTH};

/// How a `%p` conversion shows its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ptr {
    /// `%p`: the address.
    Plain,
    /// `%ps`/`%pf`: the function's name; `%pS`/`%pF`/`%pB`: name and offset.
    Sym { offset: bool },
    /// Any other extension (`%pI4`, `%pU`, ...): not rendered here.
    Other,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Conv {
    Signed,
    Unsigned,
    Hex { upper: bool },
    Octal,
    Char,
    Str,
    Ptr(Ptr),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Spec {
    pub(super) left: bool,
    pub(super) zero: bool,
    pub(super) plus: bool,
    pub(super) space: bool,
    pub(super) alt: bool,
    pub(super) width: usize,
    pub(super) prec: Option<usize>,
    /// Bytes of the integer argument (`hh` 1, `h` 2, none 4, `l`/`ll`/`z` 8).
    pub(super) size: u8,
    pub(super) conv: Conv,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Piece {
    Lit(Box<[u8]>),
    /// A conversion of argument `arg` (`None`: the format asks for more arguments than it has).
    Conv(Spec, Option<usize>),
}

pub(super) fn parse_format(f: &[u8]) -> Option<Vec<Piece>> {
    let mut pieces = Vec::new();
    let mut lit = Vec::new();
    let mut i = 0;
    let mut next_arg = 0usize;
    while i < f.len() {
        if f[i] != b'%' {
            lit.push(f[i]);
            i += 1;
            continue;
        }
        i += 1;
        if f.get(i) == Some(&b'%') {
            lit.push(b'%');
            i += 1;
            continue;
        }
        let mut s = Spec {
            left: false,
            zero: false,
            plus: false,
            space: false,
            alt: false,
            width: 0,
            prec: None,
            size: 4,
            conv: Conv::Signed,
        };
        while let Some(&c) = f.get(i) {
            match c {
                b'-' => s.left = true,
                b'0' => s.zero = true,
                b'+' => s.plus = true,
                b' ' => s.space = true,
                b'#' => s.alt = true,
                _ => break,
            }
            i += 1;
        }
        while let Some(&c) = f.get(i).filter(|c| c.is_ascii_digit()) {
            s.width = (s.width * 10 + (c - b'0') as usize).min(MAX_WIDTH);
            i += 1;
        }
        if f.get(i) == Some(&b'.') {
            i += 1;
            let mut p = 0usize;
            while let Some(&c) = f.get(i).filter(|c| c.is_ascii_digit()) {
                p = (p * 10 + (c - b'0') as usize).min(MAX_OUT);
                i += 1;
            }
            s.prec = Some(p);
        }
        let mut h = 0;
        while let Some(&c) = f.get(i) {
            match c {
                b'h' => {
                    h += 1;
                    s.size = if h >= 2 { 1 } else { 2 };
                }
                b'l' | b'L' | b'z' | b'j' | b't' | b'q' => s.size = 8,
                _ => break,
            }
            i += 1;
        }
        let c = *f.get(i)?;
        i += 1;
        s.conv = match c {
            b'd' | b'i' => Conv::Signed,
            b'u' => Conv::Unsigned,
            b'x' => Conv::Hex { upper: false },
            b'X' => Conv::Hex { upper: true },
            b'o' => Conv::Octal,
            b'c' => Conv::Char,
            b's' => Conv::Str,
            b'p' => {
                let ext = f.get(i).copied().filter(u8::is_ascii_alphanumeric);
                let p = match ext {
                    None => Ptr::Plain,
                    Some(b's' | b'f') => Ptr::Sym { offset: false },
                    Some(b'S' | b'F' | b'B') => Ptr::Sym { offset: true },
                    Some(_) => Ptr::Other,
                };
                if ext.is_some() {
                    i += 1;
                    // The rest of an extension (`%pI4`, `%pISpc`): letters and digits.
                    while p == Ptr::Other && f.get(i).is_some_and(u8::is_ascii_alphanumeric) {
                        i += 1;
                    }
                }
                s.size = 8;
                Conv::Ptr(p)
            }
            _ => return None,
        };
        if !lit.is_empty() {
            pieces.push(Piece::Lit(std::mem::take(&mut lit).into_boxed_slice()));
        }
        pieces.push(Piece::Conv(s, Some(next_arg)));
        next_arg += 1;
    }
    if !lit.is_empty() {
        pieces.push(Piece::Lit(lit.into_boxed_slice()));
    }
    Some(pieces)
}

pub(super) fn pad(spec: &Spec, body: &[u8], out: &mut Vec<u8>) {
    let fill = spec.width.saturating_sub(body.len());
    if spec.left {
        out.extend_from_slice(body);
        out.extend(std::iter::repeat_n(b' ', fill));
    } else {
        out.extend(std::iter::repeat_n(b' ', fill));
        out.extend_from_slice(body);
    }
}

/// One conversion, as C's printf (and the kernel's vsnprintf) writes it.
pub(super) fn convert(
    spec: &Spec,
    v: &Val<'_>,
    syms: &dyn KernelSymbols,
    out: &mut Vec<u8>,
) -> bool {
    match (spec.conv, v) {
        (Conv::Str, Val::Str(s)) => {
            let s = &s[..s.len().min(spec.prec.unwrap_or(MAX_OUT)).min(MAX_OUT)];
            let s = crate::text::until_nul(s);
            pad(spec, s, out);
            true
        }
        (Conv::Char, Val::Int(c)) => {
            pad(spec, &[*c as u8], out);
            true
        }
        (Conv::Ptr(Ptr::Sym { offset }), Val::Int(addr)) => {
            let text = match syms.symbol(*addr) {
                Some((name, off)) if offset => format!("{name}+{off:#x}"),
                Some((name, _)) => name.to_string(),
                None => format!("{addr:#x}"),
            };
            let text = text.as_bytes();
            pad(spec, &text[..text.len().min(MAX_OUT)], out);
            true
        }
        (Conv::Ptr(Ptr::Plain), Val::Int(addr)) => {
            let text = if *addr == 0 {
                "(nil)".to_string()
            } else {
                format!("{addr:#x}")
            };
            pad(spec, text.as_bytes(), out);
            true
        }
        (Conv::Signed | Conv::Unsigned | Conv::Hex { .. } | Conv::Octal, Val::Int(v)) => {
            let v = truncate(*v, spec.size, spec.conv == Conv::Signed);
            let (neg, mag) = if spec.conv == Conv::Signed && (v as i64) < 0 {
                (true, (v as i64).unsigned_abs())
            } else {
                (false, v)
            };
            let mut digits = match spec.conv {
                Conv::Hex { upper: false } => format!("{mag:x}"),
                Conv::Hex { upper: true } => format!("{mag:X}"),
                Conv::Octal => format!("{mag:o}"),
                _ => mag.to_string(),
            };
            if let Some(p) = spec.prec {
                if p == 0 && mag == 0 {
                    digits.clear();
                }
                while digits.len() < p.min(MAX_WIDTH) {
                    digits.insert(0, '0');
                }
            }
            let sign = if neg {
                "-"
            } else if spec.conv == Conv::Signed && spec.plus {
                "+"
            } else if spec.conv == Conv::Signed && spec.space {
                " "
            } else {
                ""
            };
            let prefix = match spec.conv {
                Conv::Hex { upper } if spec.alt && mag != 0 => {
                    if upper {
                        "0X"
                    } else {
                        "0x"
                    }
                }
                Conv::Octal if spec.alt && !digits.starts_with('0') => "0",
                _ => "",
            };
            let len = sign.len() + prefix.len() + digits.len();
            if spec.zero && !spec.left && spec.prec.is_none() && spec.width > len {
                out.extend_from_slice(sign.as_bytes());
                out.extend_from_slice(prefix.as_bytes());
                out.extend(std::iter::repeat_n(b'0', spec.width - len));
                out.extend_from_slice(digits.as_bytes());
            } else {
                let body = format!("{sign}{prefix}{digits}");
                pad(spec, body.as_bytes(), out);
            }
            true
        }
        _ => false,
    }
}
