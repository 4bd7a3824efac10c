//! The dicts perf script hands a perf script's handlers (`perf_sample_dict`, `param_dict`,
//! and the call chain's list of frame dicts), made with as little work per call as Python
//! allows, with perf's keys in perf's order:
//!
//! - keys are interned Python strings, made once;
//! - what is the same for every sample of an event (its name, its `attr` bytes) is made once
//!   per event; constants (an empty `str`, perf's "no data source" values) once;
//! - a frame's dict (`ip`, `sym{start, end, binding, name}`, `sym_off`, `dso`) and a sample's
//!   own symbol entries (`dso`, `dso_bid`, `dso_map_start`/`end`, `symbol`, `symoff`) are made
//!   once per (pid, address) and then *copied* for each use (`dict.copy()`, a copy of a small
//!   dict of immutable values): every handler call gets new dict objects, as perf gives them,
//!   so a script that changes one (`stackcollapse.py` calls `setdefault` on its frames) never
//!   changes what another call sees.
//!
//! The per-address cache is forgotten with the thread names ([`Dicts::forget`]): at each
//! batch and at each record that is not a sample (an exec or a mapping may change what an
//! address names), the rule the symbolizer's own memo follows.

use std::collections::HashMap;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::event::{Event, EventDesc, EventKind};
use crate::symbols::Symbolized;

/// Addresses whose dicts are kept per batch at most.
const MAX_CACHED: usize = 1 << 14;

/// A frame's dict, and its `sym` dict (copied into the frame's copy).
struct Frame {
    dict: Py<PyDict>,
    sym: Option<Py<PyDict>>,
}

/// What every sample of one event shares.
struct Desc {
    name: Py<PyString>,
    attr: Py<PyBytes>,
    /// Its samples carry no CPU (a per-task recording's): perf gives -1.
    no_cpu: bool,
}

/// A sample's own symbol entries: (key, value) in perf's order.
type SymEntries = Vec<(Py<PyString>, Py<PyAny>)>;

/// The caches.
#[derive(Default)]
pub struct Dicts {
    /// By (pid, address, the symbol it was named by).
    frames: HashMap<(u32, u64, usize), Frame>,
    /// A sample's own symbol entries, in perf's order, by (pid, ip, its symbol).
    syms: HashMap<(u32, u64, usize), SymEntries>,
    descs: HashMap<usize, Desc>,
    /// The `sample` sub-dict with perf's keys in perf's order (values overwritten per use).
    sample: Option<Py<PyDict>>,
}

/// PERF_MEM_DATA_SRC_NONE: the data source perf gives a sample that did not sample one.
const DATA_SRC_NONE: u64 = 0x0508_0021;
/// How perf script decodes it (`perf_script__meminfo_scnprintf`).
const DATA_SRC_NONE_DECODED: &str = "|OP N/A|LVL N/A|SNP N/A|TLB N/A|LCK N/A|BLK  N/A";

impl Dicts {
    /// Forget the per-address dicts (see the module's doc).
    pub fn forget(&mut self) {
        if !self.frames.is_empty() {
            self.frames.clear();
        }
        if !self.syms.is_empty() {
            self.syms.clear();
        }
    }

    /// Whether `event`'s samples carry no CPU (perf gives them -1).
    pub fn no_cpu(&mut self, py: Python<'_>, event: &'static EventDesc) -> bool {
        self.desc(py, event).no_cpu
    }

    fn desc(&mut self, py: Python<'_>, event: &'static EventDesc) -> &Desc {
        self.descs
            .entry(event as *const EventDesc as usize)
            .or_insert_with(|| Desc {
                name: PyString::new(py, event.name).unbind(),
                attr: PyBytes::new(py, &attr_bytes(event)).unbind(),
                no_cpu: crate::record_file::side::no_cpu(event),
            })
    }

