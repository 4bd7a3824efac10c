//! Scripts written for `perf script -s`, told apart from perfwatch scripts before they run.
//!
//! perf calls a script's `SUBSYS__EVENT(...)` handlers, `process_event(param_dict)`,
//! `trace_unhandled(...)` and a few others; perfwatch's own convention is `filter`,
//! `on_event`, `on_tick` (`trace_begin` and `trace_end` are shared). A script of perf's
//! convention gets perf script's environment before it is imported ([`super::perfenv`]) and
//! its handlers called as perf calls them ([`super::perfcall`]). Told apart here:
//!
//! - a script that defines handlers of both conventions is refused, naming them (a helper
//!   called `parse__line` beside `on_event` must be renamed, or it would be taken for a
//!   tracepoint handler);
//! - hooks perf calls that perfwatch does not serve (`process_stat`, `auxtrace_error`, the
//!   database export tables, ...) are named at start; a script with nothing else to call
//!   is refused.
//!
//! A script is judged twice: from its source, before any of it runs (Python's `ast`:
//! parsing runs nothing, so a script that reads `PERF_EXEC_PATH` at import is known for what
//! it is before its import needs it), and from its module's namespace after the import, for
//! handlers a script makes without a `def` of its own (`from helpers import *`,
//! `globals()[name] = f`). The judging itself is [`judge`], a pure function of what was
//! found.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyModule};

/// Handlers perf script calls by these exact names (`tools/perf/util/scripting-engines/
/// trace-event-python.c`), which perfwatch never calls.
const PERF_HANDLERS: &[&str] = &[
    "process_event",
    "trace_unhandled",
    "process_stat",
    "stat__interval",
    "auxtrace_error",
];

/// Handlers perf calls that are also plausible names for a helper of one's own: they count
/// only in a script that shows another sign of perf script.
const PERF_HANDLERS_WEAK: &[&str] = &[
    "context_switch",
    "throttle",
    "unthrottle",
    "synth_data",
    "evsel_table",
    "machine_table",
    "thread_table",
    "comm_table",
    "comm_thread_table",
    "dso_table",
    "symbol_table",
    "branch_type_table",
    "sample_table",
    "call_path_table",
    "call_return_table",
    "context_switch_table",
];

/// Modules only perf script provides (its embedded `perf_trace_context`, and the helpers
/// under `scripts/python/Perf-Trace-Util/lib/Perf/Trace`).
const PERF_MODULES: &[&str] = &["perf_trace_context"];
const PERF_HELPER_MODULES: &[&str] = &["Core", "Util", "EventClass", "SchedGui"];

/// The handlers perfwatch calls per event (`trace_begin`/`trace_end` are shared with perf).
const OWN_PER_EVENT: &[&str] = &["filter", "on_event", "on_tick"];

/// What was found in a script: its top-level callables' names, the modules it imports, and
/// the perf-only names it mentions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Found {
    pub callables: Vec<String>,
    pub imports: Vec<String>,
    /// It reads `PERF_EXEC_PATH` (perf script's environment).
    pub perf_exec_path: bool,
    /// It sets `perf_db_export_mode` (perf's database export handlers).
    pub db_export: bool,
}

/// Why a script is a perf script, for the message that refuses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerfScript {
    /// Handlers perfwatch would never call, in the script's order.
    pub handlers: Vec<String>,
    /// The other signs: imports, `PERF_EXEC_PATH`.
    pub signs: Vec<String>,
    /// The tracepoints its `SUBSYS__EVENT` handlers are for, as `SUBSYS:EVENT`.
    pub tracepoints: Vec<String>,
}

/// A perf tracepoint handler's name: `SUBSYS__EVENT`, both parts non-empty, not a dunder or
/// private name.
fn tracepoint_handler(name: &str) -> Option<(&str, &str)> {
    if name.starts_with('_') || name.ends_with('_') {
        return None;
    }
    let (subsys, event) = name.split_once("__")?;
    let ok = |s: &str| {
        !s.is_empty()
            && !s.starts_with('_')
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    };
    (ok(subsys) && ok(event)).then_some((subsys, event))
}

