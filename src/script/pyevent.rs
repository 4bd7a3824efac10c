//! The `event` object a script's handlers receive, shaped like perf's Python binding.
//!
//! One object is made per event, so it must be cheap: it holds the Rust [`Event`] and computes
//! attributes only when they are read. The common `sample_*` fields and `type` are real
//! getters (fast); the per-type members (`pid`, `ppid`, `comm`, `filename`, ...) go through
//! `__getattr__`, which Python only calls when the normal lookup fails, and raise
//! `AttributeError` for a type that has no such member, as perf's binding does.

use pyo3::exceptions::PyAttributeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::event::{Event, EventKind};

/// One member value.
pub enum Value {
    Int(i64),
    UInt(u64),
    Bool(bool),
    Str(String),
    List(Vec<i128>),
    Strs(Vec<String>),
    Null,
}

impl<'py> IntoPyObject<'py> for Value {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = std::convert::Infallible;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        Ok(match self {
            Value::Int(v) => v.into_pyobject(py)?.into_any(),
            Value::UInt(v) => v.into_pyobject(py)?.into_any(),
            Value::Bool(v) => v.into_pyobject(py)?.to_owned().into_any(),
            Value::Str(v) => v.into_pyobject(py)?.into_any(),
            Value::List(v) => pyo3::types::PyList::new(py, v)
                .map(|l| l.into_any())
                .unwrap_or_else(|_| py.None().into_bound(py)),
            Value::Strs(v) => pyo3::types::PyList::new(py, v)
                .map(|l| l.into_any())
                .unwrap_or_else(|_| py.None().into_bound(py)),
            Value::Null => py.None().into_bound(py),
        })
    }
}

/// Text from the monitored system, as Python `str`: undecodable bytes become U+FFFD. Not
/// escaped: a script compares names exactly; whatever it shows is escaped on the way out.
fn text(b: &[u8]) -> Value {
    Value::Str(String::from_utf8_lossy(b).into_owned())
}

/// The per-type member names of an event, in `str(event)` order.
pub fn member_names(kind: &EventKind) -> &'static [&'static str] {
    match kind {
        EventKind::Sample { .. } => &["ip", "period"],
        EventKind::Fork(_) | EventKind::Exit(_) => &["pid", "ppid", "tid", "ptid", "time"],
        EventKind::Comm { .. } => &["pid", "tid", "comm", "exec"],
        EventKind::Mmap(m) if m.mmap2.is_some() => &[
            "pid",
            "tid",
            "start",
            "len",
            "pgoff",
            "filename",
            "maj",
            "min",
            "ino",
            "ino_generation",
            "prot",
            "flags",
        ],
        EventKind::Mmap(_) => &["pid", "tid", "start", "len", "pgoff", "filename"],
        EventKind::Lost { .. } => &["id", "lost"],
        EventKind::LostSamples { .. } => &["lost"],
        EventKind::Throttle { .. } => &["time", "id", "stream_id"],
        EventKind::Switch { .. } => &["switch_out", "preempt", "next_prev_pid", "next_prev_tid"],
    }
}

