//! A recorded perf.data file, or perf's pipe format on stdin (`-i FILE`, `-i -`), as a source
//! beside the live rings: a thread reads the records in the file's order, decodes each with
//! perfwatch's own decoder ([`crate::perf::record`], keyed by the attribute its id names) and
//! hands the pipeline the same [`Batch`]es a live reader does, so ordering, the process model,
//! symbols, scripts and the line frontends work unchanged.
//!
//! Streamed: perf writes a FINISHED_ROUND record after each pass over its rings, and no
//! record of a later round is older than the round before the last; so each round goes out as
//! a batch whose `now` says how far the stream is complete, and the ordering stage releases it.
//! Nothing holds more than a bounded channel of batches and the ordering window, whatever the
//! file's size. Records perfwatch does not use are counted by type and said in the summary.

mod compressed;
pub mod format;
pub mod header;
pub mod side;
mod stream;

use std::collections::BTreeMap;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use crossbeam_channel::{Receiver, bounded};

use crate::event::{Batch, BufferPool, EventDesc};
use crate::stats::Stats;
use header::{Facts, FileAttr};

pub(crate) use stream::{DWARF, record_type_name};

/// Where the recording comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    File(PathBuf),
    /// perf's pipe format on stdin (`-i -`).
    Stdin,
}

impl Input {
    pub(crate) fn from_arg(arg: &Path) -> Input {
        if arg == Path::new("-") {
            Input::Stdin
        } else {
            Input::File(arg.to_path_buf())
        }
    }

    /// As the user gave it, escaped.
    pub fn display(&self) -> String {
        match self {
            Input::Stdin => "stdin".into(),
            Input::File(p) => crate::text::escape(p.as_os_str().as_encoded_bytes()),
        }
    }
}

/// What the recording says about itself and how perfwatch reads it.
#[derive(Clone, Debug)]
pub struct RecordingInfo {
    pub input: Input,
    pub facts: Facts,
    pub attrs: Vec<FileAttr>,
    /// The descriptors samples carry, by attribute.
    pub descs: Vec<&'static EventDesc>,
    /// The CPUs the recording was made on (the counters' rows).
    pub cpus: Vec<u32>,
    pub notes: Vec<String>,
}

impl RecordingInfo {
    /// The event names, in the file's order.
    pub(crate) fn event_names(&self) -> Vec<&str> {
        self.descs.iter().map(|d| d.name).collect()
    }

    /// One line saying what the recording is (escaped: every string comes from the file).
    pub fn describe(&self) -> String {
        format!("recording {}: {}", self.input.display(), self.about())
    }

    /// What the file says about itself: host, OS release, perf version, CPUs, events and
    /// perf's command line (escaped).
    pub fn about(&self) -> String {
        let f = &self.facts;
        let esc = |s: &Option<String>| crate::text::escape(s.as_deref().unwrap_or("?").as_bytes());
        let mut s = format!(
            "host {}, Linux {}, perf {}, {} CPUs, events {}",
            esc(&f.hostname),
            esc(&f.osrelease),
            esc(&f.version),
            f.nr_cpus.map_or("?".into(), |(avail, _)| avail.to_string()),
            crate::text::escape(self.event_names().join(",").as_bytes()),
        );
        if !f.cmdline.is_empty() {
            s += &format!(
                "; recorded with: {}",
                crate::text::escape(f.cmdline.join(" ").as_bytes())
            );
        }
        s
    }
}

/// Where `-o` beside `-i` puts the records the reader reads: each record (a compressed
/// one's records, not it; not the header records, which the copy writes from the
/// recording's attributes and features), then `finish` on the reading thread once the
/// reading ends: what to say of the copy, or why it failed.
pub trait RecordCopy: Send {
    fn record(&mut self, rec: &[u8]);
    fn finish(self: Box<Self>) -> Result<String, String>;
}

/// Makes the copy of a recording from what its header says (`-o` beside `-i`).
pub type MakeCopy<'a> = dyn Fn(&RecordingInfo) -> Result<Box<dyn RecordCopy>> + 'a;

/// What the reading thread found that the summary says.
#[derive(Debug, Default)]
pub(crate) struct ReadCounts {
    /// Records perfwatch does not use, by record type.
    pub unused: Mutex<BTreeMap<u32, u64>>,
    /// Samples of an event whose sample layout perfwatch does not decode, by event name.
    pub undecoded: Mutex<BTreeMap<String, u64>>,
    /// Why reading stopped before the end (a truncated or inconsistent file).
    pub failure: OnceLock<String>,
    /// `-o` beside `-i`: a copy is being made.
    pub copying: bool,
    /// `-o` beside `-i`: what the copy says, or why it failed.
    pub copied: OnceLock<Result<String, String>>,
    /// `--call-graph dwarf` recordings: the pipeline's unwind step counts here.
    pub unwound: Arc<Mutex<crate::unwind::Stats>>,
}

