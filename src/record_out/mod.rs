//! `-o FILE` and `-o -`: what perfwatch records, also written as perf.data (file mode) or in
//! perf's pipe format on stdout, for `perf report -i`, `perf script -i` and `perfwatch -i`.
//!
//! The records are the rings' own bytes: each reader copies what it drained into a bounded
//! queue ([`crate::perf::raw_tap`]) that a writer thread of its own empties, so a slow disk
//! never slows a reader (what the queue cannot take is dropped, counted, and written as a
//! LOST record). The writer puts first the attributes and their ids, then what `perf record`
//! synthesises (the kernel's map; COMM and MMAP2 for the processes and executable mappings
//! `/proc` showed at start: the pipeline's own snapshot, handed over by a tap), writes a
//! FINISHED_ROUND each time every CPU has been drained since the last one (perf's readers
//! order the records by it), and at the end the feature sections: host, OS release, version,
//! arch, CPUs, command line, event names, the build ids of the binaries samples hit (the
//! symbolizer read them), and the tracepoints' formats; in file mode the header last. A write
//! error is said once; the monitor goes on and the exit status says it.

pub mod copy;
mod layout;

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::event::Event;
use crate::monitor::Monitor;
use crate::perf::raw_tap::{RawQueue, RawTap, raw_queue};
use crate::pipeline::Tap;
use crate::process::ProcessModel;
use crate::process::proc::SeedProcess;
use crate::record_file::format as f;
use crate::script::output_file::OutputFile;
use crate::symbols::{Dso, DsoKind};
use layout::{Features, HitBinary};

/// Bytes of records the queue holds before it drops: a few seconds of a busy machine.
const QUEUE_BYTES: usize = 64 << 20;
/// How long the writer waits for the `/proc` snapshot before it writes the rings' records
/// without it (they wait in the queue meanwhile, while it has room), and how long the
/// pipeline's shutdown waits for it with `-o`: on a loaded machine reading `/proc` takes
/// seconds.
pub(crate) const SEED_WAIT: Duration = Duration::from_secs(15);
/// At the end, how long the writer waits for a CPU's last chunk.
const END_WAIT: Duration = Duration::from_secs(2);

/// Where the recording goes.
enum Sink {
    File(OutputFile),
    Stdout,
}

/// What the tap hands the writer.
#[derive(Default)]
struct Shared {
    /// The synthesised records and their count, once the snapshot is in, and whether it
    /// came (the pipeline gives up on a slow one).
    seed: Mutex<Option<(Vec<u8>, u64, bool)>>,
    /// The binaries samples hit.
    hits: Mutex<Vec<Arc<Dso>>>,
    finishing: AtomicBool,
}

/// What the writer did.
#[derive(Default)]
struct Written {
    records: u64,
    bytes: u64,
    error: Option<String>,
    /// The error was said when it happened.
    said: bool,
    /// The `/proc` snapshot did not come (or was empty): what existed at start is missing.
    no_start: bool,
}

/// An `-o` being written.
pub(crate) struct RecordOut {
    shown: String,
    sink: Option<Sink>,
    tap: RawTap,
    queue: Option<RawQueue>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Written>>,
    interactive: bool,
    only: Option<Vec<u32>>,
}

