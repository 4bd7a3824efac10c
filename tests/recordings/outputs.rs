//! Issue 31: the files perfwatch writes are replaced only once complete: a killed run or a
//! full disk leaves the previous file as it was, never an empty or a partial one.

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// The names in `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `cmd -- sleep 30` started, killed `after` it began watching, and reaped.
fn kill_once_watching(cmd: &mut std::process::Command, after: Duration) {
    let mut child = cmd
        .args(["--", "sleep", "30"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    common::wait_until_watching(&mut child);
    std::thread::sleep(after);
    child.kill().unwrap();
    child.wait().unwrap();
}

const OLD: &str = "old;flame;graph 42\n";

#[test]
fn a_killed_run_leaves_the_previous_folded_file_whole_and_a_finished_one_replaces_it() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("last.folded");
    std::fs::write(&out, OLD).unwrap();
    kill_once_watching(
        common::perfwatch()
            .args(["--plain", "-e", "cpu-clock", "-F", "999", "--folded"])
            .arg(&out),
        Duration::from_millis(300),
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), OLD);
    // The killed run's temporary file is left beside it, never under the final name.
    for e in entries(dir.path()) {
        assert!(
            e == "last.folded" || e.starts_with(".last.folded.perfwatch-"),
            "{e}"
        );
    }
    // A run that ends writes the new stacks in its place, and leaves no temporary file.
    for e in entries(dir.path()) {
        if e != "last.folded" {
            std::fs::remove_file(dir.path().join(e)).unwrap();
        }
    }
    let run = common::run(
        common::perfwatch()
            .args(["--plain", "-e", "cpu-clock", "-F", "999", "--folded"])
            .arg(&out)
            .args([
                "--",
                "sh",
                "-c",
                "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done",
            ]),
    );
    run.exited(0).said(&["folded stacks: "]);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text != OLD && text.lines().count() > 0, "{text:?}");
    assert_eq!(entries(dir.path()), vec!["last.folded"]);
}

#[test]
fn a_full_disk_leaves_the_previous_folded_file_and_says_so() {
    require_root!("to mount a tiny tmpfs");
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let tiny = common::Tmpfs::mount(dir.path(), "4k");
    let mnt = tiny.path().to_path_buf();
    let out = mnt.join("last.folded");
    std::fs::write(&out, OLD).unwrap();
    // The tmpfs's one page holds the old file: the new one cannot be written.
    let run = common::run(
        common::perfwatch()
            .args(["--plain", "-a", "-e", "cpu-clock", "-F", "999", "--folded"])
            .arg(&out)
            .args(["--duration", "1"]),
    );
    run.said(&["cannot write --folded", "left as it was"]);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), OLD);
    assert_eq!(entries(&mnt), vec!["last.folded"]);
}

#[test]
fn a_symbolic_link_as_the_output_is_refused_as_one() {
    require_root!("root refuses to write through a link");
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("shadow");
    std::fs::write(&target, OLD).unwrap();
    let link = dir.path().join("out.folded");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let run = common::run(
        common::perfwatch()
            .args(["--plain", "-e", "dummy", "--folded"])
            .arg(&link)
            .args(["--", "true"]),
    );
    run.exited(1)
        .said(&["is a symbolic link"])
        .never_said(&["Permission denied"]);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), OLD);
}

#[test]
fn a_killed_run_leaves_the_previous_script_output_whole() {
    require_perf!();
    let (dir, script) = common::temp_script("tick.py", "def on_tick():\n    return 'new'\n");
    let out = dir.path().join("pane.txt");
    std::fs::write(&out, OLD).unwrap();
    // Past a tick or two: lines were written (to the temporary file).
    kill_once_watching(
        common::plain_script(&script, &["--script-output"]).arg(&out),
        Duration::from_millis(1500),
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), OLD);
    // The killed run's temporary file is left beside it: clear it for the next run.
    for e in entries(dir.path()) {
        if e.starts_with(".pane.txt.perfwatch-") {
            std::fs::remove_file(dir.path().join(e)).unwrap();
        }
    }
    let run =
        common::run(common::plain_script(&script, &["-d", "1.2", "--script-output"]).arg(&out));
    run.exited(0);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("[tick.py] new"), "{text:?}");
    assert!(
        entries(dir.path())
            .iter()
            .all(|e| !e.contains(".perfwatch-")),
        "{:?}",
        entries(dir.path())
    );
}
