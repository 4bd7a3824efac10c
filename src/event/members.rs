//! A tracepoint sample's members, as every output names them: each field under its own name
//! (as the format file and perf spell it), followed by the text its `print fmt` makes of it
//! (`prev_state: 1, prev_state_str: S`), and how a name that the record already uses is kept.
//!
//! One rule, in every output: the record's own members keep their names and places (in
//! `--plain` `type`, `event`, `ip`, `sym`, `dso`, `period`, `callchain`; in `--json` `type`,
//! `event`, `sym`, `dso`, `sym_offset`, `callchain` and the `sample_*` keys); a field whose
//! own name is one of those (xfs's `type`, page_fault_user's `ip`) keeps its name too, inside
//! the record's `fields` group (`fields: { ip: 0x... }`, `"fields": {"ip": "0x..."}`), so
//! that a line never holds a key twice. Scripts read every field as `event.fields["NAME"]`,
//! and as `event.NAME` where the event object has no attribute of that name.

use crate::event::tracepoint::Value;
use crate::event::tracepoint::printfmt::{KernelSymbols, NoSymbols};
use crate::event::{Event, EventKind};

/// The sample's own member names in a `--plain` body.
pub(crate) const PLAIN_OWN: &[&str] = &[
    "type",
    "event",
    "ip",
    "sym",
    "dso",
    "period",
    "callchain",
    "fields",
];

/// The sample's own member names in a `--json` object (and any `sample_*` name).
pub(crate) const JSON_OWN: &[&str] = &[
    "type",
    "event",
    "sym",
    "dso",
    "sym_offset",
    "callchain",
    "fields",
];

/// True when `name` is one of the record's own members in an output whose own names are
/// `own` (JSON's `sample_*` included).
pub fn taken(own: &[&str], name: &str) -> bool {
    own.contains(&name) || (own == JSON_OWN && name.starts_with("sample_"))
}

