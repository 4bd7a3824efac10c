//! `--script` as root, tried the way a hostile local user would: planted modules, a symlink
//! swapped while perfwatch starts, scripts that fork, `_exit` or return endless output, a
//! full disk under `--script-output`. The real binary, real Python, another user made with
//! `setpriv`.
#![cfg(feature = "python")]

use crate::common;

use common::InTime;

use common::{plain_script, run, temp_script};

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The unprivileged user the hostile side runs as.
const NOBODY: u32 = 65534;

/// The binary as root with no sudo user behind it.
fn perfwatch() -> Command {
    let mut c = common::perfwatch();
    c.env_remove("SUDO_UID");
    c
}

/// `perfwatch --plain -e dummy --script SCRIPT ARGS` as root with no sudo user behind it.
fn as_root(script: &Path, args: &[&str]) -> Command {
    let mut c = plain_script(script, args);
    c.env_remove("SUDO_UID");
    c
}

fn write(p: &Path, body: &str, mode: u32) {
    std::fs::write(p, body).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Run `script` (a shell command line) as the unprivileged user.
fn as_nobody(script: &str) -> Command {
    let mut c = Command::new("setpriv");
    c.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--",
        "sh",
        "-c",
        script,
    ]);
    c
}

/// A fresh temporary directory, mode 0755 (root's, as the rules under test want).
fn private_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// A directory under a fresh private temporary directory, with `mode` (root-owned).
fn dir_with_mode(parent: &Path, name: &str, mode: u32) -> PathBuf {
    let d = parent.join(name);
    std::fs::create_dir(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
    d
}

/// A module another user plants beside a root script in a sticky directory is never
/// imported: not by the script's own `import json`, not by perfwatch's own imports when it
/// formats a traceback, not through PYTHONPATH or PYTHONHOME.
#[test]
fn planted_modules_beside_a_root_script_are_never_imported() {
    require_root!("the rules under test are root's");
    let base = private_dir();
    let shared = dir_with_mode(base.path(), "shared", 0o1777);
    let marker = base.path().join("PWNED");
    let script = shared.join("root.py");
    write(
        &script,
        "import json, sys\n\
         def trace_begin():\n\
         \x20   print('JSON', json.__file__)\n\
         \x20   print('PATH', sys.path)\n\
         def on_tick():\n\
         \x20   raise ValueError('a traceback, formatted by perfwatch')\n",
        0o644,
    );
    // The other user plants modules perfwatch or the script would import.
    let planted = format!(
        "for m in json traceback linecache helper codecs encodings; do \
           printf 'open(\"{}\", \"w\").write(\"%s\")\\n' $m > {}/$m.py; done; \
         mkdir -p {dir}/pp && cp {dir}/json.py {dir}/pp/json.py",
        marker.display(),
        shared.display(),
        dir = shared.display()
    );
    let st = as_nobody(&planted).status_in_time().unwrap();
    assert!(st.success(), "setpriv failed");
    assert_eq!(
        std::fs::metadata(shared.join("json.py")).unwrap().uid(),
        NOBODY
    );
    let r = run(as_root(&script, &["-d", "1.5"])
        .env("PYTHONPATH", shared.join("pp"))
        .env("PYTHONHOME", "/nonexistent")
        .env("PYTHONSTARTUP", shared.join("json.py"))
        .stdout(Stdio::null()));
    r.exited(0);
    assert!(
        !marker.exists(),
        "a planted module ran as root: {}",
        std::fs::read_to_string(&marker).unwrap_or_default()
    );
    // The standard library's json, and the traceback was formatted (with the stdlib's).
    let json = r
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("[root.py] JSON "))
        .unwrap_or_else(|| panic!("{}", r.stderr));
    assert!(!json.starts_with(shared.to_str().unwrap()), "{json}");
    r.said(&["ValueError: a traceback, formatted by perfwatch"]);
    let path = r
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("[root.py] PATH "))
        .unwrap_or_else(|| panic!("{}", r.stderr));
    assert!(!path.contains(shared.to_str().unwrap()), "{path}");
    r.said(&[
        "the directory of script '",
        "is not on Python's import path",
        "anyone could add a module to it",
    ]);
}

