//! The real binary in a real pseudo-terminal at the sizes people's terminals have: what it
//! shows at 80×24, a fork storm in the tree, and an orphan in the tree, read through a
//! terminal emulator (vt100).

use std::time::{Duration, Instant};

use super::tui_pty::Screen;

/// The width of the column headed `name` in a pane's header line `line`: up to the next
/// header, or the pane's right border.
fn column_width(line: &str, name: &str, next: Option<&str>) -> Option<usize> {
    let chars: Vec<char> = line.chars().collect();
    let text: String = chars.iter().collect();
    let at = text.find(name)?;
    let start = text[..at].chars().count();
    let end = match next {
        Some(n) => {
            start
                + text[at..]
                    .find(n)
                    .map(|i| text[at..at + i].chars().count())?
        }
        None => start + chars[start..].iter().position(|&c| c == '│')?,
    };
    Some(end - start)
}

/// A shell that spins (samples for Top symbols) between runs of `sleep`, in one process that
/// ends with the command.
const BUSY: &str =
    "while :; do /bin/sleep 0.3; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; done";

#[test]
fn at_80x24_each_pane_shown_keeps_its_key_column_and_tab_reaches_the_others() {
    require_perf!();
    let mut s = Screen::spawn_at(
        &["-e", "cpu-clock", "-F", "499", "--", "sh", "-c", BUSY],
        24,
        80,
    );
    s.wait_for(
        "Top symbols and Top tasks folded, and an exec row",
        Duration::from_secs(30),
        |t| {
            t.lines()
                .next()
                .is_some_and(|l| l.contains("Tab: +Top symbols +Top tasks"))
                && t.contains("/bin/sleep 0.3")
        },
    );
    let text = s.text();
    let header = text
        .lines()
        .find(|l| l.contains("event") && l.contains("command"))
        .expect("the task stream's header");
    let w = column_width(header, "command", Some("lived")).expect("command column");
    assert!(w >= 15, "the command column is {w} wide:\n{text}");
    // Tab: CPUs, Tasks, Top symbols (shown in place of the stream), Top tasks.
    s.send("\t\t\t");
    s.wait_for("Top symbols", Duration::from_secs(10), |t| {
        t.contains("Top symbols (") && t.lines().next().is_some_and(|l| l.contains("+Tasks"))
    });
    let text = s.text();
    let header = text
        .lines()
        .find(|l| l.contains("binary") && l.contains("symbol"))
        .expect("Top symbols' header");
    let w = column_width(header, "symbol", None).expect("symbol column");
    assert!(w >= 15 + 2, "the symbol column is {w} wide:\n{text}");
    s.send("\t");
    s.wait_for("Top tasks", Duration::from_secs(10), |t| {
        t.contains("Top tasks (")
    });
    let text = s.text();
    let header = text
        .lines()
        .find(|l| l.contains("comm") && l.contains("share") && l.contains("pid"))
        .expect("Top tasks' header");
    let w = column_width(header, "comm", Some("samples")).expect("comm column");
    assert!(w >= 15, "the comm column is {w} wide:\n{text}");
    // z: the focused pane on the whole screen, and back.
    s.send("z");
    s.wait_for("the zoomed pane", Duration::from_secs(10), |t| {
        t.contains("zoomed: Top tasks (z)") && !t.contains("Event log")
    });
    s.send("z");
    s.wait_for("the log again", Duration::from_secs(10), |t| {
        t.contains("Event log")
    });
    s.quit_ok();
}

