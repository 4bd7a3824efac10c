//! From a parsed command line to an exit code: build the monitor, pick the frontend, report.

use std::io::IsTerminal;

use anyhow::Result;

use crate::cli::{Cli, LineFormat};
use crate::format::Format;
use crate::frontend::plain::{self, PlainOptions};
use crate::monitor::{Monitor, MonitorConfig, TargetSpec};
use crate::perf::events::{DEFAULT_FREQ, EventSpec, Sampling, parse_event_list};
use crate::pipeline::{HideSelf, Pipeline, PipelineOptions};
use crate::process::proc::SeedOptions;
use crate::signals::StopSignals;

mod lifecycle;
mod recording;

use lifecycle::{Counters, Setup, Source};

/// Batches the channel between readers and the frontend holds, per CPU. Small on purpose: a
/// stalled consumer (a paused terminal, a slow pipe) should make the readers wait and the
/// kernel rings take the strain (and count it as LOST), not grow perfwatch's memory.
const CHANNEL_BATCHES_PER_CPU: usize = 8;

/// Translate the command line into a monitor configuration.
pub(crate) fn monitor_config(cli: &Cli) -> Result<MonitorConfig> {
    let events = if cli.events.is_empty() {
        vec![EventSpec::default_event()]
    } else {
        parse_event_list(&cli.events)?
    };
    if let Some(hz) = cli.freq {
        if let Some(tp) = events
            .iter()
            .find(|e| e.is_tracepoint() && e.sampling.is_none())
        {
            anyhow::bail!(
                "-F {hz} sets a sampling frequency, which tracepoint '{}' does not have: it samples every hit, or every Nth with -c N or {}/period=N/. To give the other events a rate, write it on them: -e cpu-clock/freq={hz}/,{}",
                tp.name,
                tp.name,
                tp.name
            );
        }
    }
    let mut events = events;
    if let Some(max_stack) = call_graph_of(cli)? {
        let dwarf = match cli.call_graph {
            Some(crate::cli::CallGraphMode::Dwarf(size)) => Some(size),
            _ => None,
        };
        for e in events.iter_mut().filter(|e| !e.is_dummy()) {
            e.call_graph = Some(max_stack);
            e.dwarf_stack = dwarf;
        }
    }
    let cgroup = match &cli.cgroup {
        Some(name) => Some(crate::perf::open::resolve_cgroup(name).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let sampling = match (cli.freq, cli.period) {
        (_, Some(n)) => Sampling::Period(n),
        (Some(hz), None) => Sampling::Freq(hz),
        (None, None) => Sampling::Freq(DEFAULT_FREQ),
    };
    let system_wide = cli.all_cpus || cli.cpu.is_some();
    let (target, workload) = if let Some(p) = &cli.pid {
        (TargetSpec::Pids(p.0.clone()), None)
    } else if let Some(t) = &cli.tid {
        (TargetSpec::Tids(t.0.clone()), None)
    } else if !cli.command.is_empty() && !system_wide {
        (TargetSpec::Command(cli.command.clone()), None)
    } else {
        (
            TargetSpec::System,
            (!cli.command.is_empty()).then(|| cli.command.clone()),
        )
    };
    Ok(MonitorConfig {
        events,
        sampling,
        target,
        cpus: cli.cpu.as_ref().map(|c| c.0.clone()),
        mmap_pages: dwarf_ring(cli),
        context_switch: cli.switch,
        channel_capacity: 64
            + CHANNEL_BATCHES_PER_CPU
                * crate::perf::cpus::online_cpus()
                    .map(|c| c.len())
                    .unwrap_or(1),
        workload,
        clockid: cli
            .clockid
            .map_or(libc::CLOCK_MONOTONIC, |c: crate::cli::ClockId| c.id),
        cgroup,
        common_fields: cli.common_fields,
        // Set by run() once it knows what reads command lines.
        exec_argv: false,
        raw: None,
        idle_wake: crate::agent::Agent::reader_idle_wake(cli),
    })
}

/// `--pprof-every PERIOD DIR`.
fn pprof_every(cli: &Cli) -> Result<Option<(std::time::Duration, std::path::PathBuf)>> {
    let [period, dir] = cli.pprof_every.as_slice() else {
        return Ok(None);
    };
    let p = period.to_string_lossy();
    let every = crate::cli::duration(&p).map_err(|e| {
        UsageError(format!(
            "invalid value '{p}' for '--pprof-every <PERIOD> <DIR>': {e}"
        ))
    })?;
    if every < std::time::Duration::from_secs(1) {
        return Err(UsageError(format!(
            "--pprof-every '{p}': a period of at least 1s (one file per period)"
        ))
        .into());
    }
    Ok(Some((every, std::path::PathBuf::from(dir))))
}

/// The ring per CPU: `-m`, but with `--call-graph dwarf` and `-m` left at its default, four
/// times that (2 MiB): every sample then carries its stack copy (8 KiB by default, 8 MB/s a
/// CPU at -F 1000), and 512 KiB would hold only 60 ms of them.
fn dwarf_ring(cli: &Cli) -> usize {
    let default = crate::cli::parse_mmap_pages("512K", crate::perf::ring::page_size()).ok();
    match cli.call_graph {
        Some(crate::cli::CallGraphMode::Dwarf(_)) if Some(cli.mmap_pages.0) == default => {
            cli.mmap_pages.0 * 4
        }
        _ => cli.mmap_pages.0,
    }
}

/// Whether to record call chains (`-g`, `--call-graph fp`, `--folded`), and how deep: the
/// `--max-stack` asked for, else the kernel's `perf_event_max_stack` (the monitor lowers a
/// value above the kernel's limit, and says so).
fn call_graph_of(cli: &Cli) -> Result<Option<u16>> {
    let on = cli.callchains
        || cli.call_graph.is_some()
        || cli.folded.is_some()
        || crate::agent::Agent::profiles(cli);
    if !on {
        if let Some(n) = cli.max_stack {
            return Err(UsageError(format!(
                "--max-stack {n} limits call chains, which are recorded with -g (or --call-graph fp)"
            ))
            .into());
        }
        return Ok(None);
    }
    Ok(Some(cli.max_stack.unwrap_or_else(|| {
        crate::callchain::kernel_max_stack()
            .filter(|&k| k > 0)
            .unwrap_or(crate::callchain::DEFAULT_MAX_STACK)
    })))
}

/// A bad command line found only once the events are known (a filter key that is no field
/// of the tracepoints asked for): exit status 2, as for the errors clap finds.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Run perfwatch; returns the process exit code.
pub fn run(mut cli: Cli) -> Result<i32> {
    // `--format plain|json` are --plain and --json; `--format perf` is read where lines are.
    match cli.format {
        Some(LineFormat::Plain) => cli.plain = true,
        Some(LineFormat::Json) => cli.json = true,
        _ => {}
    }
    // Before anything installs a handler: a signal ignored at entry stays ignored.
    crate::signals::record_entry();
    if cli.output.as_deref() == Some(std::path::Path::new("-")) {
        // perf's pipe format takes stdout: nothing else may write there.
        if cli.plain || cli.json || cli.folded.as_deref() == Some(std::path::Path::new("-")) {
            return Err(UsageError(
                "-o - writes the recording to stdout: --plain, --json and --folded without FILE write there too; give -o FILE, or --folded FILE".into(),
            )
            .into());
        }
        if std::io::stdout().is_terminal() {
            return Err(UsageError(
                "-o - writes perf's pipe format to stdout, which is a terminal: pipe it (-o - | perf script -i -) or give -o FILE".into(),
            )
            .into());
        }
        if !cli.script.is_empty() && cli.script_output.is_none() {
            return Err(UsageError(
                "-o - writes the recording to stdout, where the scripts print: give --script-output FILE, or -o FILE".into(),
            )
            .into());
        }
        cli.quiet = true;
    }
    if let Some(filter) = &cli.list_events {
        let mut out = std::io::stdout().lock();
        return match crate::perf::events::write_event_list(&mut out, filter) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
            _ => Ok(0),
        };
    }
    // Caught from here on: a SIGINT or SIGTERM during start-up (loading scripts, opening
    // events) stops the run as soon as it starts, with its summary, instead of killing
    // perfwatch without one.
    let signals = StopSignals::install()?;
    if cli.json && cli.folded.as_deref() == Some(std::path::Path::new("-")) {
        return Err(UsageError(
            "--folded without FILE prints folded stacks in place of the records, so --json would print nothing: give --folded FILE to have both".into(),
        )
        .into());
    }
    // The interactive view when stdout is a terminal and no line format (nor folded stacks
    // on stdout) was asked for, and the terminal can show it.
    let mut interactive = !cli.json
        && !cli.plain
        && cli.format.is_none()
        && !cli.quiet
        && cli.folded.as_deref() != Some(std::path::Path::new("-"))
        && std::io::stdout().is_terminal();
    if interactive {
        if let Err(why) =
            crate::frontend::tui::terminal::capable(std::env::var_os("TERM").as_deref())
        {
            eprintln!("perfwatch: {why}: no full-screen view; printing --plain lines instead");
            interactive = false;
        }
    }
    if let Some(input) = &cli.input {
        return recording::run(&cli, input, signals, interactive);
    }
    let mut cfg = monitor_config(&cli)?;
    cfg.exec_argv = argv_wanted(&cli, interactive);
    if let Some(f) = &cli.filter {
        let formats: Vec<_> = cfg
            .events
            .iter()
            .filter_map(|e| e.format.as_ref())
            .collect();
        f.check(&formats, cfg.events.iter().any(|e| !e.is_dummy()))
            .map_err(|e| UsageError(format!("invalid value for '--filter <EXPR>': {e}")))?;
    }
    // Scripts load (and fail, with their traceback) before anything is opened or the TUI
    // takes the screen.
    let scripts = crate::script::Scripts::load(&cli.script, cli.force_script, &cli.script_arg)?;
    // No -e and a perf script with tracepoint handlers: open what they handle, as `perf
    // script record SCRIPT` records it.
    let perf_events = match cli.events.is_empty() {
        true => scripts.perf_events(),
        false => Vec::new(),
    };
    if !perf_events.is_empty() {
        let events = perf_events.join(",");
        eprintln!(
            "perfwatch: note: no -e: opening the tracepoints the script's handlers are for: {events}"
        );
        let c = Cli {
            events: vec![events],
            ..cli.clone()
        };
        cfg = monitor_config(&c)?;
        cfg.exec_argv = argv_wanted(&c, interactive);
    }
    let folding = folding(&cli)?;
    // `--metrics` binds and `--pprof FILE` is created now, for the same reason.
    let mut agent = crate::agent::Agent::prepare(&cli, interactive, pprof_every(&cli)?)?;
    cfg.raw = agent.raw_tap();
    let counters = Counters::default();
    let mon = Monitor::start(cfg)?;
    // The events are enabled: what /proc shows now is what existed before them.
    let pipe = Pipeline::new(
        mon.rx.clone(),
        &mon.info.cpus,
        PipelineOptions {
            hide: (!cli.show_self).then(|| HideSelf {
                pid: std::process::id(),
                command: mon.command_pid(),
                hidden: counters.hidden.clone(),
            }),
            late: Some(counters.late.clone()),
            stop_time: Some(mon.stop_time.clone()),
            unwind: mon
                .info
                .events
                .iter()
                .find(|e| e.dwarf_stack.is_some())
                .and_then(|e| e.call_graph)
                .map(|max| (max, counters.unwound.clone())),
            execs: mon.execs.as_ref().map(|w| w.table()),
            ..pipeline_options(&mon.info, &cli, interactive, mon.pool.clone())
        },
    );
    let pipe = agent.attach(pipe, &mon, &counters.late, &counters.hidden)?;
    let mut setup = Setup::new(agent, folding, signals, cli.duration, tui_options(&cli));
    setup.counters = counters;
    setup.notes = mon.info.notes.clone();

    if interactive {
        use crate::frontend::tui;
        let (pipe, pane_rx, scripts) =
            scripts.attach(pipe, mon.stats.clone(), cli.script_output.as_deref())?;
        let cfg = tui::app::AppConfig::from_info(&mon.info, cli.history, tui::started_ns(&mon));
        let (stats, clockid) = (mon.stats.clone(), mon.info.clockid);
        let run = setup.run(Source::Live(Box::new(mon)), pipe, scripts);
        return run.screen(|pipe, source, stop, opts| {
            let screen = tui::Screen {
                cfg,
                totals: &|| stats.snapshot(),
                now: &|| crate::clock::clock_ns(clockid),
                replay: None,
            };
            tui::run(source, pipe, pane_rx, opts, stop, screen)
        });
    }

    let perf_lines = perf_lines(&cli, || {
        crate::format::perf::PerfStyle::live(
            mon.info
                .events
                .iter()
                .map(|e| (e.name.as_str(), e.type_, e.call_graph.is_some())),
        )
    });
    let opts = line_options(&cli, scripts.perf_style(), perf_lines);
    let out = crate::output::StdoutQueue::stdout()?;
    let (pipe, scripts) =
        scripts.attach_plain(pipe, mon.stats.clone(), cli.script_output.as_deref())?;
    setup
        .run(Source::Live(Box::new(mon)), pipe, scripts)
        .lines(opts, out)
}

/// `--folded FILE`, created now: a path it cannot use stops perfwatch before it starts.
fn folding(cli: &Cli) -> Result<Option<crate::folded::Folding>> {
    Ok(match &cli.folded {
        Some(path) => Some(crate::folded::Folding::new(path, cli.filter.clone())?),
        None => None,
    })
}

/// The TUI's options from the command line (`--folded`'s stacks are the run's to hand over).
fn tui_options(cli: &Cli) -> crate::frontend::tui::TuiOptions {
    crate::frontend::tui::TuiOptions {
        history: cli.history,
        filter: cli.filter.clone(),
        folded: None,
    }
}

/// How the line frontends write, for a live run and a recording alike: `--json` or plain
/// lines, and which records: `--filter`'s, or none where a perf script's output takes their
/// place on stdout (as with `perf script -s`) or with `--quiet` (headless: the taps,
/// `--folded` and `--pprof` still see everything).
fn line_options(
    cli: &Cli,
    perf_script: bool,
    perf_lines: Option<crate::format::perf::PerfStyle>,
) -> PlainOptions {
    let format = match perf_lines {
        _ if cli.json => Format::Json,
        Some(style) => Format::Perf(std::sync::Arc::new(style)),
        None => Format::Plain,
    };
    let filter = if perf_script || cli.quiet {
        Some(
            Box::new(|_: &crate::event::Event, _: &crate::process::ProcessModel| false)
                as plain::EventFilter,
        )
    } else {
        cli.filter
            .clone()
            .filter(|f| !f.is_empty())
            .map(|f| Box::new(crate::filter::plain_predicate(f)) as plain::EventFilter)
    };
    PlainOptions::new(format, filter, None)
}

/// `--format perf`'s style, made by `style` from the session's events; `None` for the other
/// line formats.
fn perf_lines(
    cli: &Cli,
    style: impl FnOnce() -> crate::format::perf::PerfStyle,
) -> Option<crate::format::perf::PerfStyle> {
    (cli.format == Some(LineFormat::Perf)).then(style)
}

/// How long an ordered chunk waits, at most, for the binaries its samples meet to be read
/// (all of them together): the longest its lines, and everyone's after them, are held up.
const BATCH_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// How the pipeline runs: the process model when something reads it (the TUI, scripts, a
/// `comm:` filter, folded stacks); from `/proc`, names and threads always, executable mappings when an event
/// samples addresses (not for `dummy` alone), command lines at exec for the interactive view,
/// `--json` and scripts.
fn pipeline_options(
    info: &crate::monitor::MonitorInfo,
    cli: &Cli,
    interactive: bool,
    pool: crate::event::BufferPool,
) -> PipelineOptions {
    let samples = info.events.iter().any(|e| !e.is_dummy());
    let names = cli.filter.as_ref().is_some_and(|f| f.uses_names());
    // Samples are named in every mode. The TUI waits less for a binary's first read than a
    // line format, which writes the names (what a read does not answer in time is
    // [unknown], and the read goes on); either bounds how long a stop can wait for it.
    // kallsyms is read from the start, in the background.
    let symbols = samples.then(|| crate::symbols::Config {
        load_timeout: if interactive {
            std::time::Duration::from_secs(1)
        } else {
            std::time::Duration::from_secs(2)
        },
        // One wait for all the binaries an ordered chunk meets, so that a storm of new
        // binaries never holds the lines of other processes up longer than this.
        batch_wait: Some(BATCH_WAIT),
        read_user_fs: cli.read_user_fs,
        preload_kernel: true,
        ..crate::symbols::Config::default()
    });
    PipelineOptions {
        model: interactive
            || cli.json
            || !cli.script.is_empty()
            || names
            || cli.folded.is_some()
            || crate::agent::Agent::wanted(cli)
            || cli.output.is_some()
            || symbols.is_some(),
        symbols: symbols.map(|c| crate::agent::Agent::symbols(cli, c)),
        // perf script's lines: perf's names.
        perf_names: cli.format == Some(LineFormat::Perf),
        // Who adopted an orphan (a /proc read each) is shown by no series the agent serves.
        orphans: !crate::agent::Agent::headless(cli),
        seed: Some(SeedOptions {
            maps: samples,
            argv: interactive,
        }),
        argv: argv_wanted(cli, interactive),
        pool: Some(pool),
        // `-o` writes what existed at start from the snapshot: worth a longer wait at the end
        // (reading /proc takes seconds on a loaded machine).
        seed_wait: match cli.output {
            Some(_) => crate::record_out::SEED_WAIT,
            None => PipelineOptions::default().seed_wait,
        },
        ..PipelineOptions::default()
    }
}

/// Command lines at exec: shown by the TUI, written as `argv` by --json, read by scripts as
/// `event.argv`, matched by `--filter argv:`.
fn argv_wanted(cli: &Cli, interactive: bool) -> bool {
    interactive
        || cli.json
        || !cli.script.is_empty()
        || cli.filter.as_ref().is_some_and(|f| f.uses_argv())
}
