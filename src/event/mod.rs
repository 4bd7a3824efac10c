//! The one event model the rest of the program sees.
//!
//! The reader threads decode kernel records into [`Event`]s; the TUI, `--plain`/`--json` and
//! the Python stage only ever see this type, never file descriptors or raw bytes.
//!
//! `Display` prints an event the way perf's Python binding (and its `twatch.py` example) does:
//! `cpu: 0, pid: 1, tid: 1 { type: fork, pid: 2, ppid: 1, tid: 2, ptid: 1, time: 123}`.
//! [`Event::body`] is the `{ ... }` part alone, which is what `str(event)` gives in Python.

use std::sync::Mutex;

use crate::callchain::Callchain;
use crate::event::tracepoint::{Field, Format, Value};
pub(crate) use crate::symbols::BuildId;

mod batch;
pub mod members;
mod names;
pub mod tracepoint;
mod user_stack;

pub use batch::{Batch, Chunk};

pub(crate) use batch::{BufferPool, SLACK_NS};
pub(crate) use names::SampleNames;
pub use user_stack::{UserRegs, UserStack};

/// What a sample knows about the event that took it: its name and, for a tracepoint, the
/// format its RAW bytes are decoded with.
///
/// One per opened event, shared by every sample of that event as a `&'static` (as `tracing`
/// shares its callsites' metadata): a sample carries a pointer, not a copy or a refcount, and
/// any consumer (the `--plain`/`--json` writers, the filter, scripts, the TUI) can name its
/// event and decode its fields without a table passed alongside. Descriptors are interned
/// ([`EventDesc::intern`]): opening the same events again reuses them, so the memory they
/// take is bounded by the distinct events a process ever opens.
#[derive(Debug, PartialEq, Eq)]
pub struct EventDesc {
    /// Position in the monitor's event list ([`crate::monitor::MonitorInfo::events`]).
    pub index: u16,
    /// The name as perf spells it, with modifiers: `cycles`, `cpu-clock:u`,
    /// `sched:sched_switch`.
    pub name: &'static str,
    /// `perf_event_attr.type` and `.config`.
    pub type_: u32,
    pub config: u64,
    /// A tracepoint's format.
    pub format: Option<Format>,
    /// Samples name their event in `--plain` (more than one event open, or a tracepoint).
    pub show_name: bool,
    /// Tracepoint fields include the `common_*` ones.
    pub show_common: bool,
}

/// The descriptor of samples whose event is not known (hand-made events, a lone event).
pub static UNNAMED: EventDesc = EventDesc {
    index: 0,
    name: "",
    type_: u32::MAX,
    config: 0,
    format: None,
    show_name: false,
    show_common: false,
};

impl EventDesc {
    /// A `&'static` copy of `self`, shared with any equal descriptor interned before.
    pub fn intern(self) -> &'static EventDesc {
        static ALL: Mutex<Vec<&'static EventDesc>> = Mutex::new(Vec::new());
        let mut all = ALL.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = all.iter().find(|d| ***d == self) {
            return d;
        }
        let d: &'static EventDesc = Box::leak(Box::new(self));
        all.push(d);
        d
    }

    /// A name leaked for [`EventDesc::name`] (interned names are few and live as long).
    pub(crate) fn leak_name(name: &str) -> &'static str {
        static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
        let mut all = NAMES.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = all.iter().find(|n| **n == name) {
            return n;
        }
        let n: &'static str = Box::leak(name.to_string().into_boxed_str());
        all.push(n);
        n
    }

    pub fn is_tracepoint(&self) -> bool {
        self.format.is_some()
    }
}

impl EventKind {
    /// A sample of no particular event (tests, benchmarks).
    pub fn sample(ip: u64, period: u64, misc: u16) -> EventKind {
        EventKind::Sample {
            ip,
            period,
            misc,
            event: &UNNAMED,
            raw: None,
            callchain: None,
            user_stack: None,
            sym: None,
        }
    }
}

/// One decoded record, with the `sample_id` fields that `sample_id_all` attaches to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// CPU the record was written on (`PERF_SAMPLE_CPU`, else the ring's CPU).
    pub cpu: u32,
    /// Process id of the task that was running when the record was written.
    pub pid: u32,
    /// Thread id of that task.
    pub tid: u32,
    /// CLOCK_MONOTONIC nanoseconds (`use_clockid`), comparable across CPUs.
    pub time: u64,
    /// The kernel's id of the event that wrote the record (`PERF_SAMPLE_IDENTIFIER`).
    pub id: u64,
    pub kind: EventKind,
}

