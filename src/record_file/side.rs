//! Records of a recording that are not events of the stream but that perf script hands a
//! perf script's hooks: `perf stat record`'s counts (STAT_CONFIG, THREAD_MAP, CPU_MAP, STAT,
//! STAT_ROUND: `stat__EVENT()` and `stat__interval()`) and AUXTRACE_ERROR
//! (`auxtrace_error()`).
//!
//! They are kept beside the stream, in the file's order, for the script stage to take
//! ([`take`]): perf script handles them as it reads them, outside its time ordering, and
//! nothing else of perfwatch shows them. Nothing is kept unless a script asked for them
//! ([`want`], said while the scripts load, before a recording is opened), and at most
//! [`MAX_KEPT`] records (a stat file of a long interval run); the rest are counted.

// The script stage takes them: without the `python` feature nothing does.
#![cfg_attr(not(feature = "python"), allow(dead_code))]

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::header::{u32_at, u64_at};
use crate::event::EventDesc;

pub const AUXTRACE_ERROR: u32 = 72;
pub const THREAD_MAP: u32 = 73;
pub const CPU_MAP: u32 = 74;
pub const STAT_CONFIG: u32 = 75;
pub const STAT: u32 = 76;
pub const STAT_ROUND: u32 = 77;

/// Records kept at most until the script stage takes them.
pub const MAX_KEPT: usize = 1 << 20;

/// One record, decoded.
#[derive(Clone, Debug, PartialEq)]
pub enum SideRecord {
    /// The recording's events, in its order (perf's evlist): said before the first other
    /// record of a stream.
    Counters(Vec<&'static str>),
    /// STAT_CONFIG: `(tag, value)` pairs (0 aggregation mode, 1 interval, 2 scale).
    Config(Vec<(u64, u64)>),
    /// THREAD_MAP: the pids of the counted threads (-1: any).
    Threads(Vec<i32>),
    /// CPU_MAP: the counted CPUs (-1: any).
    Cpus(Vec<i32>),
    /// STAT: one counter's value on one CPU (as a number) and thread (as an index into the
    /// thread map). `counter` indexes [`SideRecord::Counters`]; None when no event has the id.
    Stat {
        counter: Option<usize>,
        cpu: i32,
        thread: u32,
        val: u64,
        ena: u64,
        run: u64,
    },
    /// STAT_ROUND: the counts so far are complete (`interval`: one of `-I`'s, else the final).
    Round { interval: bool, time: u64 },
    /// AUXTRACE_ERROR, with perf's arguments of `auxtrace_error()`.
    AuxtraceError(AuxtraceError),
}

/// `auxtrace_error(typ, code, cpu, pid, tid, ip, ts, msg, cpumode, machine_pid, vcpu)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuxtraceError {
    pub typ: u32,
    pub code: u32,
    pub cpu: i32,
    pub pid: i32,
    pub tid: i32,
    pub ip: u64,
    pub time: u64,
    /// Up to its first NUL (not yet sanitized: the script gets the file's bytes).
    pub msg: Vec<u8>,
    pub cpumode: u8,
    pub machine_pid: i32,
    pub vcpu: i32,
}

static WANTED: AtomicBool = AtomicBool::new(false);
static KEPT: Mutex<Vec<SideRecord>> = Mutex::new(Vec::new());
static OVER: AtomicU64 = AtomicU64::new(0);

/// A script has hooks for these records: keep them from now on.
pub fn want() {
    WANTED.store(true, Ordering::Release);
}

/// Whether a script asked for these records.
pub fn wanted() -> bool {
    WANTED.load(Ordering::Acquire)
}

/// Is `ty` one of the record types this module keeps?
pub fn is_side(ty: u32) -> bool {
    matches!(
        ty,
        AUXTRACE_ERROR | THREAD_MAP | CPU_MAP | STAT_CONFIG | STAT | STAT_ROUND
    )
}

