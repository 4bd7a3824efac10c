//! Whole-screen snapshots of the TUI, rendered into ratatui's `TestBackend` from a fixed,
//! hand-made event sequence (no kernel, no terminal, no clock).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use perfwatch::event::{Event, EventKind, RecordType};
use perfwatch::frontend::tui::app::{App, AppConfig, RateUnit};
use perfwatch::frontend::tui::ui;
use perfwatch::pane::PaneMsg;
use perfwatch::stats::{CpuSnapshot, Totals};
use perfwatch::testkit::events as tk;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const NS: u64 = 1_000_000_000;
const T0: u64 = 1_000 * NS;

fn ev(cpu: u32, pid: u32, time: u64, kind: EventKind) -> Event {
    tk::event(cpu, pid, pid, time, kind)
}

/// `pid` runs `name` (an exec).
fn comm(pid: u32, time: u64, name: &[u8]) -> Event {
    tk::comm(0, time, pid, name, true)
}

/// Three seconds of a shell starting `make`, which runs `cc` (with a hostile name) and
/// exits; CPU 0 busy with a spinning task, CPU 1 mostly idle.
fn app() -> App {
    let mut app = App::new(AppConfig {
        fallback: Some("cycles not supported, using cpu-clock".into()),
        history: 10_000,
        ..AppConfig::system_wide("cpu-clock", RateUnit::Utilisation, vec![0, 1], T0)
    });
    app.seed_tasks([
        (1, (*b"systemd").into()),
        (500, (*b"bash").into()),
        (600, (*b"spin").into()),
    ]);
    let mut evs = Vec::new();
    for s in 0..3u64 {
        for ms in 0..1000u64 {
            let t = T0 + s * NS + ms * 1_000_000;
            let s0 = EventKind::sample(0x4011d6, 1_000_000, 2);
            evs.push(ev(0, 600, t, s0.clone()));
            let pid1 = if ms % 4 == 0 { 700 } else { 0 };
            evs.push(ev(1, pid1, t + 500, s0));
            if s == 1 && ms == 100 {
                evs.push(tk::fork(1, t + 600, 700, 500));
                evs.push(comm(700, t + 700, b"make"));
            }
            if s == 1 && ms == 200 {
                evs.push(tk::fork(1, t + 600, 701, 700));
                evs.push(comm(701, t + 700, b"cc\x1b[31m\nevil"));
            }
            if s == 2 && ms == 900 {
                evs.push(tk::exit(1, t + 600, 701, 700));
                evs.push(tk::exit(1, t + 800, 700, 500));
            }
        }
    }
    app.on_events(evs);
    app.on_tick(T0 + 3 * NS + NS / 2);
    let mut per = vec![
        CpuSnapshot {
            cpu: 0,
            ..Default::default()
        },
        CpuSnapshot {
            cpu: 1,
            ..Default::default()
        },
    ];
    per[0].records[RecordType::Sample.index()] = 3000;
    per[1].records[RecordType::Sample.index()] = 3000;
    per[1].records[RecordType::Fork.index()] = 2;
    per[1].records[RecordType::Exit.index()] = 2;
    per[0].records[RecordType::Comm.index()] = 2;
    let mut totals = Totals::of(per);
    totals.lost = 12;
    app.set_totals(totals);
    app
}

/// The 110×36 screen of `a`, which must show each of `says`.
#[track_caller]
fn shows(a: &mut App, says: &[&str]) -> String {
    let s = screen(a, 110, 36);
    for w in says {
        assert!(s.contains(w), "{w:?} not shown:\n{s}");
    }
    s
}

fn screen(app: &mut App, w: u16, h: u16) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    ui::render(&mut term, app).unwrap();
    term.backend().to_string()
}

fn key(app: &mut App, code: KeyCode) {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE));
}

fn type_text(app: &mut App, s: &str) {
    for c in s.chars() {
        key(app, KeyCode::Char(c));
    }
}

#[test]
fn normal_screen() {
    let s = screen(&mut app(), 110, 36);
    assert!(s.contains("cpu0   100.0%"), "{s}");
    assert!(s.contains("cc\\x1b[31m"), "escaped comm: {s}");
    assert!(!s.contains('\x1b'));
    insta::assert_snapshot!(s);
}

