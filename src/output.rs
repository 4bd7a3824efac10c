//! `--plain`/`--json` output that never blocks the loop.
//!
//! When the reader of perfwatch's stdout stops reading (`perfwatch --plain | less`, a stalled
//! consumer), a `write(2)` on stdout blocks. Done on the loop's thread, that made perfwatch
//! deaf: no signal, `--duration` or command exit was seen until the reader moved. So the loop
//! only formats lines into a buffer and hands the buffer to a writer thread through a small
//! queue ([`StdoutQueue`]). While the queue holds [`QUEUE_BYTES`] or more, the loop stops
//! taking batches ([`StdoutQueue::has_room`]): the channel fills, the readers wait, and the
//! kernel rings take the strain and count what they cannot hold as lost, as the design wants
//! for any slow consumer. Signals, `--duration` and the command's exit are still seen on every
//! tick. At the end, [`StdoutQueue::finish`] waits a bounded time for the writer, and says
//! how much could not be written.
//!
//! stdout stays blocking: it may be shared with other processes (the shell, the `-- COMMAND`),
//! and setting `O_NONBLOCK` on it would change their writes too.
//!
//! Handing a buffer to another thread costs two wake-ups (about 17 µs here), so when the
//! writer is idle and the write cannot block, the loop writes itself: to `/dev/null`, and to
//! a pipe through a descriptor of its own opened with `O_NONBLOCK` (`/proc/self/fd/1` opens a
//! new file description of the same pipe, so the flag touches nobody else's writes): what the
//! pipe does not take at once (`EAGAIN`, or a short write) goes to the writer. The pipe's free
//! bytes cannot tell this: a pipe is a ring of pages, and one byte left unread in each page
//! blocks a writer as surely as a full pipe. Everything else (a terminal, a socket, a file)
//! goes through the writer.

use crate::sys;

use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};

/// Bytes handed to the writer and not yet written, past which the loop takes no more
/// batches.
pub(crate) const QUEUE_BYTES: usize = 256 * 1024;

/// How long [`StdoutQueue::finish`] waits for the writer at the end of a run a signal
/// stopped: the user asked to stop, and gets the summary within a second or so.
pub(crate) const FINISH_WAIT: Duration = Duration::from_secs(1);

/// At the natural end of a run (`--duration`, the command's exit, the targets gone), how
/// long the writer may go without writing anything before the rest is given up. A slow
/// reader (`| (sleep 1; jq ...)`) still gets everything; a reader that never reads again
/// costs this long, or less if a signal comes.
pub(crate) const FINISH_IDLE: Duration = Duration::from_secs(2);

/// How long [`StdoutQueue::finish`] waits for the writer.
pub enum FinishWait<'a> {
    /// At most this long in all.
    AtMost(Duration),
    /// As long as the writer writes something at least every `idle`, until `cut` says to
    /// stop waiting (a signal came); from then on, [`FINISH_WAIT`] more at most, as after
    /// any signal.
    WhileWriting {
        idle: Duration,
        cut: &'a dyn Fn() -> bool,
    },
}

/// What the writer thread knows.
#[derive(Default)]
struct WriterState {
    queued: AtomicUsize,
    written: AtomicU64,
    /// The first write error, once (its kind and text).
    error: std::sync::OnceLock<(io::ErrorKind, String)>,
}

/// What stdout is, for writing without the writer thread when that cannot block.
#[derive(Debug)]
enum Target {
    /// /dev/null: never blocks.
    Null,
    /// A pipe, and a non-blocking descriptor of our own for it.
    Pipe(std::os::fd::OwnedFd),
    /// Anything else, or not stdout: always through the writer.
    Other,
}

impl Target {
    fn of(fd: BorrowedFd<'_>) -> Target {
        let Ok(st) = sys::fs::fstat(fd) else {
            return Target::Other;
        };
        match st.st_mode & libc::S_IFMT {
            libc::S_IFCHR if st.st_rdev == libc::makedev(1, 3) => Target::Null,
            libc::S_IFIFO => Self::own_nonblocking(fd, &st).map_or(Target::Other, Target::Pipe),
            _ => Target::Other,
        }
    }

    /// A new open file description of the pipe behind `fd`, with `O_NONBLOCK`: only if it is
    /// the same pipe (device and inode), else None.
    fn own_nonblocking(fd: BorrowedFd<'_>, st: &libc::stat) -> Option<OwnedFd> {
        let path = std::ffi::CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
        let own = sys::fs::open(&path, libc::O_WRONLY | libc::O_NONBLOCK | libc::O_CLOEXEC).ok()?;
        let st2 = sys::fs::fstat(own.as_fd()).ok()?;
        (st2.st_dev == st.st_dev && st2.st_ino == st.st_ino).then_some(own)
    }

