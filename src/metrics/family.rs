//! A counter family whose label values come from the monitored system (command names,
//! control groups, symbols): bounded to the `top` most active values plus `other`, and still
//! monotonic, as Prometheus counters must be within a run.
//!
//! Each value is counted exactly while tracked ([`TRACKED_PER_TOP`] × `top` values at most;
//! beyond that new values count straight into `other`). Activity is a decaying score of what
//! came between publications. At each publication the most active values without a series get
//! one: into free room, or in place of the least active series that has had one for at least
//! [`MIN_RESIDENCY`] publications and is less than half as active. A value's series shows what
//! was never published inside `other`; what `other` showed of it stays there. A series that
//! gives its room back (so, or idle for [`IDLE_EVICT`] publications) moves what it showed into
//! `other`, which only grows; the value may come back later as a new series starting from 0.

use std::collections::HashMap;

/// Values tracked per series allowed.
pub(crate) const TRACKED_PER_TOP: usize = 8;
/// Publications without activity after which a series gives its room back.
pub(crate) const IDLE_EVICT: u32 = 240;
/// Publications a series keeps its room at least (2 s), before a more active value takes it.
pub(crate) const MIN_RESIDENCY: u32 = 8;
/// How much of its activity score a value keeps from one publication to the next.
const DECAY: f64 = 0.9;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

#[derive(Debug, Default, Clone)]
struct Tracked {
    count: u64,
    /// `count` at the last publication (activity is what came since).
    last: u64,
    /// What `other` has shown of this value (frozen once it has a series).
    in_other: u64,
    exported: bool,
    idle: u32,
    /// Decaying activity.
    score: f64,
    /// Publications since it got its series (or since it was first counted).
    resident: u32,
}

/// Publications a new value waits, outside `other`, for a series (a burst that straddles
/// a publication still gets its whole count in its series).
const GRACE: u32 = 2;

/// One labelled counter family with at most `top` series and `other`.
#[derive(Debug)]
pub(crate) struct TopFamily {
    top: usize,
    values: FastMap<Box<str>, Tracked>,
    exported: usize,
    /// Counts of values never tracked, or dropped from tracking (all shown in `other`).
    untracked: u64,
}

impl TopFamily {
    pub fn new(top: usize) -> TopFamily {
        TopFamily {
            top,
            values: FastMap::default(),
            exported: 0,
            untracked: 0,
        }
    }

    /// Count `n` for `value` (already sanitized text).
    pub fn add(&mut self, value: &str, n: u64) {
        if let Some(t) = self.values.get_mut(value) {
            t.count += n;
            return;
        }
        if self.top == 0 || self.values.len() >= self.top * TRACKED_PER_TOP {
            self.untracked += n;
            return;
        }
        self.values.insert(
            value.into(),
            Tracked {
                count: n,
                ..Tracked::default()
            },
        );
    }