#[test]
fn paused_screen() {
    let mut a = app();
    key(&mut a, KeyCode::Char(' '));
    a.on_events([comm(600, T0 + 4 * NS, b"late")]);
    let s = shows(&mut a, &["PAUSED"]);
    assert!(!s.contains("late"), "the rename came after the pause: {s}");
    insta::assert_snapshot!(s);
}

#[test]
fn paused_replay_screen() {
    use perfwatch::frontend::tui::replay::{ReplayCmd, ReplayView, Speed};
    let mut a = app();
    a.replay = Some(ReplayView {
        start: T0,
        end: Some(T0 + 60 * NS),
        position: T0 + 3 * NS + NS / 2,
        playing: false,
        speed: Speed::Ten,
        seeking: false,
        read: false,
        at_end: false,
        about: "host box, Linux 6.1.0-18-amd64, perf 6.1.76, 2 CPUs, events cpu-clock; recorded with: perf record -a -o rec.data".into(),
    });
    let s = shows(
        &mut a,
        &[
            "PAUSED",
            "replay: PAUSED (10x on space) │ 3.5 s / 60.0 s [",
            "recorded with: perf record",
            "play/pause",
        ],
    );
    // Space and the replay keys go to the loop, which owns the replay's clock.
    key(&mut a, KeyCode::Char(' '));
    key(&mut a, KeyCode::Char('['));
    assert_eq!(
        a.take_replay_cmds(),
        vec![ReplayCmd::PlayPause, ReplayCmd::Back]
    );
    insta::assert_snapshot!(s);
    // Its help lists the replay keys first, in place of the live pause.
    key(&mut a, KeyCode::Char('?'));
    let help = shows(
        &mut a,
        &["Replay (a recording: perfwatch -i FILE)", "jump 10 s on"],
    );
    assert!(!help.contains("counting continues"), "{help}");
}

#[test]
fn filter_editing_with_an_error() {
    let mut a = app();
    key(&mut a, KeyCode::Char('/'));
    type_text(&mut a, "type:fork,exit");
    key(&mut a, KeyCode::Enter);
    key(&mut a, KeyCode::Char('/'));
    type_text(&mut a, " colour:red");
    let s = shows(&mut a, &["unknown filter key 'colour'"]);
    assert!(
        s.contains("Event log (4/"),
        "the previous filter stays: {s}"
    );
    insta::assert_snapshot!(s);
}

#[test]
fn help_overlay() {
    let mut a = app();
    key(&mut a, KeyCode::Char('?'));
    let s = shows(&mut a, &["comm:bash"]);
    insta::assert_snapshot!(s);
}

#[test]
fn tiny_terminal() {
    let s = screen(&mut app(), 40, 10);
    assert!(s.contains("enlarge the terminal"), "{s}");
    insta::assert_snapshot!(s);
}

#[test]
fn a_script_pane_comes_before_top_tasks() {
    let mut a = app();
    a.on_pane_msg(PaneMsg::Lines {
        script: "count.py".into(),
        lines: vec!["forks: 2".into(), "execs: 2".into()],
    });
    a.on_pane_msg(PaneMsg::Text {
        script: "count.py".into(),
        text: "Traceback: boom".into(),
        is_error: true,
    });
    let s = screen(&mut a, 110, 36);
    assert!(
        s.contains("Script: count.py") && s.contains("forks: 2"),
        "{s}"
    );
    insta::assert_snapshot!(s);
}

#[test]
fn two_scripts_each_have_their_pane_on_160x50() {
    let mut a = app();
    for (script, lines) in [
        ("count.py", vec!["forks: 2", "execs: 2"]),
        ("lifetimes.py", vec!["make 1.80s", "cc 1.70s"]),
    ] {
        a.on_pane_msg(PaneMsg::Lines {
            script: script.into(),
            lines: lines.into_iter().map(String::from).collect(),
        });
    }
    a.on_pane_msg(PaneMsg::Text {
        script: "lifetimes.py".into(),
        text: "printed".into(),
        is_error: false,
    });
    let s = screen(&mut a, 160, 50);
    for want in [
        "Script: count.py",
        "execs: 2",
        "Script: lifetimes.py",
        "cc 1.70s",
        "printed",
    ] {
        assert!(s.contains(want), "{want} not visible:\n{s}");
    }
    insta::assert_snapshot!(s);
}

#[test]
fn process_tree() {
    let mut a = app();
    key(&mut a, KeyCode::Char('t'));
    let s = shows(&mut a, &["Process tree ("]);
    assert!(
        s.lines()
            .any(|l| l.contains("└─ make") && l.contains("exited")),
        "make under bash, marked exited:\n{s}"
    );
    insta::assert_snapshot!(s);
}

