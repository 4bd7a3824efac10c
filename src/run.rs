//! From a parsed command line to an exit code: build the monitor, pick the frontend, report.

use std::io::{IsTerminal, Write};

use anyhow::Result;

use crate::cli::{Cli, LineFormat};
use crate::format::Format;
use crate::frontend::plain::{self, PlainOptions};
use crate::monitor::{Monitor, MonitorConfig, TargetSpec};
use crate::perf::events::{DEFAULT_FREQ, EventSpec, Sampling, parse_event_list};
use crate::pipeline::{HideSelf, Pipeline, PipelineOptions};
use crate::process::proc::SeedOptions;
use crate::signals::{StopSignals, exit_code_for};
use crate::stop::{StopReason, StopRule};

mod recording;

/// Batches the channel between readers and the frontend holds, per CPU. Small on purpose: a
/// stalled consumer (a paused terminal, a slow pipe) should make the readers wait and the
/// kernel rings take the strain (and count it as LOST), not grow perfwatch's memory.
const CHANNEL_BATCHES_PER_CPU: usize = 8;

/// Translate the command line into a monitor configuration.
pub fn monitor_config(cli: &Cli) -> Result<MonitorConfig> {
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
    // `--folded FILE` is created now: a path it cannot use stops perfwatch before it starts.
    let folding = match &cli.folded {
        Some(path) => Some(crate::folded::Folding::new(path, cli.filter.clone())?),
        None => None,
    };
    // `--metrics` binds and `--pprof FILE` is created now, for the same reason.
    let mut agent = crate::agent::Agent::prepare(&cli, interactive, pprof_every(&cli)?)?;
    cfg.raw = agent.raw_tap();
    let mut mon = Monitor::start(cfg)?;
    // The events are enabled: what /proc shows now is what existed before them.
    let pipe = Pipeline::new(
        mon.rx.clone(),
        &mon.info.cpus,
        PipelineOptions {
            hide: (!cli.show_self).then(|| HideSelf {
                pid: std::process::id(),
                command: mon.command_pid(),
                hidden: mon.hidden_self.clone(),
            }),
            late: Some(mon.late.clone()),
            stop_time: Some(mon.stop_time.clone()),
            unwind: mon
                .info
                .events
                .iter()
                .find(|e| e.dwarf_stack.is_some())
                .and_then(|e| e.call_graph)
                .map(|max| (max, mon.unwound.clone())),
            execs: mon.execs.as_ref().map(|w| w.table()),
            ..pipeline_options(&mon.info, &cli, interactive, mon.pool.clone())
        },
    );
    let pipe = agent.attach(pipe, &mon)?;
    let stop = StopRule::new(
        {
            let signals = signals.clone();
            move || signals.pending()
        },
        cli.duration,
    );

    if interactive {
        let (mut pipe, pane_rx, scripts) =
            scripts.attach(pipe, mon.stats.clone(), cli.script_output.as_deref())?;
        let opts = crate::frontend::tui::TuiOptions {
            history: cli.history,
            filter: cli.filter.clone(),
            folded: folding.clone(),
        };
        // A panic unwinds through the TUI's terminal guard, which restores the terminal;
        // the summary is still printed below.
        let reason =
            catch_panic(|| crate::frontend::tui::run(&mut mon, &mut pipe, pane_rx, opts, &stop));
        // The terminal is restored now. The notes were in the status bar; repeat them on the
        // normal screen with the script notes and the summary.
        for note in mon.info.notes.iter().chain(pipe.all_notes()) {
            eprintln!("perfwatch: {note}");
        }
        let scripts = scripts.finish();
        scripts.print();
        let folded_ok = write_folded(folding.as_ref(), reason.as_ref().ok(), &mut std::io::sink());
        let agent_ok = agent.finish();
        return finish(&mut mon, reason?)
            .map(|code| with_lost_output(code, scripts.output_lost || !folded_ok || !agent_ok));
    }

    for note in &mon.info.notes {
        eprintln!("perfwatch: {note}");
    }
    let perf_lines = perf_lines(&cli, || {
        crate::format::perf::PerfStyle::live(
            mon.info
                .events
                .iter()
                .map(|e| (e.name.as_str(), e.type_, e.call_graph.is_some())),
        )
    });
    let opts = line_options(&cli, scripts.perf_style(), &folding, perf_lines);
    let mut out = crate::output::StdoutQueue::stdout()?;
    let (mut pipe, scripts) =
        scripts.attach_plain(pipe, mon.stats.clone(), cli.script_output.as_deref())?;
    let reason =
        catch_panic(|| plain::run(&mut pipe, &mut mon, &stop, opts, &mut out).map_err(Into::into));
    let LinesEnd {
        flushed,
        natural_end,
        broken,
        stdout_lost,
        other_lost,
    } = end_lines(&reason, folding.as_ref(), out, &signals, scripts, agent);
    if stdout_lost {
        crate::output::stderr_bounded(
            format!(
                "perfwatch: {} bytes of output were not written: {}\n",
                flushed.unwritten,
                match &flushed.error {
                    Some((_, e)) => format!("stdout failed ({e})"),
                    None if natural_end && signals.pending().is_none() => format!(
                        "stdout did not take them (nothing read for {} s after the end)",
                        crate::output::FINISH_IDLE.as_secs()
                    ),
                    None => format!(
                        "stdout did not take them within {} s of the signal",
                        crate::output::FINISH_WAIT.as_secs()
                    ),
                }
            )
            .as_bytes(),
        );
    }
    let reason = match reason {
        // The reader went away meanwhile: as quiet as a closed pipe seen by the loop.
        Ok(_) if broken => Ok(StopReason::BrokenPipe),
        r => r,
    };
    finish(&mut mon, reason?).map(|code| with_lost_output(code, stdout_lost || other_lost))
}

