//! The pipeline's symbolize step: samples get the names of their function and binary (and
//! their call chain's frames), between the process model and the script stage, so that every
//! consumer downstream (`--plain`, `--json`, the scripts, the filter, `--folded`, the TUI)
//! sees the same names.
//!
//! ```text
//!  ordering ─► process model ─► symbolize ─► [script stage] ─► frontend
//! ```
//!
//! Each ordered chunk is named as a whole: its samples' addresses become [`Request`]s (a
//! kernel address; a user address with the mapping the process model says held it *at the
//! sample's time*, so a process that has already exited is named from what its MMAP2 records
//! said; or an address no mapping holds, for a JIT's perf map), answered by one
//! [`Symbolizer::resolve`] call, and the answers are attached to the samples
//! ([`SampleNames`]). The step runs on the pipeline's thread (the frontend's), never on a
//! reader thread. A cached lookup is a hash probe; a binary's first read starts on the
//! symbolizer's loader pool as its MMAP2 record arrives ([`Symbolize::prefetch`]), and a
//! chunk waits once for every read its samples need, at most [`Config::batch_wait`]: what
//! is not read by then is `[unknown]` in its binary (the read goes on, and later samples get
//! its names), so a slow or hung file, or thirty new binaries at once, hold the lines of
//! everyone up that long at most, never a hang.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHasher};

use crate::callchain::Context;
use crate::event::{Event, EventKind, SampleNames};
use crate::process::ProcessModel;
use crate::symbols::{
    Config, FileIdentity, MappedFile, Mapping, MappingKind, Note, Request, Symbolized, Symbolizer,
};

/// What can be asked about an address of process `pid` in context `context` at `time`.
fn request(
    model: &ProcessModel,
    pid: u32,
    time: u64,
    addr: u64,
    context: Context,
) -> Option<Request> {
    let request = match context {
        Context::Kernel => Some(Request::kernel(addr)),
        Context::User => Some(match model.find_mapping(pid, time, addr) {
            Some((m, _)) => Request::user(
                pid,
                addr,
                &Mapping {
                    start: m.start,
                    len: m.len,
                    pgoff: m.pgoff,
                    file: m.file.sym.clone(),
                },
            ),
            None => Request::unmapped(pid, addr),
        }),
        // A context of an unknown kind: a kernel-half address is the kernel's.
        Context::Unknown if addr >> 63 == 1 => Some(Request::kernel(addr)),
        Context::Unknown => Some(Request::unmapped(pid, addr)),
        // A guest's or the hypervisor's code: nothing here can name it.
        _ => None,
    };
    request.map(|r| r.in_image_of(|| model.image_at(pid, time)))
}

/// The symbolize step: a [`Symbolizer`] and its reused buffers.
pub(crate) struct Symbolize {
    sym: Symbolizer,
    requests: Vec<Request>,
    answers: Vec<Symbolized>,
    /// For each sample of the chunk: its index, and where its requests begin in `asks`.
    slots: Vec<(usize, usize)>,
    /// For each sample's ip and each of its frames, in order, the index of its request
    /// ([`NONE`]: none): one flat array for the chunk, read in the same order.
    asks: Vec<u32>,
    /// The samples of the chunk (by index, in order) with `%ps` arguments: each address and
    /// its request.
    args: Vec<(usize, Vec<(u64, u32)>)>,
    notes: Vec<Note>,
    /// The request already made in this chunk for a (pid, address, context): call chains
    /// repeat their frames, so most are asked once. Cleared at every record that is not a
    /// sample (a mapping, an exec, an exit may change what an address is) and at each chunk.
    asked: FxHashMap<(u32, u64, u8), u32>,
    /// The first sample of this chunk with a stack (by a hash of its pid, cpumode, address
    /// and call chain): a later sample with the same stack shares its names, asking
    /// nothing. Cleared when `asked` is (the same addresses could then mean other code).
    stacks: FxHashMap<u64, usize>,
    /// Samples that share an earlier one's names: (index, index of the earlier one).
    same: Vec<(usize, usize)>,
    /// A frame is named by its address, not its
    /// [`Frame::lookup_ip`](crate::callchain::Frame::lookup_ip) (perf's names: see
    /// [`crate::pipeline::PipelineOptions::perf_names`]).
    returns_by_address: bool,
}

/// The stack of a sample without tracepoint arguments to name: what decides its names
/// between two records that are not samples.
fn stack_of(ev: &Event) -> Option<(u16, u64, Option<&[u64]>)> {
    match &ev.kind {
        EventKind::Sample {
            ip,
            misc,
            callchain,
            raw: None,
            user_stack: None,
            ..
        } => Some((*misc, *ip, callchain.as_ref().map(|c| c.entries()))),
        _ => None,
    }
}

