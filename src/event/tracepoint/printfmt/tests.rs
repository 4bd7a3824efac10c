//! The print fmt reader on real and crafted formats, and on any text.

use super::*;
use crate::event::tracepoint::Format;
use crate::testkit::tracepoints as craft;

struct Syms;
impl KernelSymbols for Syms {
    fn symbol(&self, addr: u64) -> Option<(&str, u64)> {
        (0xffffffff81000000..0xffffffff81000100)
            .contains(&addr)
            .then(|| ("tick_nohz_handler", addr - 0xffffffff81000000))
    }
}

fn render_all(f: &Format, raw: &[u8]) -> Vec<(String, String)> {
    let p = f.print.as_ref().expect("print fmt parsed");
    p.renders()
        .iter()
        .map(|r| {
            let mut out = Vec::new();
            assert!(p.render(r, &f.fields, raw, &Syms, &mut out));
            (r.name.to_string(), String::from_utf8(out).unwrap())
        })
        .collect()
}

#[test]
fn sched_switch_prev_state_letters() {
    let f = Format::parse("sched:sched_switch", craft::SCHED_SWITCH).unwrap();
    for (state, want) in [
        (0, "R"),
        (1, "S"),
        (2, "D"),
        (0x100, "R+"),
        (0x101, "S+"),
        (3, "S|D"),
        (0x80, "I"),
        (0x40, "P"),
    ] {
        let raw = craft::sched_switch(b"a", 1, state, b"b", 2);
        assert_eq!(
            render_all(&f, &raw),
            [("prev_state_str".to_string(), want.to_string())],
            "state {state:#x}"
        );
    }
    let raw = craft::sched_switch(b"bash", 42, 1, b"swapper/1", 0);
    let line = f
        .print
        .as_ref()
        .unwrap()
        .render_line(&f.fields, &raw, &Syms)
        .unwrap();
    assert_eq!(
        String::from_utf8(line).unwrap(),
        "prev_comm=bash prev_pid=42 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120"
    );
}

fn fmt(fields: &str, print: &str) -> Format {
    Format::parse(
        "t:t",
        &format!(
            "ID: 1\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n{fields}\nprint fmt: {print}\n"
        ),
    )
    .unwrap()
}

#[test]
fn symbolic_flags_symbols_and_conditionals() {
    let f = fmt(
        "\tfield:unsigned int vec;\toffset:8;\tsize:4;\tsigned:0;\n\tfield:void * function;\toffset:16;\tsize:8;\tsigned:0;\n\tfield:int dead;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:unsigned long fl;\toffset:32;\tsize:8;\tsigned:0;",
        r#""vec=%u [action=%s] function=%ps at=%pS dead=%s fl=%s", REC->vec, __print_symbolic(REC->vec, { 0, "HI" }, { 7, "SCHED" }), REC->function, REC->function, REC->dead ? "true" : "false", __print_flags(REC->fl, "|", { 1, "A" }, { 4, "C" })"#,
    );
    let mut raw = vec![0u8; 40];
    raw[8..12].copy_from_slice(&7u32.to_ne_bytes());
    raw[16..24].copy_from_slice(&0xffffffff81000010u64.to_ne_bytes());
    raw[24..28].copy_from_slice(&1i32.to_ne_bytes());
    raw[32..40].copy_from_slice(&0x17u64.to_ne_bytes());
    let got = render_all(&f, &raw);
    let want = [
        ("vec_str", "SCHED"),
        ("function_str", "tick_nohz_handler"),
        ("dead_str", "true"),
        ("fl_str", "A|C|0x12"),
    ]
    .map(|(a, b)| (a.to_string(), b.to_string()));
    assert_eq!(got, want);
    let p = f.print.as_ref().unwrap();
    assert_eq!(
        String::from_utf8(p.render_line(&f.fields, &raw, &Syms).unwrap()).unwrap(),
        "vec=7 [action=SCHED] function=tick_nohz_handler at=tick_nohz_handler+0x10 dead=true fl=A|C|0x12"
    );
    // An unknown value, an unknown address.
    raw[8..12].copy_from_slice(&3u32.to_ne_bytes());
    raw[16..24].copy_from_slice(&0x1234u64.to_ne_bytes());
    let got = render_all(&f, &raw);
    assert_eq!(got[0].1, "0x3");
    assert_eq!(got[1].1, "0x1234");
    assert_eq!(
        p.symbol_addresses(&f.fields, &raw).collect::<Vec<_>>(),
        [0x1234, 0x1234]
    );
}

