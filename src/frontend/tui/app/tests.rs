use super::*;
use crate::event::EventDesc;
use crate::frontend::tui::panes::PANE_MESSAGES;
use crate::frontend::tui::rates::{RATE_LAG_NS, RATE_SECONDS, ipc};
use crate::frontend::tui::top_tasks::TopSort;
use crate::testkit::events::{batch, event, fork, sample, task};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

const T0: u64 = 100 * NS;

pub(crate) fn cfg(unit: RateUnit, history: usize) -> AppConfig {
    AppConfig {
        history,
        ..AppConfig::system_wide("cpu-clock", unit, vec![0, 1], T0)
    }
}

fn ev(cpu: u32, pid: u32, time: u64, kind: EventKind) -> Event {
    event(cpu, pid, pid, time, kind)
}

fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

#[test]
fn busy_cpu_reads_100_percent_and_idle_reads_0() {
    let mut app = App::new(cfg(RateUnit::Utilisation, 100));
    // One second, 1000 samples of 1 ms on each CPU: CPU 0 busy, CPU 1 idle (pid 0).
    let evs = (0..1000u64).flat_map(|i| {
        let t = T0 + i * 1_000_000;
        [sample(0, 42, t, 1_000_000), sample(1, 0, t, 1_000_000)]
    });
    app.on_events(evs);
    app.on_tick(T0 + NS + RATE_LAG_NS);
    let busy = app.shown().rates.latest(0).unwrap();
    assert!((busy - 100.0).abs() < 0.01, "{busy}");
    assert_eq!(app.shown().rates.latest(1), Some(0.0));
    assert!((app.shown().rates.latest(2).unwrap() - 100.0).abs() < 0.01);
    assert_eq!(app.shown().top().0, &[(42, 1000)]);
    assert_eq!(app.shown().top().1, 2000);
}

#[test]
fn partial_first_second_is_scaled_by_its_length() {
    let mut c = cfg(RateUnit::Utilisation, 100);
    c.start_ns = T0 + NS / 2;
    let mut app = App::new(c);
    let evs = (0..500u64).map(|i| sample(0, 7, T0 + NS / 2 + i * 1_000_000, 1_000_000));
    app.on_events(evs);
    app.on_tick(T0 + NS + RATE_LAG_NS);
    assert!((app.shown().rates.latest(0).unwrap() - 100.0).abs() < 0.01);
}

#[test]
fn hardware_events_are_summed_per_second_and_quiet_seconds_are_zero() {
    let mut app = App::new(cfg(RateUnit::Events, 100));
    app.on_events([
        sample(1, 5, T0 + 10, 2_000_000),
        sample(1, 5, T0 + 20, 3_000_000),
    ]);
    app.on_tick(T0 + 3 * NS + RATE_LAG_NS);
    let h: Vec<f64> = app.shown().rates.history(1).iter().copied().collect();
    assert_eq!(h, vec![5_000_000.0, 0.0, 0.0]);
    // A record for a second already final is counted in the next one, not lost.
    app.on_events([sample(1, 5, T0 + 10, 1)]);
    app.on_tick(T0 + 4 * NS + RATE_LAG_NS);
    assert_eq!(app.shown().rates.latest(1), Some(1.0));
    assert_eq!(app.shown().rates.latest(0), Some(0.0));
}

#[test]
fn ipc_maths() {
    assert_eq!(ipc(3_000.0, 1_000.0), Some(3.0));
    assert_eq!(ipc(500.0, 1_000.0), Some(0.5));
    assert_eq!(ipc(0.0, 1_000.0), Some(0.0));
    assert_eq!(ipc(1_000.0, 0.0), None, "no cycles: nothing to show");
    assert_eq!(ipc(f64::NAN, 1.0), None);
    assert_eq!(ipc(1.0, f64::INFINITY), None);
    assert_eq!(ipc(-1.0, 1.0), None);
}

use crate::testkit::events::desc;

/// An app keeping `history` entries over a model seeded with the tree tests' family
/// of processes.
fn with_tree(history: usize) -> App {
    use super::super::tree::tests::{FAMILY, seeded};
    let app = App::new(cfg(RateUnit::Records, history));
    *app.model.write() = seeded(FAMILY);
    app
}

