//! Opening the events: one per (task, CPU), a ring per CPU, the fallback from hardware
//! events, and errors that say what to do.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use perf_event_open_sys as pe;

use super::cpus::CpuList;
use super::events::{AttrOptions, EventSpec, Sampling, build_attr, fixed_period, sample_type_of};
use super::reader::CpuRing;
use super::record::{DecodeError, EventDecoder, SampleLayout};
use super::ring::{RingBuffer, page_size};
use crate::event::EventDesc;

/// Whose events to watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Every task on the given CPUs (`-a`, `-C`).
    System,
    /// These processes, all their threads, and their children (`-p`).
    Pids(Vec<u32>),
    /// Exactly these threads (`-t`).
    Tids(Vec<u32>),
    /// A command perfwatch started (`-- COMMAND`): enabled at its exec, inherited.
    Command { pid: u32, argv0: String },
}

impl Target {
    pub(crate) fn is_task(&self) -> bool {
        !matches!(self, Target::System)
    }

    /// A short description for status lines.
    pub fn describe(&self, cpus: &[u32], all_cpus: bool) -> String {
        let list = |v: &[u32]| {
            v.iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        match self {
            Target::System if all_cpus => "system-wide".to_string(),
            Target::System => format!("CPUs {}", CpuList(cpus)),
            Target::Pids(p) => format!("pid {}", list(p)),
            Target::Tids(t) => format!("tid {}", list(t)),
            Target::Command { pid, argv0 } => format!(
                "command '{}' (pid {pid})",
                crate::text::escape(argv0.as_bytes())
            ),
        }
    }
}

/// Everything needed to open the events.
#[derive(Clone, Debug)]
pub struct OpenConfig {
    /// The events, in `-e` order; the first one tracks (side-band records).
    pub events: Vec<EventSpec>,
    /// `-F`/`-c`, for the events without a sampling term of their own.
    pub sampling: Sampling,
    pub target: Target,
    /// CPUs to open on (already validated against the online list).
    pub cpus: Vec<u32>,
    /// Data pages per CPU ring (a power of two).
    pub mmap_pages: usize,
    pub context_switch: bool,
    /// The clock of the records' times (`-k`).
    pub clockid: libc::clockid_t,
    /// `-G`: only tasks in this cgroup (a directory of the cgroup file system), per CPU.
    pub cgroup: Option<std::path::PathBuf>,
    /// Show tracepoints' `common_*` fields.
    pub common_fields: bool,
}

/// Resolve `-G NAME` as perf does: an existing absolute path, or a path under the cgroup file
/// system that has the perf_event controller (a v1 hierarchy mounted with `perf_event`, else
/// the unified v2 hierarchy).
pub(crate) fn resolve_cgroup(name: &str) -> Result<std::path::PathBuf, String> {
    let bad = |why: String| format!("cgroup '{}': {why}", crate::text::escape(name.as_bytes()));
    if name.trim().is_empty() {
        return Err(bad("empty name".into()));
    }
    let path = std::path::Path::new(name);
    if path.is_absolute() {
        return if path.is_dir() {
            Ok(path.to_path_buf())
        } else {
            Err(bad("no such directory".into()))
        };
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    // mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
    let mut v1 = None;
    let mut v2 = None;
    for l in mounts.lines() {
        let mut halves = l.splitn(2, " - ");
        let (Some(left), Some(right)) = (halves.next(), halves.next()) else {
            continue;
        };
        let Some(mnt) = left.split(' ').nth(4) else {
            continue;
        };
        let mut r = right.split(' ');
        let (fstype, superopts) = (r.next(), r.nth(1).unwrap_or(""));
        match fstype {
            Some("cgroup") if superopts.split(',').any(|o| o == "perf_event") => {
                v1.get_or_insert(mnt.to_string());
            }
            Some("cgroup2") => {
                v2.get_or_insert(mnt.to_string());
            }
            _ => {}
        }
    }
    let root = v1.or(v2).ok_or_else(|| {
        bad("no cgroup file system with the perf_event controller is mounted".into())
    })?;
    let full = std::path::Path::new(&root).join(name.trim_start_matches('/'));
    if full.is_dir() {
        Ok(full)
    } else {
        Err(bad(format!("no such cgroup under {root}")))
    }
}

/// Why opening failed, for the caller to explain (and for tests to tell apart).
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{0}")]
    Permission(PermissionHelp),
    #[error(
        "event '{event}' is not supported on this machine ({}): no PMU here counts it (a VM often has none). Software events (cpu-clock, task-clock, page-faults, ...) work everywhere; perfwatch --list-events lists them",
        errno_name(err)
    )]
    NotSupported { event: String, err: io::Error },
    #[error(
        "event '{event}' asks for precise_ip {precise}, which this machine's PMU cannot do ({}); use fewer p's (or none)",
        errno_name(err)
    )]
    Precise {
        event: String,
        precise: u8,
        err: io::Error,
    },
    #[error(
        "cannot open cgroup '{path}': {err} (-G takes a cgroup's path under the cgroup file system, e.g. -G system.slice/ssh.service)"
    )]
    Cgroup { path: String, err: io::Error },
    #[error("no such process: '{0}'")]
    NoSuchProcess(u32),
    #[error("CPU {0} is not online")]
    CpuOffline(u32),
    #[error(
        "cannot map a ring of {pages} pages ({kib} KiB) per CPU: {err}. Use a smaller -m/--mmap-pages, or raise /proc/sys/kernel/perf_event_mlock_kb (now {mlock_kb}) or the memlock limit (ulimit -l)"
    )]
    Mmap {
        pages: usize,
        kib: usize,
        mlock_kb: String,
        err: io::Error,
    },
    #[error(
        "too many open files opening {needed} perf events; raise the limit (ulimit -n, now {soft}) or watch fewer CPUs/threads"
    )]
    TooManyFiles { needed: usize, soft: u64 },
    #[error("perf_event_open for '{event}' on CPU {cpu}{task}: {err}")]
    Other {
        event: String,
        cpu: u32,
        task: String,
        err: io::Error,
    },
}

