//! `--plain` lines parse one way only: values that hold the line's separators are quoted,
//! so a name such as `x+0x0, dso: [kernel.kallsyms], period: 1 } {` stays one value. The
//! parser below is the one the README describes; hostile names go through the real binary
//! (a process that renames itself, a file named with separators that is executed and
//! mapped, a JIT's perf map symbol) and any bytes through the writer (a property test).

use crate::common;

use common::InTime;

use proptest::prelude::*;

use perfwatch::event::{Event, EventKind};
use perfwatch::testkit::tracepoints as craft;

/// One value of a line: text (quotes removed, `\"` read as `"`; other escapes kept as the
/// line writes them), or a group (`{ ... }`).
#[derive(Clone, Debug, PartialEq, Eq)]
enum V {
    Text(String),
    Group(Vec<(String, V)>),
}

/// A line's members, in order.
type Members = Vec<(String, V)>;

/// Split at `sep` outside double quotes and braces.
fn split_top<'a>(s: &'a str, sep: &str) -> Vec<&'a str> {
    let (mut out, mut depth, mut quoted, mut esc, mut last) = (Vec::new(), 0i32, false, false, 0);
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if quoted {
            if esc {
                esc = false;
            } else if c == b'\\' {
                esc = true;
            } else if c == b'"' {
                quoted = false;
            }
        } else if c == b'\\' {
            // An escape (`\\`, `\n`, `\xNN`, `\u{202e}`) is one unit of its value.
            i += perfwatch::text::escape_len(&b[i..]);
            continue;
        } else if c == b'"' {
            quoted = true;
        } else if c == b'{' {
            depth += 1;
        } else if c == b'}' {
            depth -= 1;
        } else if depth == 0 && b[i..].starts_with(sep.as_bytes()) {
            out.push(&s[last..i]);
            i += sep.len();
            last = i;
            continue;
        }
        i += 1;
    }
    out.push(&s[last..]);
    out
}

fn value(v: &str) -> Option<V> {
    if let Some(inner) = v.strip_prefix("{ ").and_then(|r| r.strip_suffix(" }")) {
        return Some(V::Group(members(inner)?));
    }
    if v.starts_with('"') {
        let inner = v.strip_prefix('"')?.strip_suffix('"')?;
        let mut out = String::new();
        let mut it = inner.chars().peekable();
        while let Some(c) = it.next() {
            if c == '\\' && it.peek() == Some(&'"') {
                out.push('"');
                it.next();
            } else if c == '"' {
                return None; // an unescaped quote inside quotes
            } else {
                out.push(c);
                if c == '\\' {
                    out.push(it.next()?);
                }
            }
        }
        return Some(V::Text(out));
    }
    // Unquoted: never a quote, a brace or a comma outside an escape.
    if perfwatch::text::needs_quotes(v.as_bytes()) {
        return None;
    }
    Some(V::Text(v.to_string()))
}

fn members(s: &str) -> Option<Vec<(String, V)>> {
    split_top(s, ", ")
        .into_iter()
        .map(|m| {
            let (k, v) = m.split_once(": ")?;
            if k.is_empty() || !k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return None;
            }
            Some((k.to_string(), value(v)?))
        })
        .collect()
}

/// A whole line: the `cpu: pid: tid:` prefix and the `{ ... }` body.
fn parse_line(line: &str) -> Option<(Members, Members)> {
    let (prefix, body) = line.split_once(" { ")?;
    let body = body.strip_suffix(" }").or_else(|| body.strip_suffix('}'))?;
    let prefix = members(prefix)?;
    let body = members(body)?;
    // No key twice in one object.
    for m in [&prefix, &body] {
        let mut keys: Vec<&String> = m.iter().map(|(k, _)| k).collect();
        keys.sort();
        keys.dedup();
        if keys.len() != m.len() {
            return None;
        }
    }
    Some((prefix, body))
}

fn text(members: &[(String, V)], key: &str) -> Option<String> {
    members.iter().find_map(|(k, v)| match v {
        V::Text(t) if k == key => Some(t.clone()),
        _ => None,
    })
}

fn esc(b: &[u8]) -> String {
    perfwatch::text::escape(b)
}

fn ev(kind: EventKind) -> Event {
    Event {
        cpu: 1,
        pid: 7,
        tid: 8,
        time: 5,
        id: 0,
        kind,
    }
}

const HOSTILE: &str = "x+0x0, dso: [kernel.kallsyms], period: 1 } {";

#[test]
fn hostile_values_parse_back_to_themselves() {
    for name in [
        HOSTILE.as_bytes(),
        b"\"quoted\", pid: 1",
        b" leading and trailing ",
        b"a <- b",
        b"back\\slash\"",
        b"plain",
        b"",
    ] {
        let comm = ev(EventKind::Comm {
            pid: 7,
            tid: 7,
            comm: name.into(),
            exec: false,
        });
        let line = comm.to_string();
        let (prefix, body) = parse_line(&line).unwrap_or_else(|| panic!("{line}"));
        assert_eq!(text(&prefix, "pid").as_deref(), Some("7"), "{line}");
        assert_eq!(text(&body, "comm"), Some(esc(name)), "{line}");
        assert_eq!(body.len(), 4, "{line}");
    }
    // A line that needs no quotes is as it always was.
    let plain = ev(EventKind::Comm {
        pid: 7,
        tid: 7,
        comm: (*b"bash").into(),
        exec: true,
    });
    assert_eq!(
        plain.to_string(),
        "cpu: 1, pid: 7, tid: 8 { type: comm, pid: 7, tid: 7, comm: bash }"
    );
}

