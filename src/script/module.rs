//! What a script can import and what replaces its `sys.stdout`/`sys.stderr`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::Sender;
use pyo3::prelude::*;
use pyo3::types::PyModule;

use super::pyevent::PyEvent;
use crate::event::RecordType;
use crate::pane::PaneMsg;

/// How long a script's print waits for room in the pane messages' queue before its text
/// is dropped (counted).
pub const PRINT_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

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

    /// Queue a message, waiting at most [`PRINT_WAIT`] for room: the thread that takes
    /// them (the pane router) never waits for the TUI, only for stdout or a file, so a
    /// script that prints faster than those take it (`trace_end()` printing thousands of
    /// lines at once, as stackcollapse.py does) waits as it would under perf script,
    /// while a reader that has stopped reading loses pane text (counted) rather than
    /// stalling the stage for good.
    pub fn send(&self, msg: PaneMsg) {
        let msg = match self.tx.try_send(msg) {
            Ok(()) => return,
            Err(crossbeam_channel::TrySendError::Full(m)) => m,
            Err(crossbeam_channel::TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        if self.tx.send_timeout(msg, PRINT_WAIT).is_err() {
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

/// `perfwatch.comm(pid)`: the name task `pid` had at the time of the event being handled
/// (its latest in `on_tick()`), as perfwatch's process model knows it (from the stream, and
/// from `/proc` for what existed when perfwatch started); None if unknown.
#[pyfunction]
fn comm(pid: u32) -> Option<String> {
    super::lookup::comm(pid)
}

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
