//! The symbolizer's result cache: each (binary, offset) answered once.

use std::mem;

use super::{BinaryId, Symbolized};

/// The result cache's map. Its keys are addresses a monitored program chooses (a JIT can put
/// code anywhere), so the hash is foldhash with a per-map random seed: as fast as FxHash on
/// two integers, but a program cannot aim its addresses at one bucket chain.
type ResultMap =
    std::collections::HashMap<(BinaryId, u64), Symbolized, foldhash::fast::RandomState>;

/// The answers already given, in two generations: a full current generation becomes the old
/// one (the previous old one is dropped), and a hit in the old generation moves back.
pub(super) struct ResultCache {
    cur: ResultMap,
    old: ResultMap,
    cap: usize,
}

impl ResultCache {
    pub(super) fn new(cap: usize) -> ResultCache {
        ResultCache {
            cur: ResultMap::default(),
            old: ResultMap::default(),
            cap: cap.max(1),
        }
    }

    #[inline]
    pub(super) fn get(&mut self, id: BinaryId, key: u64) -> Option<Symbolized> {
        match self.cur.get(&(id, key)) {
            Some(s) => Some(s.clone()),
            None => self.promote(id, key),
        }
    }

    /// A hit in the old generation is copied into the current one (left in the old, which
    /// is dropped whole at the next turn: a removal costs more than the entry).
    #[cold]
    pub(super) fn promote(&mut self, id: BinaryId, key: u64) -> Option<Symbolized> {
        let s = self.old.get(&(id, key))?.clone();
        self.insert(id, key, s.clone());
        Some(s)
    }

    pub(super) fn insert(&mut self, id: BinaryId, key: u64, s: Symbolized) {
        if self.cur.len() >= self.cap {
            self.old = mem::take(&mut self.cur);
        }
        self.cur.insert((id, key), s);
    }

    pub(super) fn len(&self) -> usize {
        self.cur.len() + self.old.len()
    }

    pub(super) fn clear(&mut self) {
        self.cur = ResultMap::default();
        self.old = ResultMap::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::{Dso, DsoKind, Symbol};

    #[test]
    fn the_result_cache_keeps_two_generations() {
        let mut c = ResultCache::new(2);
        let dso = Dso::new("x", DsoKind::File);
        let u = Symbolized::unknown(&Symbol::unknown(dso, 1));
        c.insert(1, 1, u.clone());
        c.insert(1, 2, u.clone());
        c.insert(1, 3, u.clone()); // 1 and 2 move to the old generation
        assert_eq!(c.len(), 3);
        assert!(c.get(1, 1).is_some()); // promoted back
        c.insert(1, 4, u.clone());
        c.insert(1, 5, u.clone());
        assert!(c.len() <= 4);
        assert!(c.get(9, 9).is_none());
    }
}
