//! Hand-made events: one constructor per record kind, with the `sample_id` fields a reader
//! would have decoded (the running task is the record's own task unless said otherwise).

use crate::event::Batch;
use crate::event::{Event, EventDesc, EventKind, Mmap2Extra, MmapRecord, TaskRecord};

/// An event of `kind` written on `cpu` at `time` while `pid`/`tid` ran.
pub fn event(cpu: u32, pid: u32, tid: u32, time: u64, kind: EventKind) -> Event {
    Event {
        cpu,
        pid,
        tid,
        time,
        id: 0,
        kind,
    }
}

/// The descriptor of event `index` of a list: `name`, of perf type `type_` and `config`
/// (interned; samples name their event).
pub fn desc(index: u16, name: &'static str, type_: u32, config: u64) -> &'static EventDesc {
    EventDesc {
        index,
        name,
        type_,
        config,
        format: None,
        show_name: true,
        show_common: false,
    }
    .intern()
}

/// A sample of `pid` (its main thread) with `period`, at an arbitrary user address.
pub fn sample(cpu: u32, pid: u32, time: u64, period: u64) -> Event {
    sample_at(cpu, pid, time, 0x4011d6, period)
}

/// A sample of `pid` at `ip`.
pub(crate) fn sample_at(cpu: u32, pid: u32, time: u64, ip: u64, period: u64) -> Event {
    event(cpu, pid, pid, time, EventKind::sample(ip, period, 2))
}

/// A sample of `event` (one of a list of several) in `pid`, at the same address as
/// [`sample`].
pub fn sample_of(event: &'static EventDesc, cpu: u32, pid: u32, time: u64, period: u64) -> Event {
    let mut e = sample(cpu, pid, time, period);
    if let EventKind::Sample { event: ev, .. } = &mut e.kind {
        *ev = event;
    }
    e
}

/// The body of a fork or exit record of the main thread `pid`, child of `ppid`.
pub fn task(pid: u32, ppid: u32, time: u64) -> TaskRecord {
    TaskRecord {
        pid,
        ppid,
        tid: pid,
        ptid: ppid,
        time,
    }
}

/// `ppid` forks the new process `pid` (the record is written while the parent runs).
pub fn fork(cpu: u32, time: u64, pid: u32, ppid: u32) -> Event {
    event(
        cpu,
        ppid,
        ppid,
        time,
        EventKind::Fork(task(pid, ppid, time)),
    )
}

/// Process `pid` (running as thread `by`) starts the thread `tid`.
pub fn thread(cpu: u32, time: u64, pid: u32, tid: u32, by: u32) -> Event {
    event(
        cpu,
        pid,
        by,
        time,
        EventKind::Fork(TaskRecord {
            pid,
            ppid: pid,
            tid,
            ptid: by,
            time,
        }),
    )
}

/// The main thread of `pid`, child of `ppid`, exits.
pub fn exit(cpu: u32, time: u64, pid: u32, ppid: u32) -> Event {
    event(cpu, pid, pid, time, EventKind::Exit(task(pid, ppid, time)))
}

/// Thread `tid` of process `pid` exits.
#[cfg(test)]
pub(crate) fn thread_exit(cpu: u32, time: u64, pid: u32, tid: u32) -> Event {
    event(
        cpu,
        pid,
        tid,
        time,
        EventKind::Exit(TaskRecord {
            pid,
            ppid: pid,
            tid,
            ptid: pid,
            time,
        }),
    )
}

/// `pid`'s main thread takes the name `name`: by execve when `exec`, else a rename.
pub fn comm(cpu: u32, time: u64, pid: u32, name: &[u8], exec: bool) -> Event {
    comm_of(cpu, time, pid, pid, name, exec)
}

/// Thread `tid` of `pid` takes the name `name`.
pub(crate) fn comm_of(cpu: u32, time: u64, pid: u32, tid: u32, name: &[u8], exec: bool) -> Event {
    event(
        cpu,
        pid,
        tid,
        time,
        EventKind::Comm {
            pid,
            tid,
            comm: name.into(),
            exec,
        },
    )
}

/// An MMAP record (no MMAP2 fields): `pid` maps `file` at `start`, from `pgoff` on.
pub fn mmap(cpu: u32, time: u64, pid: u32, start: u64, len: u64, pgoff: u64, file: &[u8]) -> Event {
    mmap_record(
        cpu,
        time,
        MmapRecord {
            pid,
            tid: pid,
            start,
            len,
            pgoff,
            filename: file.into(),
            mmap2: None,
        },
    )
}

/// An MMAP2 record: `pid` maps `file` (inode `ino` on device 8:1) at `start`.
#[allow(clippy::too_many_arguments)]
pub fn mmap2(
    cpu: u32,
    time: u64,
    pid: u32,
    start: u64,
    len: u64,
    pgoff: u64,
    file: &[u8],
    ino: u64,
) -> Event {
    let mut e = mmap(cpu, time, pid, start, len, pgoff, file);
    if let EventKind::Mmap(m) = &mut e.kind {
        m.mmap2 = Some(mmap2_extra(
            ino,
            libc::PROT_READ as u32 | libc::PROT_EXEC as u32,
            libc::MAP_PRIVATE as u32,
        ));
    }
    e
}

/// The MMAP2 part of a mapping of inode `ino` on device 8:1, without build id.
pub(crate) fn mmap2_extra(ino: u64, prot: u32, flags: u32) -> Mmap2Extra {
    Mmap2Extra {
        maj: 8,
        min: 1,
        ino,
        ino_generation: 0,
        prot,
        flags,
        build_id: None,
    }
}

/// An MMAP or MMAP2 record as given.
pub(crate) fn mmap_record(cpu: u32, time: u64, m: MmapRecord) -> Event {
    event(cpu, m.pid, m.tid, time, EventKind::Mmap(Box::new(m)))
}

/// A record that only has a place in time (LOST_SAMPLES of nothing).
pub fn lost_samples(cpu: u32, time: u64) -> Event {
    event(cpu, 1, 1, time, EventKind::LostSamples { lost: 0 })
}

/// A reader's batch.
pub fn batch(cpu: u32, now: u64, events: Vec<Event>, end: bool) -> Batch {
    Batch {
        cpu,
        events,
        now,
        end,
    }
}