/// ~1000 `/bin/true` a second under bash: the tree folds bash's exited children into one
/// row that counts them by name, as forkstat summarises.
#[test]
fn a_fork_storm_is_one_row_in_the_tree() {
    let mut a = app();
    let mut evs = Vec::new();
    for i in 0..1500u32 {
        let t = T0 + 3 * NS + u64::from(i) * 1_000_000;
        evs.push(tk::fork(1, t, 2000 + i, 500));
        evs.push(comm(
            2000 + i,
            t + 1000,
            if i % 100 == 7 { b"sh" } else { b"true" },
        ));
        evs.push(tk::exit(1, t + 300_000, 2000 + i, 500));
    }
    a.on_events(evs);
    a.on_tick(T0 + 5 * NS);
    key(&mut a, KeyCode::Char('t'));
    let s = screen(&mut a, 120, 40);
    assert!(
        s.contains("+1500 exited: true ×1485, sh ×15"),
        "one row for the storm:\n{s}"
    );
    assert!(s.contains("Process tree (1505 processes"), "{s}");
    insta::assert_snapshot!(s);
}

#[test]
fn narrowed_to_a_process_and_its_children() {
    let mut a = app();
    a.set_narrow(Some(500));
    let s = shows(
        &mut a,
        &[
            "Event log of 500 bash (+children)",
            "Top tasks of 500 bash (+children)",
        ],
    );
    assert!(
        !s.lines().any(|l| l.contains("│600 ")),
        "spin is not bash's: {s}"
    );
    insta::assert_snapshot!(s);
}

#[test]
fn a_click_focuses_and_selects_and_right_scrolls_the_log_sideways() {
    use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    let mut a = app();
    key(&mut a, KeyCode::Char('t'));
    let s = screen(&mut a, 110, 36);
    // The tree's rows: click the one of pid 700 (make, under bash).
    let (y, line) = s
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains("└─ make"))
        .expect("make's row");
    let x = line.find("make").unwrap() as u16;
    a.focus = perfwatch::frontend::tui::app::Pane::Log;
    a.on_mouse(MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column: x,
        row: y as u16,
        modifiers: KeyModifiers::NONE,
    });
    assert_eq!(a.focus, perfwatch::frontend::tui::app::Pane::Tasks);
    key(&mut a, KeyCode::Enter);
    assert_eq!(
        a.narrow.as_ref().map(|n| n.pid),
        Some(700),
        "the clicked row"
    );
    key(&mut a, KeyCode::Esc);
    // Right on the log: the records move left, the times stay.
    a.focus = perfwatch::frontend::tui::app::Pane::Log;
    let before = screen(&mut a, 110, 36);
    key(&mut a, KeyCode::Right);
    let after = screen(&mut a, 110, 36);
    assert!(after.contains("[→8]"), "{after}");
    let fork = |t: &str| {
        t.lines()
            .find(|l| l.contains("1.100 "))
            .unwrap()
            .to_string()
    };
    assert!(fork(&before).contains("cpu: 1, pid: 500"), "{before}");
    assert!(fork(&after).contains("1.100 pid: 500"), "{after}");
    key(&mut a, KeyCode::Left);
    assert_eq!(screen(&mut a, 110, 36), before);
}

