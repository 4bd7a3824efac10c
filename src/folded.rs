//! Folded stacks: samples aggregated by call chain, one line per distinct stack,
//! `comm;outermost;...;innermost COUNT`: the input of `flamegraph.pl` and inferno.
//!
//! [`FoldedStacks`] is the pure aggregation. Samples are counted by their raw chain (the
//! kernel's entries, markers included, with the process's name and pid): no name is looked
//! up per sample, so adding one costs a hash of its entries. Names come at the end, from a
//! [`FrameNamer`], once per distinct (process, address): the symbol glue passes one that
//! names functions; until then [`AddressNamer`] writes addresses. Stacks whose frames get
//! the same names (two addresses in one function) are merged then, and the lines come out
//! sorted, so that the same samples always give the same text.
//!
//! [`Folding`] feeds it from the event stream a frontend sees (after `-p`/`-C`, the
//! scripts' filters, and the `--filter` expression, which it applies itself) and writes the
//! result at the end, to stdout (`--folded`) or to a file (`--folded FILE`).
//!
//! Memory is bounded: at most [`MAX_STACK_BYTES`] of distinct stacks are kept; samples of
//! stacks beyond that are counted and said, not kept.

use crate::script::output_file::OutputFile;
use std::collections::HashMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::callchain::{Callchain, Context, Frame, frames_of, is_marker};
use crate::event::{Event, EventKind};
use crate::filter::{CommLookup, Filter};

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The most memory the distinct stacks of one run may take (their entries and the table's
/// share), about a quarter of a million 30-frame stacks.
pub(crate) const MAX_STACK_BYTES: usize = 64 << 20;

/// Bytes a stored stack takes besides its entries: the table slot, the box, the count and
/// the allocator's rounding.
const STACK_OVERHEAD: usize = 64;

/// A sample's stack is kept in two parts: its *callers*, `[comm id, pid, leaf position,
/// entries without the leaf...]`, interned once (a program has few call paths), and its
/// *leaf*, the innermost frame, which varies from sample to sample along the hot loop. So the
/// per-sample lookup compares against a few callers that stay in cache, then counts by a
/// small fixed-size key.
const CALLERS_HEAD: usize = 3;

/// Names frames for the folded output.
pub trait FrameNamer {
    /// Append the name of `frame` of process `pid` to `out`. Called once per distinct
    /// process and address (kernel frames once per address, with pid `u32::MAX`).
    fn name(&mut self, pid: u32, frame: Frame, out: &mut String);
}

/// Frames as their addresses (`0x401136`), until symbols are wired in.
pub struct AddressNamer;

impl FrameNamer for AddressNamer {
    fn name(&mut self, _pid: u32, frame: Frame, out: &mut String) {
        use std::fmt::Write as _;
        let _ = write!(out, "{:#x}", frame.ip);
    }
}

/// Samples by stack.
pub struct FoldedStacks {
    /// Callers by id, and their ids.
    callers: Vec<Box<[u64]>>,
    caller_ids: FastMap<Box<[u64]>, u32>,
    /// Samples by (callers id, leaf address).
    stacks: FastMap<(u32, u64), u64>,
    comms: Vec<Box<[u8]>>,
    comm_ids: FastMap<Box<[u8]>, u32>,
    scratch: Vec<u64>,
    bytes: usize,
    max_bytes: usize,
    samples: u64,
    /// Samples not kept because the stacks reached `max_bytes`.
    dropped: u64,
}

/// What was written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FoldSummary {
    /// Lines (distinct named stacks).
    pub stacks: usize,
    /// Samples in them.
    pub samples: u64,
    /// Samples left out because there were too many distinct stacks to keep.
    pub dropped: u64,
}

impl Default for FoldedStacks {
    fn default() -> FoldedStacks {
        FoldedStacks::with_budget(MAX_STACK_BYTES)
    }
}

