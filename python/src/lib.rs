//! `perfwatch._native`: perfwatch's engine ([`perfwatch::embed::Session`]: the per-CPU
//! readers, the ordering and symbolizing pipeline) driven from a Python program.
//!
//! The session runs on a Rust thread of its own (the readers and the pipeline's threads
//! beside it); ordered chunks reach Python over a bounded channel, one list of event objects
//! per chunk, and the GIL is released while Python waits for one. The Python face
//! (`perfwatch.watch()`, the perf binding API) is in `perfwatch/__init__.py`.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, SendTimeoutError, Sender, bounded};
use perfwatch::embed::{Session, WatchOptions};
use perfwatch::event::{Event, EventKind, RecordType};
use perfwatch::perf::events::Sampling;
use perfwatch::script::pyevent::{PyEvent, member};
use perfwatch::stats::Stats;
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

/// Chunks waiting for Python before the driver thread waits (and, behind it, the readers).
const QUEUE_CHUNKS: usize = 16;
/// CPU numbers above this are not queued (the kernel's are far below).
const MAX_CPUS: usize = 1 << 16;
/// The longest a wait runs without the GIL before it looks at Python's signals.
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// An event as perf's Python binding hands it out (`evlist.read_on_cpu`): a small frozen
/// object around the record, made when it is read, whose attributes are read from the record
/// when asked (`type` is the `RECORD_*` number) and whose `str()` is built in Rust. What only
/// perfwatch adds (`sym`, `dso`, `callchain`, `fields`, `as_dict()`) is answered by the
/// `--script` event class, made for that one look-up.
#[pyclass(frozen, name = "RecordEvent", module = "perfwatch")]
struct RecordEvent {
    ev: Event,
}

thread_local! {
    /// The buffer `str(event)` is written into (one per thread: no allocation per call).
    static LINE: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(Vec::with_capacity(256));
}

#[pymethods]
impl RecordEvent {
    /// The record's `RECORD_*` number, as in perf's binding.
    #[getter(r#type)]
    fn type_(&self) -> u32 {
        record_number(&self.ev)
    }
    /// The record type's name (`"fork"`, `"sample"`), as `perfwatch.watch()` events' `type`.
    #[getter]
    fn type_name(&self) -> &'static str {
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
    /// The sample's instruction pointer; 0 for records that are not samples.
    #[getter]
    fn sample_ip(&self) -> u64 {
        self.ev.ip_period().map_or(0, |(ip, _)| ip)
    }
    /// The name of the sample's event; None for records that are not samples.
    #[getter]
    fn name(&self) -> Option<&'static str> {
        self.ev.event_name()
    }

    /// The `{ type: ... }` text, as perf's binding prints the record.
    fn __str__<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        LINE.with(|buf| {
            let mut buf = buf.borrow_mut();
            buf.clear();
            self.ev.kind.write_body(&mut buf);
            match std::str::from_utf8(&buf) {
                Ok(s) => PyString::new(py, s),
                Err(_) => PyString::new(py, &String::from_utf8_lossy(&buf)),
            }
        })
    }

    fn __repr__(&self) -> String {
        format!("<perfwatch.RecordEvent {}>", self.ev)
    }

    /// The record's members (`pid`, `ppid`, `comm`, `filename`, `lost`, ...) and a
    /// tracepoint's fields by name; then what the `--script` event class has (`sym`, `dso`,
    /// `callchain`, `fields`, `as_dict`).
    fn __getattr__<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        if let Some(v) = member(&self.ev, name) {
            return Ok(v.into_pyobject(py)?);
        }
        Bound::new(
            py,
            PyEvent {
                ev: self.ev.clone(),
            },
        )?
        .getattr(name)
    }
}

