//! Untrusted text from the monitored system.
//!
//! Any process can name itself (`prctl(PR_SET_NAME)`) and any file name can hold any byte but
//! `/` and NUL. perfwatch runs as root and writes these names to an operator's terminal, so
//! nothing from a record is ever written raw: [`Untrusted`] escapes every byte or character
//! that could move the cursor, change colours, reorder text or break a line.
//!
//! The escaped form is unambiguous (a backslash in the input becomes `\\`), valid UTF-8, and
//! one line. The same form goes into `--plain`, `--json` and the TUI, so that a name reads the
//! same everywhere and can be grepped for.

use std::fmt::{self, Write};

/// Bytes from the monitored system, displayed escaped.
#[derive(Clone, Copy)]
pub(crate) struct Untrusted<'a>(pub &'a [u8]);

impl fmt::Display for Untrusted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        escape_into(self.0, f)
    }
}

impl fmt::Debug for Untrusted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}

/// The escaped form of `bytes` as an owned string.
pub fn escape(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    // Writing into a String cannot fail.
    let _ = escape_into(bytes, &mut s);
    s
}

/// The escaped form of a multi-line text (a Python traceback): each line escaped, the lines
/// still separated by newlines, so that it reads as a traceback and carries nothing raw.
pub fn escape_lines(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            s.push('\n');
        }
        let _ = escape_into(line.as_bytes(), &mut s);
    }
    s
}

/// Append the escaped form of `bytes` to a byte buffer (the fast path of `--plain`).
pub(crate) fn escape_to(bytes: &[u8], out: &mut Vec<u8>) {
    if bytes.iter().all(|&b| plain_ascii(b)) {
        out.extend_from_slice(bytes);
    } else {
        out.extend_from_slice(escape(bytes).as_bytes());
    }
}

/// The length of the escape at the start of `escaped` (which starts with a backslash):
/// `\\`, `\n`, `\xNN`, `\u{...}` are each one unit of a value, never a separator.
pub fn escape_len(escaped: &[u8]) -> usize {
    match escaped.get(1) {
        Some(b'x') => 4.min(escaped.len()),
        Some(b'u') if escaped.get(2) == Some(&b'{') => escaped
            .iter()
            .position(|&b| b == b'}')
            .map_or(escaped.len(), |i| i + 1),
        Some(_) => 2,
        None => 1,
    }
}

/// True when an (already escaped) `--plain` value must be quoted to read one way only: it
/// holds a separator of the line (`,`, `{`, `}`, a call chain's `<-`) or a quote outside
/// an escape (the braces of `\u{202e}` are part of it), or it begins or ends with a space.
pub fn needs_quotes(escaped: &[u8]) -> bool {
    escaped.first() == Some(&b' ') || escaped.last() == Some(&b' ') || holds_separator(escaped)
}

/// True when already escaped text holds a separator of a `--plain` line or a quote outside
/// an escape ([`needs_quotes`] without its look at the ends).
pub fn holds_separator(escaped: &[u8]) -> bool {
    let mut i = 0;
    while i < escaped.len() {
        match escaped[i] {
            b'\\' => {
                i += escape_len(&escaped[i..]);
                continue;
            }
            b',' | b'{' | b'}' | b'"' => return true,
            b'<' if escaped.get(i + 1) == Some(&b'-') => return true,
            _ => {}
        }
        i += 1;
    }
    false
}

/// Append an already escaped value to a `--plain` line: as it is, or, when it
/// [`needs_quotes`], in double quotes with each `"` written `\"` (a backslash is already
/// `\\` in escaped text). So a value never holds a separator outside quotes and escapes,
/// and a line splits one way only: at `, `, `{` and `}` outside double quotes and escapes.
pub fn push_plain_escaped(escaped: &[u8], out: &mut Vec<u8>) {
    if !needs_quotes(escaped) {
        out.extend_from_slice(escaped);
        return;
    }
    out.push(b'"');
    push_quote_escaped(escaped, out);
    out.push(b'"');
}

/// Append `text` with each `"` written `\"` (the inside of a quoted `--plain` value), a slice
/// at a time.
pub(crate) fn push_quote_escaped(text: &[u8], out: &mut Vec<u8>) {
    // Most values hold no quote: one word-at-a-time search (core's memchr), one copy.
    if !text.contains(&b'"') {
        out.extend_from_slice(text);
        return;
    }
    let mut parts = text.split(|&b| b == b'"');
    if let Some(first) = parts.next() {
        out.extend_from_slice(first);
    }
    for part in parts {
        out.extend_from_slice(b"\\\"");
        out.extend_from_slice(part);
    }
}

/// Append untrusted bytes as a `--plain` value: escaped, and quoted when they need it
/// ([`push_plain_escaped`]).
pub(crate) fn push_plain_value(bytes: &[u8], out: &mut Vec<u8>) {
    if bytes.iter().all(|&b| plain_ascii(b)) {
        push_plain_escaped(bytes, out);
    } else {
        push_plain_escaped(escape(bytes).as_bytes(), out);
    }
}

