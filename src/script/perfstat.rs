//! perf stat's hooks and `auxtrace_error`, called as `perf script -s` calls them on a
//! recording (`tools/perf/builtin-script.c`, `util/stat.c` and the Python engine of perf
//! 6.1), from the records [`crate::record_file::side`] keeps beside the stream:
//!
//! - each STAT record is a counter's value on one CPU and thread, kept until the next;
//! - at each STAT_ROUND, for every counter of the file in its order, `stat__EVENT(cpu,
//!   thread, time, val, ena, run)` (EVENT the counter's name with `:` made `_`): once with
//!   the counts summed over CPUs and threads, CPU and thread -1, when the file counted with
//!   perf stat's default aggregation (global); else once per thread and CPU of the maps,
//!   thread given as its pid. The values are scaled as perf scales them (`val * ena / run`
//!   when the counter ran part of the time, 0 when it never ran) unless the file says
//!   not to; then `stat__interval(time)`;
//! - an AUXTRACE_ERROR record goes to `auxtrace_error(typ, code, cpu, pid, tid, ip, ts,
//!   msg, cpumode, machine_pid, vcpu)`.
//!
//! perf hands the 64-bit values over as C `long`s: so does this (a value above 2^63, such
//! as a kernel address, is negative).

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::PyModule;

use crate::record_file::side::{self, AuxtraceError, SideRecord};

/// perf's AGGR_GLOBAL (`enum aggr_mode`), perf stat's default.
const AGGR_GLOBAL: u64 = 1;
/// STAT_CONFIG's tags.
const TAG_AGGR_MODE: u64 = 0;
const TAG_SCALE: u64 = 2;

/// What failed: the hook's name and its exception.
pub type Failure = (String, PyErr);

/// The hooks of one script and the counts so far.
pub struct StatCalls {
    module: Py<PyModule>,
    /// The script has any of these hooks.
    wanted: bool,
    interval: Option<Py<PyAny>>,
    auxtrace_error: Option<Py<PyAny>>,
    counters: Vec<&'static str>,
    /// `stat__EVENT` per counter.
    handlers: Vec<Option<Py<PyAny>>>,
    aggr_mode: u64,
    scale: bool,
    cpus: Vec<i32>,
    threads: Vec<i32>,
    /// (counter, CPU index, thread index) → [val, ena, run].
    counts: HashMap<(usize, usize, usize), [u64; 3]>,
    /// The raw counts of the last round, the same way (the sums under `(counter, MAX,
    /// MAX)`): perf script hands over each round's increase (`evsel__compute_deltas`).
    prev: HashMap<(usize, usize, usize), [u64; 3]>,
}

fn callable(m: &Bound<'_, PyModule>, name: &str) -> Option<Py<PyAny>> {
    m.getattr_opt(name)
        .ok()
        .flatten()
        .filter(|f| f.is_callable())
        .map(Bound::unbind)
}

/// The hook perf calls for a counter's counts: `stat__` and its name, `:` made `_`.
pub fn handler_name(counter: &str) -> String {
    format!("stat__{}", counter.replace(':', "_"))
}

impl StatCalls {
    /// The hooks module `m` has; when it has any, the recording keeps their records.
    pub fn new(m: &Bound<'_, PyModule>) -> StatCalls {
        let names: Vec<String> = m
            .dir()
            .map(|d| {
                d.iter()
                    .filter_map(|n| n.extract::<String>().ok())
                    .collect()
            })
            .unwrap_or_default();
        let wanted = names
            .iter()
            .any(|n| n.starts_with("stat__") || n == "auxtrace_error");
        if wanted {
            side::want();
        }
        StatCalls {
            module: m.clone().unbind(),
            wanted,
            interval: callable(m, "stat__interval"),
            auxtrace_error: callable(m, "auxtrace_error"),
            counters: Vec::new(),
            handlers: Vec::new(),
            aggr_mode: AGGR_GLOBAL,
            scale: true,
            cpus: vec![-1],
            threads: vec![-1],
            counts: HashMap::new(),
            prev: HashMap::new(),
        }
    }