/// Every sys.path entry is the interpreter's own, plus the script's directory when nobody
/// else can write there; a helper module beside such a script imports.
#[test]
fn a_private_script_directory_stays_importable_and_nothing_else_is_added() {
    require_root!("the rules under test are root's");
    let d = private_dir();
    write(&d.path().join("helper.py"), "VALUE = 42\n", 0o644);
    let s = d.path().join("uses_helper.py");
    write(
        &s,
        "import sys, helper\n\
         def trace_begin():\n\
         \x20   print('HELPER', helper.VALUE)\n\
         \x20   print('PREFIX', sys.prefix)\n\
         \x20   for p in sys.path: print('ENTRY', p)\n",
        0o644,
    );
    let r = run(as_root(&s, &["-d", "0.2"])
        .env("PYTHONPATH", "/nonexistent-pp")
        .stdout(Stdio::null()));
    r.exited(0).said(&["[uses_helper.py] HELPER 42"]);
    let prefix = r
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("[uses_helper.py] PREFIX "))
        .unwrap()
        .to_string();
    let here = std::fs::canonicalize(d.path()).unwrap();
    let entries: Vec<&str> = r
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix("[uses_helper.py] ENTRY "))
        .collect();
    assert_eq!(
        entries.first(),
        Some(&here.to_str().unwrap()),
        "{entries:?}"
    );
    for e in &entries[1..] {
        assert!(e.starts_with(&prefix), "{e} is not under {prefix}");
    }
    assert!(
        !r.stderr.contains("not on Python's import path"),
        "{}",
        r.stderr
    );
}

/// Another user swaps a symbolic link between a root-owned script and their own, in a loop,
/// while perfwatch starts again and again: their file never runs.
#[test]
fn a_symlink_swapped_while_perfwatch_starts_never_runs_the_other_file() {
    require_root!("the rules under test are root's");
    let base = private_dir();
    let marker = base.path().join("PWNED");
    let good = base.path().join("good.py");
    write(&good, "def trace_begin():\n    print('GOOD')\n", 0o644);
    // Their directory (theirs to change at will), and a sticky shared one.
    let theirs = base.path().join("theirs");
    let sticky = dir_with_mode(base.path(), "sticky", 0o1777);
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    let setup = format!(
        "printf 'open(\"{m}\", \"w\").write(\"x\")\\ndef trace_begin(): pass\\n' > {t}/evil.py",
        t = theirs.display(),
        m = marker.display()
    );
    assert!(as_nobody(&setup).status_in_time().unwrap().success());
    let swap = |dir: &Path| {
        format!(
            "while :; do ln -sfn {g} {d}/l.tmp && mv -T {d}/l.tmp {d}/link.py; \
             ln -sfn {t}/evil.py {d}/l.tmp && mv -T {d}/l.tmp {d}/link.py; done",
            g = good.display(),
            t = theirs.display(),
            d = dir.display()
        )
    };
    for dir in [&theirs, &sticky] {
        let mut swapper = as_nobody(&swap(dir)).spawn().unwrap();
        let link = dir.join("link.py");
        let deadline = Instant::now() + Duration::from_secs(5);
        while !link.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut refused = 0;
        for _ in 0..30 {
            let r = run(as_root(&link, &["-d", "0.05"]).stdout(Stdio::null()));
            assert!(!marker.exists(), "the other user's file ran as root");
            if r.code == 1 && r.stderr.contains("refusing to run script") {
                refused += 1;
            } else {
                assert!(
                    r.stderr.contains("cannot open script") || r.stderr.contains("GOOD"),
                    "{}",
                    r.stderr
                );
            }
        }
        let _ = swapper.kill();
        let _ = swapper.wait();
        // A link another user owns is refused outright: the walk sees it as itself.
        assert!(refused > 0);
    }
    assert!(!marker.exists());
}

