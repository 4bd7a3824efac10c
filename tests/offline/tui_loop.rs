//! The TUI's whole loop on ratatui's `TestBackend`: readers' batches through the pipeline
//! (ordering, process model), keys, script pane messages, the clock and the stop rule, as
//! `perfwatch` runs it, without a terminal or the kernel.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Sender, never, unbounded};
use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use perfwatch::event::Batch;
use perfwatch::frontend::tui::app::{App, AppConfig, RateUnit};
use perfwatch::frontend::tui::{LoopInputs, run_loop};
use perfwatch::pane::PaneMsg;
use perfwatch::pipeline::{Pipeline, PipelineOptions};
use perfwatch::stats::Stats;
use perfwatch::stop::{StopReason, StopRule, Watched};
use perfwatch::testkit::events::{batch, comm, exit, fork, sample};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const MS: u64 = 1_000_000;
const T0: u64 = 5_000_000 * MS;

/// The monitor as the stop rule sees it: a command that exits when told, readers that are
/// asked to stop.
#[derive(Default)]
struct FakeMonitor {
    command_status: Option<i32>,
    stop_requested: Arc<AtomicBool>,
}

impl Watched for FakeMonitor {
    fn reader_failed(&self) -> bool {
        false
    }
    fn command_exit(&mut self) -> Option<i32> {
        self.command_status
    }
    fn request_stop(&self) {
        self.stop_requested.store(true, Ordering::Release);
    }
}

/// The events' clock of the run: starts at `T0` when the test starts.
fn clock() -> impl Fn() -> u64 {
    let start = Instant::now();
    move || T0 + start.elapsed().as_nanos() as u64
}

fn app(model: &Pipeline) -> App {
    App::new(AppConfig {
        history: 1000,
        ..AppConfig::system_wide("cpu-clock", RateUnit::Utilisation, vec![0, 1], T0)
    })
    .with_model(model.model().clone())
}

fn pipeline() -> (Sender<Batch>, Pipeline) {
    let (tx, rx) = unbounded();
    let opts = PipelineOptions {
        seed: None,
        ..PipelineOptions::default()
    };
    (tx, Pipeline::new(rx, &[0, 1], opts))
}

/// The whole loop over `pipe` until its stop rule ends it, with the test's clock, fresh
/// counters and 10 ms frames.
fn drive(
    term: &mut Terminal<TestBackend>,
    app: &mut App,
    pipe: &mut Pipeline,
    mon: &mut FakeMonitor,
    stop: &StopRule,
    keys: crossbeam_channel::Receiver<TermEvent>,
    panes: crossbeam_channel::Receiver<PaneMsg>,
) -> StopReason {
    let stats = Stats::new(&[0, 1]);
    let now = clock();
    let inputs = LoopInputs {
        pipe,
        watched: mon,
        stop,
        keys,
        panes,
        totals: &|| stats.snapshot(),
        now: &now,
        frame: Duration::from_millis(10),
        suspend: None,
        replay: None,
    };
    run_loop(term, app, inputs, || {}).unwrap()
}

/// [`drive`] with no keys pressed and no script panes.
fn drive_unattended(
    term: &mut Terminal<TestBackend>,
    app: &mut App,
    pipe: &mut Pipeline,
    mon: &mut FakeMonitor,
    stop: &StopRule,
) -> StopReason {
    drive(term, app, pipe, mon, stop, never(), never())
}

fn press(keys: &Sender<TermEvent>, code: KeyCode) {
    keys.send(TermEvent::Key(KeyEvent::new(code, KeyModifiers::NONE)))
        .unwrap();
}

