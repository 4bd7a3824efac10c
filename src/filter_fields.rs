//! Which tracepoint field a filter key means, and whether a value can be that field's.
//!
//! The rule a user reads (README, Filters):
//!
//! - `common_pid:`, `common_tid:`, `common_comm:`, `common_cpu:` always mean the task that
//!   was running when the record was written and its CPU (the `cpu: pid: tid:` of a
//!   `--plain` line), whatever the event: perf script's names for them;
//! - a tracepoint field's own name means that field, on the samples of the events that have
//!   it; `pid:`, `tid:`, `comm:`, `cpu:` and `filename:` too (sched_wakeup's `pid` is the
//!   woken task), which mean the record's own task, CPU or file on every other record;
//! - `fields.NAME:` is always field `NAME` (also one named like a key that is always the
//!   record's: `type`, `event`, `ppid`, `cgroup`, `sym`, `dso`);
//! - `NAME_str:` is the text the print fmt makes of field `NAME` (`prev_state_str:R+`),
//!   and a field that has such a text also takes it as its value (`prev_state:D`).
//!
//! A value that cannot be any watched field of that name (`prev_pid:abc`, `prev_state:Q`)
//! is refused with the field, its event and its type, and so is a key no watched event has.

use crate::event::tracepoint::{Field, FieldType, Format};

/// What a value of a field term was written as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Wanted<'a> {
    /// The term as written (`prev_state:Q`).
    pub term: &'a str,
    /// The key without a `fields.` prefix.
    pub name: &'a str,
    pub value: &'a str,
    /// The value reads as numbers (a list of numbers and ranges).
    pub numeric: bool,
}

/// A field of a watched event that a key names: the event, the field, and the text the
/// print fmt makes of it, if any.
struct Found<'f> {
    event: &'f str,
    field: Option<&'f Field>,
    /// The field's print fmt text (`prev_state_str`): its spellings and flag delimiter.
    render: Option<&'f crate::event::tracepoint::printfmt::Render>,
}

fn find<'f>(formats: &[&'f Format], name: &str) -> Vec<Found<'f>> {
    let mut out = Vec::new();
    for f in formats {
        let renders = f.print.as_ref().map_or(&[][..], |p| p.renders());
        if let Some(i) = f.fields.iter().position(|x| &*x.name == name) {
            out.push(Found {
                event: &f.name,
                field: f.fields.get(i),
                render: renders.iter().find(|r| r.field as usize == i),
            });
        } else if let Some(r) = renders.iter().find(|r| &*r.name == name) {
            out.push(Found {
                event: &f.name,
                field: None,
                render: Some(r),
            });
        }
    }
    out
}

/// The type of a field as a filter error names it.
fn type_name(field: &Field) -> String {
    match field.ty {
        FieldType::Int {
            hex: true, size, ..
        } => format!("an address ({} bytes)", size),
        FieldType::Int {
            signed: true, size, ..
        } => format!("a signed {}-bit number", size as u32 * 8),
        FieldType::Int { size, .. } => format!("an unsigned {}-bit number", size as u32 * 8),
        FieldType::Str => "text".to_string(),
        FieldType::Array { elem, .. } => format!("an array of {}-bit numbers", elem as u32 * 8),
    }
}

/// The numbers a field of this type can hold.
fn range(field: &Field) -> Option<(i128, i128)> {
    let bits = |b: u8| (b.clamp(1, 8) as u32) * 8;
    match field.ty {
        FieldType::Int {
            signed: true,
            hex: false,
            size,
        }
        | FieldType::Array {
            signed: true,
            elem: size,
        } => {
            let b = bits(size);
            Some((-(1i128 << (b - 1)), (1i128 << (b - 1)) - 1))
        }
        FieldType::Int { size, .. }
        | FieldType::Array {
            elem: size,
            signed: false,
        } => Some((0, (1i128 << bits(size)) - 1)),
        FieldType::Str => None,
    }
}