    /// Write as much of `data` as the target takes without blocking. Err on a real error.
    fn write_nonblocking(&self, data: &[u8]) -> io::Result<usize> {
        let fd = match self {
            Target::Null => sys::stdout_fd(),
            Target::Pipe(own) => own.as_fd(),
            Target::Other => return Ok(0),
        };
        let mut done = 0;
        while done < data.len() {
            let n = sys::write(fd, &data[done..]);
            if n > 0 {
                done += n as usize;
                continue;
            }
            if n == 0 {
                break;
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => {}
                io::ErrorKind::WouldBlock => break,
                _ => return Err(e),
            }
        }
        Ok(done)
    }
}

/// Lines on their way to stdout (or any writer), written by a thread of their own.
pub struct StdoutQueue {
    buf: Vec<u8>,
    tx: Option<Sender<Vec<u8>>>,
    spare: Receiver<Vec<u8>>,
    room: Receiver<()>,
    state: Arc<WriterState>,
    thread: Option<JoinHandle<()>>,
    limit: usize,
    target: Target,
}

/// How the end went.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Flushed {
    /// Bytes that were not written (the reader did not take them in time, or an error).
    pub unwritten: u64,
    /// The write error, if one ended the output (a closed pipe included).
    pub error: Option<(io::ErrorKind, String)>,
}

/// stdout, written with write(2) directly: no lock or buffer shared with `io::stdout()`, so
/// that a writer left blocked at exit holds nothing the rest of the process needs.
struct RawStdout;

impl Write for RawStdout {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        loop {
            let n = sys::write(sys::stdout_fd(), data);
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl StdoutQueue {
    /// The queue in front of this process's stdout.
    pub fn stdout() -> io::Result<StdoutQueue> {
        let mut q = StdoutQueue::new(RawStdout, QUEUE_BYTES)?;
        q.target = Target::of(sys::stdout_fd());
        Ok(q)
    }

    /// The queue in front of any writer (tests use a pipe), holding up to `limit` bytes.
    pub fn new(mut out: impl Write + Send + 'static, limit: usize) -> io::Result<StdoutQueue> {
        let (tx, rx) = unbounded::<Vec<u8>>();
        let (spare_tx, spare) = bounded::<Vec<u8>>(8);
        let (room_tx, room) = bounded::<()>(1);
        let state = Arc::new(WriterState::default());
        let st = state.clone();
        let thread = std::thread::Builder::new()
            .name("perfwatch-stdout".into())
            .spawn(move || {
                for mut chunk in rx {
                    let len = chunk.len();
                    if st.error.get().is_none() {
                        match out.write_all(&chunk).and_then(|()| out.flush()) {
                            Ok(()) => {
                                st.written.fetch_add(len as u64, Ordering::Relaxed);
                            }
                            Err(e) => {
                                let _ = st.error.set((e.kind(), e.to_string()));
                                // What is queued after an error is not written either: keep
                                // counting it as queued.
                                continue;
                            }
                        }
                    } else {
                        continue;
                    }
                    st.queued.fetch_sub(len, Ordering::AcqRel);
                    chunk.clear();
                    let _ = spare_tx.try_send(chunk);
                    let _ = room_tx.try_send(());
                }
            })?;
        Ok(StdoutQueue {
            buf: Vec::with_capacity(64 * 1024),
            tx: Some(tx),
            spare,
            room,
            state,
            thread: Some(thread),
            limit,
            target: Target::Other,
        })
    }

    /// May the loop take more batches? False while the writer is behind by the limit or
    /// more: the loop then waits on [`StdoutQueue::room`] and its tick, not on stdout.
    pub(crate) fn has_room(&self) -> bool {
        self.state.queued.load(Ordering::Acquire) < self.limit
    }

    /// Ready whenever the writer has written something (to select on while full).
    pub fn room(&self) -> &Receiver<()> {
        &self.room
    }

    /// The write error that ended the output, if any.
    pub fn error(&self) -> Option<io::Error> {
        self.state
            .error
            .get()
            .map(|(k, t)| io::Error::new(*k, t.clone()))
    }

    /// Bytes the writer has written.
    pub fn written(&self) -> u64 {
        self.state.written.load(Ordering::Relaxed)
    }

    /// Hand what was formatted since the last call to the writer. Never blocks.
    fn hand_over(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        self.write_directly();
        if self.buf.is_empty() {
            return;
        }
        let next = self
            .spare
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(64 * 1024));
        let chunk = std::mem::replace(&mut self.buf, next);
        let Some(tx) = &self.tx else { return };
        self.state.queued.fetch_add(chunk.len(), Ordering::AcqRel);
        if tx.send(chunk).is_err() {
            // The writer is gone (it cannot be, while tx lives); nothing to do.
        }
    }