fn sample_of(d: &'static EventDesc, cpu: u32, time: u64, period: u64) -> Event {
    crate::testkit::events::sample_of(d, cpu, 5, time, period)
}

#[test]
fn each_event_has_its_rate_and_cycles_with_instructions_give_ipc() {
    use perf_event_open_sys::bindings as sys;
    let cycles = desc(0, "cycles", sys::PERF_TYPE_HARDWARE, 0);
    let instructions = desc(1, "instructions", sys::PERF_TYPE_HARDWARE, 1);
    let switch = desc(2, "sched:sched_switch", sys::PERF_TYPE_TRACEPOINT, 372);
    let mut c = cfg(RateUnit::Events, 100);
    c.events = vec![cycles, instructions, switch];
    let mut app = App::new(c);
    assert!(app.shown().has_ipc());
    // In the first whole second: cpu0 runs 2e9 cycles and 3e9 instructions (IPC 1.5),
    // cpu1 1e9 cycles and 0.5e9 instructions (IPC 0.5); 7 switches on cpu1.
    let t = T0 + NS;
    let mut evs = Vec::new();
    for k in 0..4 {
        evs.push(sample_of(cycles, 0, t + k, 500_000_000));
        evs.push(sample_of(instructions, 0, t + k, 750_000_000));
        evs.push(sample_of(cycles, 1, t + k, 250_000_000));
        evs.push(sample_of(instructions, 1, t + k, 125_000_000));
    }
    for k in 0..7 {
        evs.push(sample_of(switch, 1, t + 10 + k, 1));
    }
    app.on_events(evs);
    app.on_tick(T0 + 3 * NS);
    assert_eq!(
        app.shown().rates.latest(0),
        Some(2e9),
        "the main event is cycles"
    );
    assert_eq!(app.shown().rates_of(1).and_then(|r| r.latest(0)), Some(3e9));
    assert_eq!(app.shown().rates_of(2).and_then(|r| r.latest(1)), Some(7.0));
    assert_eq!(app.shown().rates_of(2).and_then(|r| r.latest(0)), Some(0.0));
    assert_eq!(app.shown().ipc(0), Some(1.5));
    assert_eq!(app.shown().ipc(1), Some(0.5));
    assert_eq!(app.shown().ipc(2), Some(3.5e9 / 3e9), "all CPUs");
    // No IPC without both.
    let mut c = cfg(RateUnit::Events, 100);
    c.events = vec![cycles, switch];
    assert!(!App::new(c).shown().has_ipc());
}

#[test]
fn rate_history_is_bounded() {
    let mut app = App::new(cfg(RateUnit::Records, 100));
    for s in 1..200 {
        app.on_tick(T0 + s * NS + RATE_LAG_NS);
    }
    assert_eq!(app.shown().rates.history(0).len(), RATE_SECONDS);
}

#[test]
fn exited_tasks_are_forgotten_after_a_while() {
    let mut app = App::new(cfg(RateUnit::Records, 100));
    app.on_events([
        ev(0, 1, T0, EventKind::Fork(task(5, 1, T0))),
        ev(0, 5, T0 + 1, EventKind::Exit(task(5, 1, T0 + 1))),
        ev(0, 1, T0 + 2, EventKind::Fork(task(6, 1, T0 + 2))),
    ]);
    assert_eq!(app.tasks().len(), 2);
    // The pipeline's model forgets as the stream's time moves on.
    app.feed(Chunk {
        events: vec![],
        watermark: T0 + 20 * NS,
    });
    assert_eq!(app.tasks().len(), 1, "the live task stays");
}

#[test]
fn history_is_bounded_and_filter_follows_it() {
    let mut app = App::new(cfg(RateUnit::Records, 50));
    app.on_key(key('S'));
    app.set_filter(Filter::parse("cpu:1").unwrap());
    app.on_events((0..1000).map(|i| sample(i % 2, 3, T0 + i as u64, 1)));
    assert_eq!(app.log_entries(), 50);
    assert_eq!(app.log_len(), 25);
    assert!((0..25).all(|i| app.log_entry(i).unwrap().cpu == 1));
    assert_eq!(app.log_entry(24).unwrap().time, T0 + 999);
    app.set_filter(Filter::default());
    assert_eq!(app.log_len(), 50);
    app.on_key(key('c'));
    assert_eq!(app.log_len(), 0);
}