/// The explanation of a permission error, in perf's manner: what the setting is, what the
/// chosen target needs, and how to get it.
#[derive(Debug)]
pub struct PermissionHelp {
    pub event: String,
    pub target: String,
    pub paranoid: Option<i32>,
    pub needs: i32,
    pub errno: io::Error,
}

impl fmt::Display for PermissionHelp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let now = match self.paranoid {
            Some(v) => v.to_string(),
            None => "unknown (cannot read /proc/sys/kernel/perf_event_paranoid)".to_string(),
        };
        write!(
            f,
            "no permission to monitor '{}' {} ({}).\n  kernel.perf_event_paranoid is {now}; without privileges this needs it at {} or lower.\n  Run perfwatch as root (sudo), or give it CAP_PERFMON (sudo setcap cap_perfmon+ep \"$(command -v perfwatch)\"),\n  or lower the setting: sudo sysctl kernel.perf_event_paranoid={}",
            self.event, self.target, self.errno, self.needs, self.needs
        )
    }
}

/// The current `kernel.perf_event_paranoid`, if readable.
pub(crate) fn paranoid_level() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The kernel's cap on sampling frequency.
pub(crate) fn max_sample_rate() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Root, CAP_PERFMON or CAP_SYS_ADMIN in the effective set: the kernel's paranoid checks do
/// not apply.
pub(crate) fn is_privileged() -> bool {
    // SAFETY: geteuid has no preconditions.
    if crate::sys::geteuid() == 0 {
        return true;
    }
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    const CAP_SYS_ADMIN: u64 = 21;
    const CAP_PERFMON: u64 = 38;
    cap_eff & (1 << CAP_SYS_ADMIN | 1 << CAP_PERFMON) != 0
}