impl FoldedStacks {
    /// An aggregation that keeps at most `max_bytes` of distinct stacks.
    pub(crate) fn with_budget(max_bytes: usize) -> FoldedStacks {
        FoldedStacks {
            callers: Vec::new(),
            caller_ids: FastMap::default(),
            stacks: FastMap::default(),
            comms: Vec::new(),
            comm_ids: FastMap::default(),
            scratch: Vec::with_capacity(64),
            bytes: 0,
            max_bytes,
            samples: 0,
            dropped: 0,
        }
    }

    /// Count one sample of process `pid` named `comm` (raw bytes, as the kernel gave them):
    /// its chain, or without one its own `ip`, in the context its `misc` says.
    pub fn add(&mut self, comm: &[u8], pid: u32, ip: u64, misc: u16, chain: Option<&Callchain>) {
        let comm_id = match self.comm_ids.get(comm) {
            Some(&id) => id,
            None => {
                let id = self.comms.len() as u32;
                self.comms.push(comm.into());
                self.comm_ids.insert(comm.into(), id);
                self.bytes += 2 * (comm.len() + STACK_OVERHEAD);
                id
            }
        };
        self.samples += 1;
        let alone;
        let entries = match chain.filter(|c| !c.is_empty()) {
            Some(c) => c.entries(),
            None => {
                alone = [marker_of(Context::of_cpumode(misc)), ip];
                &alone[..]
            }
        };
        // Not empty: there is a frame.
        let leaf_at = entries.iter().position(|&e| !is_marker(e)).unwrap_or(0);
        let leaf = entries.get(leaf_at).copied().unwrap_or(ip);
        self.scratch.clear();
        self.scratch
            .extend_from_slice(&[comm_id as u64, pid as u64, leaf_at as u64]);
        self.scratch.extend_from_slice(&entries[..leaf_at]);
        self.scratch
            .extend_from_slice(entries.get(leaf_at + 1..).unwrap_or(&[]));
        let caller = match self.caller_ids.get(&self.scratch[..]) {
            Some(&id) => id,
            None => {
                let size = 2 * (self.scratch.len() * 8 + STACK_OVERHEAD);
                if self.bytes + size > self.max_bytes {
                    self.dropped += 1;
                    return;
                }
                self.bytes += size;
                let id = self.callers.len() as u32;
                self.callers.push(self.scratch.as_slice().into());
                self.caller_ids.insert(self.scratch.as_slice().into(), id);
                id
            }
        };
        if let Some(n) = self.stacks.get_mut(&(caller, leaf)) {
            *n += 1;
            return;
        }
        if self.bytes + STACK_OVERHEAD > self.max_bytes {
            self.dropped += 1;
            return;
        }
        self.bytes += STACK_OVERHEAD;
        self.stacks.insert((caller, leaf), 1);
    }

    /// Samples counted (kept or not).
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Distinct raw stacks kept.
    pub fn len(&self) -> usize {
        self.stacks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.stacks.is_empty()
    }

