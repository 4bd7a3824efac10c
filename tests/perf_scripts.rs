//! Scripts written for `perf script -s` are refused at start, naming the handlers perfwatch
//! would never call; they never run to an exit status of 0 having called none of them.
#![cfg(feature = "python")]

mod common;

use common::{Run, run, temp_script};

/// Where Debian's `linux-perf` puts perf's own Python scripts.
const PERF_SCRIPTS: &str = "/usr/lib/perf-core/scripts/python";

/// perfwatch with `--script path`, watching nothing much for at most a second.
fn with_script(path: &std::path::Path) -> Run {
    run(common::perfwatch()
        .args(["--plain", "-e", "dummy", "-d", "1", "--script"])
        .arg(path))
}

/// The same in the environment `perf script` gives its scripts: there, those that import
/// perf's helpers import cleanly, and (before) ran to exit 0 having been called for nothing.
fn with_script_in_perfs_env(path: &std::path::Path) -> Run {
    run(common::perfwatch()
        .env("PERF_EXEC_PATH", "/usr/lib/perf-core")
        .args(["--plain", "-e", "dummy", "-d", "1", "--script"])
        .arg(path))
}

#[test]
fn perfs_own_scripts_are_refused_with_their_handlers_named() {
    let Ok(dir) = std::fs::read_dir(PERF_SCRIPTS) else {
        skip!("{PERF_SCRIPTS} is absent (Debian's linux-perf ships perf's scripts there)");
    };
    let mut scripts: Vec<_> = dir
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "py"))
        .collect();
    scripts.sort();
    assert!(!scripts.is_empty(), "no .py in {PERF_SCRIPTS}");
    let mut perf_style = 0;
    for (s, in_perfs_env) in scripts.iter().flat_map(|s| [(s, false), (s, true)]) {
        let t0 = std::time::Instant::now();
        let r = if in_perfs_env {
            with_script_in_perfs_env(s)
        } else {
            with_script(s)
        };
        let name = s.file_name().unwrap().to_string_lossy().into_owned();
        // Refused at start: never 0, never a monitoring run.
        assert_ne!(r.code, 0, "{name} ran:\n{}", r.stderr);
        assert!(
            r.stdout.is_empty(),
            "{name} started monitoring:\n{}",
            r.stdout
        );
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(20),
            "{name} took {:?}",
            t0.elapsed()
        );
        let source = std::fs::read_to_string(s).unwrap_or_default();
        // A top-level `def` of a handler perf calls (methods are indented), or a handler
        // bound by name (flamegraph.py: `process_event = cli.process_event`).
        let has_handler = source.lines().any(|l| {
            let name = l.strip_prefix("def ").and_then(|r| r.split('(').next());
            name.is_some_and(|n| {
                ["process_event", "trace_unhandled", "process_stat"].contains(&n)
                    || (!n.starts_with('_') && n.contains("__"))
            }) || l.trim_start().starts_with("process_event = ")
        });
        if has_handler || source.contains("PERF_EXEC_PATH") {
            perf_style += usize::from(!in_perfs_env);
            r.exited(1).said(&[
                &format!("{name}' is written for perf script"),
                "which perfwatch would never call",
                "perfwatch does not run perf script handlers",
            ]);
            // Before any of it ran: no KeyError from os.environ['PERF_EXEC_PATH'].
            r.never_said(&["KeyError", "Traceback"]);
        } else {
            // Not a perf script at all (a viewer, a helper library): refused as any
            // script perfwatch has nothing to call in, or that fails to import.
            assert!(
                r.stderr.contains("there is nothing for perfwatch to call")
                    || r.stderr.contains("failed to load"),
                "{name}:\n{}",
                r.stderr
            );
        }
    }
    assert!(
        perf_style >= 10,
        "only {perf_style} perf scripts among {scripts:?}"
    );
}

#[test]
fn futex_contention_names_its_futex_handlers_and_tracepoints() {
    let path = std::path::Path::new(PERF_SCRIPTS).join("futex-contention.py");
    if !path.is_file() {
        skip!("{} is absent", path.display());
    }
    with_script(&path).exited(1).said(&[
        "syscalls__sys_enter_futex(), syscalls__sys_exit_futex()",
        "imports Util, reads PERF_EXEC_PATH",
        "perf record -e syscalls:sys_enter_futex,syscalls:sys_exit_futex",
    ]);
}

#[test]
fn crafted_perf_scripts_are_refused_before_they_run() {
    for (name, body, said) in [
        (
            "process_event.py",
            "def process_event(param_dict):\n    print(param_dict)\n",
            "process_event()",
        ),
        (
            "unhandled.py",
            "import sys\ndef trace_end():\n    pass\ndef trace_unhandled(event_name, context, fields):\n    pass\n",
            "trace_unhandled()",
        ),
        (
            // Would raise KeyError at import if it ran.
            "exec_path.py",
            "import os, sys\nsys.path.append(os.environ['PERF_EXEC_PATH'] + '/x')\ndef trace_end():\n    pass\n",
            "reads PERF_EXEC_PATH",
        ),
        (
            "tracepoint.py",
            "def sched__sched_switch(event_name, context, common_cpu, *args):\n    pass\n",
            "sched__sched_switch()",
        ),
        (
            // Bound only when run as a program, as perf runs it (flamegraph.py does this).
            "main.py",
            "class Cli:\n    def process_event(self, e):\n        pass\nif __name__ == '__main__':\n    cli = Cli()\n    process_event = cli.process_event\n",
            "process_event()",
        ),
        (
            // Mixed: a perfwatch handler too; still refused, with the advice to rename.
            "mixed.py",
            "def on_event(e):\n    pass\ndef irq__irq_handler_entry(*a):\n    pass\n",
            "rename it",
        ),
    ] {
        let (_d, s) = temp_script(name, body);
        let r = with_script(&s);
        r.exited(1)
            .said(&["is written for perf script", said])
            .never_said(&["Traceback", "KeyError"]);
        assert!(r.stdout.is_empty(), "{name}: {}", r.stdout);
    }
}

#[test]
fn handlers_made_at_import_are_found_in_the_module() {
    // No `def` of a perf handler in the source: it is made at import time.
    let (_d, s) = temp_script(
        "dynamic.py",
        "def _h(*args):\n    pass\nglobals()['raw_syscalls__sys_enter'] = _h\ndef trace_end():\n    pass\n",
    );
    with_script(&s).exited(1).said(&[
        "raw_syscalls__sys_enter()",
        "which perfwatch would never call",
    ]);
}

#[test]
fn a_perfwatch_script_with_only_trace_end_still_runs() {
    require_perf!();
    let (_d, s) = temp_script(
        "only_end.py",
        "import os\nseen = os.environ.get('PERF_EXEC_PATH_NOT', 'x')\ndef trace_end():\n    print('END', seen)\n",
    );
    let r = with_script(&s);
    r.exited(0).said(&["[only_end.py] END x"]);
    r.never_said(&["perf script"]);
}
