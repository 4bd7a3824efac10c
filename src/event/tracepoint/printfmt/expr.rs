//! The arguments of a `print fmt`: C expressions over the record's fields (`REC->vec`,
//! `REC->prev_state & 0xff ? __print_flags(...) : "R"`), lexed, parsed and evaluated with
//! every size and depth bounded (see the parent module).

use super::super::field::{Field, Value};
use super::{MAX_DEPTH, MAX_NODES, MAX_TABLE, MAX_TOKENS};

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Tok {
    Num(u64),
    Str(Vec<u8>),
    Ident(String),
    Punct(&'static str),
}

pub(super) const PUNCT: &[&str] = &[
    "->", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "(", ")", "{", "}", "[", "]", ",", "?",
    ":", "|", "&", "^", "+", "-", "*", "/", "%", "<", ">", "!", "~", ".",
];

pub(super) fn lex(text: &str) -> Option<Vec<Tok>> {
    let b = text.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        if out.len() > MAX_TOKENS {
            return None;
        }
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'"' {
            let mut s = Vec::new();
            i += 1;
            loop {
                let c = *b.get(i)?;
                i += 1;
                match c {
                    b'"' => break,
                    b'\\' => {
                        let e = *b.get(i)?;
                        i += 1;
                        s.push(match e {
                            b'n' => b'\n',
                            b't' => b'\t',
                            b'r' => b'\r',
                            b'0' => 0,
                            b'a' => 7,
                            other => other,
                        });
                    }
                    c => s.push(c),
                }
            }
            // Adjacent literals are one string, as in C.
            if let Some(Tok::Str(prev)) = out.last_mut() {
                prev.extend_from_slice(&s);
            } else {
                out.push(Tok::Str(s));
            }
        } else if c == b'\'' {
            // A character constant: its value.
            let v = *b.get(i + 1)?;
            if *b.get(i + 2)? != b'\'' {
                return None;
            }
            out.push(Tok::Num(v as u64));
            i += 3;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric()) {
                i += 1;
            }
            let word = &text[start..i];
            let digits = word.trim_end_matches(['u', 'U', 'l', 'L']);
            let v = if let Some(h) = digits
                .strip_prefix("0x")
                .or_else(|| digits.strip_prefix("0X"))
            {
                u64::from_str_radix(h, 16).ok()?
            } else if digits.len() > 1 && digits.starts_with('0') {
                u64::from_str_radix(&digits[1..], 8).ok()?
            } else {
                digits.parse().ok()?
            };
            out.push(Tok::Num(v));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(text[start..i].to_string()));
        } else {
            let p = PUNCT.iter().find(|p| b[i..].starts_with(p.as_bytes()))?;
            out.push(Tok::Punct(p));
            i += p.len();
        }
    }
    Some(out)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Bin {
    Or,
    And,
    BitOr,
    BitXor,
    BitAnd,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Shl,
    Shr,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Un {
    Neg,
    Not,
    BitNot,
}

/// A `__print_symbolic` or `__print_flags` table: values and their names.
pub(super) type Table = Box<[(u64, Box<[u8]>)]>;

/// An argument of the print fmt. Fields are indexes into the format's fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Expr {
    Num(u64),
    Str(Box<[u8]>),
    Field(u16),
    Index(u16, Box<Expr>),
    Cast {
        size: u8,
        signed: bool,
        e: Box<Expr>,
    },
    Unary(Un, Box<Expr>),
    Binary(Bin, Box<Expr>, Box<Expr>),
    Cond(Box<Expr>, Box<Expr>, Box<Expr>),
    Symbolic(Box<Expr>, Table),
    Flags(Box<Expr>, Box<[u8]>, Table),
    /// `REC`, the record: only `REC->field` has a value.
    Rec,
    /// Something this reader does not evaluate (an unknown helper or name).
    Unknown,
}