impl ReadCounts {
    /// The summary's lines about the recording.
    pub fn summary(&self) -> Vec<String> {
        let mut out = Vec::new();
        let unused = self.unused.lock().map(|m| m.clone()).unwrap_or_default();
        if !unused.is_empty() {
            let total: u64 = unused.values().sum();
            let list: Vec<String> = unused
                .iter()
                .map(|(t, n)| format!("{n} {}", record_type_name(*t)))
                .collect();
            out.push(format!(
                "  not used: {total} records of the recording perfwatch does not show ({})",
                list.join(", ")
            ));
        }
        let undecoded = self.undecoded.lock().map(|m| m.clone()).unwrap_or_default();
        for (name, n) in undecoded {
            out.push(format!(
                "  not decoded: {n} samples of '{}' (their sample layout has fields perfwatch does not read, such as PERF_SAMPLE_READ)",
                crate::text::escape(name.as_bytes())
            ));
        }
        if let Ok(u) = self.unwound.lock()
            && u.chains() > 0
        {
            out.push(u.summary_line());
        }
        match self.copied.get() {
            Some(Ok(said)) => out.push(format!("perfwatch: {said}")),
            Some(Err(why)) => out.push(format!("perfwatch: error: {why}")),
            None => {}
        }
        out
    }
}

/// A recording being read: the batches, the counters, and the reading thread.
pub(crate) struct Recording {
    pub rx: Receiver<Batch>,
    pub pool: BufferPool,
    pub stats: Arc<Stats>,
    pub counts: Arc<ReadCounts>,
    pub info: RecordingInfo,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    pub started: std::time::Instant,
}

/// Perfwatch was asked to stop before the recording's header came.
#[derive(Debug, thiserror::Error)]
#[error("stopped before the recording's header came")]
pub(crate) struct Cancelled;

/// perf's pipe format on stdin: its 16-byte header, then the header records up to the first
/// record of the kernel's.
fn pipe_stream(
    common_fields: bool,
    counts: Arc<ReadCounts>,
    stop: Arc<AtomicBool>,
) -> Result<stream::Stream> {
    pipe_stream_from(
        Box::new(BufReader::with_capacity(1 << 16, StdinUntilStop { stop })),
        common_fields,
        counts,
    )
}

/// perf's pipe format from `r` (stdin's reader for `-i -`; any bytes for the fuzz target).
fn pipe_stream_from(
    mut r: Box<dyn Read + Send>,
    common_fields: bool,
    counts: Arc<ReadCounts>,
) -> Result<stream::Stream> {
    let mut h = [0u8; 16];
    r.read_exact(&mut h)
        .context("it ended before perf's pipe header")?;
    let magic: [u8; 8] = h[..8].try_into().unwrap_or_default();
    header::check_magic(&magic)?;
    if header::u64_at(&h, 8) != Some(header::PIPE_HEADER_SIZE) {
        anyhow::bail!(
            "it is not in perf's pipe format (perf record -o -); give a perf.data file as -i FILE"
        );
    }
    let mut s = stream::Stream::new(
        r,
        header::FileHeader::default(),
        true,
        common_fields,
        counts,
    );
    s.read_header_records()?;
    Ok(s)
}

/// A perf.data file (`-i FILE`) of `len` bytes: its header, then a stream over its data
/// section.
fn file_stream<F: Read + Seek + Send + 'static>(
    mut f: F,
    len: u64,
    common_fields: bool,
    counts: Arc<ReadCounts>,
) -> Result<stream::Stream> {
    let h = header::read_file_header(&mut f, len)?;
    f.seek(SeekFrom::Start(h.data.offset))?;
    let r = BufReader::with_capacity(1 << 20, f).take(h.data.size);
    Ok(stream::Stream::new(
        Box::new(r),
        h,
        false,
        common_fields,
        counts,
    ))
}

/// The fuzz target's way in (through the `testkit` feature): `bytes` as a perf.data file
/// (`-i FILE`) or as perf's pipe format (`-i -`), read as [`Recording::open`] reads them, on
/// the calling thread; the batches it sent, or why it refused the bytes.
#[cfg(any(test, feature = "testkit"))]
pub(crate) fn read_bytes(
    bytes: &[u8],
    pipe: bool,
    common_fields: bool,
) -> Result<(RecordingInfo, Vec<Batch>, Arc<ReadCounts>)> {
    let counts = Arc::new(ReadCounts::default());
    let data = std::io::Cursor::new(bytes.to_vec());
    let (mut s, input) = if pipe {
        (
            pipe_stream_from(Box::new(data), common_fields, counts.clone())?,
            Input::Stdin,
        )
    } else {
        (
            file_stream(data, bytes.len() as u64, common_fields, counts.clone())?,
            Input::File(PathBuf::from("fuzz.data")),
        )
    };
    let info = s.info(input);
    let stats = Stats::new(&info.cpus);
    let (tx, rx) = crossbeam_channel::unbounded();
    s.run(&tx, &BufferPool::new(4), &stats, &AtomicBool::new(false));
    drop(tx);
    Ok((info, rx.iter().collect(), counts))
}