    /// The folded lines, named by `namer`, merged and sorted: `(stack, count)`.
    pub fn fold(&self, namer: &mut dyn FrameNamer) -> Vec<(String, u64)> {
        let mut names = Names::default();
        // Each callers part named once: its frames outermost first, as the text a line
        // starts with, interned so that callers that name the same merge; and the context
        // its leaf runs in.
        let mut prefix_ids: FastMap<String, u32> = FastMap::default();
        let mut prefixes: Vec<&str> = Vec::new();
        let mut callers: Vec<(u32, u32, Context)> = Vec::with_capacity(self.callers.len());
        let mut entries: Vec<u64> = Vec::new();
        let mut frames: Vec<Frame> = Vec::new();
        let comms: Vec<String> = self
            .comms
            .iter()
            .map(|c| sanitize(&crate::text::escape(c)))
            .collect();
        let mut prefix_text: Vec<String> = Vec::new();
        for key in &self.callers {
            let (head, rest) = key.split_at(CALLERS_HEAD);
            let (comm, pid, leaf_at) = (head[0] as usize, head[1] as u32, head[2] as usize);
            // The chain with a stand-in leaf, for the contexts the markers give.
            entries.clear();
            entries.extend_from_slice(&rest[..leaf_at]);
            entries.push(0);
            entries.extend_from_slice(&rest[leaf_at..]);
            frames.clear();
            frames.extend(frames_of(&entries));
            let leaf_context = frames.first().map_or(Context::Unknown, |f| f.context);
            let mut text = comms[comm].clone();
            for f in frames.iter().skip(1).rev() {
                text.push(';');
                text.push_str(names.name(namer, pid, *f));
            }
            let next = prefix_text.len() as u32;
            let id = *prefix_ids.entry(text.clone()).or_insert_with(|| {
                prefix_text.push(text);
                next
            });
            callers.push((id, pid, leaf_context));
        }
        prefixes.extend(prefix_text.iter().map(String::as_str));
        // Samples by (named callers, named leaf).
        let mut merged: FastMap<(u32, u32), u64> = FastMap::default();
        for (&(caller, leaf), &count) in &self.stacks {
            let (prefix, pid, context) = callers[caller as usize];
            let f = Frame {
                ip: leaf,
                context,
                exact: true,
            };
            let leaf_id = names.id(namer, pid, f);
            *merged.entry((prefix, leaf_id)).or_default() += count;
        }
        let mut out: Vec<(String, u64)> = merged
            .into_iter()
            .map(|((prefix, leaf), count)| {
                let (p, l) = (prefixes[prefix as usize], names.text(leaf));
                let mut line = String::with_capacity(p.len() + 1 + l.len());
                line.push_str(p);
                line.push(';');
                line.push_str(l);
                (line, count)
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// Write the folded lines (`stack COUNT\n`), named by `namer`.
    pub fn write(
        &self,
        namer: &mut dyn FrameNamer,
        out: &mut dyn Write,
    ) -> io::Result<FoldSummary> {
        let lines = self.fold(namer);
        let mut w = io::BufWriter::with_capacity(1 << 16, out);
        let mut samples = 0;
        for (stack, count) in &lines {
            writeln!(w, "{stack} {count}")?;
            samples += count;
        }
        w.flush()?;
        Ok(FoldSummary {
            stacks: lines.len(),
            samples,
            dropped: self.dropped,
        })
    }
}

/// Frame names, each asked of the namer once per distinct (process, address, context, kind
/// of address) (kernel addresses are the same in every process), interned by text so that
/// addresses with one name (one function) share an id.
#[derive(Default)]
struct Names {
    ids: FastMap<(u32, u64, Context, bool), u32>,
    index: FastMap<String, u32>,
    texts: Vec<String>,
    scratch: String,
}

impl Names {
    fn id(&mut self, namer: &mut dyn FrameNamer, pid: u32, f: Frame) -> u32 {
        let owner = if f.is_kernel() { u32::MAX } else { pid };
        if let Some(&id) = self.ids.get(&(owner, f.ip, f.context, f.exact)) {
            return id;
        }
        self.scratch.clear();
        namer.name(owner, f, &mut self.scratch);
        let clean = sanitize(&self.scratch);
        let next = self.texts.len() as u32;
        let id = match self.index.get(&clean) {
            Some(&id) => id,
            None => {
                self.texts.push(clean.clone());
                self.index.insert(clean, next);
                next
            }
        };
        self.ids.insert((owner, f.ip, f.context, f.exact), id);
        id
    }

    fn name(&mut self, namer: &mut dyn FrameNamer, pid: u32, f: Frame) -> &str {
        let id = self.id(namer, pid, f);
        self.text(id)
    }

    fn text(&self, id: u32) -> &str {
        &self.texts[id as usize]
    }
}

/// The marker that starts `context` (for a sample without a chain, its ip alone).
fn marker_of(context: Context) -> u64 {
    use crate::callchain::*;
    match context {
        Context::Kernel => CONTEXT_KERNEL,
        Context::User => CONTEXT_USER,
        Context::Hypervisor => CONTEXT_HV,
        Context::Guest => CONTEXT_GUEST,
        Context::GuestKernel => CONTEXT_GUEST_KERNEL,
        Context::GuestUser => CONTEXT_GUEST_USER,
        // Any marker this decoder does not know reads back as Unknown.
        Context::Unknown => CONTEXT_MAX,
    }
}

/// A name as a folded frame: `;` separates frames and a line ends the stack, so neither may
/// appear in one (names are escaped text already; this is for what a namer returns). An empty
/// name is `[unknown]`.
fn sanitize(name: &str) -> String {
    if name.is_empty() {
        return crate::symbols::UNKNOWN.to_string();
    }
    name.chars()
        .map(|c| match c {
            ';' => ':',
            c if c.is_control() => '?',
            c => c,
        })
        .collect()
}

/// The name a folded stack starts with: the process's name; the idle task is `swapper`, as
/// perf calls it.
fn comm_of(names: &dyn CommLookup, pid: u32, time: u64) -> &[u8] {
    match names.name(pid, time) {
        Some(c) => c,
        None if pid == 0 => b"swapper",
        None => crate::symbols::UNKNOWN.as_bytes(),
    }
}

/// Function names kept for the folded output at most (about 100 bytes each).
const MAX_NAMES: usize = 1 << 20;

/// A frame's name for the folded output, and whether it names a function (else it is its
/// binary's `[liblzma.so.5.4.1]` label, which a later sample's function name replaces: the
/// first samples of a binary come while it is still being read).
struct Learnt {
    name: Box<str>,
    function: bool,
}

/// Remember what the symbolize step said of the frame at `ip` (of `pid`, or of the kernel):
/// its function, else its binary.
fn learn(
    names: &mut FastMap<(u32, u64), Learnt>,
    pid: u32,
    ip: u64,
    kernel: bool,
    sym: Option<&crate::symbols::Symbolized>,
) {
    let Some(sym) = sym else {
        return;
    };
    let owner = if kernel { u32::MAX } else { pid };
    let function = sym.is_known();
    let full = names.len() >= MAX_NAMES;
    let learnt = || Learnt {
        name: sym.symbol().frame_name().into(),
        function,
    };
    match names.get_mut(&(owner, ip)) {
        Some(l) if function && !l.function => *l = learnt(),
        Some(_) => {}
        None if !full => {
            names.insert((owner, ip), learnt());
        }
        None => {}
    }
}

/// Names frames by what the symbolize step said of them, else by address.
struct LearntNames<'a>(&'a FastMap<(u32, u64), Learnt>);

impl FrameNamer for LearntNames<'_> {
    fn name(&mut self, pid: u32, frame: Frame, out: &mut String) {
        match self.0.get(&(pid, frame.ip)) {
            Some(n) => {
                out.push_str(&n.name);
                // A kernel frame, marked as stackcollapse-perf.pl --kernel and inferno
                // mark them (their flame graphs colour such frames apart).
                if pid == u32::MAX {
                    out.push_str("_[k]");
                }
            }
            None => AddressNamer.name(pid, frame, out),
        }
    }
}

/// Where the folded stacks go at the end.
enum Output {
    /// `--folded`: stdout, instead of one line per record.
    Stdout,
    /// `--folded FILE`: a temporary file beside it, made (safely) at start, renamed over it
    /// at the end (`None` once done).
    File(Option<OutputFile>, PathBuf),
}

struct FoldState {
    stacks: FoldedStacks,
    /// The names the symbolize step gave the frames seen (a function, else its binary), by
    /// (pid, or `u32::MAX` for the kernel; address): the names the stacks are written with.
    names: FastMap<(u32, u64), Learnt>,
    filter: Option<Filter>,
    output: Output,
}

/// The folded stacks of a run: made by the run's owner (`run::lifecycle`), handed to the
/// frontend, which feeds it every event it takes, in order ([`Folding::observe`]), and hands
/// it back in its outcome; the owner writes it at the end ([`Folding::finish`]).
pub struct Folding(FoldState);

impl std::fmt::Debug for Folding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.0;
        f.debug_struct("Folding")
            .field("samples", &s.stacks.samples())
            .field("stacks", &s.stacks.len())
            .field("stdout", &matches!(s.output, Output::Stdout))
            .finish()
    }
}

