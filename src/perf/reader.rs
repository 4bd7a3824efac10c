//! One reader thread per CPU: wait on the CPU's fds, drain its ring, send batches.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{SendTimeoutError, Sender};

use super::record::{DecodeError, EventDecoder};
use super::ring::RingBuffer;
use crate::clock::{clock_ns, monotonic_ns};
use crate::event::{Batch, BufferPool};
use crate::event::{Event, EventKind, RecordType};
use crate::stats::CpuStats;

/// How long a reader sleeps in poll() before it looks at the ring anyway, when the ring's
/// wakeup watermark (a quarter of it) does not wake it first (the stop wakes it at once,
/// through [`ReaderStop`]'s eventfd). Records do not wake a reader until the watermark, so
/// this is also the longest a quiet CPU's records wait before they are shown, and how long it
/// may hold the time-ordering back. Each wake-up costs the reader and the frontend's thread
/// tens of microseconds on a VM: four a second keeps an idle perfwatch cheap and a storm's
/// batches large. The default of [`crate::monitor::MonitorConfig::idle_wake`]; the headless
/// agent, whose outputs are read once a second at most, uses [`AGENT_IDLE_WAKE`].
pub const POLL_TIMEOUT: Duration = Duration::from_millis(250);

/// The readers' idle wake-up in the headless agent (`--quiet` with `--metrics`/`--pprof`):
/// what it counts is scraped once a second, so a quiet CPU's records may wait that long; a
/// busy CPU's are read at the ring's watermark as before.
pub const AGENT_IDLE_WAKE: Duration = Duration::from_secs(1);

/// A poll timeout that ends on the next multiple of `period` of CLOCK_MONOTONIC. Every reader
/// wakes at the same moments, so their batches reach the frontend's thread together (one
/// wake-up there for all of them, which on a VM costs more than the records it brings) and
/// the ordering stage's watermark moves in one step.
fn aligned_timeout(period: Duration) -> libc::timespec {
    let p = period.as_nanos().max(1) as u64;
    let left = p - monotonic_ns() % p;
    libc::timespec {
        tv_sec: (left / 1_000_000_000) as libc::time_t,
        tv_nsec: (left % 1_000_000_000) as libc::c_long,
    }
}

/// The readers' stop request: a flag, and an eventfd that wakes every reader from its
/// poll(2) at once (it is never read, so it stays readable), so that the stop does not wait
/// for a poll timeout and the events are disabled close to the stop time.
#[derive(Debug)]
pub struct ReaderStop {
    requested: AtomicBool,
    wake: Option<OwnedFd>,
}

impl ReaderStop {
    /// A stop request; without an eventfd (the kernel refused one) readers notice it at
    /// their next poll timeout.
    pub fn new() -> ReaderStop {
        ReaderStop {
            requested: AtomicBool::new(false),
            wake: crate::sys::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK).ok(),
        }
    }

    /// Ask the readers to stop, and wake them.
    pub fn request(&self) {
        self.requested.store(true, Ordering::Release);
        if let Some(fd) = &self.wake {
            crate::sys::write(fd.as_fd(), &1u64.to_ne_bytes());
        }
    }

    pub fn requested(&self) -> bool {
        self.requested.load(Ordering::Acquire)
    }
}

impl Default for ReaderStop {
    fn default() -> ReaderStop {
        ReaderStop::new()
    }
}

/// A CPU's ring and the fds that write into it (the first one owns the mapping; the others
/// were redirected into it with PERF_EVENT_IOC_SET_OUTPUT).
pub struct CpuRing {
    pub cpu: u32,
    /// The fds were opened with PERF_FORMAT_LOST: `read()` gives `{ value, lost }`.
    pub read_lost: bool,
    pub fds: Vec<OwnedFd>,
    pub ring: RingBuffer,
    /// Finds each record's event and layout (several events share the ring).
    pub decoder: EventDecoder,
    /// The clock the records are stamped with (`-k`); [`Batch::now`] is read from it.
    pub clockid: libc::clockid_t,
    /// Where the records go as they are, too (`-o`).
    pub raw: Option<super::raw_tap::RawTap>,
}

/// Counts gathered while decoding one batch, added to the shared atomics once.
#[derive(Default)]
struct LocalCounts {
    records: [u64; RecordType::COUNT],
    lost: u64,
    lost_samples: u64,
    unknown: u64,
    malformed: u64,
}

impl LocalCounts {
    fn count(&mut self, e: &Event) {
        self.records[e.record_type().index()] += 1;
        match e.kind {
            EventKind::Lost { lost, .. } => self.lost += lost,
            EventKind::LostSamples { lost } => self.lost_samples += lost,
            _ => {}
        }
    }

