//! Event names as perf spells them, and the perf_event_attr perfwatch builds for them.

use perf_event_open_sys::bindings as sys;

use super::record::{
    DEFAULT_SAMPLE_TYPE, DWARF_REGS_MASK, SAMPLE_CALLCHAIN, SAMPLE_PERIOD, SAMPLE_RAW,
    SAMPLE_REGS_USER, SAMPLE_STACK_USER,
};
use crate::event::tracepoint::{Format, FormatError};

/// A perf event: what one entry of `-e LIST` resolved to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventSpec {
    /// The name as perf spells it, with its modifiers (`cycles:u`, `sched:sched_switch`),
    /// or the fallback's name.
    pub name: String,
    pub type_: u32,
    pub config: u64,
    /// `:u` (count user mode only): exclude the kernel and the hypervisor.
    pub exclude_kernel: bool,
    /// `:k` (count kernel mode only): exclude user mode.
    pub exclude_user: bool,
    /// `:p`, `:pp`, `:ppp`: the skid the PMU may have (perf_event_attr.precise_ip).
    pub precise: u8,
    /// A sampling term of this event (`EVENT/period=N/`, `EVENT/freq=HZ/`), over `-F`/`-c`.
    pub sampling: Option<Sampling>,
    /// This event may be replaced by a software clock when the machine lacks it: only
    /// `cycles` (without `:p`), as perf does, so that `-e cycles` works in a VM.
    pub may_fall_back: bool,
    /// A tracepoint's format, read from tracefs when the name was resolved.
    pub format: Option<Format>,
    /// Record call chains (`-g`) of at most this many frames (`sample_max_stack`).
    pub call_graph: Option<u16>,
    /// `--call-graph dwarf,SIZE`: copy SIZE bytes of the user stack and the user registers
    /// with each sample (the kernel's chain then stops at the kernel, as perf's does).
    pub dwarf_stack: Option<u32>,
}

impl EventSpec {
    pub(crate) fn is_hardware(&self) -> bool {
        self.type_ == sys::PERF_TYPE_HARDWARE
    }

    pub(crate) fn is_tracepoint(&self) -> bool {
        self.type_ == sys::PERF_TYPE_TRACEPOINT
    }

    /// A software clock event: samples carry nanoseconds as their period.
    pub(crate) fn is_clock(&self) -> bool {
        self.type_ == sys::PERF_TYPE_SOFTWARE
            && (self.config == sys::PERF_COUNT_SW_CPU_CLOCK as u64
                || self.config == sys::PERF_COUNT_SW_TASK_CLOCK as u64)
    }

    pub(crate) fn is_dummy(&self) -> bool {
        self.type_ == sys::PERF_TYPE_SOFTWARE && self.config == sys::PERF_COUNT_SW_DUMMY as u64
    }

    /// An event of this type and config, without modifiers.
    pub fn new(name: &str, type_: u32, config: u64) -> EventSpec {
        EventSpec {
            name: name.to_string(),
            type_,
            config,
            exclude_kernel: false,
            exclude_user: false,
            precise: 0,
            sampling: None,
            may_fall_back: false,
            format: None,
            call_graph: None,
            dwarf_stack: None,
        }
    }

    pub(crate) fn cpu_clock() -> EventSpec {
        EventSpec::new(
            "cpu-clock",
            sys::PERF_TYPE_SOFTWARE,
            sys::PERF_COUNT_SW_CPU_CLOCK as u64,
        )
    }

    pub(crate) fn task_clock() -> EventSpec {
        EventSpec::new(
            "task-clock",
            sys::PERF_TYPE_SOFTWARE,
            sys::PERF_COUNT_SW_TASK_CLOCK as u64,
        )
    }

    /// The software clock that stands in for this hardware event, with its modifiers.
    pub fn fallback(&self, task: bool) -> EventSpec {
        let base = if task {
            EventSpec::task_clock()
        } else {
            EventSpec::cpu_clock()
        };
        let mods = self.name.split_once(':').map(|(_, m)| m).unwrap_or("");
        EventSpec {
            name: if mods.is_empty() {
                base.name
            } else {
                format!("{}:{mods}", base.name)
            },
            exclude_kernel: self.exclude_kernel,
            exclude_user: self.exclude_user,
            sampling: self.sampling,
            call_graph: self.call_graph,
            dwarf_stack: self.dwarf_stack,
            ..base
        }
    }