    /// The sample's call chain as perf gives it: one dict per frame, innermost first, with
    /// `ip`, and where named `sym` (`start`, `end` as the symbol table has them, `binding`,
    /// `name`), `sym_off` and `dso`; empty without `-g`.
    pub fn callchain<'py>(&mut self, py: Python<'py>, ev: &Event) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        let Some(chain) = ev.callchain() else {
            return Ok(list);
        };
        let names = ev.names();
        for (i, f) in chain.frames().enumerate() {
            let name = names.and_then(|n| n.frames.get(i)).and_then(Option::as_ref);
            let key = (ev.pid, f.ip, symbol_id(name));
            let made = match self.frames.contains_key(&key) {
                true => None,
                false => {
                    let fr = frame(py, f.ip, name)?;
                    if self.frames.len() < MAX_CACHED {
                        self.frames.insert(key, fr);
                        None
                    } else {
                        Some(fr)
                    }
                }
            };
            let Some(frame) = made.as_ref().or_else(|| self.frames.get(&key)) else {
                continue;
            };
            let d = frame.dict.bind(py).copy()?;
            if let Some(sym) = &frame.sym {
                // The same key: its place in the dict stays where perf puts it.
                d.set_item(intern!(py, "sym"), sym.bind(py).copy()?)?;
            }
            list.append(d)?;
        }
        Ok(list)
    }

    /// perf's `perf_sample_dict` / `param_dict`.
    pub fn sample_dict<'py>(
        &mut self,
        py: Python<'py>,
        ev: &Event,
        event: &'static EventDesc,
        raw: &[u8],
        callchain: Bound<'py, PyList>,
        comm: Bound<'py, PyString>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let desc = self.desc(py, event);
        let d = PyDict::new(py);
        d.set_item(intern!(py, "ev_name"), desc.name.bind(py))?;
        d.set_item(intern!(py, "attr"), desc.attr.bind(py))?;
        let cpu = match desc.no_cpu {
            // perf's sample->cpu, a u32 of -1, read as an unsigned long.
            true => u32::MAX,
            false => ev.cpu,
        };
        let s = self.sample_template(py)?.bind(py).copy()?;
        let (ip, period) = ev.ip_period().unwrap_or((0, 0));
        s.set_item(intern!(py, "pid"), ev.pid as i32)?;
        s.set_item(intern!(py, "tid"), ev.tid as i32)?;
        s.set_item(intern!(py, "cpu"), cpu)?;
        s.set_item(intern!(py, "ip"), ip)?;
        s.set_item(intern!(py, "time"), ev.time)?;
        s.set_item(intern!(py, "period"), period)?;
        // One read value of zeros (a new list per call: a script may change it).
        let zeros = PyTuple::new(py, [0u64, 0, 0])?;
        s.set_item(intern!(py, "values"), PyList::new(py, [zeros])?)?;
        // PERF_RECORD_MISC_CPUMODE_MASK of the sample's misc (kernel 1, user 2, ...).
        if let EventKind::Sample { misc, .. } = &ev.kind {
            s.set_item(intern!(py, "cpumode"), misc & 7)?;
        }
        d.set_item(intern!(py, "sample"), s)?;
        d.set_item(intern!(py, "raw_buf"), PyBytes::new(py, raw))?;
        d.set_item(intern!(py, "comm"), comm)?;
        if let Some(sym) = ev.sym() {
            let key = (ev.pid, ip, symbol_id(Some(sym)));
            let made = match self.syms.contains_key(&key) {
                true => None,
                false => {
                    let e = sym_entries(py, ev, sym, ip)?;
                    if self.syms.len() < MAX_CACHED {
                        self.syms.insert(key, e);
                        None
                    } else {
                        Some(e)
                    }
                }
            };
            let entries = made.as_ref().or_else(|| self.syms.get(&key));
            for (k, v) in entries.into_iter().flatten() {
                d.set_item(k.bind(py), v.bind(py))?;
            }
        }
        d.set_item(intern!(py, "callchain"), callchain)?;
        // perfwatch records no branch stacks nor registers: perf's empty forms.
        d.set_item(intern!(py, "brstack"), PyList::empty(py))?;
        d.set_item(intern!(py, "brstacksym"), PyList::empty(py))?;
        d.set_item(intern!(py, "iregs"), intern!(py, ""))?;
        d.set_item(intern!(py, "uregs"), intern!(py, ""))?;
        Ok(d)
    }

    /// The `sample` sub-dict's keys in perf's order, with the values that never change
    /// (what perf gives a sample that did not sample these: perf 6.1, checked with a script
    /// printing the dict).
    fn sample_template(&mut self, py: Python<'_>) -> PyResult<&Py<PyDict>> {
        if self.sample.is_none() {
            let s = PyDict::new(py);
            for k in ["pid", "tid", "cpu", "ip", "time", "period"] {
                s.set_item(k, 0)?;
            }
            s.set_item("phys_addr", 0)?;
            s.set_item("addr", 0)?;
            s.set_item("weight", 0)?;
            s.set_item("transaction", 0)?;
            s.set_item("datasrc", DATA_SRC_NONE)?;
            s.set_item("datasrc_decode", DATA_SRC_NONE_DECODED)?;
            s.set_item("values", py.None())?;
            self.sample = Some(s.unbind());
        }
        match &self.sample {
            Some(s) => Ok(s),
            None => Err(pyo3::exceptions::PyRuntimeError::new_err(
                "no sample template",
            )),
        }
    }
}

