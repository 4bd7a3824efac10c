//! Putting the per-CPU streams into one time order, with a bounded reorder window.
//!
//! Each reader sends its CPU's records with `now`, the clock just before it loaded the ring's
//! head. Once every live CPU has reported a `now` past time T (less a small slack for records
//! that were stamped but not yet published), no record older than T can still arrive, and all
//! buffered events up to T can be emitted in order. The window is bounded in time (a CPU that
//! has not reported for [`MAX_WAIT_NS`] no longer holds the others back) and in size (past
//! `max_buffered` events the oldest are emitted regardless). An event that arrives after newer
//! ones were emitted is emitted at once and counted in [`Reorder::late`].

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::event::Event;
use crate::perf::reader::Batch;

/// Slack for records stamped before a reader's `now` but published after it.
pub const SLACK_NS: u64 = 10_000_000;
/// The longest a quiet or slow CPU can hold back the others.
pub const MAX_WAIT_NS: u64 = 1_000_000_000;

/// A buffered event's place in the order. The events themselves stay put in `slots`: the
/// heap moves these 24-byte keys around, not 80-byte events.
struct Pending {
    time: u64,
    seq: u64,
    slot: u32,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        (self.time, self.seq) == (o.time, o.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    // Reversed: BinaryHeap is a max-heap and we want the oldest first.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.time, o.seq).cmp(&(self.time, self.seq))
    }
}

#[derive(Clone, Copy, Debug)]
struct CpuClock {
    cpu: u32,
    now: u64,
    ended: bool,
}

/// The reorder buffer.
pub struct Reorder {
    heap: BinaryHeap<Pending>,
    slots: Vec<Option<Event>>,
    free: Vec<u32>,
    cpus: Vec<CpuClock>,
    seq: u64,
    max_buffered: usize,
    last_emitted: u64,
    /// Events emitted after a newer one had already gone out.
    pub late: u64,
}