/// The opened events: one ring per CPU, and what was actually opened.
pub struct Opened {
    pub rings: Vec<CpuRing>,
    /// The events in use, in list order (differ from the requested ones after a fallback).
    pub events: Vec<EventSpec>,
    /// What their samples carry.
    pub descs: Vec<&'static EventDesc>,
    /// The `cycles` that were replaced by a software clock.
    pub fallbacks: Vec<Fallback>,
    /// Each event's attribute as opened and its ids on every CPU, in list order.
    pub attrs: Vec<OpenedAttr>,
}

/// An event's `perf_event_attr` as opened (its bytes) and the kernel's ids of its fds.
#[derive(Clone, Debug, Default)]
pub struct OpenedAttr {
    pub bytes: Vec<u8>,
    pub ids: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fallback {
    pub requested: String,
    pub used: String,
    pub reason: String,
}

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} not supported ({}), using {}",
            self.requested, self.reason, self.used
        )
    }
}

/// Errnos with which the kernel says "this PMU event does not exist here".
fn unsupported_errno(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV | libc::ENXIO)
    )
}

fn open_one(
    attr: &mut pe::bindings::perf_event_attr,
    pid: i32,
    cpu: i32,
    flags: libc::c_ulong,
) -> io::Result<OwnedFd> {
    let mut raised = false;
    loop {
        let flags = pe::bindings::PERF_FLAG_FD_CLOEXEC as libc::c_ulong | flags;
        let err = match crate::sys::perf::open(attr, pid, cpu, flags) {
            Ok(fd) => return Ok(fd),
            Err(e) => e,
        };
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            // Out of fds: raise the soft limit to the hard one and try again, once.
            Some(libc::EMFILE) if !raised => {
                raised = true;
                let before = current_nofile();
                if raise_nofile() > before {
                    continue;
                }
                return Err(err);
            }
            _ => return Err(err),
        }
    }
}

/// Threads of a process, from /proc.
fn threads_of(pid: u32) -> Result<Vec<u32>, OpenError> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map_err(|_| OpenError::NoSuchProcess(pid))?;
    let mut tids: Vec<u32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    if tids.is_empty() {
        return Err(OpenError::NoSuchProcess(pid));
    }
    tids.sort_unstable();
    Ok(tids)
}

fn current_nofile() -> u64 {
    crate::sys::getrlimit(libc::RLIMIT_NOFILE).map_or(0, |r| r.rlim_cur)
}

/// Raise RLIMIT_NOFILE's soft limit to its hard limit. Returns the new soft limit.
fn raise_nofile() -> u64 {
    let Ok(r) = crate::sys::getrlimit(libc::RLIMIT_NOFILE) else {
        return 0;
    };
    if r.rlim_cur < r.rlim_max {
        let want = libc::rlimit {
            rlim_cur: r.rlim_max,
            rlim_max: r.rlim_max,
        };
        if crate::sys::setrlimit(libc::RLIMIT_NOFILE, &want).is_ok() {
            return want.rlim_cur;
        }
    }
    r.rlim_cur
}