/// Which symbol named an address (its address in memory; 0: none): an address named anew
/// (a binary read meanwhile) is a new entry of the caches.
fn symbol_id(name: Option<&Symbolized>) -> usize {
    name.map_or(0, |s| std::sync::Arc::as_ptr(s.symbol()) as usize)
}

/// A frame's dict (and its `sym` dict, also in it), as perf makes one.
fn frame(py: Python<'_>, ip: u64, name: Option<&Symbolized>) -> PyResult<Frame> {
    let d = PyDict::new(py);
    d.set_item(intern!(py, "ip"), ip)?;
    let mut sym_dict = None;
    if let Some(s) = name {
        if let Some(n) = s.name() {
            let sym = PyDict::new(py);
            let (start, end) = s.symbol().extent();
            sym.set_item(intern!(py, "start"), start)?;
            sym.set_item(intern!(py, "end"), end)?;
            sym.set_item(intern!(py, "binding"), s.symbol().binding())?;
            sym.set_item(intern!(py, "name"), n)?;
            d.set_item(intern!(py, "sym"), &sym)?;
            d.set_item(intern!(py, "sym_off"), s.offset().unwrap_or(0))?;
            sym_dict = Some(sym.unbind());
        }
        d.set_item(intern!(py, "dso"), s.dso().name())?;
    }
    Ok(Frame {
        dict: d.unbind(),
        sym: sym_dict,
    })
}

/// A sample's own symbol entries, in perf's order.
fn sym_entries(py: Python<'_>, ev: &Event, sym: &Symbolized, ip: u64) -> PyResult<SymEntries> {
    let mut v: SymEntries = Vec::with_capacity(6);
    let mut put = |k: &Bound<'_, PyString>, val: Bound<'_, PyAny>| {
        v.push((k.clone().unbind(), val.unbind()));
    };
    put(
        intern!(py, "dso"),
        PyString::new(py, sym.dso().name()).into_any(),
    );
    // perf: the build id it read for the binary, else empty.
    let bid = sym.dso().build_id().map(|b| b.to_hex()).unwrap_or_default();
    put(intern!(py, "dso_bid"), PyString::new(py, &bid).into_any());
    // The mapping's bounds where perfwatch's process model has it (user space).
    if !sym.is_kernel()
        && let Some((start, end)) = super::lookup::mapping(ev.pid, ev.time, ip)
    {
        put(
            intern!(py, "dso_map_start"),
            start.into_pyobject(py)?.into_any(),
        );
        put(
            intern!(py, "dso_map_end"),
            end.into_pyobject(py)?.into_any(),
        );
    }
    if let Some(n) = sym.name() {
        put(intern!(py, "symbol"), PyString::new(py, n).into_any());
        put(
            intern!(py, "symoff"),
            sym.offset().unwrap_or(0).into_pyobject(py)?.into_any(),
        );
    }
    Ok(v)
}

/// `perf_event_attr` bytes as far as perfwatch keeps them: type, size and config (the rest
/// zero).
pub fn attr_bytes(event: &EventDesc) -> Vec<u8> {
    const SIZE: u32 = 136;
    let mut b = vec![0u8; SIZE as usize];
    b[0..4].copy_from_slice(&event.type_.to_ne_bytes());
    b[4..8].copy_from_slice(&SIZE.to_ne_bytes());
    b[8..16].copy_from_slice(&event.config.to_ne_bytes());
    b
}