/// PERF_RECORD_* of an event.
fn record_number(ev: &Event) -> u32 {
    match ev.record_type() {
        RecordType::Mmap => 1,
        RecordType::Lost => 2,
        RecordType::Comm => 3,
        RecordType::Exit => 4,
        RecordType::Throttle => 5,
        RecordType::Unthrottle => 6,
        RecordType::Fork => 7,
        RecordType::Sample => 9,
        RecordType::LostSamples => 13,
        RecordType::Switch => match ev.kind {
            EventKind::Switch {
                next_prev: Some(_), ..
            } => 15,
            _ => 14,
        },
    }
}

/// A running watch. `next_batch()` hands out ordered chunks; `close()` (also on garbage
/// collection) stops it and joins its threads.
#[pyclass(module = "perfwatch._native")]
struct NativeSession {
    rx: Option<Receiver<Vec<Event>>>,
    /// Emptied chunk buffers back to the driver, which gives them to the pipeline to reuse
    /// (no fresh allocation, and no fresh pages, per chunk in a storm).
    back: Sender<Vec<Event>>,
    /// `get_pollfd()`'s end of a socket pair the driver writes a byte to after each chunk it
    /// hands over, once `wake_armed` (the first `pollfd()`): readable while records may wait.
    wake_rx: Option<UnixStream>,
    wake_armed: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    driver: Option<JoinHandle<()>>,
    stats: Arc<Stats>,
    #[pyo3(get)]
    cpus: Vec<u32>,
    #[pyo3(get)]
    notes: Vec<String>,
    binding: bool,
    /// The perf-binding face's per-CPU queues (`poll` fills them, `read_on_cpu` takes from
    /// them), indexed by CPU number: events wait here as Rust values, and a Python object is
    /// made for one only when it is read.
    queues: Vec<VecDeque<Event>>,
}

/// What the driver thread says once the session has started (or failed to).
type Started = Result<(Vec<u32>, Vec<String>, Arc<Stats>), String>;

