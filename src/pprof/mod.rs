//! `--pprof FILE` and `--pprof-every PERIOD DIR`: the samples as pprof profiles
//! (profile.proto, gzip), the format Pyroscope, Parca, Grafana and `go tool pprof` read.
//!
//! [`Profiles`] aggregates samples by (process, stack), like [`crate::folded`], keeping what
//! the symbolize step said of each frame (its function, else its binary) and of each binary
//! (its path and build id); [`Profiles::encode`] turns that into the message: two sample types
//! (`samples`/`count` and `cpu`/`nanoseconds`, the sum of the samples' periods: nanoseconds for
//! `cpu-clock` and `task-clock`, the event's own unit for others), one location per distinct
//! (process, address) (the kernel's shared by all), one function per name, one mapping per
//! binary, and labels `pid`, `comm` and, when known, `cgroup`.
//!
//! The messages are derived with prost ([`proto`]); the `pprof` crate was evaluated and not
//! taken: it is an in-process profiler of the program that links it (SIGPROF), and its
//! protobuf types come with a code generator; `pprof_util` builds profiles from jemalloc's
//! heap dumps. Neither models another process's samples.
//!
//! [`PprofTap`] feeds it from the pipeline ([`crate::pipeline::Tap`]); with a period it hands
//! each period's profile to a writer thread of its own, so that a slow or full disk never
//! holds up the pipeline ([`writer`]).

pub(crate) mod proto;
pub mod writer;

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use prost::Message;

use crate::callchain::Context;
use crate::event::{Event, EventKind};
use crate::process::ProcessModel;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The most distinct stacks one profile keeps (further ones are counted, not kept).
pub(crate) const MAX_STACKS: usize = 200_000;
/// Frame names kept at most.
const MAX_NAMES: usize = 1 << 20;
/// The owner of kernel frames (they are the same in every process).
const KERNEL: u32 = u32::MAX;

/// What a frame is called, and in which binary.
#[derive(Clone)]
struct FrameName {
    /// Shared by every address of the function.
    function: Arc<str>,
    known: bool,
    binary: Arc<Binary>,
}

/// A binary as a pprof mapping.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Binary {
    path: Box<str>,
    build_id: Option<String>,
}

/// Who a stack is of: the process, its name and control group.
#[derive(Clone, Hash, PartialEq, Eq)]
struct Owner {
    pid: u32,
    comm: Arc<str>,
    cgroup: Option<Arc<str>>,
}

/// The samples of one profile.
pub(crate) struct Profiles {
    /// Samples and summed periods by `[owner id, frame id...]`, leaf first. Frame ids are
    /// 4 bytes where a (frame owner, address) is 12: a 60 s profile of a busy machine holds
    /// some 100 000 distinct deep stacks, and that was most of the agent's memory.
    stacks: FastMap<Box<[u32]>, (u64, u64)>,
    /// Frame ids by (frame owner, address); a frame's owner is the pid, or [`KERNEL`].
    frame_ids: FastMap<(u32, u64), u32>,
    frames: Vec<(u32, u64)>,
    owners: Vec<Owner>,
    owner_ids: FastMap<Owner, u32>,
    /// What each frame id is called, when the symbolize step said, by frame id (they are
    /// dense: a vector, where a map cost a hash probe per frame of every sample).
    names: Vec<Option<FrameName>>,
    functions: std::collections::HashSet<Arc<str>, foldhash::fast::RandomState>,
    comms: FastMap<Box<[u8]>, Arc<str>>,
    cgroups: FastMap<Arc<str>, Arc<str>>,
    binaries: FastMap<Arc<Binary>, ()>,
    /// When the profile starts (the wall clock, ns since the epoch) and its events' time.
    pub start_unix_ns: i64,
    first_time: Option<u64>,
    last_time: u64,
    samples: u64,
    dropped: u64,
    scratch: Vec<(u32, u64)>,
    key: Vec<u32>,
}

impl Default for Profiles {
    fn default() -> Profiles {
        Profiles::new()
    }
}

fn now_unix_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