fn stack_hash(pid: u32, stack: &(u16, u64, Option<&[u64]>)) -> u64 {
    let mut h = FxHasher::default();
    (pid, stack).hash(&mut h);
    h.finish()
}

const NONE: u32 = u32::MAX;
/// The index of the request for `addr` of the sample `ev` (a new one unless asked already
/// since the last record that was not a sample), or [`NONE`].
fn ask(
    model: &ProcessModel,
    asked: &mut FxHashMap<(u32, u64, u8), u32>,
    requests: &mut Vec<Request>,
    ev: &Event,
    addr: u64,
    context: Context,
) -> u32 {
    *asked
        .entry((ev.pid, addr, context as u8))
        .or_insert_with(|| match request(model, ev.pid, ev.time, addr, context) {
            Some(r) => {
                requests.push(r);
                (requests.len() - 1) as u32
            }
            None => NONE,
        })
}

impl Symbolize {
    pub fn new(config: Config) -> Symbolize {
        Symbolize {
            returns_by_address: false,
            sym: Symbolizer::new(config),
            requests: Vec::new(),
            answers: Vec::new(),
            slots: Vec::new(),
            asks: Vec::new(),
            args: Vec::new(),
            notes: Vec::new(),
            asked: FxHashMap::default(),
            stacks: FxHashMap::default(),
            same: Vec::new(),
        }
    }

    /// Name each frame by its address (on) rather than the call's byte.
    pub(crate) fn returns_by_address(self, on: bool) -> Symbolize {
        Symbolize {
            returns_by_address: on,
            ..self
        }
    }

    /// See [`Symbolizer::set_load_deadline`].
    pub(crate) fn set_load_deadline(&mut self, at: Option<std::time::Instant>) {
        self.sym.set_load_deadline(at);
    }

    /// Start reading the binaries that `events` (a reader's batch, not yet ordered) map
    /// executable, without waiting: their samples come out of the ordering window later, by
    /// when their names are often read. A process that runs for a moment is also still
    /// there to be read through (`/proc/PID/map_files`).
    pub fn prefetch(&mut self, events: &[Event]) {
        for ev in events {
            let EventKind::Mmap(m) = &ev.kind else {
                continue;
            };
            let Some(x) = &m.mmap2 else { continue };
            if x.prot & libc::PROT_EXEC as u32 == 0 {
                continue;
            }
            let identity = match x.build_id {
                Some(b) => FileIdentity::BuildId(b),
                None => FileIdentity::from_mmap2(x.maj, x.min, x.ino, x.ino_generation),
            };
            let file = MappedFile::new(&m.filename, identity);
            if file.kind() != MappingKind::File {
                continue;
            }
            self.sym.prefetch(
                m.pid,
                &Mapping {
                    start: m.start,
                    len: m.len,
                    pgoff: m.pgoff,
                    file,
                },
            );
        }
    }