/// The value of a per-type member, if this event has it.
pub fn member(ev: &Event, name: &str) -> Option<Value> {
    use Value::*;
    Some(match (&ev.kind, name) {
        (EventKind::Sample { ip, .. }, "ip") => UInt(*ip),
        (EventKind::Sample { period, .. }, "period") => UInt(*period),
        (EventKind::Fork(t) | EventKind::Exit(t), _) => match name {
            "pid" => UInt(t.pid.into()),
            "ppid" => UInt(t.ppid.into()),
            "tid" => UInt(t.tid.into()),
            "ptid" => UInt(t.ptid.into()),
            "time" => UInt(t.time),
            _ => return None,
        },
        (EventKind::Comm { pid, .. }, "pid") => UInt((*pid).into()),
        (EventKind::Comm { tid, .. }, "tid") => UInt((*tid).into()),
        (EventKind::Comm { comm, .. }, "comm") => text(comm),
        (EventKind::Comm { exec, .. }, "exec") => Bool(*exec),
        // Not in str(event) (perf's shape): read when asked.
        (EventKind::Comm { pid, exec, .. }, "argv") => match exec {
            true => super::lookup::exec_argv(*pid, ev.time).map_or(Null, Strs),
            false => Null,
        },
        // Where the command line was read ("exec" or "proc"), and how many bytes were cut.
        (EventKind::Comm { pid, exec, .. }, "argv_source") => match exec {
            true => super::lookup::exec_cmdline(*pid, ev.time)
                .map_or(Null, |c| Str(c.source().name().into())),
            false => Null,
        },
        (EventKind::Comm { pid, exec, .. }, "argv_cut") => match exec {
            true => super::lookup::exec_cmdline(*pid, ev.time).map_or(Null, |c| UInt(c.cut())),
            false => Null,
        },
        (EventKind::Mmap(m), _) => match (name, m.mmap2) {
            ("pid", _) => UInt(m.pid.into()),
            ("tid", _) => UInt(m.tid.into()),
            ("start", _) => UInt(m.start),
            ("len", _) => UInt(m.len),
            ("pgoff", _) => UInt(m.pgoff),
            ("filename", _) => text(&m.filename),
            ("maj", Some(x)) => UInt(x.maj.into()),
            ("min", Some(x)) => UInt(x.min.into()),
            ("ino", Some(x)) => UInt(x.ino),
            ("ino_generation", Some(x)) => UInt(x.ino_generation),
            ("prot", Some(x)) => UInt(x.prot.into()),
            ("flags", Some(x)) => UInt(x.flags.into()),
            _ => return None,
        },
        (EventKind::Lost { id, .. }, "id") => UInt(*id),
        (EventKind::Lost { lost, .. } | EventKind::LostSamples { lost }, "lost") => UInt(*lost),
        (EventKind::Throttle { time, .. }, "time") => UInt(*time),
        (EventKind::Throttle { id, .. }, "id") => UInt(*id),
        (EventKind::Throttle { stream_id, .. }, "stream_id") => UInt(*stream_id),
        (EventKind::Switch { out, .. }, "switch_out") => Bool(*out),
        (EventKind::Switch { preempt, .. }, "preempt") => Bool(*preempt),
        (EventKind::Switch { next_prev, .. }, "next_prev_pid") => {
            Int(next_prev.map_or(-1, |(p, _)| p as i32 as i64))
        }
        (EventKind::Switch { next_prev, .. }, "next_prev_tid") => {
            Int(next_prev.map_or(-1, |(_, t)| t as i32 as i64))
        }
        _ => return field(ev, name),
    })
}

/// A tracepoint field of a sample, as a Python value: int, str (undecodable bytes as
/// U+FFFD), a list of ints for arrays, None for a field the record does not hold.
pub fn field(ev: &Event, name: &str) -> Option<Value> {
    match ev.field(name) {
        Some(v) => Some(field_value(v)),
        // The text the print fmt makes of a field (`prev_state_str`), when it renders.
        None => crate::event::members::text(ev, name).map(|t| text(&t)),
    }
}

fn field_value(v: crate::event::tracepoint::Value<'_>) -> Value {
    use crate::event::tracepoint::Value as F;
    match v {
        F::Int(v) => Value::Int(v),
        F::UInt(v) | F::Hex(v) => Value::UInt(v),
        F::Str(s) => text(s),
        v @ F::Array { .. } => Value::List(v.elements().collect()),
        F::Missing => Value::Null,
    }
}

/// Every tracepoint field of a sample (`common_*` ones too) and the text its print fmt makes
/// of some (`prev_state_str`), by their own names: `event.fields`.
fn fields_dict<'py>(py: Python<'py>, ev: &Event) -> PyResult<Bound<'py, PyDict>> {
    use crate::event::members::Member;
    let d = PyDict::new(py);
    let mut err = None;
    crate::event::members::visit(&ev.kind, true, &mut |name, m| {
        let v = match m {
            Member::Field(v) => field_value(v),
            Member::Text(t) => text(t),
        };
        if let Err(e) = d.set_item(name, v) {
            err.get_or_insert(e);
        }
    });
    match err {
        Some(e) => Err(e),
        None => Ok(d),
    }
}