#[pymethods]
impl NativeSession {
    #[new]
    #[pyo3(signature = (events, cpus=None, pids=None, call_graph=None, duration=None, freq=None, period=None, mmap_pages=None, context_switch=false, binding=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        events: Vec<String>,
        cpus: Option<Vec<u32>>,
        pids: Option<Vec<u32>>,
        call_graph: Option<u16>,
        duration: Option<f64>,
        freq: Option<u64>,
        period: Option<u64>,
        mmap_pages: Option<usize>,
        context_switch: bool,
        binding: bool,
    ) -> PyResult<NativeSession> {
        let duration = match duration {
            Some(d) if d.is_finite() && d >= 0.0 => Some(Duration::from_secs_f64(d)),
            Some(_) => {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "duration must be a finite number of seconds >= 0",
                ));
            }
            None => None,
        };
        let sampling = match (period, freq) {
            (Some(n), _) => Some(Sampling::Period(n)),
            (None, Some(hz)) => Some(Sampling::Freq(hz)),
            (None, None) => None,
        };
        let opts = WatchOptions {
            events,
            cpus,
            pids,
            call_graph,
            duration,
            sampling,
            mmap_pages,
            context_switch,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = bounded::<Vec<Event>>(QUEUE_CHUNKS);
        let (back, back_rx) = bounded::<Vec<Event>>(QUEUE_CHUNKS);
        let wake_armed = Arc::new(AtomicBool::new(false));
        let (wake_rx, wake_tx) = UnixStream::pair()
            .and_then(|(r, w)| {
                r.set_nonblocking(true)?;
                w.set_nonblocking(true)?;
                Ok((r, w))
            })
            .map_err(|e| PyOSError::new_err(format!("cannot make a socket pair: {e}")))?;
        let wake = (wake_tx, wake_armed.clone());
        let (started_tx, started_rx) = bounded::<Started>(1);
        let flag = stop.clone();
        let driver = std::thread::Builder::new()
            .name("perfwatch-py".into())
            .spawn(move || drive(opts, flag, tx, back_rx, wake, started_tx))
            .map_err(|e| PyOSError::new_err(format!("cannot start a thread: {e}")))?;
        let started = py.detach(|| started_rx.recv());
        match started {
            Ok(Ok((cpus, notes, stats))) => Ok(NativeSession {
                rx: Some(rx),
                back,
                wake_rx: Some(wake_rx),
                wake_armed,
                stop,
                driver: Some(driver),
                stats,
                cpus,
                notes,
                binding,
                queues: Vec::new(),
            }),
            Ok(Err(e)) => {
                let _ = py.detach(|| driver.join());
                Err(PyOSError::new_err(e))
            }
            Err(_) => {
                let _ = py.detach(|| driver.join());
                Err(PyOSError::new_err(
                    "perfwatch's session thread failed to start",
                ))
            }
        }
    }

    /// The next ordered chunk as a list of events, waiting at most `timeout` seconds (None:
    /// until one comes); `[]` on timeout, None once the run has ended. The GIL is released
    /// while waiting; Python's signal handlers run every 100 ms (Ctrl-C raises here).
    #[pyo3(signature = (timeout=None))]
    fn next_batch<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        let Some(rx) = &self.rx else { return Ok(None) };
        match wait_chunk(py, rx, timeout)? {
            Wait::Chunk(events) => {
                // With the chunks that are ready too: one list per wake-up in a storm.
                let list = self.to_list(py, events)?;
                for _ in 0..QUEUE_CHUNKS {
                    let Ok(more) = rx.try_recv() else { break };
                    self.append(&list, more)?;
                }
                Ok(Some(list))
            }
            Wait::Timeout => Ok(Some(PyList::empty(py))),
            Wait::Ended => Ok(None),
        }
    }

    /// perf's `evlist.poll(timeout)`: wait at most `timeout` ms (negative or None: until
    /// records come, or the run ends) for records, and sort them into the per-CPU queues
    /// `read_on_cpu` takes from; how many CPUs have some ready (0: none came, or the run has
    /// ended). The GIL is released while waiting; Ctrl-C raises here, as in `next_batch`.
    #[pyo3(signature = (timeout=None))]
    fn poll(&mut self, py: Python<'_>, timeout: Option<f64>) -> PyResult<usize> {
        let ready = self.ready_cpus();
        if ready > 0 {
            return Ok(ready);
        }
        let ready = self.take_ready();
        if ready > 0 {
            return Ok(ready);
        }
        let Some(rx) = &self.rx else { return Ok(0) };
        let timeout = timeout.filter(|t| *t >= 0.0).map(|ms| ms / 1000.0);
        match wait_chunk(py, rx, timeout)? {
            Wait::Chunk(events) => self.enqueue(events),
            Wait::Timeout | Wait::Ended => return Ok(0),
        }
        Ok(self.take_ready())
    }

    /// perf's `evlist.read_on_cpu(cpu)`: the next record of CPU `cpu` (in time order), or
    /// None when it has none ready.
    #[pyo3(signature = (cpu, sample_id_all=0))]
    fn read_on_cpu(
        &mut self,
        py: Python<'_>,
        cpu: i64,
        sample_id_all: i64,
    ) -> PyResult<Option<Py<RecordEvent>>> {
        let _ = sample_id_all; // perf's own argument; perfwatch's records always carry it
        let Ok(cpu) = usize::try_from(cpu) else {
            return Ok(None);
        };
        // As perf's reads the ring itself: what has come since the last poll is read too
        // (a program that waits with select() on get_pollfd() never calls poll()).
        if self.queues.get(cpu).is_none_or(|q| q.is_empty()) {
            self.take_ready();
        }
        match self.queues.get_mut(cpu).and_then(|q| q.pop_front()) {
            Some(ev) => Py::new(py, RecordEvent { ev }).map(Some),
            None => Ok(None),
        }
    }

    /// A file descriptor that is readable when records may be waiting (for `select`/`poll`:
    /// perf's `evlist.get_pollfd()`); they are then read with `read_on_cpu`.
    fn pollfd(&self) -> PyResult<i32> {
        let Some(s) = &self.wake_rx else {
            return Err(PyOSError::new_err("the session is closed"));
        };
        self.wake_armed.store(true, Ordering::Relaxed);
        Ok(s.as_raw_fd())
    }

    /// Counters so far: records, lost (by the kernel: ring full), lost_samples, dropped (by
    /// perfwatch), and the same per CPU under "per_cpu".
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let t = self.stats.snapshot();
        let d = PyDict::new(py);
        d.set_item("records", t.counts.total_records())?;
        d.set_item("lost", t.counts.lost)?;
        d.set_item("lost_samples", t.counts.lost_samples)?;
        d.set_item("dropped", t.counts.dropped)?;
        let per = PyDict::new(py);
        for c in &t.per_cpu {
            let one = PyDict::new(py);
            one.set_item("records", c.counts.total_records())?;
            one.set_item("lost", c.counts.lost)?;
            one.set_item("lost_samples", c.counts.lost_samples)?;
            one.set_item("dropped", c.counts.dropped)?;
            per.set_item(c.cpu, one)?;
        }
        d.set_item("per_cpu", per)?;
        Ok(d)
    }

    /// Stop: events disabled and closed, every thread joined. Idempotent.
    fn close(&mut self, py: Python<'_>) {
        self.stop.store(true, Ordering::Relaxed);
        // Dropping the receiver ends a driver waiting to send.
        self.rx = None;
        self.wake_rx = None;
        self.queues.clear();
        if let Some(d) = self.driver.take() {
            let _ = py.detach(|| d.join());
        }
    }
}