/// A busy system-wide run with call chains: `spin` in `hot_b` (through `middle` and
/// `main`), `dd` in the kernel's read and write paths, kdamond now and then, and a shell
/// that starts commands with long command lines.
fn busy() -> App {
    use perfwatch::cmdline::{ArgvSource, CmdLine};
    let model = perfwatch::process::ModelHandle::default();
    let mut a = App::new(AppConfig {
        history: 10_000,
        ..AppConfig::system_wide("cpu-clock", RateUnit::Utilisation, vec![0, 1], T0)
    })
    .with_model(model.clone());
    a.seed_tasks([
        (1, (*b"systemd").into()),
        (81, (*b"kdamond.0").into()),
        (500, (*b"bash").into()),
    ]);
    model.write().collect_execs(true);
    let n = perfwatch::testkit::named::Names::new();
    let mut evs = Vec::new();
    let cmds: [(&[u8], &[u8]); 3] = [
        (b"spin", b"/usr/local/bin/spin --threads 1 --seconds 600"),
        (b"dd", b"dd if=/dev/zero of=/dev/null bs=1 count=20000000"),
        (b"sleep", b"sleep 0.777"),
    ];
    for (i, (comm_name, _)) in cmds.iter().enumerate() {
        let pid = 600 + i as u32;
        let t = T0 + i as u64 * 1_000_000;
        evs.push(tk::fork(1, t, pid, 500));
        evs.push(comm(pid, t + 1000, comm_name));
    }
    for ms in 0..3000u64 {
        let t = T0 + 10_000_000 + ms * 1_000_000;
        evs.push(n.sample(600, t, &["hot_b", "middle", "main"], true));
        let chain: &[&str] = match ms % 4 {
            0 | 1 => &[
                "k_copy_to_user",
                "k_vfs_read",
                "k_ksys_read",
                "k_do_syscall_64",
            ],
            2 => &["k_vfs_write", "k_ksys_write", "k_do_syscall_64"],
            _ => &["k_pv_native_safe_halt"],
        };
        let pid = if ms % 4 == 3 { 81 } else { 601 };
        evs.push(n.sample(pid, t + 500, chain, true));
    }
    evs.push(tk::exit(1, T0 + 2_900_000_000, 602, 500));
    a.on_events(evs);
    for (i, (_, argv)) in cmds.iter().enumerate() {
        let mut raw = argv
            .iter()
            .map(|&b| if b == b' ' { 0 } else { b })
            .collect::<Vec<_>>();
        raw.push(0);
        let t = T0 + i as u64 * 1_000_000 + 1000;
        let c = CmdLine::new(&raw, 0, ArgvSource::Exec).shared();
        model.write().set_argv(600 + i as u32, t, c);
    }
    a.on_tick(T0 + 3 * NS + NS / 2);
    let mut per = vec![
        CpuSnapshot {
            cpu: 0,
            ..Default::default()
        },
        CpuSnapshot {
            cpu: 1,
            ..Default::default()
        },
    ];
    per[0].records[RecordType::Sample.index()] = 3000;
    per[1].records[RecordType::Sample.index()] = 3000;
    per[1].records[RecordType::Fork.index()] = 3;
    per[1].records[RecordType::Exit.index()] = 1;
    per[0].records[RecordType::Comm.index()] = 3;
    a.set_totals(Totals::of(per));
    a
}

/// Every pane shown keeps its key column readable (at least 15 columns); what does not fit
/// is folded behind Tab, and the status bar says so.
#[track_caller]
fn readable_at(w: u16, h: u16, shown: &[&str], folded: &str) -> String {
    let s = screen(&mut busy(), w, h);
    for want in shown {
        assert!(s.contains(want), "{w}x{h}: {want:?} not shown:\n{s}");
    }
    let status = s.lines().next().unwrap_or_default();
    assert!(status.contains(folded), "{w}x{h}: status {status:?}");
    s
}

#[test]
fn at_80x24_one_middle_pane_and_the_others_behind_tab() {
    let s = readable_at(
        80,
        24,
        &["dd if=/dev/zero", "sleep 0.777"],
        "Tab: +Top symbols +Top tasks",
    );
    insta::assert_snapshot!(s);
}

#[test]
fn at_120x40_tasks_and_top_symbols() {
    let s = readable_at(
        120,
        40,
        &["spin --threads", "k_pv_native_saf", "k_copy_to_user"],
        "Tab: +Top tasks",
    );
    insta::assert_snapshot!(s);
}

#[test]
fn at_160x45_every_pane() {
    let s = readable_at(
        160,
        45,
        &["/usr/local/bin/spin", "k_pv_native_saf", "kdamond.0"],
        "rec/s │ system-wide",
    );
    insta::assert_snapshot!(s);
}

