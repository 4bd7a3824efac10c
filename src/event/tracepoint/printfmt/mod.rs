//! A tracepoint's `print fmt`: how the kernel (and perf script) turn its fields into text.
//!
//! The last line of a format file is a C `printf` call without the function:
//!
//! ```text
//! print fmt: "vec=%u [action=%s]", REC->vec, __print_symbolic(REC->vec, { 0, "HI" }, { 1, "TIMER" }, ...)
//! ```
//!
//! Raw field values are numbers; what a person reads is what this prints: `action=TIMER`,
//! `prev_state=R+` (a `__print_flags` inside a conditional), `function=tick_nohz_handler`
//! (`%ps`, a kernel address through the kernel's symbols), `group_dead=true`. perfwatch keeps
//! every raw value and adds, beside a field the format turns into text, that text as a
//! member of its own: `prev_state: 1, prev_state_str: S` ([`PrintFmt::renders`]).
//!
//! Why not a crate: `tracepoint_decode` (the one maintained Rust crate for format files)
//! keeps `print fmt` as a string and evaluates none of it; libtraceevent, which perf uses,
//! is C with no maintained Rust binding, and its parser would be unsafe code reading the
//! same input. This one is written as hostile-input code: the text, the number of tokens,
//! arguments and table entries, the nesting depth and every output are bounded, arithmetic
//! wraps or gives up, and nothing panics (`fuzz/fuzz_targets/printfmt.rs`, and the property
//! tests below). A format it cannot read simply renders nothing: the raw values stay.

mod expr;
mod printf;
#[cfg(test)]
mod tests;

use expr::{Expr, Parser, Tok, Val, eval, lex};
use printf::{Conv, Piece, Ptr, Spec, convert, parse_format};

use super::field::Field;

/// Longest `print fmt` read (the longest on a 6.1 kernel is under 5 KiB).
pub(super) const MAX_TEXT: usize = 64 * 1024;
/// Most tokens, arguments, table entries per helper, and the deepest nesting.
pub(super) const MAX_TOKENS: usize = 16 * 1024;
pub(super) const MAX_ARGS: usize = 64;
pub(super) const MAX_TABLE: usize = 4096;
pub(super) const MAX_DEPTH: usize = 48;
/// Most operator nodes in one argument (the longest real one has a few dozen).
pub(super) const MAX_NODES: usize = 1024;
/// The most one conversion writes, and the widest field width honoured.
pub(super) const MAX_OUT: usize = 4096;
pub(super) const MAX_WIDTH: usize = 256;

/// The kernel's symbols, for `%ps` / `%pS`: the function an address is in and the offset
/// into it.
pub trait KernelSymbols {
    fn symbol(&self, addr: u64) -> Option<(&str, u64)>;
}

/// No symbols: `%ps` prints the address, as perf does for an address it cannot name.
pub struct NoSymbols;

impl KernelSymbols for NoSymbols {
    fn symbol(&self, _: u64) -> Option<(&str, u64)> {
        None
    }
}

/// A field the print fmt turns into text, and the conversions that do it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Render {
    /// The field's index in the format.
    pub field: u16,
    /// The member's name: the field's, with `_str`.
    pub name: Box<str>,
    /// Indexes into the pieces: the first and last of this field's adjacent conversions.
    first: usize,
    last: usize,
    /// Every text the helpers can give (symbol and flag names, string literals), for filters.
    pub spellings: Box<[Box<[u8]>]>,
    /// The flags' delimiter, when a `__print_flags` is part of it.
    pub delim: Option<Box<[u8]>>,
    /// The text is a kernel symbol (`%ps`).
    pub symbol: bool,
}

/// One `__print_flags` (with its delimiter) or `__print_symbolic` table of a print fmt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueTable<'a> {
    /// The field whose value the table names.
    pub field: &'a str,
    /// `Some` for flags: the text between two names.
    pub delim: Option<&'a [u8]>,
    /// Value and name, in the print fmt's order.
    pub values: &'a [(u64, Box<[u8]>)],
}

/// A parsed `print fmt`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrintFmt {
    pieces: Box<[Piece]>,
    args: Box<[Expr]>,
    renders: Box<[Render]>,
}

fn fields_of(e: &Expr, out: &mut Vec<u16>) {
    if let Expr::Field(f) | Expr::Index(f, _) = e {
        if !out.contains(f) {
            out.push(*f);
        }
    }
    for c in e.children() {
        fields_of(c, out);
    }
}

