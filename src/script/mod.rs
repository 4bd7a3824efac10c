//! Embedded Python: `--script FILE.py`.
//!
//! A script may define `trace_begin()`, `trace_end()`, `filter(event) -> bool`,
//! `on_event(event)` and `on_tick() -> str | list[str] | None`. The stage that runs them sits
//! between the monitor's channel and the frontend ([`ScriptStage`], in `stage.rs`, explains
//! how it keeps the readers from ever waiting for Python and what "dropped" means there).
//!
//! Everything that touches Python is behind the `python` cargo feature; the file-safety check
//! and the plain-mode pane printer are not, so they build (and are tested) either way.

pub mod output_file;
pub mod printer;
pub mod safety;

#[cfg(feature = "python")]
mod interp;
#[cfg(feature = "python")]
pub mod ledger;
#[cfg(any(feature = "python", feature = "pyevent"))]
#[cfg_attr(not(feature = "python"), allow(dead_code))]
mod lookup;
#[cfg(feature = "python")]
pub mod module;
#[cfg(feature = "python")]
mod perfcall;
/// The dicts a perf script's handlers get, made cheaply.
#[cfg(feature = "python")]
mod perfdict;
#[cfg(feature = "python")]
pub mod perfenv;
/// perf stat's hooks and `auxtrace_error`, from a recording's side records.
#[cfg(feature = "python")]
mod perfstat;
#[cfg(feature = "python")]
pub mod perfstyle;
#[cfg(any(feature = "python", feature = "pyevent"))]
pub mod pyevent;
#[cfg(feature = "python")]
mod shared;
#[cfg(feature = "python")]
pub mod stage;
#[cfg(feature = "python")]
mod worker;

#[cfg(feature = "python")]
pub use stage::{ScriptHandle, ScriptStage, StageOptions, StageReport};
#[cfg(feature = "python")]
pub use worker::MAX_FAILURES;

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use crate::pipeline::Pipeline;
#[cfg(feature = "python")]
use crate::pipeline::StageLink;

/// The one line `--script` gives in a build without Python.
pub const NO_PYTHON: &str = "--script needs the embedded Python interpreter, which this build of \
perfwatch leaves out: rebuild with `cargo build --release --features python` (it is on by default)";

/// True when this build can run scripts.
pub const AVAILABLE: bool = cfg!(feature = "python");

/// Open every script once and check it (as root: the file and every directory above it,
/// [`safety`]); returns the scripts with their source, read from the descriptor that was
/// checked. Done before anything is started, so that a refusal costs nothing. Says, once
/// each, what `--force-script` let through and which script directories stay off the
/// import path.
pub fn check_scripts(paths: &[PathBuf], force: bool) -> Result<Vec<safety::OpenedScript>> {
    if !paths.is_empty() && !AVAILABLE {
        bail!(NO_PYTHON);
    }
    let who = safety::Invoker::current();
    let mut scripts = Vec::with_capacity(paths.len());
    let mut said = std::collections::HashSet::new();
    for p in paths {
        let s = safety::open_script(p, force, who)?;
        let shown = crate::text::escape(p.as_os_str().as_encoded_bytes());
        if let Some(why) = &s.forced {
            eprintln!(
                "perfwatch: warning: --force-script: running script '{shown}' as root although {why}"
            );
        }
        if let Some(why) = &s.import_note {
            let dir = p.parent().map(Path::to_path_buf).unwrap_or_default();
            if said.insert(dir) {
                eprintln!(
                    "perfwatch: note: the directory of script '{shown}' is not on Python's \
                     import path: {why}; modules beside the script are not importable"
                );
            }
        }
        scripts.push(s);
    }
    Ok(scripts)
}

/// The scripts of a run, loaded (or none): what `run.rs` holds without caring whether this
/// build has Python.
pub struct Scripts {
    #[cfg(feature = "python")]
    stage: Option<ScriptStage>,
}

/// The scripts of a plain run, attached to the stream.
pub struct RunningScripts {
    #[cfg(feature = "python")]
    handle: Option<(ScriptHandle, printer::PaneRouter)>,
}

