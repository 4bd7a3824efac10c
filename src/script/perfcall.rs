//! Calling a perf script's handlers the way `perf script -s` calls them
//! (`tools/perf/util/scripting-engines/trace-event-python.c`, perf 6.1):
//!
//! - a tracepoint sample goes to `SUBSYS__EVENT(event_name, context, common_cpu,
//!   common_secs, common_nsecs, common_pid, common_comm, common_callchain, FIELDS...)`, its
//!   fields in format order (the `common_*` ones left out): integers as `int`, text as `str`
//!   when it ends in a NUL and is printable up to the first one, else (and every other
//!   array) as `bytearray` of the field's bytes; one more argument, the `perf_sample_dict`,
//!   when the handler's code takes exactly one more;
//! - a tracepoint without a handler goes to `trace_unhandled(event_name, context,
//!   event_fields_dict[, perf_sample_dict])`;
//! - any other sample goes to `process_event(param_dict)`;
//! - the flag and symbolic values of a tracepoint's print fmt are defined through the
//!   script's own `define_flag_field`, `define_flag_value`, `define_symbolic_field` and
//!   `define_symbolic_value` (which `from Core import *` brings in): before `trace_begin()`
//!   for the tracepoints its handlers name, and for any other on its first record, as perf
//!   does for all.
//!
//! - a context switch record (`--switch`) goes to `context_switch(ts, cpu, pid, tid, np_pid,
//!   np_tid, machine_pid, out, out_preempt, sample_machine_pid, vcpu)` (perf 6.1's 11
//!   arguments; the host's machine pid -1, a guest's pid and vcpu 0).
//!
//! - a throttle record goes to `throttle(time, id, stream_id, cpu, pid, tid)`, an unthrottle
//!   one to `unthrottle(...)` with the same arguments.
//!
//! Other side-band records (fork, exit, comm, mmap, lost) call nothing, as in perf.

use std::collections::{HashMap, HashSet};

use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyDict, PyList, PyModule, PyString, PyTuple};

use super::perfdict::Dicts;

use crate::event::tracepoint::{Field, FieldType, Format, Value};
use crate::event::{Event, EventDesc, EventKind};

/// A handler and whether it takes the `perf_sample_dict` too.
struct Callable {
    f: Py<PyAny>,
    with_sample: bool,
    /// It reads its `common_callchain` argument (or may: see [`reads_argument`]); when it
    /// surely does not, and takes no sample dict (which holds the chain too), it gets an
    /// empty list instead of a list of a dict per frame that nothing would read.
    chain: bool,
}

/// Whether handler `f` may read its positional argument `index`: false only for a plain
/// Python function whose code never loads the parameter (no `LOAD_FAST`-like instruction
/// names it, no inner function captures it) and that calls nothing that could read its
/// frame's locals (`locals`, `vars`, `eval`, `exec`, `sys._getframe`,
/// `inspect.currentframe`, a tracer). Anything else, or any doubt, is true.
fn reads_argument(f: &Bound<'_, PyAny>, index: usize) -> bool {
    const CODE: &std::ffi::CStr = cr#"
def reads(f, index):
    import dis, types
    if type(f) is not types.FunctionType:
        return True
    c = f.__code__
    if index >= c.co_argcount:
        return True
    name = c.co_varnames[index]
    if name in c.co_cellvars:
        return True
    if set(c.co_names) & {"locals", "vars", "eval", "exec", "_getframe", "currentframe",
                          "settrace", "setprofile", "f_locals"}:
        return True
    for ins in dis.get_instructions(c):
        if "FAST" in ins.opname and ins.opname != "STORE_FAST":
            v = ins.argval
            if v == name or (isinstance(v, tuple) and name in v):
                return True
    return False
"#;
    let py = f.py();
    PyModule::from_code(py, CODE, c"perfwatch_reads.py", c"perfwatch_reads")
        .and_then(|m| m.getattr("reads")?.call1((f, index))?.is_truthy())
        .unwrap_or(true)
}

/// The place of `common_callchain` among a tracepoint handler's arguments.
const CALLCHAIN_ARG: usize = 7;

/// What the first record of a tracepoint found.
struct Tracepoint {
    /// `SUBSYS__EVENT`.
    name: Py<PyString>,
    handler: Option<Callable>,
}

