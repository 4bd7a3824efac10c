//! The symbolizer's side of JIT perf maps: one map per program (a process between its fork
//! or exec and its exit or next exec), read on the loader thread (as the process's user, see
//! [`super::as_owner`]), reread when it grows, forgotten when its program is gone so that a
//! later process with the same pid is never named by it.

use std::mem;
use std::sync::Arc;
use std::time::Instant;

use rustc_hash::FxHashMap;

use super::load::{Job, LoadError, Outcome, PerfMapJob, PerfMapRead};
use super::perfmap::PerfMap;
use super::{
    Binary, BinaryId, Dso, DsoKind, Loaded, MappedFile, NOWHERE, PERF_MAP_RECHECK, Request, Source,
    State, Symbol, SymbolKey, Symbolized, Symbolizer, Table, demangle, stable_hash,
};

pub(super) struct PerfMapState {
    pub(super) map: PerfMap,
    dev: u64,
    ino: u64,
    end: u64,
}

impl Symbolizer {
    pub(super) fn perf_map(&mut self, r: &Request, mapped: Option<&Arc<MappedFile>>) -> Symbolized {
        let (pid, addr) = (r.pid, r.addr);
        let id = match self.perf_maps.get(&pid) {
            Some(&(image, id)) if image == r.image => Some(id),
            // A sample of the program before (an exec, or the exited process whose pid this
            // is now): its map is forgotten.
            Some(&(image, _)) if r.image < image => None,
            Some(&(_, old)) => {
                self.forget_perf_map(old);
                Some(self.new_perf_map(pid, r.image))
            }
            None => Some(self.new_perf_map(pid, r.image)),
        };
        if let Some(id) = id {
            if let Some(hit) = self.results.get(id, addr) {
                self.stats.cache_hits += 1;
                return hit;
            }
            if let Some(s) = self.perf_map_miss(pid, id, addr) {
                return s;
            }
        }
        // Not in the map (not cached: the JIT may write it later).
        match mapped {
            Some(f) => {
                let id = self.file_id(f);
                Symbolized::unknown(&self.binaries[id as usize].unknown)
            }
            None => Symbolized::unknown(&self.binaries[NOWHERE as usize].unknown),
        }
    }

    /// A program's perf map, once it has exited or exec'd: its slot dead, its table freed
    /// (answers cached for it are never asked for again: they are keyed by its id).
    #[cold]
    fn forget_perf_map(&mut self, id: BinaryId) {
        let b = &mut self.binaries[id as usize];
        if let State::Loaded(l) = mem::replace(&mut b.state, State::NoSymbols) {
            self.table_bytes = self.table_bytes.saturating_sub(l.bytes);
        }
        b.source = Source::Special;
    }

    #[cold]
    fn new_perf_map(&mut self, pid: u32, image: u64) -> BinaryId {
        let name = format!("/tmp/perf-{pid}.map");
        let key = stable_hash(("perf map", pid, image));
        let b = Binary::new(
            Source::PerfMap(pid),
            Dso::new(name, DsoKind::PerfMap),
            key,
            State::Unloaded,
        );
        let id = self.push_binary(b);
        self.perf_maps.insert(pid, (image, id));
        id
    }

    fn perf_map_find(&mut self, id: BinaryId, addr: u64) -> Option<Symbolized> {
        let b = &mut self.binaries[id as usize];
        let State::Loaded(l) = &mut b.state else {
            return None;
        };
        let Table::PerfMap(p) = &l.table else {
            return None;
        };
        let (start, name_key, name) = p.map.find_keyed(addr)?;
        let (dso, dso_key) = (&b.dso, b.dso_key);
        let mut added = 0;
        let sym = l.interned.entry(name_key).or_insert_with(|| {
            let shown = demangle::display_name(name);
            added = shown.len() + mem::size_of::<Symbol>() + 48;
            Symbol::new(
                Some(shown),
                Arc::clone(dso),
                SymbolKey {
                    dso: dso_key,
                    start,
                },
            )
        });
        let s = Symbolized::new(Arc::clone(sym), addr - start);
        l.bytes += added;
        l.interned_bytes += added;
        self.table_bytes += added;
        Some(s)
    }

