//! Where pprof profiles go: `--pprof FILE` at the end of the run, `--pprof-every PERIOD DIR`
//! one file per period (named by its start, UTC: `perfwatch-20261205T131500Z.pb.gz`), the
//! last one at stop.
//!
//! Files follow `--script-output`'s rules ([`OutputFile`]: as root no symlink followed, 0600,
//! written under a temporary name and renamed, handed to the sudo user). Periodic profiles are
//! written by a thread of their own: the pipeline hands each finished period over a channel of
//! two and never waits (a period that finds both places taken is counted as skipped). A write
//! that fails (a full disk) is said once, the monitor goes on, and the exit status says it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Sender, TrySendError, bounded};

use super::Profiles;
use crate::event::Event;
use crate::pipeline::Tap;
use crate::process::ProcessModel;
use crate::script::output_file::OutputFile;

/// What went wrong writing profiles (the first failure), and what was written.
#[derive(Default)]
pub(crate) struct Outcome {
    pub first_error: OnceLock<String>,
    pub written: AtomicU64,
    pub failed: AtomicU64,
    pub skipped: AtomicU64,
}

struct Periodic {
    every: Duration,
    dir: PathBuf,
    profile: Profiles,
    /// When the current period ends (from the first chunk on: start-up is no period's).
    cut_at: Option<Instant>,
    tx: Option<Sender<Profiles>>,
    thread: Option<JoinHandle<()>>,
}

struct Inner {
    whole: Option<(Profiles, OutputFile, PathBuf)>,
    periodic: Option<Periodic>,
}

/// The pipeline's side: see the module's doc. Clones share one state: the pipeline feeds it,
/// `run` finishes it.
#[derive(Clone)]
pub(crate) struct PprofTap {
    inner: Arc<Mutex<Inner>>,
    outcome: Arc<Outcome>,
}

impl PprofTap {
    /// `--pprof FILE` (created now, so that a path perfwatch cannot use stops it before it
    /// starts) and/or `--pprof-every PERIOD DIR` (DIR must be a directory). `say_now`: say a
    /// failure on stderr when it happens (not under the TUI, which says it at the end).
    pub fn new(
        file: Option<&Path>,
        every: Option<(Duration, PathBuf)>,
        say_now: bool,
    ) -> anyhow::Result<PprofTap> {
        let whole = match file {
            Some(path) => {
                let shown = crate::text::escape(path.as_os_str().as_encoded_bytes());
                let out = OutputFile::create("--pprof", path)
                    .map_err(|e| anyhow::anyhow!("cannot create --pprof '{shown}': {e:#}"))?;
                Some((Profiles::new(), out, path.to_path_buf()))
            }
            None => None,
        };
        let outcome = Arc::new(Outcome::default());
        let periodic = match every {
            Some((every, dir)) => {
                let shown = crate::text::escape(dir.as_os_str().as_encoded_bytes());
                if !std::fs::metadata(&dir).is_ok_and(|m| m.is_dir()) {
                    anyhow::bail!("--pprof-every: '{shown}' is not a directory");
                }
                let (tx, rx) = bounded::<Profiles>(2);
                let (d, o) = (dir.clone(), outcome.clone());
                let thread = std::thread::Builder::new()
                    .name("perfwatch-pprof".into())
                    .spawn(move || {
                        for p in rx {
                            write_period(&d, &p, &o, say_now);
                        }
                    })?;
                Some(Periodic {
                    every,
                    dir,
                    profile: Profiles::new(),
                    cut_at: None,
                    tx: Some(tx),
                    thread: Some(thread),
                })
            }
            None => None,
        };
        Ok(PprofTap {
            inner: Arc::new(Mutex::new(Inner { whole, periodic })),
            outcome,
        })
    }

