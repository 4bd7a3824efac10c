//! `--metrics ADDR`: perfwatch's counters as Prometheus text at `GET /metrics`.
//!
//! Two halves that share only a snapshot:
//! - [`MetricsTap`], a [`Tap`] beside the frontend on the pipeline's thread: it counts every
//!   ordered event into families (samples per CPU and event, sampled busy time per CPU,
//!   process forks/execs/exits per command and per control group, samples per symbol,
//!   tracepoint hits) and, a few times a second, renders them into text and publishes it
//!   (an `Arc` swapped under a lock held for a pointer copy; never waited for: a busy lock
//!   skips the publication).
//! - [`server`], a thread of its own that serves the last published text plus what it reads
//!   itself at each scrape (losses, drops, late and hidden records from the monitor's atomic
//!   counters, perfwatch's own CPU time, RSS and start time).
//!
//! prometheus-client was evaluated and not taken: its `Family` keeps label sets in a map
//! behind a lock that its encoder holds while a scrape is written, so a slow scrape would make
//! the pipeline wait, and it has no bounded top-N-plus-`other` family; the text format is a
//! few lines of writing, so perfwatch renders it itself.

pub mod family;
pub mod server;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::event::{Event, EventKind};
use crate::pipeline::Tap;
use crate::process::ProcessModel;
use crate::stats::Stats;
use family::TopFamily;

/// How often the tap publishes a new snapshot.
const PUBLISH_EVERY: Duration = Duration::from_millis(250);

/// The text the tap last published, shared with the server.
#[derive(Default)]
pub(crate) struct Published {
    text: Mutex<Arc<str>>,
    /// Publications so far (0: none yet).
    pub version: AtomicU64,
}

impl Published {
    pub fn get(&self) -> Arc<str> {
        match self.text.lock() {
            Ok(t) => Arc::clone(&t),
            Err(p) => Arc::clone(&p.into_inner()),
        }
    }

    /// Swap in `text` unless a reader holds the lock this instant (then the next one does).
    fn put(&self, text: Arc<str>) {
        if let Ok(mut t) = self.text.try_lock() {
            *t = text;
            self.version
                .fetch_add(1, std::sync::atomic::Ordering::Release);
        }
    }
}

/// Counters the server reads itself at each scrape (the monitor's).
#[derive(Clone)]
pub(crate) struct Live {
    pub stats: Arc<Stats>,
    pub late: Arc<AtomicU64>,
    pub hidden: Arc<AtomicU64>,
}

/// The counting half: see the module's doc.
pub(crate) struct MetricsTap {
    out: Arc<Published>,
    next_publish: Instant,
    samples: BTreeMap<(u32, &'static str), u64>,
    /// Sampled time (the period of `cpu-clock`/`task-clock` samples, ns) per CPU: all, and
    /// of tasks other than the idle task.
    sampled_ns: BTreeMap<u32, (u64, u64)>,
    /// `sampled_ns` at the last publication and when, for the utilisation gauge.
    window: (Instant, BTreeMap<u32, (u64, u64)>),
    utilisation: BTreeMap<u32, f64>,
    tracepoints: BTreeMap<&'static str, u64>,
    comm: [TopFamily; 3],
    cgroup: [TopFamily; 3],
    symbols: TopFamily,
    /// The label text of each symbol seen (see [`MAX_SYMBOL_KEYS`]).
    symbol_keys: HashMap<Option<crate::symbols::SymbolKey>, Box<str>>,
    text: String,
}

/// Symbols whose label text is kept; the cache starts again past it.
const MAX_SYMBOL_KEYS: usize = 1 << 16;

const TASK_KINDS: [&str; 3] = ["fork", "exec", "exit"];

impl MetricsTap {
    pub fn new(top: usize, out: Arc<Published>) -> MetricsTap {
        let fam = || [0, 1, 2].map(|_| TopFamily::new(top));
        MetricsTap {
            out,
            next_publish: Instant::now(),
            samples: BTreeMap::new(),
            sampled_ns: BTreeMap::new(),
            window: (Instant::now(), BTreeMap::new()),
            utilisation: BTreeMap::new(),
            tracepoints: BTreeMap::new(),
            comm: fam(),
            cgroup: fam(),
            symbols: TopFamily::new(top),
            symbol_keys: HashMap::new(),
            text: String::new(),
        }
    }