/// Read the screen until a frame is complete: the tree's rows unchanged for 150 ms (at most
/// 2 s).
fn settle(s: &mut Screen) {
    let deadline = Instant::now() + Duration::from_secs(2);
    let rows = |t: &str| -> String {
        t.lines()
            .skip_while(|l| !l.contains("Process tree ("))
            .skip(1)
            .take_while(|l| !l.contains("Event log ("))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let mut last = rows(&s.text());
    while Instant::now() < deadline {
        s.pump(Duration::from_millis(150));
        let now = rows(&s.text());
        if now == last {
            return;
        }
        last = now;
    }
}

/// The run's elapsed time in the status bar (`00:00:12`), in seconds: when the frame on the
/// screen was drawn.
fn drawn_at(text: &str) -> Option<u64> {
    let first = text.lines().next()?;
    first
        .split(|c: char| c == '│' || c.is_whitespace())
        .find_map(|w| {
            let f: Vec<&str> = w.split(':').collect();
            if f.len() != 3 || f.iter().any(|x| x.len() != 2) {
                return None;
            }
            let n: Vec<u64> = f.iter().filter_map(|x| x.parse().ok()).collect();
            (n.len() == 3).then(|| n[0] * 3600 + n[1] * 60 + n[2])
        })
}

/// Page the tree (PgDn) until `cond` holds on the screen, at most `pages` times. A key is sent
/// only once the one before it has been drawn (the selection moved, or a frame drawn two
/// seconds after it shows the tree's end): a busy debug build draws a large tree slowly, and
/// keys sent ahead of the screen would page past rows never shown.
fn page_tree_until(s: &mut Screen, what: &str, pages: usize, cond: impl Fn(&str) -> bool) {
    let tree_pane = |t: &str| -> String {
        t.lines()
            .skip_while(|l| !l.contains("Process tree ("))
            .take_while(|l| !l.contains("Event log ("))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let mut seen = Vec::new();
    for _ in 0..pages {
        s.pump(Duration::from_millis(50));
        let text = s.text();
        if cond(&text) {
            return;
        }
        seen.push(tree_pane(&text));
        let (sel, at) = (selected(&text), drawn_at(&text));
        s.send("\x1b[6~");
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            s.pump(Duration::from_millis(50));
            let t = s.text();
            let moved = selected(&t) != sel;
            let end = matches!((at, drawn_at(&t)), (Some(a), Some(b)) if b >= a + 2);
            if moved || end {
                break;
            }
        }
        settle(s);
    }
    s.pump(Duration::from_millis(300));
    assert!(
        cond(&s.text()),
        "{what} not found in the tree:\n{}\npages:\n{}",
        s.text(),
        seen.join("\n----\n")
    );
}

/// ~1000 `/bin/true` a second: the tree shows their parent's exited children as one row.
#[test]
fn a_fork_storm_is_one_row_in_the_tree() {
    require_perf!();
    // Until perfwatch ends it (at q), so that the tree always has children that exited in
    // the last seconds; bounded all the same.
    let storm = "i=0; while [ $i -lt 100000 ]; do /bin/true; i=$((i+1)); done";
    let mut s = Screen::spawn_at(&["-e", "dummy", "--", "sh", "-c", storm], 45, 160);
    // Dozens of them first (three rows each: fork, exec, exit).
    s.wait_for("execs of true", Duration::from_secs(30), |t| {
        t.lines()
            .any(|l| l.contains(" exec ") && l.contains("true"))
            && t.split("Tasks: fork/exit/exec (")
                .nth(1)
                .and_then(|r| r.split(')').next())
                .and_then(|n| n.parse::<usize>().ok())
                .is_some_and(|n| n >= 90)
    });
    s.send("t");
    s.wait_for("the tree", Duration::from_secs(10), |t| {
        t.contains("Process tree (")
    });
    page_tree_until(&mut s, "the storm's row", 60, |t| {
        t.lines().any(|l| l.contains("exited: true ×"))
    });
    let text = s.text();
    let row = text
        .lines()
        .find(|l| l.contains("exited: true ×"))
        .unwrap_or_default();
    let n: usize = row
        .split("+")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        n > perfwatch::frontend::tui::tree::FOLD_EXITED,
        "the row counts the exited children: {row}"
    );
    let singles = text
        .lines()
        .filter(|l| l.contains("─ true") && l.contains("exited"))
        .count();
    assert_eq!(singles, 0, "no row of its own per true:\n{text}");
    s.quit_ok();
}

/// The tree's detail line shows the selected process: `pid command...`.
fn selected(text: &str) -> Option<u32> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines.iter().position(|l| l.contains("Event log ("))?;
    // The detail lines end the tree's pane: the last line that starts with a pid and no
    // tree column after it.
    lines[..end].iter().rev().find_map(|l| {
        let body = l.trim_start_matches('│');
        let first = body.split(' ').next()?;
        let pid: u32 = first.parse().ok()?;
        // A tree row has the pid in a 7-wide column; the detail line one space after it.
        body.get(first.len()..first.len() + 2)
            .filter(|gap| *gap != "  ")
            .map(|_| pid)
    })
}

/// Move the tree's selection with `key` until the process selected is `pid` (at most `n`
/// presses), each key once the one before it has moved the selection (a key sent ahead of a
/// slow frame would overshoot).
fn select_in_tree(s: &mut Screen, key: &str, pid: u32, n: usize) {
    for _ in 0..n {
        s.pump(Duration::from_millis(60));
        let before = selected(&s.text());
        if before == Some(pid) {
            return;
        }
        s.send(key);
        let deadline = Instant::now() + Duration::from_secs(10);
        while selected(&s.text()) == before && Instant::now() < deadline {
            s.pump(Duration::from_millis(50));
        }
    }
    s.pump(Duration::from_millis(200));
    assert_eq!(selected(&s.text()), Some(pid), "{}", s.text());
}

