//! `-i FILE` / `-i -`: a recording through the same pipeline and line frontends as a live run.
//! What differs from a live run is said here and nowhere below: no `/proc` seed (the
//! recording's own side-band records build the process model), no hiding of perfwatch
//! itself, kernel symbols only when the recording was made on the running kernel, and a
//! summary that says what the file held that perfwatch does not show.

use std::io::Write;

use anyhow::Result;

use super::lifecycle::{Current, Setup, Source};
use super::{UsageError, line_options};
use crate::cli::Cli;
use crate::pipeline::{Pipeline, PipelineOptions};
use crate::record_file::{DWARF, Input, Recording};
use crate::signals::{StopSignals, exit_code_for};

/// How long a binary's read may take before its samples are `[unknown]` (the read goes on,
/// and is not waited for again). A recording is finished data: each ordered chunk waits for
/// every read its samples need (no per-chunk bound as live has), so that the same file reads
/// the same however loaded the machine is — with the old 2 s read / 1 s chunk bounds, two
/// reads of one 1.1 M-sample file under load differed in ~700 lines. Long enough for any
/// local binary on a loaded machine; a read that hangs (a FUSE mount, if --read-user-fs lets
/// it be read) costs this once, not once per chunk.
const LOAD_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
/// The same waits in the TUI: as live (a read and a chunk's wait on the loop's thread hold up
/// the keys and the frames; a second per chunk froze a replay's start on a system-wide
/// recording). What is not read in time is `[unknown]` for those samples, as live.
const TUI_LOAD_WAIT: std::time::Duration = std::time::Duration::from_secs(1);
const TUI_CHUNK_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// The running kernel's release (`uname -r`).
fn running_release() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_string())
}

/// Read the recording `path` with the line frontends; returns the exit code.
pub fn run(
    cli: &Cli,
    path: &std::path::Path,
    signals: StopSignals,
    interactive: bool,
) -> Result<i32> {
    if let Some(addr) = cli.metrics {
        return Err(UsageError(format!(
            "--metrics {addr} serves a live run's counters; a recording (-i) gives its numbers with --json, --folded or --pprof"
        ))
        .into());
    }
    let scripts = crate::script::Scripts::load(&cli.script, cli.force_script, &cli.script_arg)?;
    let agent = crate::agent::Agent::prepare(cli, false, super::pprof_every(cli)?)?;
    let folding = super::folding(cli)?;
    let pending = {
        let signals = signals.clone();
        move || signals.pending().is_some()
    };
    if cli.output.is_some() && interactive {
        return Err(UsageError(
            "-o with -i copies the recording once, as it is read; the full-screen replay may read it again: give --plain, --json or --quiet".into(),
        )
        .into());
    }
    let copy = |info: &crate::record_file::RecordingInfo| {
        let to = cli.output.as_deref().unwrap_or(std::path::Path::new("-"));
        let c = crate::record_out::copy::CopyOut::create(to, info)?;
        Ok(Box::new(c) as Box<dyn crate::record_file::RecordCopy>)
    };
    let copy = cli.output.is_some().then_some(&copy as _);
    let rec =
        match Recording::open_copying(Input::from_arg(path), cli.common_fields, &pending, copy) {
            Ok(rec) => rec,
            Err(e) if e.is::<crate::record_file::Cancelled>() => {
                return Ok(signals.pending().map_or(1, exit_code_for));
            }
            Err(e) => return Err(e),
        };
    let mut notes = vec![rec.info.describe()];
    notes.extend(rec.info.notes.iter().cloned());
    // Kernel addresses mean something only on the kernel that wrote them.
    let same_kernel =
        rec.info.facts.osrelease.is_some() && rec.info.facts.osrelease == running_release();
    if !same_kernel {
        notes.push(format!(
            "kernel samples are not named: the recording was made on Linux {}, this is Linux {}",
            crate::text::escape(
                rec.info
                    .facts
                    .osrelease
                    .as_deref()
                    .unwrap_or("?")
                    .as_bytes()
            ),
            crate::text::escape(running_release().as_deref().unwrap_or("?").as_bytes()),
        ));
    }
    if let Some(f) = &cli.filter {
        let formats: Vec<_> = rec
            .info
            .descs
            .iter()
            .filter_map(|d| d.format.as_ref())
            .collect();
        f.check(&formats, rec.info.attrs.iter().any(|a| !a.is_dummy()))
            .map_err(|e| UsageError(format!("invalid value for '--filter <EXPR>': {e}")))?;
    }
    let mut setup = Setup::new(
        agent,
        folding,
        signals,
        cli.duration,
        super::tui_options(cli),
    );
    setup.notes = notes;
    if interactive {
        // The notes are said after the screen is restored, with the summary.
        return replay(cli, rec, scripts, same_kernel, setup);
    }
    let pipe = pipeline(cli, &rec, same_kernel, &setup.counters.late, false);
    // A perf script's output takes the records' place on stdout, as with `perf script -i X
    // -s S`.
    let perf_script = scripts.perf_style();
    let pipe = setup.agent.attach_profiles(pipe);
    let perf_lines = super::perf_lines(cli, || {
        let events: Vec<_> = (rec.info.attrs.iter().zip(&rec.info.descs))
            .map(|(a, d)| crate::format::perf::SessionEvent {
                name: d.name,
                type_: a.type_,
                sample_type: a.sample_type,
                dummy: a.is_dummy(),
            })
            .collect();
        crate::format::perf::PerfStyle::new(&events)
    });
    let opts = line_options(cli, perf_script, perf_lines);
    let mut out = crate::output::StdoutQueue::stdout()?;
    if cli.json
        && !perf_script
        && !cli.quiet
        && cli.folded.as_deref() != Some(std::path::Path::new("-"))
    {
        let _ = out.write_all(&json_header(&rec.info));
    }
    let (pipe, scripts) =
        scripts.attach_plain(pipe, rec.stats.clone(), cli.script_output.as_deref())?;
    // A recording waits for its scripts: none of its events is ever passed around them.
    pipe.scripts_get_everything();
    setup
        .run(Source::Recording(Current::new(rec)), pipe, scripts)
        .lines(opts, out)
}

