//! Orphans against the real kernel: a process whose parent exits is re-parented by the
//! kernel (to the nearest child subreaper, else its pid namespace's init), and the process
//! model follows, with `/proc` as the oracle.

use std::time::{Duration, Instant};

use crossbeam_channel::select;
use perfwatch::monitor::{Monitor, MonitorConfig, TargetSpec};
use perfwatch::perf::events::parse_event;
use perfwatch::pipeline::{Pipeline, PipelineOptions};

/// The parent `/proc` shows for `pid`.
fn proc_ppid(pid: u32) -> Option<u32> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    perfwatch::process::proc::parse_ppid(&stat)
}

/// Kills `pid` when dropped (the orphan outlives the test otherwise).
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // SAFETY: a signal to a pid this test started (through its shell).
        unsafe { libc::kill(self.0 as libc::pid_t, libc::SIGKILL) };
    }
}

/// `sh -c 'sleep 42.5 & exit'` under a watched shell: the sleep's parent exits, and the
/// model gives it the parent the kernel gave it, not the dead shell (nor none).
#[test]
fn an_orphan_gets_the_parent_the_kernel_gave_it() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    // `\$!`: the inner shell's last job, not expanded by the outer one.
    let inner = format!(r"sleep 42.5 & echo \$! > '{}'", pidfile.display());
    // The outer shell outlives the inner one a while, so that the run sees the exit.
    let script = format!("sh -c \"{inner}\"; sleep 1");
    let cfg = MonitorConfig::new(
        vec![parse_event("dummy").unwrap()],
        TargetSpec::Command(vec!["sh".into(), "-c".into(), script.into()]),
    );
    let mut mon = Monitor::start(cfg).expect("monitor");
    let mut pipe = Pipeline::new(
        mon.rx.clone(),
        &mon.info.cpus,
        PipelineOptions {
            pool: Some(mon.pool.clone()),
            ..PipelineOptions::default()
        },
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut guard = None;
    let mut exited_at = None;
    loop {
        select! {
            recv(pipe.batches()) -> m => pipe.take(m),
            default(Duration::from_millis(50)) => {}
        }
        while let Some(c) = pipe.next_chunk() {
            pipe.recycle(c.events);
        }
        if guard.is_none() {
            guard = std::fs::read_to_string(&pidfile)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
                .map(KillOnDrop);
        }
        if exited_at.is_none() && mon.command_exit().is_some() {
            exited_at = Some(Instant::now());
        }
        // The command has ended and its last records have had time to come through.
        if exited_at.is_some_and(|t| t.elapsed() > Duration::from_millis(600)) {
            break;
        }
        assert!(Instant::now() < deadline, "the command did not end in 30 s");
    }
    let sleep = guard.as_ref().expect("the sleep's pid").0;
    let oracle = proc_ppid(sleep).expect("the sleep still runs");
    let model = pipe.model().read();
    let p = model.process(sleep).expect("the model knows the sleep");
    let was = model.task(sleep).and_then(|t| t.ptid());
    assert_ne!(
        Some(oracle),
        was,
        "it was re-parented: not the shell that forked it"
    );
    assert_eq!(
        p.ppid(),
        Some(oracle),
        "the model's parent is the kernel's (/proc/{sleep}/stat)"
    );
    assert!(model.reparents() >= 1);
}