    fn publish(&self, s: &CpuStats) {
        for (i, n) in self.records.iter().enumerate() {
            if *n > 0 {
                s.records[i].fetch_add(*n, Ordering::Relaxed);
            }
        }
        for (a, n) in [
            (&s.lost, self.lost),
            (&s.lost_samples, self.lost_samples),
            (&s.unknown, self.unknown),
            (&s.malformed, self.malformed),
        ] {
            if n > 0 {
                a.fetch_add(n, Ordering::Relaxed);
            }
        }
    }
}

/// A drain's records as they were in the ring (for `-o`).
#[derive(Default)]
pub(crate) struct RawCopy {
    pub bytes: Vec<u8>,
    pub records: u64,
}

/// Decode everything currently in `ring` into `events`, counting as it goes. Returns true
/// when the ring may have overflowed (it was three quarters full, or held a LOST record).
pub(crate) fn drain_ring(
    ring: &mut CpuRing,
    scratch: &mut Vec<u8>,
    events: &mut Vec<Event>,
    stats: &CpuStats,
    mut raw: Option<&mut RawCopy>,
) -> bool {
    let mut local = LocalCounts::default();
    let (decoder, cpu) = (&ring.decoder, ring.cpu);
    let out = ring.ring.read(scratch, |rec| {
        if let Some(copy) = raw.as_deref_mut() {
            copy.bytes.extend_from_slice(rec);
            copy.records += 1;
        }
        match decoder.decode(rec, cpu) {
            Ok(e) => {
                local.count(&e);
                events.push(e);
            }
            Err(DecodeError::UnknownType(_)) => local.unknown += 1,
            Err(_) => local.malformed += 1,
        }
    });
    local.publish(stats);
    if out.skipped_bytes > 0 {
        stats
            .skipped_bytes
            .fetch_add(out.skipped_bytes, Ordering::Relaxed);
    }
    local.lost > 0 || out.bytes * 4 >= ring.ring.data_size() as u64 * 3
}

/// Records the kernel dropped for this ring's events, as `read()` with PERF_FORMAT_LOST
/// reports them. Unlike LOST records, which the kernel writes only when the ring has room
/// again and something else is written, this count is current. (For inherited events it
/// covers the parent task's event only, so it is a lower bound there.)
pub(crate) fn lost_by_read(ring: &CpuRing) -> Option<u64> {
    if !ring.read_lost {
        return None;
    }
    let mut total = 0;
    for fd in &ring.fds {
        // The count, then the lost count (PERF_FORMAT_LOST): two u64.
        let mut v = [0u8; 16];
        if crate::sys::read(fd.as_fd(), &mut v) == 16 {
            let mut lost = [0u8; 8];
            lost.copy_from_slice(&v[8..]);
            total += u64::from_ne_bytes(lost);
        }
    }
    Some(total)
}

/// Disable this ring's events (PERF_EVENT_IOC_DISABLE), as perf record does before its last
/// read: the ring then holds everything they wrote, and gets nothing more. An fd whose event
/// is gone (its task exited, its CPU offline) refuses; there is nothing to stop then.
fn disable(ring: &CpuRing) {
    for fd in &ring.fds {
        let _ = crate::sys::perf::disable(fd.as_fd());
    }
}

/// True when `/sys/devices/system/cpu/cpuN/online` says the CPU is offline. (CPU 0 often has
/// no such file: it cannot be taken offline.)
fn cpu_offline(cpu: u32) -> bool {
    std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu{cpu}/online"))
        .is_ok_and(|s| s.trim() == "0")
}

/// How often a reader reads its events' lost counts and checks that its CPU is online.
const LOST_READ_INTERVAL: Duration = Duration::from_secs(1);

/// Start the reader thread of one CPU.
pub fn spawn(
    ring: CpuRing,
    tx: Sender<Batch>,
    pool: BufferPool,
    stop: Arc<ReaderStop>,
    stats: Arc<crate::stats::Stats>,
    idle_wake: Duration,
    reopen: Option<Reopen>,
) -> std::io::Result<JoinHandle<()>> {
    let cpu = ring.cpu;
    std::thread::Builder::new()
        .name(format!("perfwatch-cpu{cpu}"))
        .spawn(move || {
            let shared = stats.clone();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run(ring, tx, pool, stop, stats, idle_wake, reopen)
            }));
            if let (Err(p), Some(mine)) = (result, shared.cpu(cpu)) {
                // The frontends see this and stop: a blind CPU must not pass for a quiet one.
                let _ = mine.failure.set(crate::panic_message(p.as_ref()));
                mine.ended.store(true, Ordering::Release);
            }
        })
}

/// Opens a CPU's events again, on that CPU alone and enabled, once it is back online: the
/// monitor's own open (system-wide runs; a task's inherited events cannot be opened again
/// for the tasks it has forked since). Its error, said in the summary, when it cannot.
pub type Reopen = Arc<dyn Fn(u32) -> Result<CpuRing, String> + Send + Sync>;