/// What happened. Per-type members are named as in perf's Python binding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// PERF_RECORD_SAMPLE, of the event `event`; `raw` holds a tracepoint's PERF_SAMPLE_RAW
    /// bytes, decoded into fields by `event.format` when they are read ([`Event::fields`]);
    /// `callchain` the PERF_SAMPLE_CALLCHAIN entries (`-g`).
    Sample {
        ip: u64,
        period: u64,
        misc: u16,
        event: &'static EventDesc,
        raw: Option<Box<[u8]>>,
        callchain: Option<Callchain>,
        /// `--call-graph dwarf`: the user registers and stack copy, until the unwind step has
        /// made them the user part of `callchain` (then `None`).
        user_stack: Option<Box<UserStack>>,
        /// The names of the sample's address and frames, once the symbolize step has
        /// named them (`None` before, or without symbols). Shared: the samples of one chunk
        /// with the same stack share one.
        sym: Option<std::sync::Arc<SampleNames>>,
    },
    /// PERF_RECORD_FORK: a new task (process or thread).
    Fork(TaskRecord),
    /// PERF_RECORD_EXIT.
    Exit(TaskRecord),
    /// PERF_RECORD_COMM: a task's name changed; `exec` when by execve.
    Comm {
        pid: u32,
        tid: u32,
        comm: Box<[u8]>,
        exec: bool,
    },
    /// PERF_RECORD_MMAP or PERF_RECORD_MMAP2 (executable mappings).
    Mmap(Box<MmapRecord>),
    /// PERF_RECORD_LOST: the ring was full and the kernel dropped `lost` records.
    Lost { id: u64, lost: u64 },
    /// PERF_RECORD_LOST_SAMPLES: the PMU side dropped `lost` samples.
    LostSamples { lost: u64 },
    /// PERF_RECORD_THROTTLE / UNTHROTTLE: sampling was throttled by the kernel's rate limit.
    Throttle {
        throttled: bool,
        time: u64,
        id: u64,
        stream_id: u64,
    },
    /// PERF_RECORD_SWITCH / SWITCH_CPU_WIDE (with `--switch`).
    Switch {
        out: bool,
        preempt: bool,
        next_prev: Option<(u32, u32)>,
    },
}

/// The body of FORK and EXIT records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskRecord {
    pub pid: u32,
    pub ppid: u32,
    pub tid: u32,
    pub ptid: u32,
    pub time: u64,
}

/// The body of MMAP and MMAP2 records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MmapRecord {
    pub pid: u32,
    pub tid: u32,
    pub start: u64,
    pub len: u64,
    pub pgoff: u64,
    pub filename: Box<[u8]>,
    /// Present for MMAP2 records.
    pub mmap2: Option<Mmap2Extra>,
}

/// What MMAP2 adds: the file's identity, or a build id, and the mapping's protection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mmap2Extra {
    pub maj: u32,
    pub min: u32,
    pub ino: u64,
    pub ino_generation: u64,
    pub prot: u32,
    pub flags: u32,
    /// With `PERF_RECORD_MISC_MMAP_BUILD_ID`, the record carries the file's build id in place
    /// of its device and inode (which are then 0).
    pub build_id: Option<BuildId>,
}

/// The record types perfwatch knows, as a small index for per-type counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RecordType {
    Sample,
    Fork,
    Exit,
    Comm,
    Mmap,
    Lost,
    LostSamples,
    Throttle,
    Unthrottle,
    Switch,
}

impl RecordType {
    pub(crate) const ALL: [RecordType; 10] = [
        RecordType::Sample,
        RecordType::Fork,
        RecordType::Exit,
        RecordType::Comm,
        RecordType::Mmap,
        RecordType::Lost,
        RecordType::LostSamples,
        RecordType::Throttle,
        RecordType::Unthrottle,
        RecordType::Switch,
    ];
    pub const COUNT: usize = Self::ALL.len();

