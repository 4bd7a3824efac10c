//! The ordering stage: the per-CPU streams put into one time order, once, for everything
//! downstream (the process model, the script stage, the frontends), which never reorders.
//!
//! Each reader sends its CPU's records in [`Batch`]es with `now`, the clock just before it
//! loaded the ring's head. Once every live CPU has reported a `now` past time T (less
//! [`SLACK_NS`] for records that were stamped but not yet published), no record older than T
//! can still arrive, and every buffered event up to T goes out, in order, in a [`Chunk`] that
//! says so (its watermark). The window is bounded in time (a CPU that has not reported for
//! [`MAX_WAIT_NS`] no longer holds the others back) and in size (past `max_buffered` events
//! the oldest go out regardless). An event that arrives after newer ones went out is passed
//! on at once and counted in [`OrderingStage::late`].
//!
//! A CPU's records come nearly sorted (a ring is written in order; only records written from
//! interrupt context can overtake one another by a little), so each CPU keeps a sorted queue
//! and a chunk is a k-way merge of their heads: one comparison per event for two CPUs,
//! `log k` for k, and each event is moved twice (into its queue, out into the chunk).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::event::{Batch, Chunk, Event};
use crate::stop::StopTime;

/// Slack for records stamped before a reader's `now` but published after it.
pub(crate) use crate::event::SLACK_NS;
/// The longest a quiet or slow CPU can hold back the others.
pub(crate) const MAX_WAIT_NS: u64 = 1_000_000_000;

/// One CPU's queue: its events not yet emitted, sorted by time, and its reader's clock.
#[derive(Debug)]
struct CpuQueue {
    cpu: u32,
    now: u64,
    ended: bool,
    events: VecDeque<Event>,
}

impl CpuQueue {
    fn new(cpu: u32) -> CpuQueue {
        CpuQueue {
            cpu,
            now: 0,
            ended: false,
            events: VecDeque::new(),
        }
    }

    /// Add a batch, keeping the queue sorted (stable: equal times keep their order).
    /// Returns the buffer that is no longer needed (the batch's, or the queue's old one).
    fn add(&mut self, mut events: Vec<Event>) -> Vec<Event> {
        if events.is_empty() {
            return events;
        }
        if !events.is_sorted_by_key(|e| e.time) {
            events.sort_by_key(|e| e.time);
        }
        let first = events[0].time;
        if self.events.is_empty() {
            // Adopt the batch's buffer rather than copy it.
            let old = std::mem::replace(&mut self.events, VecDeque::from(events));
            return Vec::from(old);
        }
        let overlaps = self.events.back().is_some_and(|l| l.time > first);
        let held = self.events.len();
        self.events.extend(events.drain(..));
        if overlaps {
            // A record of this batch is older than one of the last: merge the tail that
            // overlaps (rare, and short). The search runs over the events held before, the
            // part that is sorted (the whole queue is not: the batch starts below its end).
            let slice = self.events.make_contiguous();
            let from = slice[..held].partition_point(|e| e.time <= first);
            slice[from..].sort_by_key(|e| e.time);
        }
        events
    }
}

/// The ordering stage's state: one sorted queue per CPU, the window's bounds and counts.
#[derive(Debug)]
pub struct OrderingStage {
    cpus: Vec<CpuQueue>,
    buffered: usize,
    max_buffered: usize,
    last_emitted: u64,
    watermark: u64,
    late: u64,
    /// Scratch for the merge: (head time, queue) of the queues taking part.
    heads: BinaryHeap<Reverse<(u64, usize)>>,
    take: Vec<usize>,
    /// The stop time: events stamped after it are not emitted, but counted.
    cut: Option<u64>,
    after_stop: u64,
}

impl OrderingStage {
    /// `cpus`: the CPUs whose readers will send batches (a batch of another CPU adds it).
    pub fn new(cpus: &[u32], max_buffered: usize) -> OrderingStage {
        OrderingStage {
            cpus: cpus.iter().map(|&c| CpuQueue::new(c)).collect(),
            buffered: 0,
            max_buffered: max_buffered.max(1),
            last_emitted: 0,
            watermark: 0,
            late: 0,
            heads: BinaryHeap::new(),
            take: Vec::new(),
            cut: None,
            after_stop: 0,
        }
    }

    /// The run stops at `t`: emit every event stamped at or before it, none after (loss and
    /// throttle records, which speak of earlier events, always go out).
    pub(crate) fn stop_at(&mut self, t: u64) {
        self.cut = Some(self.cut.map_or(t, |c| c.min(t)));
    }