impl Expr {
    /// The expressions directly under this one, in order: what every walk of a format's
    /// arguments recurses into.
    pub(super) fn children(&self) -> impl Iterator<Item = &Expr> {
        let (a, b, c): (Option<&Expr>, Option<&Expr>, Option<&Expr>) = match self {
            Expr::Index(_, e)
            | Expr::Cast { e, .. }
            | Expr::Unary(_, e)
            | Expr::Symbolic(e, _)
            | Expr::Flags(e, _, _) => (Some(e), None, None),
            Expr::Binary(_, a, b) => (Some(a), Some(b), None),
            Expr::Cond(c, a, b) => (Some(c), Some(a), Some(b)),
            Expr::Num(_) | Expr::Str(_) | Expr::Field(_) | Expr::Rec | Expr::Unknown => {
                (None, None, None)
            }
        };
        a.into_iter().chain(b).chain(c)
    }
}

pub(super) struct Parser<'a> {
    pub(super) toks: &'a [Tok],
    pub(super) at: usize,
    pub(super) fields: &'a [Field],
    pub(super) depth: usize,
    /// Operator nodes of the argument being read: with `MAX_NODES`, this bounds the height
    /// of its tree (and so the recursion that evaluates and drops it) whatever the text.
    pub(super) nodes: usize,
}

pub(super) const TYPE_WORDS: &[&str] = &[
    "unsigned",
    "signed",
    "int",
    "long",
    "short",
    "char",
    "bool",
    "_Bool",
    "void",
    "const",
    "volatile",
    "struct",
    "u8",
    "u16",
    "u32",
    "u64",
    "s8",
    "s16",
    "s32",
    "s64",
    "__u8",
    "__u16",
    "__u32",
    "__u64",
    "__s8",
    "__s16",
    "__s32",
    "__s64",
    "size_t",
    "ssize_t",
    "pid_t",
    "uid_t",
    "gid_t",
    "loff_t",
    "uint8_t",
    "uint16_t",
    "uint32_t",
    "uint64_t",
    "int8_t",
    "int16_t",
    "int32_t",
    "int64_t",
    "unsigned long long",
];