    /// The name used in `type:` fields, filters and Python (`event.type`).
    pub fn name(self) -> &'static str {
        match self {
            RecordType::Sample => "sample",
            RecordType::Fork => "fork",
            RecordType::Exit => "exit",
            RecordType::Comm => "comm",
            RecordType::Mmap => "mmap",
            RecordType::Lost => "lost",
            RecordType::LostSamples => "lost_samples",
            RecordType::Throttle => "throttle",
            RecordType::Unthrottle => "unthrottle",
            RecordType::Switch => "context_switch",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<RecordType> {
        let name = name.trim();
        Self::ALL
            .iter()
            .copied()
            .find(|t| t.name().eq_ignore_ascii_case(name))
            .or(match name {
                "switch" => Some(RecordType::Switch),
                "mmap2" => Some(RecordType::Mmap),
                _ => None,
            })
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

impl EventKind {
    pub fn record_type(&self) -> RecordType {
        match self {
            EventKind::Sample { .. } => RecordType::Sample,
            EventKind::Fork(_) => RecordType::Fork,
            EventKind::Exit(_) => RecordType::Exit,
            EventKind::Comm { .. } => RecordType::Comm,
            EventKind::Mmap(_) => RecordType::Mmap,
            EventKind::Lost { .. } => RecordType::Lost,
            EventKind::LostSamples { .. } => RecordType::LostSamples,
            EventKind::Throttle {
                throttled: true, ..
            } => RecordType::Throttle,
            EventKind::Throttle {
                throttled: false, ..
            } => RecordType::Unthrottle,
            EventKind::Switch { .. } => RecordType::Switch,
        }
    }
}

impl Event {
    pub fn record_type(&self) -> RecordType {
        self.kind.record_type()
    }

    /// The event that took a sample (`None` for side-band and loss records).
    pub(crate) fn event_desc(&self) -> Option<&'static EventDesc> {
        match &self.kind {
            EventKind::Sample { event, .. } => Some(event),
            _ => None,
        }
    }

    /// A sample's event name, when it has one.
    pub fn event_name(&self) -> Option<&'static str> {
        self.event_desc().map(|d| d.name).filter(|n| !n.is_empty())
    }

    /// The tracepoint fields of a sample, decoded from its RAW bytes: all of them (with the
    /// `common_*` ones) when `common`, else those shown by default.
    pub fn fields(&self, common: bool) -> impl Iterator<Item = (&Field, Value<'_>)> {
        let (fmt, raw) = match &self.kind {
            EventKind::Sample {
                event,
                raw: Some(raw),
                ..
            } => (event.format.as_ref(), &raw[..]),
            _ => (None, &[][..]),
        };
        let show = common || self.event_desc().is_some_and(|d| d.show_common);
        fmt.into_iter()
            .flat_map(move |f| f.shown(show))
            .map(move |f| (f, f.value(raw)))
    }

    /// One tracepoint field by name (`common_*` ones included).
    pub fn field(&self, name: &str) -> Option<Value<'_>> {
        match &self.kind {
            EventKind::Sample {
                event,
                raw: Some(raw),
                ..
            } => Some(event.format.as_ref()?.field(name)?.value(raw)),
            _ => None,
        }
    }

    /// A sample's instruction pointer and period; None for other records.
    pub fn ip_period(&self) -> Option<(u64, u64)> {
        match self.kind {
            EventKind::Sample { ip, period, .. } => Some((ip, period)),
            _ => None,
        }
    }

    /// A sample's call chain (`-g`).
    pub fn callchain(&self) -> Option<&Callchain> {
        match &self.kind {
            EventKind::Sample { callchain, .. } => callchain.as_ref(),
            _ => None,
        }
    }

    /// A sample's names, once the symbolize step has named it.
    pub fn names(&self) -> Option<&SampleNames> {
        match &self.kind {
            EventKind::Sample { sym, .. } => sym.as_deref(),
            _ => None,
        }
    }

    /// A sample's own symbol, when named.
    pub fn sym(&self) -> Option<&crate::symbols::Symbolized> {
        self.names()?.sym()
    }

    /// The task the record is about, (pid, tid): the forked/exited/renamed/mapping task for
    /// side-band records, the running task for samples. Filters on `pid:` use this.
    #[inline]
    pub(crate) fn subject(&self) -> (u32, u32) {
        match &self.kind {
            EventKind::Fork(t) | EventKind::Exit(t) => (t.pid, t.tid),
            EventKind::Comm { pid, tid, .. } => (*pid, *tid),
            EventKind::Mmap(m) => (m.pid, m.tid),
            _ => (self.pid, self.tid),
        }
    }

    /// The pid of [`Event::subject`].
    pub fn subject_pid(&self) -> u32 {
        self.subject().0
    }

    /// The tid of [`Event::subject`].
    pub(crate) fn subject_tid(&self) -> u32 {
        self.subject().1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_type_names_round_trip() {
        for t in RecordType::ALL {
            assert_eq!(RecordType::from_name(t.name()), Some(t));
        }
        assert_eq!(RecordType::from_name("nope"), None);
    }
}