impl NativeSession {
    /// Sort the chunks that are ready (without waiting) into the per-CPU queues; how many
    /// CPUs then have records. The wake-up socket is emptied first: a chunk handed over
    /// after this look leaves its byte there, so `get_pollfd()` stays readable for it.
    fn take_ready(&mut self) -> usize {
        if self.wake_armed.load(Ordering::Relaxed) {
            if let Some(mut s) = self.wake_rx.as_ref() {
                let mut buf = [0u8; 256];
                while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
            }
        }
        let mut got = Vec::new();
        if let Some(rx) = &self.rx {
            for _ in 0..QUEUE_CHUNKS {
                let Ok(c) = rx.try_recv() else { break };
                got.push(c);
            }
        }
        for c in got {
            self.enqueue(c);
        }
        self.ready_cpus()
    }

    /// How many CPUs have records waiting in their queue.
    fn ready_cpus(&self) -> usize {
        self.queues.iter().filter(|q| !q.is_empty()).count()
    }

    /// Sort a chunk's events into the per-CPU queues (each CPU's stay in time order).
    fn enqueue(&mut self, mut events: Vec<Event>) {
        for ev in events.drain(..) {
            let cpu = ev.cpu as usize;
            if cpu >= self.queues.len() {
                if cpu >= MAX_CPUS {
                    continue;
                }
                self.queues.resize_with(cpu + 1, VecDeque::new);
            }
            self.queues[cpu].push_back(ev);
        }
        let _ = self.back.try_send(events);
    }

    fn to_list<'py>(&self, py: Python<'py>, events: Vec<Event>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        self.append(&list, events)?;
        Ok(list)
    }

    fn append(&self, list: &Bound<'_, PyList>, mut events: Vec<Event>) -> PyResult<()> {
        let py = list.py();
        for ev in events.drain(..) {
            if self.binding {
                list.append(Bound::new(py, RecordEvent { ev })?)?;
            } else {
                list.append(Bound::new(py, PyEvent { ev })?)?;
            }
        }
        let _ = self.back.try_send(events);
        Ok(())
    }
}

impl Drop for NativeSession {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.rx = None;
        if let Some(d) = self.driver.take() {
            let _ = d.join();
        }
    }
}

/// A counting event of the perf-binding face (`evsel.open` of an evsel that does not
/// sample, then `evsel.read`): one task on one CPU.
#[pyclass(frozen, module = "perfwatch._native")]
struct NativeCounter(perfwatch::embed::Counter);

