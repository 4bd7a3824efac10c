//! The Python thread: loads the scripts, then runs their handlers over whole batches.
//!
//! It attaches to the interpreter once per batch (not per event), so that Python threads a
//! script may start get the GIL between batches, and so that the per-event cost is one object
//! and one call per handler.
// Still its own `unsafe` (the Python C API (pyo3's ffi)): not moved into src/sys/ yet (issue 24).
#![allow(unsafe_code)]

use std::ffi::CString;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use pyo3::types::{PyModule, PyString};

use super::ledger::{Counts, add};
use super::lookup;
use super::module::{PaneSink, PaneWriter};
use super::pyevent::PyEvent;
use super::safety::OpenedScript;
use super::shared::{Done, Shared, Work};
use crate::event::Event;
use crate::pane::PaneMsg;
use crate::text::escape_lines;

/// A handler that fails this many times is switched off.
pub const MAX_FAILURES: u32 = 10;

/// The functions perfwatch calls, by the names a script defines them with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handler {
    TraceBegin,
    TraceEnd,
    Filter,
    OnEvent,
    OnTick,
}

impl Handler {
    pub const ALL: [Handler; 5] = [
        Handler::TraceBegin,
        Handler::TraceEnd,
        Handler::Filter,
        Handler::OnEvent,
        Handler::OnTick,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Handler::TraceBegin => "trace_begin",
            Handler::TraceEnd => "trace_end",
            Handler::Filter => "filter",
            Handler::OnEvent => "on_event",
            Handler::OnTick => "on_tick",
        }
    }
}

/// One loaded script.
struct Script {
    name: String,
    handlers: [Option<Py<PyAny>>; 5],
    /// Per handler of [`Handler::ALL`], then the perf script handlers together.
    failures: [u32; 6],
    /// A script written for perf script: its handlers, called as perf calls them.
    perf: Option<super::perfcall::PerfCalls>,
    /// The tracepoints its `SUBSYS__EVENT` handlers are for (`SUBSYS:EVENT`).
    tracepoints: Vec<String>,
    /// The first cut of its `on_tick()` output has been reported.
    tick_cut_said: bool,
}

impl Script {
    fn get(&self, h: Handler) -> Option<&Py<PyAny>> {
        self.handlers[h as usize].as_ref()
    }

    /// It has `filter` or `on_event`.
    fn own_per_event(&self) -> bool {
        self.get(Handler::Filter).is_some() || self.get(Handler::OnEvent).is_some()
    }

    /// It has something to call for every event.
    fn per_event(&self) -> bool {
        self.get(Handler::Filter).is_some()
            || self.get(Handler::OnEvent).is_some()
            || self.perf.is_some()
    }
}

/// What loading found, for the stage.
#[derive(Clone, Debug, Default)]
pub struct Loaded {
    /// A script is written for perf script.
    pub perf_style: bool,
    /// The tracepoints the perf scripts' handlers are for (`SUBSYS:EVENT`, in order).
    pub tracepoints: Vec<String>,
}

/// The Python text of an exception with its traceback (file, line), without the final newline.
pub fn format_exception(py: Python<'_>, e: &PyErr) -> String {
    let formatted = (|| -> PyResult<String> {
        let lines = py.import("traceback")?.call_method1(
            "format_exception",
            (e.get_type(py), e.value(py), e.traceback(py)),
        )?;
        PyString::new(py, "")
            .call_method1("join", (lines,))?
            .extract::<String>()
    })();
    let mut s = formatted.unwrap_or_else(|_| e.to_string());
    while s.ends_with('\n') {
        s.pop();
    }
    s
}

/// Everything the worker owns.
pub struct Worker {
    scripts: Vec<Script>,
    sink: Arc<PaneSink>,
    shared: Arc<Shared>,
    tick: Duration,
    /// Set once any script has `filter` or `on_event` (or is a perf script): otherwise
    /// batches need no Python.
    per_event: bool,
    /// Set once any script has `filter` or `on_event`: events are made into `perfwatch.Event`
    /// objects.
    own_per_event: bool,
    /// The event object of the last event, when no script kept it: the next event goes in
    /// it ([`Worker::wrap`]), so a trivial filter costs no allocation and no copy.
    spare: Option<Py<PyEvent>>,
}