/// A shell (500) starts `make` (700), which runs on both CPUs; its batches come in every
/// 10 ms of the events' clock, CPU 1 reporting after CPU 0. Like real readers, they send a
/// last batch and end when asked to stop.
fn readers(
    tx: Sender<Batch>,
    now: impl Fn() -> u64 + Send + 'static,
    rounds: u64,
    end: bool,
    stop: Arc<AtomicBool>,
) {
    std::thread::spawn(move || {
        for r in 0..rounds {
            let t = now();
            if stop.load(Ordering::Acquire) {
                let _ = tx.send(batch(0, t, vec![], true));
                let _ = tx.send(batch(1, t, vec![], true));
                return;
            }
            let mut cpu0 = vec![sample(0, 500, t - 2 * MS, 1_000_000)];
            if r == 1 {
                cpu0.push(fork(0, t - MS, 700, 500));
                cpu0.push(comm(0, t - MS + 1, 700, b"make", true));
            }
            let cpu1 = vec![sample(1, 700, t - 3 * MS, 1_000_000)];
            let last = end && r + 1 == rounds;
            if last {
                cpu0.push(exit(0, t, 700, 500));
            }
            if tx.send(batch(0, t, cpu0, last)).is_err()
                || tx.send(batch(1, t, cpu1, last)).is_err()
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
}

#[test]
fn keys_filter_the_stream_and_q_quits() {
    let (tx, mut pipe) = pipeline();
    let mut app = app(&pipe);
    let mut term = Terminal::new(TestBackend::new(110, 36)).unwrap();
    let (keys_tx, keys) = unbounded();
    let (panes_tx, panes) = unbounded();
    let mut mon = FakeMonitor::default();
    let stopped = mon.stop_requested.clone();
    readers(tx, clock(), 1000, false, stopped.clone());
    let stop = StopRule::new(|| None, None);
    let driver = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(150));
        panes_tx
            .send(PaneMsg::Lines {
                script: "count.py".into(),
                lines: vec!["makes: 1".into()],
            })
            .unwrap();
        press(&keys_tx, KeyCode::Char('/'));
        for c in "comm:make".chars() {
            press(&keys_tx, KeyCode::Char(c));
        }
        press(&keys_tx, KeyCode::Enter);
        std::thread::sleep(Duration::from_millis(250));
        press(&keys_tx, KeyCode::Char('q'));
    });
    let reason = drive(&mut term, &mut app, &mut pipe, &mut mon, &stop, keys, panes);
    driver.join().unwrap();
    assert_eq!(
        reason,
        StopReason::Signal(libc::SIGINT),
        "q is a normal stop"
    );
    assert!(
        stopped.load(Ordering::Acquire),
        "the readers were asked to stop"
    );
    // The last frame the loop drew: the task stream named the child from the model, the
    // filter is in force, the script pane is there.
    let s = term.backend().to_string();
    assert!(s.contains("make"), "{s}");
    assert!(s.contains("comm:make"), "{s}");
    assert!(
        s.contains("Script: count.py") && s.contains("makes: 1"),
        "{s}"
    );
    assert!(app.log_len() > 0, "the log shows make's records");
    assert!(
        (0..app.log_len()).all(|i| app.log_entry(i).unwrap().subject_pid() == 700),
        "only make's"
    );
    assert!(
        app.log_entries() > app.log_len(),
        "the shell's are filtered out"
    );
    let named = |c: Option<perfwatch::process::Comm>| c.map(|c| c.display());
    assert!(
        app.task_rows().iter().any(|r| r.pid == 700
            && named(r.comm).as_deref() == Some("make")
            && r.ppid == Some(500)),
        "the exec row"
    );
}

#[test]
fn the_run_ends_when_every_reader_has_ended_with_everything_shown() {
    let (tx, mut pipe) = pipeline();
    let mut app = app(&pipe);
    // Samples in the log too (`S`): the test checks the order of everything.
    app.on_key(KeyEvent::new(KeyCode::Char('S'), KeyModifiers::NONE));
    let mut term = Terminal::new(TestBackend::new(110, 36)).unwrap();
    let mut mon = FakeMonitor::default();
    readers(tx, clock(), 5, true, mon.stop_requested.clone());
    let stop = StopRule::new(|| None, Some(Duration::from_secs(30)));
    let reason = drive_unattended(&mut term, &mut app, &mut pipe, &mut mon, &stop);
    assert_eq!(reason, StopReason::TargetsGone);
    // 5 rounds of one sample per CPU, a fork, a comm and the exit: all of it, in order.
    assert_eq!(app.log_entries(), 13);
    let times: Vec<u64> = (0..13).map(|i| app.log_entry(i).unwrap().time).collect();
    assert!(times.is_sorted(), "{times:?}");
    let exit_row = app.task_rows().back().unwrap();
    assert_eq!(exit_row.comm.map(|c| c.display()).as_deref(), Some("make"));
    assert!(exit_row.lifetime.is_some(), "its fork was seen");
}

#[test]
fn a_command_that_exits_stops_the_loop_with_its_status() {
    // No reader at all: the channel is closed.
    let (tx, mut pipe) = pipeline();
    drop(tx);
    let mut app = app(&pipe);
    let mut term = Terminal::new(TestBackend::new(80, 24)).unwrap();
    let mut mon = FakeMonitor {
        command_status: Some(3),
        ..FakeMonitor::default()
    };
    let stop = StopRule::new(|| None, None);
    let started = Instant::now();
    let reason = drive_unattended(&mut term, &mut app, &mut pipe, &mut mon, &stop);
    assert_eq!(reason, StopReason::CommandExited(3));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "no grace to wait out"
    );
    assert!(term.backend().to_string().contains("Event log"));
}