#[test]
fn comm_filter_uses_task_names() {
    let mut app = App::new(cfg(RateUnit::Records, 100));
    app.seed_tasks([(9, (*b"yes").into())]);
    app.on_key(key('S'));
    app.set_filter(Filter::parse("comm:yes").unwrap());
    app.on_events([sample(0, 9, T0, 1), sample(0, 10, T0 + 1, 1)]);
    assert_eq!(app.log_len(), 1);
    assert_eq!(app.log_entry(0).unwrap().pid, 9);
}

#[test]
fn filter_editing_previews_and_keeps_the_old_filter_on_error() {
    let mut app = App::new(cfg(RateUnit::Records, 100));
    app.on_events((0..10).map(|i| sample(i % 2, 3, T0 + i as u64, 1)));
    app.on_key(key('S'));
    app.on_key(key('/'));
    for c in "cpu:0".chars() {
        app.on_key(key(c));
    }
    assert_eq!(app.log_len(), 5, "live preview");
    app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    assert!(app.edit.is_none());
    app.on_key(key('/'));
    for c in " bogus:1".chars() {
        app.on_key(key(c));
    }
    let e = app.edit.as_ref().unwrap().error.clone().unwrap();
    assert!(e.contains("'bogus'"), "{e}");
    assert_eq!(app.filter().source(), "cpu:0", "the previous filter stays");
    app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    assert!(app.edit.is_some(), "Enter does not apply a bad filter");
    app.on_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    assert!(app.edit.is_none());
    assert_eq!(app.filter().source(), "cpu:0");
    assert_eq!(app.log_len(), 5);
}

#[test]
fn a_value_that_cannot_be_the_fields_is_refused_and_the_old_filter_stays() {
    use crate::testkit::tracepoints as craft;
    let mut c = cfg(RateUnit::Records, 100);
    c.events = vec![craft::desc(0, "sched:sched_switch", craft::SCHED_SWITCH)];
    let mut app = App::new(c);
    for (text, said) in [
        ("prev_pid:abc", "signed 32-bit number"),
        ("prev_state:Q", "shown as S D"),
    ] {
        app.on_key(key('/'));
        for ch in text.chars() {
            app.on_key(key(ch));
        }
        let e = app.edit.as_ref().unwrap().error.clone().unwrap();
        assert!(e.contains(said) && !e.contains('\n'), "{e}");
        assert_eq!(app.filter().source(), "", "the previous filter stays");
        app.on_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    }
    app.on_key(key('/'));
    for ch in "prev_state:S".chars() {
        app.on_key(key(ch));
    }
    app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    assert_eq!(app.filter().source(), "prev_state:S");
}

#[test]
fn scrolling_stays_on_the_same_entries_and_pause_freezes() {
    let mut app = App::new(cfg(RateUnit::Records, 1000));
    app.on_key(key('S'));
    app.on_events((0..100).map(|i| sample(0, 3, T0 + i as u64, 1)));
    assert_eq!(app.log.scroll, 0);
    app.on_key(KeyEvent::new(KeyCode::Up, KeyModifiers::NONE));
    assert_eq!(app.log.scroll, 1);
    app.on_events((0..10).map(|i| sample(0, 3, T0 + 1000 + i as u64, 1)));
    assert_eq!(
        app.log.scroll, 11,
        "new entries do not move a scrolled view"
    );
    app.on_key(KeyEvent::new(KeyCode::End, KeyModifiers::NONE));
    assert_eq!(app.log.scroll, 0);
    app.on_key(KeyEvent::new(KeyCode::Home, KeyModifiers::NONE));
    assert_eq!(
        app.log.scroll,
        110 - app.drawn.page_rows,
        "Home: the oldest row at the top of a full page"
    );
    app.on_key(KeyEvent::new(KeyCode::PageUp, KeyModifiers::NONE));
    assert_eq!(app.log.scroll, 110 - app.drawn.page_rows, "no further");
    app.on_key(KeyEvent::new(KeyCode::End, KeyModifiers::NONE));
    app.on_key(key(' '));
    assert!(app.paused);
    app.on_events((0..5).map(|i| sample(0, 3, T0 + 2000 + i as u64, 1)));
    assert_eq!(app.shown().log_len(), 110, "paused: the view stays put");
    assert_eq!(app.log_len(), 115, "counting continues");
    app.on_key(key(' '));
    assert_eq!(app.log.scroll, 0);
    assert_eq!(app.shown().log_len(), 115, "resumed: live again");
}

