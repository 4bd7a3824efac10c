//! Counters that make every loss visible.
//!
//! Each CPU has its own block of atomics, written by its reader thread once per batch (never
//! once per record) and read by whoever reports: the TUI status bar, the `--plain` summary.
//! Kernel-side losses (LOST, LOST_SAMPLES) and perfwatch-side drops are kept apart, because
//! they call for different remedies (a bigger ring vs. a faster consumer).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::event::RecordType;

/// Counters of one CPU's reader.
#[derive(Debug, Default)]
pub struct CpuStats {
    pub cpu: u32,
    /// Records decoded, by type.
    pub records: [AtomicU64; RecordType::COUNT],
    /// Records the kernel dropped because the ring was full (sum of LOST records).
    pub lost: AtomicU64,
    /// The same losses as the events' PERF_FORMAT_LOST counts report them: current even
    /// when the kernel has not yet had room to write the LOST record.
    pub lost_by_read: AtomicU64,
    /// Samples the PMU side dropped (sum of LOST_SAMPLES records).
    pub lost_samples: AtomicU64,
    /// Records of a type perfwatch does not know: counted and skipped.
    pub unknown: AtomicU64,
    /// Records that could not be decoded (too short for their type).
    pub malformed: AtomicU64,
    /// Bytes skipped when the ring could not be parsed and the reader resynchronised.
    pub skipped_bytes: AtomicU64,
    /// Events perfwatch itself dropped after decoding (a full queue, a slow script).
    pub dropped: AtomicU64,
    /// Set when this CPU's reader has ended.
    pub ended: std::sync::atomic::AtomicBool,
    /// Set while the CPU is offline (its events went with it).
    pub offline: std::sync::atomic::AtomicBool,
    /// Times its events were opened again after it came back online.
    pub returns: std::sync::atomic::AtomicU32,
    /// Why its events were not opened again when it came back online.
    pub unwatched: std::sync::OnceLock<String>,
    /// Set when this CPU's reader failed (a panic: a bug), with what it said.
    pub failure: std::sync::OnceLock<String>,
}

/// A plain copy of counters: one CPU's, or all CPUs' summed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub records: [u64; RecordType::COUNT],
    pub lost: u64,
    pub lost_samples: u64,
    pub unknown: u64,
    pub malformed: u64,
    pub skipped_bytes: u64,
    pub dropped: u64,
}

impl Counts {
    pub fn total_records(&self) -> u64 {
        self.records.iter().sum()
    }

    pub fn count(&self, t: RecordType) -> u64 {
        self.records[t.index()]
    }

    fn add(&mut self, o: &Counts) {
        for (t, n) in self.records.iter_mut().zip(o.records) {
            *t += n;
        }
        self.lost += o.lost;
        self.lost_samples += o.lost_samples;
        self.unknown += o.unknown;
        self.malformed += o.malformed;
        self.skipped_bytes += o.skipped_bytes;
        self.dropped += o.dropped;
    }
}

/// A plain copy of one CPU's counters (its [`Counts`] are reached through it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuSnapshot {
    pub cpu: u32,
    pub counts: Counts,
    pub ended: bool,
    pub offline: bool,
    /// [`CpuStats::returns`].
    pub returns: u32,
    /// [`CpuStats::unwatched`].
    pub unwatched: Option<String>,
}

/// `$t`'s counters are reached through it (`snapshot.lost`, `totals.records`).
macro_rules! counts_of {
    ($t:ty) => {
        impl std::ops::Deref for $t {
            type Target = Counts;
            fn deref(&self) -> &Counts {
                &self.counts
            }
        }

        impl std::ops::DerefMut for $t {
            fn deref_mut(&mut self) -> &mut Counts {
                &mut self.counts
            }
        }
    };
}

counts_of!(CpuSnapshot);
counts_of!(Totals);

impl CpuStats {
    pub fn new(cpu: u32) -> CpuStats {
        CpuStats {
            cpu,
            ..Default::default()
        }
    }

    pub fn snapshot(&self) -> CpuSnapshot {
        CpuSnapshot {
            cpu: self.cpu,
            counts: Counts {
                records: std::array::from_fn(|i| self.records[i].load(Relaxed)),
                // Whichever source knows more: LOST records lag, read counts may not cover
                // inherited events.
                lost: self.lost.load(Relaxed).max(self.lost_by_read.load(Relaxed)),
                lost_samples: self.lost_samples.load(Relaxed),
                unknown: self.unknown.load(Relaxed),
                malformed: self.malformed.load(Relaxed),
                skipped_bytes: self.skipped_bytes.load(Relaxed),
                dropped: self.dropped.load(Relaxed),
            },
            ended: self.ended.load(Relaxed),
            offline: self.offline.load(Relaxed),
            returns: self.returns.load(Relaxed),
            unwatched: self.unwatched.get().cloned(),
        }
    }
}