/// How long perfwatch waits at exit for a script's `trace_end()` (and for a busy handler to
/// notice the interrupt) before leaving it behind.
pub const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl Scripts {
    /// Check and load `--script` files (none: nothing happens). Call before the frontend
    /// takes the terminal: errors carry the Python traceback.
    /// `args` are `sys.argv[1:]` of scripts written for perf script (`--script-arg`).
    pub fn load(paths: &[PathBuf], force: bool, args: &[String]) -> Result<Scripts> {
        let scripts = check_scripts(paths, force)?;
        #[cfg(feature = "python")]
        {
            let stage = if scripts.is_empty() {
                None
            } else {
                let opts = StageOptions {
                    script_args: args.to_vec(),
                    ..StageOptions::default()
                };
                Some(ScriptStage::load_opened(scripts, opts)?)
            };
            Ok(Scripts { stage })
        }
        #[cfg(not(feature = "python"))]
        {
            let _ = (scripts, args);
            Ok(Scripts {})
        }
    }

    /// Without `-e`: the tracepoints the perf scripts' handlers are for, those this kernel
    /// has (`SUBSYS:EVENT`, once each), as `perf script record SCRIPT` would record them.
    pub fn perf_events(&self) -> Vec<String> {
        #[cfg(feature = "python")]
        {
            let Some(stage) = &self.stage else {
                return Vec::new();
            };
            let Some(root) = crate::perf::events::tracefs_root() else {
                return Vec::new();
            };
            let mut out: Vec<String> = Vec::new();
            for tp in stage.perf_tracepoints() {
                let Some((subsys, event)) = tp.split_once(':') else {
                    continue;
                };
                let there = Path::new(root)
                    .join("events")
                    .join(subsys)
                    .join(event)
                    .join("format")
                    .is_file();
                if there && !out.contains(tp) {
                    out.push(tp.clone());
                }
            }
            out
        }
        #[cfg(not(feature = "python"))]
        {
            Vec::new()
        }
    }

    /// A script is written for perf script: with `--plain`/`--json`, stdout carries its
    /// output instead of the records, as `perf script -s` prints only the script's.
    pub fn perf_style(&self) -> bool {
        #[cfg(feature = "python")]
        {
            self.stage.as_ref().is_some_and(ScriptStage::perf_style)
        }
        #[cfg(not(feature = "python"))]
        {
            false
        }
    }

    /// Put the scripts between `pipe`'s model and the TUI: returns the pipeline with the
    /// script stage in it, the scripts' pane messages (None without scripts), and the handle
    /// to stop them with. With `output` (`--script-output`) every pane message is also
    /// written to that file.
    #[allow(clippy::type_complexity)]
    pub fn attach(
        self,
        pipe: Pipeline,
        stats: std::sync::Arc<crate::stats::Stats>,
        output: Option<&Path>,
    ) -> Result<(
        Pipeline,
        Option<crossbeam_channel::Receiver<crate::pane::PaneMsg>>,
        RunningScripts,
    )> {
        #[cfg(feature = "python")]
        if let Some(stage) = self.stage {
            let sink = printer::Sink::open(output, printer::Sink::None)?;
            let sink = match stage.perf_style() {
                true => sink.for_perf_script(),
                false => sink,
            };
            let capacity = StageOptions::default().pane_messages;
            let perf_style = stage.perf_style();
            let (pipe, pane, handle) = link(stage, pipe, stats)?;
            let (router, panes) = printer::PaneRouter::spawn_for_panes(pane, sink, capacity)?;
            let router = match perf_style {
                true => router.bare_epilogue(),
                false => router,
            };
            return Ok((
                pipe,
                Some(panes),
                RunningScripts {
                    handle: Some((handle, router)),
                },
            ));
        }
        let _ = (stats, output);
        Ok((
            pipe,
            None,
            RunningScripts {
                #[cfg(feature = "python")]
                handle: None,
            },
        ))
    }

    /// For `--plain`/`--json`: put the scripts between `pipe`'s model and the writer; their
    /// pane goes to stderr or `output` (a perf script's to stdout, bare, or `output`).
    pub fn attach_plain(
        self,
        pipe: Pipeline,
        stats: std::sync::Arc<crate::stats::Stats>,
        output: Option<&Path>,
    ) -> Result<(Pipeline, RunningScripts)> {
        #[cfg(feature = "python")]
        if let Some(stage) = self.stage {
            let fallback = match stage.perf_style() {
                true => printer::Sink::Stdout,
                false => printer::Sink::Stderr,
            };
            let sink = printer::Sink::open(output, fallback)?;
            let sink = match stage.perf_style() {
                true => sink.for_perf_script(),
                false => sink,
            };
            let (pipe, pane, handle) = link(stage, pipe, stats)?;
            let router = printer::PaneRouter::spawn(pane, sink)?;
            return Ok((
                pipe,
                RunningScripts {
                    handle: Some((handle, router)),
                },
            ));
        }
        let _ = (stats, output);
        Ok((
            pipe,
            RunningScripts {
                #[cfg(feature = "python")]
                handle: None,
            },
        ))
    }
}

