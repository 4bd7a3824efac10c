//! Threads for everything that reads files, waited for with a deadline.
//!
//! A read can block without end on a filesystem that does not answer (a FUSE mount a user
//! controls, a hung NFS server), and no read of a regular file can be cancelled. So the
//! symbolizer hands each read to a loader thread and never waits for it past a bound: a read
//! is started ([`Loader::start`]) and its outcome taken when it is there ([`Loader::wait_some`],
//! [`Loader::harvest`]), so that several binaries are read at once and the output waits once
//! for all of them rather than once for each.
//!
//! The threads are a small pool ([`POOL`] reads within their deadline at once, at most
//! [`PER_SOURCE`] of them from one source) plus the threads of reads that are stuck (past
//! the deadline: left to finish on their own, their result taken if it ever comes). A source
//! is where a read goes (a device, a user's perf maps, the kernel): stuck reads are counted
//! per source, so that one user's stuck files never keep the files of others from being read.

use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Select, Sender, TryRecvError, bounded, unbounded};

use super::load::{Job, Outcome};

/// Stuck reads of one source tolerated before that source's new ones are refused.
pub(crate) const MAX_STUCK: usize = 4;
/// Reads running within their deadline at once: more wait for a free thread.
pub(crate) const POOL: usize = 6;
/// Of those, at most this many from one source, so that a slow source leaves room.
pub(crate) const PER_SOURCE: usize = 4;
/// Of the reads within their deadline, at most this many heavy ones (a large binary, the
/// kernel's table): CPU-bound for a long while, they would otherwise take every thread while
/// the small binaries a storm brings wait behind them.
pub(crate) const HEAVY: usize = 2;
/// Threads at most, stuck ones included (each stuck source holds up to [`MAX_STUCK`]).
pub(crate) const MAX_THREADS: usize = 64;

type Work = (Job, Sender<Outcome>);

struct Worker {
    jobs: Sender<Work>,
}

impl Worker {
    fn spawn() -> Result<Worker, String> {
        let (tx, rx) = unbounded::<Work>();
        std::thread::Builder::new()
            .name("perfwatch-symload".into())
            .spawn(move || {
                for (job, done) in rx {
                    let small = matches!(job, Job::PerfMap(_) | Job::Memory { .. });
                    // A panic in a parser must not end the thread; dropping `done` unsent
                    // tells the symbolizer.
                    let out = std::panic::catch_unwind(AssertUnwindSafe(|| job.run()));
                    release_free_memory(small);
                    if let Ok(out) = out {
                        let _ = done.send(out);
                    }
                }
            })
            .map_err(|e| format!("cannot start a symbol loader thread: {e}"))?;
        Ok(Worker { jobs: tx })
    }
}

/// Give the memory a load freed back to the system. Reading kallsyms or a large symbol
/// table allocates several times the table's size for a moment; glibc keeps what is freed in
/// the thread's arena (its mmap threshold grows after the first large free), which would
/// count in perfwatch's RSS for good: 35 MB instead of 13 MB after loading the kernel, libc
/// and ld.so here. After the small jobs (perf maps, most of them looked for again every second
/// and absent, and vDSO reads), at most every [`SMALL_TRIM_EVERY`]: a trim walks every arena
/// and hands back pages that the next allocations fault in again, which on a machine with
/// many processes cost more than the jobs themselves.
fn release_free_memory(small: bool) {
    static LAST_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now = crate::clock::monotonic_ns();
    let last = LAST_NS.load(std::sync::atomic::Ordering::Relaxed);
    if small && last != 0 && now.saturating_sub(last) < SMALL_TRIM_EVERY.as_nanos() as u64 {
        return;
    }
    LAST_NS.store(now.max(1), std::sync::atomic::Ordering::Relaxed);
    crate::sys::malloc_trim();
}

/// How often the small jobs give freed memory back at most (see [`release_free_memory`]).
const SMALL_TRIM_EVERY: Duration = Duration::from_secs(5);

/// A read started and not taken yet.
struct Running {
    worker: Worker,
    result: Receiver<Outcome>,
    tag: u64,
    source: u64,
    heavy: bool,
    started: Instant,
}

