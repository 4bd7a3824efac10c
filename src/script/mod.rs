//! Embedded Python: `--script FILE.py`.
//!
//! A script may define `trace_begin()`, `trace_end()`, `filter(event) -> bool`,
//! `on_event(event)` and `on_tick() -> str | list[str] | None`. The stage that runs them sits
//! between the monitor's channel and the frontend ([`ScriptStage`], in `stage.rs`, explains
//! how it keeps the readers from ever waiting for Python and what "dropped" means there).
//!
//! Everything that touches Python is behind the `python` cargo feature; the file-safety check
//! and the plain-mode pane printer are not, so they build (and are tested) either way.

pub mod printer;
pub mod safety;

#[cfg(feature = "python")]
pub mod module;
#[cfg(feature = "python")]
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

use anyhow::{Context, Result, bail};

use crate::pipeline::Pipeline;
#[cfg(feature = "python")]
use crate::pipeline::StageLink;

/// The one line `--script` gives in a build without Python.
pub const NO_PYTHON: &str = "--script needs the embedded Python interpreter, which this build of \
perfwatch leaves out: rebuild with `cargo build --release --features python` (it is on by default)";

/// True when this build can run scripts.
pub const AVAILABLE: bool = cfg!(feature = "python");

/// Check that every script exists, is a regular file, and (as root) is safe to run; returns
/// the paths to load. Done before anything is started, so that a refusal costs nothing.
pub fn check_scripts(paths: &[PathBuf], force: bool) -> Result<Vec<PathBuf>> {
    if !paths.is_empty() && !AVAILABLE {
        bail!(NO_PYTHON);
    }
    let who = safety::Invoker::current();
    for p in paths {
        check_one(p, force, who)?;
    }
    Ok(paths.to_vec())
}

fn check_one(p: &Path, force: bool, who: safety::Invoker) -> Result<()> {
    let shown = crate::text::escape(p.as_os_str().as_encoded_bytes());
    let meta = std::fs::metadata(p).with_context(|| format!("cannot open script '{shown}'"))?;
    if !meta.is_file() {
        bail!("script '{shown}' is not a regular file");
    }
    if !force {
        safety::check(p, &meta, who)?;
    }
    Ok(())
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
    handle: Option<(ScriptHandle, printer::PanePrinter)>,
}

/// How long perfwatch waits at exit for a script's `trace_end()` (and for a busy handler to
/// notice the interrupt) before leaving it behind.
pub const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl Scripts {
    /// Check and load `--script` files (none: nothing happens). Call before the frontend
    /// takes the terminal: errors carry the Python traceback.
    pub fn load(paths: &[PathBuf], force: bool) -> Result<Scripts> {
        let paths = check_scripts(paths, force)?;
        #[cfg(feature = "python")]
        {
            let stage = if paths.is_empty() {
                None
            } else {
                Some(ScriptStage::load(&paths, StageOptions::default())?)
            };
            Ok(Scripts { stage })
        }
        #[cfg(not(feature = "python"))]
        {
            let _ = paths;
            Ok(Scripts {})
        }
    }

    /// Put the scripts between `pipe`'s model and the TUI: returns the pipeline with the
    /// script stage in it, the scripts' pane messages (None without scripts), and the handle
    /// to stop them with.
    #[allow(clippy::type_complexity)]
    pub fn attach(
        self,
        pipe: Pipeline,
        stats: std::sync::Arc<crate::stats::Stats>,
    ) -> Result<(
        Pipeline,
        Option<crossbeam_channel::Receiver<crate::pane::PaneMsg>>,
        ScriptsHandle,
    )> {
        #[cfg(feature = "python")]
        if let Some(stage) = self.stage {
            let (pipe, pane, handle) = link(stage, pipe, stats)?;
            return Ok((
                pipe,
                Some(pane),
                ScriptsHandle {
                    handle: Some(handle),
                },
            ));
        }
        let _ = stats;
        Ok((
            pipe,
            None,
            ScriptsHandle {
                #[cfg(feature = "python")]
                handle: None,
            },
        ))
    }

    /// The scripts' names in order (pane titles).
    pub fn names(&self) -> Vec<String> {
        #[cfg(feature = "python")]
        if let Some(s) = &self.stage {
            return s.names().to_vec();
        }
        Vec::new()
    }

    /// For `--plain`/`--json`: put the scripts between `pipe`'s model and the writer; their
    /// pane goes to stderr or `output`.
    pub fn attach_plain(
        self,
        pipe: Pipeline,
        stats: std::sync::Arc<crate::stats::Stats>,
        output: Option<&Path>,
    ) -> Result<(Pipeline, RunningScripts)> {
        #[cfg(feature = "python")]
        if let Some(stage) = self.stage {
            let (pipe, pane, handle) = link(stage, pipe, stats)?;
            let printer = printer::PanePrinter::spawn(pane, output)?;
            return Ok((
                pipe,
                RunningScripts {
                    handle: Some((handle, printer)),
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
    module::set_model(pipe.model().clone());
    let (to, input) = crossbeam_channel::bounded(STAGE_QUEUE);
    let (from, pane, handle) = stage.start(input, stats)?;
    Ok((pipe.with_stage(StageLink { to, from }), pane, handle))
}

/// Chunks queued between the pipeline and the script stage's pump (which never waits for
/// Python, so this stays short).
#[cfg(feature = "python")]
const STAGE_QUEUE: usize = 64;

/// The scripts of a TUI run, attached to the stream.
pub struct ScriptsHandle {
    #[cfg(feature = "python")]
    handle: Option<ScriptHandle>,
}

impl ScriptsHandle {
    /// Stop the scripts (bounded wait: call it when the TUI quits) and return what the user
    /// should be told after the terminal is restored.
    pub fn finish(self) -> Vec<String> {
        #[cfg(feature = "python")]
        if let Some(handle) = self.handle {
            return notes(&handle.stop(STOP_WAIT));
        }
        Vec::new()
    }
}

#[cfg(feature = "python")]
fn notes(r: &StageReport) -> Vec<String> {
    let mut notes = Vec::new();
    if r.bypassed > 0 {
        notes.push(format!(
            "the scripts did not see {} events (they could not keep up; shown unfiltered, \
                     counted as dropped)",
            r.bypassed
        ));
    }
    if r.stuck_events > 0 {
        notes.push(format!(
            "{} events were still with a busy script at exit (counted as dropped)",
            r.stuck_events
        ));
    }
    if r.pane_dropped > 0 {
        notes.push(format!(
            "{} script output messages were dropped",
            r.pane_dropped
        ));
    }
    if r.worker_stuck {
        notes.push(
            "a script was still busy after perfwatch stopped (stuck where an interrupt \
                     cannot reach it, or in a slow trace_end); perfwatch did not wait for it"
                .to_string(),
        );
    }
    notes
}

impl RunningScripts {
    /// Stop the scripts (bounded wait) and say what the user should know: events the scripts
    /// did not see, a script left running.
    pub fn finish(self) -> Vec<String> {
        #[cfg(feature = "python")]
        if let Some((handle, printer)) = self.handle {
            let r = handle.stop(STOP_WAIT);
            printer.finish();
            return notes(&r);
        }
        Vec::new()
    }
}
