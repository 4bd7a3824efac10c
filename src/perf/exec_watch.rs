//! Command lines at the moment of the exec, for processes that live a millisecond.
//!
//! The side-band COMM record of an exec wakes no reader (`wakeup_events` counts samples
//! only): the pipeline sees it when the ring reaches its watermark or at a poll timeout, up
//! to a quarter of a second later, by which time `/bin/echo` has long exited and
//! `/proc/PID/cmdline` is empty. So perfwatch opens `sched:sched_process_exec` on rings of its
//! own, one per CPU, that wake at every sample, and asks each sample for the new program's
//! user stack pointer and the stack above it (`PERF_SAMPLE_REGS_USER`,
//! `PERF_SAMPLE_STACK_USER`): the kernel copies it inside `execve`, before the program runs
//! a single instruction, and the argument strings are in it ([`crate::cmdline`]). A small
//! thread of its own drains these rings and files each exec's command line in an
//! [`ExecTable`], keyed by pid and time; the pipeline takes it from there when the exec's
//! COMM record comes out of the ordering stage. Where the stack does not hold the strings
//! (an environment of thousands of variables, an architecture without the register), the
//! thread reads `/proc/PID/cmdline` at once instead, within a budget.
//!
//! Nothing here runs on a reader thread or waits for one. It needs the tracepoint's id from
//! tracefs and the permission to open a tracepoint; without either, [`ExecWatch::start`]
//! fails and perfwatch reads command lines as before (later, from `/proc`).

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pe::bindings as sys;
use perf_event_open_sys as pe;

use super::open::Target;
use super::ring::RingBuffer;
use crate::cmdline::{self, CmdLine};
pub(crate) use crate::exec_table::ExecTable;

/// Data pages of each CPU's exec ring: 512 KiB, thirty-one execs' stacks (perf's default size).
const RING_PAGES: usize = 128;
/// `/proc/PID/cmdline` reads per second at most, for stacks that did not hold the strings.
const READS_PER_SECOND: u32 = 500;
/// How long the thread sleeps in poll(2) when no exec comes.
const POLL_MS: i32 = 100;
/// A sample with a time before the start of a drain less this is in the table after it.
const IN_FLIGHT_NS: u64 = 1_000_000;
/// The thread's nice value: it sleeps but for a few microseconds per exec, and must run
/// within the millisecond a short-lived program lives (see [`WatchThread::read_proc`]).
const WATCH_NICE: libc::c_int = -10;
/// How long a stop waits for the thread (it may be inside a `/proc` read).
const JOIN_WAIT: Duration = Duration::from_millis(300);

/// `PERF_REG_*_SP`: the stack pointer's bit in `sample_regs_user`, where perfwatch knows it.
const SP_REG: Option<u32> = if cfg!(target_arch = "x86_64") {
    Some(7)
} else if cfg!(target_arch = "aarch64") {
    Some(31)
} else {
    None
};

/// What to watch: the monitor's target, CPUs and clock.
#[derive(Clone, Debug)]
pub struct WatchConfig {
    pub target: Target,
    pub cpus: Vec<u32>,
    pub clockid: libc::clockid_t,
    /// `-G`: only the tasks of this cgroup.
    pub cgroup: Option<PathBuf>,
    /// Where `/proc` is (for the reads of stacks that did not hold the strings).
    pub proc_root: PathBuf,
}

/// The running watcher: its thread ends when this is dropped.
pub struct ExecWatch {
    table: Arc<ExecTable>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    /// Whether the samples carry the stack (else every command line is read from `/proc`).
    pub stacks: bool,
}

/// The tracepoint's id, from tracefs.
fn tracepoint_id() -> io::Result<u64> {
    let root = super::events::tracefs_root()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "tracefs is not mounted"))?;
    let text = std::fs::read_to_string(format!("{root}/events/sched/sched_process_exec/id"))?;
    text.trim()
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad tracepoint id"))
}