impl Folding {
    /// `--folded` (`path` is `-`: stdout) or `--folded FILE` (created now, with the same
    /// rules as `--script-output` when running as root; an existing executable is refused,
    /// since `--folded ./prog` usually meant a command), with the `--filter` expression.
    pub fn new(path: &Path, filter: Option<Filter>) -> anyhow::Result<Folding> {
        let output = if path.as_os_str() == "-" {
            Output::Stdout
        } else {
            Output::File(Some(open_output(path)?), path.to_path_buf())
        };
        Ok(Folding(FoldState {
            stacks: FoldedStacks::default(),
            names: FastMap::default(),
            filter: filter.filter(|f| !f.is_empty()),
            output,
        }))
    }

    /// The stacks go to stdout in place of the records.
    pub(crate) fn replaces_records(&self) -> bool {
        matches!(self.0.output, Output::Stdout)
    }

    /// Take one event, in stream order, with the process names as of it (the pipeline's
    /// process model): samples that pass the filter are counted.
    pub(crate) fn observe(&mut self, ev: &Event, names: &dyn CommLookup) {
        let s = &mut self.0;
        if let EventKind::Sample {
            ip,
            misc,
            callchain,
            ..
        } = &ev.kind
        {
            if s.filter.as_ref().is_none_or(|f| f.matches(ev, names)) {
                let comm = comm_of(names, ev.pid, ev.time);
                s.stacks.add(comm, ev.pid, *ip, *misc, callchain.as_ref());
                if let Some(n) = ev.names() {
                    let kernel = Context::of_cpumode(*misc).is_kernel();
                    learn(&mut s.names, ev.pid, *ip, kernel, n.sym());
                    if let Some(chain) = callchain {
                        for (f, sym) in chain.frames().zip(n.frames.iter()) {
                            learn(&mut s.names, ev.pid, f.ip, f.is_kernel(), sym.as_ref());
                        }
                    }
                }
            }
        }
    }