/// Is this script written for perf script? `None` for a perfwatch script (or any other).
pub fn judge(found: &Found) -> Option<PerfScript> {
    let mut signs = Vec::new();
    for m in &found.imports {
        let top = m.split('.').next().unwrap_or(m);
        if PERF_MODULES.contains(&top) || PERF_HELPER_MODULES.contains(&top) || m == "Perf.Trace" {
            let s = format!("imports {top}");
            if !signs.contains(&s) {
                signs.push(s);
            }
        }
    }
    let strong_import = found.imports.iter().any(|m| {
        let top = m.split('.').next().unwrap_or(m);
        PERF_MODULES.contains(&top) || m.starts_with("Perf.Trace")
    });
    if found.perf_exec_path {
        signs.push("reads PERF_EXEC_PATH".to_string());
    }
    if found.db_export {
        signs.push("sets perf_db_export_mode".to_string());
    }
    let mut handlers: Vec<String> = Vec::new();
    let mut tracepoints = Vec::new();
    let mut strong_handler = false;
    for name in &found.callables {
        if handlers.contains(name) {
            continue;
        }
        if PERF_HANDLERS.contains(&name.as_str()) {
            strong_handler = true;
            handlers.push(name.clone());
        } else if let Some((subsys, event)) = tracepoint_handler(name) {
            strong_handler = true;
            handlers.push(name.clone());
            if !is_stat_hook(name) {
                tracepoints.push(format!("{subsys}:{event}"));
            }
        }
    }
    let perf = strong_handler || strong_import || found.perf_exec_path || found.db_export;
    if !perf {
        return None;
    }
    for name in &found.callables {
        if PERF_HANDLERS_WEAK.contains(&name.as_str()) && !handlers.contains(name) {
            handlers.push(name.clone());
        }
    }
    Some(PerfScript {
        handlers,
        signs,
        tracepoints,
    })
}

/// The handlers of `p` that perfwatch calls: tracepoint handlers, `process_event`,
/// `trace_unhandled`.
pub fn served(p: &PerfScript) -> Vec<&str> {
    p.handlers
        .iter()
        .map(String::as_str)
        .filter(|h| is_served(h))
        .collect()
}

/// The handlers of `p` perf would call and perfwatch does not.
pub fn unserved(p: &PerfScript) -> Vec<&str> {
    p.handlers
        .iter()
        .map(String::as_str)
        .filter(|h| !is_served(h))
        .collect()
}

/// `stat__interval` and `stat__EVENT` look like tracepoint handlers but are perf stat's
/// hooks (`perf stat record` + `perf script -s`).
fn is_served(h: &str) -> bool {
    SERVED.contains(&h)
        || h.starts_with("stat__")
        || (tracepoint_handler(h).is_some() && !is_stat_hook(h))
}

fn is_stat_hook(h: &str) -> bool {
    PERF_HANDLERS.contains(&h) || h.starts_with("stat__")
}

/// perf script handlers perfwatch calls (besides `SUBSYS__EVENT` ones).
const SERVED: &[&str] = &[
    "process_event",
    "trace_unhandled",
    "context_switch",
    "throttle",
    "unthrottle",
    // On a recording (`-i`) of `perf stat record` and of AUX tracing (see `perfstat`).
    "stat__interval",
    "auxtrace_error",
];