impl Parser<'_> {
    /// Count one operator node; `None` past the bound.
    fn node(&mut self) -> Option<()> {
        self.nodes += 1;
        (self.nodes <= MAX_NODES).then_some(())
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }
    fn punct(&self, p: &str) -> bool {
        matches!(self.peek(), Some(Tok::Punct(q)) if *q == p)
    }
    pub(super) fn eat(&mut self, p: &str) -> bool {
        let yes = self.punct(p);
        if yes {
            self.at += 1;
        }
        yes
    }
    fn expect(&mut self, p: &str) -> Option<()> {
        self.eat(p).then_some(())
    }
    fn field(&self, name: &str) -> Option<u16> {
        self.fields
            .iter()
            .position(|f| &*f.name == name)
            .and_then(|i| u16::try_from(i).ok())
    }

    pub(super) fn expr(&mut self) -> Option<Expr> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        let r = self.cond();
        self.depth -= 1;
        r
    }

    fn cond(&mut self) -> Option<Expr> {
        let c = self.binary(0)?;
        if self.eat("?") {
            let a = self.expr()?;
            self.expect(":")?;
            let b = self.expr()?;
            self.node()?;
            return Some(Expr::Cond(Box::new(c), Box::new(a), Box::new(b)));
        }
        Some(c)
    }

    fn binary(&mut self, level: usize) -> Option<Expr> {
        const LEVELS: &[&[(&str, Bin)]] = &[
            &[("||", Bin::Or)],
            &[("&&", Bin::And)],
            &[("|", Bin::BitOr)],
            &[("^", Bin::BitXor)],
            &[("&", Bin::BitAnd)],
            &[("==", Bin::Eq), ("!=", Bin::Ne)],
            &[
                ("<=", Bin::Le),
                (">=", Bin::Ge),
                ("<", Bin::Lt),
                (">", Bin::Gt),
            ],
            &[("<<", Bin::Shl), (">>", Bin::Shr)],
            &[("+", Bin::Add), ("-", Bin::Sub)],
            &[("*", Bin::Mul), ("/", Bin::Div), ("%", Bin::Rem)],
        ];
        let Some(ops) = LEVELS.get(level) else {
            return self.unary();
        };
        let mut left = self.binary(level + 1)?;
        'next: loop {
            for (p, op) in *ops {
                if self.eat(p) {
                    let right = self.binary(level + 1)?;
                    self.node()?;
                    left = Expr::Binary(*op, Box::new(left), Box::new(right));
                    continue 'next;
                }
            }
            return Some(left);
        }
    }

    /// `( TYPE )` at the cursor: its size and signedness, and the cursor past it.
    fn cast(&mut self) -> Option<(u8, bool)> {
        let start = self.at;
        if !self.eat("(") {
            return None;
        }
        let mut words = Vec::new();
        loop {
            match self.peek() {
                Some(Tok::Ident(w)) if w != "REC" => {
                    words.push(w.clone());
                    self.at += 1;
                }
                Some(Tok::Punct("*")) if !words.is_empty() => {
                    words.push("*".into());
                    self.at += 1;
                }
                Some(Tok::Punct(")")) if !words.is_empty() => {
                    self.at += 1;
                    break;
                }
                _ => {
                    self.at = start;
                    return None;
                }
            }
        }
        let w: Vec<&str> = words.iter().map(String::as_str).collect();
        // `(name)` alone is a cast when the name is a type (`(u64)`, `( gfp_t)`) or a value
        // follows; else it is a name in parentheses (`(FLAG) | 1`).
        let typeish = |x: &str| TYPE_WORDS.contains(&x) || x.ends_with("_t");
        let starts_value = matches!(
            self.peek(),
            Some(Tok::Punct("(") | Tok::Num(_) | Tok::Ident(_) | Tok::Str(_))
        );
        if w.len() == 1 && !typeish(w[0]) && !starts_value {
            self.at = start;
            return None;
        }
        let known = w.iter().all(|x| typeish(x) || *x == "*" || *x == "struct")
            || w.first() == Some(&"struct");
        if !known {
            // A type of its own (`( gfp_t)`, a typedef): its size is not known here, so the
            // value is left as it is.
            return Some((8, false));
        }
        let signed = !w.contains(&"unsigned")
            && !w.iter().any(|x| {
                x.starts_with('u')
                    || x.starts_with("__u")
                    || *x == "size_t"
                    || *x == "bool"
                    || *x == "_Bool"
            });
        let size = if w.contains(&"*") {
            8
        } else if w.contains(&"char")
            || w.iter()
                .any(|x| x.ends_with('8') || *x == "bool" || *x == "_Bool")
        {
            1
        } else if w.contains(&"short") || w.iter().any(|x| x.ends_with("16")) {
            2
        } else if w.contains(&"long")
            || w.iter()
                .any(|x| x.ends_with("64") || x.ends_with("size_t") || *x == "loff_t")
        {
            8
        } else {
            4
        };
        Some((size, signed))
    }

    fn unary(&mut self) -> Option<Expr> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        let r = self.unary_inner();
        self.depth -= 1;
        r
    }

    fn unary_inner(&mut self) -> Option<Expr> {
        for (p, op) in [("-", Un::Neg), ("!", Un::Not), ("~", Un::BitNot)] {
            if self.eat(p) {
                let e = self.unary()?;
                self.node()?;
                return Some(Expr::Unary(op, Box::new(e)));
            }
        }
        if self.eat("+") {
            return self.unary();
        }
        if let Some((size, signed)) = self.cast() {
            let e = self.unary()?;
            self.node()?;
            return Some(Expr::Cast {
                size,
                signed,
                e: Box::new(e),
            });
        }
        self.postfix()
    }

    fn postfix(&mut self) -> Option<Expr> {
        let mut e = self.primary()?;
        loop {
            if self.eat("[") {
                let i = self.expr()?;
                self.expect("]")?;
                e = match e {
                    Expr::Field(f) => {
                        self.node()?;
                        Expr::Index(f, Box::new(i))
                    }
                    _ => Expr::Unknown,
                };
            } else if self.eat("->") || self.eat(".") {
                let Some(Tok::Ident(name)) = self.peek().cloned() else {
                    return None;
                };
                self.at += 1;
                e = match e {
                    Expr::Unknown => Expr::Unknown,
                    Expr::Rec => self.field(&name).map_or(Expr::Unknown, Expr::Field),
                    _ => Expr::Unknown,
                };
            } else {
                return Some(e);
            }
        }
    }

    fn table(&mut self) -> Option<Table> {
        let mut t = Vec::new();
        while self.eat(",") {
            if t.len() >= MAX_TABLE {
                return None;
            }
            self.expect("{")?;
            let v = self.expr()?;
            self.expect(",")?;
            // The name: a string, or (a table's end marker) a null pointer.
            let name = self.expr()?;
            self.expect("}")?;
            // An entry whose value is a name the format file left unresolved (an enum's
            // `HRTIMER_MODE_ABS`), or that has no text, can never be printed: left out.
            if let (Some(v), Expr::Str(s)) = (eval_const(&v), name) {
                t.push((v, s));
            }
        }
        Some(t.into_boxed_slice())
    }

    fn call(&mut self, name: &str) -> Option<Expr> {
        // The cursor is past the '('.
        let e = match name {
            "__print_symbolic" | "__print_symbolic_u64" => {
                let v = self.expr()?;
                let t = self.table()?;
                self.node()?;
                Expr::Symbolic(Box::new(v), t)
            }
            "__print_flags" | "__print_flags_u64" => {
                let v = self.expr()?;
                self.expect(",")?;
                let delim = match self.expr()? {
                    Expr::Str(s) => s,
                    _ => return None,
                };
                let t = self.table()?;
                self.node()?;
                Expr::Flags(Box::new(v), delim, t)
            }
            "__get_str" | "__get_rel_str" | "__get_dynamic_array" | "__get_rel_dynamic_array" => {
                let Some(Tok::Ident(f)) = self.peek().cloned() else {
                    return None;
                };
                self.at += 1;
                self.field(&f).map_or(Expr::Unknown, Expr::Field)
            }
            _ => {
                // Skip the arguments of anything else: its value is unknown.
                let mut depth = 1usize;
                loop {
                    match self.peek()? {
                        Tok::Punct("(") => depth += 1,
                        Tok::Punct(")") => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    self.at += 1;
                }
                Expr::Unknown
            }
        };
        self.expect(")")?;
        Some(e)
    }

    fn primary(&mut self) -> Option<Expr> {
        match self.peek()?.clone() {
            Tok::Num(v) => {
                self.at += 1;
                Some(Expr::Num(v))
            }
            Tok::Str(s) => {
                self.at += 1;
                Some(Expr::Str(s.into_boxed_slice()))
            }
            Tok::Ident(name) => {
                self.at += 1;
                if self.eat("(") {
                    return self.call(&name);
                }
                // REC stands for the record; `REC->field` follows.
                Some(if name == "REC" {
                    Expr::Rec
                } else {
                    Expr::Unknown
                })
            }
            Tok::Punct("(") => {
                self.at += 1;
                let e = self.expr()?;
                self.expect(")")?;
                Some(e)
            }
            Tok::Punct(_) => None,
        }
    }
}