    /// Write the stacks (to `stdout`, or to the file), named by the function names the
    /// samples carried, a frame without one by its binary (`[liblzma.so.5.4.1]`, as
    /// `stackcollapse-perf.pl` names it; `[unknown]` outside any mapping), by address only
    /// where a sample carried no names at all. Returns a line for stderr saying
    /// what was written.
    pub(crate) fn finish_named(&mut self, stdout: &mut dyn Write) -> anyhow::Result<String> {
        let names = std::mem::take(&mut self.0.names);
        self.finish(&mut LearntNames(&names), stdout)
    }

    /// Write the stacks (to `stdout`, or to the file), named by `namer`. Returns a line for
    /// stderr saying what was written.
    pub fn finish(
        &mut self,
        namer: &mut dyn FrameNamer,
        stdout: &mut dyn Write,
    ) -> anyhow::Result<String> {
        let s = &mut self.0;
        let (summary, whereto) = match &mut s.output {
            Output::Stdout => {
                match s.stacks.write(namer, stdout) {
                    // `| head`: the reader has what it wanted.
                    Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                        return Ok(String::new());
                    }
                    r => (r?, "stdout".to_string()),
                }
            }
            Output::File(out, path) => {
                let shown = crate::text::escape(path.as_os_str().as_encoded_bytes());
                let Some(mut out) = out.take() else {
                    anyhow::bail!("--folded '{shown}' was written already");
                };
                // On an error the temporary file is removed and the previous file stays.
                let summary = s
                    .stacks
                    .write(namer, out.file())
                    .and_then(|summary| out.commit().map(|()| summary))
                    .map_err(|e| {
                        anyhow::anyhow!(
                            "cannot write --folded '{shown}': {e} (the previous file, if any, is \
                             left as it was)"
                        )
                    })?;
                (summary, format!("'{shown}'"))
            }
        };
        let mut line = format!(
            "folded stacks: {} samples in {} stacks written to {whereto}",
            summary.samples, summary.stacks
        );
        if summary.dropped > 0 {
            line.push_str(&format!(
                "; {} samples of further stacks left out (more distinct stacks than the {} MiB perfwatch keeps)",
                summary.dropped,
                MAX_STACK_BYTES >> 20
            ));
        }
        Ok(line)
    }
}