/// The event's attributes: every exec a sample, woken at once, stamped in the monitor's
/// clock, with the user stack when `stacks`.
fn attr(id: u64, clockid: libc::clockid_t, stacks: bool, target: &Target) -> sys::perf_event_attr {
    let mut a = sys::perf_event_attr {
        type_: sys::PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<sys::perf_event_attr>() as u32,
        config: id,
        ..Default::default()
    };
    a.sample_period = 1;
    a.wakeup_events = 1;
    a.sample_type = (sys::PERF_SAMPLE_TID | sys::PERF_SAMPLE_TIME) as u64;
    if let (true, Some(sp)) = (stacks, SP_REG) {
        a.sample_type |= (sys::PERF_SAMPLE_REGS_USER | sys::PERF_SAMPLE_STACK_USER) as u64;
        a.sample_regs_user = 1 << sp;
        a.sample_stack_user = cmdline::STACK_DUMP;
    }
    let command = matches!(target, Target::Command { .. });
    a.set_disabled(command as u64);
    a.set_enable_on_exec(command as u64);
    a.set_inherit(matches!(target, Target::Pids(_) | Target::Command { .. }) as u64);
    a.set_use_clockid(1);
    a.clockid = clockid;
    a
}

fn open_fd(a: &mut sys::perf_event_attr, pid: i32, cpu: i32, flags: u64) -> io::Result<OwnedFd> {
    loop {
        let flags = (sys::PERF_FLAG_FD_CLOEXEC as u64 | flags) as libc::c_ulong;
        let e = match crate::sys::perf::open(a, pid, cpu, flags) {
            Ok(fd) => return Ok(fd),
            Err(e) => e,
        };
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// One CPU's ring and the events that write into it.
struct Ring {
    fds: Vec<OwnedFd>,
    ring: RingBuffer,
    /// Its owner reported POLLHUP (its task is gone): drained on every turn, not polled.
    hung_up: bool,
}

/// Open the exec tracepoint on every CPU for `cfg`'s tasks.
fn open_rings(cfg: &WatchConfig, stacks: bool) -> io::Result<Vec<Ring>> {
    let id = tracepoint_id()?;
    let cgroup = match &cfg.cgroup {
        Some(p) => Some(std::fs::File::open(p)?),
        None => None,
    };
    let tasks: Vec<i32> = match (&cfg.target, &cgroup) {
        (Target::System, Some(dir)) => vec![dir.as_raw_fd()],
        (Target::System, None) => vec![-1],
        (Target::Pids(pids), _) => pids
            .iter()
            .flat_map(|p| threads_of(*p).into_iter())
            .collect(),
        (Target::Tids(tids), _) => tids.iter().map(|t| *t as i32).collect(),
        (Target::Command { pid, .. }, _) => vec![*pid as i32],
    };
    let flags = if cgroup.is_some() {
        sys::PERF_FLAG_PID_CGROUP as u64
    } else {
        0
    };
    let mut rings = Vec::new();
    for &cpu in &cfg.cpus {
        let mut fds: Vec<OwnedFd> = Vec::new();
        let mut ring = None;
        for &task in &tasks {
            let mut a = attr(id, cfg.clockid, stacks, &cfg.target);
            let fd = match open_fd(&mut a, task, cpu as i32, flags) {
                Ok(fd) => fd,
                // A thread that exited, a CPU gone offline since the monitor opened.
                Err(e) if matches!(e.raw_os_error(), Some(libc::ESRCH | libc::ENODEV)) => {
                    continue;
                }
                Err(e) => return Err(e),
            };
            match (&ring, fds.first()) {
                (Some(_), Some(first)) => {
                    crate::sys::perf::set_output(fd.as_fd(), first.as_raw_fd())?;
                }
                _ => ring = Some(RingBuffer::map(fd.as_fd(), RING_PAGES)?),
            }
            fds.push(fd);
        }
        if let Some(ring) = ring {
            rings.push(Ring {
                fds,
                ring,
                hung_up: false,
            });
        }
    }
    if rings.is_empty() {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(rings)
}

fn threads_of(pid: u32) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

impl ExecWatch {
    /// Open the exec tracepoint for `cfg` and start the thread that drains it. Fails when
    /// tracefs is not mounted or the kernel refuses the event.
    pub fn start(cfg: WatchConfig) -> io::Result<ExecWatch> {
        let (rings, stacks) = match open_rings(&cfg, SP_REG.is_some()) {
            Ok(r) => (r, SP_REG.is_some()),
            // A kernel that refuses the stack: the exec alone, and /proc.
            Err(e) if SP_REG.is_some() && e.raw_os_error() == Some(libc::EINVAL) => {
                (open_rings(&cfg, false)?, false)
            }
            Err(e) => return Err(e),
        };
        let table = Arc::new(ExecTable::default());
        let stop = Arc::new(AtomicBool::new(false));
        let mut thread = WatchThread {
            rings,
            table: table.clone(),
            stop: stop.clone(),
            clockid: cfg.clockid,
            proc_root: cfg.proc_root,
            budget: (Instant::now(), 0),
            scratch: Vec::new(),
        };
        let handle = std::thread::Builder::new()
            .name("perfwatch-execs".into())
            .spawn(move || thread.run())?;
        Ok(ExecWatch {
            table,
            stop,
            handle: Some(handle),
            stacks,
        })
    }

    /// Where the command lines are filed.
    pub fn table(&self) -> Arc<ExecTable> {
        self.table.clone()
    }
}

impl Drop for ExecWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let Some(h) = self.handle.take() else { return };
        // A /proc read can be slow (a process whose memory map is locked): never let it hold
        // a stop up; the thread ends with the process.
        let deadline = Instant::now() + JOIN_WAIT;
        while !h.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        if h.is_finished() {
            let _ = h.join();
        }
    }
}

/// What one exec sample said.
#[derive(Debug, PartialEq, Eq)]
enum Sample {
    /// The command line was in the stack.
    Read { pid: u32, time: u64, argv: CmdLine },
    /// It was not: read `/proc` for it.
    Missing { pid: u32, time: u64 },
    /// The kernel lost this many.
    Lost(u64),
}

const RECORD_SAMPLE: u32 = sys::PERF_RECORD_SAMPLE;
const RECORD_LOST: u32 = sys::PERF_RECORD_LOST;

/// Decode one record of an exec ring (sample_type TID | TIME [| REGS_USER | STACK_USER]).
fn decode(rec: &[u8], stacks: bool) -> Option<Sample> {
    let u32_at = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(rec.get(at..at + 4)?.try_into().ok()?))
    };
    let u64_at = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(rec.get(at..at + 8)?.try_into().ok()?))
    };
    match u32_at(0)? {
        RECORD_LOST => Some(Sample::Lost(u64_at(16)?)),
        RECORD_SAMPLE => {
            let (pid, time) = (u32_at(8)?, u64_at(16)?);
            let missing = Some(Sample::Missing { pid, time });
            if !stacks {
                return missing;
            }
            // The user registers: their ABI (0: none, 1: 32-bit, 2: 64-bit), then SP.
            let abi = u64_at(24)?;
            if abi == sys::PERF_SAMPLE_REGS_ABI_NONE as u64 {
                return missing;
            }
            let sp = u64_at(32)?;
            let size = u64_at(40)? as usize;
            let data = rec.get(48..48usize.checked_add(size)?)?;
            let dyn_size = u64_at(48 + size)? as usize;
            let dump = data.get(..dyn_size.min(size))?;
            let wide = abi == sys::PERF_SAMPLE_REGS_ABI_64 as u64;
            match cmdline::from_exec_stack(dump, sp, wide) {
                Some(argv) => Some(Sample::Read { pid, time, argv }),
                None => missing,
            }
        }
        _ => None,
    }
}

