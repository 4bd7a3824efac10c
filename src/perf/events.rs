//! Event names as perf spells them, and the perf_event_attr perfwatch builds for them.

use perf_event_open_sys::bindings as sys;

use super::record::DEFAULT_SAMPLE_TYPE;

/// A perf event: what `-e NAME` resolved to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventSpec {
    /// The name as the user gave it (or the fallback's name).
    pub name: String,
    pub type_: u32,
    pub config: u64,
}

impl EventSpec {
    pub fn is_hardware(&self) -> bool {
        self.type_ == sys::PERF_TYPE_HARDWARE
    }

    pub fn is_tracepoint(&self) -> bool {
        self.type_ == sys::PERF_TYPE_TRACEPOINT
    }

    /// A software clock event: samples carry nanoseconds as their period.
    pub fn is_clock(&self) -> bool {
        self.type_ == sys::PERF_TYPE_SOFTWARE
            && (self.config == sys::PERF_COUNT_SW_CPU_CLOCK as u64
                || self.config == sys::PERF_COUNT_SW_TASK_CLOCK as u64)
    }

    pub fn is_dummy(&self) -> bool {
        self.type_ == sys::PERF_TYPE_SOFTWARE && self.config == sys::PERF_COUNT_SW_DUMMY as u64
    }

    pub fn cpu_clock() -> EventSpec {
        EventSpec {
            name: "cpu-clock".into(),
            type_: sys::PERF_TYPE_SOFTWARE,
            config: sys::PERF_COUNT_SW_CPU_CLOCK as u64,
        }
    }

    pub fn task_clock() -> EventSpec {
        EventSpec {
            name: "task-clock".into(),
            type_: sys::PERF_TYPE_SOFTWARE,
            config: sys::PERF_COUNT_SW_TASK_CLOCK as u64,
        }
    }
}

/// Hardware and software events by their perf names (and perf's aliases).
const NAMED: &[(&str, u32, u32)] = &[
    (
        "cycles",
        sys::PERF_TYPE_HARDWARE,
        sys::PERF_COUNT_HW_CPU_CYCLES,
    ),
    (
        "cpu-cycles",
        sys::PERF_TYPE_HARDWARE,
        sys::PERF_COUNT_HW_CPU_CYCLES,
    ),
    (
        "instructions",
        sys::PERF_TYPE_HARDWARE,
        sys::PERF_COUNT_HW_INSTRUCTIONS,
    ),
    (
        "cache-references",
        sys::PERF_TYPE_HARDWARE,
        sys::PERF_COUNT_HW_CACHE_REFERENCES,
    ),
    (
        "cache-misses",
        sys::PERF_TYPE_HARDWARE,
        sys::PERF_COUNT_HW_CACHE_MISSES,
    ),
    (
        "branches",
        sys::PERF_TYPE_HARDWARE,
        sys::PERF_COUNT_HW_BRANCH_INSTRUCTIONS,
    ),
    (
        "branch-instructions",
        sys::PERF_TYPE_HARDWARE,
        sys::PERF_COUNT_HW_BRANCH_INSTRUCTIONS,
    ),
    (
        "branch-misses",
        sys::PERF_TYPE_HARDWARE,
        sys::PERF_COUNT_HW_BRANCH_MISSES,
    ),
    (
        "bus-cycles",
        sys::PERF_TYPE_HARDWARE,
        sys::PERF_COUNT_HW_BUS_CYCLES,
    ),
    (
        "ref-cycles",
        sys::PERF_TYPE_HARDWARE,
        sys::PERF_COUNT_HW_REF_CPU_CYCLES,
    ),
    (
        "cpu-clock",
        sys::PERF_TYPE_SOFTWARE,
        sys::PERF_COUNT_SW_CPU_CLOCK,
    ),
    (
        "task-clock",
        sys::PERF_TYPE_SOFTWARE,
        sys::PERF_COUNT_SW_TASK_CLOCK,
    ),
    (
        "page-faults",
        sys::PERF_TYPE_SOFTWARE,
        sys::PERF_COUNT_SW_PAGE_FAULTS,
    ),
    (
        "faults",
        sys::PERF_TYPE_SOFTWARE,
        sys::PERF_COUNT_SW_PAGE_FAULTS,
    ),
    (
        "minor-faults",
        sys::PERF_TYPE_SOFTWARE,
        sys::PERF_COUNT_SW_PAGE_FAULTS_MIN,
    ),
    (
        "major-faults",
        sys::PERF_TYPE_SOFTWARE,
        sys::PERF_COUNT_SW_PAGE_FAULTS_MAJ,
    ),
    (
        "context-switches",
        sys::PERF_TYPE_SOFTWARE,
        sys::PERF_COUNT_SW_CONTEXT_SWITCHES,
    ),
    (
        "cs",
        sys::PERF_TYPE_SOFTWARE,
        sys::PERF_COUNT_SW_CONTEXT_SWITCHES,
    ),
    (
        "cpu-migrations",
        sys::PERF_TYPE_SOFTWARE,
        sys::PERF_COUNT_SW_CPU_MIGRATIONS,
    ),
    (
        "migrations",
        sys::PERF_TYPE_SOFTWARE,
        sys::PERF_COUNT_SW_CPU_MIGRATIONS,
    ),
    (
        "alignment-faults",
        sys::PERF_TYPE_SOFTWARE,
        sys::PERF_COUNT_SW_ALIGNMENT_FAULTS,
    ),
    (
        "emulation-faults",
        sys::PERF_TYPE_SOFTWARE,
        sys::PERF_COUNT_SW_EMULATION_FAULTS,
    ),
    ("dummy", sys::PERF_TYPE_SOFTWARE, sys::PERF_COUNT_SW_DUMMY),
];