#[pymethods]
impl NativeCounter {
    #[new]
    #[pyo3(signature = (r#type, config, pid=-1, cpu=-1, inherit=false))]
    fn new(r#type: u32, config: u64, pid: i32, cpu: i32, inherit: bool) -> PyResult<Self> {
        perfwatch::embed::Counter::open(r#type, config, pid, cpu, inherit)
            .map(NativeCounter)
            .map_err(|e| PyOSError::new_err(format!("{e:#}")))
    }

    /// `(val, ena, run)`: the count, and the ns the event was enabled and running.
    fn read(&self) -> PyResult<(u64, u64, u64)> {
        let c = self
            .0
            .read()
            .map_err(|e| PyOSError::new_err(format!("cannot read the counter: {e}")))?;
        Ok((c.val, c.ena, c.run))
    }
}

/// What a wait for the next chunk found.
enum Wait {
    Chunk(Vec<Event>),
    Timeout,
    Ended,
}

/// Wait at most `timeout` seconds (None: no limit) for the driver's next chunk, without the
/// GIL; Python's signal handlers run every [`SIGNAL_CHECK`] (a Ctrl-C raises here).
fn wait_chunk(py: Python<'_>, rx: &Receiver<Vec<Event>>, timeout: Option<f64>) -> PyResult<Wait> {
    let deadline = timeout
        .filter(|t| t.is_finite())
        .map(|t| std::time::Instant::now() + Duration::from_secs_f64(t.max(0.0)));
    // Ready already: no release of the GIL, no clock read.
    match rx.try_recv() {
        Ok(events) => return Ok(Wait::Chunk(events)),
        Err(crossbeam_channel::TryRecvError::Disconnected) => return Ok(Wait::Ended),
        Err(crossbeam_channel::TryRecvError::Empty) => {}
    }
    loop {
        let wait = match deadline {
            Some(d) => d
                .saturating_duration_since(std::time::Instant::now())
                .min(SIGNAL_CHECK),
            None => SIGNAL_CHECK,
        };
        match py.detach(|| rx.recv_timeout(wait)) {
            Ok(events) => return Ok(Wait::Chunk(events)),
            Err(RecvTimeoutError::Disconnected) => return Ok(Wait::Ended),
            Err(RecvTimeoutError::Timeout) => {
                py.check_signals()?;
                if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                    return Ok(Wait::Timeout);
                }
            }
        }
    }
}

/// The session's thread: start it, hand its chunks on until it ends or Python stops it.
fn drive(
    opts: WatchOptions,
    stop: Arc<AtomicBool>,
    tx: Sender<Vec<Event>>,
    back: Receiver<Vec<Event>>,
    wake: (UnixStream, Arc<AtomicBool>),
    started: Sender<Started>,
) {
    let mut session = match Session::start(opts) {
        Ok(s) => s,
        Err(e) => {
            let _ = started.send(Err(format!("{e:#}")));
            return;
        }
    };
    let _ = started.send(Ok((
        session.cpus().to_vec(),
        session.notes().to_vec(),
        session.stats_handle(),
    )));
    'run: loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        while let Ok(spare) = back.try_recv() {
            session.recycle(spare);
        }
        let Some(mut events) = session.next_chunk(SIGNAL_CHECK) else {
            break;
        };
        if events.is_empty() {
            continue;
        }
        loop {
            match tx.send_timeout(events, SIGNAL_CHECK) {
                Ok(()) => {
                    if wake.1.load(Ordering::Relaxed) {
                        // Full: it is readable already.
                        let _ = (&wake.0).write(&[1]);
                    }
                    break;
                }
                Err(SendTimeoutError::Timeout(back)) => {
                    if stop.load(Ordering::Relaxed) {
                        break 'run;
                    }
                    events = back;
                }
                Err(SendTimeoutError::Disconnected(_)) => break 'run,
            }
        }
    }
    session.close();
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeSession>()?;
    m.add_class::<NativeCounter>()?;
    m.add_class::<PyEvent>()?;
    m.add_class::<RecordEvent>()?;
    Ok(())
}
