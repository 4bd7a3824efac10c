//! Everything that talks to the kernel: event names and attrs, opening with fallback, the mmap
//! ring, record decoding, CPU lists and the per-CPU reader threads. Nothing here knows about
//! the frontends.

pub mod cpus;
pub mod events;
pub(crate) mod exec_watch;
pub mod open;
pub(crate) mod raw_tap;
pub mod reader;
pub mod record;
pub mod ring;