/// The focused task pane shows the selected row's whole command line and the file its exec
/// ran (its MMAP2 record), wrapped under the rows; the log shows an exec's command line.
#[test]
fn the_selected_task_shows_its_whole_command_line_and_what_ran() {
    let mut a = busy();
    a.on_events([tk::mmap2(
        0,
        T0 + 1_000_000 + 2000,
        601,
        0x400000,
        0x1000,
        0,
        b"/usr/bin/dd",
        7,
    )]);
    a.focus = perfwatch::frontend::tui::app::Pane::Tasks;
    screen(&mut a, 80, 30);
    // Up from the newest (sleep's exit) to dd's exec, three rows back.
    for _ in 0..3 {
        key(&mut a, KeyCode::Up);
    }
    let s = screen(&mut a, 80, 30);
    assert!(
        s.contains("601 dd if=/dev/zero of=/dev/null bs=1 count=20000000"),
        "{s}"
    );
    assert!(s.contains("exe /usr/bin/dd · argv as exec'd"), "{s}");
    insta::assert_snapshot!(s);
    // The tree: the selected process, as the model knows it now.
    key(&mut a, KeyCode::Char('t'));
    let rows = a.tree_rows();
    let at = rows.iter().position(|r| r.pid == 600).unwrap();
    for _ in 0..at {
        key(&mut a, KeyCode::Down);
    }
    let s = screen(&mut a, 120, 40);
    assert!(
        s.contains("600 /usr/local/bin/spin --threads 1 --seconds 600"),
        "{s}"
    );
    let s = screen(&mut a, 160, 45);
    assert!(
        s.lines()
            .any(|l| l.contains("comm: dd }") && l.contains("argv: dd if=/dev/zero")),
        "the log's exec record with its command line: {s}"
    );
}

/// Tab to a folded pane shows it in the middle row's last place; `z` zooms the focused pane.
#[test]
fn tab_brings_a_folded_pane_and_z_zooms() {
    let mut a = busy();
    screen(&mut a, 80, 24);
    // Log → CPUs → Tasks → Top symbols → Top tasks.
    for _ in 0..4 {
        a.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    }
    assert_eq!(a.focus, perfwatch::frontend::tui::app::Pane::Top);
    let s = screen(&mut a, 80, 24);
    assert!(
        s.contains("Top tasks (samples") && s.contains("kdamond.0"),
        "{s}"
    );
    assert!(
        s.lines()
            .next()
            .unwrap()
            .contains("Tab: +Tasks +Top symbols"),
        "{s}"
    );
    key(&mut a, KeyCode::Char('z'));
    let s = screen(&mut a, 80, 24);
    assert!(s.contains("zoomed: Top tasks (z)"), "{s}");
    assert!(!s.contains("Event log"), "{s}");
    key(&mut a, KeyCode::Char('z'));
    assert!(screen(&mut a, 80, 24).contains("Event log"));
}

#[test]
fn resizing_relays_out() {
    let mut a = app();
    for (w, h) in [(60, 18), (80, 24), (200, 60)] {
        let s = screen(&mut a, w, h);
        assert!(s.contains("Event log"), "{w}x{h}: {s}");
        assert!(!s.contains("enlarge"), "{w}x{h}");
    }
}

/// `-e cycles,instructions,sched:sched_switch` on a machine with a PMU: the per-CPU pane has
/// a rate column per event and IPC (cpu0 runs at IPC 1.50, cpu1 at 0.50).
#[test]
fn several_events_with_ipc() {
    use perf_event_open_sys::bindings as sys;
    let d = tk::desc;
    let cycles = d(0, "cycles", sys::PERF_TYPE_HARDWARE, 0);
    let instructions = d(1, "instructions", sys::PERF_TYPE_HARDWARE, 1);
    let switch = d(2, "sched:sched_switch", sys::PERF_TYPE_TRACEPOINT, 372);
    let mut app = App::new(AppConfig {
        history: 10_000,
        events: vec![cycles, instructions, switch],
        ..AppConfig::system_wide("cycles", RateUnit::Events, vec![0, 1], T0)
    });
    let sample = |e, cpu, t, period| tk::sample_of(e, cpu, 600, t, period);
    let mut evs = Vec::new();
    for s in 0..3u64 {
        for ms in 0..100u64 {
            let t = T0 + s * NS + ms * 10_000_000;
            evs.push(sample(cycles, 0, t, 20_000_000));
            evs.push(sample(instructions, 0, t + 1, 30_000_000));
            evs.push(sample(cycles, 1, t + 2, 10_000_000));
            evs.push(sample(instructions, 1, t + 3, 5_000_000));
            if ms % 2 == 0 {
                evs.push(sample(switch, 1, t + 4, 1));
            }
        }
    }
    app.on_events(evs);
    app.on_tick(T0 + 3 * NS + NS / 2);
    let s = screen(&mut app, 110, 36);
    assert!(
        s.contains("cycles per second (last minute) · instructions · sched:sched_switch · IPC"),
        "{s}"
    );
    assert!(s.contains(" 1.50 ") && s.contains(" 0.50 "), "{s}");
    insta::assert_snapshot!(s);
}