    /// Count one event (the model as of the chunk it is in).
    pub fn count(&mut self, ev: &Event, model: &ProcessModel) {
        let task = match &ev.kind {
            EventKind::Sample {
                event, period, sym, ..
            } => {
                *self.samples.entry((ev.cpu, event.name)).or_default() += 1;
                if event.format.is_some() {
                    *self.tracepoints.entry(event.name).or_default() += 1;
                } else if is_clock(event.name) {
                    let t = self.sampled_ns.entry(ev.cpu).or_default();
                    t.0 += period;
                    if ev.pid != 0 {
                        t.1 += period;
                    }
                }
                // Names are escaped text already; a NUL joins the two labels. Made once per
                // symbol (a bounded cache), not per sample.
                let known = sym.as_deref().and_then(|n| n.sym());
                let id = known.map(|s| s.symbol().key());
                if self.symbol_keys.len() >= MAX_SYMBOL_KEYS {
                    self.symbol_keys.clear();
                }
                let key = self.symbol_keys.entry(id).or_insert_with(|| match known {
                    Some(s) => {
                        let dso = s.dso();
                        let dso = if dso.name().is_empty() {
                            dso.unnamed()
                        } else {
                            dso.name()
                        };
                        format!(
                            "{}\0{}",
                            s.symbol().display_name().replace('\0', "?"),
                            dso.replace('\0', "?")
                        )
                        .into()
                    }
                    None => {
                        format!("{}\0{}", crate::symbols::UNKNOWN, crate::symbols::UNKNOWN).into()
                    }
                });
                self.symbols.add(key, 1);
                return;
            }
            // Processes, not threads: a new thread has its own tid.
            EventKind::Fork(t) if t.pid == t.tid => Some((0, t.pid)),
            EventKind::Comm {
                pid, exec: true, ..
            } => Some((1, *pid)),
            EventKind::Exit(t) if t.pid == t.tid => Some((2, t.pid)),
            _ => None,
        };
        if let Some((kind, pid)) = task {
            let comm = match &ev.kind {
                EventKind::Comm { comm, .. } => crate::text::escape(comm),
                _ => match model.comm_at(pid, ev.time) {
                    Some(c) => crate::text::escape(c.as_bytes()),
                    None => crate::symbols::UNKNOWN.to_string(),
                },
            };
            self.comm[kind].add(&comm, 1);
            let cg = model
                .process_at(pid, ev.time)
                .and_then(|p| p.cgroup.as_deref())
                .map_or_else(
                    || crate::symbols::UNKNOWN.to_string(),
                    |c| crate::text::escape(c.as_bytes()),
                );
            self.cgroup[kind].add(&cg, 1);
        }
    }