impl RecordOut {
    /// Create the file (or check stdout for `-o -`) before anything is opened: a path that
    /// cannot be used stops perfwatch before it starts.
    ///
    /// `only`: with a task target, the processes (by pid, or by one of their threads' tids)
    /// whose threads and mappings are synthesised, as `perf record -p` does (none for a
    /// command, whose exec comes as records); `None` for all of them (system-wide).
    pub(crate) fn prepare(
        path: &Path,
        interactive: bool,
        only: Option<Vec<u32>>,
    ) -> Result<RecordOut> {
        let shown = crate::text::escape(path.as_os_str().as_encoded_bytes());
        let sink = if path == Path::new("-") {
            // The caller has checked that stdout is not a terminal and is free.
            Sink::Stdout
        } else {
            Sink::File(
                OutputFile::create("-o", path)
                    .with_context(|| format!("cannot write the recording '-o {shown}'"))?,
            )
        };
        // Test hook, in debug builds only: a smaller queue, to see what a writer that falls
        // behind does.
        let limit = std::env::var("PERFWATCH_DEBUG_RECORD_QUEUE")
            .ok()
            .filter(|_| cfg!(debug_assertions))
            .and_then(|v| v.parse().ok())
            .unwrap_or(QUEUE_BYTES);
        let (tap, queue) = raw_queue(limit);
        Ok(RecordOut {
            shown,
            sink: Some(sink),
            tap,
            queue: Some(queue),
            shared: Arc::new(Shared::default()),
            thread: None,
            interactive,
            only,
        })
    }

    /// The readers' side of the queue, for [`crate::monitor::MonitorConfig::raw`].
    pub(crate) fn raw_tap(&self) -> RawTap {
        self.tap.clone()
    }

    /// Start writing, now that the events are open; the tap to put on the pipeline (it
    /// hands over the `/proc` snapshot and the binaries samples hit).
    pub fn start(&mut self, mon: &Monitor) -> Result<Box<dyn Tap>> {
        let info = &mon.info;
        let attrs: Vec<Vec<u8>> = info.attrs.iter().map(layout::attr_for_file).collect();
        let first = attrs.first().cloned().unwrap_or_default();
        let trailer =
            layout::id_trailer_size(layout::sample_type(&first), layout::sample_id_all(&first));
        let mut features = Features::of_this_machine(&info.cpus);
        features.events = attrs
            .iter()
            .zip(&info.events)
            .zip(&info.attrs)
            .map(|((a, e), o)| (a.clone(), e.name.clone(), o.ids.clone()))
            .collect();
        let tracepoints: Vec<&str> = info
            .events
            .iter()
            .filter(|e| e.is_tracepoint())
            .map(|e| e.name.as_str())
            .collect();
        if !tracepoints.is_empty() {
            features.tracing_data = crate::perf::events::tracefs_root()
                .and_then(|root| layout::tracing_data(root, &tracepoints));
        }
        let plan = Plan {
            attrs,
            ids: info.attrs.iter().map(|a| a.ids.clone()).collect(),
            features,
            cpus: info.cpus.clone(),
            clockid: info.clockid,
            shown: self.shown.clone(),
            say_now: !self.interactive,
            trailer,
            stop: mon.stop_time.clone(),
            time_at: layout::TimeAt::new(
                layout::sample_type(&first),
                layout::sample_id_all(&first),
            ),
        };
        let sink = self.sink.take().context("-o started twice")?;
        let queue = self.queue.take().context("-o started twice")?;
        let shared = self.shared.clone();
        self.thread = Some(
            std::thread::Builder::new()
                .name("perfwatch-record-out".into())
                .spawn(move || write_recording(sink, queue, &shared, plan))
                .context("cannot start the recording's writer thread")?,
        );
        Ok(Box::new(HitsTap {
            shared: self.shared.clone(),
            trailer,
            seen: rustc_hash::FxHashSet::default(),
            only: self.only.clone(),
        }))
    }

