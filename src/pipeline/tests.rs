//! The pipeline's tests: ordering, the model, a stage, the end, late records, argv and orphans.

use super::*;
use crate::testkit::events::{batch, comm, exit, fork, sample};
use crossbeam_channel::{bounded, select};

const MS: u64 = 1_000_000;

fn quiet() -> PipelineOptions {
    PipelineOptions {
        seed: None,
        ..PipelineOptions::default()
    }
}

/// Run a pipeline over `batches` to the end, as a frontend's loop would.
fn drive(p: &mut Pipeline, tx: Sender<Batch>, batches: Vec<Batch>) -> Vec<Chunk> {
    for b in batches {
        tx.send(b).unwrap();
    }
    drop(tx);
    let mut got = Vec::new();
    while !p.all_ended() {
        select! {
            recv(p.batches()) -> m => p.take(m),
            recv(p.staged()) -> m => p.take_staged(m),
        }
        while let Some(c) = p.next_chunk() {
            got.push(c);
        }
    }
    got
}

#[test]
fn chunks_come_out_in_order_and_the_model_knows_them_first() {
    let (tx, rx) = bounded(16);
    let mut p = Pipeline::new(rx, &[0, 1], quiet());
    let got = drive(
        &mut p,
        tx,
        vec![
            batch(
                0,
                100 * MS,
                vec![fork(0, 10 * MS, 50, 1), exit(0, 40 * MS, 50, 1)],
                false,
            ),
            batch(
                1,
                100 * MS,
                vec![comm(1, 20 * MS, 50, b"child", true)],
                false,
            ),
            batch(0, 200 * MS, vec![sample(0, 50, 150 * MS, 1)], true),
            batch(1, 200 * MS, vec![], true),
        ],
    );
    let times: Vec<u64> = got
        .iter()
        .flat_map(|c| c.events.iter().map(|e| e.time))
        .collect();
    assert_eq!(times, vec![10 * MS, 20 * MS, 40 * MS, 150 * MS]);
    assert!(got.windows(2).all(|w| w[0].watermark <= w[1].watermark));
    assert_eq!(got.last().unwrap().watermark, u64::MAX);
    let m = p.model().read();
    assert_eq!(
        m.comm_at(50, 30 * MS).map(|c| c.as_bytes()),
        Some(&b"child"[..])
    );
    assert_eq!(m.task(50).unwrap().lifetime(), Some(30 * MS));
}

#[test]
fn a_stage_sees_ordered_chunks_and_hands_them_back_in_order() {
    let (tx, rx) = bounded(64);
    let (to, stage_in) = bounded::<Chunk>(2);
    let (stage_out, from) = bounded::<Chunk>(2);
    // A stage that drops samples and keeps the rest, on its own thread.
    let t = std::thread::spawn(move || {
        for mut c in stage_in {
            c.events
                .retain(|e| !matches!(e.kind, crate::event::EventKind::Sample { .. }));
            if stage_out.send(c).is_err() {
                break;
            }
        }
    });
    let mut p = Pipeline::new(rx, &[0], quiet()).with_stage(StageLink {
        to,
        from,
        progress: Arc::default(),
    });
    let batches = (0..50u64)
        .map(|i| {
            batch(
                0,
                (i + 1) * 20 * MS,
                vec![
                    sample(0, 9, i * 20 * MS, 1),
                    fork(0, i * 20 * MS + 1, 1000 + i as u32, 9),
                ],
                i == 49,
            )
        })
        .collect();
    let got = drive(&mut p, tx, batches);
    let pids: Vec<u32> = got
        .iter()
        .flat_map(|c| c.events.iter().map(|e| e.subject_pid()))
        .collect();
    assert_eq!(pids, (1000..1050).collect::<Vec<_>>());
    // The model saw everything, the samples too.
    assert_eq!(p.model().read().len(), 50);
    // Finishing closes the stage's input: it ends.
    p.finish(Duration::from_secs(1));
    t.join().unwrap();
}

#[test]
fn finish_collects_the_last_batches_and_flushes() {
    let (tx, rx) = bounded(16);
    let mut p = Pipeline::new(rx, &[0, 1], quiet());
    tx.send(batch(0, 100 * MS, vec![sample(0, 1, 95 * MS, 1)], false))
        .unwrap();
    select! { recv(p.batches()) -> m => p.take(m) }
    assert!(p.next_chunk().is_none(), "CPU 1 has not reported: held");
    tx.send(batch(1, 0, vec![sample(1, 1, 99 * MS, 1)], true))
        .unwrap();
    tx.send(batch(0, 100 * MS, vec![], true)).unwrap();
    p.finish(Duration::from_secs(1));
    let c = p.next_chunk().unwrap();
    assert_eq!(c.events.len(), 2);
    assert_eq!(c.watermark, u64::MAX);
    assert!(p.all_ended());
}