#[test]
fn pause_holds_every_pane_while_counting_goes_on_and_keys_act_on_the_held_view() {
    let mut app = App::new(cfg(RateUnit::Records, 100));
    app.on_events((0..20).map(|i| fork(0, T0 + i as u64, 100 + i, 1)));
    app.on_events((0..50).map(|i| sample(0, 105, T0 + 100 + i as u64, 1)));
    app.on_tick(T0 + 2 * NS);
    let shown = |a: &App| {
        let v = a.shown();
        let log: Vec<Event> = v.log_range(0, v.log_len()).into_iter().cloned().collect();
        let tasks: Vec<u32> = v.task_rows().iter().map(|r| r.pid).collect();
        (log, tasks, v.top().0.to_vec(), v.rates.history(0).clone())
    };
    let before = shown(&app);
    app.on_key(key(' '));
    // A burst of forks and samples, and a second closing: none of it reaches the panes.
    app.on_events((0..500).map(|i| fork(1, T0 + 3 * NS + i as u64, 1000 + i, 1)));
    app.on_events((0..500).map(|i| sample(1, 1000, T0 + 3 * NS + 600 + i as u64, 1)));
    app.on_tick(T0 + 5 * NS);
    app.set_totals(Totals::default());
    assert!(shown(&app) == before, "paused: every pane as it was");
    assert_eq!(
        app.log_held(),
        (200, 100),
        "the live state goes on (100 records and 100 samples kept)"
    );
    // Keys scroll and filter the held view.
    app.focus = Pane::Log;
    app.on_key(KeyEvent::new(KeyCode::Up, KeyModifiers::NONE));
    assert_eq!(app.log.scroll, 1);
    app.on_key(key('/'));
    for c in "pid:105".chars() {
        app.on_key(key(c));
    }
    app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    assert_eq!(
        app.shown().log_len(),
        1,
        "the fork of 105; its samples are hidden"
    );
    assert!(app.paused && !std::ptr::eq(app.shown(), &app.live));
    // Resume: live, with the filter chosen while paused.
    app.on_key(key(' '));
    assert!(!app.paused);
    assert_eq!(app.filter().source(), "pid:105");
    assert!(std::ptr::eq(app.shown(), &app.live));
    assert_eq!(
        app.log_len(),
        0,
        "live: 105's fork is 500 forks back, out of 100"
    );
    app.on_key(key('q'));
    assert!(app.quit);
}

#[test]
fn the_view_state_is_one_across_a_pause_and_the_data_is_held_apart() {
    let mut app = App::new(cfg(RateUnit::Records, 100));
    app.on_events((0..10).map(|i| fork(0, T0 + i as u64, 100 + i, 1)));
    app.on_events((0..6).map(|i| sample(0, 100 + (i % 2), T0 + 20 + i as u64, 1)));
    app.on_tick(T0 + 2 * NS);
    app.on_key(key(' '));
    // Chosen while paused, on the held panes: Top tasks per thread by id, the log scrolled
    // sideways, `S`, the callers' span.
    app.focus = Pane::Top;
    app.on_key(key('H'));
    app.on_key(key('s'));
    app.on_key(KeyEvent::new(KeyCode::Down, KeyModifiers::NONE));
    app.focus = Pane::Log;
    app.on_key(KeyEvent::new(KeyCode::Right, KeyModifiers::NONE));
    app.on_key(key('S'));
    app.on_key(key('a'));
    assert_eq!(app.shown().log_len(), 16, "the held log shows its samples");
    // `c` forgets the held log; the live one goes on.
    app.on_key(key('c'));
    app.on_events([fork(0, T0 + 3 * NS, 500, 1)]);
    assert_eq!((app.shown().log_len(), app.log_len()), (0, 17));
    app.on_key(key(' '));
    assert!(!app.paused && std::ptr::eq(app.shown(), &app.live));
    assert_eq!(
        (
            app.top.per_thread,
            app.top.sort,
            app.top.scroll,
            app.log.hscroll
        ),
        (true, TopSort::Id, 1, 8),
        "what was chosen while paused stays"
    );
    assert!(app.samples_in_log() && app.symbols.span == crate::callgraph::Span::SinceStart);
    assert_eq!(app.log_len(), 17, "the live log, with its samples");
}

