//! A sample's call chain in the line formats: `--plain`'s `callchain: a <- b <- c` and
//! `--json`'s `"callchain": [{"ip": ..., "sym": ..., "dso": ...}, ...]`.

use crate::callchain::{Callchain, FrameNames};
use crate::text::push_c_hex;

/// Append `--plain`'s `callchain: a <- b <- c` (innermost first): each frame as its symbol
/// (`hot_b+0x16`) when `names` knows it, a frame in a binary without a name for it as that
/// binary (`[liblzma.so.5.4.1]`, as folded stacks name it; `[unknown]` outside any mapping),
/// else its address. Symbol names are escaped by the symbolizer already.
pub fn write_plain(chain: &Callchain, names: &dyn FrameNames, out: &mut Vec<u8>) {
    out.extend_from_slice(b"callchain:");
    for (i, f) in chain.frames().enumerate() {
        out.extend_from_slice(if i == 0 { b" " } else { b" <- " });
        match names.symbol(i, f) {
            Some(s) if s.is_known() => push_plain_symbol(s, out),
            Some(s) => push_plain_text(s.symbol().frame_name().as_bytes(), out),
            None => push_c_hex(out, f.ip),
        }
    }
}

/// A symbol as `--plain` writes it, `name+0xOFFSET` (escaped by the symbolizer), in double
/// quotes when the name holds a separator of the line ([`crate::text::push_plain_escaped`]).
pub fn push_plain_symbol(s: &crate::symbols::Symbolized, out: &mut Vec<u8>) {
    let start = out.len();
    {
        use std::io::Write;
        let _ = write!(out, "{s}");
    }
    if crate::text::needs_quotes(&out[start..]) {
        let shown = out.split_off(start);
        crate::text::push_plain_escaped(&shown, out);
    }
}

/// Append already escaped `text` (an unnamed frame's label, `[libfoo.so]`) as a `--plain`
/// value: quoted when it holds the line's separators, as a named frame is.
fn push_plain_text(text: &[u8], out: &mut Vec<u8>) {
    if crate::text::needs_quotes(text) {
        crate::text::push_plain_escaped(text, out);
    } else {
        out.extend_from_slice(text);
    }
}

/// Append `--json`'s value of `"callchain"`, `[{"ip":"0x...","sym":...,"dso":...},...]`
/// (innermost first): addresses as the `--json` convention writes them
/// ([`super::json::push_address`]), `sym` the symbol's name and `dso` its binary when known,
/// else `null`.
pub fn write_json(chain: &Callchain, names: &dyn FrameNames, out: &mut Vec<u8>) {
    out.push(b'[');
    for (i, f) in chain.frames().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"ip\":");
        super::json::push_address(out, f.ip);
        out.extend_from_slice(b",\"sym\":");
        let s = names.symbol(i, f);
        match s.and_then(|s| s.name()) {
            Some(name) => json_str(name, out),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"dso\":");
        match s {
            Some(s) => json_str(s.dso().name(), out),
            None => out.extend_from_slice(b"null"),
        }
        out.push(b'}');
    }
    out.push(b']');
}

/// Already-escaped text as a JSON string, or `null`.
pub(crate) fn json_str_or_null(s: Option<&str>, out: &mut Vec<u8>) {
    match s {
        Some(s) => json_str(s, out),
        None => out.extend_from_slice(b"null"),
    }
}

/// Already-escaped text (no control characters) as a JSON string.
fn json_str(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in s.as_bytes() {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b if b < 0x20 => {
                use std::io::Write;
                let _ = write!(out, "\\u{b:04x}");
            }
            b => out.push(b),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callchain::{CONTEXT_USER, Frame, NoNames};
    use crate::symbols::Symbolized;

    fn chain(e: &[u64]) -> Callchain {
        Callchain::new(e.to_vec())
    }

    #[test]
    fn formats_without_names_show_addresses() {
        let c = chain(&[CONTEXT_USER, 0x40_1136, 0x40_1156, 0]);
        let mut out = Vec::new();
        write_plain(&c, &NoNames, &mut out);
        assert_eq!(out, b"callchain: 0x401136 <- 0x401156 <- 0");
        out.clear();
        write_json(&c, &NoNames, &mut out);
        let v: serde_json::Value =
            serde_json::from_slice(&[b"{\"callchain\":".as_slice(), &out, b"}"].concat()).unwrap();
        assert_eq!(v["callchain"][0]["ip"], "0x401136");
        assert_eq!(v["callchain"][2]["ip"], "0x0");
        assert!(v["callchain"][1]["sym"].is_null() && v["callchain"][1]["dso"].is_null());
        assert_eq!(v["callchain"].as_array().unwrap().len(), 3);
        out.clear();
        write_plain(&chain(&[]), &NoNames, &mut out);
        assert_eq!(out, b"callchain:");
    }

    #[test]
    fn frames_are_named_by_what_the_glue_supplies() {
        use crate::symbols::{Dso, DsoKind, Symbol, SymbolKey};
        struct Names(Vec<Option<Symbolized>>);
        impl FrameNames for Names {
            fn symbol(&self, i: usize, _: Frame) -> Option<&Symbolized> {
                self.0.get(i)?.as_ref()
            }
        }
        let dso = Dso::new("/usr/local/bin/sp\\\"in", DsoKind::File);
        let sym = |name: &str, start, off| {
            Symbolized::new(
                Symbol::new(Some(name.into()), dso.clone(), SymbolKey { dso: 1, start }),
                off,
            )
        };
        let lib = Dso::new("/usr/lib/liblzma.so.5", DsoKind::File);
        let unnamed = Symbolized::unknown(&Symbol::unknown(lib, 2));
        let names = Names(vec![
            Some(sym("hot_b", 0x1120, 0x16)),
            Some(sym("main", 0x1000, 0x2a)),
            None,
            Some(unnamed),
        ]);
        let c = chain(&[
            CONTEXT_USER,
            0x1136,
            0x102a,
            0x7f00_0000_0001,
            0x7f00_0000_2000,
        ]);
        let mut out = Vec::new();
        write_plain(&c, &names, &mut out);
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            "callchain: hot_b+0x16 <- main+0x2a <- 0x7f0000000001 <- [liblzma.so.5]"
        );
        out.clear();
        out.extend_from_slice(b"{\"callchain\":");
        write_json(&c, &names, &mut out);
        out.push(b'}');
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["callchain"][0]["sym"], "hot_b");
        assert_eq!(v["callchain"][1]["dso"], "/usr/local/bin/sp\\\"in");
        assert_eq!(v["callchain"][1]["ip"], "0x102a");
        assert!(v["callchain"][2]["sym"].is_null());
        // An unnamed frame keeps its binary in JSON, with no name.
        assert!(v["callchain"][3]["sym"].is_null());
        assert_eq!(v["callchain"][3]["dso"], "/usr/lib/liblzma.so.5");
    }
}