/// A perf script's handlers, found in its module.
pub struct PerfCalls {
    module: Py<PyModule>,
    context: Py<PyAny>,
    process_event: Option<Py<PyAny>>,
    context_switch: Option<Py<PyAny>>,
    throttle: Option<Py<PyAny>>,
    unthrottle: Option<Py<PyAny>>,
    /// trace_unhandled; whether it takes the sample dict.
    unhandled: Option<Callable>,
    /// Per tracepoint (its descriptor's address), once seen.
    seen: HashMap<usize, Tracepoint>,
    /// The tracepoints (`SUBSYS__EVENT`) whose values are defined.
    defined: HashSet<String>,
    /// `common_comm` as made for each (tid, pid) since [`PerfCalls::forget_comms`]: the
    /// worker forgets them at each batch and at each record that is not a sample (a comm,
    /// an exec, a fork may change a thread's name), so an answer is the model's as of the
    /// event, looked up once per thread and batch instead of once per event (each lookup
    /// takes the model's lock, which the pipeline's thread holds to write).
    comms: HashMap<u64, Py<PyString>>,
    /// The sample dicts and frame dicts, made cheaply (forgotten with `comms`).
    dicts: Dicts,
    /// perf stat's hooks and `auxtrace_error`, fed from a recording's side records.
    pub(super) stat: super::perfstat::StatCalls,
}

/// What failed: the handler's name, and its exception.
pub type Failure = (String, PyErr);

/// The number of positional parameters of a handler's code (perf's get_argument_count).
fn arg_count(f: &Bound<'_, PyAny>) -> usize {
    f.getattr("__code__")
        .and_then(|c| c.getattr("co_argcount"))
        .and_then(|n| n.extract::<usize>())
        .unwrap_or(0)
}

fn callable(m: &Bound<'_, PyModule>, name: &str) -> Option<Py<PyAny>> {
    m.getattr_opt(name)
        .ok()
        .flatten()
        .filter(|f| f.is_callable())
        .map(Bound::unbind)
}

impl PerfCalls {
    /// The handlers of the script module `m`, which also gets the global
    /// `perf_script_context` perf gives its scripts (intel-pt-events.py passes it to
    /// `perf_set_itrace_options` in `trace_begin()`).
    pub fn new(py: Python<'_>, m: &Bound<'_, PyModule>) -> PyResult<PerfCalls> {
        let context = super::perfenv::context(py)?;
        if m.getattr_opt("perf_script_context")?.is_none() {
            m.setattr("perf_script_context", context.bind(py))?;
        }
        let unhandled = callable(m, "trace_unhandled").map(|f| {
            let with_sample = arg_count(f.bind(py)) == 4;
            Callable {
                f,
                with_sample,
                chain: true,
            }
        });
        Ok(PerfCalls {
            module: m.clone().unbind(),
            context,
            process_event: callable(m, "process_event"),
            context_switch: callable(m, "context_switch"),
            throttle: callable(m, "throttle"),
            unthrottle: callable(m, "unthrottle"),
            unhandled,
            seen: HashMap::new(),
            defined: HashSet::new(),
            comms: HashMap::new(),
            dicts: Dicts::default(),
            stat: super::perfstat::StatCalls::new(m),
        })
    }

    /// Forget the thread names and the per-address dicts made so far (see `comms`).
    pub fn forget_comms(&mut self) {
        if !self.comms.is_empty() {
            self.comms.clear();
        }
        self.dicts.forget();
    }