/// Why [`read`] returned.
#[derive(PartialEq, Eq)]
enum End {
    /// The stop was asked for, every fd hung up, or nobody listens any more.
    Done,
    /// The CPU went offline, and its events with it (the kernel takes them off the CPU for
    /// good): its last records are sent.
    Offline,
}

/// How often a reader whose CPU is offline looks whether it is back.
const ONLINE_CHECK: Duration = Duration::from_millis(100);

fn run(
    mut ring: CpuRing,
    tx: Sender<Batch>,
    pool: BufferPool,
    stop: Arc<ReaderStop>,
    stats: Arc<crate::stats::Stats>,
    idle_wake: Duration,
    reopen: Option<Reopen>,
) {
    let cpu = ring.cpu;
    let Some(my) = stats.cpu(cpu) else { return };
    let io = Io {
        tx: &tx,
        pool: &pool,
        stop: &stop,
        my,
        idle_wake,
    };
    // Counts read from earlier rings of this CPU: a reopened event's lost count starts at 0.
    let mut lost_base = 0;
    while read(&mut ring, &io, reopen.is_some(), lost_base) == End::Offline {
        let Some(reopen) = &reopen else { break };
        if !wait_online(cpu, ring.clockid, &io) {
            break;
        }
        match reopen(cpu) {
            Ok(mut back) => {
                back.raw = ring.raw.take();
                ring = back;
                lost_base = my.lost_by_read.load(Ordering::Relaxed);
                my.offline.store(false, Ordering::Release);
                my.returns.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                let _ = my.unwatched.set(e);
                // The CPU stays unwatched: its part of the time order ends here.
                let _ = send(&tx, io.batch(cpu, ring.clockid, true), &stop);
                break;
            }
        }
    }
    my.ended.store(true, Ordering::Release);
}

/// What a reader sends with and counts into.
struct Io<'a> {
    tx: &'a Sender<Batch>,
    pool: &'a BufferPool,
    stop: &'a ReaderStop,
    my: &'a CpuStats,
    idle_wake: Duration,
}

impl Io<'_> {
    /// A batch without records: the CPU's time moves on (`end`: and it has no more).
    fn batch(&self, cpu: u32, clockid: libc::clockid_t, end: bool) -> Batch {
        Batch {
            cpu,
            events: self.pool.take(0),
            now: clock_ns(clockid),
            end,
        }
    }
}

/// Wait for the offline `cpu` to come back, sending an empty batch every `idle_wake` so that
/// the other CPUs' records are not held back waiting for its time to move. False when the
/// stop came first (its last batch, with `end`, is sent) or nobody listens any more.
fn wait_online(cpu: u32, clockid: libc::clockid_t, io: &Io<'_>) -> bool {
    let mut last_sent = std::time::Instant::now();
    loop {
        if io.stop.requested() {
            let _ = send(io.tx, io.batch(cpu, clockid, true), io.stop);
            return false;
        }
        if !cpu_offline(cpu) {
            return true;
        }
        if last_sent.elapsed() >= io.idle_wake {
            if !send(io.tx, io.batch(cpu, clockid, false), io.stop) {
                return false;
            }
            last_sent = std::time::Instant::now();
        }
        // The stop's eventfd wakes this at once.
        let mut fds: Vec<libc::pollfd> = io.stop.wake.iter().map(readable).collect();
        let t = libc::timespec {
            tv_sec: 0,
            tv_nsec: ONLINE_CHECK.as_nanos() as libc::c_long,
        };
        if fds.is_empty() {
            std::thread::sleep(ONLINE_CHECK);
        } else {
            crate::sys::ppoll(&mut fds, &t);
        }
    }
}

/// A poll(2) entry waiting for `fd` to be readable.
fn readable(fd: &OwnedFd) -> libc::pollfd {
    libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }
}