/// Everything kept so far, in the file's order, and how many records did not fit.
pub fn take() -> (Vec<SideRecord>, u64) {
    let kept = match KEPT.lock() {
        Ok(mut k) => std::mem::take(&mut *k),
        Err(p) => std::mem::take(&mut *p.into_inner()),
    };
    (kept, OVER.swap(0, Ordering::Relaxed))
}

fn keep(r: SideRecord) {
    let mut k = KEPT.lock().unwrap_or_else(|p| p.into_inner());
    if k.len() < MAX_KEPT {
        k.push(r);
    } else {
        OVER.fetch_add(1, Ordering::Relaxed);
    }
}

/// Keep the record `rec` (header included) of type `ty`, when a script wants it; `descs`
/// are the recording's events in its order, `desc_of` finds a counter's by id. False when
/// nothing was kept (not wanted, or the record does not decode): the caller counts it as a
/// record perfwatch did not use.
pub fn offer(
    ty: u32,
    rec: &[u8],
    first: bool,
    descs: &[&'static EventDesc],
    index_of: impl Fn(u64) -> Option<usize>,
) -> bool {
    if !wanted() {
        return false;
    }
    let Some(r) = decode(ty, rec, index_of) else {
        return false;
    };
    if first {
        keep(SideRecord::Counters(
            descs.iter().map(|d| perf_name(d)).collect(),
        ));
    }
    keep(r);
    true
}

/// The name perf gives a counter: the file's, or for a file without names (a `perf stat
/// record` file has none) the name of a hardware or software event by its type and config,
/// as `evsel__name` makes it.
pub fn perf_name(d: &'static EventDesc) -> &'static str {
    const HARDWARE: [&str; 10] = [
        "cycles",
        "instructions",
        "cache-references",
        "cache-misses",
        "branches",
        "branch-misses",
        "bus-cycles",
        "stalled-cycles-frontend",
        "stalled-cycles-backend",
        "ref-cycles",
    ];
    const SOFTWARE: [&str; 12] = [
        "cpu-clock",
        "task-clock",
        "page-faults",
        "context-switches",
        "cpu-migrations",
        "minor-faults",
        "major-faults",
        "alignment-faults",
        "emulation-faults",
        "dummy",
        "bpf-output",
        "cgroup-switches",
    ];
    if !d.name.starts_with("event-") {
        return d.name;
    }
    let table: &[&'static str] = match d.type_ {
        0 => &HARDWARE,
        1 => &SOFTWARE,
        _ => return d.name,
    };
    usize::try_from(d.config)
        .ok()
        .and_then(|c| table.get(c).copied())
        .unwrap_or(d.name)
}

/// Decode one record (header included).
pub fn decode(ty: u32, rec: &[u8], index_of: impl Fn(u64) -> Option<usize>) -> Option<SideRecord> {
    let misc = rec
        .get(4..6)
        .map_or(0, |b| u16::from_ne_bytes([b[0], b[1]]));
    let b = rec.get(8..)?;
    let i32_at = |at: usize| u32_at(b, at).map(|v| v as i32);
    Some(match ty {
        STAT_CONFIG => {
            let n = u64_at(b, 0)?.min(64) as usize;
            let pairs = (0..n)
                .map_while(|i| Some((u64_at(b, 8 + 16 * i)?, u64_at(b, 16 + 16 * i)?)))
                .collect();
            SideRecord::Config(pairs)
        }
        THREAD_MAP => {
            // {u64 nr; {u64 pid; char comm[16]} entries[nr]}
            let n = u64_at(b, 0)?.min(1 << 20) as usize;
            let pids = (0..n)
                .map_while(|i| u64_at(b, 8 + 24 * i).map(|p| p as i32))
                .collect();
            SideRecord::Threads(pids)
        }
        CPU_MAP => SideRecord::Cpus(cpu_map(b)?),
        STAT => SideRecord::Stat {
            counter: index_of(u64_at(b, 0)?),
            cpu: i32_at(8)?,
            thread: u32_at(b, 12)?,
            val: u64_at(b, 16)?,
            ena: u64_at(b, 24)?,
            run: u64_at(b, 32)?,
        },
        STAT_ROUND => SideRecord::Round {
            interval: u64_at(b, 0)? == 0,
            time: u64_at(b, 8)?,
        },
        AUXTRACE_ERROR => {
            // {u32 type, code, cpu, pid, tid, fmt; u64 ip, time; char msg[64]; u32
            // machine_pid, vcpu} (the last two from fmt 2 on).
            let fmt = u32_at(b, 20)?;
            // perf: a format-0 record has no time, its message starts where the time is.
            let (time, msg_at) = match fmt {
                0 => (0, 32),
                _ => (u64_at(b, 32)?, 40),
            };
            let msg = b.get(msg_at..(40 + 64).min(b.len())).unwrap_or(&[]);
            SideRecord::AuxtraceError(AuxtraceError {
                typ: u32_at(b, 0)?,
                code: u32_at(b, 4)?,
                cpu: i32_at(8)?,
                pid: i32_at(12)?,
                tid: i32_at(16)?,
                ip: u64_at(b, 24)?,
                time,
                msg: crate::text::until_nul(msg).to_vec(),
                cpumode: (misc & 7) as u8,
                machine_pid: if fmt >= 2 {
                    i32_at(104).unwrap_or(0)
                } else {
                    0
                },
                vcpu: if fmt >= 2 {
                    i32_at(108).unwrap_or(0)
                } else {
                    0
                },
            })
        }
        _ => return None,
    })
}

/// A CPU_MAP's body (`perf_record_cpu_map_data`, packed): a u16 type, then the CPUs as a
/// list (0), a bit mask of 32- or 64-bit words (1) or a range (2).
fn cpu_map(b: &[u8]) -> Option<Vec<i32>> {
    let u16_at = |at: usize| b.get(at..at + 2).map(|x| u16::from_ne_bytes([x[0], x[1]]));
    let cpu = |c: u16| if c == u16::MAX { -1 } else { c as i32 };
    const MAX_CPUS: usize = 1 << 16;
    match u16_at(0)? {
        0 => {
            let n = u16_at(2)? as usize;
            (0..n).map(|i| u16_at(4 + 2 * i).map(cpu)).collect()
        }
        1 => {
            let n = u16_at(2)? as usize;
            let (words, at, bits) = match u16_at(4)? {
                4 => (n, 6, 32),
                8 => (n, 10, 64),
                _ => return None,
            };
            let mut cpus = Vec::new();
            for w in 0..words {
                let word = match bits {
                    32 => u32_at(b, at + 4 * w)? as u64,
                    _ => u64_at(b, at + 8 * w)?,
                };
                for bit in 0..bits {
                    if word >> bit & 1 == 1 && cpus.len() < MAX_CPUS {
                        cpus.push((w * bits + bit) as i32);
                    }
                }
            }
            Some(cpus)
        }
        2 => {
            let any = *b.get(2)? != 0;
            let (start, end) = (u16_at(4)?, u16_at(6)?);
            let mut cpus: Vec<i32> = any.then_some(-1).into_iter().collect();
            cpus.extend((start..=end).take(MAX_CPUS).map(i32::from));
            Some(cpus)
        }
        _ => None,
    }
}

/// The events (their descriptors' addresses) whose samples carry no CPU
/// (PERF_SAMPLE_CPU): a per-task `perf record`'s. perf script gives their samples the CPU
/// -1 (`sample['cpu']` 4294967295, `common_cpu` -1), where the stream has the reader's 0.
static NO_CPU: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// Say that `desc`'s samples carry no CPU.
pub fn mark_no_cpu(desc: &'static EventDesc) {
    let mut v = NO_CPU.lock().unwrap_or_else(|p| p.into_inner());
    let at = desc as *const EventDesc as usize;
    if !v.contains(&at) && v.len() < 4096 {
        v.push(at);
    }
}

/// Whether `desc`'s samples carry no CPU (see [`mark_no_cpu`]).
pub fn no_cpu(desc: &EventDesc) -> bool {
    let at = desc as *const EventDesc as usize;
    NO_CPU.lock().map(|v| v.contains(&at)).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(ty: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&ty.to_ne_bytes());
        r.extend_from_slice(&misc.to_ne_bytes());
        r.extend_from_slice(&((8 + body.len()) as u16).to_ne_bytes());
        r.extend_from_slice(body);
        r
    }

    fn words(ws: &[u64]) -> Vec<u8> {
        ws.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    #[test]
    fn stat_round_and_config_decode() {
        let id = |i: u64| (i == 7).then_some(1);
        let mut b = words(&[7]);
        b.extend_from_slice(&1u32.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend(words(&[100, 20, 10]));
        assert_eq!(
            decode(STAT, &rec(STAT, 0, &b), id),
            Some(SideRecord::Stat {
                counter: Some(1),
                cpu: 1,
                thread: 0,
                val: 100,
                ena: 20,
                run: 10
            })
        );
        assert_eq!(
            decode(STAT_ROUND, &rec(STAT_ROUND, 0, &words(&[1, 55])), id),
            Some(SideRecord::Round {
                interval: false,
                time: 55
            })
        );
        assert_eq!(
            decode(
                STAT_CONFIG,
                &rec(STAT_CONFIG, 0, &words(&[2, 0, 1, 2, 1])),
                id
            ),
            Some(SideRecord::Config(vec![(0, 1), (2, 1)]))
        );
        // Cut short: nothing, never a panic.
        assert_eq!(decode(STAT, &rec(STAT, 0, &b[..20]), id), None);
    }

    #[test]
    fn cpu_maps_of_each_form_decode() {
        // A list with the "any" CPU.
        let mut b = vec![0, 0, 2, 0];
        b.extend_from_slice(&u16::MAX.to_ne_bytes());
        b.extend_from_slice(&3u16.to_ne_bytes());
        assert_eq!(cpu_map(&b), Some(vec![-1, 3]));
        // A 64-bit mask: CPUs 0, 1 and 65.
        let mut b = vec![1, 0, 2, 0, 8, 0, 0, 0, 0, 0];
        b.extend(words(&[0b11, 0b10]));
        assert_eq!(cpu_map(&b), Some(vec![0, 1, 65]));
        // A range.
        let b = [2, 0, 0, 0, 2, 0, 4, 0];
        assert_eq!(cpu_map(&b), Some(vec![2, 3, 4]));
        assert_eq!(cpu_map(&[9, 0]), None);
    }

    #[test]
    fn an_auxtrace_error_gives_perfs_arguments() {
        let mut b = Vec::new();
        for v in [1u32, 2, 3, 40, 41, 2] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        b.extend(words(&[0xffff_0000, 1234]));
        let mut msg = b"decoder error".to_vec();
        msg.resize(64, 0);
        b.extend_from_slice(&msg);
        b.extend_from_slice(&9u32.to_ne_bytes());
        b.extend_from_slice(&5u32.to_ne_bytes());
        let r = decode(AUXTRACE_ERROR, &rec(AUXTRACE_ERROR, 2, &b), |_| None);
        assert_eq!(
            r,
            Some(SideRecord::AuxtraceError(AuxtraceError {
                typ: 1,
                code: 2,
                cpu: 3,
                pid: 40,
                tid: 41,
                ip: 0xffff_0000,
                time: 1234,
                msg: b"decoder error".to_vec(),
                cpumode: 2,
                machine_pid: 9,
                vcpu: 5,
            }))
        );
        // Format 0: no time; the message starts where the time would be.
        b[20..24].copy_from_slice(&0u32.to_ne_bytes());
        b[32..40].copy_from_slice(b"old fmt\0");
        let Some(SideRecord::AuxtraceError(e)) =
            decode(AUXTRACE_ERROR, &rec(AUXTRACE_ERROR, 0, &b), |_| None)
        else {
            panic!("no record");
        };
        assert_eq!((e.time, &e.msg[..], e.machine_pid), (0, &b"old fmt"[..], 0));
    }
}