    /// Events not emitted because they were stamped after the stop time.
    pub(crate) fn after_stop(&self) -> u64 {
        self.after_stop
    }

    /// Take the stop time from `stop` once it is decided.
    pub fn follow(&mut self, stop: &StopTime) {
        if let Some(t) = stop.get() {
            self.stop_at(t);
        }
    }

    /// Events held for ordering.
    pub fn len(&self) -> usize {
        self.buffered
    }

    pub fn is_empty(&self) -> bool {
        self.buffered == 0
    }

    /// True when every CPU's reader has ended.
    pub fn all_ended(&self) -> bool {
        self.cpus.iter().all(|c| c.ended)
    }

    /// Every reader is gone (their channel closed): nothing more will come.
    pub(crate) fn end_all(&mut self) {
        for q in &mut self.cpus {
            q.ended = true;
        }
    }

    /// Events that were emitted after a newer one had already gone out.
    pub fn late(&self) -> u64 {
        self.late
    }

    /// The time up to which the stream is complete (what the last chunk said).
    pub fn watermark(&self) -> u64 {
        self.watermark
    }

    /// Take a reader's batch; returns the buffer that is no longer needed (for a
    /// [`BufferPool`](crate::event::BufferPool)).
    pub fn push(&mut self, batch: Batch) -> Vec<Event> {
        let i = match self.cpus.iter().position(|c| c.cpu == batch.cpu) {
            Some(i) => i,
            None => {
                self.cpus.push(CpuQueue::new(batch.cpu));
                self.cpus.len() - 1
            }
        };
        let q = &mut self.cpus[i];
        q.now = q.now.max(batch.now);
        q.ended |= batch.end;
        self.buffered += batch.events.len();
        q.add(batch.events)
    }

    /// The time up to which no more records can arrive.
    fn safe_time(&self) -> u64 {
        let live = self.cpus.iter().filter(|c| !c.ended);
        let (min, max) = live.fold((u64::MAX, 0), |(lo, hi), c| (lo.min(c.now), hi.max(c.now)));
        if min == u64::MAX {
            return u64::MAX; // every reader ended: nothing more can come
        }
        min.max(max.saturating_sub(MAX_WAIT_NS))
            .saturating_sub(SLACK_NS)
    }

    /// Append to `out`, oldest first, every event that can no longer be overtaken (and the
    /// oldest beyond that while more than `max_buffered` are held). Returns the watermark
    /// the emitted events complete the stream to.
    pub fn pop_ready(&mut self, out: &mut Vec<Event>) -> u64 {
        let safe = self.safe_time();
        let all = self.all_ended();
        self.emit(safe, self.max_buffered, out);
        // Once every reader has ended and all is out, the stream is complete.
        let wm = if all && self.buffered == 0 {
            u64::MAX
        } else {
            safe
        };
        self.watermark = self.watermark.max(wm);
        self.watermark
    }

    /// Append everything still held to `out`, in order (at shutdown).
    pub fn flush(&mut self, out: &mut Vec<Event>) -> u64 {
        self.emit(u64::MAX, 0, out);
        if self.all_ended() {
            self.watermark = u64::MAX;
        }
        self.watermark
    }

    /// [`OrderingStage::pop_ready`] as a [`Chunk`] (`None` when it would be empty and the
    /// watermark did not move).
    pub fn next_chunk(&mut self) -> Option<Chunk> {
        let before = self.watermark;
        let mut events = Vec::new();
        let watermark = self.pop_ready(&mut events);
        (!events.is_empty() || watermark != before).then_some(Chunk { events, watermark })
    }

