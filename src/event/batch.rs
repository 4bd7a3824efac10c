//! What a source hands the pipeline and what the ordering stage hands every stage after it:
//! per-CPU [`Batch`]es in, time-ordered [`Chunk`]s out, and the [`BufferPool`] that lets the
//! readers reuse the ordering stage's spent buffers. These are part of the event model so
//! that a source (the live rings, a recorded file) and the stages import them from below,
//! never from one another.

use crossbeam_channel::{Receiver, Sender};

use super::Event;

/// Slack for records stamped before a batch's `now` but published after it: the ordering
/// stage takes a CPU's stream as complete up to `now` less this. Here, beside `now`, so that
/// a source that knows exactly how far its stream is complete (a recording) can say so
/// without importing the stage.
pub(crate) const SLACK_NS: u64 = 10_000_000;

/// Events from one CPU, in the order the kernel wrote them: what a reader sends.
#[derive(Debug, Default)]
pub struct Batch {
    pub cpu: u32,
    pub events: Vec<Event>,
    /// The events' clock, read just before `data_head` was loaded: every record this CPU
    /// writes later carries a time close to or after this. Readers send a batch (possibly
    /// empty) at least every idle poll timeout, so that a quiet CPU can be told from a slow
    /// one.
    pub now: u64,
    /// The last batch of this CPU: its reader has ended.
    pub end: bool,
}

/// Events of every CPU in time order: what the ordering stage emits and every stage after
/// it consumes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chunk {
    pub events: Vec<Event>,
    /// The chunk completes the stream up to this time: every event stamped at or before it
    /// has been emitted, in this chunk or an earlier one (except events that arrive late,
    /// which are counted). `u64::MAX` once every reader has ended and all is out.
    pub watermark: u64,
}

/// Event buffers going back from the ordering stage to the readers: a storm's batches reuse
/// memory that is already mapped rather than fault in fresh pages for each one.
#[derive(Clone, Debug)]
pub struct BufferPool {
    tx: Sender<Vec<Event>>,
    rx: Receiver<Vec<Event>>,
}

/// A buffer larger than this (in events) is not kept: a burst's memory is given back.
const POOLED_MAX: usize = 1 << 14;

impl BufferPool {
    /// A pool that holds at most `n` buffers.
    pub fn new(n: usize) -> BufferPool {
        let (tx, rx) = crossbeam_channel::bounded(n.max(1));
        BufferPool { tx, rx }
    }

    /// An empty buffer with room for `capacity` events, reused when the pool has one.
    pub fn take(&self, capacity: usize) -> Vec<Event> {
        match self.rx.try_recv() {
            Ok(mut v) => {
                v.reserve(capacity);
                v
            }
            Err(_) => Vec::with_capacity(capacity),
        }
    }

    /// Give a buffer back (its events are dropped); kept when there is room and it is worth
    /// keeping.
    pub fn give(&self, mut v: Vec<Event>) {
        if v.capacity() == 0 || v.capacity() > POOLED_MAX {
            return;
        }
        v.clear();
        let _ = self.tx.try_send(v);
    }
}
