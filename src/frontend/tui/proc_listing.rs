//! Whether `/proc` lists a process: what the tree asks, on every frame, of each process
//! known from the start (whose exit the stream may not tell). One listing of `/proc` a
//! second answers them all, read on a thread of its own: at 20 000 processes a listing takes
//! milliseconds (it was the loop thread's frame-time spikes). A process that ended is dropped
//! from the tree within a second or two. A frame takes the latest listing once
//! ([`latest`]), not a lock or an atomic per process.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustc_hash::FxHashSet;

/// How often the listing is read.
const PERIOD: Duration = Duration::from_secs(1);
/// The reading thread ends after this many periods nobody asked (the tree not shown).
const IDLE_PERIODS: u64 = 3;

/// Which pids `/proc` listed.
pub type Listing = Arc<FxHashSet<u32>>;

/// The latest listing, and how many were made.
static LATEST: Mutex<Option<Listing>> = Mutex::new(None);
static MADE: AtomicU64 = AtomicU64::new(0);
/// Listings made when it was last asked.
static ASKED: AtomicU64 = AtomicU64::new(0);
static READING: AtomicBool = AtomicBool::new(false);

fn list() -> Option<FxHashSet<u32>> {
    let dir = std::fs::read_dir("/proc").ok()?;
    Some(
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
    )
}

/// Start the reading thread unless it runs.
fn start_reading() {
    if READING.load(Ordering::Relaxed) || READING.swap(true, Ordering::AcqRel) {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("perfwatch-plist".into())
        .spawn(|| {
            loop {
                if let Some(pids) = list() {
                    if let Ok(mut latest) = LATEST.lock() {
                        *latest = Some(Arc::new(pids));
                    }
                }
                let made = MADE.fetch_add(1, Ordering::AcqRel) + 1;
                if made.saturating_sub(ASKED.load(Ordering::Acquire)) > IDLE_PERIODS {
                    break;
                }
                std::thread::sleep(PERIOD);
            }
            READING.store(false, Ordering::Release);
        });
    if spawned.is_err() {
        READING.store(false, Ordering::Release);
    }
}

/// The last listing of `/proc` (`None` until there is one); asking keeps it read.
pub fn latest() -> Option<Listing> {
    ASKED.store(MADE.load(Ordering::Acquire), Ordering::Release);
    start_reading();
    LATEST.lock().ok().and_then(|l| l.clone())
}

/// Whether `/proc` listed `pid` at its last reading (true until there is one).
#[cfg(test)]
fn proc_alive(pid: u32) -> bool {
    latest().is_none_or(|pids| pids.contains(&pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_listed_and_an_unused_pid_is_not_once_read() {
        let me = std::process::id();
        assert!(proc_alive(me));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        // u32::MAX - 1 is above any pid_max: absent once the first listing is in.
        while proc_alive(u32::MAX - 1) {
            assert!(std::time::Instant::now() < deadline, "no listing in 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(proc_alive(me));
    }
}