/// The event names `-e` accepts besides `SUBSYSTEM:TRACEPOINT`.
pub fn known_event_names() -> impl Iterator<Item = &'static str> {
    NAMED.iter().map(|(n, _, _)| *n)
}

/// Where tracefs lives; `/sys/kernel/debug/tracing` on older set-ups.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    #[error(
        "unknown event '{0}' (try cycles, instructions, cpu-clock, task-clock, page-faults, context-switches, cpu-migrations, dummy, or SUBSYSTEM:TRACEPOINT)"
    )]
    Unknown(String),
    #[error(
        "no tracepoint '{0}' (looked for its id under {1}/events; if tracefs is not mounted: mount -t tracefs nodev {1})"
    )]
    NoTracepoint(String, String),
}

/// Resolve an event name: perf's hardware/software names, or `subsystem:tracepoint`.
pub fn parse_event(name: &str) -> Result<EventSpec, EventError> {
    let trimmed = name.trim();
    let lower = trimmed.to_ascii_lowercase();
    // perf accepts an empty modifier list suffix such as "cycles:u"; perfwatch does not
    // implement modifiers, so only exact names are accepted.
    if let Some((_, ty, cfg)) = NAMED.iter().find(|(n, _, _)| *n == lower) {
        return Ok(EventSpec {
            name: trimmed.to_string(),
            type_: *ty,
            config: *cfg as u64,
        });
    }
    if let Some((sys_name, tp)) = trimmed.split_once(':') {
        let valid = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        };
        if !valid(sys_name) || !valid(tp) {
            return Err(EventError::Unknown(name.to_string()));
        }
        for root in TRACEFS {
            let path = format!("{root}/events/{sys_name}/{tp}/id");
            if let Ok(s) = std::fs::read_to_string(&path) {
                if let Ok(id) = s.trim().parse::<u64>() {
                    return Ok(EventSpec {
                        name: trimmed.to_string(),
                        type_: sys::PERF_TYPE_TRACEPOINT,
                        config: id,
                    });
                }
            }
        }
        return Err(EventError::NoTracepoint(
            trimmed.to_string(),
            TRACEFS[0].to_string(),
        ));
    }
    Err(EventError::Unknown(name.to_string()))
}

/// How often samples are taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sampling {
    /// `-F HZ`: the kernel adjusts the period to reach this many samples per second.
    Freq(u64),
    /// `-c N`: one sample every N events.
    Period(u64),
}

/// perfwatch's default sampling frequency (perf top uses 4000; a monitor that mostly shows
/// side-band records does well with less).
pub const DEFAULT_FREQ: u64 = 1000;

/// What else to ask of the kernel besides the event itself.
#[derive(Clone, Copy, Debug)]
pub struct AttrOptions {
    pub sampling: Sampling,
    /// Side-band records (task, comm, mmap).
    pub side_band: bool,
    /// Context-switch records (`--switch`).
    pub context_switch: bool,
    /// Inherit into children (task targets).
    pub inherit: bool,
    /// Enabled at the next exec of the task (`-- COMMAND`); otherwise enabled explicitly.
    pub enable_on_exec: bool,
    /// Leave out kernel-mode samples (needed without privileges when paranoid >= 2).
    pub exclude_kernel: bool,
    /// Wake the reader when this many bytes are waiting.
    pub wakeup_watermark: u32,
    /// Ask for PERF_FORMAT_LOST (Linux 6.0+), so that `read()` tells how many records the
    /// kernel dropped for this event, including those no LOST record has reported yet.
    pub read_lost: bool,
}