#[test]
fn quit_while_paused() {
    let mut app = App::new(cfg(RateUnit::Records, 10));
    app.on_key(key(' '));
    app.on_key(key('q'));
    assert!(app.quit);
}

#[test]
fn enter_on_a_tree_row_narrows_the_views_to_it_and_its_children_and_esc_goes_back() {
    // bash (101) runs make (102); cron (110) is bash's uncle.
    let mut app = with_tree(1000);
    app.on_key(key('S'));
    app.on_events([
        sample(0, 102, T0 + 1, 1),
        sample(0, 110, T0 + 2, 1),
        sample(1, 101, T0 + 3, 1),
    ]);
    app.on_tick(T0 + 2 * NS);
    app.on_key(key('t'));
    assert!(app.tree && app.focus == Pane::Tasks);
    let rows = app.tree_rows();
    let at = rows.iter().position(|r| r.pid == 101).unwrap();
    for _ in 0..at {
        app.on_key(KeyEvent::new(KeyCode::Down, KeyModifiers::NONE));
    }
    app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    let n = app.narrow.as_ref().expect("narrowed");
    assert_eq!(n.pid, 101);
    let pids = |a: &App| -> Vec<u32> {
        a.shown()
            .log_range(0, a.log_len())
            .iter()
            .map(|e| e.subject_pid())
            .collect()
    };
    assert_eq!(pids(&app), [102, 101], "cron's sample is not shown");
    assert_eq!(
        app.top_rows().iter().map(|r| r.0).collect::<Vec<_>>(),
        [101, 102]
    );
    // A child forked by make joins, and its records show.
    app.on_events([
        fork(0, T0 + 3 * NS, 103, 102),
        sample(0, 103, T0 + 3 * NS + 1, 1),
        fork(0, T0 + 3 * NS + 2, 111, 110),
    ]);
    assert_eq!(pids(&app), [102, 101, 103, 103]);
    assert!(
        app.narrowed()
            .is_some_and(|n| n.contains(&103) && !n.contains(&111))
    );
    app.on_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    assert!(app.narrow.is_none() && app.narrowed().is_none());
    assert_eq!(app.log_len(), 6, "all again");
    app.on_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    assert_eq!(app.message.as_deref(), Some("nothing to go back from"));
}

#[test]
fn a_narrowed_view_follows_orphans_to_their_new_parent() {
    use crate::testkit::events::exit;
    // 450 (bash, under init) runs 500; 7 is a child subreaper under init.
    let mut app = App::new(cfg(RateUnit::Records, 100));
    *app.model.write() = super::super::tree::tests::seeded(&[
        (1, Some(0), "init"),
        (7, Some(1), "reaper"),
        (450, Some(1), "bash"),
        (500, Some(450), "sleep"),
    ]);
    app.model.write().collect_orphans(true);
    app.set_narrow(Some(7));
    app.on_events([exit(0, T0, 450, 1)]);
    let orphans = app.model.write().take_orphans();
    assert_eq!(orphans.len(), 1);
    // What the pipeline does once /proc shows the new parent.
    app.model.write().reparent(&orphans[0], 7);
    app.on_events([sample(0, 500, T0 + 1, 1)]);
    assert!(app.narrowed().is_some_and(|n| n.contains(&500)));
    let rows = app.tree_rows();
    let at = |pid| rows.iter().position(|r| r.pid == pid).unwrap();
    assert_eq!(rows[at(500)].prefix, "│  └─ ", "under the reaper");
    assert_eq!(at(500), at(7) + 1);
}