/// Create the `--folded FILE`: refuse an executable (`--folded ./prog` meant a command), then
/// a temporary file beside it ([`OutputFile`]).
fn open_output(path: &Path) -> anyhow::Result<OutputFile> {
    use std::os::unix::fs::PermissionsExt;
    let shown = crate::text::escape(path.as_os_str().as_encoded_bytes());
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if m.is_file() && m.permissions().mode() & 0o111 != 0 {
            anyhow::bail!(
                "--folded '{shown}': that is an executable file, which perfwatch does not write over (to fold a command's samples onto stdout, write --folded -- COMMAND)"
            );
        }
    }
    OutputFile::create("--folded", path)
        .map_err(|e| anyhow::anyhow!("cannot create --folded '{shown}': {e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callchain::{CONTEXT_KERNEL, CONTEXT_USER};
    use std::sync::Arc;

    fn chain(e: &[u64]) -> Callchain {
        Callchain::new(e.to_vec())
    }

    /// Names a few addresses like a symbolizer would, others as addresses.
    struct Names;
    impl FrameNamer for Names {
        fn name(&mut self, pid: u32, f: Frame, out: &mut String) {
            let n = match (f.lookup_ip(), f.is_kernel()) {
                (0x1000..=0x10ff, false) => "main",
                (0x2000..=0x20ff, false) => "hot_a",
                (0x3000..=0x30ff, false) => "hot_b",
                (0xffff_0000..=0xffff_00ff, true) => "do_syscall_64",
                (0xffff_1000..=0xffff_10ff, true) => "ksys_read",
                _ => return AddressNamer.name(pid, f, out),
            };
            out.push_str(n);
        }
    }

    fn fold(s: &FoldedStacks) -> Vec<String> {
        s.fold(&mut Names)
            .into_iter()
            .map(|(l, n)| format!("{l} {n}"))
            .collect()
    }

    #[test]
    fn stacks_are_outermost_first_merged_by_name_and_sorted() {
        let mut s = FoldedStacks::default();
        // hot_b <- hot_a <- main, at two offsets in hot_b: one line.
        for ip in [0x3010, 0x3020, 0x3010] {
            s.add(
                b"prog",
                7,
                ip,
                2,
                Some(&chain(&[CONTEXT_USER, ip, 0x2031, 0x1042])),
            );
        }
        // hot_a <- main.
        s.add(
            b"prog",
            7,
            0x2005,
            2,
            Some(&chain(&[CONTEXT_USER, 0x2005, 0x1042])),
        );
        // A read syscall from main: kernel frames above the user ones.
        s.add(
            b"prog",
            7,
            0xffff_1004,
            1,
            Some(&chain(&[
                CONTEXT_KERNEL,
                0xffff_1004,
                0xffff_0051,
                CONTEXT_USER,
                0x1066,
            ])),
        );
        assert_eq!(s.samples(), 5);
        assert_eq!(s.len(), 4);
        assert_eq!(
            fold(&s),
            [
                "prog;main;do_syscall_64;ksys_read 1",
                "prog;main;hot_a 1",
                "prog;main;hot_a;hot_b 3",
            ]
        );
    }

    #[test]
    fn processes_and_names_are_kept_apart_and_escaped() {
        let mut s = FoldedStacks::default();
        let c = chain(&[CONTEXT_USER, 0x2005, 0x1042]);
        s.add(b"prog", 7, 0, 2, Some(&c));
        s.add(b"prog", 8, 0, 2, Some(&c));
        s.add(b"other", 9, 0, 2, Some(&c));
        s.add(b"we;ird\x1b[31m name\n", 10, 0, 2, Some(&c));
        assert_eq!(s.len(), 4);
        assert_eq!(
            fold(&s),
            [
                "other;main;hot_a 1",
                "prog;main;hot_a 2",
                "we:ird\\x1b[31m name\\n;main;hot_a 1",
            ]
        );
    }

    #[test]
    fn samples_without_a_chain_fold_to_their_ip() {
        let mut s = FoldedStacks::default();
        s.add(b"k", 0, 0xffff_1004, 1, None);
        s.add(b"k", 0, 0xffff_1004, 1, Some(&chain(&[])));
        s.add(b"k", 0, 0xffff_1004, 1, Some(&chain(&[CONTEXT_KERNEL])));
        s.add(b"u", 5, 0x3000, 2, None);
        s.add(b"x", 5, 0x1234_5678, 0, None);
        assert_eq!(fold(&s), ["k;ksys_read 3", "u;hot_b 1", "x;0x12345678 1"]);
    }

    #[test]
    fn namers_are_asked_once_per_address_and_odd_names_are_made_safe() {
        struct Counting(usize);
        impl FrameNamer for Counting {
            fn name(&mut self, _: u32, f: Frame, out: &mut String) {
                self.0 += 1;
                if f.ip == 0x10 {
                    out.push_str("a;b\nc");
                }
            }
        }
        let mut s = FoldedStacks::default();
        for pid in [1, 2] {
            for _ in 0..3 {
                s.add(b"p", pid, 0, 1, Some(&chain(&[CONTEXT_KERNEL, 0x10, 0x20])));
            }
        }
        let mut n = Counting(0);
        let lines = s.fold(&mut n);
        // Kernel addresses are named once for every process.
        assert_eq!(n.0, 2);
        assert_eq!(lines, [("p;[unknown];a:b?c".to_string(), 6)]);
    }

    #[test]
    fn memory_is_bounded_and_what_is_left_out_is_counted() {
        let mut s = FoldedStacks::with_budget(10_000);
        for i in 0..10_000u64 {
            s.add(
                b"p",
                1,
                0,
                2,
                Some(&chain(&[CONTEXT_USER, 0x1000 + i, 0x1042])),
            );
        }
        assert!(s.len() < 200 && !s.is_empty(), "{}", s.len());
        assert_eq!(s.samples(), 10_000);
        // Stacks already kept go on counting.
        s.add(b"p", 1, 0, 2, Some(&chain(&[CONTEXT_USER, 0x1000, 0x1042])));
        let mut out = Vec::new();
        let sum = s.write(&mut AddressNamer, &mut out).unwrap();
        assert_eq!(sum.samples + sum.dropped, 10_001);
        assert_eq!(sum.stacks, s.len());
        assert!(sum.dropped > 9_000);
        let text = String::from_utf8(out).unwrap();
        assert!(text.lines().any(|l| l == "p;0x1042;0x1000 2"), "{text}");
    }

    #[test]
    fn folding_follows_names_and_the_filter() {
        use crate::event::TaskRecord;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.folded");
        let mut f = Folding::new(&path, Some(Filter::parse("!cpu:1").unwrap())).unwrap();
        assert!(!f.replaces_records());
        let ev = |cpu, pid, kind| Event {
            cpu,
            pid,
            tid: pid,
            time: 1,
            id: 0,
            kind,
        };
        let sample = |cpu, pid| {
            let mut k = EventKind::sample(0x3010, 1, 2);
            if let EventKind::Sample { callchain, .. } = &mut k {
                *callchain = Some(chain(&[CONTEXT_USER, 0x3010, 0x1042]));
            }
            ev(cpu, pid, k)
        };
        let comm = |pid, name: &[u8]| {
            ev(
                0,
                pid,
                EventKind::Comm {
                    pid,
                    tid: pid,
                    comm: name.into(),
                    exec: true,
                },
            )
        };
        let exit = |pid| {
            ev(
                0,
                pid,
                EventKind::Exit(TaskRecord {
                    pid,
                    ppid: 1,
                    tid: pid,
                    ptid: 1,
                    time: 2,
                }),
            )
        };
        // pid 4_000_001 cannot be a live process: its name is learnt from the stream.
        let pid = 4_000_001;
        // The pipeline applies each record to the model before a frontend sees it.
        let mut model = crate::process::ProcessModel::new();
        for e in [
            sample(0, pid),
            comm(pid, b"spin"),
            sample(0, pid),
            sample(0, pid),
            sample(1, pid),
            exit(pid),
            sample(0, 0),
        ] {
            model.apply_one(&e);
            f.observe(&e, &model);
        }
        let said = f.finish(&mut Names, &mut io::sink()).unwrap();
        assert!(said.contains("4 samples in 3 stacks"), "{said}");
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "[unknown];main;hot_b 1\nspin;main;hot_b 2\nswapper;main;hot_b 1\n"
        );
    }

    #[test]
    fn unnamed_frames_fold_by_their_binary_and_a_later_name_wins() {
        use crate::event::SampleNames;
        use crate::symbols::{Dso, DsoKind, Symbol, SymbolKey, Symbolized};
        let lib = Dso::new("/usr/lib/x86_64-linux-gnu/liblzma.so.5.4.1", DsoKind::File);
        let nowhere = Dso::new(crate::symbols::UNKNOWN, DsoKind::Unknown);
        let kernel = Dso::new("[kernel.kallsyms]", DsoKind::Kernel);
        let unnamed = |d: &Arc<Dso>| Some(Symbolized::unknown(&Symbol::unknown(d.clone(), 9)));
        let named = |d: &Arc<Dso>, n: &str| {
            Some(Symbolized::new(
                Symbol::new(Some(n.into()), d.clone(), SymbolKey { dso: 9, start: 0 }),
                0,
            ))
        };
        let mut f = Folding::new(Path::new("-"), None).unwrap();
        let model = crate::process::ProcessModel::new();
        let sample = |ip, entries: &[u64], frames: Vec<Option<Symbolized>>| {
            let mut k = EventKind::sample(ip, 1, 2);
            if let EventKind::Sample { callchain, sym, .. } = &mut k {
                *callchain = Some(chain(entries));
                *sym = Some(std::sync::Arc::new(SampleNames {
                    ip: frames[0].clone(),
                    args: Box::new([]),
                    frames: frames.into(),
                }));
            }
            Event {
                cpu: 0,
                pid: 0,
                tid: 0,
                time: 1,
                id: 0,
                kind: k,
            }
        };
        // Different addresses of one stripped library, below a frame outside any mapping:
        // one stack. The kernel's unnamed frame is its image's.
        for ip in [0x7f00_0000_1000u64, 0x7f00_0000_1040, 0x7f00_0000_2000] {
            let e = sample(
                ip,
                &[CONTEXT_USER, ip, 0x7ffc_0000_0000],
                vec![unnamed(&lib), unnamed(&nowhere)],
            );
            f.observe(&e, &model);
        }
        let e = sample(
            0xffff_ffff_8100_0000,
            &[
                CONTEXT_KERNEL,
                0xffff_ffff_8100_0000,
                CONTEXT_USER,
                0x7f00_0000_1000,
            ],
            vec![unnamed(&kernel), unnamed(&lib)],
        );
        f.observe(&e, &model);
        // The library's table came in: 0x...2000 is named from now on, also in the stacks
        // seen before.
        let e = sample(
            0x7f00_0000_2000,
            &[CONTEXT_USER, 0x7f00_0000_2000, 0x7ffc_0000_0000],
            vec![named(&lib, "lzma_code"), unnamed(&nowhere)],
        );
        f.observe(&e, &model);
        let mut out = Vec::new();
        f.finish_named(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "swapper;[liblzma.so.5.4.1];[kernel.kallsyms]_[k] 1\n\
             swapper;[unknown];[liblzma.so.5.4.1] 2\n\
             swapper;[unknown];lzma_code 2\n"
        );
    }

    #[test]
    fn an_executable_is_not_taken_for_the_output_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let prog = dir.path().join("prog");
        std::fs::write(&prog, b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = Folding::new(&prog, None).err().unwrap().to_string();
        assert!(e.contains("executable") && e.contains("--folded --"), "{e}");
        assert_eq!(std::fs::read(&prog).unwrap(), b"#!/bin/sh\n");
        assert!(
            Folding::new(Path::new("-"), None)
                .unwrap()
                .replaces_records()
        );
    }
}
