//! Clocks in nanoseconds, as the kernel stamps records and as every layer compares them.

/// CLOCK_MONOTONIC in nanoseconds: the clock the events are stamped with (`use_clockid`).
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// A clock in nanoseconds (CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID, ...).
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    crate::sys::clock_ns(clock)
}