/// Nothing but the worker holds the event object (no script kept it).
// pyo3 0.30 points to `ffi::Py_REFCNT`, which reads the same count through `unsafe`.
#[allow(deprecated)]
fn only_ours(obj: &Bound<'_, PyEvent>) -> bool {
    obj.get_refcnt() == 1
}

/// What a reused event object holds between two events.
fn placeholder() -> Event {
    Event {
        cpu: 0,
        pid: 0,
        tid: 0,
        time: 0,
        id: 0,
        kind: crate::event::EventKind::LostSamples { lost: 0 },
    }
}

/// What the worker thread starts with.
pub struct WorkerArgs {
    /// The scripts, opened and read.
    pub scripts: Vec<OpenedScript>,
    pub names: Arc<Vec<String>>,
    pub sink: Arc<PaneSink>,
    pub shared: Arc<Shared>,
    pub tick: Duration,
    /// Where the outcome of loading goes (with the traceback on failure).
    pub loaded: Sender<Result<Loaded, String>>,
    /// `sys.argv[1:]` of the scripts written for perf script (`--script-arg`).
    pub script_args: Vec<String>,
    pub work: Receiver<Work>,
    pub results: Sender<Done>,
}

/// Run on the worker thread: load, report, then serve batches until the pump goes away or
/// the stage is stopped.
pub fn run(args: WorkerArgs) {
    let WorkerArgs {
        scripts,
        names,
        sink,
        shared,
        tick,
        loaded,
        work,
        results,
        script_args,
    } = args;
    let scripts = Python::attach(|py| load_all(py, &scripts, &names, &sink, &shared, &script_args));
    let scripts = match scripts {
        Ok(s) => s,
        Err(e) => {
            let _ = loaded.send(Err(e));
            return;
        }
    };
    let info = Loaded {
        perf_style: scripts.iter().any(|s| s.perf.is_some()),
        tracepoints: scripts
            .iter()
            .flat_map(|s| s.tracepoints.iter().cloned())
            .collect(),
    };
    let per_event = scripts.iter().any(Script::per_event);
    let own_per_event = scripts.iter().any(Script::own_per_event);
    let mut w = Worker {
        scripts,
        sink,
        shared,
        tick,
        per_event,
        own_per_event,
        spare: None,
    };
    if let Err(e) = Python::attach(|py| w.trace_begin(py)) {
        let _ = loaded.send(Err(e));
        return;
    }
    let _ = loaded.send(Ok(info));
    drop(loaded);
    w.serve(work, results);
    w.shared.busy_since.store(0, Ordering::Release);
    Python::attach(|py| {
        // A KeyboardInterrupt aimed at a handler that has already returned must not hit
        // trace_end.
        // SAFETY: clearing (NULL) the async exception of this thread, with the GIL held.
        unsafe {
            pyo3::ffi::PyThreadState_SetAsyncExc(
                pyo3::ffi::PyThread_get_thread_ident() as _,
                std::ptr::null_mut(),
            );
        }
        w.side_records(py);
        w.call_all(py, Handler::TraceEnd);
        flush_std(py);
    });
}

fn flush_std(py: Python<'_>) {
    if let Ok(sys) = py.import("sys") {
        for s in ["stdout", "stderr"] {
            if let Ok(f) = sys.getattr(s) {
                let _ = f.call_method0("flush");
            }
        }
    }
}

fn load_all(
    py: Python<'_>,
    scripts: &[OpenedScript],
    names: &[String],
    sink: &Arc<PaneSink>,
    shared: &Shared,
    script_args: &[String],
) -> Result<Vec<Script>, String> {
    let setup = || -> PyResult<()> {
        let sys = py.import("sys")?;
        sys.setattr("stdout", Py::new(py, PaneWriter::new(sink.clone(), false))?)?;
        sys.setattr("stderr", Py::new(py, PaneWriter::new(sink.clone(), true))?)?;
        // The terminal's input belongs to the TUI: input() raises instead of eating keys.
        sys.setattr("stdin", py.None())?;
        let argv: Vec<String> = scripts
            .iter()
            .map(|s| s.path.display().to_string())
            .collect();
        sys.setattr("argv", argv)?;
        Ok(())
    };
    setup().map_err(|e| {
        format!(
            "cannot set up the Python interpreter: {}",
            escape_lines(&format_exception(py, &e))
        )
    })?;
    // SAFETY: reading this thread's identity; the GIL is held.
    let ident = unsafe { pyo3::ffi::PyThread_get_thread_ident() };
    shared.py_thread.store(ident as u64, Ordering::Release);

    let mut loaded = Vec::with_capacity(scripts.len());
    for (i, (script, name)) in scripts.iter().zip(names).enumerate() {
        sink.current.store(i, Ordering::Relaxed);
        loaded.push(load_one(py, i, script, name, script_args)?);
    }
    Ok(loaded)
}