/// A live event, as a script's handlers see it.
/// Not frozen: the worker moves the next event into an object no script kept, rather than
/// make a new object and copy the event for each.
#[pyclass(name = "Event", module = "perfwatch", subclass)]
pub struct PyEvent {
    pub ev: Event,
}

impl PyEvent {
    /// The symbol of frame `i` of the call chain, when named.
    fn frame_name(&self, i: usize) -> Option<&crate::symbols::Symbolized> {
        self.ev.names()?.frames.get(i)?.as_ref()
    }
}

#[pymethods]
impl PyEvent {
    /// "fork", "exit", "comm", "mmap", "sample", "lost", "lost_samples", "throttle",
    /// "unthrottle", "context_switch".
    #[getter(r#type)]
    fn type_(&self) -> &'static str {
        self.ev.record_type().name()
    }
    #[getter]
    fn sample_cpu(&self) -> u32 {
        self.ev.cpu
    }
    /// -1 when the kernel did not know (as in perf's binding).
    #[getter]
    fn sample_pid(&self) -> i32 {
        self.ev.pid as i32
    }
    #[getter]
    fn sample_tid(&self) -> i32 {
        self.ev.tid as i32
    }
    /// CLOCK_MONOTONIC nanoseconds.
    #[getter]
    fn sample_time(&self) -> u64 {
        self.ev.time
    }
    #[getter]
    fn sample_id(&self) -> u64 {
        self.ev.id
    }
    /// The sample's period; 0 for records that are not samples.
    #[getter]
    fn sample_period(&self) -> u64 {
        self.ev.ip_period().map_or(0, |(_, period)| period)
    }
    /// The name of the sample's event (`"cpu-clock"`, `"sched:sched_switch"`); None for
    /// records that are not samples.
    #[getter]
    fn name(&self) -> Option<&'static str> {
        self.ev.event_name()
    }
    /// The sample's instruction pointer; 0 for records that are not samples.
    #[getter]
    fn sample_ip(&self) -> u64 {
        self.ev.ip_period().map_or(0, |(ip, _)| ip)
    }

    /// The sample's function (`hot_b`), None when unknown or not a sample.
    #[getter]
    fn sym(&self) -> Option<&str> {
        self.ev.sym()?.name()
    }
    /// The binary the sample's address is in (`/usr/bin/prog`, `[kernel.kallsyms]`), None
    /// when not known or not a sample.
    #[getter]
    fn dso(&self) -> Option<&str> {
        Some(self.ev.sym()?.dso().name())
    }
    /// The sample's offset into its function, None when unknown.
    #[getter]
    fn sym_offset(&self) -> Option<u64> {
        self.ev.sym()?.offset()
    }

    /// The sample's call chain (`-g`), innermost first: a list of frames with `ip`, `sym`,
    /// `dso` (None when unknown) and `kernel`; None without one.
    #[getter]
    fn callchain<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        let Some(chain) = self.ev.callchain() else {
            return Ok(None);
        };
        let frames = chain
            .frames()
            .enumerate()
            .map(|(i, f)| Py::new(py, PyFrame::new(f, self.frame_name(i))))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, frames).map(Some)
    }

    /// A sample's tracepoint fields by their own names, with the text its print fmt makes
    /// of some (`prev_state_str`): a dict, empty for other records. The one place a field
    /// named like an attribute of the event (`name`, `type`) is found under its name.
    #[getter]
    fn fields<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        fields_dict(py, &self.ev)
    }

    fn __getattr__(&self, name: &str) -> PyResult<Value> {
        member(&self.ev, name).ok_or_else(|| {
            PyAttributeError::new_err(format!(
                "'{}' event has no attribute '{name}'",
                self.ev.record_type().name()
            ))
        })
    }

    /// Every field of the event as a dict: `type`, the `sample_*` fields and the members of
    /// its type.
    fn as_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("type", self.type_())?;
        d.set_item("sample_cpu", self.sample_cpu())?;
        d.set_item("sample_pid", self.sample_pid())?;
        d.set_item("sample_tid", self.sample_tid())?;
        d.set_item("sample_time", self.sample_time())?;
        d.set_item("sample_id", self.sample_id())?;
        d.set_item("sample_period", self.sample_period())?;
        d.set_item("sample_ip", self.sample_ip())?;
        d.set_item("name", self.name())?;
        if self.ev.sym().is_some() {
            d.set_item("sym", self.sym())?;
            d.set_item("dso", self.dso())?;
            d.set_item("sym_offset", self.sym_offset())?;
        }
        for name in member_names(&self.ev.kind) {
            if let Some(v) = member(&self.ev, name) {
                d.set_item(*name, v)?;
            }
        }
        // The fields under their own names where the dict has no such key yet, and all of
        // them under "fields".
        let fields = fields_dict(py, &self.ev)?;
        if self.ev.event_desc().is_some_and(|e| e.is_tracepoint()) {
            let shown: Vec<String> = {
                let mut v = Vec::new();
                crate::event::members::visit(&self.ev.kind, false, &mut |name, _| {
                    v.push(name.to_string())
                });
                v
            };
            for name in shown {
                if !d.contains(&name)? {
                    if let Some(v) = fields.get_item(&name)? {
                        d.set_item(&name, v)?;
                    }
                }
            }
            d.set_item("fields", fields)?;
        }
        if let Some(chain) = self.ev.callchain() {
            let frames = PyList::empty(py);
            for (i, f) in chain.frames().enumerate() {
                frames.append(PyFrame::new(f, self.frame_name(i)).as_dict(py)?)?;
            }
            d.set_item("callchain", frames)?;
        }
        Ok(d)
    }

    /// The `{ type: ... }` part of the `--plain` line.
    fn __str__(&self) -> String {
        self.ev.body().to_string()
    }

    fn __repr__(&self) -> String {
        format!("<perfwatch.Event {}>", self.ev)
    }
}