/// The whole path counts: a root-owned script in a directory another user owns, or in one
/// anyone may write to without the sticky bit, is refused; --force-script says so loudly.
#[test]
fn the_directories_above_a_script_are_checked_too() {
    require_root!("the rules under test are root's");
    let base = private_dir();
    let open = dir_with_mode(base.path(), "open", 0o777);
    let s = open.join("s.py");
    write(&s, "def trace_begin():\n    print('RAN')\n", 0o644);
    let r = run(&mut as_root(&s, &["-d", "0.05"]));
    r.exited(1)
        .said(&["is writable by group and others (mode 0777) and not sticky"]);
    let owned = base.path().join("owned");
    std::fs::create_dir(&owned).unwrap();
    std::os::unix::fs::chown(&owned, Some(NOBODY), Some(NOBODY)).unwrap();
    let s2 = owned.join("s.py");
    write(&s2, "def trace_begin():\n    print('RAN')\n", 0o644);
    let r = run(&mut as_root(&s2, &["-d", "0.05"]));
    r.exited(1).said(&["the directory '", "owned by uid 65534"]);
    let r = run(as_root(&s2, &["-d", "0.05", "--force-script"]).stdout(Stdio::null()));
    r.said(&["warning: --force-script"]);
    r.said(&["[s.py] RAN"]);
}

/// `os.fork()`, `os._exit()` and their `posix` twins raise in a handler; subprocess works;
/// perfwatch ends normally with its summary, and nothing holds its stdout after it.
#[test]
fn fork_and_exit_in_handlers_raise_and_perfwatch_carries_on() {
    require_perf!();
    let (_d, s) = temp_script(
        "escape.py",
        "import os, posix, subprocess, perfwatch\n\
         tried = False\n\
         def on_event(event):\n\
         \x20   global tried\n\
         \x20   if tried: return\n\
         \x20   tried = True\n\
         \x20   for f in (os.fork, posix.fork, os.forkpty, lambda: os.execv('/bin/true', ['true'])):\n\
         \x20       try:\n\
         \x20           f()\n\
         \x20           print('NOT CONTAINED')\n\
         \x20       except perfwatch.Unavailable as e:\n\
         \x20           print('REFUSED', e)\n\
         \x20   print('SUB', subprocess.run(['echo', 'child ok'], capture_output=True, text=True).stdout.strip())\n\
         def on_tick():\n\
         \x20   os._exit(0)\n",
    );
    // stdout into a pipe read to its end: a forked copy holding it would keep it open.
    let t0 = Instant::now();
    // A workload of its own: perfwatch's records are hidden, and a quiet machine may have
    // nothing else to show the script.
    let r = run(perfwatch()
        .args(["--plain", "-a", "-e", "dummy", "-d", "2.2", "--script"])
        .arg(&s)
        .args([
            "--",
            "sh",
            "-c",
            "for i in 1 2 3 4; do /bin/true; sleep 0.4; done; sleep 2",
        ]));
    assert!(t0.elapsed() < Duration::from_secs(15));
    r.exited(0);
    assert!(!r.stderr.contains("NOT CONTAINED"), "{}", r.stderr);
    assert_eq!(
        r.stderr.matches("[escape.py] REFUSED").count(),
        4,
        "{}",
        r.stderr
    );
    r.said(&["os.fork() is not available inside perfwatch: a copy of perfwatch"]);
    r.said(&["[escape.py] SUB child ok"]);
    // _exit raised instead of ending perfwatch: the summary is there.
    r.said(&["os._exit() is not available inside perfwatch", "records in"]);
    assert!(r.stdout.lines().count() > 0);
}