    /// The perfwatch default: `cycles`, replaced by `cpu-clock` where there is no PMU.
    pub(crate) fn default_event() -> EventSpec {
        EventSpec {
            may_fall_back: true,
            ..EventSpec::new(
                "cycles",
                sys::PERF_TYPE_HARDWARE,
                sys::PERF_COUNT_HW_CPU_CYCLES as u64,
            )
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
pub(crate) fn known_event_names() -> impl Iterator<Item = &'static str> {
    NAMED.iter().map(|(n, _, _)| *n)
}

/// The named events with their type, for `--list-events`: `(names, type_)`, aliases of one
/// event together (`cpu-cycles OR cycles`).
pub(crate) fn named_events() -> Vec<(Vec<&'static str>, u32)> {
    let mut out: Vec<(Vec<&'static str>, u32, u32)> = Vec::new();
    for &(name, ty, cfg) in NAMED {
        match out.iter_mut().find(|(_, t, c)| *t == ty && *c == cfg) {
            Some(e) => e.0.push(name),
            None => out.push((vec![name], ty, cfg)),
        }
    }
    out.into_iter().map(|(n, t, _)| (n, t)).collect()
}

/// The tracepoints tracefs offers, as `sys:name`, sorted.
pub fn tracepoints() -> Option<Vec<String>> {
    let root = tracefs_root()?;
    let mut out = Vec::new();
    for sys_dir in std::fs::read_dir(format!("{root}/events")).ok()?.flatten() {
        let Ok(sys_name) = sys_dir.file_name().into_string() else {
            continue;
        };
        let Ok(tps) = std::fs::read_dir(sys_dir.path()) else {
            continue;
        };
        for tp in tps.flatten() {
            let Ok(tp_name) = tp.file_name().into_string() else {
                continue;
            };
            if tp.path().join("id").exists() {
                out.push(format!("{sys_name}:{tp_name}"));
            }
        }
    }
    out.sort();
    Some(out)
}

/// `--list-events [FILTER]`: the named hardware and software events and the tracepoints, as
/// `perf list` prints them, those whose name contains `filter` (any case) if it is not empty.
pub(crate) fn write_event_list(out: &mut impl std::io::Write, filter: &str) -> std::io::Result<()> {
    let filter = filter.trim().to_ascii_lowercase();
    let keep = |names: &[&str]| filter.is_empty() || names.iter().any(|n| n.contains(&filter));
    let line = |out: &mut dyn std::io::Write, name: &str, kind: &str| {
        writeln!(
            out,
            "  {:<50} [{kind}]",
            crate::text::escape(name.as_bytes())
        )
    };
    for (want, kind) in [
        (sys::PERF_TYPE_HARDWARE, "Hardware event"),
        (sys::PERF_TYPE_SOFTWARE, "Software event"),
    ] {
        for (names, ty) in named_events() {
            if ty == want && keep(&names) {
                line(out, &names.join(" OR "), kind)?;
            }
        }
    }
    match tracepoints() {
        Some(tps) => {
            for tp in tps.iter().filter(|t| keep(&[&t.to_ascii_lowercase()])) {
                line(out, tp, "Tracepoint event")?;
            }
        }
        None => eprintln!(
            "perfwatch: no tracepoints listed: tracefs is not mounted (mount -t tracefs nodev {})",
            TRACEFS[0]
        ),
    }
    Ok(())
}

/// Where tracefs lives; `/sys/kernel/debug/tracing` on older set-ups.
pub const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The tracefs directory that has an `events` directory, if any.
pub(crate) fn tracefs_root() -> Option<&'static str> {
    TRACEFS
        .into_iter()
        .find(|r| std::path::Path::new(&format!("{r}/events")).is_dir())
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    #[error(
        "unknown event '{0}' (try cycles, instructions, cpu-clock, task-clock, page-faults, context-switches, cpu-migrations, dummy, or SUBSYSTEM:TRACEPOINT)"
    )]
    Unknown(String),
    #[error(
        "no tracepoint '{0}' (looked for its format under {1}/events; if tracefs is not mounted: mount -t tracefs nodev {1}; perfwatch --list-events lists the tracepoints there are)"
    )]
    NoTracepoint(String, String),
    #[error("{0}")]
    Modifier(String),
    #[error("{0}")]
    Format(#[from] FormatError),
}

