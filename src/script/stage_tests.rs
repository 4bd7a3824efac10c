//! The script stage's unit tests (moved out of `stage.rs` to keep it well under the
//! 1 000-line limit).

use super::*;
use crate::event::Batch;
use crate::pipeline::{Pipeline, PipelineOptions, StageLink};
use crate::testkit::events::batch;

fn fork(cpu: u32, time: u64, pid: u32) -> Event {
    crate::testkit::events::fork(cpu, time, pid, 1)
}

fn script(body: &str) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("t.py");
    std::fs::write(&p, body).unwrap();
    (d, p)
}

/// Turn the pipeline (with the stage in it) as a frontend's loop would, for `d`;
/// collect the events it hands on.
fn drive_for(pipe: &mut Pipeline, d: Duration, got: &mut Vec<Event>) {
    let until = Instant::now() + d;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        select! {
            recv(pipe.batches()) -> m => pipe.take(m),
            recv(pipe.staged()) -> m => pipe.take_staged(m),
            default(left) => {}
        }
        while let Some(c) = pipe.next_chunk() {
            got.extend(c.events);
        }
        if left.is_zero() || pipe.all_ended() {
            return;
        }
    }
}

/// Run batches through the pipeline and a stage, as `perfwatch --script` does; returns
/// the events the frontend got, the pane messages and the report.
fn through(
    body: &str,
    opts: StageOptions,
    opts_linger: Duration,
    batches: Vec<Batch>,
) -> (Vec<Event>, Vec<PaneMsg>, StageReport, Arc<Stats>) {
    // One interpreter per process, with one sys.stdout: one stage at a time.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (_d, p) = script(body);
    let stage = ScriptStage::load(&[p], opts).unwrap();
    let stats = Arc::new(Stats::new(&[0, 1]));
    let (tx, rx) = bounded(1024);
    let pipe = Pipeline::new(
        rx,
        &[0, 1],
        PipelineOptions {
            seed: None,
            ..Default::default()
        },
    );
    let (to, input) = bounded(64);
    let (from, pane, handle) = stage.start(input, stats.clone()).unwrap();
    let progress = handle.progress();
    let mut pipe = pipe.with_stage(StageLink { to, from, progress });
    let mut got = Vec::new();
    for b in batches {
        tx.send(b).unwrap();
        drive_for(&mut pipe, Duration::from_millis(5), &mut got);
    }
    drive_for(&mut pipe, opts_linger, &mut got);
    for cpu in [0, 1] {
        tx.send(batch(cpu, u64::MAX / 2, Vec::new(), true)).unwrap();
    }
    drop(tx);
    drive_for(&mut pipe, Duration::from_secs(10), &mut got);
    assert!(pipe.all_ended(), "the stage handed everything back");
    let report = handle.stop(Duration::from_secs(2));
    (got, pane.try_iter().collect(), report, stats)
}

const MS: u64 = 1_000_000;

#[test]
fn filter_keeps_time_order_across_cpus_and_pane_messages_follow() {
    let body = "\
import perfwatch
seen = []
def trace_begin():
    print('begin')
def filter(event):
    seen.append(event.pid)
    return event.pid % 2 == 0
def on_tick():
    return ['seen ' + ','.join(map(str, seen))]
def trace_end():
    print('end', len(seen))
";
    let batches = vec![
        batch(
            0,
            100 * MS,
            vec![
                fork(0, 10 * MS, 10),
                fork(0, 30 * MS, 11),
                fork(0, 50 * MS, 12),
            ],
            false,
        ),
        batch(
            1,
            100 * MS,
            vec![fork(1, 20 * MS, 20), fork(1, 40 * MS, 21)],
            false,
        ),
    ];
    let opts = StageOptions {
        tick: Duration::from_millis(100),
        ..Default::default()
    };
    let (got, pane, report, _) = through(body, opts, Duration::from_millis(250), batches);
    let pids: Vec<u32> = got.iter().map(|e| e.subject_pid()).collect();
    assert_eq!(pids, vec![10, 20, 12]);
    assert_eq!(report, StageReport::default());
    let t = |s: &str| PaneMsg::Text {
        script: "t.py".into(),
        text: s.into(),
        is_error: false,
    };
    assert_eq!(pane.first(), Some(&t("begin")));
    assert_eq!(pane.last(), Some(&t("end 5")));
    // The script saw the events in time order, whatever CPU they came from.
    assert!(
        pane.iter()
            .any(|m| matches!(m, PaneMsg::Lines { script, lines }
                if script == "t.py" && lines == &vec!["seen 10,20,11,21,12".to_string()])),
        "{pane:?}"
    );
}

#[test]
fn an_event_object_a_script_keeps_keeps_its_event_and_the_others_are_reused() {
    // The worker reuses an event object that no script kept for the next event: one
    // kept (appended to a list, or as a default argument) must never change under the
    // script, and the events passed on must be the ones that came in.
    let body = "\
kept = []
def filter(event):
    if event.pid % 2 == 1:
        kept.append(event)
    return event.pid != 12
def trace_end():
    print('kept', ','.join(str(e.pid) for e in kept))
";
    let batches = vec![
        batch(
            0,
            100 * MS,
            vec![
                fork(0, 10 * MS, 10),
                fork(0, 20 * MS, 11),
                fork(0, 30 * MS, 12),
                fork(0, 40 * MS, 13),
                fork(0, 50 * MS, 14),
                fork(0, 60 * MS, 16),
            ],
            false,
        ),
        batch(1, 100 * MS, vec![], false),
    ];
    let (got, pane, report, _) = through(
        body,
        StageOptions::default(),
        Duration::from_millis(250),
        batches,
    );
    let pids: Vec<u32> = got.iter().map(|e| e.subject_pid()).collect();
    assert_eq!(pids, vec![10, 11, 13, 14, 16]);
    assert_eq!(report, StageReport::default());
    let end = pane
        .iter()
        .rev()
        .find_map(|m| match m {
            PaneMsg::Text { text, .. } if text.starts_with("kept") => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default();
    // The two objects kept still hold their own events.
    assert_eq!(end, "kept 11,13", "{pane:?}");
}

#[test]
fn a_script_that_cannot_keep_up_is_bypassed_and_counted() {
    let body = "import time\ndef on_event(event):\n    time.sleep(0.05)\n";
    // CPU 1 is quiet but up to date, so each of CPU 0's batches is released on arrival.
    let mut batches = vec![batch(1, u64::MAX / 4, Vec::new(), false)];
    batches.extend((0..20u64).map(|i| {
        batch(
            0,
            (i + 2) * 20 * MS,
            vec![fork(0, (i + 1) * 20 * MS, i as u32 + 100)],
            false,
        )
    }));
    let opts = StageOptions {
        work_batches: 2,
        ..Default::default()
    };
    let (got, _pane, report, stats) = through(body, opts, Duration::ZERO, batches);
    // Nothing is lost: every event reaches the frontend, in order...
    let pids: Vec<u32> = got.iter().map(|e| e.subject_pid()).collect();
    assert_eq!(pids, (100..120).collect::<Vec<_>>());
    // ...and what the script did not see is counted as dropped.
    assert!(report.bypassed >= 10, "{report:?}");
    assert_eq!(report.stuck_events, 0, "{report:?}");
    assert_eq!(
        stats.snapshot().dropped,
        report.bypassed + report.stuck_events
    );
}

#[test]
fn script_names_are_unique() {
    let names = script_names(&["a/x.py".into(), "b/x.py".into(), "y.py".into()]);
    assert_eq!(names, vec!["x.py", "x.py#2", "y.py"]);
}