/// An `on_tick()` that returns an endless generator or a huge string is cut, says so, and
/// perfwatch's memory stays small.
#[test]
fn an_endless_on_tick_is_cut_and_said() {
    require_perf!();
    let (d, s) = temp_script(
        "endless.py",
        "import itertools\n\
         n = 0\n\
         def on_tick():\n\
         \x20   global n\n\
         \x20   n += 1\n\
         \x20   if n % 2: return (f'line {i}' for i in itertools.count())\n\
         \x20   return 'y' * 50_000_000\n",
    );
    let out = d.path().join("pane.txt");
    let r = run(as_root(&s, &["-d", "2.5"])
        .arg("--script-output")
        .arg(&out)
        .stdout(Stdio::null()));
    r.exited(0);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("[endless.py] line 999\n"), "{}", &text[..200]);
    assert!(!text.contains("[endless.py] line 1000\n"));
    assert!(
        text.contains("[perfwatch: cut here; on_tick() may return at most 1000 lines"),
        "cut not said"
    );
    assert_eq!(
        text.matches("on_tick() returned more than 1000 lines")
            .count(),
        1,
        "said once"
    );
    // The huge string: at most 256K characters of it.
    let longest = text.lines().map(str::len).max().unwrap_or(0);
    assert!(longest <= 256 * 1024 + 64, "{longest}");
}

/// `--script-output` on a full disk (a tiny tmpfs): the error is said once, naming the file
/// and the error, and the exit status is 1.
#[test]
fn a_full_disk_under_script_output_is_said_once_and_fails_the_run() {
    require_perf!();
    require_root!("the rules under test are root's");
    let d = tempfile::tempdir().unwrap();
    let tiny = common::Tmpfs::mount(d.path(), "16k");
    let mnt = tiny.path().to_path_buf();
    let s = d.path().join("chatty.py");
    write(
        &s,
        "def on_tick():\n    return ['z' * 200 for _ in range(200)]\n",
        0o644,
    );
    let out = mnt.join("out.txt");
    let r = run(as_root(&s, &["-d", "2.5"])
        .arg("--script-output")
        .arg(&out)
        .stdout(Stdio::null()));
    r.exited(1);
    let said = format!(
        "cannot write to --script-output '{}' (No space left on device",
        out.display()
    );
    assert_eq!(
        r.stderr.matches(&said).count(),
        1,
        "said once: {}",
        r.stderr
    );
    r.said(&[
        "script output messages were not written to --script-output",
        "records in",
    ]);
}

/// As root, `--script-output` never writes into a file another user created, never follows
/// a directory link they own, and creates its file 0600.
#[test]
fn script_output_as_root_is_private_and_never_another_users_file() {
    require_root!("the rules under test are root's");
    let base = private_dir();
    let sticky = dir_with_mode(base.path(), "sticky", 0o1777);
    let s = base.path().join("t.py");
    write(&s, "def on_tick():\n    return 'secret'\n", 0o644);
    let theirs = sticky.join("theirs.txt");
    let link = sticky.join("dirlink");
    let st = as_nobody(&format!(
        "touch {} && ln -s {} {}",
        theirs.display(),
        base.path().display(),
        link.display()
    ))
    .status_in_time()
    .unwrap();
    assert!(st.success());
    for (path, why) in [
        (theirs.clone(), "it belongs to uid 65534"),
        (link.join("out.txt"), "the symbolic link"),
    ] {
        let r = run(as_root(&s, &["-d", "0.05"])
            .arg("--script-output")
            .arg(&path));
        r.exited(1);
        assert!(r.stderr.contains(why), "{why}: {}", r.stderr);
    }
    assert_eq!(std::fs::read(&theirs).unwrap(), b"");
    assert!(!base.path().join("out.txt").exists());
    let mine = sticky.join("mine.txt");
    let r = run(as_root(&s, &["-d", "0.05"])
        .arg("--script-output")
        .arg(&mine)
        .stdout(Stdio::null()));
    r.exited(0);
    assert_eq!(std::fs::metadata(&mine).unwrap().mode() & 0o777, 0o600);
}

/// A start-up traceback carries the script's text: it is escaped like everything else.
#[test]
fn a_start_up_traceback_is_escaped() {
    let d = tempfile::tempdir().unwrap();
    let s = d.path().join("hostile.py");
    std::fs::write(&s, b"x = 1\ny = '\x1b[2J\x1b]0;owned\x07' +\n").unwrap();
    let r = as_root(&s, &[]).output_in_time().unwrap();
    assert_eq!(r.status.code(), Some(1));
    assert!(
        !r.stderr.contains(&0x1b),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(!r.stderr.contains(&0x07));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("\\x1b[2J"), "{err}");
    assert!(err.contains("SyntaxError"), "{err}");
}

