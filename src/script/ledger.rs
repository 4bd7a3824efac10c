//! Counting the events the scripts did not see, each at most once.
//!
//! "Dropped by perfwatch" (in the script stage: passed on without the script seeing it) must
//! never exceed the records read, per CPU or in total. Events reach that count by three
//! paths: around the script when its queue is full (counted when they go around), back from
//! the worker with part of the batch unseen (it was stopping), or never back at all (a
//! handler stuck at exit). A batch handed to the worker is written in the [`Ledger`] and
//! settled exactly once, whichever comes first: handed back, taken back unstarted, or given
//! up at the end. Settling removes it, so a late second path finds nothing to count; and
//! what a returned batch may add is capped by what it held ([`unseen_of`]).

use std::collections::HashMap;

/// Events per CPU: `(cpu, count)`.
pub type Counts = Vec<(u32, u64)>;

/// What a batch the worker handed back adds to the dropped count: the events it says it did
/// not run the script on, per CPU, never more than the batch held for that CPU.
pub fn unseen_of(held: &[(u32, u64)], unseen: &[(u32, u64)]) -> Counts {
    held.iter()
        .map(|&(cpu, n)| {
            let u: u64 = unseen
                .iter()
                .filter(|(c, _)| *c == cpu)
                .map(|(_, u)| *u)
                .sum();
            (cpu, u.min(n))
        })
        .filter(|&(_, n)| n > 0)
        .collect()
}

/// The batches the worker holds, by sequence number, with their events per CPU.
#[derive(Debug, Default)]
pub struct Ledger {
    out: HashMap<u64, Counts>,
}

impl Ledger {
    /// A batch went to the worker.
    pub fn sent(&mut self, seq: u64, held: Counts) {
        self.out.insert(seq, held);
    }

    /// The worker handed a batch back; `unseen` is what it passed on without running the
    /// script. Returns what to count as dropped (nothing for a batch already settled).
    pub fn returned(&mut self, seq: u64, unseen: &[(u32, u64)]) -> Counts {
        match self.out.remove(&seq) {
            Some(held) => unseen_of(&held, unseen),
            None => Vec::new(),
        }
    }

    /// A batch was taken back before the worker started on it: all of it is unseen.
    pub fn taken_back(&mut self, seq: u64) -> Counts {
        self.out.remove(&seq).unwrap_or_default()
    }

    /// The worker will not hand this batch back (it is gone): all of it is unseen.
    pub fn lost(&mut self, seq: u64) -> Counts {
        self.taken_back(seq)
    }

    /// The stage ends: every batch still out is counted, once.
    pub fn settle(&mut self) -> Counts {
        let mut total: Counts = Vec::new();
        for (_, held) in self.out.drain() {
            add(&mut total, &held);
        }
        total
    }

    /// Batches still out.
    pub fn outstanding(&self) -> usize {
        self.out.len()
    }
}

/// `into += more`, per CPU.
pub fn add(into: &mut Counts, more: &[(u32, u64)]) {
    for &(cpu, n) in more {
        match into.iter_mut().find(|(c, _)| *c == cpu) {
            Some((_, t)) => *t += n,
            None => into.push((cpu, n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(c: &Counts, cpu: u32) -> u64 {
        c.iter().filter(|(k, _)| *k == cpu).map(|(_, n)| n).sum()
    }

    #[test]
    fn a_returned_batch_adds_at_most_what_it_held() {
        assert_eq!(unseen_of(&[(0, 3), (1, 2)], &[(0, 1)]), vec![(0, 1)]);
        // A worker claiming more than the batch held is capped, per CPU.
        assert_eq!(
            unseen_of(&[(0, 3), (1, 2)], &[(0, 10), (1, 5), (7, 4)]),
            vec![(0, 3), (1, 2)]
        );
        assert!(unseen_of(&[(0, 3)], &[]).is_empty());
    }

    /// The case that counted twice: a busy filter stopped by SIGINT hands back its batch
    /// with the rest unseen after the stage has given up on it.
    #[test]
    fn every_batch_is_settled_once_whatever_the_order() {
        let mut l = Ledger::default();
        l.sent(1, vec![(0, 5), (1, 5)]);
        l.sent(2, vec![(0, 4)]);
        l.sent(3, vec![(1, 7)]);
        // Batch 1 comes back with 3 unseen on CPU 0.
        let mut dropped = l.returned(1, &[(0, 3)]);
        // Batch 2 is taken back unstarted; a late return of it adds nothing.
        add(&mut dropped, &l.taken_back(2));
        add(&mut dropped, &l.returned(2, &[(0, 4)]));
        // Batch 3 never comes back: counted at the end, and only once.
        add(&mut dropped, &l.settle());
        add(&mut dropped, &l.returned(3, &[(1, 7)]));
        add(&mut dropped, &l.settle());
        assert_eq!(get(&dropped, 0), 3 + 4);
        assert_eq!(get(&dropped, 1), 7);
        assert_eq!(l.outstanding(), 0);
    }

    /// Whatever happens to each batch, dropped never exceeds what was sent, per CPU.
    #[test]
    fn dropped_never_exceeds_what_was_sent() {
        // A small exhaustive run over fates: returned (with some unseen), taken back, lost,
        // settled, and repeated (late) events for the same batch.
        for fate in 0..5u32 {
            for repeat in 0..3u32 {
                let mut l = Ledger::default();
                let mut sent: Counts = Vec::new();
                let mut dropped: Counts = Vec::new();
                for seq in 0..6u64 {
                    let held = vec![((seq % 2) as u32, seq + 1), (2, 1)];
                    add(&mut sent, &held);
                    l.sent(seq, held);
                }
                for seq in 0..6u64 {
                    for _ in 0..=repeat {
                        let d = match (fate + seq as u32) % 5 {
                            0 => l.returned(seq, &[(0, 100), (1, 100), (2, 100)]),
                            1 => l.returned(seq, &[(2, 1)]),
                            2 => l.taken_back(seq),
                            3 => l.lost(seq),
                            _ => Vec::new(),
                        };
                        add(&mut dropped, &d);
                    }
                }
                add(&mut dropped, &l.settle());
                for &(cpu, n) in &dropped {
                    assert!(n <= get(&sent, cpu), "cpu {cpu}: {n} > {}", get(&sent, cpu));
                }
                let total: u64 = dropped.iter().map(|(_, n)| n).sum();
                let sent_total: u64 = sent.iter().map(|(_, n)| n).sum();
                assert!(total <= sent_total);
            }
        }
    }
}