    /// At the end (after the frontend has seen the last records): write the header, put the
    /// file in place and say what was written. False when the recording is incomplete.
    pub fn finish(mut self) -> bool {
        self.shared.finishing.store(true, Ordering::Release);
        let Some(t) = self.thread.take() else {
            return false;
        };
        let w = t.join().unwrap_or_else(|p| Written {
            error: Some(format!(
                "internal error: {}",
                crate::panic_message(p.as_ref())
            )),
            ..Written::default()
        });
        let dropped = self.tap.drops.records.load(Ordering::Relaxed);
        let mut line = match &w.error {
            Some(_) if w.said => String::new(),
            Some(e) => format!(
                "perfwatch: error: the recording '-o {}' was not written: {e}\n",
                self.shown
            ),
            None => format!(
                "perfwatch: recording '-o {}': {} records, {:.1} MB\n",
                self.shown,
                w.records,
                w.bytes as f64 / 1e6
            ),
        };
        if w.no_start && w.error.is_none() {
            line += &format!(
                "perfwatch: -o {}: the processes and mappings that existed at start are not in it (/proc was not read in time): their samples are named by address only\n",
                self.shown
            );
        }
        if dropped > 0 {
            line += &format!(
                "perfwatch: -o {}: {dropped} records ({} bytes) were not written: the writer fell behind the rings\n",
                self.shown,
                self.tap.drops.bytes.load(Ordering::Relaxed)
            );
        }
        crate::output::stderr_bounded(line.as_bytes());
        w.error.is_none() && dropped == 0
    }
}

/// Collects what the writer needs from the pipeline: the snapshot, the binaries hit.
struct HitsTap {
    shared: Arc<Shared>,
    trailer: usize,
    /// The binaries already handed over, by address (a hash per sample frame: Fx, not SipHash).
    seen: rustc_hash::FxHashSet<usize>,
    only: Option<Vec<u32>>,
}

impl Tap for HitsTap {
    fn seeded(&mut self, snapshot: &[SeedProcess]) {
        let synth = match &self.only {
            None => layout::synthesize(snapshot, self.trailer),
            Some(ids) => {
                let wanted: Vec<SeedProcess> = snapshot
                    .iter()
                    .filter(|p| {
                        ids.contains(&p.pid) || p.threads.iter().any(|(t, _)| ids.contains(t))
                    })
                    .cloned()
                    .collect();
                layout::synthesize(&wanted, self.trailer)
            }
        };
        if let Ok(mut s) = self.shared.seed.lock() {
            *s = Some((synth.0, synth.1, !snapshot.is_empty()));
        }
    }

    fn chunk(&mut self, events: &[Event], _model: &ProcessModel) {
        let mut new = Vec::new();
        for e in events {
            let Some(n) = e.names() else { continue };
            for s in n.ip.iter().chain(n.frames.iter().flatten()) {
                let dso = s.symbol().dso();
                if self.seen.insert(Arc::as_ptr(dso) as usize) {
                    new.push(dso.clone());
                }
            }
        }
        if !new.is_empty() {
            if let Ok(mut h) = self.shared.hits.lock() {
                h.extend(new);
            }
        }
    }
}

/// What the writer thread writes.
struct Plan {
    attrs: Vec<Vec<u8>>,
    ids: Vec<Vec<u64>>,
    features: Features,
    cpus: Vec<u32>,
    clockid: libc::clockid_t,
    shown: String,
    say_now: bool,
    /// The size of the `sample_id` trailer of records other than samples.
    trailer: usize,
    /// The run's stop time: the last drains' records stamped later are left out, as the
    /// frontends leave them out.
    stop: Arc<crate::stop::StopTime>,
    time_at: Option<layout::TimeAt>,
}

/// A buffered output that remembers its position and its first error (then writes nothing
/// more).
struct Out {
    w: BufWriter<File>,
    pos: u64,
    error: Option<std::io::Error>,
}

impl Out {
    fn put(&mut self, b: &[u8]) {
        if self.error.is_some() {
            return;
        }
        match self.w.write_all(b) {
            Ok(()) => self.pos += b.len() as u64,
            Err(e) => self.error = Some(e),
        }
    }
}