/// Stdin, read in waits of at most [`STOP_POLL`], so that a stop is seen while perf (or
/// whatever writes the pipe) writes nothing: reading then ends with an error the stream
/// takes as the end.
struct StdinUntilStop {
    stop: Arc<AtomicBool>,
}

const STOP_POLL: i32 = 100;

impl Read for StdinUntilStop {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Err(std::io::Error::other("perfwatch is stopping"));
            }
            let mut p = libc::pollfd {
                fd: libc::STDIN_FILENO,
                events: libc::POLLIN,
                revents: 0,
            };
            let r = crate::sys::poll(std::slice::from_mut(&mut p), STOP_POLL);
            if r < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if r == 0 {
                continue;
            }
            let n = crate::sys::read(std::os::fd::AsFd::as_fd(&std::io::stdin()), buf);
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            return Ok(n as usize);
        }
    }
}

/// Batches the channel holds: the file is read at most this far ahead of the pipeline.
const CHANNEL_BATCHES: usize = 16;

impl Recording {
    /// Open the recording, read its header, and start reading its records.
    /// `cancel` is asked while perf's pipe header is awaited (a writer that has not written
    /// yet must not keep a Ctrl-C from stopping perfwatch): true gives up with
    /// [`Cancelled`].
    pub fn open(input: Input, common_fields: bool, cancel: &dyn Fn() -> bool) -> Result<Recording> {
        Recording::open_copying(input, common_fields, cancel, None)
    }

    /// [`Recording::open`], with each record also handed to the copy `copy` makes of the
    /// recording's header (`-o` beside `-i`).
    pub fn open_copying(
        input: Input,
        common_fields: bool,
        cancel: &dyn Fn() -> bool,
        copy: Option<&MakeCopy<'_>>,
    ) -> Result<Recording> {
        let counts = Arc::new(ReadCounts {
            copying: copy.is_some(),
            ..ReadCounts::default()
        });
        let stop = Arc::new(AtomicBool::new(false));
        let mut s = match &input {
            Input::File(path) => {
                let shown = crate::text::escape(path.as_os_str().as_encoded_bytes());
                let f = std::fs::File::open(path)
                    .with_context(|| format!("cannot open the recording '{shown}'"))?;
                let len = f.metadata()?.len();
                file_stream(f, len, common_fields, counts.clone())
                    .with_context(|| format!("cannot read the recording '{shown}'"))?
            }
            Input::Stdin => {
                // Read on a thread of its own: this one keeps looking at `cancel`.
                let (tx, rx) = bounded(1);
                let (c, st) = (counts.clone(), stop.clone());
                std::thread::Builder::new()
                    .name("perfwatch-pipe-header".into())
                    .spawn(move || {
                        let _ = tx.send(pipe_stream(common_fields, c, st));
                    })
                    .context("cannot start the recording's reader thread")?;
                loop {
                    match rx.recv_timeout(std::time::Duration::from_millis(50)) {
                        Ok(r) => break r.context("cannot read the recording on stdin")?,
                        Err(crossbeam_channel::RecvTimeoutError::Timeout) if cancel() => {
                            stop.store(true, Ordering::Relaxed);
                            return Err(Cancelled.into());
                        }
                        Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                        Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                            anyhow::bail!("cannot read the recording on stdin: its reader failed")
                        }
                    }
                }
            }
        };
        let info = s.info(input);
        if let Some(copy) = copy {
            s.copy_to(copy(&info)?);
        }
        let stats = Arc::new(Stats::new(&info.cpus));
        let (tx, rx) = bounded(CHANNEL_BATCHES);
        let pool = BufferPool::new(CHANNEL_BATCHES);
        let thread = {
            let (stats, stop, pool, counts) =
                (stats.clone(), stop.clone(), pool.clone(), counts.clone());
            std::thread::Builder::new()
                .name("perfwatch-recording".into())
                .spawn(move || {
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        s.run(&tx, &pool, &stats, &stop)
                    }));
                    if let Err(p) = r {
                        let _ = counts.failure.set(format!(
                            "internal error reading the recording: {}",
                            crate::panic_message(p.as_ref())
                        ));
                    }
                })
                .context("cannot start the recording's reader thread")?
        };
        Ok(Recording {
            rx,
            pool,
            stats,
            counts,
            info,
            stop,
            thread: Some(thread),
            started: std::time::Instant::now(),
        })
    }

    /// Stop reading and wait for the thread, for at most `wait` (a pipe's writer may never
    /// write again: its read is then left behind, the process exits anyway).
    pub fn join(&mut self, wait: std::time::Duration) {
        self.stop.store(true, Ordering::Relaxed);
        let deadline = std::time::Instant::now() + wait;
        while self.thread.as_ref().is_some_and(|t| !t.is_finished()) {
            // Keep the channel moving so that a send does not hold the thread.
            while self.rx.try_recv().is_ok() {}
            if std::time::Instant::now() >= deadline {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl crate::stop::Watched for Recording {
    fn reader_failed(&self) -> bool {
        false
    }

    fn command_exit(&mut self) -> Option<i32> {
        None
    }

    fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests;
