//! One reader thread per CPU: wait on the CPU's fds, drain its ring, send batches.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{SendTimeoutError, Sender};

use super::record::{DecodeError, EventDecoder};
use super::ring::RingBuffer;
use crate::event::{Event, EventKind, RecordType};
use crate::stats::CpuStats;

/// How long a reader sleeps in poll() before it looks at the ring and the stop flag anyway.
/// Side-band records do not wake a reader until the watermark, so this is also the longest a
/// quiet CPU's records wait before they are shown.
pub const POLL_TIMEOUT: Duration = Duration::from_millis(100);

/// The poll timeout of a reader whose last look at the ring found nothing: an idle CPU costs
/// four wake-ups a second instead of ten, and holds the time-ordering back at most this long.
pub const IDLE_POLL_TIMEOUT: Duration = Duration::from_millis(250);

/// Events from one CPU, in the order the kernel wrote them.
#[derive(Debug, Default)]
pub struct Batch {
    pub cpu: u32,
    pub events: Vec<Event>,
    /// CLOCK_MONOTONIC ns read just before `data_head` was loaded: every record this CPU
    /// writes later carries a time close to or after this. Readers send a batch (possibly
    /// empty) at least every [`IDLE_POLL_TIMEOUT`], so a merger can tell a quiet CPU from a
    /// slow one.
    pub now: u64,
    /// The last batch of this CPU: its reader has ended.
    pub end: bool,
}

/// At shutdown (after the stop request): hand `take` the readers' last batches until `ended`
/// says every reader has sent its final one, the channel closes, or `grace` runs out; then
/// whatever is still queued. Batches a reader cannot send after that are counted as dropped
/// by the reader when the channel closes.
pub fn collect_last_batches<T>(
    rx: &crossbeam_channel::Receiver<Batch>,
    grace: Duration,
    state: &mut T,
    ended: impl Fn(&T) -> bool,
    mut take: impl FnMut(&mut T, Batch),
) {
    let deadline = std::time::Instant::now() + grace;
    while !ended(state) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        match rx.recv_timeout(left.min(POLL_TIMEOUT)) {
            Ok(b) => take(state, b),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
        }
    }
    for b in rx.try_iter() {
        take(state, b);
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
}

/// CLOCK_MONOTONIC in nanoseconds: the clock the events are stamped with (`use_clockid`).
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// A clock in nanoseconds (CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID, ...).
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
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

/// Decode everything currently in `ring` into `events`, counting as it goes. Returns true
/// when the ring may have overflowed (it was three quarters full, or held a LOST record).
pub fn drain_ring(
    ring: &mut CpuRing,
    scratch: &mut Vec<u8>,
    events: &mut Vec<Event>,
    stats: &CpuStats,
) -> bool {
    let mut local = LocalCounts::default();
    let (decoder, cpu) = (&ring.decoder, ring.cpu);
    let out = ring
        .ring
        .read(scratch, |rec| match decoder.decode(rec, cpu) {
            Ok(e) => {
                local.count(&e);
                events.push(e);
            }
            Err(DecodeError::UnknownType(_)) => local.unknown += 1,
            Err(_) => local.malformed += 1,
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
pub fn lost_by_read(ring: &CpuRing) -> Option<u64> {
    if !ring.read_lost {
        return None;
    }
    let mut total = 0;
    for fd in &ring.fds {
        let mut v = [0u64; 2];
        // SAFETY: reading at most 16 bytes into a buffer of 16 bytes.
        let n = unsafe { libc::read(fd.as_raw_fd(), v.as_mut_ptr() as *mut libc::c_void, 16) };
        if n == 16 {
            total += v[1];
        }
    }
    Some(total)
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
    stop: Arc<AtomicBool>,
    stats: Arc<crate::stats::Stats>,
) -> std::io::Result<JoinHandle<()>> {
    let cpu = ring.cpu;
    std::thread::Builder::new()
        .name(format!("perfwatch-cpu{cpu}"))
        .spawn(move || {
            let shared = stats.clone();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run(ring, tx, stop, stats)
            }));
            if let (Err(p), Some(mine)) = (result, shared.cpu(cpu)) {
                // The frontends see this and stop: a blind CPU must not pass for a quiet one.
                let _ = mine.failure.set(crate::panic_message(p.as_ref()));
                mine.ended.store(true, Ordering::Release);
            }
        })
}

fn run(
    mut ring: CpuRing,
    tx: Sender<Batch>,
    stop: Arc<AtomicBool>,
    stats: Arc<crate::stats::Stats>,
) {
    let cpu = ring.cpu;
    let Some(my) = stats.cpu(cpu) else { return };
    let mut scratch = Vec::new();
    let mut pollfds: Vec<libc::pollfd> = ring
        .fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let mut capacity = 256;
    let mut last_lost_read = std::time::Instant::now();
    let mut offline = false;
    // Set when the ring may have overflowed since the lost count was last read. Reading it
    // costs an IPI to the event's CPU (expensive in a VM), so it is read only then, and at
    // the end.
    let mut maybe_lost = false;
    loop {
        // Decide before draining, so that the last drain sees everything written before stop.
        let stopping = stop.load(Ordering::Acquire) || pollfds.is_empty() || offline;
        let now = clock_ns(ring.clockid);
        let mut events = Vec::with_capacity(capacity);
        maybe_lost |= drain_ring(&mut ring, &mut scratch, &mut events, my);
        crate::debug_panic_point("reader");
        capacity = events.len().clamp(64, 4096);
        let n = events.len() as u64;
        let batch = Batch {
            cpu,
            events,
            now,
            end: stopping,
        };
        if !send(&tx, batch, &stop) {
            // Nobody is listening any more (or we gave up at shutdown).
            my.dropped.fetch_add(n, Ordering::Relaxed);
            break;
        }
        if stopping || last_lost_read.elapsed() >= LOST_READ_INTERVAL {
            if stopping || maybe_lost {
                if let Some(n) = lost_by_read(&ring) {
                    my.lost_by_read.fetch_max(n, Ordering::Relaxed);
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
            break;
        }
        if ring.ring.has_data() {
            continue;
        }
        // SAFETY: pollfds is a valid array of pollfd of the given length.
        let r = unsafe {
            libc::poll(
                pollfds.as_mut_ptr(),
                pollfds.len() as libc::nfds_t,
                if n == 0 {
                    IDLE_POLL_TIMEOUT
                } else {
                    POLL_TIMEOUT
                }
                .as_millis() as i32,
            )
        };
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
        pollfds.retain(|p| p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) == 0);
    }
    my.ended.store(true, Ordering::Release);
}

/// Send with back-pressure: a full channel makes the reader wait (the kernel ring then takes
/// the strain, and counts what it cannot hold as LOST), but never past shutdown.
fn send(tx: &Sender<Batch>, mut batch: Batch, stop: &AtomicBool) -> bool {
    let mut waited_after_stop = Duration::ZERO;
    loop {
        match tx.send_timeout(batch, POLL_TIMEOUT) {
            Ok(()) => return true,
            Err(SendTimeoutError::Disconnected(_)) => return false,
            Err(SendTimeoutError::Timeout(b)) => {
                batch = b;
                if stop.load(Ordering::Acquire) {
                    waited_after_stop += POLL_TIMEOUT;
                    if waited_after_stop >= Duration::from_secs(2) {
                        return false;
                    }
                }
            }
        }
    }
}