    /// Emit the events up to `upto`, then the oldest until at most `keep` are held.
    fn emit(&mut self, upto: u64, keep: usize, out: &mut Vec<Event>) {
        // How many to take from each queue: by time first...
        self.take.clear();
        let mut n = 0;
        for q in &self.cpus {
            let k = if upto == u64::MAX {
                q.events.len()
            } else {
                q.events.partition_point(|e| e.time <= upto)
            };
            self.take.push(k);
            n += k;
        }
        // ...then the oldest of the rest, while too many are held.
        if self.buffered - n > keep {
            self.heads.clear();
            for (i, q) in self.cpus.iter().enumerate() {
                if let Some(e) = q.events.get(self.take[i]) {
                    self.heads.push(Reverse((e.time, i)));
                }
            }
            while self.buffered - n > keep {
                let Some(Reverse((_, i))) = self.heads.pop() else {
                    break;
                };
                self.take[i] += 1;
                n += 1;
                if let Some(e) = self.cpus[i].events.get(self.take[i]) {
                    self.heads.push(Reverse((e.time, i)));
                }
            }
        }
        if n == 0 {
            return;
        }
        self.buffered -= n;
        out.reserve(n);
        // The merge: the queue with the oldest head gives events while its head is not
        // newer than the next queue's (ties go to the lower queue, so equal times keep
        // CPU order).
        self.heads.clear();
        for (i, q) in self.cpus.iter().enumerate() {
            if self.take[i] > 0 {
                self.heads.push(Reverse((q.events[0].time, i)));
            }
        }
        while let Some(Reverse((_, i))) = self.heads.pop() {
            let bound = self.heads.peek().map(|Reverse(h)| *h);
            let q = &mut self.cpus[i];
            let left = self.take[i].min(q.events.len());
            if left == 0 {
                self.take[i] = 0;
                continue;
            }
            // The run this queue gives before the next queue's head is older: its head (the
            // oldest of all), then its events not newer than that bound (the queue is sorted;
            // runs are often short, so a scan rather than a binary search).
            let run = match bound {
                Some(b) => {
                    1 + q
                        .events
                        .range(1..left)
                        .take_while(|e| (e.time, i) <= b)
                        .count()
                }
                None => left,
            };
            let (first, last) = match (q.events.front(), q.events.get(run.wrapping_sub(1))) {
                (Some(f), Some(l)) => (f.time, l.time),
                _ => {
                    self.take[i] = 0;
                    continue;
                }
            };
            if first >= self.last_emitted && self.cut.is_none_or(|t| last <= t) {
                // The common case, moved at once: sorted, none late, none past the stop.
                out.extend(q.events.drain(..run));
                self.last_emitted = last;
            } else {
                for ev in q.events.drain(..run) {
                    if self.cut.is_some_and(|t| ev.time > t) && !speaks_of_earlier(&ev) {
                        self.after_stop += 1;
                    } else {
                        // A record stamped 0 carries no time (perf's own, such as the
                        // LOST_SAMPLES counts `perf record` writes at the end of a file):
                        // it cannot be late.
                        if ev.time < self.last_emitted && ev.time != 0 {
                            self.late += 1;
                        } else {
                            self.last_emitted = ev.time;
                        }
                        out.push(ev);
                    }
                }
            }
            let left = left - run;
            self.take[i] = left;
            if left > 0 {
                if let Some(next) = q.events.front() {
                    self.heads.push(Reverse((next.time, i)));
                }
            }
        }
        for q in &mut self.cpus {
            if q.events.is_empty() && q.events.capacity() > 1 << 16 {
                // Give back what a burst made a queue grow to.
                q.events = VecDeque::new();
            }
        }
    }
}

/// Loss and throttle records: about events before them, so never cut at the stop time.
fn speaks_of_earlier(ev: &Event) -> bool {
    matches!(
        ev.kind,
        crate::event::EventKind::Lost { .. }
            | crate::event::EventKind::LostSamples { .. }
            | crate::event::EventKind::Throttle { .. }
    )
}

