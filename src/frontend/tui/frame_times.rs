//! How long the TUI's frames take to draw: a fixed-size histogram the loop fills, reported
//! on stderr at the end of a run when `PERFWATCH_FRAME_TIMES` is set (for benchmarks: the
//! frame time at p99 on a machine with many tasks is a goal of its own).
//!
//! A frame is what one redraw costs the loop's thread: the tick's model reads (rates, task
//! rows, tree, Top tasks), ratatui's layout, diff and the write to the terminal. Batches
//! taken between frames are counted apart (ingest), as they are not part of a frame. Frames
//! drawn before the first records came (while `/proc` is read at start, the records are
//! held) are counted apart too: they draw nothing worth measuring.

use std::time::Duration;

/// The environment variable that asks for the report.
pub(crate) const ENV: &str = "PERFWATCH_FRAME_TIMES";

/// Bucket width: 50 µs, up to [`BUCKETS`] × 50 µs = 200 ms; longer frames go to the last
/// bucket (their exact maximum is kept apart).
const STEP_US: u64 = 50;
const BUCKETS: usize = 4000;

/// Durations in 50 µs buckets, bounded whatever the run's length.
#[derive(Clone, Debug)]
pub struct Histogram {
    counts: Vec<u32>,
    n: u64,
    total: Duration,
    max: Duration,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            counts: vec![0; BUCKETS],
            n: 0,
            total: Duration::ZERO,
            max: Duration::ZERO,
        }
    }
}

impl Histogram {
    pub fn add(&mut self, d: Duration) {
        let i = ((d.as_micros() as u64) / STEP_US).min(BUCKETS as u64 - 1) as usize;
        self.counts[i] = self.counts[i].saturating_add(1);
        self.n += 1;
        self.total += d;
        self.max = self.max.max(d);
    }

    /// The duration at quantile `q` (0..=1): the upper edge of its bucket, never more than
    /// the longest; zero when empty.
    pub(crate) fn quantile(&self, q: f64) -> Duration {
        if self.n == 0 {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.n as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (i, n) in self.counts.iter().enumerate() {
            seen += u64::from(*n);
            if seen >= rank && i + 1 < BUCKETS {
                return Duration::from_micros((i as u64 + 1) * STEP_US).min(self.max);
            }
        }
        self.max
    }

    /// `mean X ms, p50 .., p90 .., p99 .., max ..`
    fn summary(&self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let mean = if self.n > 0 {
            self.total.as_secs_f64() * 1e3 / self.n as f64
        } else {
            0.0
        };
        format!(
            "mean {:.2} ms, p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            mean,
            ms(self.quantile(0.5)),
            ms(self.quantile(0.9)),
            ms(self.quantile(0.99)),
            ms(self.max)
        )
    }
}

/// Frame times, wall-clock and the loop thread's CPU time (on a loaded machine the wall time
/// of a frame includes the time the thread waited for a CPU), bounded whatever the run's
/// length.
#[derive(Clone, Debug, Default)]
pub struct FrameTimes {
    pub wall: Histogram,
    pub cpu: Histogram,
    /// Time spent taking batches into the model and the panes (not part of a frame).
    ingest: Duration,
    chunks: u64,
    /// Frames drawn before the first records came.
    empty: u64,
}

impl FrameTimes {
    /// One frame drawn in `wall`, of which `cpu` on the thread's CPU.
    pub fn frame(&mut self, wall: Duration, cpu: Duration) {
        if self.chunks == 0 {
            self.empty += 1;
            return;
        }
        self.wall.add(wall);
        self.cpu.add(cpu);
    }

    /// Chunks taken into the panes in `d`.
    pub fn ingest(&mut self, chunks: u64, d: Duration) {
        self.chunks += chunks;
        self.ingest += d;
    }

    pub fn frames(&self) -> u64 {
        self.wall.n
    }

    /// One line for stderr.
    pub fn report(&self) -> String {
        format!(
            "frame times: {} frames, {}; on CPU {}; ingest {:.1} ms for {} chunks; {} frames \
             before the first records",
            self.frames(),
            self.wall.summary(),
            self.cpu.summary(),
            self.ingest.as_secs_f64() * 1e3,
            self.chunks,
            self.empty
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_come_from_the_frames_drawn() {
        let mut t = FrameTimes::default();
        assert_eq!(t.wall.quantile(0.99), Duration::ZERO);
        t.frame(Duration::from_secs(5), Duration::from_secs(5));
        assert_eq!(t.frames(), 0, "a frame before any records is not measured");
        t.ingest(1, Duration::from_micros(3));
        let us = Duration::from_micros;
        for _ in 0..98 {
            t.frame(us(120), us(60));
        }
        t.frame(Duration::from_millis(7), us(10));
        t.frame(Duration::from_millis(900), Duration::from_millis(30));
        assert_eq!(t.frames(), 100);
        // 120 µs falls in the 100..150 µs bucket: its upper edge.
        assert_eq!(t.wall.quantile(0.5), us(150));
        assert_eq!(t.wall.quantile(0.98), us(150));
        assert_eq!(t.wall.quantile(0.99), us(7050));
        // Past the last bucket: the exact maximum.
        assert_eq!(t.wall.quantile(1.0), Duration::from_millis(900));
        assert_eq!(t.cpu.quantile(0.5), us(100));
        assert_eq!(t.cpu.quantile(1.0), Duration::from_millis(30));
        assert!(t.report().contains("100 frames"), "{}", t.report());
        assert!(t.report().contains("1 frames before"), "{}", t.report());
    }
}