/// Compile and run a script's source (read from the descriptor that was checked, never from
/// its path again) as a fresh module.
fn load_one(
    py: Python<'_>,
    index: usize,
    script: &OpenedScript,
    name: &str,
    script_args: &[String],
) -> Result<Script, String> {
    let path = &script.path;
    let shown = crate::text::escape(path.as_os_str().as_encoded_bytes());
    let source = CString::new(script.source.clone())
        .map_err(|_| format!("cannot load script '{shown}': it contains a NUL byte"))?;
    let file_name = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("cannot load script '{shown}': its path contains a NUL byte"))?;
    let stem: String = name
        .trim_end_matches(".py")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if let Some(dir) = &script.import_dir {
        // Helpers beside the script are importable: its directory passed the same checks
        // as the script, and nobody else can add a module to it.
        let _ = py
            .import("sys")
            .and_then(|s| s.getattr("path"))
            .and_then(|p| p.call_method1("insert", (0, dir.as_os_str())));
    }
    // Tracebacks show the lines that were compiled, not whatever the path holds by then.
    let _ = seed_linecache(py, &file_name, &script.source);
    // A script written for perf script gets perf script's environment before any of it runs
    // (one that mixes both conventions is refused).
    let mut perf =
        super::perfstyle::from_source(py, &script.source, &file_name.to_string_lossy(), &shown)?;
    if perf.is_some() {
        perf_env(py, path, script_args, &shown)?;
    }
    // perf runs a script as `__main__` (flamegraph.py binds its handlers under `if __name__
    // == "__main__":`); perfwatch's own scripts get a module name of their own.
    let module_name = match perf.is_some() {
        true => "__main__".to_string(),
        false => format!("perfwatch_script_{index}_{stem}"),
    };
    let module_name =
        CString::new(module_name).map_err(|_| format!("cannot load script '{shown}': bad name"))?;
    // A fresh module: from_code would run the code in an existing one of the same name.
    let _ = py
        .import("sys")
        .and_then(|s| s.getattr("modules"))
        .and_then(|m| m.call_method1("pop", (module_name.to_str().unwrap_or(""), py.None())));
    let m = PyModule::from_code(py, &source, &file_name, &module_name).map_err(|e| {
        format!(
            "script '{shown}' failed to load:\n{}",
            escape_lines(&format_exception(py, &e))
        )
    })?;
    let mut handlers: [Option<Py<PyAny>>; 5] = Default::default();
    for h in Handler::ALL {
        match m.getattr_opt(h.name()) {
            Ok(Some(f)) if f.is_callable() => handlers[h as usize] = Some(f.unbind()),
            Ok(Some(_)) => {
                return Err(format!(
                    "script '{shown}': '{}' is defined but is not a function",
                    h.name()
                ));
            }
            Ok(None) => {}
            Err(e) => {
                return Err(format!(
                    "script '{shown}': {}",
                    escape_lines(&format_exception(py, &e))
                ));
            }
        }
    }
    if perf.is_none() {
        // Handlers made at import time, without a `def` of their own.
        perf = super::perfstyle::from_module(&m, &shown)?;
        if perf.is_some() {
            perf_env(py, path, script_args, &shown)?;
        }
    }
    let tracepoints = perf
        .as_ref()
        .map(|p| p.tracepoints.clone())
        .unwrap_or_default();
    let perf = match perf {
        Some(p) => {
            if let Some(note) = super::perfstyle::unserved_note(&shown, &p) {
                eprintln!("perfwatch: note: {note}");
            }
            // perf script calls neither of these: they are perfwatch's only.
            handlers[Handler::Filter as usize] = None;
            handlers[Handler::OnTick as usize] = None;
            let fail = |e: &PyErr| {
                format!(
                    "script '{shown}': {}",
                    escape_lines(&format_exception(py, e))
                )
            };
            let mut calls = super::perfcall::PerfCalls::new(py, &m).map_err(|e| fail(&e))?;
            calls
                .define_ahead(py, &tracepoints)
                .map_err(|(name, e)| format!("{name}(): {}", fail(&e)))?;
            Some(calls)
        }
        None => None,
    };
    if handlers.iter().all(Option::is_none) && perf.is_none() {
        return Err(format!(
            "script '{shown}' defines none of trace_begin(), trace_end(), filter(event), \
             on_event(event), on_tick(): there is nothing for perfwatch to call"
        ));
    }
    Ok(Script {
        name: name.to_string(),
        handlers,
        failures: [0; 6],
        perf,
        tracepoints,
        tick_cut_said: false,
    })
}