/// The writer thread.
fn write_recording(mut sink: Sink, queue: RawQueue, shared: &Shared, mut plan: Plan) -> Written {
    use std::os::fd::AsFd;
    let file = match &mut sink {
        Sink::File(o) => o.file().try_clone(),
        Sink::Stdout => std::io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .map(File::from),
    };
    let file = match file {
        Ok(f) => f,
        Err(e) => {
            return Written {
                error: Some(e.to_string()),
                ..Written::default()
            };
        }
    };
    let pipe = matches!(sink, Sink::Stdout);
    let mut out = Out {
        w: BufWriter::with_capacity(1 << 20, file),
        pos: 0,
        error: None,
    };
    let mut written = Written::default();
    // The header's place (file mode), or perf's pipe header and header records.
    let attr_size = plan.attrs.first().map_or(0, Vec::len);
    let mut attrs_at = (0, 0);
    if pipe {
        out.put(&layout::pipe_header());
        for (a, ids) in plan.attrs.iter().zip(&plan.ids) {
            out.put(&layout::attr_records(a, ids));
        }
        for (_, name, ids) in &plan.features.events {
            if let Some(r) = layout::event_name_record(ids.first().copied(), name) {
                out.put(&r);
            }
        }
        for (bit, body) in plan.features.sections() {
            if bit != f::FEAT_BUILD_ID && bit != f::FEAT_EVENT_DESC && bit != f::FEAT_TRACING_DATA {
                if let Some(r) = layout::feature_record(bit, &body) {
                    out.put(&r);
                }
            }
        }
        if let Some(t) = &plan.features.tracing_data {
            out.put(&layout::tracing_data_record(t));
        }
    } else {
        out.put(&[0; f::FILE_HEADER_SIZE as usize]);
        let mut id_at = Vec::new();
        for ids in &plan.ids {
            id_at.push((out.pos, ids.len() as u64 * 8));
            for id in ids {
                out.put(&id.to_le_bytes());
            }
        }
        attrs_at.0 = out.pos;
        for (a, (off, size)) in plan.attrs.iter().zip(&id_at) {
            let mut a = a.clone();
            a.resize(attr_size, 0);
            out.put(&a);
            out.put(&off.to_le_bytes());
            out.put(&size.to_le_bytes());
        }
        attrs_at.1 = out.pos - attrs_at.0;
    }
    let data_at = out.pos;
    // What existed at start comes first: perf's readers take it before any sample.
    let kernel = kernel_text().and_then(|(t, e)| layout::kernel_text_mmap(t, e, plan.trailer));
    if let Some(k) = kernel {
        out.put(&k);
        written.records += 1;
    }
    let waited = Instant::now();
    loop {
        if let Ok(mut s) = shared.seed.lock() {
            if let Some((b, n, came)) = s.take() {
                out.put(&b);
                written.records += n;
                written.no_start = !came;
                break;
            }
        }
        if waited.elapsed() >= SEED_WAIT
            || queue.queued() * 2 > QUEUE_BYTES
            || shared.finishing.load(Ordering::Acquire)
        {
            written.no_start = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    if pipe {
        out.put(&layout::bare_record(f::FINISHED_INIT));
    }
    // The rings' records, with a FINISHED_ROUND each time every live CPU has been drained
    // since the last one was written (a drain that began after it): no record after the next
    // one is older than anything before this one, which is what perf's readers rely on.
    let mut live: HashSet<u32> = plan.cpus.iter().copied().collect();
    let mut drained: HashSet<u32> = HashSet::new();
    let mut round_at = 0u64;
    let mut pending_round = false;
    // Records the queue dropped that a LOST record in the file already says.
    let mut lost_said = 0u64;
    let mut said = false;
    let mut idle_since: Option<Instant> = None;
    loop {
        let finishing = shared.finishing.load(Ordering::Acquire);
        // Every CPU's last chunk is in once the run finishes: take what is still queued.
        let drained_all = finishing && live.is_empty();
        let wait = if drained_all {
            Duration::ZERO
        } else {
            Duration::from_millis(100)
        };
        let chunk = match queue.next(wait) {
            Ok(c) => {
                idle_since = None;
                c
            }
            Err(gone) => {
                // At the end, a CPU whose last chunk was dropped is waited for this long.
                let idle = match finishing {
                    true => idle_since.get_or_insert_with(Instant::now).elapsed(),
                    false => Duration::ZERO,
                };
                if gone || drained_all || idle >= END_WAIT {
                    break;
                }
                continue;
            }
        };
        // A reader's last drain may hold records stamped after the stop time (written before
        // its events were disabled): the frontends leave them out, so does the file.
        let (bytes, records) = match (chunk.end, plan.time_at, plan.stop.get()) {
            (true, Some(at), Some(stop)) => {
                let (kept, cut) = layout::up_to(&chunk.bytes, at, stop);
                (kept, chunk.records.saturating_sub(cut))
            }
            _ => (chunk.bytes, chunk.records),
        };
        if !bytes.is_empty() {
            out.put(&bytes);
            if out.error.is_none() {
                written.records += records;
            }
            pending_round = true;
        }
        if chunk.end {
            live.remove(&chunk.cpu);
        } else if chunk.now > round_at {
            drained.insert(chunk.cpu);
        }
        if pending_round && live.iter().all(|c| drained.contains(c)) {
            lost_said = say_drops(&mut out, &queue, &plan, lost_said);
            out.put(&layout::bare_record(f::FINISHED_ROUND));
            round_at = crate::clock::clock_ns(plan.clockid);
            drained.clear();
            pending_round = false;
        }
        if let (Some(e), false, true) = (&out.error, said, plan.say_now) {
            said = true;
            {
                crate::output::stderr_bounded(
                    format!(
                        "perfwatch: error: cannot write the recording '-o {}' ({e}); the recording stops here, the monitor goes on and will exit with status 1\n",
                        plan.shown
                    )
                    .as_bytes(),
                );
            }
        }
    }
    say_drops(&mut out, &queue, &plan, lost_said);
    if pending_round {
        out.put(&layout::bare_record(f::FINISHED_ROUND));
    }
    // The build ids of the binaries samples hit, as the symbolizer read them.
    let hits = shared.hits.lock().map(|h| h.clone()).unwrap_or_default();
    plan.features.build_ids = hit_binaries(&hits);
    let data_size = out.pos - data_at;
    if pipe {
        for b in &plan.features.build_ids {
            out.put(&layout::build_id_record(f::HEADER_BUILD_ID, b));
        }
    } else {
        let sections = plan.features.sections();
        let mut at = out.pos + 16 * sections.len() as u64;
        let mut index = Vec::new();
        for (_, body) in &sections {
            index.extend_from_slice(&at.to_le_bytes());
            index.extend_from_slice(&(body.len() as u64).to_le_bytes());
            at += body.len() as u64;
        }
        out.put(&index);
        for (_, body) in &sections {
            out.put(body);
        }
        let bits: Vec<u32> = sections.iter().map(|(b, _)| *b).collect();
        let h = layout::file_header(attr_size, attrs_at, (data_at, data_size), &bits);
        if out.error.is_none() {
            if let Err(e) = out
                .w
                .flush()
                .and_then(|_| out.w.get_ref().write_all_at(&h, 0))
            {
                out.error = Some(e);
            }
        }
    }
    if out.error.is_none() {
        if let Err(e) = out.w.flush() {
            out.error = Some(e);
        }
    }
    written.bytes = out.pos;
    written.said = said;
    drop(out.w);
    written.error = match (out.error, sink) {
        (Some(e), _) => Some(e.to_string()),
        (None, Sink::File(o)) => o.commit().err().map(|e| e.to_string()),
        (None, Sink::Stdout) => None,
    };
    written
}

/// A LOST record for what the queue dropped since the last one (perf's readers then count
/// it as lost); the count said so far.
fn say_drops(out: &mut Out, queue: &RawQueue, plan: &Plan, said: u64) -> u64 {
    let dropped = queue.drops.records.load(Ordering::Relaxed);
    if dropped > said {
        let first = plan.attrs.first().map(Vec::as_slice).unwrap_or_default();
        let id = plan
            .ids
            .first()
            .and_then(|i| i.first())
            .copied()
            .unwrap_or(0);
        out.put(&layout::lost_record(
            layout::sample_type(first),
            layout::sample_id_all(first),
            id,
            dropped - said,
            crate::clock::clock_ns(plan.clockid),
        ));
    }
    dropped
}

/// The binaries whose build id the symbolizer read, as perf names them: user binaries by
/// path, the kernel as `[kernel.kallsyms]` (its id from `/sys/kernel/notes`).
fn hit_binaries(hits: &[Arc<Dso>]) -> Vec<HitBinary> {
    let mut out: Vec<HitBinary> = Vec::new();
    let mut kernel = false;
    for d in hits {
        match d.kind() {
            DsoKind::Kernel => kernel = true,
            _ if d.name().starts_with('/') => {
                if let Some(b) = d.build_id() {
                    out.push(HitBinary {
                        name: d.name().as_bytes().to_vec(),
                        build_id: *b,
                        kernel: false,
                    });
                }
            }
            _ => {}
        }
    }
    if kernel {
        if let Some(b) = kernel_build_id() {
            out.push(HitBinary {
                name: b"[kernel.kallsyms]".to_vec(),
                build_id: b,
                kernel: true,
            });
        }
    }
    out
}

/// The running kernel's `_text` and `_etext`. On x86_64, `_text` from the first lines of
/// `/proc/kallsyms` and the text's size from `/proc/iomem`: reading all of kallsyms (120 000
/// lines the kernel formats on each read) cost every `-o` run 0.04-0.09 s of CPU, and
/// `_etext` comes near its end. Else, or when either is hidden, all of kallsyms.
fn kernel_text() -> Option<(u64, u64)> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::io::BufRead;
        let size = std::fs::read_to_string("/proc/iomem")
            .ok()
            .and_then(|m| layout::iomem_kernel_code(&m));
        let text = std::fs::File::open("/proc/kallsyms").ok().and_then(|f| {
            let lines = std::io::BufReader::new(f).lines().take(4096);
            lines.map_while(Result::ok).find_map(|l| {
                let mut w = l.split_ascii_whitespace();
                match (w.next(), w.next(), w.next()) {
                    (Some(addr), Some(_), Some("_text")) => u64::from_str_radix(addr, 16).ok(),
                    _ => None,
                }
            })
        });
        if let (Some(size), Some(text)) = (size, text.filter(|&t| t != 0)) {
            return Some((text, text.checked_add(size)?));
        }
    }
    let k = std::fs::read_to_string("/proc/kallsyms").ok()?;
    layout::kallsyms_text(k.lines())
}