proptest! {
    #[test]
    fn any_comm_filename_or_tracepoint_text_parses_back(
        name in proptest::collection::vec(any::<u8>(), 0..40),
        pick in proptest::collection::vec(proptest::sample::select(vec![
            ", ", "{", "}", "\"", "\\", " ", "<-", ": ", "x", "é", "\u{202e}", "\n",
        ]), 0..12),
    ) {
        let mut bytes = name.clone();
        for p in &pick {
            bytes.extend_from_slice(p.as_bytes());
        }
        let comm = ev(EventKind::Comm { pid: 1, tid: 1, comm: bytes.clone().into(), exec: true });
        let map = perfwatch::testkit::events::mmap(1, 0, 7, 0x1000, 0x1000, 0, &bytes);
        let desc = craft::desc(0, "sched:sched_process_exec", craft::SCHED_PROCESS_EXEC);
        let exec = ev(craft::sample(desc, 1, 0, craft::sched_process_exec(&bytes, 7, 7)));
        // A tracepoint's text stops at its first NUL; record names are kept whole.
        let cut = esc(perfwatch::text::until_nul(&bytes));
        for (e, key, want) in [
            (comm, "comm", esc(&bytes)),
            (map, "filename", esc(&bytes)),
            (exec, "filename", cut),
        ] {
            let line = e.to_string();
            prop_assert!(!line.contains('\n'));
            let parsed = parse_line(&line);
            prop_assert!(parsed.is_some(), "{}", line);
            let (_, body) = parsed.unwrap();
            prop_assert_eq!(text(&body, key), Some(want), "{}", line);
        }
    }
}

/// Every line of a `--plain` run parses; returns them parsed.
fn parse_all(stdout: &str) -> Vec<(Members, Members)> {
    stdout
        .lines()
        .map(|l| parse_line(l).unwrap_or_else(|| panic!("a line that does not parse: {l}")))
        .collect()
}

#[test]
fn a_process_that_names_itself_with_separators_stays_one_value() {
    require_perf!();
    let r = common::run(&mut common::plain_sh(
        "printf %s 'x, pid: 1 } {' > /proc/$$/comm; /bin/true",
    ));
    r.exited(0);
    let lines = parse_all(&r.stdout);
    assert!(
        lines
            .iter()
            .any(|(_, b)| text(b, "comm").as_deref() == Some("x, pid: 1 } {")),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("comm: \"x, pid: 1 } {\" }"),
        "{}",
        r.stdout
    );
}

#[test]
fn a_file_named_with_separators_is_one_value_in_every_record() {
    let _tracefs = require_tracefs!();
    let dir = tempfile::tempdir().unwrap();
    let name = "t, pid: 1 } {";
    let prog = dir.path().join(name);
    std::fs::copy("/bin/true", &prog).unwrap();
    let r = common::run(
        common::perfwatch()
            .args(["--plain", "-e", "sched:sched_process_exec", "--"])
            .arg(&prog),
    );
    r.exited(0);
    let lines = parse_all(&r.stdout);
    let path = prog.display().to_string();
    let has = |key: &str, want: &str| {
        lines
            .iter()
            .any(|(_, b)| text(b, key).as_deref() == Some(want))
    };
    assert!(has("comm", name), "the exec's comm: {}", r.stdout);
    assert!(
        has("filename", &path),
        "the mapping and the tracepoint: {}",
        r.stdout
    );
    let exec = lines
        .iter()
        .find(|(_, b)| text(b, "event").as_deref() == Some("sched:sched_process_exec"))
        .expect("the tracepoint's sample");
    assert_eq!(text(&exec.1, "filename"), Some(path.clone()));
    assert_eq!(text(&exec.1, "type").as_deref(), Some("sample"));
}

#[test]
fn a_jit_symbol_named_with_separators_is_one_value() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("jit.c");
    std::fs::write(
        &src,
        r#"#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>
static char path[64];
static void done(int sig) { (void)sig; unlink(path); _exit(0); }
int main(int argc, char **argv) {
    unsigned char *p = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || argc < 2) return 1;
    p[0] = 0xeb; p[1] = 0xfe; /* jmp . */
    snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
    FILE *f = fopen(path, "w");
    if (!f) return 1;
    fprintf(f, "%lx 2 %s\n", (unsigned long)p, argv[1]);
    fclose(f);
    /* One second of its own CPU time, however loaded the machine. */
    struct itimerval t = {{0, 0}, {1, 0}};
    signal(SIGVTALRM, done);
    setitimer(ITIMER_VIRTUAL, &t, 0);
    ((void (*)(void))p)();
    return 0;
}
"#,
    )
    .unwrap();
    let jit = dir.path().join("jit");
    match std::process::Command::new("cc")
        .arg("-o")
        .arg(&jit)
        .arg(&src)
        .output_in_time()
    {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!("cc failed: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => skip!("no C compiler to build the JIT stand-in ({e})"),
    }
    let r = common::run(
        common::perfwatch()
            .args(["--plain", "-e", "cpu-clock", "-F", "1000", "--"])
            .arg(&jit)
            .arg(HOSTILE),
    );
    r.exited(0);
    let lines = parse_all(&r.stdout);
    let named: Vec<_> = lines
        .iter()
        .filter(|(_, b)| text(b, "sym").is_some_and(|s| s.starts_with(HOSTILE)))
        .collect();
    // (Samples taken before perfwatch first reads the map may stay unnamed.)
    assert!(
        named.len() >= 10,
        "{} samples named by the map: {}",
        named.len(),
        r.stdout
    );
    for (_, b) in named {
        assert_eq!(text(b, "sym"), Some(format!("{HOSTILE}+0x0")));
        assert_ne!(text(b, "dso").as_deref(), Some("[kernel.kallsyms]"));
        assert!(text(b, "period").is_some_and(|p| p.parse::<u64>().is_ok()));
    }
}