/// The binary's rpath is a DT_RPATH, searched before LD_LIBRARY_PATH: a libpython planted in
/// a directory named by LD_LIBRARY_PATH is not loaded.
#[test]
fn ld_library_path_cannot_swap_libpython() {
    let bin = assert_cmd::cargo::cargo_bin("perfwatch");
    let dynamic = Command::new("readelf").arg("-d").arg(&bin).output_in_time();
    let Ok(dynamic) = dynamic else {
        skip!("readelf (binutils) is not installed");
    };
    let text = String::from_utf8_lossy(&dynamic.stdout);
    let needed = text.lines().find_map(|l| {
        l.split("Shared library: [")
            .nth(1)
            .filter(|n| n.starts_with("libpython"))
            .map(|n| n.trim_end_matches(']').to_string())
    });
    let Some(needed) = needed else {
        skip!("libpython is linked statically: there is no library to swap");
    };
    assert!(text.contains("(RPATH)"), "{text}");
    assert!(!text.contains("(RUNPATH)"), "{text}");
    // A stub with libpython's name and none of its symbols: loading it would fail the start.
    let d = tempfile::tempdir().unwrap();
    let c = d.path().join("stub.c");
    std::fs::write(&c, "int perfwatch_stub_libpython = 1;\n").unwrap();
    let ok = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(d.path().join(&needed))
        .arg(&c)
        .status_in_time()
        .unwrap();
    assert!(ok.success(), "cc");
    let r = run(perfwatch()
        .env("LD_LIBRARY_PATH", d.path())
        .arg("--version"));
    r.exited(0);
    assert!(r.stdout.starts_with("perfwatch "), "{}", r.stdout);
}

/// (records, dropped) per CPU and in total, from the summary.
fn counts(stderr: &str) -> (Vec<(u64, u64)>, u64, u64) {
    let mut per_cpu = Vec::new();
    let mut total = 0;
    let mut dropped = 0;
    for l in stderr.lines() {
        if let Some(rest) = l.strip_prefix("perfwatch: ") {
            if let Some(n) = rest
                .split(" records in ")
                .next()
                .and_then(|n| n.parse().ok())
            {
                total = n;
            }
        }
        if let Some(d) = l.split("dropped by perfwatch: ").nth(1) {
            dropped = d.trim().parse().unwrap_or(u64::MAX);
        }
        let l = l.trim_start();
        if l.starts_with("cpu ") && l.contains(" records, ") {
            let records: u64 = l
                .split(": ")
                .nth(1)
                .and_then(|r| r.split(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            let d: u64 = l
                .split("dropped ")
                .nth(1)
                .and_then(|n| n.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(u64::MAX);
            per_cpu.push((records, d));
        }
    }
    (per_cpu, total, dropped)
}

/// A filter that never returns, stopped by SIGINT: the events the script still held are
/// counted once, so dropped never exceeds records, per CPU or in total.
#[test]
fn a_busy_filter_stopped_by_sigint_never_drops_more_than_it_recorded() {
    require_perf!();
    let (_d, s) = temp_script(
        "busy.py",
        "def filter(event):\n    while True:\n        pass\n",
    );
    for _ in 0..3 {
        let child = as_root(&s, &[])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(1200) {
            let _ = Command::new("/bin/true").status_in_time();
        }
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let out = child.output_in_time().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        let (per_cpu, total, dropped) = counts(&err);
        assert!(!per_cpu.is_empty() && total > 0, "{err}");
        assert!(dropped > 0, "the busy filter saw nothing: {err}");
        assert!(
            dropped <= total,
            "dropped {dropped} > records {total}: {err}"
        );
        for (records, d) in per_cpu {
            assert!(
                d <= records,
                "a CPU dropped {d} > its {records} records: {err}"
            );
        }
    }
}