/// Start `stage` on `pipe`'s ordered chunks, with `pipe`'s model for the scripts' lookups.
#[cfg(feature = "python")]
fn link(
    stage: ScriptStage,
    pipe: Pipeline,
    stats: std::sync::Arc<crate::stats::Stats>,
) -> Result<(
    Pipeline,
    crossbeam_channel::Receiver<crate::pane::PaneMsg>,
    ScriptHandle,
)> {
    lookup::set_model(pipe.model().clone());
    let (to, input) = crossbeam_channel::bounded(STAGE_QUEUE);
    let (from, pane, handle) = stage.start(input, stats)?;
    let progress = handle.progress();
    Ok((
        pipe.with_stage(StageLink { to, from, progress }),
        pane,
        handle,
    ))
}

/// Chunks queued between the pipeline and the script stage's pump (which never waits for
/// Python, so this stays short).
#[cfg(feature = "python")]
const STAGE_QUEUE: usize = 64;

/// What the end of the scripts leaves to say, once the terminal is the shell's again.
#[derive(Debug, Default)]
pub struct Finished {
    /// Lines for stderr after "perfwatch: ".
    pub notes: Vec<String>,
    /// The scripts' own last words for stderr, as `[name] line` lines: in the TUI without
    /// `--script-output`, each script's last `on_tick()` lines and what `trace_end()` printed.
    pub epilogue: Vec<u8>,
    /// Script output was lost (a write error on `--script-output`): the exit status says so.
    pub output_lost: bool,
}

impl Finished {
    /// Write the epilogue and the notes on stderr.
    pub fn print(&self) {
        use std::io::Write;
        let mut err = self.epilogue.clone();
        for note in &self.notes {
            let _ = writeln!(err, "perfwatch: {note}");
        }
        crate::output::stderr_bounded(&err);
    }
}

#[cfg(feature = "python")]
fn notes(r: &StageReport) -> Vec<String> {
    let mut notes = Vec::new();
    counted(&mut notes, r.bypassed, |n| {
        format!(
            "the scripts did not see {n} events (they could not keep up, or perfwatch was \
             stopped before they did; shown unfiltered, \
             counted as dropped)"
        )
    });
    counted(&mut notes, r.stuck_events, |n| {
        format!("{n} events were still with a busy script at exit (counted as dropped)")
    });
    counted(&mut notes, r.pane_dropped, |n| {
        format!("{n} script output messages were dropped")
    });
    if r.worker_stuck {
        notes.push(
            "a script was still busy after perfwatch stopped (stuck where an interrupt \
                     cannot reach it, or in a slow trace_end); perfwatch did not wait for it"
                .to_string(),
        );
    }
    notes
}

/// Say `say(n)` when `n` is not zero.
#[cfg(feature = "python")]
fn counted(notes: &mut Vec<String>, n: u64, say: impl FnOnce(u64) -> String) {
    if n > 0 {
        notes.push(say(n));
    }
}

impl RunningScripts {
    /// Stop the scripts (bounded wait: call it once the frontend has stopped, after the TUI
    /// restored the terminal), write out what they still had to say, and return what the
    /// user should know: events the scripts did not see, a script left running, output
    /// that could not be written.
    pub fn finish(self) -> Finished {
        #[cfg(feature = "python")]
        if let Some((handle, router)) = self.handle {
            let r = handle.stop(STOP_WAIT);
            let out = router.finish();
            let mut notes = notes(&r);
            counted(&mut notes, out.not_shown, |n| {
                format!("{n} script output messages were not shown (the panes did not keep up)")
            });
            if out.stuck {
                notes.push(
                    "the scripts' output could not be written within a second (stderr or \
                     --script-output blocked); the rest is lost"
                        .to_string(),
                );
            }
            let output_lost = out.write_error.is_some() || out.stuck;
            match out.write_error {
                Some(_) if out.write_error_said => notes.push(format!(
                    "{} script output messages were not written to --script-output (see the \
                     error above)",
                    out.unwritten
                )),
                Some(e) => notes.push(format!("{e}; {} messages not written", out.unwritten)),
                None => {}
            }
            return Finished {
                notes,
                epilogue: out.epilogue,
                output_lost,
            };
        }
        Finished::default()
    }
}