    /// The name perf gives `ev`'s thread, as a Python string (see `comms`).
    fn comm<'py>(&mut self, py: Python<'py>, ev: &Event) -> Bound<'py, PyString> {
        let key = (ev.tid as u64) << 32 | ev.pid as u64;
        if let Some(s) = self.comms.get(&key) {
            return s.bind(py).clone();
        }
        let s = PyString::new(py, &comm_of(ev));
        if self.comms.len() < 1 << 12 {
            self.comms.insert(key, s.clone().unbind());
        }
        s
    }

    /// Define the flag and symbolic values of `tracepoints` (`SUBSYS:EVENT`, those this
    /// kernel has) now, before `trace_begin()`.
    pub fn define_ahead(&mut self, py: Python<'_>, tracepoints: &[String]) -> Result<(), Failure> {
        for tp in tracepoints {
            let Ok(format) = crate::perf::events::read_tracepoint_format(tp) else {
                continue;
            };
            let name = format.name.replacen(':', "__", 1);
            if self.defined.insert(name.clone()) {
                define_values(self.module.bind(py), &name, &format)?;
            }
        }
        Ok(())
    }

    /// Call the handler `ev` is for, if any.
    pub fn call(&mut self, py: Python<'_>, ev: &Event) -> Result<(), Failure> {
        if let EventKind::Switch {
            out,
            preempt,
            next_prev,
        } = &ev.kind
        {
            let Some(f) = &self.context_switch else {
                return Ok(());
            };
            let (np_pid, np_tid) = next_prev.map_or((-1, -1), |(p, t)| (p as i32, t as i32));
            let args = (
                ev.time,
                ev.cpu as i32,
                ev.pid as i32,
                ev.tid as i32,
                np_pid,
                np_tid,
                -1i32,
                *out,
                *out && *preempt,
                0i32,
                0i32,
            );
            return f
                .call1(py, args)
                .map(drop)
                .map_err(|e| ("context_switch".to_string(), e));
        }
        if let EventKind::Throttle {
            throttled,
            time,
            id,
            stream_id,
        } = &ev.kind
        {
            let (f, name) = match throttled {
                true => (&self.throttle, "throttle"),
                false => (&self.unthrottle, "unthrottle"),
            };
            let Some(f) = f else {
                return Ok(());
            };
            let args = (
                *time,
                *id,
                *stream_id,
                ev.cpu as i32,
                ev.pid as i32,
                ev.tid as i32,
            );
            return f
                .call1(py, args)
                .map(drop)
                .map_err(|e| (name.to_string(), e));
        }
        let EventKind::Sample { event, raw, .. } = &ev.kind else {
            return Ok(());
        };
        match &event.format {
            Some(format) => self.tracepoint(py, ev, event, format, raw.as_deref().unwrap_or(&[])),
            None if self.process_event.is_none() => Ok(()),
            None => {
                let comm = self.comm(py, ev);
                match &self.process_event {
                    Some(f) => {
                        let fail = |e| ("process_event".to_string(), e);
                        let chain = self.dicts.callchain(py, ev).map_err(fail)?;
                        let d = self
                            .dicts
                            .sample_dict(py, ev, event, &[], chain, comm)
                            .map_err(fail)?;
                        f.call1(py, (d,))
                            .map(drop)
                            .map_err(|e| ("process_event".to_string(), e))
                    }
                    None => Ok(()),
                }
            }
        }
    }

    fn first_sight(&mut self, py: Python<'_>, format: &Format) -> Result<Tracepoint, Failure> {
        let name = format.name.replacen(':', "__", 1);
        if self.defined.insert(name.clone()) {
            define_values(self.module.bind(py), &name, format)?;
        }
        let m = self.module.bind(py);
        let n = 8 + format.fields.iter().filter(|f| !f.common).count();
        let handler = callable(m, &name).map(|f| {
            let with_sample = arg_count(f.bind(py)) == n + 1;
            let chain = with_sample || reads_argument(f.bind(py), CALLCHAIN_ARG);
            Callable {
                f,
                with_sample,
                chain,
            }
        });
        Ok(Tracepoint {
            name: PyString::new(py, &name).unbind(),
            handler,
        })
    }

    fn tracepoint(
        &mut self,
        py: Python<'_>,
        ev: &Event,
        event: &'static EventDesc,
        format: &Format,
        raw: &[u8],
    ) -> Result<(), Failure> {
        let comm = self.comm(py, ev);
        let key = event as *const EventDesc as usize;
        if !self.seen.contains_key(&key) {
            let tp = self.first_sight(py, format)?;
            self.seen.insert(key, tp);
        }
        let Some(tp) = self.seen.get(&key) else {
            return Ok(());
        };
        let (handler, unhandled) = match (&tp.handler, &self.unhandled) {
            (Some(h), _) => (h, false),
            (None, Some(u)) => (u, true),
            (None, None) => return Ok(()),
        };
        // The handler's name, made only when it failed.
        let fail = |e: PyErr| {
            let who = match unhandled {
                true => "trace_unhandled".to_string(),
                false => tp.name.bind(py).to_string(),
            };
            (who, e)
        };
        let int = |name: &str| match ev.field(name) {
            Some(Value::Int(v)) => v,
            Some(Value::UInt(v) | Value::Hex(v)) => v as i64,
            _ => -1,
        };
        super::perfenv::set_common(
            int("common_preempt_count"),
            int("common_flags"),
            int("common_lock_depth"),
        );
        let pid = match ev.field("common_pid") {
            Some(Value::Int(v)) => v,
            Some(Value::UInt(v)) => v as i64,
            _ => ev.pid as i32 as i64,
        };
        let secs = ev.time / 1_000_000_000;
        let nsecs = ev.time % 1_000_000_000;
        let chain = match handler.chain {
            true => self.dicts.callchain(py, ev).map_err(fail)?,
            false => PyList::empty(py),
        };
        // perf's sample->cpu: -1 for a recording whose samples carry no CPU.
        let cpu = match self.dicts.no_cpu(py, event) {
            true => -1,
            false => ev.cpu as i64,
        };
        let mut args: Vec<Bound<'_, PyAny>> = vec![
            tp.name.bind(py).clone().into_any(),
            self.context.bind(py).clone(),
        ];
        let fields = format.fields.iter().filter(|f| !f.common);
        if unhandled {
            let d = PyDict::new(py);
            (|| -> PyResult<()> {
                d.set_item("common_cpu", cpu)?;
                d.set_item("common_s", secs)?;
                d.set_item("common_ns", nsecs)?;
                d.set_item("common_pid", pid)?;
                d.set_item("common_comm", comm.clone())?;
                d.set_item("common_callchain", chain.clone())?;
                for f in fields {
                    d.set_item(&*f.name, field_value(py, f, raw))?;
                }
                Ok(())
            })()
            .map_err(fail)?;
            args.push(d.into_any());
        } else {
            let common = (|| -> PyResult<[Bound<'_, PyAny>; 5]> {
                Ok([
                    cpu.into_pyobject(py)?.into_any(),
                    secs.into_pyobject(py)?.into_any(),
                    nsecs.into_pyobject(py)?.into_any(),
                    pid.into_pyobject(py)?.into_any(),
                    comm.clone().into_any(),
                ])
            })()
            .map_err(fail)?;
            args.extend(common);
            args.push(chain.clone().into_any());
            args.extend(fields.map(|f| field_value(py, f, raw)));
        }
        if handler.with_sample {
            args.push(
                self.dicts
                    .sample_dict(py, ev, event, raw, chain, comm)
                    .map_err(fail)?
                    .into_any(),
            );
        }
        let t = PyTuple::new(py, args).map_err(fail)?;
        handler.f.call1(py, t).map(drop).map_err(fail)
    }
}