/// Build the perf_event_attr for `spec`.
pub fn build_attr(spec: &EventSpec, o: &AttrOptions) -> sys::perf_event_attr {
    let mut a = sys::perf_event_attr {
        type_: spec.type_,
        size: std::mem::size_of::<sys::perf_event_attr>() as u32,
        config: spec.config,
        ..Default::default()
    };
    a.sample_type = DEFAULT_SAMPLE_TYPE;
    match o.sampling {
        _ if spec.is_dummy() => a.sample_period = 1,
        // Tracepoints: every hit, as perf does.
        _ if spec.is_tracepoint() => a.sample_period = 1,
        Sampling::Freq(hz) => {
            a.set_freq(1);
            a.sample_freq = hz;
        }
        Sampling::Period(n) => a.sample_period = n,
    }
    a.set_disabled(1);
    a.set_inherit(o.inherit as u64);
    a.set_enable_on_exec(o.enable_on_exec as u64);
    a.set_exclude_kernel(o.exclude_kernel as u64);
    a.set_exclude_hv(o.exclude_kernel as u64);
    a.set_sample_id_all(1);
    a.set_use_clockid(1);
    a.clockid = libc::CLOCK_MONOTONIC;
    if o.read_lost {
        a.read_format = sys::PERF_FORMAT_LOST as u64;
    }
    a.set_watermark(1);
    a.wakeup_watermark = o.wakeup_watermark.max(1);
    if o.side_band {
        a.set_task(1);
        a.set_comm(1);
        a.set_comm_exec(1);
        a.set_mmap(1);
        a.set_mmap2(1);
    }
    if o.context_switch {
        a.set_context_switch(1);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve() {
        for (n, ty) in [
            ("cycles", sys::PERF_TYPE_HARDWARE),
            ("instructions", sys::PERF_TYPE_HARDWARE),
            ("cpu-clock", sys::PERF_TYPE_SOFTWARE),
            ("task-clock", sys::PERF_TYPE_SOFTWARE),
            ("page-faults", sys::PERF_TYPE_SOFTWARE),
            ("context-switches", sys::PERF_TYPE_SOFTWARE),
            ("cpu-migrations", sys::PERF_TYPE_SOFTWARE),
            ("dummy", sys::PERF_TYPE_SOFTWARE),
            ("CYCLES", sys::PERF_TYPE_HARDWARE),
        ] {
            assert_eq!(parse_event(n).unwrap().type_, ty, "{n}");
        }
        assert!(parse_event("cycles").unwrap().is_hardware());
        assert!(parse_event("cpu-clock").unwrap().is_clock());
        assert!(parse_event("dummy").unwrap().is_dummy());
    }

    #[test]
    fn unknown_names_are_named_in_the_error() {
        let e = parse_event("cylces").unwrap_err();
        assert!(e.to_string().contains("'cylces'"), "{e}");
        assert!(matches!(
            parse_event("nosuchsys:nosuchtp"),
            Err(EventError::NoTracepoint(..))
        ));
        assert!(matches!(parse_event("../x:y"), Err(EventError::Unknown(_))));
    }

    #[test]
    fn attr_has_side_band_and_sample_id_all() {
        let o = AttrOptions {
            sampling: Sampling::Freq(1000),
            side_band: true,
            context_switch: false,
            inherit: false,
            enable_on_exec: false,
            exclude_kernel: false,
            wakeup_watermark: 4096,
            read_lost: true,
        };
        let a = build_attr(&EventSpec::cpu_clock(), &o);
        assert_eq!(a.sample_type, DEFAULT_SAMPLE_TYPE);
        assert_eq!(
            (
                a.task(),
                a.comm(),
                a.comm_exec(),
                a.mmap(),
                a.mmap2(),
                a.sample_id_all()
            ),
            (1, 1, 1, 1, 1, 1)
        );
        assert_eq!(
            (a.freq(), a.sample_freq, a.disabled(), a.use_clockid()),
            (1, 1000, 1, 1)
        );
        assert_eq!(a.clockid, libc::CLOCK_MONOTONIC);
        assert_eq!(a.context_switch(), 0);
        let a = build_attr(
            &EventSpec::cpu_clock(),
            &AttrOptions {
                sampling: Sampling::Period(5000),
                side_band: false,
                context_switch: true,
                ..o
            },
        );
        assert_eq!(
            (a.freq(), a.sample_period, a.task(), a.context_switch()),
            (0, 5000, 0, 1)
        );
    }
}