/// Split an event list on the commas that are not inside a `/.../` term list.
pub(crate) fn split_event_list(list: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut in_terms) = (0, false);
    for (i, c) in list.char_indices() {
        match c {
            '/' => in_terms = !in_terms,
            ',' if !in_terms => {
                out.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&list[start..]);
    out
}

/// Resolve every `-e` argument (each a comma-separated list) into events, in order.
pub(crate) fn parse_event_list<S: AsRef<str>>(args: &[S]) -> Result<Vec<EventSpec>, EventError> {
    let mut out = Vec::new();
    for a in args {
        for name in split_event_list(a.as_ref()) {
            if name.trim().is_empty() {
                return Err(EventError::Unknown(a.as_ref().to_string()));
            }
            out.push(parse_event(name)?);
        }
    }
    Ok(out)
}

/// Apply `u`, `k`, `p` modifiers (perf's letters) to `spec`.
fn apply_modifiers(spec: &mut EventSpec, mods: &str, whole: &str) -> Result<(), EventError> {
    let (mut u, mut k, mut p) = (false, false, 0u8);
    for c in mods.chars() {
        match c {
            'u' => u = true,
            'k' => k = true,
            'p' => p += 1,
            _ => {
                return Err(EventError::Modifier(format!(
                    "modifier '{c}' in '{whole}' is not supported (perfwatch knows u, k, p, pp, ppp)"
                )));
            }
        }
    }
    if p > 3 {
        return Err(EventError::Modifier(format!(
            "'{whole}': at most ppp (precise_ip 3)"
        )));
    }
    if p > 0 && !spec.is_hardware() {
        return Err(EventError::Modifier(format!(
            "'{whole}': :p asks the PMU for skid-free samples, which only hardware events (cycles, instructions, ...) have"
        )));
    }
    if u && !k && spec.is_tracepoint() {
        return Err(EventError::Modifier(format!(
            "'{whole}': a tracepoint fires in the kernel, so with :u it would never sample"
        )));
    }
    // perf's rule: the letters say what to count; both (or neither) count everything.
    if u != k {
        spec.exclude_kernel = u;
        spec.exclude_user = k;
    }
    spec.precise = p;
    if p > 0 {
        spec.may_fall_back = false;
    }
    Ok(())
}

/// Apply `period=N` / `freq=HZ` terms (`EVENT/period=N/`).
fn apply_terms(spec: &mut EventSpec, terms: &str, whole: &str) -> Result<(), EventError> {
    for t in terms.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let bad = || {
            EventError::Modifier(format!(
                "term '{t}' in '{whole}' is not supported (perfwatch knows period=N and freq=HZ)"
            ))
        };
        let (k, v) = t.split_once('=').ok_or_else(bad)?;
        if !matches!(k.trim(), "period" | "freq") {
            return Err(bad());
        }
        let n: u64 = v.trim().parse().ok().filter(|n| *n > 0).ok_or_else(|| {
            EventError::Modifier(format!(
                "'{t}' in '{whole}': the value must be a positive whole number"
            ))
        })?;
        spec.sampling = Some(match k.trim() {
            "period" => Sampling::Period(n),
            "freq" if spec.is_tracepoint() => {
                return Err(EventError::Modifier(format!(
                    "'{whole}': a tracepoint has no sampling frequency; it samples every hit, or every Nth with period=N"
                )));
            }
            "freq" => Sampling::Freq(n),
            _ => return Err(bad()),
        });
    }
    Ok(())
}

/// Read and parse the format of tracepoint `SYS:NAME` (a perf script's handler names one).
pub fn read_tracepoint_format(name: &str) -> Result<Format, EventError> {
    match name.split_once(':') {
        Some((sys_name, tp)) if !sys_name.contains('/') && !tp.contains('/') => {
            tracepoint_format(name, sys_name, tp)
        }
        _ => Err(EventError::Unknown(name.to_string())),
    }
}

/// Read and parse the format of tracepoint `sys:tp`.
fn tracepoint_format(name: &str, sys_name: &str, tp: &str) -> Result<Format, EventError> {
    for root in TRACEFS {
        if let Ok(text) = std::fs::read_to_string(format!("{root}/events/{sys_name}/{tp}/format")) {
            return Ok(Format::parse(name, &text)?);
        }
    }
    Err(EventError::NoTracepoint(
        name.to_string(),
        TRACEFS[0].to_string(),
    ))
}