/// One member's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Member<'a> {
    /// A field's raw value.
    Field(Value<'a>),
    /// The text the print fmt makes of a field (`S`, `SCHED`, `tick_nohz_handler`):
    /// untrusted bytes, escaped by the writer.
    Text(&'a [u8]),
}

/// Visit the tracepoint members of `ev` in order (each field, then its text), each with its
/// name. `common` adds the `common_*` fields (also added when the event was opened with
/// `--common-fields`). Nothing for other records.
pub(crate) fn visit(kind: &EventKind, common: bool, f: &mut dyn FnMut(&str, Member<'_>)) {
    let EventKind::Sample {
        event,
        raw: Some(raw),
        sym,
        ..
    } = kind
    else {
        return;
    };
    let Some(fmt) = &event.format else { return };
    let show = common || event.show_common;
    let syms: &dyn KernelSymbols = match sym {
        Some(n) => &**n,
        None => &NoSymbols,
    };
    let renders = fmt.print.as_ref().map_or(&[][..], |p| p.renders());
    // A buffer reused across lines (taken, so that a nested call gets its own).
    let mut text = TEXT.take();
    for (i, field) in fmt.fields.iter().enumerate() {
        if !show && field.common {
            continue;
        }
        f(&field.name, Member::Field(field.value(raw)));
        for r in renders.iter().filter(|r| r.field as usize == i) {
            text.clear();
            if let Some(p) = &fmt.print {
                if p.render(r, &fmt.fields, raw, syms, &mut text) {
                    f(&r.name, Member::Text(&text));
                }
            }
        }
    }
    text.clear();
    TEXT.set(text);
}

thread_local! {
    static TEXT: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Visit the members for an output whose own names are `own`: first those written under
/// their own name (`grouped` false), then those kept in the `fields` group (`grouped` true).
/// Returns whether any went to the group.
pub(crate) fn visit_for(
    kind: &EventKind,
    own: &[&str],
    f: &mut dyn FnMut(&str, Member<'_>, bool),
) -> bool {
    let mut grouped = false;
    visit(kind, false, &mut |name, m| {
        if taken(own, name) {
            grouped = true;
        } else {
            f(name, m, false);
        }
    });
    if grouped {
        visit(kind, false, &mut |name, m| {
            if taken(own, name) {
                f(name, m, true);
            }
        });
    }
    grouped
}

/// The text the print fmt makes of the field a member named `name` (`prev_state_str`)
/// renders, for filters and scripts; `None` when `name` is no such member or it cannot be
/// rendered.
pub fn text(ev: &Event, name: &str) -> Option<Vec<u8>> {
    let EventKind::Sample {
        event,
        raw: Some(raw),
        sym,
        ..
    } = &ev.kind
    else {
        return None;
    };
    let fmt = event.format.as_ref()?;
    let p = fmt.print.as_ref()?;
    let r = p.renders().iter().find(|r| &*r.name == name)?;
    let syms: &dyn KernelSymbols = match sym {
        Some(n) => &**n,
        None => &NoSymbols,
    };
    let mut out = Vec::new();
    p.render(r, &fmt.fields, raw, syms, &mut out).then_some(out)
}

/// The text member that renders field `field` of `ev`'s event (`prev_state` gives
/// `prev_state_str`), if the print fmt has one.
pub(crate) fn text_of_field<'e>(
    ev: &'e Event,
    field: &str,
) -> Option<&'e crate::event::tracepoint::printfmt::Render> {
    let fmt = ev.event_desc()?.format.as_ref()?;
    let i = fmt.fields.iter().position(|f| &*f.name == field)?;
    fmt.print
        .as_ref()?
        .renders()
        .iter()
        .find(|r| r.field as usize == i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::tracepoints as craft;

    fn names(ev: &Event, own: &[&str]) -> (Vec<String>, Vec<String>) {
        let (mut top, mut group) = (Vec::new(), Vec::new());
        visit_for(&ev.kind, own, &mut |n, m, g| {
            let v = match m {
                Member::Field(v) => v.to_string(),
                Member::Text(t) => String::from_utf8_lossy(t).into_owned(),
            };
            if g { &mut group } else { &mut top }.push(format!("{n}={v}"));
        });
        (top, group)
    }

    #[test]
    fn fields_keep_their_names_and_collisions_go_to_the_group() {
        let d = craft::desc(0, "sched:sched_switch", craft::SCHED_SWITCH);
        let ev = Event {
            cpu: 0,
            pid: 1,
            tid: 1,
            time: 0,
            id: 0,
            kind: craft::sample(d, 1, 0, craft::sched_switch(b"bash", 42, 0x101, b"x", 0)),
        };
        let (top, group) = names(&ev, PLAIN_OWN);
        assert_eq!(
            top,
            [
                "prev_comm=bash",
                "prev_pid=42",
                "prev_prio=120",
                "prev_state=257",
                "prev_state_str=S+",
                "next_comm=x",
                "next_pid=0",
                "next_prio=120"
            ]
        );
        assert!(group.is_empty());
        assert_eq!(text(&ev, "prev_state_str").as_deref(), Some(&b"S+"[..]));
        assert_eq!(text(&ev, "prev_pid"), None);
        assert_eq!(
            text_of_field(&ev, "prev_state").map(|r| &*r.name),
            Some("prev_state_str")
        );
        // A field named like a member of the line.
        let f = "ID: 5\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:int type;\toffset:16;\tsize:4;\tsigned:1;\n\tfield:int name;\toffset:20;\tsize:4;\tsigned:1;\n";
        let d = craft::desc(0, "t:collide", f);
        let mut raw = vec![0u8; 24];
        raw[8] = 9;
        raw[16] = 3;
        raw[20] = 4;
        let ev = Event {
            kind: craft::sample(d, 1, 0, raw),
            ..ev
        };
        assert_eq!(
            names(&ev, PLAIN_OWN),
            (vec!["name=4".into()], vec!["ip=9".into(), "type=3".into()])
        );
        assert_eq!(
            names(&ev, JSON_OWN),
            (vec!["ip=9".into(), "name=4".into()], vec!["type=3".into()])
        );
        assert!(taken(JSON_OWN, "sample_us") && !taken(PLAIN_OWN, "sample_us"));
        // As the writers put them: no key twice in a line or an object.
        let line = ev.to_string();
        assert!(
            line.ends_with("period: 1, name: 4, fields: { ip: 9, type: 3 } }"),
            "{line}"
        );
        let mut json = Vec::new();
        crate::format::write_json(&mut json, &ev).unwrap();
        let json = String::from_utf8(json).unwrap();
        assert!(
            json.contains(r#""ip":9,"name":4,"fields":{"type":3}}"#),
            "{json}"
        );
        assert_eq!(json.matches("\"type\"").count(), 2, "{json}");
    }
}