/// A constant expression (a flag table's value).
pub(super) fn eval_const(e: &Expr) -> Option<u64> {
    match eval(e, &[], &[]) {
        Val::Int(v) => Some(v),
        _ => None,
    }
}

/// An evaluated argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Val<'a> {
    Int(u64),
    Str(std::borrow::Cow<'a, [u8]>),
    Unknown,
}

pub(super) fn field_int(f: &Field, raw: &[u8]) -> Val<'static> {
    match f.value(raw) {
        Value::Int(v) => Val::Int(v as u64),
        Value::UInt(v) | Value::Hex(v) => Val::Int(v),
        _ => Val::Unknown,
    }
}

pub(super) fn eval<'a>(e: &'a Expr, fields: &[Field], raw: &'a [u8]) -> Val<'a> {
    use Val::*;
    match e {
        Expr::Num(v) => Int(*v),
        Expr::Str(s) => Str(std::borrow::Cow::Borrowed(s)),
        Expr::Field(i) => match fields.get(*i as usize) {
            Some(f) => match f.value(raw) {
                Value::Str(s) => Str(std::borrow::Cow::Borrowed(s)),
                _ => field_int(f, raw),
            },
            None => Unknown,
        },
        Expr::Index(i, at) => {
            let (Some(f), Int(at)) = (fields.get(*i as usize), eval(at, fields, raw)) else {
                return Unknown;
            };
            match usize::try_from(at)
                .ok()
                .and_then(|at| f.value(raw).elements().nth(at))
            {
                Some(v) => Int(v as u64),
                None => Unknown,
            }
        }
        Expr::Cast { size, signed, e } => match eval(e, fields, raw) {
            Int(v) => Int(truncate(v, *size, *signed)),
            other => other,
        },
        Expr::Unary(op, e) => match eval(e, fields, raw) {
            Int(v) => Int(match op {
                Un::Neg => v.wrapping_neg(),
                Un::Not => (v == 0) as u64,
                Un::BitNot => !v,
            }),
            _ => Unknown,
        },
        Expr::Binary(op, a, b) => {
            let (Int(a), Int(b)) = (eval(a, fields, raw), eval(b, fields, raw)) else {
                return Unknown;
            };
            Int(match op {
                Bin::Or => (a != 0 || b != 0) as u64,
                Bin::And => (a != 0 && b != 0) as u64,
                Bin::BitOr => a | b,
                Bin::BitXor => a ^ b,
                Bin::BitAnd => a & b,
                Bin::Eq => (a == b) as u64,
                Bin::Ne => (a != b) as u64,
                Bin::Lt => (a < b) as u64,
                Bin::Le => (a <= b) as u64,
                Bin::Gt => (a > b) as u64,
                Bin::Ge => (a >= b) as u64,
                Bin::Shl => a.checked_shl(b.try_into().unwrap_or(u32::MAX)).unwrap_or(0),
                Bin::Shr => a.checked_shr(b.try_into().unwrap_or(u32::MAX)).unwrap_or(0),
                Bin::Add => a.wrapping_add(b),
                Bin::Sub => a.wrapping_sub(b),
                Bin::Mul => a.wrapping_mul(b),
                Bin::Div => match a.checked_div(b) {
                    Some(v) => v,
                    None => return Unknown,
                },
                Bin::Rem => match a.checked_rem(b) {
                    Some(v) => v,
                    None => return Unknown,
                },
            })
        }
        Expr::Cond(c, a, b) => match eval(c, fields, raw) {
            Int(0) => eval(b, fields, raw),
            Int(_) => eval(a, fields, raw),
            _ => Unknown,
        },
        Expr::Symbolic(v, table) => match eval(v, fields, raw) {
            Int(v) => match table.iter().find(|(k, _)| *k == v) {
                Some((_, s)) => Str(std::borrow::Cow::Borrowed(s)),
                None => Str(std::borrow::Cow::Owned(format!("{v:#x}").into_bytes())),
            },
            _ => Unknown,
        },
        Expr::Flags(v, delim, table) => match eval(v, fields, raw) {
            Int(v) => Str(std::borrow::Cow::Owned(flags(v, delim, table))),
            _ => Unknown,
        },
        Expr::Rec | Expr::Unknown => Unknown,
    }
}

