//! Opening the events: one per (task, CPU), a ring per CPU, the fallback from hardware
//! events, and errors that say what to do.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use perf_event_open_sys as pe;

use super::cpus::CpuList;
use super::events::{AttrOptions, EventSpec, Sampling, build_attr};
use super::reader::CpuRing;
use super::record::{DEFAULT_SAMPLE_TYPE, SampleLayout};
use super::ring::{RingBuffer, page_size};

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
    pub fn is_task(&self) -> bool {
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
    pub event: EventSpec,
    pub sampling: Sampling,
    pub target: Target,
    /// CPUs to open on (already validated against the online list).
    pub cpus: Vec<u32>,
    /// Data pages per CPU ring (a power of two).
    pub mmap_pages: usize,
    pub context_switch: bool,
}

/// Why opening failed, for the caller to explain (and for tests to tell apart).
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{0}")]
    Permission(PermissionHelp),
    #[error("event '{event}' is not supported on this machine: {err}")]
    NotSupported { event: String, err: io::Error },
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
pub fn paranoid_level() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The kernel's cap on sampling frequency.
pub fn max_sample_rate() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Root, CAP_PERFMON or CAP_SYS_ADMIN in the effective set: the kernel's paranoid checks do
/// not apply.
pub fn is_privileged() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
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
    /// The event in use (differs from the requested one after a fallback).
    pub event: EventSpec,
    /// Set when the requested event was not supported and a software clock is used instead.
    pub fallback: Option<Fallback>,
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

fn open_one(attr: &mut pe::bindings::perf_event_attr, pid: i32, cpu: i32) -> io::Result<OwnedFd> {
    let mut raised = false;
    loop {
        // SAFETY: attr is a valid, initialised perf_event_attr.
        let fd = unsafe {
            pe::perf_event_open(
                attr,
                pid,
                cpu,
                -1,
                pe::bindings::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
            )
        };
        if fd >= 0 {
            // SAFETY: the kernel just gave us this fd.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let err = io::Error::last_os_error();
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
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit into a struct we own.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) };
    r.rlim_cur
}

/// Raise RLIMIT_NOFILE's soft limit to its hard limit. Returns the new soft limit.
fn raise_nofile() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit on a struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            let want = libc::rlimit {
                rlim_cur: r.rlim_max,
                rlim_max: r.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                return want.rlim_cur;
            }
        }
    }
    r.rlim_cur
}

/// Open the events of `cfg`: for each CPU, one fd per task (or one for the whole CPU), the
/// first owning the ring, the others redirected into it.
pub fn open(cfg: &OpenConfig) -> Result<Opened, OpenError> {
    let tasks: Vec<i32> = match &cfg.target {
        Target::System => vec![-1],
        Target::Pids(pids) => {
            let mut all = Vec::new();
            for &p in pids {
                all.extend(threads_of(p)?.into_iter().map(|t| t as i32));
            }
            all
        }
        Target::Tids(tids) => {
            for &t in tids {
                if !std::path::Path::new(&format!("/proc/{t}")).exists() {
                    return Err(OpenError::NoSuchProcess(t));
                }
            }
            tids.iter().map(|&t| t as i32).collect()
        }
        Target::Command { pid, .. } => vec![*pid as i32],
    };
    let needed = tasks.len() * cfg.cpus.len();
    let soft = {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit into a struct we own.
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) };
        r.rlim_cur
    };
    if needed as u64 + 64 > soft {
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
    };
    let mut read_lost = true;

    let mut event = cfg.event.clone();
    let mut fallback = None;
    let target_desc = cfg.target.describe(&cfg.cpus, false);
    let mut rings = Vec::with_capacity(cfg.cpus.len());
    for &cpu in &cfg.cpus {
        let mut fds: Vec<OwnedFd> = Vec::with_capacity(tasks.len());
        let mut ring: Option<RingBuffer> = None;
        for &task in &tasks {
            // Every fd gets side-band records: a task's fork/exit/exec/mmap is reported only
            // to the events of its own context, so a thread without them would be blind.
            let mut opts = AttrOptions {
                read_lost,
                ..base_opts
            };
            let res = loop {
                let mut attr = build_attr(&event, &opts);
                match open_one(&mut attr, task, cpu as i32) {
                    Err(e)
                        if fallback.is_none() && event.is_hardware() && unsupported_errno(&e) =>
                    {
                        let to = if cfg.target.is_task() {
                            EventSpec::task_clock()
                        } else {
                            EventSpec::cpu_clock()
                        };
                        fallback = Some(Fallback {
                            requested: event.name.clone(),
                            used: to.name.clone(),
                            reason: errno_name(&e),
                        });
                        event = to;
                    }
                    // Kernels before 6.0 do not know PERF_FORMAT_LOST.
                    Err(e) if read_lost && e.raw_os_error() == Some(libc::EINVAL) => {
                        read_lost = false;
                        opts.read_lost = false;
                    }
                    other => break other,
                }
            };
            let fd = match res {
                Ok(fd) => fd,
                // A thread of a -p process that exited since we listed it.
                Err(e)
                    if e.raw_os_error() == Some(libc::ESRCH)
                        && matches!(cfg.target, Target::Pids(_))
                        && tasks.len() > 1 =>
                {
                    continue;
                }
                Err(e) => {
                    return Err(explain(
                        e,
                        &event,
                        cpu,
                        task,
                        &cfg.target,
                        &target_desc,
                        paranoid,
                        needed,
                    ));
                }
            };
            match &ring {
                // The ring must be mapped before other events can be redirected into it
                // (the kernel refuses SET_OUTPUT to an unmapped event with EINVAL).
                None => ring = Some(map_ring(fd.as_fd(), cfg.mmap_pages)?),
                Some(_) => {
                    let first = fds.first().map(|f| f.as_raw_fd()).unwrap_or(-1);
                    // SAFETY: both fds are perf events on the same CPU.
                    if unsafe { pe::ioctls::SET_OUTPUT(fd.as_raw_fd(), first) } != 0 {
                        return Err(OpenError::Other {
                            event: event.name.clone(),
                            cpu,
                            task: format!(" (redirecting thread {task})"),
                            err: io::Error::last_os_error(),
                        });
                    }
                }
            }
            fds.push(fd);
        }
        let Some(ring) = ring else {
            // Every thread exited while we were opening.
            let pid = match &cfg.target {
                Target::Pids(p) => p.first().copied().unwrap_or(0),
                _ => 0,
            };
            return Err(OpenError::NoSuchProcess(pid));
        };
        let layout =
            SampleLayout::new(DEFAULT_SAMPLE_TYPE, true).map_err(|_| OpenError::Other {
                event: event.name.clone(),
                cpu,
                task: String::new(),
                err: io::Error::from_raw_os_error(libc::EINVAL),
            })?;
        rings.push(CpuRing {
            cpu,
            read_lost,
            fds,
            ring,
            layout,
        });
    }
    Ok(Opened {
        rings,
        event,
        fallback,
    })
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
            // SAFETY: fd is a perf event fd.
            if unsafe { pe::ioctls::ENABLE(fd.as_raw_fd(), 0) } != 0 {
                return Err(io::Error::last_os_error());
            }
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
        Some(libc::EMFILE | libc::ENFILE) => {
            let mut r = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit into a struct we own.
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) };
            OpenError::TooManyFiles {
                needed,
                soft: r.rlim_cur,
            }
        }
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