struct WatchThread {
    rings: Vec<Ring>,
    table: Arc<ExecTable>,
    stop: Arc<AtomicBool>,
    clockid: libc::clockid_t,
    proc_root: PathBuf,
    /// `/proc` reads in the current second.
    budget: (Instant, u32),
    scratch: Vec<u8>,
}

impl WatchThread {
    fn run(&mut self) {
        // A refusal (not root) is harmless.
        crate::sys::nice_this_thread(WATCH_NICE);
        loop {
            let stopping = self.stop.load(Ordering::Acquire);
            self.drain();
            if stopping {
                return;
            }
            self.wait();
        }
    }

    /// Everything the rings hold, filed; then the progress mark.
    fn drain(&mut self) {
        let started = crate::clock::clock_ns(self.clockid);
        let stacks = SP_REG.is_some();
        let mut got = Vec::new();
        for r in &mut self.rings {
            r.ring.read(&mut self.scratch, |rec| {
                if let Some(s) = decode(rec, stacks) {
                    got.push(s);
                }
            });
        }
        // Rings of several CPUs: file in time order, so that a later exec of a pid finds the
        // earlier one filed.
        got.sort_by_key(|s| match s {
            Sample::Read { time, .. } | Sample::Missing { time, .. } => *time,
            Sample::Lost(_) => 0,
        });
        for s in got {
            match s {
                Sample::Read { pid, time, argv } => self.table.insert(pid, time, argv, None),
                Sample::Missing { pid, time } => self.read_proc(pid, time),
                Sample::Lost(n) => {
                    self.table.lost.fetch_add(n, Ordering::Relaxed);
                }
            }
        }
        self.table
            .set_progress(started.saturating_sub(IN_FLIGHT_NS));
    }