/// How the line frontends write, for a live run and a recording alike: `--json` or plain
/// lines, and which records: `--filter`'s, or none where a perf script's output takes their
/// place on stdout (as with `perf script -s`) or with `--quiet` (headless: the taps,
/// `--folded` and `--pprof` still see everything).
fn line_options(
    cli: &Cli,
    perf_script: bool,
    folding: &Option<crate::folded::Folding>,
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
    PlainOptions::new(format, filter, folding.clone())
}

/// `--format perf`'s style, made by `style` from the session's events; `None` for the other
/// line formats.
fn perf_lines(
    cli: &Cli,
    style: impl FnOnce() -> crate::format::perf::PerfStyle,
) -> Option<crate::format::perf::PerfStyle> {
    (cli.format == Some(LineFormat::Perf)).then(style)
}

/// What the end of a line-format run leaves for its summary and exit status.
struct LinesEnd {
    /// What became of stdout's queue.
    flushed: crate::output::Flushed,
    /// The run ended by itself (not by a signal or an error): stdout was waited for while
    /// its reader kept reading.
    natural_end: bool,
    /// stdout's reader went away (a closed pipe).
    broken: bool,
    /// Records were not written to stdout, and not because its reader went away.
    stdout_lost: bool,
    /// Script output, `--folded` or the agent's output (`--pprof`) was lost.
    other_lost: bool,
}

/// The end of a line-format run, the same for every source (live rings or a recording):
/// folded stacks, stdout drained, the scripts and the agent finished, in that order.
fn end_lines(
    reason: &Result<StopReason>,
    folding: Option<&crate::folded::Folding>,
    mut out: crate::output::StdoutQueue,
    signals: &StopSignals,
    scripts: crate::script::RunningScripts,
    agent: crate::agent::Agent,
) -> LinesEnd {
    // Folded stacks on stdout go through the same queue as the records would have.
    let folded_ok = write_folded(folding, reason.as_ref().ok(), &mut out);
    // A bounded wait for a reader that stopped reading: after a signal, a second; at a natural
    // end, for as long as the reader keeps reading (a slow `| jq` gets everything), giving up
    // after FINISH_IDLE without progress or at a signal. The summary and the exit status come
    // within a second or two of the stop whatever stdout does.
    let cut = || signals.pending().is_some();
    let natural_end = !matches!(reason, Ok(StopReason::Signal(_)) | Err(_));
    let flushed = out.finish(if natural_end {
        crate::output::FinishWait::WhileWriting {
            idle: crate::output::FINISH_IDLE,
            cut: &cut,
        }
    } else {
        crate::output::FinishWait::AtMost(crate::output::FINISH_WAIT)
    });
    let scripts = scripts.finish();
    scripts.print();
    let agent_ok = agent.finish();
    let broken = matches!(flushed.error, Some((std::io::ErrorKind::BrokenPipe, _)));
    LinesEnd {
        stdout_lost: flushed.unwritten > 0 && !broken,
        flushed,
        natural_end,
        broken,
        other_lost: scripts.output_lost || !folded_ok || !agent_ok,
    }
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

/// Write the folded stacks at the end of a run (not after a panic, nor onto a closed stdout):
/// to their file, or to `stdout` (the queue the records would have gone through); say where
/// they went. False when they could not be written.
fn write_folded(
    folding: Option<&crate::folded::Folding>,
    reason: Option<&StopReason>,
    stdout: &mut dyn Write,
) -> bool {
    let Some(f) = folding else {
        return true;
    };
    match reason {
        None | Some(StopReason::Panicked) => return true,
        Some(StopReason::BrokenPipe) if f.replaces_records() => return true,
        _ => {}
    }
    let said = match f.finish_named(stdout) {
        Ok(line) => line,
        Err(e) => format!("error: {e:#}"),
    };
    if !said.is_empty() {
        crate::output::stderr_bounded(format!("perfwatch: {said}\n").as_bytes());
    }
    !said.starts_with("error: ")
}

/// The exit status when output was lost (a write error on `--script-output`): a run that
/// would have ended with 0 ends with [`EXIT_OUTPUT_LOST`] instead; a status that already says
/// something (a signal, the command's own) is kept.
pub fn with_lost_output(code: i32, lost: bool) -> i32 {
    if lost && code == 0 {
        EXIT_OUTPUT_LOST
    } else {
        code
    }
}

/// Exit status of a run that lost output it should have written.
pub const EXIT_OUTPUT_LOST: i32 = 1;

/// Run a frontend; a panic in it becomes [`StopReason::Panicked`] (the panic hook has
/// already printed it), so that perfwatch still stops the command and prints the summary.
fn catch_panic(f: impl FnOnce() -> Result<StopReason>) -> Result<StopReason> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(Ok(StopReason::Panicked))
}

