//! The fleet outputs beside any frontend: `--metrics ADDR` ([`crate::metrics`]) and `--pprof`
//! / `--pprof-every` ([`crate::pprof`]). [`Agent::prepare`] checks and claims what they need
//! before the events are opened (the socket, the files); [`Agent::attach`] puts their taps on
//! the pipeline and starts the endpoint; [`Agent::finish`] writes the last profiles.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use anyhow::Result;

use crate::cli::Cli;
use crate::metrics::server::{BoundMetrics, MetricsServer};
use crate::metrics::{Live, MetricsTap, Published};
use crate::monitor::Monitor;
use crate::pipeline::Pipeline;
use crate::pprof::PprofTap;

/// What the fleet options hold during a run.
#[derive(Default)]
pub(crate) struct Agent {
    bound: Option<(BoundMetrics, usize)>,
    server: Option<MetricsServer>,
    pprof: Option<PprofTap>,
    /// `-o`: the recording written beside the view.
    record: Option<crate::record_out::RecordOut>,
}

impl Agent {
    /// Whether any fleet output is asked for (they need call chains and the process model).
    pub(crate) fn wanted(cli: &Cli) -> bool {
        cli.metrics.is_some() || Self::profiles(cli)
    }

    /// `--pprof` or `--pprof-every`: call chains are recorded.
    pub fn profiles(cli: &Cli) -> bool {
        cli.pprof.is_some() || !cli.pprof_every.is_empty()
    }

    /// Headless (`--quiet`, no scripts) with a fleet output: nothing shows records as they
    /// come, and what is counted is read once a second at most.
    pub fn headless(cli: &Cli) -> bool {
        cli.quiet && cli.script.is_empty() && Self::wanted(cli)
    }

    /// How long the readers sleep on a ring under its wakeup watermark: a second in the
    /// headless agent (the endpoint's freshness), else the interactive default.
    /// A `--pprof-every` profile is cut at the first records after its period ends, so the
    /// readers then wake at least four times a period (a profile holds its period, give or
    /// take a quarter; with a second's wake-up, a 1 s profile could hold none and the next
    /// two).
    pub fn reader_idle_wake(cli: &Cli) -> std::time::Duration {
        use crate::perf::reader::{AGENT_IDLE_WAKE, POLL_TIMEOUT};
        if !Self::headless(cli) {
            return POLL_TIMEOUT;
        }
        let period = cli
            .pprof_every
            .first()
            .and_then(|p| crate::cli::duration(&p.to_string_lossy()).ok());
        match period {
            Some(p) => AGENT_IDLE_WAKE.min(p / 4).max(POLL_TIMEOUT),
            None => AGENT_IDLE_WAKE,
        }
    }

    /// The symbolizer's budgets: `--symbol-cache`, else smaller in the headless agent, which
    /// runs for weeks beside the host's own work (see [`AGENT_TABLE_BUDGET`]).
    pub fn symbols(cli: &Cli, config: crate::symbols::Config) -> crate::symbols::Config {
        let headless = Self::headless(cli);
        let table_budget = match cli.symbol_cache {
            Some(bytes) => bytes,
            None if headless => AGENT_TABLE_BUDGET,
            None => config.table_budget,
        };
        crate::symbols::Config {
            table_budget,
            result_entries: if headless {
                AGENT_RESULT_ENTRIES
            } else {
                config.result_entries
            },
            ..config
        }
    }

    /// Bind the endpoint and create `--pprof FILE`, before anything is opened; `every` is
    /// `--pprof-every`'s period and directory.
    pub(crate) fn prepare(
        cli: &Cli,
        interactive: bool,
        every: Option<(std::time::Duration, std::path::PathBuf)>,
    ) -> Result<Agent> {
        if Self::wanted(cli) {
            few_malloc_arenas();
        }
        let bound = match cli.metrics {
            Some(addr) => Some((
                BoundMetrics::bind(addr)
                    .map_err(|e| anyhow::anyhow!("--metrics {addr}: cannot listen there: {e}"))?,
                cli.metrics_top,
            )),
            None => None,
        };
        let pprof = if cli.pprof.is_some() || every.is_some() {
            Some(PprofTap::new(cli.pprof.as_deref(), every, !interactive)?)
        } else {
            None
        };
        let record = match &cli.output {
            // With -i, -o is the recording's copy (src/record_out/copy.rs), not the rings'.
            Some(path) if cli.input.is_none() => {
                let system_wide = cli.all_cpus || cli.cpu.is_some();
                let only = match (&cli.pid, &cli.tid) {
                    (Some(p), _) => Some(p.0.clone()),
                    (_, Some(t)) => Some(t.0.clone()),
                    _ if !cli.command.is_empty() && !system_wide => Some(Vec::new()),
                    _ => None,
                };
                Some(crate::record_out::RecordOut::prepare(
                    path,
                    interactive,
                    only,
                )?)
            }
            _ => None,
        };
        Ok(Agent {
            bound,
            server: None,
            pprof,
            record,
        })
    }