/// Read `ring` until the stop, or until its CPU goes offline. `may_return`: the CPU's events
/// can be opened again when it comes back, so its going offline does not end its part of
/// the time order.
fn read(ring: &mut CpuRing, io: &Io<'_>, may_return: bool, lost_base: u64) -> End {
    let Io {
        tx,
        pool,
        stop,
        my,
        idle_wake,
    } = *io;
    let cpu = ring.cpu;
    let mut scratch = Vec::new();
    // The perf fds come first; the stop's eventfd, when there is one, last.
    let mut pollfds: Vec<libc::pollfd> = ring.fds.iter().map(readable).collect();
    let perf_fds = pollfds.len();
    pollfds.extend(stop.wake.iter().map(readable));
    let mut open_fds = perf_fds;
    let mut capacity = 256;
    let mut last_lost_read = std::time::Instant::now();
    let mut offline = false;
    // Set when the ring may have overflowed since the lost count was last read. Reading it
    // costs an IPI to the event's CPU (expensive in a VM), so it is read only then, and at
    // the end.
    let mut maybe_lost = false;
    loop {
        // Every fd hung up: its CPU may have gone offline (said so, as the check below does).
        if open_fds == 0 && !offline && cpu_offline(cpu) {
            my.offline.store(true, Ordering::Release);
            offline = true;
        }
        // Decide before draining, so that the last drain sees everything written before stop.
        let stopping = stop.requested() || open_fds == 0 || offline;
        let now = clock_ns(ring.clockid);
        let mut events = pool.take(capacity);
        if stopping {
            // The stop time is decided before the flag is set: once the events are disabled,
            // everything stamped up to it is in the ring, and nothing new comes after it.
            disable(ring);
        }
        // The copy for `-o` is sized for what is waiting: one allocation per drain.
        let mut raw = ring.raw.is_some().then(|| RawCopy {
            bytes: Vec::with_capacity(ring.ring.pending() as usize),
            records: 0,
        });
        maybe_lost |= drain_ring(ring, &mut scratch, &mut events, my, raw.as_mut());
        if stopping {
            // A record being written on the event's CPU when the disable came is published
            // a moment later (the disable interrupts its writer): drain once more.
            std::thread::sleep(Duration::from_millis(1));
            maybe_lost |= drain_ring(ring, &mut scratch, &mut events, my, raw.as_mut());
        }
        if let (Some(tap), Some(copy)) = (&ring.raw, raw) {
            tap.offer(super::raw_tap::RawChunk {
                cpu,
                now,
                end: stopping,
                bytes: copy.bytes,
                records: copy.records,
            });
        }
        crate::debug_panic_point("reader");
        capacity = events.len().clamp(64, 4096);
        let n = events.len() as u64;
        // A CPU that may come back keeps its place in the time order.
        let returning = offline && may_return && !stop.requested();
        let batch = Batch {
            cpu,
            events,
            now,
            end: stopping && !returning,
        };
        if !send(tx, batch, stop) {
            // Nobody is listening any more (or we gave up at shutdown).
            my.dropped.fetch_add(n, Ordering::Relaxed);
            return End::Done;
        }
        if stopping || last_lost_read.elapsed() >= LOST_READ_INTERVAL {
            if stopping || maybe_lost {
                if let Some(n) = lost_by_read(ring) {
                    my.lost_by_read.fetch_max(lost_base + n, Ordering::Relaxed);
                }
                maybe_lost = false;
            }
            last_lost_read = std::time::Instant::now();
            // A CPU taken offline gets no more records: say so and end, the others go on.
            if !stopping && cpu_offline(cpu) {
                my.offline.store(true, Ordering::Release);
                offline = true;
                continue;
            }
        }
        if stopping {
            return if returning { End::Offline } else { End::Done };
        }
        // More than the wakeup watermark is already waiting (the ring fills faster than it
        // is drained): drain again at once. Less than that waits in poll() for the watermark
        // or the timeout, so that a storm is taken in large batches (each batch wakes the
        // frontend's thread) rather than a stream of small ones.
        if ring.ring.pending() * 4 >= ring.ring.data_size() as u64 {
            continue;
        }
        let timeout = aligned_timeout(idle_wake);
        let r = crate::sys::ppoll(&mut pollfds, &timeout);
        if r < 0 {
            // EINTR: a signal; anything else is not recoverable by waiting, and the timeout
            // path would spin, so sleep instead.
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                std::thread::sleep(POLL_TIMEOUT);
            }
            continue;
        }
        // POLLHUP: the monitored task is gone (task targets) or the CPU went away. Stop
        // polling that fd; when none is left, drain once more and end.
        let gone =
            |p: &libc::pollfd| p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0;
        open_fds -= pollfds[..open_fds].iter().filter(|p| gone(p)).count();
        pollfds.retain(|p| !gone(p));
    }
}

/// Send with back-pressure: a full channel makes the reader wait (the kernel ring then takes
/// the strain, and counts what it cannot hold as LOST), but never past shutdown.
fn send(tx: &Sender<Batch>, mut batch: Batch, stop: &ReaderStop) -> bool {
    let mut waited_after_stop = Duration::ZERO;
    loop {
        match tx.send_timeout(batch, POLL_TIMEOUT) {
            Ok(()) => return true,
            Err(SendTimeoutError::Disconnected(_)) => return false,
            Err(SendTimeoutError::Timeout(b)) => {
                batch = b;
                if stop.requested() {
                    waited_after_stop += POLL_TIMEOUT;
                    if waited_after_stop >= Duration::from_secs(2) {
                        return false;
                    }
                }
            }
        }
    }
}