/// True when the byte is printable ASCII that needs no escaping.
#[inline]
fn plain_ascii(b: u8) -> bool {
    (0x20..0x7f).contains(&b) && b != b'\\'
}

/// Characters that are valid and printable as far as Unicode goes, but that can rearrange or
/// hide what a terminal shows: C1 controls, bidirectional overrides and isolates, line and
/// paragraph separators, interlinear annotation marks, and every default-ignorable code point
/// (Unicode's `Default_Ignorable_Code_Point`, DerivedCoreProperties.txt: the characters a
/// renderer shows as nothing at all when it does not support them). That class holds the
/// zero-width characters and joiners, the soft hyphen, the BOM, the Hangul fillers (U+115F,
/// U+1160, U+3164, U+FFA0, which look like blanks in a name), the variation selectors (U+FE00..
/// U+FE0F, U+E0100..U+E01EF), the Mongolian free variation selectors, the tag characters and
/// the planes' reserved default-ignorable ranges.
pub(crate) fn dangerous_char(c: char) -> bool {
    matches!(c,
        '\u{80}'..='\u{9f}'
        // Default_Ignorable_Code_Point, in code point order.
        | '\u{ad}'
        | '\u{034f}'
        | '\u{061c}'
        | '\u{115f}'..='\u{1160}'
        | '\u{17b4}'..='\u{17b5}'
        | '\u{180b}'..='\u{180f}'
        | '\u{200b}'..='\u{200f}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2060}'..='\u{206f}'
        | '\u{3164}'
        | '\u{fe00}'..='\u{fe0f}'
        | '\u{feff}'
        | '\u{ffa0}'
        | '\u{fff0}'..='\u{fff8}'
        | '\u{1bca0}'..='\u{1bca3}'
        | '\u{1d173}'..='\u{1d17a}'
        | '\u{e0000}'..='\u{e0fff}'
        // Not default-ignorable, but they break or reorder what is shown.
        | '\u{2028}'..='\u{2029}'
        | '\u{fff9}'..='\u{fffb}'
    )
}

fn escape_into<W: Write>(mut bytes: &[u8], out: &mut W) -> fmt::Result {
    while !bytes.is_empty() {
        let run = bytes
            .iter()
            .position(|&b| !plain_ascii(b))
            .unwrap_or(bytes.len());
        if run > 0 {
            // The run is printable ASCII, hence valid UTF-8.
            out.write_str(std::str::from_utf8(&bytes[..run]).map_err(|_| fmt::Error)?)?;
            bytes = &bytes[run..];
            continue;
        }
        let b = bytes[0];
        if b < 0x80 {
            match b {
                b'\\' => out.write_str("\\\\")?,
                b'\n' => out.write_str("\\n")?,
                b'\r' => out.write_str("\\r")?,
                b'\t' => out.write_str("\\t")?,
                _ => write!(out, "\\x{b:02x}")?,
            }
            bytes = &bytes[1..];
            continue;
        }
        // A multi-byte sequence: take one character if it is valid UTF-8.
        let len = utf8_len(b);
        match bytes.get(..len).and_then(|s| std::str::from_utf8(s).ok()) {
            Some(s) => {
                let c = s.chars().next().ok_or(fmt::Error)?;
                if dangerous_char(c) {
                    write!(out, "\\u{{{:04x}}}", c as u32)?;
                } else {
                    out.write_char(c)?;
                }
                bytes = &bytes[len..];
            }
            None => {
                write!(out, "\\x{b:02x}")?;
                bytes = &bytes[1..];
            }
        }
    }
    Ok(())
}

fn utf8_len(first: u8) -> usize {
    match first {
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => 1,
    }
}

/// The bytes of a NUL-terminated, NUL-padded string field in a record.
pub fn until_nul(bytes: &[u8]) -> &[u8] {
    match bytes.iter().position(|&b| b == 0) {
        Some(n) => &bytes[..n],
        None => bytes,
    }
}

/// Append `v` in lower-case hex digits, as many as it needs (one for zero), no prefix.
#[inline]
pub(crate) fn push_hex_digits(out: &mut Vec<u8>, v: u64) {
    let digits = (16 - v.leading_zeros() as usize / 4).max(1);
    // Built on the stack and appended once (a push per digit checks the capacity each time).
    let mut b = [0u8; 16];
    for (i, d) in b[..digits].iter_mut().rev().enumerate() {
        *d = b"0123456789abcdef"[((v >> (i * 4)) & 0xf) as usize];
    }
    out.extend_from_slice(&b[..digits]);
}

