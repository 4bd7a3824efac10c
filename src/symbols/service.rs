//! The symbolizer on its own thread: batches of requests in, batches of answers out, in the
//! order they were sent. The buffers travel back with the answers so that a frontend can
//! reuse them.

use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::{Config, Note, Request, Stats, Symbolized, Symbolizer};

/// Batches waiting for the symbolizer before `submit` waits too.
const QUEUE: usize = 16;

/// A batch to resolve. `answers` is a buffer to fill (cleared first): pass back the one a
/// previous [`Answered`] brought to avoid allocating.
#[derive(Default)]
pub struct Batch {
    pub tag: u64,
    pub requests: Vec<Request>,
    pub answers: Vec<Symbolized>,
}

/// A resolved batch: `answers[i]` names `requests[i]`.
pub struct Answered {
    pub tag: u64,
    pub requests: Vec<Request>,
    pub answers: Vec<Symbolized>,
    /// Notes that arose while resolving this batch.
    pub notes: Vec<Note>,
    /// The symbolizer's counters after this batch.
    pub stats: Stats,
}

/// A symbolizer thread.
pub struct Service {
    jobs: Option<Sender<Batch>>,
    answers: Receiver<Answered>,
    thread: Option<JoinHandle<()>>,
}

impl Service {
    /// Start the thread (`perfwatch-sym`). Nothing is read until requests come.
    pub fn spawn(config: Config) -> std::io::Result<Service> {
        let (jobs_tx, jobs_rx) = bounded::<Batch>(QUEUE);
        let (done_tx, done_rx) = bounded::<Answered>(QUEUE);
        let thread = std::thread::Builder::new()
            .name("perfwatch-sym".into())
            .spawn(move || {
                let mut sym = Symbolizer::new(config);
                for mut batch in jobs_rx {
                    batch.answers.clear();
                    sym.resolve(&batch.requests, &mut batch.answers);
                    let done = Answered {
                        tag: batch.tag,
                        requests: batch.requests,
                        answers: batch.answers,
                        notes: sym.take_notes(),
                        stats: sym.stats(),
                    };
                    if done_tx.send(done).is_err() {
                        break;
                    }
                }
            })?;
        Ok(Service {
            jobs: Some(jobs_tx),
            answers: done_rx,
            thread: Some(thread),
        })
    }

    /// Queue a batch; waits while [`QUEUE`] batches are queued. Gives the batch back if the
    /// thread has ended.
    pub fn submit(&self, batch: Batch) -> Result<(), Batch> {
        match &self.jobs {
            Some(tx) => tx.send(batch).map_err(|e| e.into_inner()),
            None => Err(batch),
        }
    }

    /// Where answers arrive (select on it with the frontend's other channels).
    pub fn answers(&self) -> &Receiver<Answered> {
        &self.answers
    }

    /// Stop taking batches, let the thread finish the queued ones, and wait for it. Answers
    /// not yet received are dropped.
    pub fn shutdown(mut self) {
        self.jobs = None;
        // Drain so that the thread never blocks on a full answer channel.
        while self.answers.recv().is_ok() {}
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        // Closing the queue ends the thread after its current batch; it is not waited for
        // here (a read past its deadline must not hold up an exit).
        self.jobs = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_come_back_in_order_with_their_buffers() {
        let dir = tempfile::tempdir().unwrap();
        let svc = Service::spawn(Config {
            kallsyms: dir.path().join("none"),
            ..Config::default()
        })
        .unwrap();
        for tag in 0..3 {
            let requests = (0..10)
                .map(|i| Request::kernel(0xffffffff81000000 + i))
                .collect();
            svc.submit(Batch {
                tag,
                requests,
                answers: Vec::with_capacity(10),
            })
            .ok()
            .unwrap();
        }
        for tag in 0..3 {
            let a = svc.answers().recv().unwrap();
            assert_eq!(a.tag, tag);
            assert_eq!(a.answers.len(), 10);
            assert_eq!(a.requests.len(), 10);
            assert!(a.answers.iter().all(|s| s.to_string() == "[unknown]"));
            assert_eq!(a.notes.len(), usize::from(tag == 0));
        }
        svc.shutdown();
    }
}