/// Why a job gave no outcome.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RunError {
    /// Still running after the wait: its outcome comes from [`Loader::harvest`] later.
    TimedOut,
    /// Too many reads of this source are stuck (or too many threads are): not started.
    Busy,
    /// Every thread of the pool (or this source's share of it) is reading: not started;
    /// try again later.
    Full,
    /// The job panicked, or no thread could be started.
    Failed(String),
}

pub(crate) struct Loader {
    idle: Option<Worker>,
    running: Vec<Running>,
    timeout: Duration,
    /// No wait goes past this (a stop: the run must end within its grace, whatever is
    /// left to read).
    deadline: Option<Instant>,
}

impl Loader {
    pub(crate) fn new(timeout: Duration) -> Loader {
        Loader {
            idle: None,
            running: Vec::new(),
            timeout,
            deadline: None,
        }
    }

    /// From now on, wait for no job past `at` (None: only the timeout bounds a wait).
    pub(crate) fn set_deadline(&mut self, at: Option<Instant>) {
        self.deadline = at;
    }

    /// Does the deadline cut a wait started now short of the timeout (a stop is close)?
    pub(crate) fn deadline_cuts_waits(&self) -> bool {
        self.wait() < self.timeout
    }

    /// How long a job started now may be waited for: the timeout, cut at the deadline.
    pub(crate) fn wait(&self) -> Duration {
        match self.deadline {
            Some(at) => self
                .timeout
                .min(at.saturating_duration_since(Instant::now())),
            None => self.timeout,
        }
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    fn is_stuck(&self, r: &Running, now: Instant) -> bool {
        now.saturating_duration_since(r.started) >= self.timeout
    }

    /// Start `job` on a thread of the pool without waiting for it. `tag` names its outcome;
    /// `source` is where it reads (see the module's documentation); `heavy`: a long read
    /// (see [`HEAVY`]).
    pub(crate) fn start(
        &mut self,
        job: Job,
        tag: u64,
        source: u64,
        heavy: bool,
    ) -> Result<(), RunError> {
        self.start_on(job, tag, source, heavy, true)
    }

    /// As [`Loader::start`]; `pooled`: within the pool's bounds (a read its caller waits for
    /// at once, such as a perf map's, only within the stuck reads' bounds).
    fn start_on(
        &mut self,
        job: Job,
        tag: u64,
        source: u64,
        heavy: bool,
        pooled: bool,
    ) -> Result<(), RunError> {
        let now = Instant::now();
        let (mut busy, mut stuck, mut mine, mut heavies) = (0, 0, 0, 0);
        for r in &self.running {
            let s = self.is_stuck(r, now);
            if r.source == source {
                if s {
                    stuck += 1;
                } else {
                    mine += 1;
                }
            }
            if !s {
                busy += 1;
                heavies += r.heavy as usize;
            }
        }
        if stuck >= MAX_STUCK || self.running.len() >= MAX_THREADS {
            return Err(RunError::Busy);
        }
        if pooled && (busy >= POOL || mine >= PER_SOURCE || (heavy && heavies >= HEAVY)) {
            return Err(RunError::Full);
        }
        let worker = match self.idle.take() {
            Some(w) => w,
            None => Worker::spawn().map_err(RunError::Failed)?,
        };
        let (tx, rx) = bounded(1);
        if worker.jobs.send((job, tx)).is_err() {
            return Err(RunError::Failed("a symbol loader thread is gone".into()));
        }
        self.running.push(Running {
            worker,
            result: rx,
            tag,
            source,
            heavy,
            started: now,
        });
        Ok(())
    }

    /// Run `job` and wait for it at most `wait`, cut at [`Loader::wait`] (beside the pool's
    /// reads: its caller waits for it). `tag` names the job if its outcome comes late.
    pub(crate) fn run(
        &mut self,
        job: Job,
        tag: u64,
        source: u64,
        wait: Duration,
    ) -> Result<Outcome, RunError> {
        self.start_on(job, tag, source, false, false)?;
        match self.wait_for(tag, wait.min(self.wait())) {
            Some(Ok(out)) => Ok(out),
            Some(Err(())) => Err(RunError::Failed("it panicked".into())),
            None => Err(RunError::TimedOut),
        }
    }

    /// Wait at most `wait` for the job started with `tag`: its outcome (`Err`: it panicked),
    /// or `None` (still running: [`Loader::harvest`] takes it later; or no such job).
    pub(crate) fn wait_for(&mut self, tag: u64, wait: Duration) -> Option<Result<Outcome, ()>> {
        let i = self.running.iter().position(|r| r.tag == tag)?;
        let got = match self.running[i].result.recv_timeout(wait) {
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => return None,
            Ok(out) => Ok(out),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Err(()),
        };
        let r = self.running.swap_remove(i);
        self.keep(r.worker);
        Some(got)
    }

    /// A thread whose job is done goes back to the pool (one is kept idle).
    fn keep(&mut self, w: Worker) {
        if self.idle.is_none() {
            self.idle = Some(w);
        }
    }

    /// Wait until one of the jobs `tags` names has finished (or none is running), or until
    /// `until` (cut at the deadline); the outcomes of every job that finished meanwhile, with
    /// their tags. The caller puts them in place, starts what waited for a thread, and waits
    /// again for the rest if it has time.
    pub(crate) fn wait_some(&mut self, tags: &[u64], until: Instant) -> Vec<(u64, Outcome)> {
        let until = match self.deadline {
            Some(d) => until.min(d),
            None => until,
        };
        let out = self.harvest();
        if !out.is_empty() {
            return out;
        }
        let waiting: Vec<usize> = (0..self.running.len())
            .filter(|&i| tags.contains(&self.running[i].tag))
            .collect();
        let left = until.saturating_duration_since(Instant::now());
        if waiting.is_empty() || left.is_zero() {
            return out;
        }
        let mut sel = Select::new();
        for &i in &waiting {
            sel.recv(&self.running[i].result);
        }
        if sel.ready_timeout(left).is_err() {
            return out;
        }
        self.harvest()
    }

    /// Outcomes of jobs that finished (after their deadline, or while nobody waited), with
    /// their tags; their threads are free again.
    pub(crate) fn harvest(&mut self) -> Vec<(u64, Outcome)> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.running.len() {
            match self.running[i].result.try_recv() {
                Err(TryRecvError::Empty) => i += 1,
                r => {
                    let s = self.running.swap_remove(i);
                    if let Ok(o) = r {
                        out.push((s.tag, o));
                    }
                    self.keep(s.worker);
                }
            }
        }
        out
    }