impl Profiles {
    pub fn new() -> Profiles {
        Profiles {
            stacks: FastMap::default(),
            frame_ids: FastMap::default(),
            frames: Vec::new(),
            owners: Vec::new(),
            owner_ids: FastMap::default(),
            names: Vec::new(),
            functions: Default::default(),
            comms: FastMap::default(),
            cgroups: FastMap::default(),
            binaries: FastMap::default(),
            start_unix_ns: now_unix_ns(),
            first_time: None,
            last_time: 0,
            samples: 0,
            dropped: 0,
            scratch: Vec::new(),
            key: Vec::new(),
        }
    }

    /// Samples counted (kept or not).
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Samples not kept (too many distinct stacks).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Count one event (samples only), with the process model as of it.
    pub fn add(&mut self, ev: &Event, model: &ProcessModel) {
        let EventKind::Sample {
            ip,
            misc,
            period,
            callchain,
            sym,
            ..
        } = &ev.kind
        else {
            return;
        };
        self.samples += 1;
        self.first_time.get_or_insert(ev.time);
        self.last_time = self.last_time.max(ev.time);
        let owner = |kernel: bool| if kernel { KERNEL } else { ev.pid };
        self.scratch.clear();
        match callchain.as_ref().filter(|c| !c.is_empty()) {
            Some(chain) => {
                for f in chain.frames() {
                    self.scratch.push((owner(f.is_kernel()), f.ip));
                }
            }
            None => self
                .scratch
                .push((owner(Context::of_cpumode(*misc).is_kernel()), *ip)),
        }
        self.key.clear();
        self.key.push(0);
        for i in 0..self.scratch.len() {
            let frame = self.scratch[i];
            let id = match self.frame_ids.get(&frame) {
                Some(&id) => id,
                None if self.frames.len() < MAX_NAMES => {
                    let id = self.frames.len() as u32;
                    self.frames.push(frame);
                    self.frame_ids.insert(frame, id);
                    id
                }
                None => {
                    self.dropped += 1;
                    return;
                }
            };
            self.key.push(id);
        }
        // What the symbolize step said of each frame.
        if let Some(n) = sym.as_deref() {
            let chain = callchain.as_ref().is_some_and(|c| !c.is_empty());
            let named = if chain {
                &n.frames[..]
            } else {
                std::slice::from_ref(&n.ip)
            };
            for (i, s) in named.iter().enumerate().take(self.scratch.len()) {
                if let Some(s) = s {
                    self.learn(self.key[i + 1], s);
                }
            }
        }
        let comm_bytes: &[u8] = match model.comm_at(ev.pid, ev.time) {
            Some(c) => c.as_bytes(),
            None if ev.pid == 0 => b"swapper",
            None => crate::symbols::UNKNOWN.as_bytes(),
        };
        let comm = match self.comms.get(comm_bytes) {
            Some(c) => c.clone(),
            None => {
                let c: Arc<str> = crate::text::escape(comm_bytes).into();
                self.comms.insert(comm_bytes.into(), c.clone());
                c
            }
        };
        let cgroup = model
            .process_at(ev.pid, ev.time)
            .and_then(|p| p.cgroup.clone())
            .map(|c| match self.cgroups.get(&c) {
                Some(e) => e.clone(),
                None => {
                    let e: Arc<str> = crate::text::escape(c.as_bytes()).into();
                    self.cgroups.insert(c, e.clone());
                    e
                }
            });
        let owner = Owner {
            pid: ev.pid,
            comm,
            cgroup,
        };
        let owner_id = match self.owner_ids.get(&owner) {
            Some(&id) => id,
            None => {
                let id = self.owners.len() as u32;
                self.owners.push(owner.clone());
                self.owner_ids.insert(owner, id);
                id
            }
        };
        self.key[0] = owner_id;
        let full = self.stacks.len() >= MAX_STACKS;
        match self.stacks.get_mut(&self.key[..]) {
            Some(v) => {
                v.0 += 1;
                v.1 += period;
            }
            None if !full => {
                self.stacks.insert(self.key.as_slice().into(), (1, *period));
            }
            None => self.dropped += 1,
        }
    }