    /// Decide the series (see the module's doc) and return them, sorted by value, with
    /// `other`'s count last (`None` when `other` has never counted anything).
    pub(crate) fn publish(&mut self) -> (Vec<(Box<str>, u64)>, Option<u64>) {
        // Idle series give their room back; idle values that other shows wholly are dropped.
        let mut dropped = Vec::new();
        for (k, t) in self.values.iter_mut() {
            let delta = t.count - t.last;
            t.score = t.score * DECAY + delta as f64;
            t.resident = t.resident.saturating_add(1);
            t.idle = if delta == 0 {
                t.idle.saturating_add(1)
            } else {
                0
            };
            if t.idle >= IDLE_EVICT {
                if t.exported {
                    t.exported = false;
                    self.exported -= 1;
                    t.in_other = t.count;
                } else if t.in_other == t.count {
                    dropped.push(k.clone());
                }
            }
        }
        // Tracking nearly full: values that `other` shows wholly and that were quiet since the
        // last publication make room for new ones (the quietest first), down to half.
        let cap = self.top * TRACKED_PER_TOP;
        if self.values.len() - dropped.len() > cap * 3 / 4 {
            let mut quiet: Vec<(u32, &Box<str>)> = self
                .values
                .iter()
                .filter(|(_, t)| !t.exported && t.in_other == t.count && t.idle > 0)
                .map(|(k, t)| (t.idle, k))
                .collect();
            quiet.sort_unstable_by_key(|q| std::cmp::Reverse(q.0));
            let excess = (self.values.len() - dropped.len()).saturating_sub(cap / 2);
            dropped.extend(quiet.into_iter().take(excess).map(|(_, k)| k.clone()));
        }
        for k in dropped {
            if let Some(t) = self.values.remove(&k) {
                self.untracked += t.count;
            }
        }
        let mut candidates: Vec<(f64, Box<str>)> = self
            .values
            .iter()
            .filter(|(_, t)| !t.exported && t.count > t.in_other && t.score > 0.0)
            .map(|(k, t)| (t.score, k.clone()))
            .collect();
        candidates.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        for (score, k) in candidates {
            if self.exported >= self.top {
                // The least active series that has had its room long enough, if much less
                // active than this value.
                let victim = self
                    .values
                    .iter()
                    .filter(|(_, t)| t.exported && t.resident >= MIN_RESIDENCY)
                    .min_by(|a, b| a.1.score.total_cmp(&b.1.score))
                    .filter(|(_, t)| t.score * 2.0 < score)
                    .map(|(v, _)| v.clone());
                let Some(v) = victim else { break };
                if let Some(t) = self.values.get_mut(&v) {
                    t.exported = false;
                    t.in_other = t.count;
                    self.exported -= 1;
                }
            }
            if let Some(t) = self.values.get_mut(&k) {
                t.exported = true;
                t.resident = 0;
                self.exported += 1;
            }
        }
        let mut series = Vec::with_capacity(self.exported);
        let mut other = self.untracked;
        for (k, t) in self.values.iter_mut() {
            if t.exported {
                series.push((k.clone(), t.count - t.in_other));
                other += t.in_other;
            } else if t.in_other == 0 && t.resident <= GRACE {
                // New: not shown anywhere yet (see GRACE).
            } else {
                t.in_other = t.count;
                other += t.count;
            }
            t.last = t.count;
        }
        series.sort_unstable();
        (series, (other > 0).then_some(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(s: &[(Box<str>, u64)], k: &str) -> Option<u64> {
        s.iter().find(|(v, _)| &**v == k).map(|(_, n)| *n)
    }

    #[test]
    fn the_most_active_get_series_and_the_rest_is_other() {
        let mut f = TopFamily::new(2);
        f.add("a", 5);
        f.add("b", 1);
        f.add("c", 9);
        let (s, other) = f.publish();
        assert_eq!(other, None, "b waits for a series");
        assert_eq!(get(&s, "c"), Some(9));
        f.publish();
        let (s, other) = f.publish();
        assert_eq!(get(&s, "c"), Some(9));
        assert_eq!(get(&s, "a"), Some(5));
        assert_eq!(other, Some(1));
    }

    #[test]
    fn every_series_and_other_only_grow_and_the_sum_is_exact() {
        let mut f = TopFamily::new(3);
        let mut last: HashMap<String, u64> = HashMap::new();
        let mut total = 0u64;
        let mut seen_series = std::collections::HashSet::new();
        for round in 0..3000u64 {
            for i in 0..(round % 7 + 1) {
                let name = format!("v{}", (round * 31 + i * 17) % 40);
                f.add(&name, i + 1);
                total += i + 1;
            }
            let (s, other) = f.publish();
            assert!(s.len() <= 3);
            seen_series.extend(s.iter().map(|(k, _)| k.to_string()));
            let mut sum = other.unwrap_or(0);
            for (k, n) in &s {
                sum += n;
                let key = k.to_string();
                if let Some(&before) = last.get(&key) {
                    assert!(*n >= before, "{key} went back from {before} to {n}");
                }
                last.insert(key, *n);
            }
            let o = other.unwrap_or(0);
            assert!(o >= *last.get("\0other").unwrap_or(&0), "other went back");
            last.insert("\0other".into(), o);
            // A series evicted disappears; one that reappears starts again (a new series).
            last.retain(|k, _| k == "\0other" || s.iter().any(|(v, _)| &**v == k));
            assert!(sum <= total, "{sum} > {total}");
        }
        // Quiet publications show what new values held back.
        for _ in 0..=GRACE {
            let (s, other) = f.publish();
            let sum = s.iter().map(|(_, n)| n).sum::<u64>() + other.unwrap_or(0);
            if sum == total {
                break;
            }
        }
        let (s, other) = f.publish();
        assert_eq!(
            s.iter().map(|(_, n)| n).sum::<u64>() + other.unwrap_or(0),
            total
        );
        assert!(
            seen_series.len() > 3,
            "series were replaced: {seen_series:?}"
        );
    }

    #[test]
    fn a_burst_of_a_new_value_takes_the_room_of_a_quiet_series_whole() {
        let mut f = TopFamily::new(2);
        for _ in 0..100 {
            f.add("busy", 3);
            f.add("slow", 1);
            f.add("slower", 1);
            f.publish();
        }
        f.add("marker", 17);
        f.publish();
        f.add("marker", 20);
        let (s, _) = f.publish();
        assert_eq!(get(&s, "marker"), Some(37), "{s:?}");
        assert!(get(&s, "busy").is_some());
    }

    #[test]
    fn a_new_value_finds_room_after_many_others_came_and_went() {
        let mut f = TopFamily::new(2);
        for round in 0..20 {
            for i in 0..40 {
                f.add(&format!("r{round}-{i}"), 1);
            }
            f.publish();
        }
        for _ in 0..30 {
            f.publish();
        }
        f.add("marker", 37);
        let (s, _) = f.publish();
        assert_eq!(get(&s, "marker"), Some(37), "{s:?}");
    }

    #[test]
    fn tracking_is_bounded() {
        let mut f = TopFamily::new(1);
        for i in 0..10_000 {
            f.add(&format!("comm{i}"), 1);
        }
        assert!(f.values.len() <= TRACKED_PER_TOP);
        f.publish();
        f.publish();
        let (s, other) = f.publish();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].1 + other.unwrap(), 10_000);
    }
}