    /// With the writer idle (nothing in flight, so the order holds), write what stdout can
    /// take without blocking on this thread.
    fn write_directly(&mut self) {
        if matches!(self.target, Target::Other)
            || self.state.queued.load(Ordering::Acquire) != 0
            || self.state.error.get().is_some()
        {
            return;
        }
        let done = match self.target.write_nonblocking(&self.buf) {
            Ok(n) => n,
            Err(e) => {
                let _ = self.state.error.set((e.kind(), e.to_string()));
                // Counted as not written, as the writer counts it.
                self.state
                    .queued
                    .fetch_add(self.buf.len(), Ordering::AcqRel);
                self.buf.clear();
                return;
            }
        };
        self.state.written.fetch_add(done as u64, Ordering::Relaxed);
        self.buf.drain(..done);
    }

    /// Let the writer finish what it has, for as long as `wait` allows; returns what could not
    /// be written. A writer still blocked after that is left behind (the process is ending).
    pub fn finish(mut self, wait: FinishWait<'_>) -> Flushed {
        self.hand_over();
        drop(self.tx.take());
        let started = Instant::now();
        let mut last_written = self.written();
        let mut last_progress = started;
        let mut cut_at: Option<Instant> = None;
        if let Some(t) = self.thread.take() {
            while !t.is_finished() {
                let now = Instant::now();
                let written = self.written();
                if written != last_written {
                    last_written = written;
                    last_progress = now;
                }
                let give_up = match &wait {
                    FinishWait::AtMost(limit) => now >= started + *limit,
                    FinishWait::WhileWriting { idle, cut } => {
                        if cut_at.is_none() && cut() {
                            cut_at = Some(now);
                        }
                        cut_at.is_some_and(|c| now >= c + FINISH_WAIT)
                            || now >= last_progress + *idle
                    }
                };
                if give_up {
                    break;
                }
                let _ = self.room.recv_timeout(Duration::from_millis(10));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
        Flushed {
            unwritten: self.state.queued.load(Ordering::Acquire) as u64,
            error: self.state.error.get().cloned(),
        }
    }
}

impl StdoutQueue {
    /// Queue `lines` (formatted by the caller) without copying them when nothing else is
    /// pending: the buffers are swapped, and `lines` comes back empty with the capacity of
    /// the one it was swapped for. (Copying each 64 KiB of lines once more was 8% of
    /// `--plain`'s instructions on the fork storm.)
    pub fn append(&mut self, lines: &mut Vec<u8>) {
        if !self.buf.is_empty() {
            // What was appended before goes on first (written, or queued for the writer).
            self.hand_over();
        }
        if self.buf.is_empty() {
            std::mem::swap(&mut self.buf, lines);
            // The caller fills `lines` up to the capacity it had: give it as much (a new
            // buffer rather than a realloc, which would copy the dead bytes). Once the queue's
            // spare buffers are all this size, nothing is allocated.
            let want = self.buf.capacity();
            if lines.capacity() < want {
                *lines = Vec::with_capacity(want);
            }
        } else {
            self.buf.extend_from_slice(lines);
        }
        lines.clear();
    }
}

impl Write for StdoutQueue {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        self.buf.extend_from_slice(data);
        Ok(())
    }

    /// Hands the lines to the writer; a write error comes back from [`StdoutQueue::error`].
    fn flush(&mut self) -> io::Result<()> {
        self.hand_over();
        Ok(())
    }
}

/// How long [`stderr_bounded`] waits for a stderr that does not take its text.
pub(crate) const STDERR_WAIT: Duration = Duration::from_millis(500);

/// Write `text` to stderr without ever waiting more than [`STDERR_WAIT`] in all for a
/// stderr nobody reads (`perfwatch --plain 2>&1 | stalled`, a terminal stopped with Ctrl-S):
/// what perfwatch says at the end (notes, the summary) must not keep it from exiting. Once a
/// write has timed out, later ones are dropped at once.
pub(crate) fn stderr_bounded(text: &[u8]) {
    static STUCK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if text.is_empty() || STUCK.load(Ordering::Acquire) {
        return;
    }
    let data = text.to_vec();
    let (done_tx, done) = bounded::<()>(1);
    let spawned = std::thread::Builder::new()
        .name("perfwatch-stderr".into())
        .spawn(move || {
            let mut off = 0;
            while off < data.len() {
                let n = sys::write(sys::stderr_fd(), &data[off..]);
                if n > 0 {
                    off += n as usize;
                } else if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                } else {
                    break;
                }
            }
            let _ = done_tx.send(());
        });
    if spawned.is_err() {
        let _ = io::stderr().write_all(text);
        return;
    }
    if done.recv_timeout(STDERR_WAIT).is_err() {
        STUCK.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn pipe() -> (std::fs::File, std::fs::File) {
        let (r, w) = sys::pipe().unwrap();
        (std::fs::File::from(r), std::fs::File::from(w))
    }

    /// A reader that never reads: the queue fills, says so, and never blocks the caller;
    /// finish() returns within its bound and counts what was not written.
    #[test]
    fn a_stalled_reader_never_blocks_the_loop() {
        let (_r, w) = pipe();
        let mut q = StdoutQueue::new(w, 64 * 1024).unwrap();
        let line = [b'x'; 1023];
        let t0 = Instant::now();
        let mut handed = 0u64;
        while q.has_room() {
            for _ in 0..64 {
                q.write_all(&line).unwrap();
                q.write_all(b"\n").unwrap();
                handed += 1024;
            }
            q.flush().unwrap();
            assert!(t0.elapsed() < Duration::from_secs(5), "never filled");
        }
        // The pipe (64 KiB) and the queue's limit are full; more writes still return at once.
        for _ in 0..10 {
            q.write_all(&line).unwrap();
            q.flush().unwrap();
            handed += 1023;
        }
        let t1 = Instant::now();
        let f = q.finish(FinishWait::AtMost(Duration::from_millis(300)));
        assert!(t1.elapsed() < Duration::from_secs(2));
        assert!(f.unwritten > 0 && f.unwritten <= handed, "{f:?}");
        assert!(f.error.is_none());
    }

    #[test]
    fn appended_buffers_keep_their_order_and_come_back_empty() {
        let (mut r, w) = pipe();
        let mut q = StdoutQueue::new(w, 1 << 20).unwrap();
        let reader = std::thread::spawn(move || {
            let mut v = Vec::new();
            r.read_to_end(&mut v).unwrap();
            v
        });
        let mut want = Vec::new();
        let mut lines = Vec::with_capacity(1 << 16);
        for i in 0..5_000 {
            let l = format!("line {i}\n");
            want.extend_from_slice(l.as_bytes());
            // Mixed: appended buffers (several between flushes), plain writes, flushes.
            if i % 3 == 0 {
                q.append(&mut lines);
                q.write_all(l.as_bytes()).unwrap();
            } else {
                lines.extend_from_slice(l.as_bytes());
                if i % 7 == 0 {
                    q.append(&mut lines);
                    assert!(lines.is_empty());
                    assert!(lines.capacity() >= 1 << 16);
                }
            }
            if i % 500 == 0 {
                q.append(&mut lines);
                q.flush().unwrap();
            }
        }
        q.append(&mut lines);
        let f = q.finish(FinishWait::AtMost(Duration::from_secs(5)));
        assert_eq!(f, Flushed::default());
        assert_eq!(reader.join().unwrap(), want);
    }

    #[test]
    fn everything_is_written_in_order_when_the_reader_reads() {
        let (mut r, w) = pipe();
        let mut q = StdoutQueue::new(w, 4096).unwrap();
        let reader = std::thread::spawn(move || {
            let mut v = Vec::new();
            r.read_to_end(&mut v).unwrap();
            v
        });
        let mut want = Vec::new();
        for i in 0..20_000 {
            let l = format!("line {i}\n");
            want.extend_from_slice(l.as_bytes());
            q.write_all(l.as_bytes()).unwrap();
            if i % 100 == 0 {
                q.flush().unwrap();
                while !q.has_room() {
                    let _ = q.room().recv_timeout(Duration::from_millis(10));
                }
            }
        }
        let f = q.finish(FinishWait::AtMost(Duration::from_secs(5)));
        assert_eq!(f, Flushed::default());
        assert_eq!(reader.join().unwrap(), want);
    }

    /// Fill a pipe nobody reads yet, through a queue over it.
    fn stalled_queue() -> (std::fs::File, StdoutQueue, Vec<u8>) {
        let (r, w) = pipe();
        let mut q = StdoutQueue::new(w, 64 * 1024).unwrap();
        let mut want = Vec::new();
        let mut i = 0;
        while q.has_room() {
            let l = format!("line {i:>1000}\n");
            i += 1;
            want.extend_from_slice(l.as_bytes());
            q.write_all(l.as_bytes()).unwrap();
            q.flush().unwrap();
        }
        (r, q, want)
    }

    /// At a natural end, a reader that starts reading late (`| (sleep 1; cat)`) still gets
    /// every byte: the wait runs while the writer makes progress, not for a fixed time.
    #[test]
    fn a_late_reader_gets_everything_at_a_natural_end() {
        let (mut r, q, want) = stalled_queue();
        let reader = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1200));
            let mut v = Vec::new();
            // Slowly: many small reads, each a little apart.
            let mut buf = [0u8; 4096];
            loop {
                match r.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => v.extend_from_slice(&buf[..n]),
                    Err(e) => panic!("{e}"),
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            v
        });
        let f = q.finish(FinishWait::WhileWriting {
            idle: Duration::from_secs(2),
            cut: &|| false,
        });
        assert_eq!(f, Flushed::default());
        assert_eq!(reader.join().unwrap(), want);
    }

    /// A reader that never reads costs the idle time; a signal (`cut`) ends the wait at once.
    #[test]
    fn a_never_reading_reader_costs_the_idle_time_or_a_signal() {
        let (_r, q, want) = stalled_queue();
        let t0 = Instant::now();
        let f = q.finish(FinishWait::WhileWriting {
            idle: Duration::from_millis(400),
            cut: &|| false,
        });
        let took = t0.elapsed();
        assert!(
            took >= Duration::from_millis(350) && took < Duration::from_secs(3),
            "{took:?}"
        );
        assert!(f.unwritten > 0 && f.unwritten <= want.len() as u64, "{f:?}");

        let (_r, q, _) = stalled_queue();
        let t0 = Instant::now();
        let asked = Instant::now() + Duration::from_millis(100);
        let f = q.finish(FinishWait::WhileWriting {
            idle: Duration::from_secs(30),
            cut: &|| Instant::now() >= asked,
        });
        assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
        assert!(f.unwritten > 0);
    }

    /// A pipe with free bytes but no free page blocks a writer: the loop's own writes must
    /// not, whatever the free byte count says. (Fill the pipe, read all but one byte of its
    /// first page: 4095 bytes are free, yet a write of them would wait for the reader.)
    #[test]
    fn a_pipe_with_free_bytes_but_no_free_page_never_blocks_the_loop() {
        let (mut r, w) = pipe();
        let target = Target::of(w.as_fd());
        assert!(matches!(target, Target::Pipe(_)), "{target:?}");
        let size = sys::pipe_size(w.as_fd()).unwrap();
        let mut w2 = w.try_clone().unwrap();
        let mut q = StdoutQueue::new(w, 1 << 20).unwrap();
        q.target = target;
        w2.write_all(&vec![b'x'; size]).unwrap();
        let mut page = vec![0; 4095];
        r.read_exact(&mut page).unwrap();
        let t0 = Instant::now();
        q.write_all(&[b'y'; 4000]).unwrap();
        q.flush().unwrap();
        assert!(t0.elapsed() < Duration::from_secs(1), "the loop blocked");
        // The reader drains: everything arrives, in order.
        drop(w2);
        let reader = std::thread::spawn(move || {
            let mut v = Vec::new();
            r.read_to_end(&mut v).unwrap();
            v
        });
        let f = q.finish(FinishWait::AtMost(Duration::from_secs(5)));
        assert_eq!(f, Flushed::default());
        let got = reader.join().unwrap();
        assert_eq!(got.len(), size - 4095 + 4000);
        assert!(got[size - 4095..].iter().all(|&b| b == b'y'));
        let null = std::fs::File::options()
            .write(true)
            .open("/dev/null")
            .unwrap();
        assert!(matches!(Target::of(null.as_fd()), Target::Null));
        let file = tempfile::tempfile().unwrap();
        assert!(matches!(Target::of(file.as_fd()), Target::Other));
    }

    #[test]
    fn a_closed_pipe_is_an_error_the_loop_sees() {
        let (r, w) = pipe();
        drop(r);
        let mut q = StdoutQueue::new(w, 4096).unwrap();
        q.write_all(b"x\n").unwrap();
        q.flush().unwrap();
        let t0 = Instant::now();
        while q.error().is_none() && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(q.error().unwrap().kind(), io::ErrorKind::BrokenPipe);
        let f = q.finish(FinishWait::AtMost(Duration::from_secs(1)));
        assert_eq!(f.error.unwrap().0, io::ErrorKind::BrokenPipe);
    }
}