    fn learn(&mut self, frame: u32, s: &crate::symbols::Symbolized) {
        let known = s.is_known();
        if let Some(Some(n)) = self.names.get(frame as usize) {
            if n.known || !known {
                return;
            }
        }
        let dso = s.dso();
        let path = if dso.name().is_empty() {
            dso.unnamed()
        } else {
            dso.name()
        };
        let binary = Binary {
            path: crate::text::escape(path.as_bytes()).into(),
            build_id: dso.build_id().map(|b| b.to_hex()),
        };
        let binary = match self.binaries.get_key_value(&binary) {
            Some((b, _)) => b.clone(),
            None => {
                let b = Arc::new(binary);
                self.binaries.insert(b.clone(), ());
                b
            }
        };
        let name = crate::text::escape(s.symbol().frame_name().as_bytes());
        let function = match self.functions.get(name.as_str()) {
            Some(f) => f.clone(),
            None => {
                let f: Arc<str> = name.into();
                self.functions.insert(f.clone());
                f
            }
        };
        // Frame ids are below MAX_NAMES.
        let at = frame as usize;
        if self.names.len() <= at {
            self.names.resize(at + 1, None);
        }
        self.names[at] = Some(FrameName {
            function,
            known,
            binary,
        });
    }

    /// The profile as profile.proto's message.
    pub(crate) fn encode(&self) -> proto::Profile {
        let mut strings = Strings::default();
        let samples_t = proto::ValueType {
            r#type: strings.id("samples"),
            unit: strings.id("count"),
        };
        let cpu_t = proto::ValueType {
            r#type: strings.id("cpu"),
            unit: strings.id("nanoseconds"),
        };
        let (k_pid, k_comm, k_cgroup) =
            (strings.id("pid"), strings.id("comm"), strings.id("cgroup"));
        let mut mappings: FastMap<*const Binary, u64> = FastMap::default();
        let mut mapping = Vec::new();
        let mut functions: FastMap<(Arc<str>, u64), u64> = FastMap::default();
        let mut function = Vec::new();
        let mut locations: FastMap<u32, u64> = FastMap::default();
        let mut location = Vec::new();
        let unknown = Arc::new(Binary {
            path: crate::symbols::UNKNOWN.into(),
            build_id: None,
        });
        let mut sample = Vec::with_capacity(self.stacks.len());
        let mut keys: Vec<_> = self.stacks.iter().collect();
        // The same samples give the same bytes.
        keys.sort_unstable();
        for (key, &(count, ns)) in keys {
            let Some((&owner_id, frames)) = key.split_first() else {
                continue;
            };
            let who = &self.owners[owner_id as usize];
            let mut ids = Vec::with_capacity(frames.len());
            for &frame in frames {
                let Some(&(_, ip)) = self.frames.get(frame as usize) else {
                    continue;
                };
                let id = match locations.get(&frame) {
                    Some(&id) => id,
                    None => {
                        let (fname, binary) =
                            match self.names.get(frame as usize).and_then(|n| n.as_ref()) {
                                Some(n) => (n.function.clone(), n.binary.clone()),
                                None => (format!("{ip:#x}").into(), unknown.clone()),
                            };
                        let next = mapping.len() as u64 + 1;
                        let mapping_id =
                            *mappings.entry(Arc::as_ptr(&binary)).or_insert_with(|| {
                                mapping.push(proto::Mapping {
                                    id: next,
                                    filename: strings.id(&binary.path),
                                    build_id: binary
                                        .build_id
                                        .as_deref()
                                        .map_or(0, |b| strings.id(b)),
                                    has_functions: true,
                                    ..proto::Mapping::default()
                                });
                                next
                            });
                        let next = function.len() as u64 + 1;
                        let function_id = *functions
                            .entry((fname.clone(), mapping_id))
                            .or_insert_with(|| {
                                let name = strings.id(&fname);
                                function.push(proto::Function {
                                    id: next,
                                    name,
                                    system_name: name,
                                    filename: strings.id(&binary.path),
                                    start_line: 0,
                                });
                                next
                            });
                        let id = location.len() as u64 + 1;
                        location.push(proto::Location {
                            id,
                            mapping_id,
                            address: ip,
                            line: vec![proto::Line {
                                function_id,
                                line: 0,
                            }],
                            is_folded: false,
                        });
                        locations.insert(frame, id);
                        id
                    }
                };
                ids.push(id);
            }
            let mut label = vec![
                proto::Label {
                    key: k_pid,
                    num: who.pid as i64,
                    ..proto::Label::default()
                },
                proto::Label {
                    key: k_comm,
                    str: strings.id(&who.comm),
                    ..proto::Label::default()
                },
            ];
            if let Some(cg) = &who.cgroup {
                label.push(proto::Label {
                    key: k_cgroup,
                    str: strings.id(cg),
                    ..proto::Label::default()
                });
            }
            sample.push(proto::Sample {
                location_id: ids,
                value: vec![count as i64, ns as i64],
                label,
            });
        }
        let duration = match self.first_time {
            Some(t) => self.last_time.saturating_sub(t) as i64,
            None => 0,
        };
        let comment = vec![strings.id("perfwatch")];
        proto::Profile {
            sample_type: vec![samples_t, cpu_t.clone()],
            sample,
            mapping,
            location,
            function,
            time_nanos: self.start_unix_ns,
            duration_nanos: duration,
            period_type: Some(cpu_t),
            period: 0,
            comment,
            default_sample_type: 0,
            string_table: strings.table,
        }
    }