/// Open the events of `cfg`: for each CPU, one fd per (task, event) (or per event for the
/// whole CPU or a cgroup), all writing into the CPU's one ring: the first fd owns the mapping,
/// the others are redirected into it. The first event is the tracking event: only it asks for
/// side-band records (task, comm, mmap, context switches), so they are never duplicated.
pub fn open(cfg: &OpenConfig) -> Result<Opened, OpenError> {
    if cfg.events.is_empty() {
        return Err(OpenError::Other {
            event: String::new(),
            cpu: 0,
            task: String::new(),
            err: io::Error::from_raw_os_error(libc::EINVAL),
        });
    }
    // The cgroup's directory fd stands for the "pid" of a cgroup event (PERF_FLAG_PID_CGROUP).
    let cgroup_dir = match &cfg.cgroup {
        Some(path) => Some(std::fs::File::open(path).map_err(|err| OpenError::Cgroup {
            path: path.display().to_string(),
            err,
        })?),
        None => None,
    };
    let tasks: Vec<i32> = match (&cfg.target, &cgroup_dir) {
        (Target::System, Some(dir)) => vec![dir.as_raw_fd()],
        (Target::System, None) => vec![-1],
        (Target::Pids(pids), _) => {
            let mut all = Vec::new();
            for &p in pids {
                all.extend(threads_of(p)?.into_iter().map(|t| t as i32));
            }
            all
        }
        (Target::Tids(tids), _) => {
            for &t in tids {
                if !std::path::Path::new(&format!("/proc/{t}")).exists() {
                    return Err(OpenError::NoSuchProcess(t));
                }
            }
            tids.iter().map(|&t| t as i32).collect()
        }
        (Target::Command { pid, .. }, _) => vec![*pid as i32],
    };
    let flags = if cgroup_dir.is_some() {
        pe::bindings::PERF_FLAG_PID_CGROUP as libc::c_ulong
    } else {
        0
    };
    let needed = tasks.len() * cfg.cpus.len() * cfg.events.len();
    if needed as u64 + 64 > current_nofile() {
        raise_nofile();
    }

    let privileged = is_privileged();
    let paranoid = paranoid_level();
    let exclude_kernel = !privileged && paranoid.is_some_and(|p| p >= 2);
    let page = page_size();
    let data_bytes = cfg.mmap_pages * page;
    let base_opts = AttrOptions {
        sampling: cfg.sampling,
        side_band: true,
        context_switch: cfg.context_switch,
        inherit: matches!(cfg.target, Target::Pids(_) | Target::Command { .. }),
        enable_on_exec: matches!(cfg.target, Target::Command { .. }),
        exclude_kernel,
        // Wake at a quarter full: bursts are read early, quiet CPUs are read on the poll
        // timeout.
        wakeup_watermark: (data_bytes / 4).clamp(1, u32::MAX as usize) as u32,
        read_lost: true,
        clockid: cfg.clockid,
    };
    let mut read_lost = true;

    let mut events = cfg.events.clone();
    // Whether an fd of each event is open yet: a fallback must replace an event everywhere.
    let mut opened_any = vec![false; events.len()];
    let mut fallbacks = Vec::new();
    let target_desc = cfg.target.describe(&cfg.cpus, false);
    struct CpuFds {
        cpu: u32,
        fds: Vec<OwnedFd>,
        ring: RingBuffer,
        ids: Vec<(u64, u16)>,
    }
    let mut per_cpu: Vec<CpuFds> = Vec::with_capacity(cfg.cpus.len());
    // Each event's attribute as the kernel took it (for `-o`).
    let mut as_opened: Vec<Option<pe::bindings::perf_event_attr>> = vec![None; events.len()];
    for &cpu in &cfg.cpus {
        let mut fds: Vec<OwnedFd> = Vec::with_capacity(tasks.len() * events.len());
        let mut ids = Vec::with_capacity(tasks.len() * events.len());
        let mut ring: Option<RingBuffer> = None;
        'task: for &task in &tasks {
            for (i, event) in events.iter_mut().enumerate() {
                // The first event of each task tracks: a task's fork/exit/exec/mmap is
                // reported only to the events of its own context, so every task needs one.
                let mut opts = AttrOptions {
                    read_lost,
                    side_band: i == 0,
                    context_switch: i == 0 && cfg.context_switch,
                    ..base_opts
                };
                let res = loop {
                    let mut attr = build_attr(event, &opts);
                    match open_one(&mut attr, task, cpu as i32, flags) {
                        Err(e)
                            if event.may_fall_back
                                && !opened_any[i]
                                && event.is_hardware()
                                && unsupported_errno(&e) =>
                        {
                            let to = event.fallback(cfg.target.is_task());
                            fallbacks.push(Fallback {
                                requested: event.name.clone(),
                                used: to.name.clone(),
                                reason: errno_name(&e),
                            });
                            *event = to;
                        }
                        // Kernels before 6.0 do not know PERF_FORMAT_LOST.
                        Err(e) if read_lost && e.raw_os_error() == Some(libc::EINVAL) => {
                            read_lost = false;
                            opts.read_lost = false;
                        }
                        other => break other.map(|fd| (fd, attr)),
                    }
                };
                let fd = match res {
                    Ok((fd, attr)) => {
                        as_opened[i] = Some(attr);
                        fd
                    }
                    // A thread of a -p process that exited since we listed it.
                    Err(e)
                        if e.raw_os_error() == Some(libc::ESRCH)
                            && matches!(cfg.target, Target::Pids(_))
                            && tasks.len() > 1 =>
                    {
                        continue 'task;
                    }
                    Err(e) => {
                        return Err(explain(
                            e,
                            event,
                            cpu,
                            task,
                            &cfg.target,
                            &target_desc,
                            paranoid,
                            needed,
                        ));
                    }
                };
                opened_any[i] = true;
                match &ring {
                    // The ring must be mapped before other events can be redirected into it
                    // (the kernel refuses SET_OUTPUT to an unmapped event with EINVAL).
                    None => ring = Some(map_ring(fd.as_fd(), cfg.mmap_pages)?),
                    Some(_) => {
                        let first = fds.first().map(|f| f.as_raw_fd()).unwrap_or(-1);
                        if let Err(err) = crate::sys::perf::set_output(fd.as_fd(), first) {
                            return Err(OpenError::Other {
                                event: event.name.clone(),
                                cpu,
                                task: format!(" (redirecting it into the ring of CPU {cpu})"),
                                err,
                            });
                        }
                    }
                }
                let id = match crate::sys::perf::id(fd.as_fd()) {
                    Ok(id) => id,
                    Err(err) => {
                        return Err(OpenError::Other {
                            event: event.name.clone(),
                            cpu,
                            task: " (reading its id)".into(),
                            err,
                        });
                    }
                };
                ids.push((id, i as u16));
                fds.push(fd);
            }
        }
        let Some(ring) = ring else {
            // Every thread exited while we were opening.
            let pid = match &cfg.target {
                Target::Pids(p) => p.first().copied().unwrap_or(0),
                _ => 0,
            };
            return Err(OpenError::NoSuchProcess(pid));
        };
        per_cpu.push(CpuFds {
            cpu,
            fds,
            ring,
            ids,
        });
    }

    let descs = describe(&events, cfg.common_fields);
    let attrs = as_opened
        .iter()
        .enumerate()
        .map(|(i, a)| OpenedAttr {
            bytes: a.as_ref().map(attr_bytes).unwrap_or_default(),
            ids: per_cpu
                .iter()
                .flat_map(|c| c.ids.iter())
                .filter(|(_, e)| *e as usize == i)
                .map(|(id, _)| *id)
                .collect(),
        })
        .collect();
    let mut rings = Vec::with_capacity(per_cpu.len());
    for c in per_cpu {
        let layouts = events
            .iter()
            .zip(&descs)
            .map(|(e, d)| {
                let layout = SampleLayout::new(sample_type_of(e, cfg.sampling), true)?
                    .with_fixed_period(fixed_period(e, cfg.sampling).unwrap_or(0));
                Ok((layout, *d))
            })
            .collect::<Result<Vec<_>, DecodeError>>();
        let decoder = layouts
            .and_then(|l| EventDecoder::new(l, c.ids))
            .map_err(|_| OpenError::Other {
                event: events[0].name.clone(),
                cpu: c.cpu,
                task: String::new(),
                err: io::Error::from_raw_os_error(libc::EINVAL),
            })?;
        rings.push(CpuRing {
            cpu: c.cpu,
            read_lost,
            fds: c.fds,
            ring: c.ring,
            decoder,
            clockid: cfg.clockid,
            raw: None,
        });
    }
    Ok(Opened {
        rings,
        events,
        descs,
        fallbacks,
        attrs,
    })
}