/// A pipeline over `rec`'s batches, as every read of a recording has it (`tui`: with the
/// TUI's waits for symbols).
fn pipeline(
    cli: &Cli,
    rec: &Recording,
    same_kernel: bool,
    late: &std::sync::Arc<std::sync::atomic::AtomicU64>,
    tui: bool,
) -> Pipeline {
    let (load, chunk) = match tui {
        true => (TUI_LOAD_WAIT, Some(TUI_CHUNK_WAIT)),
        false => (LOAD_WAIT, None),
    };
    let symbols = crate::symbols::Config {
        load_timeout: load,
        batch_wait: chunk,
        // Lines (not the TUI's replay, which keeps the live waits): the names do not depend
        // on the machine's load.
        complete: !tui,
        read_user_fs: cli.read_user_fs,
        preload_kernel: same_kernel,
        ..crate::symbols::Config::default()
    };
    let symbols = if same_kernel {
        symbols
    } else {
        crate::symbols::Config {
            kallsyms: "/nonexistent/kallsyms".into(),
            modules: "/nonexistent/modules".into(),
            ..symbols
        }
    };
    Pipeline::new(
        rec.rx.clone(),
        &[0],
        PipelineOptions {
            model: true,
            // The recording's side-band records are the model: this machine's /proc is not.
            seed: None,
            argv: false,
            orphans: false,
            pool: Some(rec.pool.clone()),
            symbols: Some(symbols),
            // A recording's frames are named as perf names them (perf is the oracle there, for
            // every format and for perf's scripts).
            perf_names: true,
            hide: None,
            late: Some(late.clone()),
            stop_time: None,
            // The batches' `now` (the file's rounds) alone decides what goes out, whatever
            // the threads' timing.
            exact_order: true,
            // `--call-graph dwarf` recordings: their stack copies unwound as live (perf
            // script's default depth, 127 frames).
            unwind: rec
                .info
                .attrs
                .iter()
                .any(|a| a.sample_type & DWARF == DWARF)
                .then(|| (cli.max_stack.unwrap_or(127), rec.counts.unwound.clone())),
            ..PipelineOptions::default()
        },
    )
}