/// Resolve one event: perf's hardware/software names or `subsystem:tracepoint`, each with
/// optional `/period=N/` or `/freq=HZ/` terms and `:u`, `:k`, `:p` modifiers
/// (`cycles:u`, `cpu-clock/freq=4000/`, `sched:sched_switch:k`).
pub fn parse_event(name: &str) -> Result<EventSpec, EventError> {
    let whole = name.trim();
    let unknown = || EventError::Unknown(whole.to_string());
    // NAME/terms/mods or NAME:mods.
    let (head, terms, tail) = match whole.split_once('/') {
        Some((head, rest)) => {
            let (terms, mods) = rest.split_once('/').ok_or_else(unknown)?;
            (head, Some(terms), mods.strip_prefix(':').unwrap_or(mods))
        }
        None => (whole, None, ""),
    };
    let valid = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    let parts: Vec<&str> = head.split(':').collect();
    let named = |n: &str| {
        let lower = n.to_ascii_lowercase();
        NAMED.iter().find(|(m, _, _)| *m == lower)
    };
    let (mut spec, mods) = match parts.as_slice() {
        [n] | [n, _] if named(n).is_some() => {
            let (canon, ty, cfg) = named(n).ok_or_else(unknown)?;
            let mut spec = EventSpec::new(canon, *ty, *cfg as u64);
            spec.may_fall_back =
                *ty == sys::PERF_TYPE_HARDWARE && *cfg == sys::PERF_COUNT_HW_CPU_CYCLES;
            (spec, parts.get(1).copied().unwrap_or(""))
        }
        [s, t] | [s, t, _] if valid(s) && valid(t) => {
            let tp_name = format!("{s}:{t}");
            let format = tracepoint_format(&tp_name, s, t)?;
            let mut spec = EventSpec::new(&tp_name, sys::PERF_TYPE_TRACEPOINT, format.id);
            spec.format = Some(format);
            (spec, parts.get(2).copied().unwrap_or(""))
        }
        _ => return Err(unknown()),
    };
    if !mods.is_empty() && !tail.is_empty() {
        return Err(unknown());
    }
    let mods = if mods.is_empty() { tail } else { mods };
    if let Some(terms) = terms {
        apply_terms(&mut spec, terms, whole)?;
    }
    apply_modifiers(&mut spec, mods, whole)?;
    if !mods.is_empty() {
        spec.name = format!("{}:{mods}", spec.name);
    }
    Ok(spec)
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
pub(crate) const DEFAULT_FREQ: u64 = 1000;

/// What else to ask of the kernel besides the event itself.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AttrOptions {
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
    /// The clock of the records' times (`-k`; CLOCK_MONOTONIC by default).
    pub clockid: libc::clockid_t,
}

/// The fixed sampling period of an event, or None when the kernel adjusts it (`-F`):
/// `dummy` 1; a tracepoint every hit, or every Nth with `-c N` / `period=N`; another event
/// its `-c N` / `period=N`.
pub(crate) fn fixed_period(spec: &EventSpec, global: Sampling) -> Option<u64> {
    match spec.sampling.unwrap_or(global) {
        _ if spec.is_dummy() => Some(1),
        Sampling::Period(n) => Some(n),
        // A frequency for a tracepoint was refused when the command line was read.
        Sampling::Freq(_) if spec.is_tracepoint() => Some(1),
        Sampling::Freq(_) => None,
    }
}

/// The sample_type of an event: RAW for tracepoints, so that their fields come along, and
/// PERIOD only when the period varies (`-F`). A fixed period needs no reporting, and
/// asking for it would make the kernel sample software events and tracepoints on every
/// hit whatever `sample_period` says (perf_swevent_event() takes PERIOD in sample_type as
/// "report each hit with its count"), so `-c N` would be ignored; perf leaves it out too.
pub(crate) fn sample_type_of(spec: &EventSpec, global: Sampling) -> u64 {
    let mut st = DEFAULT_SAMPLE_TYPE;
    if fixed_period(spec, global).is_some() {
        st &= !SAMPLE_PERIOD;
    }
    if spec.is_tracepoint() {
        st |= SAMPLE_RAW;
    }
    if spec.call_graph.is_some() && !spec.is_dummy() {
        st |= SAMPLE_CALLCHAIN;
        if spec.dwarf_stack.is_some() {
            st |= SAMPLE_REGS_USER | SAMPLE_STACK_USER;
        }
    }
    st
}

