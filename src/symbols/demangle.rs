//! Symbol names as shown: demangled (Rust legacy and v0, C++ Itanium), escaped, bounded.
//!
//! A name comes from a binary that anyone may have written: demangling is bounded in
//! recursion and in output (a crafted C++ name can expand exponentially), contained if the
//! demangler panics, and the result goes through [`crate::text::escape`] like every other
//! untrusted string.

use std::fmt::{self, Write};

/// The longest name kept, in bytes of the escaped form.
pub const MAX_DISPLAY: usize = 1024;
/// Mangled names longer than this are shown as they are.
const MAX_MANGLED: usize = 4096;

/// A `fmt::Write` that stops (with an error) once it holds `cap` bytes.
struct Capped {
    out: String,
    cap: usize,
    full: bool,
}

impl Write for Capped {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.cap - self.out.len();
        if s.len() <= room {
            self.out.push_str(s);
            Ok(())
        } else {
            let mut cut = room;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            self.out.push_str(&s[..cut]);
            self.full = true;
            Err(fmt::Error)
        }
    }
}

fn capped(f: impl FnOnce(&mut Capped) -> fmt::Result) -> Option<String> {
    let mut w = Capped {
        out: String::new(),
        cap: MAX_DISPLAY,
        full: false,
    };
    match f(&mut w) {
        Ok(()) => Some(w.out),
        Err(_) if w.full => {
            w.out.push_str("...");
            Some(w.out)
        }
        Err(_) => None,
    }
}

/// The demangled form of `name`, if it is a mangled Rust or C++ name.
pub fn demangle(name: &str) -> Option<String> {
    if name.len() > MAX_MANGLED {
        return None;
    }
    // The demanglers are fuzzed, but a panic on a name from a hostile binary must not take
    // the symbolizer down: contain it and show the name as it is.
    std::panic::catch_unwind(|| {
        if let Ok(d) = rustc_demangle::try_demangle(name) {
            // `{:#}` leaves out the legacy hash suffix (`::h0123456789abcdef`).
            return capped(|w| write!(w, "{d:#}"));
        }
        if name.starts_with("_Z") {
            let parse = cpp_demangle::ParseOptions::default().recursion_limit(64);
            let sym = cpp_demangle::Symbol::new_with_options(name.as_bytes(), &parse).ok()?;
            let opts = cpp_demangle::DemangleOptions::default().recursion_limit(64);
            // Written into the capped sink as it goes: an expansion bomb stops at the cap.
            return capped(|w| sym.structured_demangle(w, &opts));
        }
        None
    })
    .ok()
    .flatten()
}

/// The name as frontends show it: demangled when mangled, escaped, at most
/// [`MAX_DISPLAY`] bytes (plus `...`).
pub fn display_name(raw: &[u8]) -> Box<str> {
    // A PLT stub's name is its target's with `@plt`: demangle the target's.
    let (name, suffix) = match raw.strip_suffix(b"@plt") {
        Some(target) => (target, "@plt"),
        None => (raw, ""),
    };
    let demangled = std::str::from_utf8(name)
        .ok()
        .and_then(demangle)
        .map(|d| d + suffix);
    let shown = demangled.as_deref().map_or(raw, str::as_bytes);
    let mut s = crate::text::escape(&shown[..shown.len().min(MAX_DISPLAY * 4)]);
    if s.len() > MAX_DISPLAY {
        let mut cut = MAX_DISPLAY;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s.into_boxed_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_legacy_and_v0_names_demangle_without_hash() {
        assert_eq!(
            demangle("_ZN4core3fmt5write17h0123456789abcdefE").as_deref(),
            Some("core::fmt::write")
        );
        assert_eq!(
            demangle("_RNvCs1234_7mycrate4spin").as_deref(),
            Some("mycrate::spin")
        );
    }

    #[test]
    fn cpp_names_demangle_with_their_parameters() {
        assert_eq!(
            demangle("_ZN2ns6Widget4spinEi").as_deref(),
            Some("ns::Widget::spin(int)")
        );
        let v = demangle("_ZNSt6vectorIiSaIiEE9push_backERKi").unwrap();
        assert!(v.contains("push_back"), "{v}");
    }

    #[test]
    fn plain_and_broken_names_stay_as_they_are() {
        assert_eq!(demangle("hot_b"), None);
        assert_eq!(demangle("_Z"), None);
        assert_eq!(demangle("_ZN"), None);
        assert_eq!(&*display_name(b"hot_b"), "hot_b");
        assert_eq!(&*display_name(b"_ZN3foo"), "_ZN3foo");
        assert_eq!(&*display_name(b"memcmp@plt"), "memcmp@plt");
        assert_eq!(
            &*display_name(b"_ZN2ns6Widget4spinEi@plt"),
            "ns::Widget::spin(int)@plt"
        );
    }

    #[test]
    fn hostile_names_are_escaped_and_bounded() {
        assert_eq!(&*display_name(b"evil\x1b[31m\n"), "evil\\x1b[31m\\n");
        let long = vec![b'a'; 100_000];
        let shown = display_name(&long);
        assert!(shown.len() <= MAX_DISPLAY + 3);
        assert!(shown.ends_with("..."));
        // Deeply nested templates: bounded recursion, no stack overflow, no blow-up.
        let mut nested = String::from("_Z1fI");
        for _ in 0..2000 {
            nested.push_str("N1aI");
        }
        let _ = display_name(nested.as_bytes());
        // Back-references that expand exponentially.
        let bomb = "_Z1fIS_S_S_S_S_S_S_S_S_S_S_S_S_S_S_S_S_S_S_S_S_S_S_EvT_";
        assert!(display_name(bomb.as_bytes()).len() <= MAX_DISPLAY + 3);
    }
}