/// The running kernel's build id: the GNU build-id note of `/sys/kernel/notes`.
fn kernel_build_id() -> Option<crate::symbols::BuildId> {
    let b = std::fs::read("/sys/kernel/notes").ok()?;
    let u32_at = |at: usize| crate::record_file::header::u32_at(&b, at);
    let mut at = 0;
    while at + 12 <= b.len() {
        let (namesz, descsz, ty) = (
            u32_at(at)? as usize,
            u32_at(at + 4)? as usize,
            u32_at(at + 8)?,
        );
        let name_at = at + 12;
        let desc_at = name_at + namesz.div_ceil(4) * 4;
        if ty == 3 && b.get(name_at..name_at + namesz)? == b"GNU\0" {
            return crate::symbols::BuildId::new(b.get(desc_at..desc_at + descsz)?);
        }
        at = desc_at + descsz.div_ceil(4) * 4;
    }
    None
}

#[cfg(test)]
mod tests {
    /// The quick way to the kernel's text agrees with reading all of kallsyms (where both
    /// can be read: as root, on x86_64).
    #[test]
    fn the_kernel_text_from_iomem_is_kallsyms_text_to_etext() {
        let all = std::fs::read_to_string("/proc/kallsyms")
            .ok()
            .and_then(|k| super::layout::kallsyms_text(k.lines()));
        let quick = super::kernel_text();
        if let Some(all) = all {
            assert_eq!(quick, Some(all));
        } else {
            assert_eq!(quick, None);
        }
    }
}