/// The bytes of an attribute, as `perf_event_open` read them.
fn attr_bytes(a: &pe::bindings::perf_event_attr) -> Vec<u8> {
    crate::sys::perf::attr_bytes(a)
}

/// The descriptors samples carry, one per event, in list order.
pub fn describe(events: &[EventSpec], common_fields: bool) -> Vec<&'static EventDesc> {
    let several = events.len() > 1;
    events
        .iter()
        .enumerate()
        .map(|(i, e)| {
            EventDesc {
                index: i as u16,
                name: EventDesc::leak_name(&e.name),
                type_: e.type_,
                config: e.config,
                format: e.format.clone(),
                show_name: several || e.is_tracepoint(),
                show_common: common_fields,
            }
            .intern()
        })
        .collect()
}

fn map_ring(fd: std::os::fd::BorrowedFd<'_>, pages: usize) -> Result<RingBuffer, OpenError> {
    RingBuffer::map(fd, pages).map_err(|err| OpenError::Mmap {
        pages,
        kib: pages * page_size() / 1024,
        mlock_kb: std::fs::read_to_string("/proc/sys/kernel/perf_event_mlock_kb")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into()),
        err,
    })
}

/// Enable every event (system-wide and -p/-t targets; a command's events enable at exec).
pub fn enable(rings: &[CpuRing]) -> io::Result<()> {
    for r in rings {
        for fd in &r.fds {
            crate::sys::perf::enable(fd.as_fd())?;
        }
    }
    Ok(())
}