/// `perfwatch -i FILE` on a terminal: the TUI replays the recording on its own clock (see
/// `frontend::tui::replay`); the notes and the summary follow on the normal screen.
fn replay(
    cli: &Cli,
    rec: Recording,
    scripts: crate::script::Scripts,
    same_kernel: bool,
    setup: Setup,
) -> Result<i32> {
    use crate::frontend::tui;
    let info = rec.info.clone();
    let late = setup.counters.late.clone();
    let pipe = setup
        .agent
        .attach_profiles(pipeline(cli, &rec, same_kernel, &late, true));
    let (pipe, pane_rx, scripts) =
        scripts.attach(pipe, rec.stats.clone(), cli.script_output.as_deref())?;
    pipe.scripts_get_everything();
    let current = Current::new(rec);
    // Reading again from the start would feed what reads the stream beside the screen the
    // same records twice.
    let others = !cli.script.is_empty() || cli.folded.is_some() || crate::agent::Agent::wanted(cli);
    let rewind: Result<tui::replay::Rewind<'_>, String> = match &info.input {
        crate::record_file::Input::Stdin => {
            Err("a pipe (-i -) cannot be read again: no jumps back (a file can)".into())
        }
        _ if others => Err(
            "no jumps back with --script, --folded or --pprof: they would see the records twice"
                .into(),
        ),
        input => {
            let (current, input) = (current.clone(), input.clone());
            Ok(Box::new(move || {
                // Opened before the current read is stopped: a file gone meanwhile leaves
                // the replay as it was, with the message.
                let again = Recording::open(input.clone(), cli.common_fields, &|| false)
                    .map_err(|e| format!("cannot read the recording again: {e:#}"))?;
                let pipe = pipeline(cli, &again, same_kernel, &late, true);
                let mut rec = current.0.borrow_mut();
                rec.join(std::time::Duration::from_millis(200));
                *rec = again;
                Ok(pipe)
            }))
        }
    };
    let span = info.facts.sample_time;
    let replay =
        tui::replay::Replay::new(span.map(|s| s.0), span.map(|s| s.1), rewind, info.about());
    let cfg = tui::app::AppConfig::replay(&info, cli.history, span.map_or(0, |s| s.0));
    let counted = current.clone();
    let run = setup.run(Source::Recording(current), pipe, scripts);
    run.screen(|pipe, source, stop, opts| {
        let totals = move || counted.0.borrow().stats.snapshot();
        let screen = tui::Screen {
            cfg,
            totals: &totals,
            now: &|| 0,
            replay: Some(replay),
        };
        tui::run(source, pipe, pane_rx, opts, stop, screen)
    })
}

/// `--json`'s first line for a recording: what the file says about itself, as
/// `{"type":"recording", ...}` (every string escaped, as the records' are).
fn json_header(info: &crate::record_file::RecordingInfo) -> Vec<u8> {
    use crate::format::json::json_str_or_null;
    let esc = |s: &str| crate::text::escape(s.as_bytes());
    let f = &info.facts;
    let mut out = b"{\"type\":\"recording\",\"input\":".to_vec();
    json_str_or_null(Some(&info.input.display()), &mut out);
    for (key, v) in [
        ("hostname", &f.hostname),
        ("osrelease", &f.osrelease),
        ("perf_version", &f.version),
        ("arch", &f.arch),
    ] {
        let _ = write!(out, ",\"{key}\":");
        json_str_or_null(v.as_deref().map(esc).as_deref(), &mut out);
    }
    match f.nr_cpus {
        Some((avail, online)) => {
            let _ = write!(
                out,
                ",\"nr_cpus_avail\":{avail},\"nr_cpus_online\":{online}"
            );
        }
        None => out.extend_from_slice(b",\"nr_cpus_avail\":null,\"nr_cpus_online\":null"),
    }
    let list = |out: &mut Vec<u8>, key: &str, items: &mut dyn Iterator<Item = &str>| {
        let _ = write!(out, ",\"{key}\":[");
        for (i, s) in items.enumerate() {
            if i > 0 {
                out.push(b',');
            }
            json_str_or_null(Some(&esc(s)), out);
        }
        out.push(b']');
    };
    list(
        &mut out,
        "cmdline",
        &mut f.cmdline.iter().map(String::as_str),
    );
    list(&mut out, "events", &mut info.descs.iter().map(|d| d.name));
    out.extend_from_slice(b"}\n");
    out
}