    #[cold]
    fn perf_map_miss(&mut self, pid: u32, id: BinaryId, addr: u64) -> Option<Symbolized> {
        self.tick += 1;
        self.binaries[id as usize].last_used = self.tick;
        let found = self.perf_map_find(id, addr);
        let b = &self.binaries[id as usize];
        let due = match &b.state {
            _ if found.is_some() => false,
            State::NoSymbols => false,
            State::Unloaded => true,
            State::Failed(e) if !e.retryable() && *e != LoadError::NotFound => false,
            State::Loading(_) => false,
            State::Loaded(_) | State::Failed(_) => b
                .last_attempt
                .is_none_or(|t| self.now.saturating_duration_since(t) >= PERF_MAP_RECHECK),
        };
        let (id, found) = if due {
            let known = match &b.state {
                State::Loaded(l) => match &l.table {
                    Table::PerfMap(p) => Some((p.dev, p.ino, p.end)),
                    _ => None,
                },
                _ => None,
            };
            self.binaries[id as usize].last_attempt = Some(Instant::now());
            self.stats.loads += 1;
            let job = Job::PerfMap(PerfMapJob {
                pid,
                known,
                max_bytes: self.room(),
            });
            let tag = self.tag(id);
            let source = super::stable_hash(("perf maps of uid", super::load::process_uid(pid)));
            let id = match self.loader.run(job, tag, source, self.config.load_timeout) {
                Ok(Outcome::PerfMap(r)) => self.install_perf_map(id, r),
                Ok(_) => id,
                Err(e) => {
                    let e = self.run_error(e);
                    self.fail(id, e);
                    id
                }
            };
            (id, self.perf_map_find(id, addr))
        } else {
            (id, found)
        };
        if let Some(s) = &found {
            self.results.insert(id, addr, s.clone());
        }
        if self.table_bytes > self.config.table_budget {
            self.evict(id);
        }
        found
    }

    /// Take in what was read of a perf map; returns the map's id, a new one when its
    /// contents changed (so that answers cached for the old contents are no longer found).
    pub(super) fn install_perf_map(
        &mut self,
        id: BinaryId,
        r: Result<PerfMapRead, LoadError>,
    ) -> BinaryId {
        // A late read of a map forgotten meanwhile (its program exited or exec'd).
        let Source::PerfMap(pid) = self.binaries[id as usize].source else {
            return id;
        };
        if self.perf_maps.get(&pid).is_none_or(|&(_, cur)| cur != id) {
            return id;
        }
        let read = match r {
            Ok(read) => read,
            // A map read before and gone now (deleted) is still the best knowledge there is.
            Err(_) if matches!(self.binaries[id as usize].state, State::Loaded(_)) => return id,
            Err(e) => {
                self.fail(id, e);
                return id;
            }
        };
        let budget = self.room();
        let b = &mut self.binaries[id as usize];
        let old = mem::replace(&mut b.state, State::Unloaded);
        let (mut state, had) = match old {
            State::Loaded(l) if !read.restart => match l.table {
                Table::PerfMap(p) => (p, l.bytes),
                _ => (new_map_state(), l.bytes),
            },
            State::Loaded(l) => (new_map_state(), l.bytes),
            _ => (new_map_state(), 0),
        };
        let changed = !read.bytes.is_empty() || read.restart;
        let too_large = state.map.feed(&read.bytes, budget).is_err();
        state.dev = read.dev;
        state.ino = read.ino;
        state.end = read.end;
        let (lines, bad) = state.map.lines();
        let bytes = state.map.bytes();
        self.table_bytes = self.table_bytes.saturating_sub(had) + bytes;
        let loaded = Box::new(Loaded {
            table: Table::PerfMap(state),
            interned: FxHashMap::default(),
            bytes,
            interned_bytes: 0,
        });
        if bad > 0 {
            self.note(
                id,
                format!("{bad} of its {lines} lines are not `START SIZE NAME`: skipped"),
            );
        }
        if too_large || read.truncated {
            self.note(
                id,
                format!(
                    "larger than the symbol cache ({} MiB): only its beginning is used",
                    budget >> 20
                ),
            );
        }
        if !changed || self.binaries[id as usize].attempts == 0 {
            let b = &mut self.binaries[id as usize];
            b.attempts = 1;
            b.state = State::Loaded(loaded);
            return id;
        }
        // New contents: a fresh id, the old slot dead.
        let old = &mut self.binaries[id as usize];
        let mut moved = Binary::new(
            Source::PerfMap(pid),
            Arc::clone(&old.dso),
            old.dso_key,
            State::Loaded(loaded),
        );
        moved.attempts = 1;
        moved.last_attempt = old.last_attempt;
        moved.last_used = old.last_used;
        old.source = Source::Special;
        old.state = State::NoSymbols;
        let image = self.perf_maps.get(&pid).map_or(0, |&(image, _)| image);
        let new_id = self.push_binary(moved);
        self.perf_maps.insert(pid, (image, new_id));
        new_id
    }
}

fn new_map_state() -> PerfMapState {
    PerfMapState {
        map: PerfMap::new(),
        dev: 0,
        ino: 0,
        end: 0,
    }
}