#[test]
fn late_events_are_counted_where_the_summary_reads_them() {
    let (tx, rx) = bounded(16);
    let late = Arc::new(AtomicU64::new(0));
    let opts = PipelineOptions {
        late: Some(late.clone()),
        ..quiet()
    };
    let mut p = Pipeline::new(rx, &[0, 1], opts);
    tx.send(batch(1, 0, vec![], true)).unwrap();
    tx.send(batch(0, 100 * MS, vec![sample(0, 1, 50 * MS, 1)], false))
        .unwrap();
    select! { recv(p.batches()) -> m => p.take(m) }
    assert!(p.next_chunk().is_some());
    // Older than what went out: passed on at once, and counted.
    tx.send(batch(0, 110 * MS, vec![sample(0, 1, 40 * MS, 1)], false))
        .unwrap();
    select! { recv(p.batches()) -> m => p.take(m) }
    assert_eq!(p.next_chunk().map(|c| c.events.len()), Some(1));
    assert_eq!(late.load(Ordering::Relaxed), 1);
}

/// Take what the channel holds and the chunks that are ready.
fn turn(p: &mut Pipeline) -> Vec<Chunk> {
    let m = p.batches().recv_timeout(Duration::from_secs(5));
    p.take(m.map_err(|_| RecvError));
    std::iter::from_fn(|| p.next_chunk()).collect()
}

#[test]
fn command_lines_come_from_the_exec_watcher_and_a_late_one_replaces_a_read() {
    use crate::cmdline::{ArgvSource, CmdLine};
    let empty_proc = tempfile::tempdir().unwrap();
    let table = Arc::new(ExecTable::default());
    let (tx, rx) = bounded(16);
    let opts = PipelineOptions {
        argv: true,
        execs: Some(table.clone()),
        proc_root: empty_proc.path().into(),
        ..quiet()
    };
    let mut p = Pipeline::new(rx, &[0], opts);
    let exec = |raw: &[u8]| CmdLine::new(raw, 0, ArgvSource::Exec);
    // Filed by the watcher just after the COMM record (the tracepoint comes later).
    table.insert(50, 20 * MS + 5, exec(b"child\0-x\0"), None);
    tx.send(batch(
        0,
        100 * MS,
        vec![
            comm(0, 20 * MS, 50, b"child", true),
            comm(0, 30 * MS, 51, b"late", true),
        ],
        false,
    ))
    .unwrap();
    tx.send(batch(0, 200 * MS, vec![], false)).unwrap();
    turn(&mut p);
    let source = |p: &Pipeline, pid, t| p.model().read().exec_argv(pid, t).map(|a| a.source());
    assert_eq!(source(&p, 50, 20 * MS), Some(ArgvSource::Exec));
    assert_eq!(
        p.model().read().exec_argv(50, 20 * MS).map(|a| a.line()),
        Some("child -x".to_string())
    );
    // Not filed yet: read from /proc at once (gone here), then the watcher's replaces it.
    assert_eq!(source(&p, 51, 30 * MS), Some(ArgvSource::Gone));
    table.insert(51, 30 * MS + 9, exec(b"late\0"), None);
    tx.send(batch(0, 300 * MS, vec![sample(0, 1, 250 * MS, 1)], false))
        .unwrap();
    turn(&mut p);
    assert_eq!(source(&p, 51, 30 * MS), Some(ArgvSource::Exec));
    assert!(table.take(51, 0).is_none(), "taken");
}

#[test]
fn orphans_get_the_parent_proc_shows() {
    let fake = tempfile::tempdir().unwrap();
    let stat = fake.path().join("301");
    std::fs::create_dir_all(&stat).unwrap();
    std::fs::write(stat.join("stat"), "301 (sleep) S 1 300 300 0").unwrap();
    let (tx, rx) = bounded(16);
    let opts = PipelineOptions {
        proc_root: fake.path().into(),
        ..quiet()
    };
    let mut p = Pipeline::new(rx, &[0], opts);
    tx.send(batch(
        0,
        100 * MS,
        vec![
            fork(0, 10 * MS, 300, 100),
            fork(0, 11 * MS, 301, 300),
            comm(0, 12 * MS, 301, b"sleep", true),
            exit(0, 20 * MS, 300, 100),
        ],
        false,
    ))
    .unwrap();
    tx.send(batch(0, 200 * MS, vec![], false)).unwrap();
    turn(&mut p);
    let m = p.model().read();
    assert_eq!(m.process(301).and_then(|p| p.ppid()), Some(1));
    assert_eq!(m.reparents(), 1);
}

#[test]
fn seeding_reads_proc_before_the_first_chunk_goes_on() {
    let (tx, rx) = bounded::<Batch>(4);
    let mut p = Pipeline::new(rx, &[0], PipelineOptions::default());
    let me = std::process::id();
    // A record of ours, renamed: the snapshot must not undo what the stream said.
    tx.send(batch(
        0,
        u64::MAX / 2,
        vec![comm(0, 5, me, b"renamed", false)],
        true,
    ))
    .unwrap();
    let m = p.batches().recv();
    p.take(m);
    let deadline = Instant::now() + Duration::from_secs(10);
    let c = loop {
        if let Some(c) = p.next_chunk() {
            break c;
        }
        assert!(Instant::now() < deadline, "the snapshot never came");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(c.events.len(), 1);
    let m = p.model().read();
    assert!(m.process(1).is_some(), "init, from /proc");
    assert_eq!(
        m.comm_at(me, 6).map(|c| c.as_bytes()),
        Some(&b"renamed"[..])
    );
}
