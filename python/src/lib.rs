//! `perfwatch._native`: perfwatch's engine ([`perfwatch::embed::Session`]: the per-CPU
//! readers, the ordering and symbolizing pipeline) driven from a Python program.
//!
//! The session runs on a Rust thread of its own (the readers and the pipeline's threads
//! beside it); ordered chunks reach Python over a bounded channel, one list of event objects
//! per chunk, and the GIL is released while Python waits for one. The Python face
//! (`perfwatch.watch()`, the perf binding API) is in `perfwatch/__init__.py`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, SendTimeoutError, bounded};
use perfwatch::embed::{Session, WatchOptions};
use perfwatch::event::{Event, EventKind, RecordType};
use perfwatch::perf::events::Sampling;
use perfwatch::script::pyevent::PyEvent;
use perfwatch::stats::Stats;
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// Chunks waiting for Python before the driver thread waits (and, behind it, the readers).
const QUEUE_CHUNKS: usize = 16;
/// The longest a wait runs without the GIL before it looks at Python's signals.
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// An event as perf's Python binding has it: `type` is the `RECORD_*` number.
#[pyclass(extends = PyEvent, frozen, name = "RecordEvent", module = "perfwatch")]
struct RecordEvent;

#[pymethods]
impl RecordEvent {
    /// The record's `RECORD_*` number, as in perf's binding.
    #[getter(r#type)]
    fn type_(slf: PyRef<'_, Self>) -> u32 {
        record_number(&slf.as_super().ev)
    }
    /// The record type's name (`"fork"`, `"sample"`), as `perfwatch.watch()` events' `type`.
    #[getter]
    fn type_name(slf: PyRef<'_, Self>) -> &'static str {
        slf.as_super().ev.record_type().name()
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
    stop: Arc<AtomicBool>,
    driver: Option<JoinHandle<()>>,
    stats: Arc<Stats>,
    #[pyo3(get)]
    cpus: Vec<u32>,
    #[pyo3(get)]
    notes: Vec<String>,
    binding: bool,
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
        let (started_tx, started_rx) = bounded::<Started>(1);
        let flag = stop.clone();
        let driver = std::thread::Builder::new()
            .name("perfwatch-py".into())
            .spawn(move || drive(opts, flag, tx, started_tx))
            .map_err(|e| PyOSError::new_err(format!("cannot start a thread: {e}")))?;
        let started = py.detach(|| started_rx.recv());
        match started {
            Ok(Ok((cpus, notes, stats))) => Ok(NativeSession {
                rx: Some(rx),
                stop,
                driver: Some(driver),
                stats,
                cpus,
                notes,
                binding,
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
        let deadline = timeout
            .filter(|t| t.is_finite())
            .map(|t| std::time::Instant::now() + Duration::from_secs_f64(t.max(0.0)));
        loop {
            let wait = match deadline {
                Some(d) => d
                    .saturating_duration_since(std::time::Instant::now())
                    .min(SIGNAL_CHECK),
                None => SIGNAL_CHECK,
            };
            match py.detach(|| rx.recv_timeout(wait)) {
                Ok(events) => {
                    // With the chunks that are ready too: one list per wake-up in a storm.
                    let list = self.to_list(py, events)?;
                    for _ in 0..QUEUE_CHUNKS {
                        let Ok(more) = rx.try_recv() else { break };
                        self.append(&list, more)?;
                    }
                    return Ok(Some(list));
                }
                Err(RecvTimeoutError::Disconnected) => return Ok(None),
                Err(RecvTimeoutError::Timeout) => {
                    py.check_signals()?;
                    if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                        return Ok(Some(PyList::empty(py)));
                    }
                }
            }
        }
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
        if let Some(d) = self.driver.take() {
            let _ = py.detach(|| d.join());
        }
    }
}

impl NativeSession {
    fn to_list<'py>(&self, py: Python<'py>, events: Vec<Event>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        self.append(&list, events)?;
        Ok(list)
    }

    fn append(&self, list: &Bound<'_, PyList>, events: Vec<Event>) -> PyResult<()> {
        let py = list.py();
        for ev in events {
            if self.binding {
                let init = PyClassInitializer::from(PyEvent { ev }).add_subclass(RecordEvent);
                list.append(Bound::new(py, init)?)?;
            } else {
                list.append(Bound::new(py, PyEvent { ev })?)?;
            }
        }
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

/// The session's thread: start it, hand its chunks on until it ends or Python stops it.
fn drive(
    opts: WatchOptions,
    stop: Arc<AtomicBool>,
    tx: crossbeam_channel::Sender<Vec<Event>>,
    started: crossbeam_channel::Sender<Started>,
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
        let Some(mut events) = session.next_chunk(SIGNAL_CHECK) else {
            break;
        };
        if events.is_empty() {
            continue;
        }
        loop {
            match tx.send_timeout(events, SIGNAL_CHECK) {
                Ok(()) => break,
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
    m.add_class::<PyEvent>()?;
    m.add_class::<RecordEvent>()?;
    Ok(())
}