    /// Name the samples of `events` (ordered, and already learnt by `model`).
    pub fn name(&mut self, events: &mut [Event], model: &ProcessModel) {
        self.requests.clear();
        self.args.clear();
        self.asked.clear();
        self.stacks.clear();
        self.same.clear();
        self.slots.clear();
        self.asks.clear();
        for (i, ev) in events.iter().enumerate() {
            if let Some(stack) = stack_of(ev) {
                let k = stack_hash(ev.pid, &stack);
                match self.stacks.get(&k) {
                    // The same stack as an earlier sample (not merely the same hash).
                    Some(&j) if events[j].pid == ev.pid && stack_of(&events[j]) == Some(stack) => {
                        self.same.push((i, j));
                        continue;
                    }
                    Some(_) => {}
                    None => {
                        self.stacks.insert(k, i);
                    }
                }
            }
            let EventKind::Sample {
                ip,
                misc,
                callchain,
                event,
                raw,
                ..
            } = &ev.kind
            else {
                if !self.asked.is_empty() || !self.stacks.is_empty() {
                    self.asked.clear();
                    self.stacks.clear();
                }
                continue;
            };
            self.slots.push((i, self.asks.len()));
            let by_address = self.returns_by_address;
            let (asked, requests, slot) = (&mut self.asked, &mut self.requests, &mut self.asks);
            let mut ask =
                |addr: u64, context: Context| ask(model, asked, requests, ev, addr, context);
            slot.push(ask(*ip, Context::of_cpumode(*misc)));
            if let Some(chain) = callchain {
                for f in chain.frames() {
                    let at = if by_address { f.ip } else { f.lookup_ip() };
                    slot.push(ask(at, f.context));
                }
            }
            // A tracepoint's `%ps` arguments (kernel functions).
            if let (Some(fmt), Some(raw)) = (&event.format, raw) {
                if let Some(print) = fmt.print.as_ref().filter(|p| p.shows_symbols()) {
                    let mut args: Vec<(u64, u32)> = Vec::new();
                    for addr in print.symbol_addresses(&fmt.fields, raw).take(8) {
                        if !args.iter().any(|(a, _)| *a == addr) {
                            args.push((addr, ask(addr, Context::Kernel)));
                        }
                    }
                    self.args.push((i, args));
                }
            }
        }
        if self.slots.is_empty() {
            return;
        }
        // `resolve` appends.
        self.answers.clear();
        self.sym.resolve(&self.requests, &mut self.answers);
        let answers = &self.answers;
        let answer = |n: u32| answers.get(n as usize).cloned();
        let by_address = self.returns_by_address;
        let mut next_args = 0;
        for (k, (at, from)) in self.slots.iter().enumerate() {
            let to = self.slots.get(k + 1).map_or(self.asks.len(), |&(_, to)| to);
            let slot = &self.asks[*from..to];
            let EventKind::Sample { sym, callchain, .. } = &mut events[*at].kind else {
                continue;
            };
            // A return address was looked up by the byte before it (inside the call), unless
            // named by itself; its offset is shown from the address itself, as perf shows it.
            let frames: Box<[Option<Symbolized>]> = match callchain {
                Some(chain) => {
                    // Allocated once at its size: the frames' iterator does not know its
                    // length (markers are skipped), and a collect grew and then shrank it.
                    let mut v = Vec::with_capacity(slot.len().saturating_sub(1));
                    v.extend(chain.frames().zip(&slot[1..]).map(|(f, &n)| {
                        let s = answers.get(n as usize)?;
                        Some(match s.offset() {
                            Some(off) if !f.exact && !by_address => {
                                Symbolized::new(s.symbol().clone(), off + (f.ip - f.lookup_ip()))
                            }
                            _ => s.clone(),
                        })
                    }));
                    v.into_boxed_slice()
                }
                None => Box::new([]),
            };
            // Samples with arguments come in the same order as the slots.
            let args = match self.args.get(next_args) {
                Some((i, a)) if i == at => {
                    next_args += 1;
                    a.iter().map(|&(addr, n)| (addr, answer(n))).collect()
                }
                _ => Box::new([]) as Box<[_]>,
            };
            *sym = Some(Arc::new(SampleNames {
                ip: answer(slot[0]),
                frames,
                args,
            }));
        }
        // The earlier sample is always named before: it is in the slots.
        for &(i, j) in &self.same {
            let names = match &events[j].kind {
                EventKind::Sample { sym, .. } => sym.clone(),
                _ => None,
            };
            if let EventKind::Sample { sym, .. } = &mut events[i].kind {
                *sym = names;
            }
        }
        self.notes.extend(self.sym.take_notes());
    }

    /// What should be told once (a binary that could not be read, kallsyms hidden, ...),
    /// since the last call.
    pub fn take_notes(&mut self) -> Vec<Note> {
        std::mem::take(&mut self.notes)
    }