/// Build the perf_event_attr for `spec`.
pub(crate) fn build_attr(spec: &EventSpec, o: &AttrOptions) -> sys::perf_event_attr {
    let mut a = sys::perf_event_attr {
        type_: spec.type_,
        size: std::mem::size_of::<sys::perf_event_attr>() as u32,
        config: spec.config,
        ..Default::default()
    };
    a.sample_type = sample_type_of(spec, o.sampling);
    match (
        fixed_period(spec, o.sampling),
        spec.sampling.unwrap_or(o.sampling),
    ) {
        (Some(n), _) => a.sample_period = n,
        (None, Sampling::Freq(hz)) => {
            a.set_freq(1);
            a.sample_freq = hz;
        }
        (None, Sampling::Period(n)) => a.sample_period = n,
    }
    a.set_disabled(1);
    a.set_inherit(o.inherit as u64);
    a.set_enable_on_exec(o.enable_on_exec as u64);
    let exclude_kernel = o.exclude_kernel || spec.exclude_kernel;
    a.set_exclude_kernel(exclude_kernel as u64);
    a.set_exclude_hv(exclude_kernel as u64);
    a.set_exclude_user(spec.exclude_user as u64);
    a.set_precise_ip(spec.precise.min(3) as u64);
    if a.sample_type & SAMPLE_CALLCHAIN != 0 {
        // At most kernel.perf_event_max_stack (the kernel refuses more with EOVERFLOW; the
        // monitor lowers it first). 0 would mean the kernel's own limit.
        a.sample_max_stack = spec.call_graph.unwrap_or(0);
    }
    if a.sample_type & SAMPLE_STACK_USER != 0 {
        // As perf's --call-graph dwarf: the registers the unwinder starts from and a copy of
        // the user stack; the kernel's chain keeps its kernel part only (the user part is
        // unwound from the copy).
        a.sample_regs_user = DWARF_REGS_MASK;
        a.sample_stack_user = spec.dwarf_stack.unwrap_or(0);
        a.set_exclude_callchain_user(1);
    }
    a.set_sample_id_all(1);
    a.set_use_clockid(1);
    a.clockid = o.clockid;
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

    /// -F 1000 with side-band records, nothing else.
    fn freq_1000() -> AttrOptions {
        AttrOptions {
            sampling: Sampling::Freq(1000),
            side_band: true,
            context_switch: false,
            inherit: false,
            enable_on_exec: false,
            exclude_kernel: false,
            wakeup_watermark: 4096,
            read_lost: true,
            clockid: libc::CLOCK_MONOTONIC,
        }
    }

    #[test]
    fn attr_has_side_band_and_sample_id_all() {
        let o = freq_1000();
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
        assert_eq!(
            (a.sample_type & SAMPLE_CALLCHAIN, a.sample_max_stack),
            (0, 0)
        );
    }

    #[test]
    fn call_graphs_ask_for_callchain_with_a_max_stack() {
        let o = freq_1000();
        let mut spec = EventSpec::cpu_clock();
        spec.call_graph = Some(32);
        let a = build_attr(&spec, &o);
        assert_eq!(a.sample_type, DEFAULT_SAMPLE_TYPE | SAMPLE_CALLCHAIN);
        assert_eq!(a.sample_max_stack, 32);
        // A tracepoint keeps its RAW; dummy takes no samples, so no chains.
        let mut tp = EventSpec::new("sched:sched_switch", sys::PERF_TYPE_TRACEPOINT, 1);
        tp.call_graph = Some(8);
        let st = sample_type_of(&tp, Sampling::Freq(1000));
        assert_eq!(
            st & (SAMPLE_RAW | SAMPLE_CALLCHAIN),
            SAMPLE_RAW | SAMPLE_CALLCHAIN
        );
        let mut dummy = parse_event("dummy").unwrap();
        dummy.call_graph = Some(8);
        assert_eq!(build_attr(&dummy, &o).sample_type & SAMPLE_CALLCHAIN, 0);
        // The fallback of cycles keeps its chains.
        let mut cycles = EventSpec::default_event();
        cycles.call_graph = Some(16);
        assert_eq!(cycles.fallback(false).call_graph, Some(16));
    }

    #[test]
    fn dwarf_call_graphs_ask_for_user_registers_and_stack() {
        let o = freq_1000();
        let mut spec = EventSpec::cpu_clock();
        spec.call_graph = Some(127);
        spec.dwarf_stack = Some(8192);
        let a = build_attr(&spec, &o);
        assert_eq!(
            a.sample_type,
            DEFAULT_SAMPLE_TYPE | SAMPLE_CALLCHAIN | SAMPLE_REGS_USER | SAMPLE_STACK_USER
        );
        assert_eq!(a.sample_regs_user, DWARF_REGS_MASK);
        assert_eq!(a.sample_stack_user, 8192);
        assert_eq!(a.exclude_callchain_user(), 1);
        // The layout of such samples is one the decoder follows.
        assert!(crate::perf::record::SampleLayout::new(a.sample_type, true).is_ok());
        // The fallback of cycles keeps its stack copy; -g alone asks for none.
        let mut cycles = EventSpec::default_event();
        cycles.dwarf_stack = Some(4096);
        assert_eq!(cycles.fallback(false).dwarf_stack, Some(4096));
        spec.dwarf_stack = None;
        let a = build_attr(&spec, &o);
        assert_eq!(a.sample_type & (SAMPLE_REGS_USER | SAMPLE_STACK_USER), 0);
        assert_eq!(a.exclude_callchain_user(), 0);
    }
}