/// Append `v` as C's `%#x` prints it: `0` for zero, `0x...` otherwise.
#[inline]
pub(crate) fn push_c_hex(out: &mut Vec<u8>, v: u64) {
    if v != 0 {
        out.extend_from_slice(b"0x");
    }
    push_hex_digits(out, v);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_ascii_passes() {
        assert_eq!(escape(b"bash"), "bash");
        assert_eq!(
            escape(b"/usr/lib/x86_64-linux-gnu/libc.so.6"),
            "/usr/lib/x86_64-linux-gnu/libc.so.6"
        );
    }

    #[test]
    fn controls_and_escapes_are_neutralised() {
        assert_eq!(
            escape(b"\x1b[2J\x1b]0;owned\x07"),
            "\\x1b[2J\\x1b]0;owned\\x07"
        );
        assert_eq!(escape(b"a\nb\rc\td"), "a\\nb\\rc\\td");
        assert_eq!(escape(b"back\\slash"), "back\\\\slash");
        assert_eq!(escape(b"\x7f"), "\\x7f");
    }

    #[test]
    fn invalid_utf8_is_hex() {
        assert_eq!(escape(b"\xff\xfeok\xc3"), "\\xff\\xfeok\\xc3");
        // An overlong encoding is not valid UTF-8.
        assert_eq!(escape(b"\xc0\xaf"), "\\xc0\\xaf");
    }

    #[test]
    fn valid_unicode_stays_but_bidi_and_invisible_do_not() {
        assert_eq!(escape("héllo 日本".as_bytes()), "héllo 日本");
        assert_eq!(escape("a\u{202e}b".as_bytes()), "a\\u{202e}b");
        assert_eq!(escape("a\u{200b}b".as_bytes()), "a\\u{200b}b");
        assert_eq!(escape("\u{9b}31m".as_bytes()), "\\u{009b}31m");
        assert_eq!(escape("x\u{2028}y".as_bytes()), "x\\u{2028}y");
    }

    #[test]
    fn default_ignorable_and_filler_characters_are_escaped() {
        for (c, shown) in [
            ('\u{3164}', "\\u{3164}"),
            ('\u{115f}', "\\u{115f}"),
            ('\u{1160}', "\\u{1160}"),
            ('\u{ffa0}', "\\u{ffa0}"),
            ('\u{fe00}', "\\u{fe00}"),
            ('\u{fe0f}', "\\u{fe0f}"),
            ('\u{e0100}', "\\u{e0100}"),
            ('\u{e01ef}', "\\u{e01ef}"),
            ('\u{180b}', "\\u{180b}"),
            ('\u{180f}', "\\u{180f}"),
            ('\u{e0041}', "\\u{e0041}"),
            ('\u{034f}', "\\u{034f}"),
            ('\u{17b4}', "\\u{17b4}"),
            ('\u{1d173}', "\\u{1d173}"),
            ('\u{1bca0}', "\\u{1bca0}"),
            ('\u{2064}', "\\u{2064}"),
        ] {
            let s = format!("a{c}b");
            assert_eq!(escape(s.as_bytes()), format!("a{shown}b"), "{:x}", c as u32);
        }
        // Their neighbours stay: Hangul syllables, ordinary CJK, emoji.
        assert_eq!(escape("한글 日本 ☃".as_bytes()), "한글 日本 ☃");
        assert_eq!(escape("\u{3163}\u{3165}".as_bytes()), "\u{3163}\u{3165}");
    }

    /// Every code point Unicode marks Default_Ignorable_Code_Point (DerivedCoreProperties.txt,
    /// Unicode 15.1) is escaped.
    #[test]
    fn the_whole_default_ignorable_class_is_escaped() {
        const DI: &[(u32, u32)] = &[
            (0x00ad, 0x00ad),
            (0x034f, 0x034f),
            (0x061c, 0x061c),
            (0x115f, 0x1160),
            (0x17b4, 0x17b5),
            (0x180b, 0x180f),
            (0x200b, 0x200f),
            (0x202a, 0x202e),
            (0x2060, 0x206f),
            (0x3164, 0x3164),
            (0xfe00, 0xfe0f),
            (0xfeff, 0xfeff),
            (0xffa0, 0xffa0),
            (0xfff0, 0xfff8),
            (0x1bca0, 0x1bca3),
            (0x1d173, 0x1d17a),
            (0xe0000, 0xe0fff),
        ];
        for &(lo, hi) in DI {
            for cp in lo..=hi {
                let c = char::from_u32(cp).unwrap();
                assert!(dangerous_char(c), "U+{cp:04X}");
                let s = c.to_string();
                assert_eq!(escape(s.as_bytes()), format!("\\u{{{cp:04x}}}"));
            }
        }
    }

    #[test]
    fn escape_lines_keeps_the_lines_apart() {
        assert_eq!(
            escape_lines("Traceback:\n  x = '\x1b[2J'\nSyntaxError"),
            "Traceback:\n  x = '\\x1b[2J'\nSyntaxError"
        );
        assert_eq!(escape_lines("a\rb\n\u{202e}"), "a\\rb\n\\u{202e}");
    }

    #[test]
    fn output_is_one_line_without_controls() {
        let all: Vec<u8> = (0..=255u8).collect();
        let s = escape(&all);
        assert!(!s.chars().any(|c| c.is_control()), "{s}");
    }

    #[test]
    fn until_nul_stops_at_first_nul() {
        assert_eq!(until_nul(b"ls\0\0\0\0\0\0"), b"ls");
        assert_eq!(until_nul(b"nonul"), b"nonul");
    }
}