    /// Whether the script has any of these hooks.
    pub fn wanted(&self) -> bool {
        self.wanted
    }

    /// Handle the records, in order; the first hook that fails ends the call.
    pub fn feed(&mut self, py: Python<'_>, records: &[SideRecord]) -> Result<(), Failure> {
        for r in records {
            match r {
                SideRecord::Counters(names) => {
                    let m = self.module.bind(py);
                    self.handlers = names
                        .iter()
                        .map(|n| callable(m, &handler_name(n)))
                        .collect();
                    self.counters = names.clone();
                    self.counts.clear();
                    self.prev.clear();
                }
                SideRecord::Config(pairs) => {
                    for &(tag, val) in pairs {
                        match tag {
                            TAG_AGGR_MODE => self.aggr_mode = val,
                            TAG_SCALE => self.scale = val != 0,
                            _ => {}
                        }
                    }
                }
                SideRecord::Threads(t) => self.threads = t.clone(),
                SideRecord::Cpus(c) => self.cpus = c.clone(),
                SideRecord::Stat {
                    counter,
                    cpu,
                    thread,
                    val,
                    ena,
                    run,
                } => {
                    // perf refuses a CPU its map does not have, and an unknown id.
                    let (Some(c), Some(at)) = (counter, self.cpus.iter().position(|x| x == cpu))
                    else {
                        continue;
                    };
                    let key = (*c, at, *thread as usize);
                    if self.counts.len() < 1 << 20 || self.counts.contains_key(&key) {
                        self.counts.insert(key, [*val, *ena, *run]);
                    }
                }
                SideRecord::Round { time, .. } => self.round(py, *time)?,
                SideRecord::AuxtraceError(e) => self.auxtrace(py, e)?,
            }
        }
        Ok(())
    }

    /// A STAT_ROUND: every counter's hook, then `stat__interval`.
    fn round(&mut self, py: Python<'_>, time: u64) -> Result<(), Failure> {
        let scale = self.scale;
        for c in 0..self.counters.len() {
            let h = self.handlers.get(c).and_then(Option::as_ref);
            let name = || handler_name(self.counters[c]);
            if self.aggr_mode == AGGR_GLOBAL {
                let mut sum = [0u64; 3];
                for at in 0..self.cpus.len() {
                    for t in 0..self.threads.len() {
                        if let Some(v) = self.counts.get(&(c, at, t)) {
                            for i in 0..3 {
                                sum[i] = sum[i].wrapping_add(v[i]);
                            }
                        }
                    }
                }
                let last = self.prev.insert((c, usize::MAX, usize::MAX), sum);
                delta(&mut sum, last);
                scaled(&mut sum, scale);
                if let Some(h) = h {
                    let args = (-1i32, -1i32, time as i64, sum[0] as i64, sum[1] as i64);
                    let args = (args.0, args.1, args.2, args.3, args.4, sum[2] as i64);
                    h.call1(py, args).map_err(|e| (name(), e))?;
                }
                continue;
            }
            for t in 0..self.threads.len() {
                for at in 0..self.cpus.len() {
                    // perf makes the kept counts the round's increase and scales them, in
                    // place.
                    let v = self.counts.entry((c, at, t)).or_default();
                    let last = self.prev.insert((c, at, t), *v);
                    delta(v, last);
                    scaled(v, scale);
                    let v = *v;
                    if let Some(h) = h {
                        let args = (
                            self.cpus[at],
                            self.threads[t],
                            time as i64,
                            v[0] as i64,
                            v[1] as i64,
                            v[2] as i64,
                        );
                        h.call1(py, args).map_err(|e| (name(), e))?;
                    }
                }
            }
        }
        if let Some(f) = &self.interval {
            f.call1(py, (time as i64,))
                .map_err(|e| ("stat__interval".to_string(), e))?;
        }
        Ok(())
    }