/// One frame of a sample's call chain, as a script sees it: attributes (`frame.ip`) or, as in
/// perf script's Python, keys (`frame["ip"]`).
#[pyclass(name = "Frame", module = "perfwatch", frozen)]
pub struct PyFrame {
    ip: u64,
    kernel: bool,
    sym: Option<String>,
    dso: Option<String>,
}

impl PyFrame {
    fn new(f: crate::callchain::Frame, name: Option<&crate::symbols::Symbolized>) -> PyFrame {
        PyFrame {
            ip: f.ip,
            kernel: f.is_kernel(),
            sym: name.and_then(|s| s.name()).map(str::to_owned),
            dso: name.map(|s| s.dso().name().to_owned()),
        }
    }
}

#[pymethods]
impl PyFrame {
    /// The address: the interrupted one for the innermost frame of each context, else a
    /// return address.
    #[getter]
    fn ip(&self) -> u64 {
        self.ip
    }
    /// The function's name, None while unknown.
    #[getter]
    fn sym(&self) -> Option<&str> {
        self.sym.as_deref()
    }
    /// The binary, None while unknown.
    #[getter]
    fn dso(&self) -> Option<&str> {
        self.dso.as_deref()
    }
    /// Kernel (or hypervisor) code rather than user code.
    #[getter]
    fn kernel(&self) -> bool {
        self.kernel
    }

    fn __getitem__<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyAny>> {
        Ok(match key {
            "ip" => self.ip.into_pyobject(py)?.into_any(),
            "sym" => self.sym.as_deref().into_pyobject(py)?.into_any(),
            "dso" => self.dso.as_deref().into_pyobject(py)?.into_any(),
            "kernel" => self.kernel.into_pyobject(py)?.to_owned().into_any(),
            _ => {
                return Err(pyo3::exceptions::PyKeyError::new_err(key.to_string()));
            }
        })
    }

    /// `{"ip": ..., "sym": ..., "dso": ..., "kernel": ...}`.
    fn as_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("ip", self.ip)?;
        d.set_item("sym", self.sym.as_deref())?;
        d.set_item("dso", self.dso.as_deref())?;
        d.set_item("kernel", self.kernel)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        format!(
            "<perfwatch.Frame {:#x}{} {}>",
            self.ip,
            if self.kernel { " [k]" } else { "" },
            crate::text::escape(self.sym.as_deref().unwrap_or("[unknown]").as_bytes())
        )
    }
}
