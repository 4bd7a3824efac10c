//! Clocks in nanoseconds, as the kernel stamps records and as every layer compares them.

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
