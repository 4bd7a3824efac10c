//! What a script can import and what replaces its `sys.stdout`/`sys.stderr`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crossbeam_channel::Sender;
use pyo3::prelude::*;
use pyo3::types::PyModule;

use super::pyevent::PyEvent;
use crate::event::{Event, EventKind, RecordType};
use crate::pane::PaneMsg;

/// Tasks the table remembers at most; past this, the oldest half is forgotten (the
/// `/proc` fall-back still answers for live tasks).
const MAX_TASKS: usize = 1 << 16;

/// Task names (by tid) as the script stage has seen them in COMM and FORK records, for
/// `perfwatch.comm(pid)`. Kept by the stage itself, in event order, so that a handler sees
/// the name the task had at the time of the event it is handling, even after the task has
/// exited and left `/proc`.
#[derive(Default)]
pub struct TaskTable {
    comm: HashMap<u32, (u64, String)>,
    seq: u64,
}

impl TaskTable {
    fn set(&mut self, tid: u32, comm: String) {
        if self.comm.len() >= MAX_TASKS {
            let mut ages: Vec<u64> = self.comm.values().map(|v| v.0).collect();
            ages.sort_unstable();
            let cut = ages[ages.len() / 2];
            self.comm.retain(|_, v| v.0 > cut);
        }
        self.seq += 1;
        self.comm.insert(tid, (self.seq, comm));
    }

    /// Learn from an event before the handlers see it: names from COMM, a child's name from
    /// its parent at FORK.
    pub fn before(&mut self, ev: &Event) {
        match &ev.kind {
            EventKind::Comm { tid, comm, .. } => {
                self.set(*tid, String::from_utf8_lossy(comm).into_owned())
            }
            EventKind::Fork(t) => {
                if let Some(name) = self.get(t.ptid).or_else(|| self.get(t.ppid)) {
                    self.set(t.tid, name);
                }
            }
            _ => {}
        }
    }

    /// Forget an exited task after the handlers have seen its EXIT.
    pub fn after(&mut self, ev: &Event) {
        if let EventKind::Exit(t) = &ev.kind {
            self.comm.remove(&t.tid);
        }
    }

    fn get(&self, tid: u32) -> Option<String> {
        self.comm.get(&tid).map(|v| v.1.clone())
    }
}

/// The one task table: the Python interpreter, and so the stage, is one per process.
pub fn tasks() -> &'static Mutex<TaskTable> {
    static T: OnceLock<Mutex<TaskTable>> = OnceLock::new();
    T.get_or_init(Default::default)
}

/// `perfwatch.comm(pid)`: the task's name as perfwatch last saw it, else from `/proc`, else
/// None.
#[pyfunction]
fn comm(pid: u32) -> Option<String> {
    let known = tasks().lock().ok().and_then(|t| t.get(pid));
    known.or_else(|| {
        std::fs::read(format!("/proc/{pid}/comm"))
            .ok()
            .map(|b| String::from_utf8_lossy(b.strip_suffix(b"\n").unwrap_or(&b)).into_owned())
    })
}

/// Where print() output goes: the pane of the script that is running.
pub struct PaneSink {
    pub tx: Sender<PaneMsg>,
    pub names: Arc<Vec<String>>,
    /// Index of the script whose code is running now.
    pub current: Arc<AtomicUsize>,
    /// Messages dropped because the frontend did not take them fast enough.
    pub dropped: Arc<AtomicU64>,
}

impl PaneSink {
    pub fn name(&self) -> String {
        self.names
            .get(self.current.load(Ordering::Relaxed))
            .cloned()
            .unwrap_or_else(|| "script".to_string())
    }

    /// Queue a message without waiting: a frontend that falls behind loses pane text (counted),
    /// never stalls the stage.
    pub fn send(&self, msg: PaneMsg) {
        if self.tx.try_send(msg).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn text(&self, text: String, is_error: bool) {
        self.send(PaneMsg::Text {
            script: self.name(),
            text,
            is_error,
        });
    }
}

/// The object that replaces `sys.stdout` / `sys.stderr`: whole lines go to the script pane
/// (or, in plain mode, to stderr / `--script-output`), never onto the terminal itself.
#[pyclass(module = "perfwatch")]
pub struct PaneWriter {
    sink: Arc<PaneSink>,
    is_error: bool,
    buf: Mutex<String>,
}

impl PaneWriter {
    pub fn new(sink: Arc<PaneSink>, is_error: bool) -> PaneWriter {
        PaneWriter {
            sink,
            is_error,
            buf: Mutex::new(String::new()),
        }
    }
}

#[pymethods]
impl PaneWriter {
    fn write(&self, s: &str) -> usize {
        let Ok(mut buf) = self.buf.lock() else {
            return 0;
        };
        buf.push_str(s);
        if let Some(i) = buf.rfind('\n') {
            let rest = buf.split_off(i + 1);
            let mut lines = std::mem::replace(&mut *buf, rest);
            lines.pop();
            self.sink.text(lines, self.is_error);
        }
        s.chars().count()
    }

    fn flush(&self) {
        if let Ok(mut buf) = self.buf.lock() {
            if !buf.is_empty() {
                let text = std::mem::take(&mut *buf);
                self.sink.text(text, self.is_error);
            }
        }
    }

    fn isatty(&self) -> bool {
        false
    }

    fn writable(&self) -> bool {
        true
    }

    #[getter]
    fn encoding(&self) -> &'static str {
        "utf-8"
    }
}

/// The constants scripts compare `event.type` with.
pub const RECORD_CONSTANTS: [(&str, RecordType); 10] = [
    ("RECORD_SAMPLE", RecordType::Sample),
    ("RECORD_FORK", RecordType::Fork),
    ("RECORD_EXIT", RecordType::Exit),
    ("RECORD_COMM", RecordType::Comm),
    ("RECORD_MMAP", RecordType::Mmap),
    ("RECORD_LOST", RecordType::Lost),
    ("RECORD_LOST_SAMPLES", RecordType::LostSamples),
    ("RECORD_THROTTLE", RecordType::Throttle),
    ("RECORD_UNTHROTTLE", RecordType::Unthrottle),
    ("RECORD_SWITCH", RecordType::Switch),
];

/// Build the `perfwatch` module and register it in `sys.modules`, so that `import perfwatch`
/// works from any script.
pub fn install(py: Python<'_>) -> PyResult<()> {
    let m = PyModule::new(py, "perfwatch")?;
    m.add(
        "__doc__",
        "perfwatch's API for scripts: record type constants and task names.",
    )?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    for (name, t) in RECORD_CONSTANTS {
        m.add(name, t.name())?;
    }
    m.add(
        "RECORD_TYPES",
        RecordType::ALL.iter().map(|t| t.name()).collect::<Vec<_>>(),
    )?;
    m.add_class::<PyEvent>()?;
    m.add_function(wrap_pyfunction!(comm, &m)?)?;
    py.import("sys")?
        .getattr("modules")?
        .set_item("perfwatch", m)?;
    Ok(())
}
