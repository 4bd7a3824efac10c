//! A helper thread for everything that reads files, waited for with a deadline.
//!
//! A read can block without end on a filesystem that does not answer (a FUSE mount a user
//! controls, a hung NFS server), and no read of a regular file can be cancelled. So the
//! symbolizer hands each read to this thread and waits at most the deadline: past it, the
//! read is left to finish on its own (its result is taken if it ever comes), a fresh thread
//! takes the next job, and the symbolizer answers `[unknown]` meanwhile. After a few stuck
//! reads, no more are started until one comes back.

use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError, bounded, unbounded};

use super::load::{Job, Outcome};

/// Stuck reads tolerated before new ones are refused.
pub(crate) const MAX_STUCK: usize = 4;

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
                    // A panic in a parser must not end the thread; dropping `done` unsent
                    // tells the symbolizer.
                    let out = std::panic::catch_unwind(AssertUnwindSafe(|| job.run()));
                    release_free_memory();
                    if let Ok(out) = out {
                        let _ = done.send(out);
                    }
                }
            })
            .map_err(|e| format!("cannot start the symbol loader thread: {e}"))?;
        Ok(Worker { jobs: tx })
    }
}

/// Give the memory a load freed back to the system. Reading kallsyms or a large symbol
/// table allocates several times the table's size for a moment; glibc keeps what is freed in
/// the thread's arena (its mmap threshold grows after the first large free), which would
/// count in perfwatch's RSS for good: 35 MB instead of 13 MB after loading the kernel, libc
/// and ld.so here.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of the allocator to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

struct Stuck {
    worker: Worker,
    result: Receiver<Outcome>,
    tag: u64,
}

/// Why a job gave no outcome.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RunError {
    /// Still running after the deadline: its outcome comes from [`Loader::harvest`] later.
    TimedOut,
    /// Too many jobs are stuck: not started.
    Busy,
    /// The job panicked, or no thread could be started.
    Failed(String),
}

pub(crate) struct Loader {
    worker: Option<Worker>,
    stuck: Vec<Stuck>,
    timeout: Duration,
    /// No wait goes past this (a stop: the run must end within its grace, whatever is
    /// left to read).
    deadline: Option<Instant>,
}

impl Loader {
    pub(crate) fn new(timeout: Duration) -> Loader {
        Loader {
            worker: None,
            stuck: Vec::new(),
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

    /// Run `job` and wait for it at most [`Loader::wait`]. `tag` names the job if its
    /// outcome comes late.
    pub(crate) fn run(&mut self, job: Job, tag: u64) -> Result<Outcome, RunError> {
        self.run_waiting(job, tag, self.wait())
    }

    /// As [`Loader::run`], waiting at most `wait` (zero: start it and come back at once;
    /// [`Loader::wait_for`] or [`Loader::harvest`] take its outcome).
    pub(crate) fn run_waiting(
        &mut self,
        job: Job,
        tag: u64,
        wait: Duration,
    ) -> Result<Outcome, RunError> {
        if self.stuck.len() >= MAX_STUCK {
            return Err(RunError::Busy);
        }
        let worker = match self.worker.take() {
            Some(w) => w,
            None => Worker::spawn().map_err(RunError::Failed)?,
        };
        let (tx, rx) = bounded(1);
        if worker.jobs.send((job, tx)).is_err() {
            return Err(RunError::Failed("the symbol loader thread is gone".into()));
        }
        match rx.recv_timeout(wait) {
            Ok(out) => {
                self.worker = Some(worker);
                Ok(out)
            }
            Err(RecvTimeoutError::Timeout) => {
                self.stuck.push(Stuck {
                    worker,
                    result: rx,
                    tag,
                });
                Err(RunError::TimedOut)
            }
            Err(RecvTimeoutError::Disconnected) => {
                self.worker = Some(worker);
                Err(RunError::Failed("it panicked".into()))
            }
        }
    }

    /// Wait at most `wait` for the job started with `tag` that is still running; its
    /// outcome, or `None` (still running: [`Loader::harvest`] takes it later; or no such job).
    pub(crate) fn wait_for(&mut self, tag: u64, wait: Duration) -> Option<Outcome> {
        let i = self.stuck.iter().position(|s| s.tag == tag)?;
        let r = self.stuck[i].result.recv_timeout(wait);
        if matches!(r, Err(RecvTimeoutError::Timeout)) {
            return None;
        }
        let s = self.stuck.swap_remove(i);
        if self.worker.is_none() {
            self.worker = Some(s.worker);
        }
        r.ok()
    }

    /// Outcomes of jobs that finished after their deadline, with their tags; their threads
    /// are free again.
    pub(crate) fn harvest(&mut self) -> Vec<(u64, Outcome)> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.stuck.len() {
            match self.stuck[i].result.try_recv() {
                Err(TryRecvError::Empty) => i += 1,
                r => {
                    let s = self.stuck.swap_remove(i);
                    if let Ok(o) = r {
                        out.push((s.tag, o));
                    }
                    if self.worker.is_none() {
                        self.worker = Some(s.worker);
                    }
                }
            }
        }
        out
    }

    /// Jobs past their deadline and not back yet.
    pub(crate) fn stuck(&self) -> usize {
        self.stuck.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// A job that takes `ms` milliseconds (reading process memory of a pid that does not
    /// exist is quick; the delay comes from a sleeping FIFO-free job built for the test).
    fn slow(ms: u64) -> Job {
        Job::Sleep(Duration::from_millis(ms))
    }

    #[test]
    fn a_slow_job_is_waited_for_at_most_the_deadline_and_harvested_later() {
        let mut l = Loader::new(Duration::from_millis(100));
        let t = Instant::now();
        assert_eq!(l.run(slow(400), 7).err(), Some(RunError::TimedOut));
        assert!(t.elapsed() < Duration::from_millis(350));
        assert_eq!(l.stuck(), 1);
        // The next job runs on a fresh thread meanwhile.
        assert!(matches!(l.run(slow(1), 8), Ok(Outcome::Memory(None))));
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
        assert_eq!(l.run(slow(400), 1).err(), Some(RunError::TimedOut));
        let first = t.elapsed();
        assert!(first < Duration::from_millis(350), "{first:?}");
        let t = Instant::now();
        assert_eq!(l.run(slow(400), 2).err(), Some(RunError::TimedOut));
        assert!(t.elapsed() < Duration::from_millis(50), "{:?}", t.elapsed());
        // A quick job is still taken when it is already done... and without a deadline the
        // timeout alone bounds the wait again.
        l.set_deadline(None);
        assert!(!l.deadline_cuts_waits());
        assert!(l.run(slow(1), 3).is_ok());
    }

    #[test]
    fn stuck_jobs_are_bounded() {
        let mut l = Loader::new(Duration::from_millis(10));
        for i in 0..MAX_STUCK as u64 {
            assert_eq!(l.run(slow(300), i).err(), Some(RunError::TimedOut));
        }
        let t = Instant::now();
        assert_eq!(l.run(slow(1), 99).err(), Some(RunError::Busy));
        assert!(t.elapsed() < Duration::from_millis(5));
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(l.harvest().len(), MAX_STUCK);
        assert!(l.run(slow(1), 100).is_ok());
    }

    #[test]
    fn a_panicking_job_is_an_error_and_the_thread_lives_on() {
        let mut l = Loader::new(Duration::from_secs(5));
        assert!(matches!(l.run(Job::Panic, 1), Err(RunError::Failed(_))));
        assert!(l.run(slow(1), 2).is_ok());
    }
}
