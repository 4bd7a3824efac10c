//! The `perfwatch` Python module (issue 30): the wheel built from python/ is pip-installed
//! into a fresh virtualenv, and tests/python/test_module.py runs there: `watch()` names a C
//! program's functions and gives a tracepoint's fields, a `break` and a Ctrl-C leave no perf
//! fd and no thread behind, perf's tracepoint.py example runs, and benches/twatch.py with
//! `import perfwatch as perf` prints every fork and exit of a fork storm, the same lines as
//! twatch.py on perf's binding beside it, and on a storm whose children exec, every child's
//! fork, comm, mmap and exit lines, perf's binding's among them.
//!
//! Building the wheel compiles the crate again (the dev profile, as an extension module, into
//! target/pymod so that later runs are incremental): a minute or two the first time.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The wheel's build (first run: a build of the crate).
const LIMIT: Duration = Duration::from_secs(1200);
/// test_module.py's checks (about a minute; each of its waits has a deadline of its own).
const CHECKS_LIMIT: Duration = Duration::from_secs(300);

#[test]
fn the_module_installs_into_a_venv_and_passes_its_checks() {
    require_perf!();
    require_root!("system-wide events and tracepoints");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let probe = Command::new("python3")
        .args(["-c", "import venv, ensurepip"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        common::refuse(
            test_name!(),
            "python3 has no venv/ensurepip (Debian: apt-get install python3-venv)",
        );
        return;
    }
    // The reference: twatch.py on perf's binding, beside the module, on the same storm.
    let perf_python = "/usr/bin/python3";
    let binding = Command::new(perf_python)
        .args(["-c", "import perf"])
        .output();
    if !binding.is_ok_and(|o| o.status.success()) {
        common::refuse(
            test_name!(),
            "perf's Python binding is missing (Debian: apt-get install linux-perf)",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let venv = dir.path().join("venv");
    let made = common::finish(
        Command::new("python3")
            .arg("-m")
            .arg("venv")
            .arg(&venv)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
        LIMIT,
    );
    assert!(made.status.success(), "venv: {made:?}");
    let python = venv.join("bin/python");
    let started = std::time::Instant::now();
    let pip = common::finish(
        Command::new(&python)
            .args(["-m", "pip", "install", "--quiet"])
            .arg(root.join("python"))
            .env("CARGO_TARGET_DIR", root.join("target/pymod"))
            // The dev profile, as `cargo test` builds: it compiles in about half the time of
            // a release build, and the checks are of behaviour, not speed.
            .env("MATURIN_PEP517_ARGS", "--profile dev")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
        LIMIT,
    );
    assert!(
        pip.status.success(),
        "pip install ./python failed:\n{}\n{}",
        String::from_utf8_lossy(&pip.stdout),
        String::from_utf8_lossy(&pip.stderr)
    );
    common::say(&format!(
        "pymod: pip install ./python took {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    // The checks signal the Python (Ctrl-C in the loop): it starts with the default
    // dispositions whatever `cargo test` inherited (`nohup cargo test &` ignores SIGINT, and
    // a Python started with SIGINT ignored never raises KeyboardInterrupt).
    let run = common::finish(
        common::default_signals(&mut Command::new(&python))
            .arg(root.join("tests/python/test_module.py"))
            .arg("--stress")
            .arg(env!("CARGO_BIN_EXE_perfwatch-stress"))
            .arg("--twatch")
            .arg(root.join("benches/twatch.py"))
            .args(["--perf-python", perf_python])
            .current_dir(dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
        CHECKS_LIMIT,
    );
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && out.contains("\nall ok"),
        "test_module.py failed ({:?}):\n{out}\n{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    for check in [
        "ok watch() names the C program's functions",
        "ok a tracepoint gives its fields",
        "ok perf's tracepoint.py on perfwatch",
        "ok get_pollfd: select.poll woke",
        "ok evsel.read counts: task-clock",
        "ok break after",
        "ok Ctrl-C stops the loop cleanly",
        "ok twatch.py with `import perfwatch as perf`: 2000/2000 forks and exits; the same lines as perf's binding",
        "ok twatch.py on an exec storm: fork, comm, mmap and exit lines of 300/300 children; perf's binding's lines",
    ] {
        assert!(out.contains(check), "{check} missing:\n{out}");
    }
}