/// Define the print fmt's flag and symbolic values through the script's own functions
/// (perf's define_event_symbols), where it has them.
fn define_values(m: &Bound<'_, PyModule>, name: &str, format: &Format) -> Result<(), Failure> {
    let Some(print) = &format.print else {
        return Ok(());
    };
    let py = m.py();
    for t in print.value_tables(&format.fields) {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let (field_fn, value_fn) = match t.delim {
            Some(_) => ("define_flag_field", "define_flag_value"),
            None => ("define_symbolic_field", "define_symbolic_value"),
        };
        fn fail(f: &'static str) -> impl Fn(PyErr) -> Failure {
            move |e| (f.to_string(), e)
        }
        if let Some(f) = callable(m, field_fn) {
            let r = match t.delim {
                Some(d) => f.call1(py, (name, t.field, text(d))),
                None => f.call1(py, (name, t.field)),
            };
            r.map_err(fail(field_fn))?;
        }
        if let Some(f) = callable(m, value_fn) {
            for (v, s) in t.values {
                f.call1(py, (name, t.field, *v as i64, text(s)))
                    .map_err(fail(value_fn))?;
            }
        }
    }
    Ok(())
}

/// The name perf gives a thread: its comm, or `:TID` when it is not known.
fn comm_of(ev: &Event) -> String {
    super::lookup::comm(ev.tid)
        .or_else(|| super::lookup::comm(ev.pid))
        .unwrap_or_else(|| format!(":{}", ev.tid))
}

/// perf's `is_printable_array`: a NUL at the end, and printable ASCII or space up to the
/// first NUL.
fn printable(b: &[u8]) -> bool {
    if b.last() != Some(&0) {
        return false;
    }
    b.iter()
        .take_while(|&&c| c != 0)
        .all(|&c| c.is_ascii_graphic() || c == b' ' || (b'\t'..=b'\r').contains(&c))
}