fn strings_of(e: &Expr, out: &mut Vec<Box<[u8]>>, delim: &mut Option<Box<[u8]>>) {
    let add = |s: &[u8], out: &mut Vec<Box<[u8]>>| {
        if !s.is_empty() && !out.iter().any(|o| &o[..] == s) {
            out.push(s.into());
        }
    };
    match e {
        Expr::Str(s) => add(s, out),
        Expr::Symbolic(v, t) => {
            strings_of(v, out, delim);
            for (_, s) in t.iter() {
                add(s, out);
            }
        }
        Expr::Flags(v, d, t) => {
            strings_of(v, out, delim);
            *delim = Some(d.clone());
            for (_, s) in t.iter() {
                add(s, out);
            }
        }
        // An index names an element, not text: its strings are not the field's.
        Expr::Index(..) => {}
        _ => {
            for c in e.children() {
                strings_of(c, out, delim);
            }
        }
    }
}

impl PrintFmt {
    /// Parse the text after `print fmt:`, with `fields` the format's fields (arguments name
    /// them). `None` when it cannot be read: nothing is rendered then.
    pub fn parse(text: &str, fields: &[Field]) -> Option<PrintFmt> {
        if text.len() > MAX_TEXT {
            return None;
        }
        let toks = lex(text)?;
        let Some(Tok::Str(format)) = toks.first() else {
            return None;
        };
        let pieces = parse_format(format)?;
        let mut p = Parser {
            toks: &toks,
            at: 1,
            fields,
            depth: 0,
            nodes: 0,
        };
        let mut args = Vec::new();
        while p.eat(",") {
            if args.len() >= MAX_ARGS {
                return None;
            }
            p.nodes = 0;
            args.push(p.expr()?);
        }
        let convs_fit = pieces
            .iter()
            .all(|p| !matches!(p, Piece::Conv(_, Some(a)) if *a >= args.len()));
        if p.at != toks.len() || !convs_fit {
            return None;
        }
        let renders = Self::find_renders(&pieces, &args, fields);
        Some(PrintFmt {
            pieces: pieces.into_boxed_slice(),
            args: args.into_boxed_slice(),
            renders: renders.into_boxed_slice(),
        })
    }

    /// The conversions that turn one field's number into text: `%s` of a helper or a
    /// conditional (not of a string field), `%ps`/`%pS` of an address.
    fn find_renders(pieces: &[Piece], args: &[Expr], fields: &[Field]) -> Vec<Render> {
        let mut renders: Vec<Render> = Vec::new();
        for (i, piece) in pieces.iter().enumerate() {
            let Piece::Conv(spec, Some(a)) = piece else {
                continue;
            };
            let Some(arg) = args.get(*a) else {
                continue;
            };
            let symbol = matches!(spec.conv, Conv::Ptr(Ptr::Sym { .. }));
            let text = spec.conv == Conv::Str && !matches!(arg, Expr::Field(_) | Expr::Str(_));
            if !(symbol || text) {
                continue;
            }
            let mut refs = Vec::new();
            fields_of(arg, &mut refs);
            let [f] = refs[..] else { continue };
            let Some(field) = fields.get(f as usize) else {
                continue;
            };
            let mut spellings = Vec::new();
            let mut delim = None;
            strings_of(arg, &mut spellings, &mut delim);
            match renders.iter_mut().find(|r| r.field == f) {
                // A second conversion of the field right after the first (`%s%s`, as
                // sched_switch's `R` and `+`) is part of its text; a later one is not.
                Some(r) if r.last + 1 == i => {
                    r.last = i;
                    let mut all = r.spellings.to_vec();
                    for s in spellings {
                        if !all.contains(&s) {
                            all.push(s);
                        }
                    }
                    r.spellings = all.into_boxed_slice();
                    r.delim = r.delim.take().or(delim);
                    r.symbol |= symbol;
                }
                Some(_) => {}
                None => renders.push(Render {
                    field: f,
                    name: format!("{}_str", field.name).into(),
                    first: i,
                    last: i,
                    spellings: spellings.into_boxed_slice(),
                    delim,
                    symbol,
                }),
            }
        }
        // A member name that a field already has is left out (the field keeps its name).
        renders.retain(|r| !fields.iter().any(|f| *f.name == *r.name));
        renders
    }