    fn auxtrace(&self, py: Python<'_>, e: &AuxtraceError) -> Result<(), Failure> {
        let Some(f) = &self.auxtrace_error else {
            return Ok(());
        };
        let args = (
            e.typ,
            e.code,
            e.cpu,
            e.pid,
            e.tid,
            e.ip as i64,
            e.time as i64,
            String::from_utf8_lossy(&e.msg).into_owned(),
            e.cpumode as u32,
            e.machine_pid,
            e.vcpu,
        );
        f.call1(py, args)
            .map(drop)
            .map_err(|e| ("auxtrace_error".to_string(), e))
    }
}

/// perf's `evsel__compute_deltas`: the increase since the last round's raw counts.
fn delta(v: &mut [u64; 3], last: Option<[u64; 3]>) {
    if let Some(last) = last {
        for i in 0..3 {
            v[i] = v[i].wrapping_sub(last[i]);
        }
    }
}

/// perf's `perf_counts_values__scale`: a counter that ran part of the time is scaled up to
/// the whole, one that never ran counts 0.
fn scaled(v: &mut [u64; 3], scale: bool) {
    let [val, ena, run] = *v;
    if !scale {
        return;
    }
    if run == 0 {
        v[0] = 0;
    } else if run < ena {
        v[0] = (val as f64 * ena as f64 / run as f64) as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh module each call (`from_code` runs the code in an existing module of the
    /// same name: tests run in one interpreter).
    fn module<'py>(py: Python<'py>, code: &std::ffi::CStr) -> Bound<'py, PyModule> {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = std::ffi::CString::new(format!("stat_test_{n}")).unwrap();
        PyModule::from_code(py, code, c"stat_test.py", &name).unwrap()
    }

    #[test]
    fn values_scale_as_perf_scales_them() {
        let mut v = [100, 20, 10];
        scaled(&mut v, true);
        assert_eq!(v, [200, 20, 10]);
        let mut v = [100, 20, 0];
        scaled(&mut v, true);
        assert_eq!(v[0], 0);
        let mut v = [100, 20, 10];
        scaled(&mut v, false);
        assert_eq!(v[0], 100);
    }

    #[test]
    fn a_round_calls_each_counters_hook_per_cpu_then_the_interval() {
        super::super::interp::init().unwrap();
        Python::attach(|py| {
            let m = module(
                py,
                c"seen = []\ndef stat__sched_sched_switch(*a):\n    seen.append(('s',) + a)\ndef stat__interval(t):\n    seen.append(('i', t))\n",
            );
            let mut s = StatCalls::new(&m);
            assert!(s.wanted());
            let stat = |counter, cpu, val| SideRecord::Stat {
                counter: Some(counter),
                cpu,
                thread: 0,
                val,
                ena: 10,
                run: 10,
            };
            let records = [
                SideRecord::Counters(vec!["cycles", "sched:sched_switch"]),
                SideRecord::Config(vec![(TAG_AGGR_MODE, 0), (TAG_SCALE, 1)]),
                SideRecord::Threads(vec![-1]),
                SideRecord::Cpus(vec![0, 1]),
                stat(1, 0, 5),
                stat(1, 1, 7),
                // A CPU the map does not have: refused, as perf does.
                stat(1, 9, 1000),
                SideRecord::Round {
                    interval: true,
                    time: 100,
                },
            ];
            s.feed(py, &records).map_err(|(_, e)| e).unwrap();
            let seen: Vec<Bound<'_, PyAny>> = m.getattr("seen").unwrap().extract().unwrap();
            let seen: Vec<String> = seen.iter().map(|x| x.repr().unwrap().to_string()).collect();
            assert_eq!(
                seen,
                [
                    "('s', 0, -1, 100, 5, 10, 10)",
                    "('s', 1, -1, 100, 7, 10, 10)",
                    "('i', 100)"
                ]
            );
            // Global aggregation: one call, summed, CPU and thread -1.
            m.setattr("seen", pyo3::types::PyList::empty(py)).unwrap();
            let records = [
                SideRecord::Config(vec![(TAG_AGGR_MODE, AGGR_GLOBAL)]),
                SideRecord::Round {
                    interval: false,
                    time: 200,
                },
            ];
            s.feed(py, &records).map_err(|(_, e)| e).unwrap();
            let seen: Vec<Bound<'_, PyAny>> = m.getattr("seen").unwrap().extract().unwrap();
            let seen: Vec<String> = seen.iter().map(|x| x.repr().unwrap().to_string()).collect();
            assert_eq!(seen, ["('s', -1, -1, 200, 12, 20, 20)", "('i', 200)"]);
        });
    }

    /// The records come in however many takes the worker makes: each round gives the
    /// increase since the last, whatever the split.
    #[test]
    fn rounds_give_increases_however_the_records_are_split() {
        super::super::interp::init().unwrap();
        let stat = |counter, cpu, val| SideRecord::Stat {
            counter: Some(counter),
            cpu,
            thread: 0,
            val,
            ena: val,
            run: val,
        };
        let mut records = vec![
            SideRecord::Counters(vec!["page-faults", "task-clock"]),
            SideRecord::Threads(vec![-1]),
            SideRecord::Cpus(vec![0, 1]),
            SideRecord::Config(vec![(TAG_AGGR_MODE, AGGR_GLOBAL), (1, 10), (TAG_SCALE, 1)]),
        ];
        for (round, base) in [(1u64, 10u64), (2, 25), (3, 27)] {
            for c in 0..2usize {
                records.push(stat(c, 0, base * (c as u64 + 1)));
                records.push(stat(c, 1, base));
            }
            records.push(SideRecord::Round {
                interval: true,
                time: round,
            });
        }
        Python::attach(|py| {
            let run = |split: usize| -> Vec<String> {
                let m = module(
                    py,
                    c"seen = []\ndef _h(*a):\n    seen.append(a)\nglobals()['stat__page-faults'] = _h\n",
                );
                let mut s = StatCalls::new(&m);
                s.feed(py, &records[..split]).map_err(|(_, e)| e).unwrap();
                s.feed(py, &records[split..]).map_err(|(_, e)| e).unwrap();
                let seen: Vec<Bound<'_, PyAny>> = m.getattr("seen").unwrap().extract().unwrap();
                seen.iter().map(|x| x.repr().unwrap().to_string()).collect()
            };
            let whole = run(records.len());
            assert_eq!(
                whole,
                [
                    "(-1, -1, 1, 20, 20, 20)",
                    "(-1, -1, 2, 30, 30, 30)",
                    "(-1, -1, 3, 4, 4, 4)"
                ]
            );
            for split in 0..records.len() {
                assert_eq!(run(split), whole, "split at {split}");
            }
        });
    }

    #[test]
    fn an_auxtrace_error_reaches_its_hook_with_perfs_arguments() {
        super::super::interp::init().unwrap();
        Python::attach(|py| {
            let m = module(
                py,
                c"seen = []\ndef auxtrace_error(*a):\n    seen.append(a)\n",
            );
            let mut s = StatCalls::new(&m);
            let e = AuxtraceError {
                typ: 1,
                code: 2,
                cpu: 3,
                pid: 40,
                tid: 41,
                ip: 0xffff_ffff_8100_0000,
                time: 1234,
                msg: b"lost trace data".to_vec(),
                cpumode: 1,
                machine_pid: 0,
                vcpu: -1,
            };
            s.feed(py, &[SideRecord::AuxtraceError(e)])
                .map_err(|(_, e)| e)
                .unwrap();
            let seen: Vec<Bound<'_, PyAny>> = m.getattr("seen").unwrap().extract().unwrap();
            assert_eq!(
                seen[0].repr().unwrap().to_string(),
                format!(
                    "(1, 2, 3, 40, 41, {}, 1234, 'lost trace data', 1, 0, -1)",
                    0xffff_ffff_8100_0000u64 as i64
                )
            );
        });
    }
}