/// perf script's environment for the script at `path` (once per run, the library note).
fn perf_env(
    py: Python<'_>,
    path: &std::path::Path,
    args: &[String],
    shown: &str,
) -> Result<(), String> {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        if let Some(note) = super::perfenv::library_note() {
            eprintln!("perfwatch: note: {note}");
        }
    });
    super::perfenv::prepare(py, path, args).map_err(|e| {
        format!(
            "cannot give script '{shown}' perf script's environment: {}",
            escape_lines(&format_exception(py, &e))
        )
    })
}

/// Put the compiled source in `linecache` under the script's file name, so that a traceback
/// never reads the path again (it may lead somewhere else by then).
fn seed_linecache(py: Python<'_>, file_name: &std::ffi::CStr, source: &[u8]) -> PyResult<()> {
    let text = String::from_utf8_lossy(source);
    let lines: Vec<String> = text.split_inclusive('\n').map(str::to_string).collect();
    let name = file_name.to_string_lossy();
    let entry = (text.len(), py.None(), lines, name.as_ref());
    py.import("linecache")?
        .getattr("cache")?
        .set_item(name.as_ref(), entry)
}

impl Worker {
    fn trace_begin(&mut self, py: Python<'_>) -> Result<(), String> {
        for (i, s) in self.scripts.iter().enumerate() {
            if let Some(f) = s.get(Handler::TraceBegin) {
                self.sink.current.store(i, Ordering::Relaxed);
                if let Err(e) = f.call0(py) {
                    return Err(format!(
                        "trace_begin() of script '{}' failed:\n{}",
                        crate::text::escape(s.name.as_bytes()),
                        escape_lines(&format_exception(py, &e))
                    ));
                }
            }
        }
        flush_std(py);
        Ok(())
    }