#[test]
fn the_tree_selection_follows_its_process_when_rows_above_come_and_go() {
    let mut app = with_tree(100);
    app.on_key(key('t'));
    for _ in 0..4 {
        app.on_key(key('j'));
    }
    let rows = app.tree_rows();
    assert_eq!(rows[app.tree_selected(&rows)].pid, 110);
    // A process forked by init with a lower pid: a row above the selection.
    app.on_events([fork(0, T0, 50, 1)]);
    let rows = app.tree_rows();
    assert_eq!(rows[app.tree_selected(&rows)].pid, 110, "still cron");
    app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    assert_eq!(app.narrow.as_ref().map(|n| n.pid), Some(110));
}

#[test]
fn the_panes_keys_on_empty_panes_do_nothing_and_never_panic() {
    let mut app = App::new(cfg(RateUnit::Records, 10));
    let keys = [
        KeyCode::Up,
        KeyCode::Down,
        KeyCode::PageUp,
        KeyCode::PageDown,
        KeyCode::Home,
        KeyCode::End,
        KeyCode::Enter,
        KeyCode::Right,
        KeyCode::Left,
    ];
    for paused in [false, true] {
        if paused {
            app.on_key(key(' '));
        }
        for (pane, tree) in [
            (Pane::Cpus, false),
            (Pane::Tasks, false),
            (Pane::Tasks, true),
            (Pane::Top, false),
            (Pane::Symbols, false),
            (Pane::Script(0), false),
            (Pane::Log, false),
        ] {
            (app.focus, app.tree) = (pane, tree);
            for k in keys {
                app.on_key(KeyEvent::new(k, KeyModifiers::NONE));
            }
            app.on_key(key('+'));
            app.on_key(key('-'));
        }
        assert_eq!(app.paused, paused);
        assert_eq!(
            (app.log.scroll, app.stream.scroll, app.top.scroll),
            (0, 0, 0)
        );
        assert_eq!(
            (app.cpu_scroll, app.symbols.selected),
            (2, 0),
            "the CPUs' rows are there"
        );
        assert!(app.narrow.is_none());
    }
}

#[test]
fn top_tasks_per_process_or_thread_in_three_orders() {
    let mut app = App::new(cfg(RateUnit::Records, 100));
    app.seed_tasks([(10, (*b"zed").into()), (20, (*b"alpha").into())]);
    let s = |pid, tid, t| event(0, pid, tid, t, EventKind::sample(0x1000, 1, 2));
    let mut evs = Vec::new();
    for i in 0..5 {
        evs.push(s(10, 10, T0 + i));
        evs.push(s(10, 11, T0 + 10 + i));
    }
    for i in 0..3 {
        evs.push(s(20, 20, T0 + 20 + i));
    }
    app.on_events(evs);
    app.on_tick(T0 + 2 * NS);
    assert_eq!(app.top_rows(), [(10, 10), (20, 3)]);
    app.focus = Pane::Top;
    app.on_key(key('H'));
    assert_eq!(app.top_rows(), [(10, 5), (11, 5), (20, 3)]);
    app.on_key(key('H'));
    app.on_key(key('s'));
    assert_eq!(app.top.sort, TopSort::Id);
    assert_eq!(app.top_rows(), [(10, 10), (20, 3)]);
    app.on_key(key('s'));
    assert_eq!(app.top_rows(), [(20, 3), (10, 10)], "alpha before zed");
    assert_eq!(
        app.symbols.sort,
        super::super::top_symbols::SortBy::Samples,
        "untouched"
    );
}

#[test]
fn focus_cycles_and_quit_keys() {
    let mut app = App::new(cfg(RateUnit::Records, 10));
    assert_eq!(app.focus, Pane::Log);
    app.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    assert_eq!(app.focus, Pane::Cpus);
    app.on_key(KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT));
    assert_eq!(app.focus, Pane::Log);
    app.on_key(key('?'));
    assert!(app.show_help);
    app.on_key(key('q'));
    assert!(!app.show_help && !app.quit, "q closes the help first");
    app.on_key(key('q'));
    assert!(app.quit);
    let mut app = App::new(cfg(RateUnit::Records, 10));
    app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
    assert!(app.quit);
}