fn errno_name(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOENT) => "ENOENT".into(),
        Some(libc::EOPNOTSUPP) => "EOPNOTSUPP".into(),
        Some(libc::ENODEV) => "ENODEV".into(),
        Some(libc::ENXIO) => "ENXIO".into(),
        _ => e.to_string(),
    }
}

#[allow(clippy::too_many_arguments)]
fn explain(
    err: io::Error,
    event: &EventSpec,
    cpu: u32,
    task: i32,
    target: &Target,
    target_desc: &str,
    paranoid: Option<i32>,
    needed: usize,
) -> OpenError {
    match err.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => {
            // What each target needs without privileges (Documentation/admin-guide/perf-security.rst):
            // CPU-wide events need <= 0; task events with kernel samples <= 1, user only <= 2.
            let needs = if target.is_task() { 1 } else { 0 };
            OpenError::Permission(PermissionHelp {
                event: event.name.clone(),
                target: if target.is_task() {
                    target_desc.to_string()
                } else {
                    format!("system-wide ({target_desc})")
                },
                paranoid,
                needs: if event.is_tracepoint() { -1 } else { needs },
                errno: err,
            })
        }
        Some(libc::ESRCH) => OpenError::NoSuchProcess(task.max(0) as u32),
        Some(libc::EMFILE | libc::ENFILE) => OpenError::TooManyFiles {
            needed,
            soft: current_nofile(),
        },
        Some(libc::EOPNOTSUPP | libc::EINVAL) if event.precise > 0 => OpenError::Precise {
            event: event.name.clone(),
            precise: event.precise,
            err,
        },
        Some(libc::ENODEV) if !event.is_hardware() => OpenError::CpuOffline(cpu),
        _ if unsupported_errno(&err) => OpenError::NotSupported {
            event: event.name.clone(),
            err,
        },
        Some(libc::EINVAL) if event.is_tracepoint() && !matches!(target, Target::System) => {
            OpenError::Other {
                event: event.name.clone(),
                cpu,
                task: format!(" for task {task}"),
                err,
            }
        }
        _ => OpenError::Other {
            event: event.name.clone(),
            cpu,
            task: if task >= 0 {
                format!(" for task {task}")
            } else {
                String::new()
            },
            err,
        },
    }
}