/// At shutdown (after the stop request): hand `take` the readers' last batches until `ended`
/// says every reader has sent its final one, the channel closes, or `grace` runs out; then
/// whatever is still queued. Batches a reader cannot send after that are counted as dropped
/// by the reader when the channel closes.
pub(crate) fn collect_last_batches<T>(
    rx: &Receiver<Batch>,
    grace: Duration,
    state: &mut T,
    ended: impl Fn(&T) -> bool,
    mut take: impl FnMut(&mut T, Batch),
) {
    let deadline = std::time::Instant::now() + grace;
    while !ended(state) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        match rx.recv_timeout(left.min(Duration::from_millis(100))) {
            Ok(b) => take(state, b),
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
    for b in rx.try_iter() {
        take(state, b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::events::lost_samples as ev;

    fn batch(cpu: u32, now: u64, times: &[u64]) -> Batch {
        Batch {
            cpu,
            events: times.iter().map(|&t| ev(cpu, t)).collect(),
            now,
            end: false,
        }
    }

    fn drain(r: &mut OrderingStage) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        r.pop_ready(&mut out);
        out.iter().map(|e| (e.cpu, e.time)).collect()
    }

    const MS: u64 = 1_000_000;

    /// `(cpu, milliseconds)` pairs as `drain` gives them.
    fn ms(list: &[(u32, u64)]) -> Vec<(u32, u64)> {
        list.iter().map(|&(cpu, t)| (cpu, t * MS)).collect()
    }

    #[test]
    fn merges_two_cpus_in_time_order() {
        let mut r = OrderingStage::new(&[0, 1], 1000);
        r.push(batch(0, 100 * MS, &[10 * MS, 30 * MS, 50 * MS]));
        // CPU 1 has not reported: nothing can be emitted yet.
        assert!(drain(&mut r).is_empty());
        r.push(batch(1, 100 * MS, &[20 * MS, 40 * MS, 95 * MS]));
        // Watermark is 100ms - slack: 95ms waits.
        assert_eq!(
            drain(&mut r),
            ms(&[(0, 10), (1, 20), (0, 30), (1, 40), (0, 50)])
        );
        assert_eq!(r.watermark(), 90 * MS);
        r.push(batch(0, 200 * MS, &[150 * MS]));
        r.push(batch(1, 200 * MS, &[]));
        assert_eq!(drain(&mut r), ms(&[(1, 95), (0, 150)]));
        assert_eq!(r.late(), 0);
    }

    #[test]
    fn a_batch_that_overlaps_much_of_the_queue_is_merged_in_order() {
        // A recording's rounds: each overlaps the last by far more than a record or two.
        let mut r = OrderingStage::new(&[0], 1000);
        r.push(batch(0, 0, &[1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21]));
        r.push(batch(0, 0, &[2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22]));
        r.push(batch(0, 30 + SLACK_NS, &[]));
        let times: Vec<u64> = drain(&mut r).iter().map(|&(_, t)| t).collect();
        assert_eq!(times, (1..=22).collect::<Vec<u64>>());
        assert_eq!(r.late(), 0);
    }

    #[test]
    fn quiet_cpu_reports_with_empty_batches() {
        let mut r = OrderingStage::new(&[0, 1], 1000);
        r.push(batch(0, 100 * MS, &[10 * MS]));
        r.push(batch(1, 100 * MS, &[]));
        assert_eq!(drain(&mut r), ms(&[(0, 10)]));
    }

    #[test]
    fn a_silent_cpu_holds_back_at_most_max_wait() {
        let mut r = OrderingStage::new(&[0, 1], 1000);
        r.push(batch(0, 3_000 * MS, &[10 * MS, 1_500 * MS, 2_500 * MS]));
        // CPU 1 never reported: events older than 3s - 1s - slack go out.
        assert_eq!(drain(&mut r), ms(&[(0, 10), (0, 1_500)]));
    }

    #[test]
    fn ended_cpus_do_not_hold_back_and_late_events_are_counted() {
        let mut r = OrderingStage::new(&[0, 1], 1000);
        r.push(Batch {
            cpu: 1,
            events: vec![],
            now: 0,
            end: true,
        });
        r.push(batch(0, 100 * MS, &[50 * MS]));
        assert_eq!(drain(&mut r), ms(&[(0, 50)]));
        r.push(batch(0, 110 * MS, &[40 * MS]));
        assert_eq!(drain(&mut r), ms(&[(0, 40)]));
        assert_eq!(r.late(), 1);
        // A record without a time (stamped 0, as perf's end-of-file LOST_SAMPLES) goes out
        // at once and is not late.
        r.push(batch(0, 110 * MS, &[0]));
        assert_eq!(drain(&mut r), ms(&[(0, 0)]));
        assert_eq!(r.late(), 1);
        r.push(Batch {
            cpu: 0,
            events: vec![ev(0, 500 * MS)],
            now: 110 * MS,
            end: true,
        });
        assert!(r.all_ended());
        assert_eq!(drain(&mut r), ms(&[(0, 500)]));
        assert_eq!(r.watermark(), u64::MAX, "all ended and out: complete");
    }

    /// At the stop time T every CPU's stream ends at T: what was stamped up to T goes out,
    /// on every CPU, however late its reader's last batch came; what was stamped after T is
    /// counted, not shown; loss records always go out.
    #[test]
    fn the_stop_time_cuts_every_cpu_at_the_same_instant_and_counts_the_rest() {
        use crate::testkit::events::sample;
        let stop = StopTime::default();
        let mut r = OrderingStage::new(&[0, 1], 1000);
        r.push(Batch {
            cpu: 0,
            events: vec![sample(0, 1, 10 * MS, 1), sample(0, 1, 60 * MS, 1)],
            now: 70 * MS,
            end: false,
        });
        r.follow(&stop);
        assert_eq!(stop.decide(50 * MS), 50 * MS);
        assert_eq!(stop.decide(90 * MS), 50 * MS, "decided once");
        r.follow(&stop);
        // CPU 1's last batch: up to T, and past it.
        r.push(Batch {
            cpu: 1,
            events: vec![
                sample(1, 1, 49 * MS, 1),
                sample(1, 1, 50 * MS, 1),
                sample(1, 1, 51 * MS, 1),
                ev(1, 52 * MS),
            ],
            now: 80 * MS,
            end: true,
        });
        r.push(batch(0, 90 * MS, &[]));
        let mut out = Vec::new();
        r.flush(&mut out);
        stop.set_after(r.after_stop());
        let got: Vec<(u32, u64)> = out.iter().map(|e| (e.cpu, e.time)).collect();
        assert_eq!(got, ms(&[(0, 10), (1, 49), (1, 50), (1, 52)]));
        assert_eq!((r.after_stop(), stop.after()), (2, 2));
    }

    #[test]
    fn buffer_is_bounded() {
        let mut r = OrderingStage::new(&[0, 1], 2);
        r.push(batch(0, 0, &[5, 3, 4, 1]));
        // Nothing is safe by time, but only 2 may stay buffered.
        assert_eq!(drain(&mut r), vec![(0, 1), (0, 3)]);
        assert_eq!(r.len(), 2);
        let mut rest = Vec::new();
        r.flush(&mut rest);
        assert_eq!(rest.iter().map(|e| e.time).collect::<Vec<_>>(), vec![4, 5]);
    }

    #[test]
    fn equal_times_keep_arrival_order() {
        let mut r = OrderingStage::new(&[0], 10);
        let mut evs = vec![ev(0, 7), ev(0, 7), ev(0, 7)];
        for (i, e) in evs.iter_mut().enumerate() {
            e.id = i as u64;
        }
        r.push(Batch {
            cpu: 0,
            events: evs,
            now: 0,
            end: true,
        });
        let mut out = Vec::new();
        r.pop_ready(&mut out);
        assert_eq!(out.iter().map(|e| e.id).collect::<Vec<_>>(), vec![0, 1, 2]);
    }

    #[test]
    fn a_batch_older_than_its_queue_is_merged_into_it() {
        let mut r = OrderingStage::new(&[0, 1], 1000);
        r.push(batch(0, 10 * MS, &[30 * MS, 10 * MS, 20 * MS]));
        r.push(batch(0, 20 * MS, &[25 * MS, 40 * MS]));
        r.push(batch(1, 1_000 * MS, &[15 * MS]));
        r.push(batch(0, 1_000 * MS, &[]));
        assert_eq!(
            drain(&mut r),
            ms(&[(0, 10), (1, 15), (0, 20), (0, 25), (0, 30), (0, 40)])
        );
        assert_eq!(r.late(), 0);
    }

    #[test]
    fn chunks_say_what_they_complete_and_many_cpus_merge_in_order() {
        let cpus: Vec<u32> = (0..24).collect();
        let mut r = OrderingStage::new(&cpus, 1 << 20);
        assert_eq!(r.next_chunk(), None, "nothing known yet");
        // Every CPU sends interleaved times; a pseudo-random walk so that runs vary.
        let mut x = 7u64;
        let mut all = Vec::new();
        for round in 0..20u64 {
            for &c in &cpus {
                let mut times: Vec<u64> = (0..5)
                    .map(|_| {
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        round * 100 * MS + (x >> 33) % (100 * MS)
                    })
                    .collect();
                times.sort();
                all.extend(times.iter().copied());
                r.push(batch(c, (round + 1) * 100 * MS, &times));
            }
            if let Some(chunk) = r.next_chunk() {
                assert!(chunk.events.iter().all(|e| e.time <= chunk.watermark));
                assert!(chunk.events.is_sorted_by_key(|e| e.time));
            }
        }
        let mut out = Vec::new();
        r.flush(&mut out);
        assert!(out.is_sorted_by_key(|e| e.time));
        assert_eq!(r.late(), 0);
        assert!(r.is_empty());
    }

    #[test]
    fn an_unknown_cpu_joins_the_order() {
        let mut r = OrderingStage::new(&[0], 1000);
        r.push(batch(0, 100 * MS, &[10 * MS]));
        r.push(batch(3, 50 * MS, &[5 * MS, 45 * MS]));
        assert_eq!(drain(&mut r), ms(&[(3, 5), (0, 10)]));
    }
}