impl Reorder {
    /// `cpus`: the CPUs whose readers will send batches.
    pub fn new(cpus: &[u32], max_buffered: usize) -> Reorder {
        Reorder {
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            cpus: cpus
                .iter()
                .map(|&cpu| CpuClock {
                    cpu,
                    now: 0,
                    ended: false,
                })
                .collect(),
            seq: 0,
            max_buffered: max_buffered.max(1),
            last_emitted: 0,
            late: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// True when every CPU's reader has ended.
    pub fn all_ended(&self) -> bool {
        self.cpus.iter().all(|c| c.ended)
    }

    pub fn push(&mut self, batch: Batch) {
        match self.cpus.iter_mut().find(|c| c.cpu == batch.cpu) {
            Some(c) => {
                c.now = c.now.max(batch.now);
                c.ended |= batch.end;
            }
            None => self.cpus.push(CpuClock {
                cpu: batch.cpu,
                now: batch.now,
                ended: batch.end,
            }),
        }
        for ev in batch.events {
            self.seq += 1;
            let time = ev.time;
            let slot = match self.free.pop() {
                Some(s) => {
                    self.slots[s as usize] = Some(ev);
                    s
                }
                None => {
                    self.slots.push(Some(ev));
                    (self.slots.len() - 1) as u32
                }
            };
            self.heap.push(Pending {
                time,
                seq: self.seq,
                slot,
            });
        }
    }

    /// The time up to which no more records can arrive.
    fn watermark(&self) -> u64 {
        let live = self.cpus.iter().filter(|c| !c.ended);
        let (min, max) = live.fold((u64::MAX, 0), |(lo, hi), c| (lo.min(c.now), hi.max(c.now)));
        if min == u64::MAX {
            return u64::MAX; // every reader ended: nothing more can come
        }
        min.max(max.saturating_sub(MAX_WAIT_NS))
            .saturating_sub(SLACK_NS)
    }

    fn pop_one(&mut self) -> Option<Event> {
        let p = self.heap.pop()?;
        if p.time < self.last_emitted {
            self.late += 1;
        } else {
            self.last_emitted = p.time;
        }
        let ev = self.slots.get_mut(p.slot as usize)?.take();
        self.free.push(p.slot);
        if self.heap.is_empty() {
            // Give back what a burst made the slab grow to.
            self.slots.clear();
            self.free.clear();
            if self.slots.capacity() > 65_536 {
                self.slots.shrink_to(65_536);
            }
        }
        ev
    }

    /// Emit, oldest first, every event that can no longer be overtaken.
    pub fn pop_ready(&mut self, mut emit: impl FnMut(Event)) {
        let wm = self.watermark();
        while let Some(top) = self.heap.peek() {
            if top.time > wm && self.heap.len() <= self.max_buffered {
                break;
            }
            if let Some(ev) = self.pop_one() {
                emit(ev);
            }
        }
    }

    /// Emit everything still buffered, in order (at shutdown).
    pub fn flush(&mut self, mut emit: impl FnMut(Event)) {
        while let Some(ev) = self.pop_one() {
            emit(ev);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventKind;

    fn ev(cpu: u32, time: u64) -> Event {
        Event {
            cpu,
            pid: 1,
            tid: 1,
            time,
            id: 0,
            kind: EventKind::LostSamples { lost: 0 },
        }
    }

    fn batch(cpu: u32, now: u64, times: &[u64]) -> Batch {
        Batch {
            cpu,
            events: times.iter().map(|&t| ev(cpu, t)).collect(),
            now,
            end: false,
        }
    }

    fn drain(r: &mut Reorder) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        r.pop_ready(|e| out.push((e.cpu, e.time)));
        out
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn merges_two_cpus_in_time_order() {
        let mut r = Reorder::new(&[0, 1], 1000);
        r.push(batch(0, 100 * MS, &[10 * MS, 30 * MS, 50 * MS]));
        // CPU 1 has not reported: nothing can be emitted yet.
        assert!(drain(&mut r).is_empty());
        r.push(batch(1, 100 * MS, &[20 * MS, 40 * MS, 95 * MS]));
        // Watermark is 100ms - slack: 95ms waits.
        assert_eq!(
            drain(&mut r),
            vec![
                (0, 10 * MS),
                (1, 20 * MS),
                (0, 30 * MS),
                (1, 40 * MS),
                (0, 50 * MS)
            ]
        );
        r.push(batch(0, 200 * MS, &[150 * MS]));
        r.push(batch(1, 200 * MS, &[]));
        assert_eq!(drain(&mut r), vec![(1, 95 * MS), (0, 150 * MS)]);
        assert_eq!(r.late, 0);
    }

    #[test]
    fn quiet_cpu_reports_with_empty_batches() {
        let mut r = Reorder::new(&[0, 1], 1000);
        r.push(batch(0, 100 * MS, &[10 * MS]));
        r.push(batch(1, 100 * MS, &[]));
        assert_eq!(drain(&mut r), vec![(0, 10 * MS)]);
    }

    #[test]
    fn a_silent_cpu_holds_back_at_most_max_wait() {
        let mut r = Reorder::new(&[0, 1], 1000);
        r.push(batch(0, 3_000 * MS, &[10 * MS, 1_500 * MS, 2_500 * MS]));
        // CPU 1 never reported: events older than 3s - 1s - slack go out.
        assert_eq!(drain(&mut r), vec![(0, 10 * MS), (0, 1_500 * MS)]);
    }

    #[test]
    fn ended_cpus_do_not_hold_back_and_late_events_are_counted() {
        let mut r = Reorder::new(&[0, 1], 1000);
        r.push(Batch {
            cpu: 1,
            events: vec![],
            now: 0,
            end: true,
        });
        r.push(batch(0, 100 * MS, &[50 * MS]));
        assert_eq!(drain(&mut r), vec![(0, 50 * MS)]);
        r.push(batch(0, 110 * MS, &[40 * MS]));
        assert_eq!(drain(&mut r), vec![(0, 40 * MS)]);
        assert_eq!(r.late, 1);
        r.push(Batch {
            cpu: 0,
            events: vec![ev(0, 500 * MS)],
            now: 110 * MS,
            end: true,
        });
        assert!(r.all_ended());
        assert_eq!(drain(&mut r), vec![(0, 500 * MS)]);
    }

    #[test]
    fn buffer_is_bounded() {
        let mut r = Reorder::new(&[0, 1], 2);
        r.push(batch(0, 0, &[5, 3, 4, 1]));
        // Nothing is safe by time, but only 2 may stay buffered.
        assert_eq!(drain(&mut r), vec![(0, 1), (0, 3)]);
        assert_eq!(r.len(), 2);
        let mut rest = Vec::new();
        r.flush(|e| rest.push(e.time));
        assert_eq!(rest, vec![4, 5]);
    }

    #[test]
    fn equal_times_keep_arrival_order() {
        let mut r = Reorder::new(&[0], 10);
        r.push(Batch {
            cpu: 0,
            events: vec![ev(0, 7), ev(0, 7), ev(0, 7)],
            now: 0,
            end: true,
        });
        let mut cpus = Vec::new();
        r.pop_ready(|e| cpus.push(e.time));
        assert_eq!(cpus, vec![7, 7, 7]);
    }
}