    #[cfg(test)]
    pub fn stats(&self) -> crate::symbols::Stats {
        self.sym.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callchain::{CONTEXT_KERNEL, CONTEXT_USER, Callchain};
    use crate::testkit::events::{fork, sample_at};

    fn kernel_sample(time: u64, ip: u64, chain: Option<Vec<u64>>) -> Event {
        let mut ev = sample_at(0, 7, time, ip, 1);
        if let EventKind::Sample {
            misc, callchain, ..
        } = &mut ev.kind
        {
            *misc = perf_event_open_sys::bindings::PERF_RECORD_MISC_KERNEL as u16;
            *callchain = chain.map(Callchain::new);
        }
        ev
    }

    fn names(ev: &Event) -> (String, Vec<String>) {
        let n = ev.names().expect("named");
        let show = |s: &Option<Symbolized>| s.as_ref().map_or("-".into(), |s| s.to_string());
        (show(&n.ip), n.frames.iter().map(show).collect())
    }

    #[test]
    fn executable_file_mappings_are_read_ahead_and_nothing_else() {
        use crate::testkit::events::{mmap, mmap2};
        let mut step = Symbolize::new(crate::symbols::Config::default());
        let mut data = mmap2(0, 1, 7, 0x1000, 0x1000, 0, b"/nonexistent/pw-data", 9);
        if let EventKind::Mmap(m) = &mut data.kind
            && let Some(x) = &mut m.mmap2
        {
            x.prot = libc::PROT_READ as u32 | libc::PROT_WRITE as u32;
        }
        let events = vec![
            data,
            // No MMAP2 fields: no identity to check a read against; left to the samples.
            mmap(0, 2, 7, 0x2000, 0x1000, 0, b"/nonexistent/pw-old"),
            mmap2(0, 3, 7, 0x3000, 0x1000, 0, b"//anon", 0),
            mmap2(0, 4, 7, 0x4000, 0x1000, 0, b"[vdso]", 0),
            mmap2(0, 5, 7, 0x5000, 0x1000, 0, b"/nonexistent/pw-prog", 5),
            // The same file mapped again: one read.
            mmap2(0, 6, 8, 0x5000, 0x1000, 0, b"/nonexistent/pw-prog", 5),
        ];
        step.prefetch(&events);
        assert_eq!(step.stats().loads, 1);
    }

    #[test]
    fn an_address_asked_again_after_a_new_mapping_is_named_by_the_new_one() {
        use crate::testkit::events::{comm, mmap2};
        // Within one chunk the same address of the same process is asked once, until a
        // record that is not a sample: after an exec, a new program's mapping there names
        // the samples after it.
        let mut step = Symbolize::new(crate::symbols::Config::default());
        let at = |ev: Event| {
            let mut ev = ev;
            if let EventKind::Sample {
                callchain, misc, ..
            } = &mut ev.kind
            {
                *misc = perf_event_open_sys::bindings::PERF_RECORD_MISC_USER as u16;
                *callchain = Some(Callchain::new(vec![CONTEXT_USER, 0x401010, 0x401010]));
            }
            ev
        };
        let mut events = vec![
            mmap2(0, 1, 7, 0x400000, 0x10000, 0, b"/nonexistent/pw-first", 11),
            at(sample_at(0, 7, 2, 0x401010, 1)),
            at(sample_at(0, 7, 3, 0x401010, 1)),
            comm(0, 4, 7, b"second", true),
            mmap2(0, 5, 7, 0x400000, 0x10000, 0, b"/nonexistent/pw-second", 12),
            at(sample_at(0, 7, 6, 0x401010, 1)),
        ];
        let mut model = ProcessModel::new();
        model.apply(&events);
        step.name(&mut events, &model);
        let dso = |ev: &Event| {
            let n = ev.names().expect("named");
            let frames: Vec<String> = n
                .frames
                .iter()
                .map(|f| {
                    f.as_ref()
                        .map_or("-".into(), |s| s.dso().name().to_string())
                })
                .collect();
            (n.ip.as_ref().map(|s| s.dso().name().to_string()), frames)
        };
        let first = "/nonexistent/pw-first".to_string();
        let second = "/nonexistent/pw-second".to_string();
        assert_eq!(
            dso(&events[1]),
            (Some(first.clone()), vec![first.clone(); 2])
        );
        assert_eq!(dso(&events[2]), (Some(first.clone()), vec![first; 2]));
        assert_eq!(dso(&events[5]), (Some(second.clone()), vec![second; 2]));
    }

    #[test]
    fn samples_with_the_same_stack_share_their_names_and_no_other_does() {
        use crate::testkit::events::mmap2;
        let dir = tempfile::tempdir().unwrap();
        let mut step = Symbolize::new(crate::testkit::symbols::kernel(
            dir.path(),
            "ffffffff81000000 T one\nffffffff81001000 T two\nffffffff81002000 T three\nffffffff81003000 T four\n",
        ));
        let chain = |e: &[u64]| Some([&[CONTEXT_KERNEL][..], e].concat());
        let (a, b) = (0xffffffff81000010, 0xffffffff81001020);
        let mut events = vec![
            kernel_sample(1, a, chain(&[a, b])),
            kernel_sample(2, a, chain(&[a, b])),
            // Another process, the same addresses: its own answer.
            {
                let mut ev = kernel_sample(3, a, chain(&[a, b]));
                ev.pid = 8;
                ev
            },
            // The same ip, another chain; then the same chain, another ip.
            kernel_sample(4, a, chain(&[a, 0xffffffff81002004])),
            kernel_sample(5, b, chain(&[a, b])),
            // The same stack again after a record that is not a sample: asked again.
            mmap2(0, 6, 7, 0x400000, 0x1000, 0, b"/nonexistent/pw-x", 3),
            kernel_sample(7, a, chain(&[a, b])),
            kernel_sample(8, a, chain(&[a, b])),
            // The same addresses in user context: nothing of the kernel chain's answers.
            {
                let mut ev = kernel_sample(9, a, Some(vec![CONTEXT_USER, a, b]));
                if let EventKind::Sample { misc, .. } = &mut ev.kind {
                    *misc = perf_event_open_sys::bindings::PERF_RECORD_MISC_USER as u16;
                }
                ev
            },
            // Another innermost frame under the same caller: the caller's answer, its own.
            kernel_sample(10, 0xffffffff81002008, chain(&[0xffffffff81002008, b])),
            // The same stack again, after a record about another process: asked again too.
            mmap2(0, 11, 8, 0x400000, 0x1000, 0, b"/nonexistent/pw-y", 4),
            kernel_sample(12, 0xffffffff81002008, chain(&[0xffffffff81002008, b])),
        ];
        let mut model = ProcessModel::new();
        model.apply(&events);
        step.name(&mut events, &model);
        let arc = |i: usize| match &events[i].kind {
            EventKind::Sample { sym, .. } => sym.clone().expect("named"),
            _ => unreachable!(),
        };
        let shared = |i: usize, j: usize| Arc::ptr_eq(&arc(i), &arc(j));
        assert!(shared(0, 1));
        for (i, j) in [(0, 2), (0, 3), (0, 4), (3, 4), (0, 6), (1, 6)] {
            assert!(!shared(i, j), "{i} and {j} share names");
        }
        assert!(shared(6, 7));
        assert!(!shared(7, 8) && !shared(7, 9) && !shared(8, 9));
        assert!(!shared(9, 11));
        assert_eq!(names(&events[11]), names(&events[9]));
        // Shared or not, each sample is named as it would be alone.
        assert_eq!(names(&events[1]), names(&events[0]));
        assert_eq!(names(&events[2]), names(&events[0]));
        assert_eq!(
            names(&events[0]),
            (
                "one+0x10".into(),
                vec!["one+0x10".into(), "two+0x20".into()]
            )
        );
        assert_eq!(names(&events[3]).1[1], "three+0x4");
        assert_eq!(names(&events[4]).0, "two+0x20");
        assert_eq!(names(&events[7]), names(&events[0]));
        assert_eq!(
            names(&events[8]),
            (
                "[unknown]".into(),
                vec!["[unknown]".into(), "[unknown]".into()]
            )
        );
        assert_eq!(
            names(&events[9]),
            (
                "three+0x8".into(),
                vec!["three+0x8".into(), "two+0x20".into()]
            )
        );
    }

    #[test]
    fn each_chunk_names_its_own_samples_and_frames_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut step = Symbolize::new(crate::testkit::symbols::kernel(
            dir.path(),
            "ffffffff81000000 T one\nffffffff81001000 T two\nffffffff81002000 T three\nffffffff81003000 T four\n",
        ));
        let model = ProcessModel::new();
        let mut first = vec![
            kernel_sample(1, 0xffffffff81000010, None),
            fork(0, 2, 8, 7),
            kernel_sample(
                3,
                0xffffffff81001004,
                Some(vec![CONTEXT_KERNEL, 0xffffffff81001004, 0xffffffff81002009]),
            ),
        ];
        step.name(&mut first, &model);
        assert_eq!(names(&first[0]), ("one+0x10".into(), vec![]));
        assert!(first[1].names().is_none());
        // The second frame is a return address: named by the byte before it, shown with
        // its own offset.
        assert_eq!(
            names(&first[2]),
            ("two+0x4".into(), vec!["two+0x4".into(), "three+0x9".into()])
        );
        // A return address just past a function's end names the function that called.
        let mut edge = vec![kernel_sample(
            5,
            0xffffffff81001004,
            Some(vec![CONTEXT_KERNEL, 0xffffffff81001004, 0xffffffff81002000]),
        )];
        step.name(&mut edge, &model);
        assert_eq!(names(&edge[0]).1[1], "two+0x1000");
        // A later chunk gets its own answers, not the first chunk's.
        let mut second = vec![kernel_sample(4, 0xffffffff81002000, None)];
        step.name(&mut second, &model);
        assert_eq!(names(&second[0]), ("three+0x0".into(), vec![]));
        // A user address no mapping holds: unknown, in no binary the model knows.
        let mut third = vec![sample_at(0, 7, 5, 0x401000, 1)];
        if let EventKind::Sample { callchain, .. } = &mut third[0].kind {
            *callchain = Some(Callchain::new(vec![CONTEXT_USER, 0x401000]));
        }
        step.name(&mut third, &model);
        let (own, frames) = names(&third[0]);
        assert_eq!((own.as_str(), frames.len()), ("[unknown]", 1));
        assert!(step.take_notes().len() <= 1);
    }
}