/// Does `value` read as one of `spellings` (the names a `__print_symbolic`/`__print_flags`
/// and the literals of its expression can write), joined by `delim` or run together
/// (`R+`, `S|D`)?
pub(crate) fn spelled(value: &[u8], spellings: &[Box<[u8]>], delim: Option<&[u8]>) -> bool {
    if value.is_empty() {
        return false;
    }
    // Longest names first, greedy; bounded by the value's length.
    let mut names: Vec<&[u8]> = spellings.iter().map(|s| &s[..]).collect();
    names.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut rest = value;
    while !rest.is_empty() {
        if let Some(d) = delim.filter(|d| !d.is_empty() && rest.starts_with(d)) {
            rest = &rest[d.len()..];
            continue;
        }
        match names.iter().find(|n| !n.is_empty() && rest.starts_with(n)) {
            Some(n) => rest = &rest[n.len()..],
            None => return false,
        }
    }
    true
}

fn quote_list(spellings: &[Box<[u8]>]) -> String {
    spellings
        .iter()
        .map(|s| crate::text::escape(s))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Check one field term against the watched tracepoints: `Ok` when some watched event has
/// the field and the value can be its, else the one line that says why not. `builtin` says
/// the key also means the record's own (a [`SHADOWED`] key): then the value only has to fit
/// that, for the records without the field.
pub fn check(formats: &[&Format], w: &Wanted<'_>, builtin: bool) -> Result<(), String> {
    let found = find(formats, w.name);
    if found.is_empty() {
        if builtin {
            return Ok(());
        }
        let mut names: Vec<&str> = formats
            .iter()
            .flat_map(|f| {
                f.fields
                    .iter()
                    .filter(|x| !x.common)
                    .map(|x| &*x.name)
                    .chain(
                        f.print
                            .as_ref()
                            .map_or(&[][..], |p| p.renders())
                            .iter()
                            .map(|r| &*r.name),
                    )
            })
            .collect();
        names.dedup();
        let fields = if formats.is_empty() {
            "no tracepoint is watched".to_string()
        } else {
            format!(
                "the watched tracepoints' fields are {}",
                names.iter().take(40).copied().collect::<Vec<_>>().join(" ")
            )
        };
        return Err(format!(
            "unknown filter key '{}' in '{}': {fields}; keys: type, pid, tid, ppid, cpu, comm, \
             argv, cgroup, filename, event, sym, dso, common_pid, common_tid, common_comm, common_cpu",
            w.term.split(':').next().unwrap_or(w.name),
            w.term
        ));
    }
    let mut why = Vec::new();
    for f in &found {
        let text_ok = |r: &crate::event::tracepoint::printfmt::Render| {
            r.symbol
                || w.value.contains(['*', '?'])
                || w.value
                    .split(',')
                    .all(|v| spelled(v.as_bytes(), &r.spellings, r.delim.as_deref()))
        };
        match (f.field, f.render) {
            // A text member (`prev_state_str`): its spellings.
            (None, Some(r)) => {
                if text_ok(r) {
                    return Ok(());
                }
                why.push(format!(
                    "{} of {} is one of {}",
                    w.name,
                    f.event,
                    quote_list(&r.spellings)
                ));
            }
            (Some(field), render) => {
                if field.ty == FieldType::Str {
                    return Ok(());
                }
                if w.numeric {
                    let fits = range(field).is_none_or(|(lo, hi)| {
                        numbers(w.value)
                            .unwrap_or_default()
                            .iter()
                            .all(|(a, b)| lo <= *a && *b <= hi)
                    });
                    if fits {
                        return Ok(());
                    }
                    why.push(format!(
                        "{} of {} is {}: '{}' is out of its range",
                        w.name,
                        f.event,
                        type_name(field),
                        w.value
                    ));
                    continue;
                }
                match render {
                    Some(r) if text_ok(r) => return Ok(()),
                    Some(r) => why.push(format!(
                        "{} of {} is {} shown as {}{}",
                        w.name,
                        f.event,
                        type_name(field),
                        quote_list(&r.spellings),
                        r.delim
                            .as_ref()
                            .map(|d| format!(
                                " (combined with '{}', as {}_str shows)",
                                crate::text::escape(d),
                                w.name
                            ))
                            .unwrap_or_default()
                    )),
                    None => why.push(format!(
                        "{} of {} is {}: give a number, a range such as 1-9, or a list",
                        w.name,
                        f.event,
                        type_name(field)
                    )),
                }
            }
            (None, None) => {}
        }
    }
    if builtin && why.is_empty() {
        return Ok(());
    }
    Err(format!(
        "'{}' cannot match: {}",
        w.term,
        crate::text::escape(why.join("; ").as_bytes())
    ))
}

/// A value as numbers: a list of `N` or `A-B`, decimal (signed) or `0x` hex.
pub fn numbers(value: &str) -> Option<Vec<(i128, i128)>> {
    let num = |s: &str| -> Option<i128> {
        let s = s.trim();
        let (neg, digits) = match s.strip_prefix('-') {
            Some(d) => (true, d),
            None => (false, s),
        };
        let v = match digits.strip_prefix("0x") {
            Some(h) => i128::from_str_radix(h, 16).ok()?,
            None if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
                digits.parse().ok()?
            }
            None => return None,
        };
        Some(if neg { -v } else { v })
    };
    value
        .split(',')
        .map(|item| match num(item) {
            Some(v) => Some((v, v)),
            None => {
                // A range: the dash after the first character (which may be a minus sign).
                let at = item.get(1..)?.find('-')? + 1;
                let (a, b) = (num(&item[..at])?, num(&item[at + 1..])?);
                (a <= b).then_some((a, b))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, EventKind};
    use crate::filter::{CommLookup, Filter};
    use crate::testkit::tracepoints as craft;

    struct Names;
    impl CommLookup for Names {
        fn name(&self, pid: u32, _time: u64) -> Option<&[u8]> {
            (pid == 42).then_some(&b"bash"[..])
        }
    }

    fn m(f: &str, ev: &Event) -> bool {
        Filter::parse(f).unwrap().matches(ev, &Names)
    }

    /// `ppid` forks `pid` on CPU 1 at time 5.
    fn fork(pid: u32, ppid: u32) -> Event {
        crate::testkit::events::fork(1, 5, pid, ppid)
    }

    fn switch(prev: &[u8], prev_pid: i32, next: &[u8], next_pid: i32) -> Event {
        let desc = craft::desc(0, "sched:sched_switch", craft::SCHED_SWITCH);
        Event {
            cpu: 0,
            pid: 1,
            tid: 1,
            time: 7,
            id: 0,
            kind: craft::sample(
                desc,
                1,
                0,
                craft::sched_switch(prev, prev_pid, 1, next, next_pid),
            ),
        }
    }

    fn wakeup(comm: &[u8], pid: i32, running: u32) -> Event {
        use crate::testkit::tracepoints as craft;
        let f = "name: sched_wakeup\nID: 300\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:int target_cpu;\toffset:28;\tsize:4;\tsigned:1;\n\nprint fmt: \"comm=%s pid=%d target_cpu=%03d\", REC->comm, REC->pid, REC->target_cpu\n";
        let desc = craft::desc(0, "sched:sched_wakeup", f);
        let mut raw = vec![0u8; 32];
        raw[4..8].copy_from_slice(&(running as i32).to_ne_bytes());
        raw[8..8 + comm.len()].copy_from_slice(comm);
        raw[24..28].copy_from_slice(&pid.to_ne_bytes());
        raw[28..32].copy_from_slice(&1i32.to_ne_bytes());
        Event {
            kind: craft::sample(desc, 1, 0, raw),
            cpu: 0,
            pid: running,
            tid: running,
            time: 7,
            id: 0,
        }
    }

    #[test]
    fn a_fields_own_name_is_the_field_and_common_keys_the_running_task() {
        // sched_wakeup of pid 7 ("kworker/0:1") by the running task 42 ("bash").
        let w = wakeup(b"kworker/0:1", 7, 42);
        assert!(m("pid:7", &w), "pid: is the woken task, the field");
        assert!(!m("pid:42", &w));
        assert!(m("common_pid:42", &w), "common_pid: the running task");
        assert!(!m("common_pid:7", &w));
        assert!(m("comm:kworker*", &w), "the field's comm");
        assert!(m("common_comm:bash", &w), "the running task's name");
        assert!(m("fields.pid:7", &w));
        assert!(m("common_cpu:0", &w) && m("common_tid:42", &w));
        // On records without the field, the keys mean the record's own task.
        assert!(m("pid:2", &fork(2, 1)) && m("common_pid:1", &fork(2, 1)));
        assert!(
            !m("fields.pid:2", &fork(2, 1)),
            "no field pid in a fork record"
        );
        // cpu: is the record's CPU where no field is named cpu.
        assert!(m("cpu:0", &w));
    }

    #[test]
    fn symbolic_values_match_the_print_fmt_text() {
        let sleeping = switch(b"bash", 42, b"x", 0);
        let mut preempted = switch(b"bash", 42, b"x", 0);
        if let EventKind::Sample { raw: Some(raw), .. } = &mut preempted.kind {
            raw[32..40].copy_from_slice(&0x100i64.to_ne_bytes());
        }
        assert!(m("prev_state:S", &sleeping));
        assert!(!m("prev_state:D", &sleeping));
        assert!(
            !m("prev_state:s", &sleeping),
            "case matters: t is traced, T stopped"
        );
        assert!(m("prev_state:R+", &preempted) && m("prev_state:R*", &preempted));
        assert!(m("prev_state:D,R+", &preempted));
        assert!(m("prev_state_str:R+", &preempted));
        assert!(m("prev_state:0x100", &preempted), "the number still works");
    }

    fn w<'a>(term: &'a str) -> Wanted<'a> {
        let (name, value) = term.split_once(':').unwrap();
        Wanted {
            term,
            name: name.strip_prefix("fields.").unwrap_or(name),
            value,
            numeric: numbers(value).is_some(),
        }
    }

    #[test]
    fn values_are_checked_against_the_fields_types() {
        let sw = Format::parse("sched:sched_switch", craft::SCHED_SWITCH).unwrap();
        let ex = Format::parse("sched:sched_process_exec", craft::SCHED_PROCESS_EXEC).unwrap();
        let f = [&sw, &ex];
        let ok = |t: &str| check(&f, &w(t), false);
        for good in [
            "prev_pid:42",
            "prev_pid:1-9,0x10",
            "prev_pid:-5",
            "prev_comm:bash",
            "prev_comm:123",
            "prev_state:S",
            "prev_state:R+",
            "prev_state:S|D",
            "prev_state:D,S",
            "prev_state:R*",
            "prev_state:1",
            "prev_state_str:R+",
            "filename:*bin*",
            "old_pid:7",
            "common_pid:7",
        ] {
            assert_eq!(ok(good), Ok(()), "{good}");
        }
        let e = ok("prev_pid:abc").unwrap_err();
        assert!(
            e.contains("'prev_pid:abc'")
                && e.contains("sched:sched_switch")
                && e.contains("signed 32-bit"),
            "{e}"
        );
        let e = ok("prev_state:Q").unwrap_err();
        assert!(e.contains("S D T t X Z P I") && e.contains("R"), "{e}");
        assert!(
            ok("prev_state:s").is_err(),
            "the letters are case-sensitive"
        );
        assert!(
            ok("prev_pid:99999999999")
                .unwrap_err()
                .contains("out of its range")
        );
        let e = ok("color:red").unwrap_err();
        assert!(e.contains("'color'") && e.contains("prev_state_str"), "{e}");
        // A key that is also the record's own: only a field's type can refuse it, and only
        // when the value fits none.
        assert_eq!(check(&f, &w("pid:42"), true), Ok(()));
        assert_eq!(check(&[], &w("pid:42"), true), Ok(()));
        assert!(
            check(&[], &w("nope:1"), false)
                .unwrap_err()
                .contains("no tracepoint is watched")
        );
    }

    #[test]
    fn spellings_joined_or_run_together() {
        let s: Vec<Box<[u8]>> = ["S", "D", "R", "+", "I"]
            .iter()
            .map(|x| x.as_bytes().into())
            .collect();
        for v in ["S", "R+", "S|D", "I"] {
            assert!(spelled(v.as_bytes(), &s, Some(b"|")), "{v}");
        }
        for v in ["", "Q", "S|Q", "s"] {
            assert!(!spelled(v.as_bytes(), &s, Some(b"|")), "{v}");
        }
    }
}