    /// Render the families and publish them.
    pub(crate) fn publish(&mut self) {
        let now = Instant::now();
        let secs = now.duration_since(self.window.0).as_secs_f64();
        if secs > 0.0 {
            for (cpu, &(_, busy)) in &self.sampled_ns {
                let (_, busy0) = self.window.1.get(cpu).copied().unwrap_or((0, 0));
                let u = (busy - busy0) as f64 / 1e9 / secs;
                self.utilisation.insert(*cpu, u.clamp(0.0, 1.0));
            }
            self.window = (now, self.sampled_ns.clone());
        }
        let mut t = std::mem::take(&mut self.text);
        t.clear();
        family_header(
            &mut t,
            "perfwatch_samples_total",
            "counter",
            "Samples read, per CPU and event.",
        );
        for ((cpu, event), n) in &self.samples {
            let _ = writeln!(
                t,
                "perfwatch_samples_total{{cpu=\"{cpu}\",event=\"{}\"}} {n}",
                label(event)
            );
        }
        family_header(
            &mut t,
            "perfwatch_cpu_busy_seconds_total",
            "counter",
            "Time cpu-clock/task-clock samples found a task other than idle running, per CPU.",
        );
        for (cpu, (_, busy)) in &self.sampled_ns {
            let _ = writeln!(
                t,
                "perfwatch_cpu_busy_seconds_total{{cpu=\"{cpu}\"}} {}",
                *busy as f64 / 1e9
            );
        }
        family_header(
            &mut t,
            "perfwatch_cpu_utilisation_ratio",
            "gauge",
            "Share of the last publication interval (0.25 s) the CPU was busy, from clock samples.",
        );
        for (cpu, u) in &self.utilisation {
            let _ = writeln!(t, "perfwatch_cpu_utilisation_ratio{{cpu=\"{cpu}\"}} {u:.4}");
        }
        family_header(
            &mut t,
            "perfwatch_tracepoint_hits_total",
            "counter",
            "Tracepoint samples, per event.",
        );
        for (event, n) in &self.tracepoints {
            let _ = writeln!(
                t,
                "perfwatch_tracepoint_hits_total{{event=\"{}\"}} {n}",
                label(event)
            );
        }
        for (i, kind) in TASK_KINDS.iter().enumerate() {
            let name = format!("perfwatch_process_{kind}s_total");
            family_header(
                &mut t,
                &name,
                "counter",
                &format!(
                    "Process {kind}s, per command name (the most active, the rest in comm=\"other\")."
                ),
            );
            let (series, other) = self.comm[i].publish();
            write_series(&mut t, &name, &[("comm", None)], &series, other);
            let name = format!("perfwatch_cgroup_process_{kind}s_total");
            family_header(
                &mut t,
                &name,
                "counter",
                &format!(
                    "Process {kind}s, per control group (the most active, the rest in cgroup=\"other\")."
                ),
            );
            let (series, other) = self.cgroup[i].publish();
            write_series(&mut t, &name, &[("cgroup", None)], &series, other);
        }
        family_header(
            &mut t,
            "perfwatch_symbol_samples_total",
            "counter",
            "Samples per symbol and binary (the most sampled, the rest in symbol=\"other\").",
        );
        let (series, other) = self.symbols.publish();
        write_series(
            &mut t,
            "perfwatch_symbol_samples_total",
            &[("symbol", None), ("dso", Some("other"))],
            &series,
            other,
        );
        let text: Arc<str> = Arc::from(t.as_str());
        self.text = t;
        self.out.put(text);
    }
}

impl Tap for MetricsTap {
    fn chunk(&mut self, events: &[Event], model: &ProcessModel) {
        for ev in events {
            self.count(ev, model);
        }
        let now = Instant::now();
        if now >= self.next_publish {
            self.next_publish = now + PUBLISH_EVERY;
            self.publish();
        }
    }
}

fn is_clock(name: &str) -> bool {
    let base = name.split([':', '/']).next().unwrap_or("");
    base == "cpu-clock" || base == "task-clock"
}

pub(crate) fn family_header(t: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(t, "# HELP {name} {help}");
    let _ = writeln!(t, "# TYPE {name} {kind}");
}

/// `values` hold one label value, or several joined by NUL in `labels`' order; `other` gets
/// each label's `Some` stand-in (or `other`).
fn write_series(
    t: &mut String,
    name: &str,
    labels: &[(&str, Option<&str>)],
    values: &[(Box<str>, u64)],
    other: Option<u64>,
) {
    let mut line = |parts: &mut dyn Iterator<Item = &str>, n: u64| {
        t.push_str(name);
        t.push('{');
        for (i, ((l, _), v)) in labels.iter().zip(parts).enumerate() {
            if i > 0 {
                t.push(',');
            }
            let _ = write!(t, "{l}=\"{}\"", label(v));
        }
        let _ = writeln!(t, "}} {n}");
    };
    for (v, n) in values {
        line(&mut v.split('\0'), *n);
    }
    if let Some(n) = other {
        line(&mut labels.iter().map(|(_, o)| o.unwrap_or("other")), n);
    }
}

/// A label value as the text format wants it (already sanitized text: no control bytes).
pub(crate) fn label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::events::{comm, exit, fork};

    #[test]
    fn forks_execs_and_exits_are_counted_per_command_with_help_and_type() {
        let out = Arc::new(Published::default());
        let mut tap = MetricsTap::new(5, out.clone());
        let mut model = ProcessModel::new();
        let evs = vec![
            comm(0, 5, 1, b"init", false),
            fork(0, 10, 50, 1),
            comm(0, 11, 50, b"mark\"er\x1b", true),
            fork(0, 12, 51, 50),
            exit(0, 13, 51, 50),
        ];
        let chunk = crate::event::Chunk {
            events: evs.clone(),
            watermark: 100,
        };
        model.apply_chunk(&chunk, |_, _| true);
        tap.chunk(&evs, &model);
        let text = out.get();
        assert!(text.contains("# TYPE perfwatch_process_forks_total counter"));
        assert!(
            text.contains("perfwatch_process_execs_total{comm=\"mark\\\"er\\\\x1b\"} 1"),
            "{text}"
        );
        assert!(text.contains("perfwatch_process_forks_total{comm=\"mark\\\"er\\\\x1b\"} 1"));
        assert!(text.contains("perfwatch_process_forks_total{comm=\"init\"} 1"));
        assert!(text.contains("perfwatch_process_exits_total{comm=\"mark\\\"er\\\\x1b\"} 1"));
    }
}