#[test]
fn printf_conversions_as_c_writes_them() {
    let f = fmt(
        "\tfield:int a;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:unsigned long b;\toffset:16;\tsize:8;\tsigned:0;\n\tfield:char c[8];\toffset:24;\tsize:8;\tsigned:0;",
        r#""%03d|%-4d|%+d|%x|%#lx|%08lx|%lu|%5s|%-5s|%.2s|%c|%%|%p|%llu", REC->a, REC->a, REC->a, REC->a, REC->b, REC->b, REC->b, REC->c, REC->c, REC->c, REC->a, REC->b, (unsigned long long) REC->a"#,
    );
    let mut raw = vec![0u8; 32];
    raw[8..12].copy_from_slice(&(-5i32).to_ne_bytes());
    raw[16..24].copy_from_slice(&0xabcu64.to_ne_bytes());
    raw[24..27].copy_from_slice(b"hey");
    let p = f.print.as_ref().unwrap();
    let line = p.render_line(&f.fields, &raw, &NoSymbols).unwrap();
    let mut want = b"-05|-5  |-5|fffffffb|0xabc|00000abc|2748|  hey|hey  |he|".to_vec();
    want.push(-5i32 as u8);
    want.extend_from_slice(b"|%|0xabc|18446744073709551611");
    assert_eq!(line, want);
    assert!(p.renders().is_empty(), "no field turned into text");
}

#[test]
fn raw_syscalls_and_arrays() {
    let f = fmt(
        "\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;",
        r#""NR %ld (%lx, %lx, %lx, %lx, %lx, %lx)", REC->id, REC->args[0], REC->args[1], REC->args[2], REC->args[3], REC->args[4], REC->args[5]"#,
    );
    let mut raw = vec![0u8; 64];
    raw[8..16].copy_from_slice(&(-1i64).to_ne_bytes());
    raw[16..24].copy_from_slice(&0x10u64.to_ne_bytes());
    let p = f.print.as_ref().unwrap();
    assert_eq!(
        String::from_utf8(p.render_line(&f.fields, &raw, &NoSymbols).unwrap()).unwrap(),
        "NR -1 (10, 0, 0, 0, 0, 0)"
    );
}

#[test]
fn what_cannot_be_read_renders_nothing() {
    for bad in [
        "",
        "REC->a",
        r#""%d""#,
        r#""%d", REC->a, "#,
        r#""%d", (REC->a"#,
        r#""%y", REC->a"#,
        r#""%d", __print_flags(REC->a, 3, { 1, "A" })"#,
    ] {
        let f = fmt("\tfield:int a;\toffset:8;\tsize:4;\tsigned:1;", bad);
        assert!(f.print.is_none(), "{bad}");
    }
    // A table entry whose value is a name left unresolved (an enum's), or that has no text,
    // is left out: the others still print, and a value of no entry prints as hex.
    let f = fmt(
        "\tfield:int a;\toffset:8;\tsize:4;\tsigned:1;",
        r#""%s", __print_symbolic(REC->a, { x, "A" }, { 2, "B" }, { -1, ((void *)0) })"#,
    );
    let p = f.print.as_ref().expect("read");
    let mut raw = vec![0u8; 12];
    raw[8] = 2;
    assert_eq!(p.render_line(&f.fields, &raw, &NoSymbols).unwrap(), b"B");
    raw[8] = 3;
    assert_eq!(p.render_line(&f.fields, &raw, &NoSymbols).unwrap(), b"0x3");
    // Casts to types of their own, and names in parentheses.
    let f = fmt(
        "\tfield:unsigned long a;\toffset:8;\tsize:8;\tsigned:0;",
        r#""%s|%lx", (REC->a) ? __print_flags(REC->a, "|", {( gfp_t)((((1UL))) << (1)), "X"}, {(FLAG) | 4, "Y"}) : "none", ( unsigned long)(( gfp_t)REC->a)"#,
    );
    let p = f.print.as_ref().expect("read");
    let mut raw = vec![0u8; 16];
    raw[8] = 2;
    assert_eq!(p.render_line(&f.fields, &raw, &NoSymbols).unwrap(), b"X|2");
    raw[8] = 0;
    assert_eq!(
        p.render_line(&f.fields, &raw, &NoSymbols).unwrap(),
        b"none|0"
    );
    // Too deep, or too long a chain of operators (its tree would be as tall).
    let long = format!("\"%d\", 1{}", " + 1".repeat(5000));
    assert!(
        fmt("\tfield:int a;\toffset:8;\tsize:4;\tsigned:1;", &long)
            .print
            .is_none()
    );
    let deep = format!("\"%d\", {}1{}", "(".repeat(500), ")".repeat(500));
    assert!(
        fmt("\tfield:int a;\toffset:8;\tsize:4;\tsigned:1;", &deep)
            .print
            .is_none()
    );
    // Unknown helpers and %pI4 parse, and render nothing for their conversion.
    let f = fmt(
        "\tfield:int a;\toffset:8;\tsize:4;\tsigned:1;",
        r#""%d %s %pI4", REC->a, some_helper(REC->a, 3), REC->a"#,
    );
    let p = f.print.as_ref().unwrap();
    assert!(p.render_line(&f.fields, &[0; 12], &NoSymbols).is_none());
    assert!(p.renders().iter().all(|r| {
        let mut o = Vec::new();
        !p.render(r, &f.fields, &[0; 12], &NoSymbols, &mut o) && o.is_empty()
    }));
}

