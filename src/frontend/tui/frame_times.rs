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
pub const ENV: &str = "PERFWATCH_FRAME_TIMES";

/// Bucket width: 50 µs, up to [`BUCKETS`] × 50 µs = 200 ms; longer frames go to the last
/// bucket (their exact maximum is kept apart).
const STEP_US: u64 = 50;
const BUCKETS: usize = 4000;

/// Frame times, bounded whatever the run's length.
#[derive(Clone, Debug)]
pub struct FrameTimes {
    counts: Vec<u32>,
    frames: u64,
    total: Duration,
    max: Duration,
    /// Time spent taking batches into the model and the panes (not part of a frame).
    ingest: Duration,
    chunks: u64,
    /// Frames drawn before the first records came.
    empty: u64,
}

impl Default for FrameTimes {
    fn default() -> FrameTimes {
        FrameTimes {
            counts: vec![0; BUCKETS],
            frames: 0,
            total: Duration::ZERO,
            max: Duration::ZERO,
            ingest: Duration::ZERO,
            chunks: 0,
            empty: 0,
        }
    }
}

impl FrameTimes {
    /// One frame drawn in `d`.
    pub fn frame(&mut self, d: Duration) {
        if self.chunks == 0 {
            self.empty += 1;
            return;
        }
        let i = ((d.as_micros() as u64) / STEP_US).min(BUCKETS as u64 - 1) as usize;
        self.counts[i] = self.counts[i].saturating_add(1);
        self.frames += 1;
        self.total += d;
        self.max = self.max.max(d);
    }

    /// Chunks taken into the panes in `d`.
    pub fn ingest(&mut self, chunks: u64, d: Duration) {
        self.chunks += chunks;
        self.ingest += d;
    }

    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// The frame time at quantile `q` (0..=1): the upper edge of its bucket, never more than
    /// the longest frame; zero before any frame.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.frames == 0 {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.frames as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (i, n) in self.counts.iter().enumerate() {
            seen += u64::from(*n);
            if seen >= rank && i + 1 < BUCKETS {
                return Duration::from_micros((i as u64 + 1) * STEP_US).min(self.max);
            }
        }
        self.max
    }

    /// One line for stderr.
    pub fn report(&self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let mean = if self.frames > 0 {
            self.total / self.frames as u32
        } else {
            Duration::ZERO
        };
        format!(
            "frame times: {} frames, mean {:.2} ms, p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, \
             max {:.2} ms; ingest {:.1} ms for {} chunks; {} frames before the first records",
            self.frames,
            ms(mean),
            ms(self.quantile(0.5)),
            ms(self.quantile(0.9)),
            ms(self.quantile(0.99)),
            ms(self.max),
            ms(self.ingest),
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
        assert_eq!(t.quantile(0.99), Duration::ZERO);
        t.frame(Duration::from_secs(5));
        assert_eq!(t.frames(), 0, "a frame before any records is not measured");
        t.ingest(1, Duration::from_micros(3));
        for _ in 0..98 {
            t.frame(Duration::from_micros(120));
        }
        t.frame(Duration::from_millis(7));
        t.frame(Duration::from_millis(900));
        assert_eq!(t.frames(), 100);
        // 120 µs falls in the 100..150 µs bucket: its upper edge.
        assert_eq!(t.quantile(0.5), Duration::from_micros(150));
        assert_eq!(t.quantile(0.98), Duration::from_micros(150));
        assert_eq!(t.quantile(0.99), Duration::from_micros(7050));
        // Past the last bucket: the exact maximum.
        assert_eq!(t.quantile(1.0), Duration::from_millis(900));
        assert!(t.report().contains("100 frames"), "{}", t.report());
        assert!(t.report().contains("1 frames before"), "{}", t.report());
    }
}