    /// True when a conversion shows a kernel address as a function (`%ps`).
    pub(crate) fn shows_symbols(&self) -> bool {
        self.pieces.iter().any(|p| {
            matches!(
                p,
                Piece::Conv(
                    Spec {
                        conv: Conv::Ptr(Ptr::Sym { .. }),
                        ..
                    },
                    _
                )
            )
        })
    }

    /// The `__print_flags` and `__print_symbolic` tables of the arguments, in the order a
    /// walk of them meets each (perf script defines its scripts' flag and symbolic values
    /// from these, `define_flag_value` and the like), each with the name of the first field
    /// its value reads (`fields` are the format's).
    pub fn value_tables<'s>(&'s self, fields: &'s [Field]) -> Vec<ValueTable<'s>> {
        fn walk<'s>(e: &'s Expr, fields: &'s [Field], out: &mut Vec<ValueTable<'s>>) {
            let mut table =
                |v: &'s Expr, delim: Option<&'s [u8]>, values: &'s [(u64, Box<[u8]>)]| {
                    let mut named = Vec::new();
                    fields_of(v, &mut named);
                    if let Some(f) = named.first().and_then(|i| fields.get(*i as usize)) {
                        out.push(ValueTable {
                            field: &f.name,
                            delim,
                            values,
                        });
                    }
                };
            match e {
                Expr::Symbolic(v, t) => {
                    table(v, None, t);
                    walk(v, fields, out);
                }
                Expr::Flags(v, d, t) => {
                    table(v, Some(d), t);
                    walk(v, fields, out);
                }
                _ => {
                    for c in e.children() {
                        walk(c, fields, out);
                    }
                }
            }
        }
        let mut out = Vec::new();
        for a in self.args.iter() {
            walk(a, fields, &mut out);
        }
        out
    }

    /// The fields this format renders as text, with their member names.
    pub fn renders(&self) -> &[Render] {
        &self.renders
    }

    /// The addresses of a record that the format shows as kernel symbols (`%ps`): the ones
    /// a symbolizer should name before [`PrintFmt::render`] is called.
    pub fn symbol_addresses<'s>(
        &'s self,
        fields: &'s [Field],
        raw: &'s [u8],
    ) -> impl Iterator<Item = u64> + 's {
        self.pieces.iter().filter_map(move |p| match p {
            Piece::Conv(
                Spec {
                    conv: Conv::Ptr(Ptr::Sym { .. }),
                    ..
                },
                Some(a),
            ) => match eval(self.args.get(*a)?, fields, raw) {
                Val::Int(v) => Some(v),
                _ => None,
            },
            _ => None,
        })
    }

    /// Write the text of `render` for this record: what perf prints for that field
    /// (`S`, `R+`, `SCHED`, `tick_nohz_handler`). False (and nothing written) when it
    /// cannot be rendered.
    pub fn render(
        &self,
        render: &Render,
        fields: &[Field],
        raw: &[u8],
        syms: &dyn KernelSymbols,
        out: &mut Vec<u8>,
    ) -> bool {
        let start = out.len();
        let Some(pieces) = self.pieces.get(render.first..=render.last) else {
            return false;
        };
        for piece in pieces {
            if !self.piece(piece, fields, raw, syms, out) {
                out.truncate(start);
                return false;
            }
        }
        true
    }

    /// The whole line as perf script prints it after the event name. `None` when a
    /// conversion cannot be rendered here (an unknown helper, `%pI4`, ...).
    pub fn render_line(
        &self,
        fields: &[Field],
        raw: &[u8],
        syms: &dyn KernelSymbols,
    ) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        for piece in self.pieces.iter() {
            if !self.piece(piece, fields, raw, syms, &mut out) {
                return None;
            }
        }
        Some(out)
    }

    fn piece(
        &self,
        piece: &Piece,
        fields: &[Field],
        raw: &[u8],
        syms: &dyn KernelSymbols,
        out: &mut Vec<u8>,
    ) -> bool {
        match piece {
            Piece::Lit(l) => {
                out.extend_from_slice(l);
                true
            }
            Piece::Conv(spec, Some(a)) => match self.args.get(*a) {
                Some(arg) => convert(spec, &eval(arg, fields, raw), syms, out),
                None => false,
            },
            Piece::Conv(_, None) => false,
        }
    }
}