/// Counters of all readers.
#[derive(Debug, Default)]
pub struct Stats {
    cpus: Vec<CpuStats>,
}

impl Stats {
    pub fn new(cpus: &[u32]) -> Stats {
        Stats {
            cpus: cpus.iter().map(|&c| CpuStats::new(c)).collect(),
        }
    }

    pub fn cpus(&self) -> &[CpuStats] {
        &self.cpus
    }

    /// The counters of CPU `cpu` (by CPU number, not index).
    pub fn cpu(&self, cpu: u32) -> Option<&CpuStats> {
        self.cpus.iter().find(|c| c.cpu == cpu)
    }

    /// The first reader failure, if any: (CPU, message).
    pub fn failure(&self) -> Option<(u32, String)> {
        self.cpus
            .iter()
            .find_map(|c| c.failure.get().map(|m| (c.cpu, m.clone())))
    }

    /// Count `n` events dropped by perfwatch that came from CPU `cpu`.
    pub fn add_dropped(&self, cpu: u32, n: u64) {
        if let Some(c) = self.cpu(cpu).or(self.cpus.first()) {
            c.dropped.fetch_add(n, Relaxed);
        }
    }

    pub fn snapshot(&self) -> Totals {
        Totals::of(self.cpus.iter().map(CpuStats::snapshot).collect())
    }
}

/// Totals over all CPUs, with the per-CPU figures they were made from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// The sums (reached through the totals).
    pub counts: Counts,
    pub per_cpu: Vec<CpuSnapshot>,
}

impl Totals {
    /// The totals of `per_cpu`.
    pub fn of(per_cpu: Vec<CpuSnapshot>) -> Totals {
        let mut counts = Counts::default();
        for c in &per_cpu {
            counts.add(c);
        }
        Totals { counts, per_cpu }
    }

    /// The end-of-run summary printed on stderr.
    pub fn summary(&self, elapsed: Duration) -> String {
        let secs = elapsed.as_secs_f64();
        let total = self.total_records();
        let rate = if secs > 0.0 { total as f64 / secs } else { 0.0 };
        let mut s = String::new();
        let _ = writeln!(s, "perfwatch: {total} records in {secs:.2} s ({rate:.0}/s)");
        let by_type: Vec<String> = RecordType::ALL
            .iter()
            .filter(|t| self.count(**t) > 0)
            .map(|t| format!("{} {}", t.name(), self.count(*t)))
            .collect();
        let _ = writeln!(
            s,
            "  by type: {}",
            if by_type.is_empty() {
                "none".to_string()
            } else {
                by_type.join(", ")
            }
        );
        let _ = write!(
            s,
            "  lost by the kernel: {} records (ring full), {} samples; dropped by perfwatch: {}",
            self.lost, self.lost_samples, self.dropped
        );
        if self.unknown + self.malformed + self.skipped_bytes > 0 {
            let _ = write!(
                s,
                "\n  not decoded: {} of unknown type, {} malformed, {} bytes skipped",
                self.unknown, self.malformed, self.skipped_bytes
            );
        }
        for c in &self.per_cpu {
            let _ = write!(
                s,
                "\n  cpu {}: {} records, lost {}, lost samples {}, dropped {}{}",
                c.cpu,
                c.total_records(),
                c.lost,
                c.lost_samples,
                c.dropped,
                hotplug(c)
            );
        }
        s.push('\n');
        s
    }
}

/// What a CPU's summary line says of its going offline and coming back.
fn hotplug(c: &CpuSnapshot) -> String {
    let back = match c.returns {
        0 => String::new(),
        1 => "; its events opened again when it came back".into(),
        n => format!("; its events opened again each of the {n} times it came back"),
    };
    match (&c.unwatched, c.offline) {
        (Some(why), _) => format!(" (went offline{back}; back online, not watched since: {why})"),
        (None, true) => format!(" (went offline{back}; offline at the end)"),
        (None, false) if c.returns > 0 => format!(" (went offline{back})"),
        (None, false) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_add_up_per_cpu_figures() {
        let s = Stats::new(&[0, 2]);
        s.cpus()[0].records[RecordType::Fork.index()].fetch_add(3, Relaxed);
        s.cpus()[1].records[RecordType::Fork.index()].fetch_add(4, Relaxed);
        s.cpus()[1].lost.fetch_add(7, Relaxed);
        s.add_dropped(2, 5);
        let t = s.snapshot();
        assert_eq!(t.count(RecordType::Fork), 7);
        assert_eq!((t.lost, t.dropped), (7, 5));
        assert_eq!(t.per_cpu[1].dropped, 5);
        let text = t.summary(Duration::from_secs(2));
        assert!(text.contains("7 records in 2.00 s"), "{text}");
        assert!(text.contains("fork 7"), "{text}");
        assert!(
            text.contains("cpu 2: 4 records, lost 7, lost samples 0, dropped 5"),
            "{text}"
        );
    }
}