/// `sh -c 'sleep 42.5 & exit'`: the sleep shows under the parent the kernel gave it (the
/// test, made a child subreaper, so that its row is near), not under the shell that exited,
/// nor as a root of its own once that shell is forgotten.
#[test]
fn an_orphan_shows_under_its_new_parent_in_the_tree() {
    require_perf!();
    // SAFETY: a flag on this process; orphans of this test binary's commands come here.
    assert_eq!(
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) },
        0
    );
    let me = std::process::id();
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let script = format!(
        r#"sh -c "sleep 42.5 & echo \$! > '{}'"; sleep 30"#,
        pidfile.display()
    );
    let mut s = Screen::spawn_at(&["-e", "dummy", "--", "sh", "-c", &script], 45, 160);
    let deadline = Instant::now() + Duration::from_secs(30);
    let sleep: u32 = loop {
        s.pump(Duration::from_millis(50));
        if let Some(p) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            break p;
        }
        assert!(Instant::now() < deadline, "no sleep started");
    };
    struct Kill(u32);
    impl Drop for Kill {
        fn drop(&mut self) {
            // SAFETY: a signal to the sleep this test started; then reap it.
            unsafe {
                libc::kill(self.0 as libc::pid_t, libc::SIGKILL);
                libc::waitpid(self.0 as libc::pid_t, std::ptr::null_mut(), 0);
            }
        }
    }
    let _kill = Kill(sleep);
    // The kernel's answer, once its shell has exited.
    let parent = loop {
        let stat = std::fs::read(format!("/proc/{sleep}/stat")).unwrap();
        let p = perfwatch::process::proc::parse_ppid(&stat).unwrap();
        if p == me || Instant::now() > deadline {
            break p;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(parent, me, "the test is the sleep's subreaper");
    // Past the 5 s during which the exited shell is still shown.
    std::thread::sleep(Duration::from_secs(6));
    s.send("t");
    s.wait_for("the tree", Duration::from_secs(10), |t| {
        t.contains("Process tree (")
    });
    let pid_of = |l: &str| {
        l.trim_start_matches('│')
            .split_whitespace()
            .next()
            .and_then(|p| p.parse::<u32>().ok())
    };
    // Where a row's guide ends (`├─ `, `└─ `) in the process column: its depth.
    let guide = |l: &str| {
        let name: String = l.chars().skip(9).collect();
        name.find("─ ").map(|i| name[..i].chars().count())
    };
    // The selected row, as drawn: the tree row of the process the detail line names (the
    // first line with its pid; the detail line is below it).
    let selected_row = |text: &str| -> Option<(u32, Option<usize>, String)> {
        let pid = selected(text)?;
        // A tree row: the pid in a column of 7 (the detail line has one space after it).
        let l = text.lines().find(|l| {
            let body = l.trim_start_matches('│');
            pid_of(l) == Some(pid)
                && body
                    .get(pid.to_string().len()..)
                    .is_some_and(|r| r.starts_with("  "))
        })?;
        Some((pid, guide(l), l.to_string()))
    };
    // Select the sleep, then walk up to its parent row by row: the rows passed are its
    // parent's other descendants, none shallower than the sleep.
    select_in_tree(&mut s, "j", sleep, 400);
    let (_, depth, line) = selected_row(&s.text()).expect("the sleep's row");
    let depth = depth.unwrap_or_else(|| panic!("a root of its own: {line}\n{}", s.text()));
    assert!(line.contains("sleep 42.5"), "{line}");
    let mut passed = Vec::new();
    loop {
        s.send("k");
        let before = selected(&s.text());
        let deadline = Instant::now() + Duration::from_secs(3);
        while selected(&s.text()) == before && Instant::now() < deadline {
            s.pump(Duration::from_millis(40));
        }
        // The rest of the frame.
        s.pump(Duration::from_millis(150));
        let (pid, g, line) = selected_row(&s.text()).expect("a selected row");
        if pid == parent {
            assert_eq!(g.map_or(0, |g| g + 3), depth, "one level in: {line}");
            break;
        }
        assert!(
            g.is_some_and(|g| g >= depth),
            "{line} is shallower than the sleep, between it and {parent}"
        );
        passed.push(pid);
        assert!(
            passed.len() < 60,
            "{parent} not above the sleep: {passed:?}"
        );
    }
    s.quit_ok();
}