    /// The tags of the jobs started and not taken yet.
    pub(crate) fn running_tags(&self) -> Vec<u64> {
        self.running.iter().map(|r| r.tag).collect()
    }

    /// Jobs started and not taken yet.
    pub(crate) fn running(&self) -> usize {
        self.running.len()
    }

    /// Jobs past their deadline and not back yet.
    #[cfg(test)]
    pub(crate) fn stuck(&self) -> usize {
        let now = Instant::now();
        self.running
            .iter()
            .filter(|r| self.is_stuck(r, now))
            .count()
    }

    /// Is the job `tag` still running?
    #[cfg(test)]
    pub(crate) fn is_running(&self, tag: u64) -> bool {
        self.running.iter().any(|r| r.tag == tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FOREVER: Duration = Duration::from_secs(3600);

    /// A job that takes `ms` milliseconds.
    fn slow(ms: u64) -> Job {
        Job::Sleep(Duration::from_millis(ms))
    }

    #[test]
    fn a_slow_job_is_waited_for_at_most_the_deadline_and_harvested_later() {
        let mut l = Loader::new(Duration::from_millis(100));
        let t = Instant::now();
        assert_eq!(
            l.run(slow(400), 7, 1, FOREVER).err(),
            Some(RunError::TimedOut)
        );
        assert!(t.elapsed() < Duration::from_millis(350));
        assert_eq!(l.stuck(), 1);
        // The next job runs on another thread meanwhile.
        assert!(matches!(
            l.run(slow(1), 8, 1, FOREVER),
            Ok(Outcome::Memory(None))
        ));
        std::thread::sleep(Duration::from_millis(500));
        let late = l.harvest();
        assert_eq!(late.len(), 1);
        assert_eq!(late[0].0, 7);
        assert_eq!(l.stuck(), 0);
    }

    #[test]
    fn past_the_deadline_no_job_is_waited_for() {
        let mut l = Loader::new(Duration::from_secs(5));
        assert!(!l.deadline_cuts_waits());
        l.set_deadline(Some(Instant::now() + Duration::from_millis(100)));
        assert!(l.deadline_cuts_waits(), "the deadline cuts the 5 s wait");
        let t = Instant::now();
        assert_eq!(
            l.run(slow(400), 1, 1, FOREVER).err(),
            Some(RunError::TimedOut)
        );
        let first = t.elapsed();
        assert!(first < Duration::from_millis(350), "{first:?}");
        let t = Instant::now();
        assert_eq!(
            l.run(slow(400), 2, 2, FOREVER).err(),
            Some(RunError::TimedOut)
        );
        assert!(t.elapsed() < Duration::from_millis(50), "{:?}", t.elapsed());
        // wait_some stops at the deadline too.
        l.start(slow(400), 3, 3, false).unwrap();
        let t = Instant::now();
        let got = l.wait_some(&[3], Instant::now() + Duration::from_secs(5));
        assert!(got.is_empty());
        assert!(t.elapsed() < Duration::from_millis(50), "{:?}", t.elapsed());
        // Without a deadline the timeout alone bounds the wait again.
        l.set_deadline(None);
        assert!(!l.deadline_cuts_waits());
        assert!(l.run(slow(1), 4, 4, FOREVER).is_ok());
    }

    #[test]
    fn stuck_jobs_are_bounded_per_source_and_other_sources_go_on() {
        let mut l = Loader::new(Duration::from_millis(10));
        for i in 0..MAX_STUCK as u64 {
            assert_eq!(
                l.run(slow(400), i, 1, FOREVER).err(),
                Some(RunError::TimedOut)
            );
        }
        std::thread::sleep(Duration::from_millis(15));
        let t = Instant::now();
        assert_eq!(l.start(slow(1), 99, 1, false).err(), Some(RunError::Busy));
        assert!(t.elapsed() < Duration::from_millis(5));
        // Another source is not blinded by the first one's stuck reads.
        assert!(l.run(slow(1), 100, 2, FOREVER).is_ok());
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(l.harvest().len(), MAX_STUCK);
        assert!(l.run(slow(1), 101, 1, FOREVER).is_ok());
    }

    #[test]
    fn the_pool_reads_in_parallel_and_leaves_room_for_other_sources() {
        let mut l = Loader::new(Duration::from_secs(5));
        let mut tags = Vec::new();
        for t in 0..PER_SOURCE as u64 {
            assert!(l.start(slow(200), t, 1, false).is_ok());
            tags.push(t);
        }
        // This source has its share of the pool; others still get threads.
        assert_eq!(l.start(slow(200), 99, 1, false).err(), Some(RunError::Full));
        for t in PER_SOURCE as u64..POOL as u64 {
            assert!(l.start(slow(200), t, 10 + t, false).is_ok());
            tags.push(t);
        }
        assert_eq!(l.start(slow(200), 98, 2, false).err(), Some(RunError::Full));
        // POOL reads of 200 ms each, waited for together: about 200 ms, not POOL times that.
        let t = Instant::now();
        let mut got = Vec::new();
        while got.len() < POOL && t.elapsed() < Duration::from_secs(5) {
            got.extend(l.wait_some(&tags, Instant::now() + Duration::from_secs(5)));
        }
        let took = t.elapsed();
        assert_eq!(got.len(), POOL);
        assert!(took < Duration::from_millis(600), "{took:?}");
        assert_eq!(l.running(), 0);
        assert!(!l.is_running(1));
    }

    #[test]
    fn heavy_reads_never_take_the_threads_small_ones_need() {
        let mut l = Loader::new(Duration::from_secs(5));
        for t in 0..HEAVY as u64 {
            assert!(l.start(slow(300), t, 1 + t, true).is_ok());
        }
        assert_eq!(l.start(slow(300), 50, 9, true).err(), Some(RunError::Full));
        // A small binary of the same device as a heavy one is read at once.
        let t = Instant::now();
        assert!(l.start(slow(1), 60, 1, false).is_ok());
        let got = l.wait_some(&[60], Instant::now() + Duration::from_secs(5));
        assert_eq!(got.len(), 1);
        assert!(
            t.elapsed() < Duration::from_millis(250),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn a_panicking_job_is_an_error_and_the_pool_lives_on() {
        let mut l = Loader::new(Duration::from_secs(5));
        assert!(matches!(
            l.run(Job::Panic, 1, 1, FOREVER),
            Err(RunError::Failed(_))
        ));
        assert!(l.run(slow(1), 2, 1, FOREVER).is_ok());
    }
}