/// Exit status after an internal error (a bug), as Rust uses for a panic.
pub const EXIT_INTERNAL: i32 = 101;

/// Stop the command if perfwatch stopped first, join the readers, print the summary, and pick
/// the exit code.
pub fn finish(mon: &mut Monitor, reason: StopReason) -> Result<i32> {
    let command_status = match reason {
        StopReason::CommandExited(s) => Some(s),
        _ if mon.has_command() => mon.end_command(libc::SIGTERM),
        _ => None,
    };
    mon.join();
    // A failed reader also ends its channel: whatever the frontend saw, say what happened.
    // Only after the join: a reader records its failure after its channel end is dropped.
    let reason = if mon.stats.failure().is_some() && reason != StopReason::Panicked {
        StopReason::ReaderFailed
    } else {
        reason
    };
    let elapsed = mon.started.elapsed();
    if reason == StopReason::BrokenPipe {
        return Ok(0);
    }
    let totals = mon.stats.snapshot();
    // Said with a bounded wait: a stderr nobody reads must not keep perfwatch from exiting.
    let mut err = Vec::new();
    match reason {
        StopReason::TargetsGone if !mon.has_command() => {
            let _ = writeln!(err, "perfwatch: every monitored task has exited");
        }
        StopReason::ReaderFailed => {
            if let Some((cpu, msg)) = mon.stats.failure() {
                let _ = writeln!(
                    err,
                    "perfwatch: error: the reader of CPU {cpu} failed ({}); stopped. This is a bug: please report it.",
                    crate::text::escape(msg.as_bytes())
                );
            }
        }
        StopReason::Panicked => {
            let _ = writeln!(
                err,
                "perfwatch: error: internal error (see above); stopped. This is a bug: please report it."
            );
        }
        _ => {}
    }
    let _ = err.write_all(totals.summary(elapsed).as_bytes());
    let hidden = mon.hidden_self.load(std::sync::atomic::Ordering::Relaxed);
    if hidden > 0 {
        let _ = writeln!(
            err,
            "  hidden: {hidden} records of perfwatch itself (--show-self shows them)"
        );
    }
    if let Ok(u) = mon.unwound.lock()
        && u.chains() > 0
    {
        let _ = write!(
            err,
            "  dwarf unwinding: {} chains, {} user frames; ended by",
            u.chains(),
            u.frames
        );
        let mut sep = " ";
        for end in crate::unwind::End::ALL {
            let n = u.count(end);
            if n > 0 {
                let _ = write!(err, "{sep}{}: {n}", end.name());
                sep = ", ";
            }
        }
        let _ = writeln!(
            err,
            " ({} binaries' unwind tables, {} KiB)",
            u.binaries,
            u.bytes / 1024
        );
    }
    let late = mon.late.load(std::sync::atomic::Ordering::Relaxed);
    if late > 0 {
        let _ = writeln!(
            err,
            "  out of time order: {late} records came after newer ones had gone out (a CPU's \
             reader fell behind the ordering window)"
        );
    }
    if let Some(t) = mon.stop_time.get() {
        let after = mon.stop_time.after();
        let _ = write!(
            err,
            "  stopped at {}.{:09} s ({}): every CPU's records up to then are above",
            t / 1_000_000_000,
            t % 1_000_000_000,
            crate::cli::clock_name(mon.info.clockid)
        );
        if after > 0 {
            let _ = write!(
                err,
                "; {after} records stamped later (before the events were disabled) were left out"
            );
        }
        let _ = writeln!(err);
    }
    crate::output::stderr_bounded(&err);
    Ok(match reason {
        StopReason::Signal(sig) => exit_code_for(sig),
        StopReason::CommandExited(s) => s,
        StopReason::ReaderFailed | StopReason::Panicked => EXIT_INTERNAL,
        _ => command_status
            .filter(|_| mon.has_command() && reason == StopReason::TargetsGone)
            .unwrap_or(0),
    })
}