fn listed(names: &[&str]) -> String {
    names
        .iter()
        .map(|c| format!("{c}()"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why a perf script cannot run (None: it can). `shown` is the script's escaped path.
pub fn refusal(shown: &str, p: &PerfScript, found: &Found) -> Option<String> {
    let own: Vec<&str> = found
        .callables
        .iter()
        .map(String::as_str)
        .filter(|c| OWN_PER_EVENT.contains(c))
        .collect();
    let perf = served(p);
    if !own.is_empty() && !perf.is_empty() {
        return Some(format!(
            "script '{shown}' defines handlers of two conventions: {} (perfwatch's) and {} \
             (perf script's, which perfwatch calls as perf script does). Write it in one of \
             them; if a function above is a helper of its own, rename it so that it has no \
             `__` in its name",
            crate::text::escape(listed(&own).as_bytes()),
            crate::text::escape(listed(&perf).as_bytes()),
        ));
    }
    let unserved = unserved(p);
    if perf.is_empty() && !unserved.is_empty() {
        return Some(format!(
            "script '{shown}' is written for perf script, but perfwatch does not call {}: \
             there is nothing for perfwatch to call in it (run it with perf: perf record ... \
             && perf script -s FILE)",
            crate::text::escape(listed(&unserved).as_bytes()),
        ));
    }
    None
}

/// The one line said at start about the hooks a perf script has that perfwatch does not
/// call (None when there are none).
pub fn unserved_note(shown: &str, p: &PerfScript) -> Option<String> {
    let unserved = unserved(p);
    (!unserved.is_empty()).then(|| {
        format!(
            "script '{shown}': perfwatch does not call {} (perf script hooks it has no data \
             for); its other handlers run",
            crate::text::escape(listed(&unserved).as_bytes())
        )
    })
}

/// The static look: parse the source with `ast` (nothing of the script runs) and collect
/// what [`judge`] needs. A source that does not parse gives `None`: the import that follows
/// reports the syntax error with its traceback.
const SCAN: &std::ffi::CStr = cr#"
def _scan(source, filename):
    import ast
    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    callables, imports = [], []
    exec_path = db_export = False
    # Module-level statements, also inside if/try/with/for/while (perf's flamegraph.py
    # binds its handlers under `if __name__ == "__main__":`), not inside functions.
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            callables.append(node.name)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    if t.id == "perf_db_export_mode":
                        db_export = True
                    elif isinstance(node.value, (ast.Lambda, ast.Name, ast.Attribute)):
                        callables.append(t.id)
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(node, field, None)
            if isinstance(inner, list) and not isinstance(
                node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            ):
                todo.extend(inner)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imports.append(node.module)
        elif isinstance(node, ast.Constant) and node.value == "PERF_EXEC_PATH":
            exec_path = True
    return callables, imports, exec_path, db_export
"#;

fn scan(py: Python<'_>, source: &[u8], filename: &str) -> PyResult<Option<Found>> {
    let globals = PyDict::new(py);
    py.run(SCAN, Some(&globals), None)?;
    let f = globals
        .get_item("_scan")?
        .ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("no _scan"))?;
    let text = String::from_utf8_lossy(source);
    let r = f.call1((text.as_ref(), filename))?;
    if r.is_none() {
        return Ok(None);
    }
    let (callables, imports, perf_exec_path, db_export): (Vec<String>, Vec<String>, bool, bool) =
        r.extract()?;
    Ok(Some(Found {
        callables,
        imports,
        perf_exec_path,
        db_export,
    }))
}

/// Judge a script from its source, before it runs: `Ok(Some)` for a perf script that can
/// run, `Err` for one that cannot. `shown` is the escaped path.
pub fn from_source(
    py: Python<'_>,
    source: &[u8],
    filename: &str,
    shown: &str,
) -> Result<Option<PerfScript>, String> {
    // A failure of the look itself (an interpreter without `ast`?) leaves the judging to the
    // namespace check after the import.
    let Ok(Some(found)) = scan(py, source, filename) else {
        return Ok(None);
    };
    settle(shown, &found)
}

fn settle(shown: &str, found: &Found) -> Result<Option<PerfScript>, String> {
    match judge(found) {
        Some(p) => match refusal(shown, &p, found) {
            Some(why) => Err(why),
            None => Ok(Some(p)),
        },
        None => Ok(None),
    }
}

/// Judge a script from the callables its module holds after the import (handlers it did
/// not `def` itself).
pub fn from_module(m: &Bound<'_, PyModule>, shown: &str) -> Result<Option<PerfScript>, String> {
    let Ok(dict) = m.getattr("__dict__") else {
        return Ok(None);
    };
    let Ok(dict) = dict.cast_into::<PyDict>() else {
        return Ok(None);
    };
    let mut found = Found::default();
    for (k, v) in dict.iter() {
        let (Ok(name), true) = (k.extract::<String>(), v.is_callable()) else {
            continue;
        };
        // Modules are not callable; classes and functions are.
        found.callables.push(name);
    }
    settle(shown, &found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(callables: &[&str], imports: &[&str]) -> Found {
        Found {
            callables: callables.iter().map(|s| s.to_string()).collect(),
            imports: imports.iter().map(|s| s.to_string()).collect(),
            ..Found::default()
        }
    }

    #[test]
    fn perfwatch_scripts_pass() {
        for c in [
            &["trace_end"][..],
            &["trace_begin", "trace_end", "filter", "on_event", "on_tick"],
            &[
                "on_event",
                "helper",
                "_private__thing",
                "__dunder__",
                "Counter",
            ],
            // Weak names alone are a perfwatch script's own business.
            &["on_event", "context_switch", "throttle", "symbol_table"],
        ] {
            assert_eq!(judge(&found(c, &["os", "collections", "perfwatch"])), None);
        }
    }

    #[test]
    fn perf_handlers_are_named_with_their_tracepoints() {
        let f = found(
            &[
                "trace_begin",
                "syscalls__sys_enter_futex",
                "syscalls__sys_exit_futex",
                "trace_end",
                "trace_unhandled",
            ],
            &["os", "sys", "perf_trace_context", "Core", "Util"],
        );
        let p = judge(&f).unwrap();
        assert_eq!(
            p.handlers,
            [
                "syscalls__sys_enter_futex",
                "syscalls__sys_exit_futex",
                "trace_unhandled"
            ]
        );
        assert_eq!(
            p.tracepoints,
            ["syscalls:sys_enter_futex", "syscalls:sys_exit_futex"]
        );
        assert_eq!(
            p.signs,
            ["imports perf_trace_context", "imports Core", "imports Util"]
        );
        // It runs: every handler it has is one perfwatch calls.
        assert_eq!(refusal("f.py", &p, &f), None);
        assert_eq!(unserved_note("f.py", &p), None);
        assert_eq!(served(&p).len(), 3);
    }

    #[test]
    fn any_one_strong_sign_is_enough() {
        assert!(judge(&found(&["process_event"], &[])).is_some());
        assert!(judge(&found(&["sched__sched_switch"], &[])).is_some());
        assert!(judge(&found(&["trace_end"], &["perf_trace_context"])).is_some());
        assert!(judge(&found(&["trace_end"], &["Perf.Trace.Util"])).is_some());
        let exec = Found {
            perf_exec_path: true,
            ..found(&["trace_end"], &[])
        };
        assert!(judge(&exec).is_some());
        // Core or Util alone could be a module of one's own.
        assert_eq!(judge(&found(&["on_event"], &["Core", "Util"])), None);
        // With a perf sign, the weak handlers are named too.
        let db = Found {
            db_export: true,
            ..found(&["trace_begin", "evsel_table", "sample_table"], &[])
        };
        assert_eq!(
            judge(&db).unwrap().handlers,
            ["evsel_table", "sample_table"]
        );
    }

    #[test]
    fn a_mixed_script_is_told_to_rename_its_helper() {
        let f = found(&["on_event", "parse__line"], &[]);
        let p = judge(&f).unwrap();
        let msg = refusal("m.py", &p, &f).unwrap();
        assert!(
            msg.contains("parse__line()") && msg.contains("on_event()") && msg.contains("rename"),
            "{msg}"
        );
        assert!(
            !msg.contains('\n') && !msg.contains("  "),
            "one paragraph: {msg}"
        );
    }

    #[test]
    fn hooks_perfwatch_does_not_call_are_named_and_alone_refused() {
        let f = found(
            &[
                "trace_begin",
                "process_event",
                "context_switch",
                "process_stat",
            ],
            &["perf_trace_context"],
        );
        let p = judge(&f).unwrap();
        assert_eq!(refusal("s.py", &p, &f), None);
        let note = unserved_note("s.py", &p).unwrap();
        assert!(note.contains("process_stat()"), "{note}");
        assert!(!note.contains("context_switch"), "{note}");
        // stat-cpi.py: perf stat's per-counter hooks are no tracepoint handlers.
        let stat = found(
            &[
                "stat__cycles_k",
                "process_stat",
                "stat__interval",
                "trace_end",
            ],
            &[],
        );
        let p = judge(&stat).unwrap();
        assert!(p.tracepoints.is_empty(), "{p:?}");
        // Served on a recording of `perf stat record` (see `perfstat`); `process_stat`, no
        // hook perf calls by that name, is still named.
        assert_eq!(refusal("stat.py", &p, &stat), None);
        let note = unserved_note("stat.py", &p).unwrap();
        assert!(
            note.contains("process_stat()") && !note.contains("stat__"),
            "{note}"
        );
        // A perf script with nothing perfwatch calls is refused, by name.
        let alone = found(&["process_stat", "trace_end"], &["perf_trace_context"]);
        let p = judge(&alone).unwrap();
        let msg = refusal("alone.py", &p, &alone).unwrap();
        assert!(msg.contains("process_stat()"), "{msg}");
        assert!(msg.contains("nothing for perfwatch to call"), "{msg}");
        assert!(!msg.contains("  "), "{msg}");
    }

    #[test]
    fn tracepoint_handler_names() {
        assert_eq!(
            tracepoint_handler("sched__sched_switch"),
            Some(("sched", "sched_switch"))
        );
        assert_eq!(
            tracepoint_handler("raw_syscalls__sys_enter"),
            Some(("raw_syscalls", "sys_enter"))
        );
        for not in ["__init__", "_a__b", "a__", "__b", "a___", "ab", "a__b_"] {
            assert_eq!(tracepoint_handler(not), None, "{not}");
        }
    }
}