    fn serve(&mut self, work: Receiver<Work>, results: Sender<Done>) {
        let mut next_tick = Instant::now() + self.tick;
        loop {
            if self.shared.stopping() {
                break;
            }
            let wait = next_tick.saturating_duration_since(Instant::now());
            match work.recv_timeout(wait) {
                Ok((seq, mut events)) => {
                    let mut unseen = Vec::new();
                    if self.per_event && !events.is_empty() {
                        self.shared.mark_busy();
                        unseen = Python::attach(|py| {
                            self.side_records(py);
                            self.process(py, &mut events)
                        });
                        self.shared.mark_idle();
                        self.shared.done(unseen.iter().map(|&(_, n)| n).sum());
                    } else {
                        self.shared.done(events.len() as u64);
                    }
                    if results.send((seq, events, unseen)).is_err() {
                        break;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if Instant::now() >= next_tick {
                self.shared.mark_busy();
                Python::attach(|py| {
                    self.side_records(py);
                    self.on_tick(py)
                });
                self.shared.mark_idle();
                next_tick = Instant::now() + self.tick;
            }
        }
    }

    /// Run the filters, then `on_event`, over one batch, keeping the events that passed.
    /// Returns how many events per CPU were passed on without the script seeing them (the
    /// stage is stopping); the pump counts them, once.
    fn process(&mut self, py: Python<'_>, batch: &mut Vec<Event>) -> Counts {
        let mut unseen = Vec::new();
        let events = std::mem::take(batch);
        let mut kept = Vec::with_capacity(events.len());
        let mut it = events.into_iter();
        self.forget_comms();
        for ev in it.by_ref() {
            if !matches!(ev.kind, crate::event::EventKind::Sample { .. }) {
                self.forget_comms();
            }
            if self.shared.stopping() {
                // Stopping: what is left passes unfiltered rather than waiting for Python.
                add(&mut unseen, &[(ev.cpu, 1)]);
                kept.push(ev);
                break;
            }
            // Lookups (perfwatch.comm) answer as of this event.
            lookup::set_event_time(ev.time);
            self.shared.done(1);
            // perfwatch's event object, only for scripts of perfwatch's own convention: it
            // holds the event while the handlers run, and gives it back after them.
            let (ev, obj) = if self.own_per_event {
                match self.wrap(py, ev) {
                    Ok(o) => (None, Some(o)),
                    Err(ev) => {
                        kept.push(ev);
                        continue;
                    }
                }
            } else {
                (Some(ev), None)
            };
            let mut keep = true;
            for i in 0..self.scripts.len() {
                let (Some(f), Some(obj)) = (self.scripts[i].get(Handler::Filter), &obj) else {
                    continue;
                };
                self.sink.current.store(i, Ordering::Relaxed);
                match f.call1(py, (obj,)).and_then(|r| r.is_truthy(py)) {
                    Ok(true) => {}
                    Ok(false) => {
                        keep = false;
                        break;
                    }
                    Err(e) => self.fail(py, i, Handler::Filter, &e),
                }
            }
            if keep {
                for i in 0..self.scripts.len() {
                    self.sink.current.store(i, Ordering::Relaxed);
                    if let Some(p) = self.scripts[i].perf.as_mut() {
                        let called = match (&ev, &obj) {
                            (Some(ev), _) => p.call(py, ev),
                            // Only the worker borrows it mutably, never across a call.
                            (None, Some(obj)) => match obj.try_borrow() {
                                Ok(held) => p.call(py, &held.ev),
                                Err(_) => Ok(()),
                            },
                            (None, None) => Ok(()),
                        };
                        if let Err((name, e)) = called {
                            self.fail_perf(py, i, &name, &e);
                        }
                        continue;
                    }
                    let (Some(f), Some(obj)) = (self.scripts[i].get(Handler::OnEvent), &obj) else {
                        continue;
                    };
                    if let Err(e) = f.call1(py, (obj,)) {
                        self.fail(py, i, Handler::OnEvent, &e);
                    }
                }
            }
            let ev = match (ev, obj) {
                (Some(ev), _) => ev,
                (None, Some(obj)) => self.unwrap(obj),
                (None, None) => continue,
            };
            if keep {
                kept.push(ev);
            }
        }
        lookup::set_event_time(u64::MAX);
        for ev in it {
            add(&mut unseen, &[(ev.cpu, 1)]);
            kept.push(ev);
        }
        *batch = kept;
        unseen
    }

    /// A recording's records beside the stream (perf stat's counts, AUX trace errors) to the
    /// perf scripts' hooks for them, in the file's order (see `perfstat`).
    fn side_records(&mut self, py: Python<'_>) {
        if !crate::record_file::side::wanted() {
            return;
        }
        let (records, over) = crate::record_file::side::take();
        if over > 0 {
            eprintln!(
                "perfwatch: {over} perf stat or AUX trace error records were not kept for the \
                 scripts (more than {} at once)",
                crate::record_file::side::MAX_KEPT
            );
        }
        if records.is_empty() {
            return;
        }
        for i in 0..self.scripts.len() {
            self.sink.current.store(i, Ordering::Relaxed);
            let Some(p) = self.scripts[i].perf.as_mut() else {
                continue;
            };
            if !p.stat.wanted() {
                continue;
            }
            if let Err((name, e)) = p.stat.feed(py, &records) {
                self.fail_perf(py, i, &name, &e);
            }
        }
        flush_std(py);
    }

    /// The perf scripts' thread names are made anew from here on (see `PerfCalls::comms`).
    fn forget_comms(&mut self) {
        for s in &mut self.scripts {
            if let Some(p) = s.perf.as_mut() {
                p.forget_comms();
            }
        }
    }

    /// The event object for `ev`: the spare one when nothing but the worker holds it (no
    /// allocation, no copy of the event), else a new one. `Err` gives the event back.
    fn wrap<'py>(&mut self, py: Python<'py>, ev: Event) -> Result<Bound<'py, PyEvent>, Event> {
        let obj = match self.spare.take() {
            Some(spare) if only_ours(spare.bind(py)) => spare.into_bound(py),
            // Made empty, so that a failure gives the event back.
            _ => match Bound::new(py, PyEvent { ev: placeholder() }) {
                Ok(o) => o,
                Err(_) => return Err(ev),
            },
        };
        match obj.try_borrow_mut() {
            Ok(mut held) => held.ev = ev,
            Err(_) => return Err(ev),
        }
        Ok(obj)
    }

    /// The event back from its object after the handlers: taken out when no script kept
    /// the object (which becomes the spare), copied when one did (the object keeps its
    /// event, as a script that stores events expects).
    fn unwrap(&mut self, obj: Bound<'_, PyEvent>) -> Event {
        if only_ours(&obj)
            && let Ok(mut held) = obj.try_borrow_mut()
        {
            let ev = std::mem::replace(&mut held.ev, placeholder());
            drop(held);
            self.spare = Some(obj.unbind());
            return ev;
        }
        match obj.try_borrow() {
            Ok(held) => held.ev.clone(),
            // Only the worker borrows it mutably, and not now.
            Err(_) => placeholder(),
        }
    }

    fn on_tick(&mut self, py: Python<'_>) {
        for i in 0..self.scripts.len() {
            let Some(f) = self.scripts[i].get(Handler::OnTick) else {
                continue;
            };
            self.sink.current.store(i, Ordering::Relaxed);
            let lines = f.call0(py).and_then(|r| tick_lines(r.bind(py)));
            match lines {
                Ok(Some(TickLines { mut lines, cut })) => {
                    let s = &mut self.scripts[i];
                    if cut {
                        lines.push(format!(
                            "[perfwatch: cut here; on_tick() may return at most \
                             {MAX_TICK_LINES} lines and {MAX_TICK_CHARS} characters]"
                        ));
                        if !std::mem::replace(&mut s.tick_cut_said, true) {
                            self.sink.send(PaneMsg::Text {
                                script: s.name.clone(),
                                text: format!(
                                    "on_tick() returned more than {MAX_TICK_LINES} lines or \
                                     {MAX_TICK_CHARS} characters; perfwatch keeps the first \
                                     ones and does not read the rest"
                                ),
                                is_error: true,
                            });
                        }
                    }
                    self.sink.send(PaneMsg::Lines {
                        script: s.name.clone(),
                        lines,
                    });
                }
                Ok(None) => {}
                Err(e) => self.fail(py, i, Handler::OnTick, &e),
            }
        }
        flush_std(py);
    }

    fn call_all(&mut self, py: Python<'_>, h: Handler) {
        for i in 0..self.scripts.len() {
            let Some(f) = self.scripts[i].get(h) else {
                continue;
            };
            self.sink.current.store(i, Ordering::Relaxed);
            if let Err(e) = f.call0(py) {
                self.fail(py, i, h, &e);
            }
        }
    }

    /// Show a handler's exception in the script's pane; switch the handler off after
    /// [`MAX_FAILURES`].
    fn fail(&mut self, py: Python<'_>, i: usize, h: Handler, e: &PyErr) {
        let tb = format_exception(py, e);
        let s = &mut self.scripts[i];
        s.failures[h as usize] += 1;
        let n = s.failures[h as usize];
        let interrupted = e.is_instance_of::<PyKeyboardInterrupt>(py) && self.shared.stopping();
        let what = if interrupted {
            format!("{}() interrupted: perfwatch is stopping", h.name())
        } else if h == Handler::Filter {
            format!(
                "{}() raised an exception; the event passes unfiltered",
                h.name()
            )
        } else {
            format!("{}() raised an exception", h.name())
        };
        self.sink.send(PaneMsg::Text {
            script: s.name.clone(),
            text: format!("{what}\n{tb}"),
            is_error: true,
        });
        if n >= MAX_FAILURES && s.handlers[h as usize].is_some() {
            s.handlers[h as usize] = None;
            self.sink.send(PaneMsg::Text {
                script: s.name.clone(),
                text: format!(
                    "{}() failed {n} times; perfwatch has switched it off for the rest of the run",
                    h.name()
                ),
                is_error: true,
            });
            self.per_event = self.scripts.iter().any(Script::per_event);
            self.own_per_event = self.scripts.iter().any(Script::own_per_event);
        }
    }
}

impl Worker {
    /// Show a perf script handler's exception in the script's pane (perf script would stop
    /// at the first); stop calling the script's perf handlers after [`MAX_FAILURES`].
    fn fail_perf(&mut self, py: Python<'_>, i: usize, name: &str, e: &PyErr) {
        let tb = format_exception(py, e);
        let s = &mut self.scripts[i];
        s.failures[5] += 1;
        let n = s.failures[5];
        let interrupted = e.is_instance_of::<PyKeyboardInterrupt>(py) && self.shared.stopping();
        let what = if interrupted {
            format!("{name}() interrupted: perfwatch is stopping")
        } else {
            format!("{name}() raised an exception")
        };
        self.sink.send(PaneMsg::Text {
            script: s.name.clone(),
            text: format!("{what}\n{tb}"),
            is_error: true,
        });
        if n >= MAX_FAILURES && s.perf.is_some() {
            s.perf = None;
            self.sink.send(PaneMsg::Text {
                script: s.name.clone(),
                text: format!(
                    "its perf script handlers failed {n} times; perfwatch has switched them off \
                     for the rest of the run"
                ),
                is_error: true,
            });
            self.per_event = self.scripts.iter().any(Script::per_event);
        }
    }
}

/// Lines one `on_tick()` may give; the rest of the iterable is never consumed.
pub const MAX_TICK_LINES: usize = 1000;
/// Characters one `on_tick()` may give, all lines together.
pub const MAX_TICK_CHARS: usize = 256 * 1024;

/// What one `on_tick()` gave, cut to the limits.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TickLines {
    pub lines: Vec<String>,
    /// More lines or characters were offered than the limits keep.
    pub cut: bool,
}

