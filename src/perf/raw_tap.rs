//! The records of the rings as the kernel wrote them, for `-o` (a perf.data file): a reader
//! that has a [`RawTap`] copies each drain's records into one buffer and offers it to a
//! bounded queue that a writer thread empties. The queue is bounded in bytes; an offer that
//! does not fit is dropped and counted, never waited for, so that writing a file never slows
//! a reader nor makes the kernel drop records.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_channel::{Receiver, Sender, TrySendError};

/// One drain of one CPU's ring.
#[derive(Debug)]
pub(crate) struct RawChunk {
    pub cpu: u32,
    /// The events' clock read before the drain (as [`crate::event::Batch::now`]): every
    /// record written later into this ring comes in a later chunk.
    pub now: u64,
    /// The reader's last chunk.
    pub end: bool,
    /// Records, whole and one after another, as in the ring.
    pub bytes: Vec<u8>,
    pub records: u64,
}

/// What the queue dropped because the writer had fallen behind.
#[derive(Debug, Default)]
pub struct RawDrops {
    pub records: AtomicU64,
    pub bytes: AtomicU64,
}

/// The readers' side of the queue (cloned into each reader).
#[derive(Clone, Debug)]
pub struct RawTap {
    tx: Sender<RawChunk>,
    queued: Arc<AtomicUsize>,
    limit: usize,
    pub drops: Arc<RawDrops>,
}

/// The writer's side.
pub(crate) struct RawQueue {
    rx: Receiver<RawChunk>,
    queued: Arc<AtomicUsize>,
    pub drops: Arc<RawDrops>,
}

/// A queue that holds at most `limit` bytes of records.
pub(crate) fn raw_queue(limit: usize) -> (RawTap, RawQueue) {
    // The count bounds the queue of empty chunks (a quiet machine's readers send one per
    // poll timeout); the bytes bound its memory.
    let (tx, rx) = crossbeam_channel::bounded(4096);
    let queued = Arc::new(AtomicUsize::new(0));
    let drops = Arc::new(RawDrops::default());
    (
        RawTap {
            tx,
            queued: queued.clone(),
            limit,
            drops: drops.clone(),
        },
        RawQueue { rx, queued, drops },
    )
}

impl RawTap {
    /// Hand a chunk to the writer, or count it as dropped when the queue is full.
    pub(crate) fn offer(&self, chunk: RawChunk) {
        let n = chunk.bytes.len();
        let before = self.queued.fetch_add(n, Ordering::AcqRel);
        if before + n > self.limit && n > 0 {
            self.queued.fetch_sub(n, Ordering::AcqRel);
            self.dropped(&chunk);
            return;
        }
        match self.tx.try_send(chunk) {
            Ok(()) => {}
            Err(TrySendError::Full(c) | TrySendError::Disconnected(c)) => {
                self.queued.fetch_sub(n, Ordering::AcqRel);
                self.dropped(&c);
            }
        }
    }

    fn dropped(&self, c: &RawChunk) {
        self.drops.records.fetch_add(c.records, Ordering::Relaxed);
        self.drops
            .bytes
            .fetch_add(c.bytes.len() as u64, Ordering::Relaxed);
    }
}

impl RawQueue {
    /// Bytes waiting in the queue.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    /// The next chunk, waiting at most `wait`; `Err(true)` once every reader is gone.
    pub fn next(&self, wait: std::time::Duration) -> Result<RawChunk, bool> {
        match self.rx.recv_timeout(wait) {
            Ok(c) => {
                self.queued.fetch_sub(c.bytes.len(), Ordering::AcqRel);
                Ok(c)
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => Err(false),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Err(true),
        }
    }
}