    /// A command line the stack did not hold, from `/proc`, at once (within the budget).
    fn read_proc(&mut self, pid: u32, time: u64) {
        let now = Instant::now();
        if now.duration_since(self.budget.0) >= Duration::from_secs(1) {
            self.budget = (now, 0);
        }
        if self.budget.1 >= READS_PER_SECOND {
            return;
        }
        self.budget.1 += 1;
        let read_at = crate::clock::clock_ns(self.clockid);
        let argv = cmdline::read_proc(&self.proc_root, pid).unwrap_or_else(CmdLine::gone);
        self.table.from_proc.fetch_add(1, Ordering::Relaxed);
        self.table.insert(pid, time, argv, Some(read_at));
    }

    /// Sleep until an exec comes (or the poll timeout, to see `stop`).
    fn wait(&mut self) {
        let mut polled: Vec<libc::pollfd> = Vec::with_capacity(self.rings.len());
        let mut which = Vec::with_capacity(self.rings.len());
        for (i, r) in self.rings.iter().enumerate() {
            if r.hung_up {
                continue;
            }
            if let Some(fd) = r.fds.first() {
                polled.push(libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                });
                which.push(i);
            }
        }
        if polled.is_empty() {
            std::thread::sleep(Duration::from_millis(POLL_MS as u64));
            return;
        }
        let n = crate::sys::poll(&mut polled, POLL_MS);
        if n <= 0 {
            return;
        }
        for (p, i) in polled.iter().zip(which) {
            if p.revents & (libc::POLLHUP | libc::POLLERR) != 0 {
                self.rings[i].hung_up = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmdline::ArgvSource;

    /// A sample record as the kernel writes it for our sample_type.
    fn record(pid: u32, time: u64, abi: u64, sp: u64, dump: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&RECORD_SAMPLE.to_le_bytes());
        r.extend_from_slice(&0u16.to_le_bytes());
        r.extend_from_slice(&0u16.to_le_bytes());
        r.extend_from_slice(&pid.to_le_bytes());
        r.extend_from_slice(&pid.to_le_bytes());
        r.extend_from_slice(&time.to_le_bytes());
        r.extend_from_slice(&abi.to_le_bytes());
        if abi != 0 {
            r.extend_from_slice(&sp.to_le_bytes());
            r.extend_from_slice(&(dump.len() as u64).to_le_bytes());
            r.extend_from_slice(dump);
            r.extend_from_slice(&(dump.len() as u64).to_le_bytes());
        } else {
            r.extend_from_slice(&0u64.to_le_bytes());
        }
        let n = r.len() as u16;
        r[6..8].copy_from_slice(&n.to_le_bytes());
        r
    }

    #[test]
    fn samples_decode_into_command_lines_or_ask_for_proc() {
        let sp = 0x7fff_0000_0000u64;
        // argc 1, argv[0] at sp+48, NULL, no env, AT_EXECFN at the end of "ls\0".
        let mut dump = Vec::new();
        for w in [1, sp + 48, 0, 0, 31, sp + 51, 0, 0u64] {
            dump.extend_from_slice(&w.to_le_bytes());
        }
        dump.truncate(48);
        dump.extend_from_slice(b"ls\0/bin/ls\0");
        let rec = record(42, 1_000, 2, sp, &dump);
        if SP_REG.is_some() {
            assert_eq!(
                decode(&rec, true),
                Some(Sample::Read {
                    pid: 42,
                    time: 1_000,
                    argv: CmdLine::new(b"ls\0", 0, ArgvSource::Exec)
                })
            );
        }
        assert_eq!(
            decode(&rec, false),
            Some(Sample::Missing {
                pid: 42,
                time: 1_000
            })
        );
        // A kernel thread's exec (no user registers), a truncated record, a lost record.
        assert_eq!(
            decode(&record(5, 9, 0, 0, &[]), true),
            Some(Sample::Missing { pid: 5, time: 9 })
        );
        assert_eq!(decode(&rec[..rec.len() - 20], true), None);
        let mut lost = Vec::new();
        lost.extend_from_slice(&RECORD_LOST.to_le_bytes());
        lost.extend_from_slice(&24u32.to_le_bytes());
        lost.extend_from_slice(&1u64.to_le_bytes());
        lost.extend_from_slice(&3u64.to_le_bytes());
        assert_eq!(decode(&lost, true), Some(Sample::Lost(3)));
        assert_eq!(decode(&[], true), None);
    }
}