/// `__print_flags`, as the kernel prints it: the names of the flags set, in table order,
/// joined by `delim`, then what is left as hex.
pub(super) fn flags(mut v: u64, delim: &[u8], table: &[(u64, Box<[u8]>)]) -> Vec<u8> {
    let mut out = Vec::new();
    if v == 0 {
        if let Some((_, name)) = table.iter().find(|(k, _)| *k == 0) {
            out.extend_from_slice(name);
        }
        return out;
    }
    for (mask, name) in table {
        if v == 0 {
            break;
        }
        if *mask == 0 || v & mask != *mask {
            continue;
        }
        if !out.is_empty() {
            out.extend_from_slice(delim);
        }
        out.extend_from_slice(name);
        v &= !mask;
    }
    if v != 0 {
        if !out.is_empty() {
            out.extend_from_slice(delim);
        }
        out.extend_from_slice(format!("{v:#x}").as_bytes());
    }
    out
}

pub(super) fn truncate(v: u64, size: u8, signed: bool) -> u64 {
    let bits = (size.clamp(1, 8) as u32) * 8;
    if bits == 64 {
        return v;
    }
    let mask = (1u64 << bits) - 1;
    let t = v & mask;
    if signed && t >> (bits - 1) == 1 {
        t | !mask
    } else {
        t
    }
}