#[test]
fn script_panes_are_escaped_and_bounded() {
    let mut app = App::new(cfg(RateUnit::Records, 10));
    assert!(!app.shown().panes().contains(&Pane::Script(0)));
    app.on_pane_msg(PaneMsg::Lines {
        script: "s.py".into(),
        lines: vec!["\x1b[2Jx".into()],
    });
    for i in 0..500 {
        app.on_pane_msg(PaneMsg::Text {
            script: "s.py".into(),
            text: format!("line {i}\nmore"),
            is_error: false,
        });
    }
    assert_eq!(app.shown().scripts.len(), 1);
    assert_eq!(app.shown().scripts[0].lines, vec!["\\x1b[2Jx".to_string()]);
    assert_eq!(app.shown().scripts[0].messages.len(), PANE_MESSAGES);
    assert!(app.shown().panes().contains(&Pane::Script(0)));
    app.on_pane_msg(PaneMsg::Lines {
        script: "t.py".into(),
        lines: vec!["t".into()],
    });
    let panes = app.shown().panes();
    let at = panes.iter().position(|p| *p == Pane::Script(0)).unwrap();
    assert_eq!(
        panes[at + 1],
        Pane::Script(1),
        "one pane per script, in Tab order"
    );
    app.focus = Pane::Script(0);
    app.on_key(KeyEvent::new(KeyCode::Down, KeyModifiers::NONE));
    assert_eq!((app.script_scroll(0), app.script_scroll(1)), (1, 0));
}

#[test]
fn batches_go_through_time_order() {
    // The readers' batches reach the app through the pipeline, as in a run.
    let (tx, rx) = crossbeam_channel::unbounded();
    let opts = crate::pipeline::PipelineOptions {
        seed: None,
        ..Default::default()
    };
    let mut pipe = crate::pipeline::Pipeline::new(rx, &[0, 1], opts);
    let mut app = App::new(cfg(RateUnit::Records, 100)).with_model(pipe.model().clone());
    app.on_key(key('S'));
    tx.send(batch(1, T0 + 30, vec![sample(1, 3, T0 + 20, 1)], false))
        .unwrap();
    tx.send(batch(0, T0 + 30, vec![sample(0, 3, T0 + 10, 1)], true))
        .unwrap();
    tx.send(batch(1, T0 + 40, vec![], true)).unwrap();
    let first = pipe.batches().recv();
    pipe.take(first);
    while let Some(c) = pipe.next_chunk() {
        app.on_chunk(c);
    }
    assert!(pipe.all_ended());
    pipe.finish(std::time::Duration::ZERO);
    assert_eq!(app.log_len(), 2);
    assert_eq!(app.log_entry(0).unwrap().cpu, 0);
}

#[test]
fn a_replay_read_again_starts_the_panes_afresh_and_keeps_the_view_settings() {
    use crate::frontend::tui::replay::{ReplayCmd, ReplayView};
    let mut app = App::new(cfg(RateUnit::Utilisation, 100));
    app.replay = Some(ReplayView::default());
    app.set_filter(Filter::parse("type:fork").unwrap());
    app.on_events([fork(0, T0 + 5, 300, 1), sample(0, 300, T0 + 6, 1_000_000)]);
    assert_eq!(app.log_len(), 1);
    // Space is the replay's, not the view's pause; the replay keys go to the loop.
    app.on_key(key(' '));
    app.on_key(key('{'));
    app.on_key(key('>'));
    assert!(!app.paused, "no frozen copy: the replay's clock stops");
    assert_eq!(
        app.take_replay_cmds(),
        [ReplayCmd::PlayPause, ReplayCmd::ToStart, ReplayCmd::Faster]
    );
    assert!(app.take_replay_cmds().is_empty());
    let model = crate::process::ModelHandle::default();
    app.restart(model, T0 + 2);
    assert_eq!(app.log_len(), 0, "the panes start afresh");
    assert_eq!(app.shown().top().1, 0);
    assert_eq!(app.filter().source(), "type:fork", "the filter stays");
    assert_eq!(app.cfg.start_ns, T0 + 2);
    // Live, the replay keys only say what they are for.
    let mut live = App::new(cfg(RateUnit::Utilisation, 100));
    live.on_key(key(']'));
    assert!(live.take_replay_cmds().is_empty());
    assert!(
        live.message
            .as_deref()
            .is_some_and(|m| m.contains("-i FILE"))
    );
}