impl TickLines {
    /// Room left, in characters.
    fn room(&self, used: usize) -> usize {
        MAX_TICK_CHARS.saturating_sub(used)
    }
}

/// The first `n` characters of a Python str (sliced in Python: a huge string is never
/// converted whole).
fn head<'py>(s: &Bound<'py, PyString>, n: usize) -> PyResult<(String, bool)> {
    let len = s.len()?;
    if len <= n {
        return Ok((s.to_cow()?.into_owned(), false));
    }
    let part = s.get_item(pyo3::types::PySlice::new(s.py(), 0, n as isize, 1))?;
    Ok((part.cast::<PyString>()?.to_cow()?.into_owned(), true))
}

/// What `on_tick()` returned, as pane lines: None keeps the pane as it is; a str is split into
/// lines; any other iterable gives one line per item (`str()` of it), taken lazily: an
/// endless generator is read up to the limits ([`MAX_TICK_LINES`], [`MAX_TICK_CHARS`]) and
/// no further.
fn tick_lines(r: &Bound<'_, PyAny>) -> PyResult<Option<TickLines>> {
    if r.is_none() {
        return Ok(None);
    }
    let mut out = TickLines::default();
    let mut used = 0usize;
    if let Ok(s) = r.cast::<PyString>() {
        let (text, cut) = head(s, MAX_TICK_CHARS)?;
        out.cut = cut;
        for l in text.lines() {
            if out.lines.len() == MAX_TICK_LINES {
                out.cut = true;
                break;
            }
            out.lines.push(l.to_string());
        }
        return Ok(Some(out));
    }
    for x in r.try_iter()? {
        let x = x?;
        if out.lines.len() == MAX_TICK_LINES || out.room(used) == 0 {
            // One item past the limit: there was more.
            out.cut = true;
            break;
        }
        let s = x.str()?;
        let (line, cut) = head(&s, out.room(used))?;
        used += line.chars().count();
        out.lines.push(line);
        if cut {
            out.cut = true;
            break;
        }
    }
    Ok(Some(out))
}