    /// Put the taps on `pipe` and start serving (`late` and `hidden`: the run's counters the
    /// pipeline writes).
    pub fn attach(
        &mut self,
        mut pipe: Pipeline,
        mon: &Monitor,
        late: &Arc<AtomicU64>,
        hidden: &Arc<AtomicU64>,
    ) -> Result<Pipeline> {
        if let Some((bound, top)) = self.bound.take() {
            let published = Arc::new(Published::default());
            let mut tap = MetricsTap::new(top, published.clone());
            // Something to scrape before the first chunk.
            tap.publish();
            pipe = pipe.with_tap(Box::new(tap));
            let live = Live {
                stats: mon.stats.clone(),
                late: late.clone(),
                hidden: hidden.clone(),
            };
            self.server = Some(bound.serve(published, live)?);
        }
        if let Some(r) = &mut self.record {
            pipe = pipe.with_tap(r.start(mon)?);
        }
        Ok(self.attach_profiles(pipe))
    }

    /// Put the profile taps on a recording's `pipe` (`-i`: there is no live endpoint to serve).
    pub(crate) fn attach_profiles(&self, mut pipe: Pipeline) -> Pipeline {
        if let Some(p) = &self.pprof {
            pipe = pipe.with_tap(Box::new(p.clone()));
        }
        pipe
    }

    /// `-o`: where the readers copy their records to, for the monitor's configuration.
    pub(crate) fn raw_tap(&self) -> Option<crate::perf::raw_tap::RawTap> {
        self.record.as_ref().map(|r| r.raw_tap())
    }

    /// At the end: stop serving, write the last profiles and say where they went. False when
    /// a profile could not be written.
    pub fn finish(self) -> bool {
        drop(self.server);
        let recorded = self.record.is_none_or(|r| r.finish());
        let Some(p) = self.pprof else {
            return recorded;
        };
        let (lines, ok) = p.finish();
        for l in lines {
            crate::output::stderr_bounded(format!("perfwatch: {l}\n").as_bytes());
        }
        ok && recorded
    }
}

/// Bytes of parsed symbol tables the headless agent keeps unless `--symbol-cache` says (the
/// kernel's, pinned, included; 32 MiB elsewhere): the least recently used binary's table goes
/// first, and a binary whose table alone is larger is named by its file only. Measured side by
/// side with `--symbol-cache 32M` (same build, same load, two 20 s windows): RSS 40.0 and
/// 47.0 MiB against 57.6 and 62.2, CPU 1.6 and 2.0% against 2.1 and 2.0% of a CPU. What it
/// costs here: librustc_driver, libLLVM and cargo (the other engineers' builds) are too large
/// and go unnamed, after up to four reads each; a fleet host with a large C++ server may want
/// `--symbol-cache 64M`.
pub const AGENT_TABLE_BUDGET: usize = 16 << 20;
/// Answers the headless agent's symbolizer keeps per cache generation (32 Ki elsewhere).
pub const AGENT_RESULT_ENTRIES: usize = 16 << 10;

/// One malloc arena, trimmed past 128 KiB free at its top. glibc gives each thread that meets
/// a locked arena one of its own (up to 8 per CPU), and memory freed in one is not used by
/// the others; its trim threshold grows with the largest block freed (a symbol table), so
/// freed memory stayed resident. perfwatch's threads allocate little at once (tcache takes
/// most of it without the lock). `perfwatch -a --quiet -F 1000`, 20 s on the busy VM, side by
/// side: 58 MiB RSS as is, 51 with two arenas, 44 with one arena and this threshold; the
/// model alone (`-e dummy`) is 9 MiB. Called before the agent's threads start.
fn few_malloc_arenas() {
    crate::sys::malloc_tune(1, 128 << 10);
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn budget(args: &[&str]) -> (usize, usize) {
        let cli = Cli::try_parse_from(args).unwrap();
        let c = Agent::symbols(&cli, crate::symbols::Config::default());
        (c.table_budget, c.result_entries)
    }

    #[test]
    fn the_readers_wake_four_times_a_pprof_period_in_the_headless_agent() {
        use crate::perf::reader::{AGENT_IDLE_WAKE, POLL_TIMEOUT};
        use std::time::Duration;
        let wake = |args: &[&str]| Agent::reader_idle_wake(&Cli::try_parse_from(args).unwrap());
        assert_eq!(
            wake(&["perfwatch", "-a", "--metrics", "9464"]),
            POLL_TIMEOUT
        );
        assert_eq!(
            wake(&["perfwatch", "-a", "--quiet", "--metrics", "9464"]),
            AGENT_IDLE_WAKE
        );
        let every = |p: &str| wake(&["perfwatch", "-a", "--quiet", "--pprof-every", p, "/tmp"]);
        assert_eq!(every("1s"), Duration::from_millis(250));
        assert_eq!(every("2s"), Duration::from_millis(500));
        assert_eq!(every("60s"), AGENT_IDLE_WAKE);
    }

    #[test]
    fn the_headless_agent_keeps_smaller_symbol_caches_unless_told() {
        let default = crate::symbols::Config::default();
        let full = (default.table_budget, default.result_entries);
        let agent = (AGENT_TABLE_BUDGET, AGENT_RESULT_ENTRIES);
        assert_eq!(
            budget(&["perfwatch", "-a", "--quiet", "--metrics", "9464"]),
            agent
        );
        assert_eq!(budget(&["perfwatch", "-a", "--metrics", "9464"]), full);
        assert_eq!(budget(&["perfwatch", "-a", "--quiet"]), full);
        assert_eq!(
            budget(&[
                "perfwatch",
                "-a",
                "--quiet",
                "--pprof",
                "p.pb.gz",
                "--symbol-cache",
                "64M"
            ]),
            (64 << 20, AGENT_RESULT_ENTRIES)
        );
        assert_eq!(budget(&["perfwatch", "--symbol-cache", "8M"]).0, 8 << 20);
    }
}