    /// The profile, gzip-compressed, into `out`.
    pub(crate) fn write_gzip(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let bytes = self.encode().encode_to_vec();
        let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
        gz.write_all(&bytes)?;
        gz.finish()?.flush()
    }
}

/// profile.proto's string table: index 0 is "".
struct Strings {
    table: Vec<String>,
    ids: FastMap<String, i64>,
}

impl Default for Strings {
    fn default() -> Strings {
        Strings {
            table: vec![String::new()],
            ids: FastMap::default(),
        }
    }
}

impl Strings {
    fn id(&mut self, s: &str) -> i64 {
        if s.is_empty() {
            return 0;
        }
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.table.len() as i64;
        self.table.push(s.to_string());
        self.ids.insert(s.to_string(), id);
        id
    }
}

pub(crate) use writer::PprofTap;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callchain::{CONTEXT_USER, Callchain};
    use crate::testkit::events::sample;

    #[test]
    fn samples_become_locations_functions_and_two_values() {
        let mut p = Profiles::new();
        let model = ProcessModel::new();
        for i in 0..10u64 {
            let mut ev = sample(0, 42, i, 1_000_000);
            if let EventKind::Sample { callchain, .. } = &mut ev.kind {
                let leaf = if i < 7 { 0x1000 } else { 0x2000 };
                *callchain = Some(Callchain::new(vec![CONTEXT_USER, leaf, 0x3000]));
            }
            p.add(&ev, &model);
        }
        let prof = p.encode();
        assert_eq!(prof.sample.len(), 2);
        assert_eq!(prof.location.len(), 3);
        let s = |i: i64| prof.string_table[i as usize].as_str();
        assert_eq!(s(prof.sample_type[1].r#type), "cpu");
        assert_eq!(s(prof.sample_type[1].unit), "nanoseconds");
        let total: i64 = prof.sample.iter().map(|x| x.value[1]).sum();
        assert_eq!(total, 10_000_000);
        let big = prof.sample.iter().find(|x| x.value[0] == 7).unwrap();
        assert_eq!(big.location_id.len(), 2);
        let leaf = &prof.location[(big.location_id[0] - 1) as usize];
        assert_eq!(leaf.address, 0x1000);
        assert_eq!(
            s(prof.function[(leaf.line[0].function_id - 1) as usize].name),
            "0x1000"
        );
        assert!(big.label.iter().any(|l| s(l.key) == "pid" && l.num == 42));
        let mut gz = Vec::new();
        p.write_gzip(&mut gz).unwrap();
        let mut raw = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut raw).unwrap();
        assert_eq!(proto::Profile::decode(&raw[..]).unwrap(), prof);
    }
}