    /// At the end: the last period's profile and the whole run's. Returns a line per file
    /// for stderr, and whether everything was written.
    pub fn finish(&self) -> (Vec<String>, bool) {
        let mut lines = Vec::new();
        let (whole, periodic) = {
            let mut g = match self.inner.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            (g.whole.take(), g.periodic.take())
        };
        if let Some(mut p) = periodic {
            if let Some(tx) = p.tx.take() {
                let last = std::mem::take(&mut p.profile);
                if tx.send(last).is_err() {
                    self.outcome.skipped.fetch_add(1, Ordering::Relaxed);
                }
            }
            if let Some(t) = p.thread.take() {
                let _ = t.join();
            }
            let o = &self.outcome;
            let mut line = format!(
                "pprof: {} profiles written to '{}'",
                o.written.load(Ordering::Relaxed),
                crate::text::escape(p.dir.as_os_str().as_encoded_bytes())
            );
            let skipped = o.skipped.load(Ordering::Relaxed);
            if skipped > 0 {
                line.push_str(&format!(
                    "; {skipped} periods skipped (the writer was still busy with two)"
                ));
            }
            let failed = o.failed.load(Ordering::Relaxed);
            if failed > 0 {
                line.push_str(&format!(
                    "; {failed} could not be written ({})",
                    o.first_error.get().map_or("", String::as_str)
                ));
            }
            lines.push(line);
        }
        if let Some((profile, mut out, path)) = whole {
            let shown = crate::text::escape(path.as_os_str().as_encoded_bytes());
            match profile.write_gzip(out.file()).and_then(|()| out.commit()) {
                Ok(()) => lines.push(format!(
                    "pprof: {} samples in {} stacks written to '{shown}'{}",
                    profile.samples(),
                    profile.stacks.len(),
                    if profile.dropped() > 0 {
                        format!(
                            "; {} samples of further stacks left out (more than {})",
                            profile.dropped(),
                            super::MAX_STACKS
                        )
                    } else {
                        String::new()
                    }
                )),
                Err(e) => {
                    self.outcome.failed.fetch_add(1, Ordering::Relaxed);
                    lines.push(format!(
                        "error: cannot write --pprof '{shown}': {e} (the previous file, if any, \
                         is left as it was)"
                    ));
                }
            }
        }
        (lines, self.outcome.failed.load(Ordering::Relaxed) == 0)
    }
}

impl Tap for PprofTap {
    fn chunk(&mut self, events: &[Event], model: &ProcessModel) {
        let mut g = match self.inner.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let g = &mut *g;
        for ev in events {
            if let Some((p, _, _)) = &mut g.whole {
                p.add(ev, model);
            }
            if let Some(p) = &mut g.periodic {
                p.profile.add(ev, model);
            }
        }
        if let Some(p) = &mut g.periodic {
            let now = Instant::now();
            let Some(cut_at) = p.cut_at else {
                p.cut_at = Some(now + p.every);
                return;
            };
            if now >= cut_at {
                let mut next = cut_at + p.every;
                if next <= now {
                    next = now + p.every;
                }
                p.cut_at = Some(next);
                let done = std::mem::take(&mut p.profile);
                if let Some(tx) = &p.tx {
                    match tx.try_send(done) {
                        Ok(()) => {}
                        Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                            self.outcome.skipped.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
        }
    }
}

/// Write one period's profile into `dir`.
fn write_period(dir: &Path, p: &Profiles, o: &Outcome, say_now: bool) {
    let path = dir.join(format!("perfwatch-{}.pb.gz", utc_stamp(p.start_unix_ns)));
    let shown = crate::text::escape(path.as_os_str().as_encoded_bytes());
    let result = OutputFile::create("--pprof-every", &path)
        .map_err(|e| format!("{e:#}"))
        .and_then(|mut out| {
            p.write_gzip(out.file())
                .and_then(|()| out.commit())
                .map_err(|e| e.to_string())
        });
    match result {
        Ok(()) => {
            o.written.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => {
            o.failed.fetch_add(1, Ordering::Relaxed);
            let first = format!("'{shown}': {e}");
            if o.first_error.set(first.clone()).is_ok() && say_now {
                crate::output::stderr_bounded(
                    format!(
                        "perfwatch: cannot write --pprof-every profile {first}; monitoring goes \
                         on (said once; the exit status will say it)\n"
                    )
                    .as_bytes(),
                );
            }
        }
    }
}

/// `20261205T131500Z` for nanoseconds since the epoch (UTC, civil calendar).
pub(crate) fn utc_stamp(unix_ns: i64) -> String {
    let secs = unix_ns.div_euclid(1_000_000_000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_utc_civil_time() {
        assert_eq!(utc_stamp(0), "19700101T000000Z");
        // 2026-12-05 13:15:54 UTC
        assert_eq!(utc_stamp(1_796_476_554 * 1_000_000_000), "20261205T131554Z");
        assert_eq!(utc_stamp(951_782_400 * 1_000_000_000), "20000229T000000Z");
    }
}