/// A tracepoint field as perf hands it to a handler.
fn field_value<'py>(py: Python<'py>, f: &Field, raw: &[u8]) -> Bound<'py, PyAny> {
    let none = || py.None().into_bound(py);
    match f.ty {
        FieldType::Int { .. } => match f.value(raw) {
            Value::Int(v) => v
                .into_pyobject(py)
                .map(Bound::into_any)
                .unwrap_or_else(|_| none()),
            Value::UInt(v) | Value::Hex(v) => v
                .into_pyobject(py)
                .map(Bound::into_any)
                .unwrap_or_else(|_| none()),
            _ => none(),
        },
        FieldType::Str => match f.raw_bytes(raw) {
            Some(b) if printable(b) => {
                PyString::new(py, &String::from_utf8_lossy(crate::text::until_nul(b))).into_any()
            }
            Some(b) => PyByteArray::new(py, b).into_any(),
            None => none(),
        },
        FieldType::Array { .. } => match f.raw_bytes(raw) {
            Some(b) => PyByteArray::new(py, b).into_any(),
            None => none(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttle_and_unthrottle_get_perfs_six_arguments() {
        super::super::interp::init().unwrap();
        Python::attach(|py| {
            let code = c"seen = []\ndef throttle(*a):\n    seen.append(('t',) + a)\ndef unthrottle(*a):\n    seen.append(('u',) + a)\n";
            let m = PyModule::from_code(py, code, c"throttle_test.py", c"throttle_test").unwrap();
            let mut calls = PerfCalls::new(py, &m).unwrap();
            for throttled in [true, false] {
                let ev = Event {
                    cpu: 1,
                    pid: 10,
                    tid: 11,
                    time: 99,
                    id: 5,
                    kind: EventKind::Throttle {
                        throttled,
                        time: 98,
                        id: 5,
                        stream_id: 6,
                    },
                };
                calls.call(py, &ev).map_err(|(_, e)| e).unwrap();
            }
            let seen: Vec<(String, u64, u64, u64, i32, i32, i32)> =
                m.getattr("seen").unwrap().extract().unwrap();
            assert_eq!(
                seen,
                [
                    ("t".to_string(), 98, 5, 6, 1, 10, 11),
                    ("u".to_string(), 98, 5, 6, 1, 10, 11)
                ]
            );
        });
    }

    #[test]
    fn a_handler_that_never_reads_its_chain_is_told_apart() {
        super::super::interp::init().unwrap();
        Python::attach(|py| {
            let code = c"def a(n, c, cpu, s, ns, pid, comm, chain, id, args):\n    return id\n\
def b(n, c, cpu, s, ns, pid, comm, chain, id, args):\n    return len(chain)\n\
def c(n, c, cpu, s, ns, pid, comm, chain, id, args):\n    return lambda: chain\n\
def d(n, c, cpu, s, ns, pid, comm, chain, id, args):\n    return locals()\n\
def e(*a):\n    pass\n\
def f(n, c, cpu, s, ns, pid, comm, chain, id, args):\n    chain = []\n    return chain\n\
def g(n, c, cpu, s, ns, pid, comm, chain, id, args):\n    del chain\n";
            let m = PyModule::from_code(py, code, c"reads_test.py", c"reads_test").unwrap();
            let reads = |name: &str| reads_argument(&m.getattr(name).unwrap(), CALLCHAIN_ARG);
            // Only `a` surely never reads it; `f` reads its own new list, but stays on the
            // safe side (its store and load are of the same name).
            assert!(!reads("a"));
            for name in ["b", "c", "d", "e", "f", "g"] {
                assert!(reads(name), "{name}");
            }
            // Not a plain function (a bound method-wrapper): any doubt reads.
            let wrapper = m.getattr("a").unwrap().getattr("__call__").unwrap();
            assert!(reads_argument(&wrapper, CALLCHAIN_ARG));
        });
    }

    #[test]
    fn printable_as_perf_judges_it() {
        assert!(printable(b"bash\0\0\0\0"));
        assert!(printable(b"/tmp/a b\0"));
        assert!(!printable(b"bash"));
        assert!(!printable(b"\x1b[2J\0"));
        assert!(!printable(b"caf\xc3\xa9\0"));
        assert!(printable(b"\0"));
    }

    #[test]
    fn attr_bytes_carry_type_size_config() {
        let d =
            crate::testkit::tracepoints::desc(0, "t:t", crate::testkit::tracepoints::SCHED_SWITCH);
        let b = super::super::perfdict::attr_bytes(d);
        assert_eq!(u32::from_ne_bytes(b[0..4].try_into().unwrap()), d.type_);
        assert_eq!(u32::from_ne_bytes(b[4..8].try_into().unwrap()), 136);
        assert_eq!(u64::from_ne_bytes(b[8..16].try_into().unwrap()), d.config);
    }
}