#[test]
fn a_short_record_renders_nothing_for_what_it_lacks() {
    let f = Format::parse("sched:sched_switch", craft::SCHED_SWITCH).unwrap();
    let raw = craft::sched_switch(b"bash", 42, 1, b"swapper/1", 0);
    let p = f.print.as_ref().unwrap();
    for n in 0..raw.len() {
        let _ = p.render_line(&f.fields, &raw[..n], &Syms);
        for r in p.renders() {
            let _ = p.render(r, &f.fields, &raw[..n], &Syms, &mut Vec::new());
        }
    }
}

proptest::proptest! {
    #[test]
    fn any_text_parses_or_not_without_panicking(text in ".{0,300}") {
        let f = fmt("\tfield:int a;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:char s[4];\toffset:12;\tsize:4;\tsigned:0;", &text);
        if let Some(p) = &f.print {
            let _ = p.render_line(&f.fields, &[0x41; 16], &NoSymbols);
        }
    }

    #[test]
    fn any_expression_of_the_grammar_evaluates_without_panicking(
        parts in proptest::collection::vec(proptest::sample::select(vec![
            "REC->a", "REC->s", "1", "0x80", "-", "+", "*", "/", "%", "<<", ">>", "&", "|",
            "^", "&&", "||", "?", ":", "(", ")", "!", "~", "==", "<", "(unsigned char)",
            "__print_symbolic(REC->a, { 1, \"X\" })", "\"t\"", "64", "0",
        ]), 0..40),
        raw in proptest::collection::vec(proptest::num::u8::ANY, 0..24),
    ) {
        let text = format!("\"%d %s %x\", {}, {}, REC->a", parts.join(" "), parts.join(" "));
        let f = fmt("\tfield:int a;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:char s[4];\toffset:12;\tsize:4;\tsigned:0;", &text);
        if let Some(p) = &f.print {
            let _ = p.render_line(&f.fields, &raw, &Syms);
            for r in p.renders() {
                let _ = p.render(r, &f.fields, &raw, &Syms, &mut Vec::new());
            }
        }
    }

    #[test]
    fn integers_print_as_std_formats_them(v in proptest::num::i32::ANY, w in 0usize..12) {
        let f = fmt(
            "\tfield:int a;\toffset:8;\tsize:4;\tsigned:1;",
            &format!(r#""%{w}d|%0{w}x|%-{w}u", REC->a, REC->a, REC->a"#),
        );
        let mut raw = vec![0u8; 12];
        raw[8..12].copy_from_slice(&v.to_ne_bytes());
        let line = f.print.as_ref().unwrap().render_line(&f.fields, &raw, &NoSymbols).unwrap();
        let want = format!("{v:>w$}|{:0w$x}|{:<w$}", v as u32, v as u32);
        proptest::prop_assert_eq!(String::from_utf8(line).unwrap(), want);
    }
}

#[test]
fn value_tables_name_their_field_in_walk_order() {
    let f = fmt(
        "\tfield:unsigned int vec;\toffset:8;\tsize:4;\tsigned:0;\n\tfield:unsigned long fl;\toffset:16;\tsize:8;\tsigned:0;",
        r#""%s %s %s", (REC->fl & 3) ? __print_flags(REC->fl & 3, "|", { 1, "A" }, { 2, "B" }) : "none", __print_symbolic(REC->vec, { 0, "HI" }, { 7, "SCHED" }), REC->vec ? "x" : "y""#,
    );
    let p = f.print.as_ref().unwrap();
    let t = p.value_tables(&f.fields);
    assert_eq!(t.len(), 2, "{t:?}");
    assert_eq!((t[0].field, t[0].delim), ("fl", Some(&b"|"[..])));
    assert_eq!(t[0].values.len(), 2);
    assert_eq!((t[0].values[1].0, &*t[0].values[1].1), (2, &b"B"[..]));
    assert_eq!((t[1].field, t[1].delim), ("vec", None));
    assert_eq!((t[1].values[1].0, &*t[1].values[1].1), (7, &b"SCHED"[..]));
}
