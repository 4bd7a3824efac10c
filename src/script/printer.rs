//! Where the scripts' pane messages go besides (or instead of) a pane.
//!
//! `on_tick()` lines and `print()` output are written as `[script.py] line` to stderr, or to
//! `--script-output FILE`, by a thread of their own ([`PaneRouter`]), so that neither a slow
//! terminal nor a chatty script holds up the event stream. In the TUI the same thread passes
//! every message on to the panes, writes it to `--script-output` when there is one, and keeps
//! each script's last `on_tick()` lines: after the TUI has given the terminal back, what the
//! panes no longer show (the last lines, and what `trace_end()` printed) reaches stderr.
//!
//! Nothing is lost silently: a write error on `--script-output` is said once, naming the file
//! and the error, the messages that could not be written are counted, and the exit status
//! says so (see `run.rs`).

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};

use super::output_file::OutputFile;
use crate::pane::PaneMsg;
use crate::text::escape;

/// Write one pane message as lines, each prefixed with the script's name. Script output is
/// escaped like everything else that reaches a terminal: it may repeat untrusted comm names.
pub fn write_msg(out: &mut impl Write, msg: &PaneMsg) -> io::Result<()> {
    let (script, lines): (&str, Vec<&str>) = match msg {
        PaneMsg::Lines { script, lines } => (script, lines.iter().map(String::as_str).collect()),
        PaneMsg::Text { script, text, .. } => (script, text.lines().collect()),
    };
    let mut buf = Vec::new();
    for l in lines {
        let _ = writeln!(
            buf,
            "[{}] {}",
            escape(script.as_bytes()),
            escape(l.as_bytes())
        );
    }
    out.write_all(&buf)
}

/// Write one pane message as bare lines, as a perf script's prints reach stdout under
/// `perf script -s` (escaped all the same).
pub fn write_bare(out: &mut impl Write, msg: &PaneMsg) -> io::Result<()> {
    let lines: Vec<&str> = match msg {
        PaneMsg::Lines { lines, .. } => lines.iter().map(String::as_str).collect(),
        PaneMsg::Text { text, .. } => text.split('\n').collect(),
    };
    let mut buf = Vec::new();
    for l in lines {
        buf.extend_from_slice(escape(l.as_bytes()).as_bytes());
        buf.push(b'\n');
    }
    out.write_all(&buf)
}

/// Where the router writes.
pub enum Sink {
    /// Nowhere: the TUI without `--script-output` (the panes show it; what they cannot show
    /// at the end is returned by [`PaneRouter::finish`]).
    None,
    Stderr,
    /// A perf script with `--plain`/`--json`: its output on stdout, bare (as `perf script
    /// -s` prints it), its errors on stderr.
    Stdout,
    /// `--script-output FILE`: written to a temporary file beside it (`output`), renamed over
    /// it when the run ends without a write error ([`OutputFile`]). `bare`: lines without
    /// the script's name (a perf script's prints).
    File {
        path: PathBuf,
        file: io::LineWriter<File>,
        output: Option<OutputFile>,
        bare: bool,
    },
}

impl Sink {
    /// `--script-output FILE` (created safely), else `fallback`.
    pub fn open(output: Option<&Path>, fallback: Sink) -> Result<Sink> {
        Ok(match output {
            Some(p) => {
                let mut output = OutputFile::create("--script-output", p).with_context(|| {
                    format!(
                        "cannot create --script-output file '{}'",
                        escape(p.as_os_str().as_encoded_bytes())
                    )
                })?;
                Sink::File {
                    path: p.to_path_buf(),
                    file: io::LineWriter::new(output.file().try_clone()?),
                    output: Some(output),
                    bare: false,
                }
            }
            None => fallback,
        })
    }

    fn write(&mut self, m: &PaneMsg) -> io::Result<()> {
        match self {
            Sink::None => Ok(()),
            // Nothing to do about a broken stderr: there is nowhere left to say it.
            Sink::Stderr => {
                let _ = write_msg(&mut io::stderr().lock(), m);
                Ok(())
            }
            Sink::Stdout => {
                if matches!(m, PaneMsg::Text { is_error: true, .. }) {
                    let _ = write_msg(&mut io::stderr().lock(), m);
                    return Ok(());
                }
                // A closed stdout ends the run through the records' own writer; nothing
                // more to say here.
                let mut out = io::stdout().lock();
                let _ = write_bare(&mut out, m).and_then(|()| out.flush());
                Ok(())
            }
            Sink::File { file, bare, .. } => match bare {
                true if !matches!(m, PaneMsg::Text { is_error: true, .. }) => write_bare(file, m),
                _ => write_msg(file, m),
            },
        }
    }

    /// A perf script's output: a file gets its prints bare (as `perf script -s > FILE`
    /// would), its errors still named.
    pub fn for_perf_script(self) -> Sink {
        match self {
            Sink::File {
                path, file, output, ..
            } => Sink::File {
                path,
                file,
                output,
                bare: true,
            },
            other => other,
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::File { file, .. } => file.flush(),
            _ => Ok(()),
        }
    }
}

/// The one message about a failed `--script-output`.
fn write_error_text(path: &Path, e: &io::Error) -> String {
    format!(
        "cannot write to --script-output '{}' ({e}); the scripts' output from then on is lost",
        escape(path.as_os_str().as_encoded_bytes())
    )
}

/// What the router did, for the end of the run.
#[derive(Debug, Default)]
pub struct RouterReport {
    /// For the TUI without `--script-output`: what the panes can no longer show, as lines for
    /// stderr (each script's last `on_tick()` lines, then what came after the TUI stopped,
    /// `trace_end()`'s output among it).
    pub epilogue: Vec<u8>,
    /// Messages the TUI's panes did not take in time.
    pub not_shown: u64,
    /// The write error on `--script-output`, when there was one.
    pub write_error: Option<String>,
    /// It was said on stderr when it happened (plain mode).
    pub write_error_said: bool,
    /// Messages that were not written because of it.
    pub unwritten: u64,
    /// The writer thread did not finish in time (a blocked stderr or file).
    pub stuck: bool,
}

/// Clear-screen in a script's prints (perf's `clear_term()`, `sctop.py` redrawing its table
/// from a thread of its own): in the TUI each clear starts a new frame, shown as the pane's
/// lines (replaced line by line as the frame grows), never as escapes in its text.
#[derive(Debug, Default)]
pub struct Frames {
    /// Per script, the frame being printed, once it has cleared the screen.
    open: Vec<(String, Vec<String>)>,
}

/// The erase-display sequence (`ESC [ 2 J`, with or without a cursor-home before it).
const CLEAR: &str = "\x1b[2J";
/// Lines one frame keeps (as `on_tick()`'s).
const MAX_FRAME_LINES: usize = 1000;

impl Frames {
    /// The message the panes get for `m`.
    pub fn translate(&mut self, m: PaneMsg) -> PaneMsg {
        let PaneMsg::Text {
            script,
            text,
            is_error: false,
        } = m
        else {
            return m;
        };
        let strip = |t: &str| t.replace("\x1b[H", "");
        let added: Vec<String> = match text.rfind(CLEAR) {
            Some(at) => {
                // A new frame: what came before the clear belonged to the old one.
                let rest = strip(&text[at + CLEAR.len()..]);
                match self.open.iter_mut().find(|(s, _)| *s == script) {
                    Some((_, f)) => f.clear(),
                    None => self.open.push((script.clone(), Vec::new())),
                }
                let body = rest.trim_start_matches('\n');
                match body.is_empty() {
                    true => Vec::new(),
                    false => body.split('\n').map(str::to_string).collect(),
                }
            }
            None => match self.open.iter().any(|(s, _)| *s == script) {
                true => strip(&text).split('\n').map(str::to_string).collect(),
                false => {
                    return PaneMsg::Text {
                        script,
                        text,
                        is_error: false,
                    };
                }
            },
        };
        let Some((_, frame)) = self.open.iter_mut().find(|(s, _)| *s == script) else {
            return PaneMsg::Lines {
                script,
                lines: added,
            };
        };
        let room = MAX_FRAME_LINES.saturating_sub(frame.len());
        frame.extend(added.into_iter().take(room));
        PaneMsg::Lines {
            script,
            lines: frame.clone(),
        }
    }
}

struct RouterState {
    sink: Sink,
    forward: Option<Sender<PaneMsg>>,
    /// Clear-screen frames, for the panes.
    frames: Frames,
    /// Each script's last `on_tick()` lines (only kept when the TUI is the only reader).
    last_lines: Vec<(String, Vec<String>)>,
    keep_last: bool,
    say_errors_now: bool,
    report: RouterReport,
}

impl RouterState {
    fn take(&mut self, m: PaneMsg) {
        if self.report.write_error.is_some() {
            self.report.unwritten += 1;
        } else if let Err(e) = self.sink.write(&m) {
            self.failed(e);
            self.report.unwritten += 1;
        }
        if self.keep_last {
            if let PaneMsg::Lines { script, lines } = &m {
                match self.last_lines.iter_mut().find(|(s, _)| s == script) {
                    Some((_, l)) => l.clone_from(lines),
                    None => self.last_lines.push((script.clone(), lines.clone())),
                }
            }
        }
        if let Some(tx) = &self.forward {
            match tx.try_send(self.frames.translate(m)) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => {}
                Err(TrySendError::Full(_)) => self.report.not_shown += 1,
            }
        }
    }

    fn failed(&mut self, e: io::Error) {
        let Sink::File { path, .. } = &self.sink else {
            return;
        };
        let text = write_error_text(path, &e);
        if self.say_errors_now {
            eprintln!("perfwatch: {text}");
            self.report.write_error_said = true;
        }
        self.report.write_error = Some(text);
    }

    fn flush(&mut self) {
        if self.report.write_error.is_none() {
            if let Err(e) = self.sink.flush() {
                self.failed(e);
            }
        }
    }

    /// The end: the file, all written, takes the place of the previous one; after a write
    /// error, the previous one stays (and the temporary file goes).
    fn commit(&mut self) {
        let Sink::File { output, .. } = &mut self.sink else {
            return;
        };
        let Some(out) = output.take() else {
            return;
        };
        if self.report.write_error.is_none() {
            if let Err(e) = out.commit() {
                self.failed(e);
            }
        }
    }
}

/// The thread that takes the scripts' pane messages: writes them to a [`Sink`] and, in the
/// TUI, passes them on to the panes.
pub struct PaneRouter {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<RouterState>>,
    input: Receiver<PaneMsg>,
    /// The panes' end of the forward channel, to take back what the TUI did not read.
    shown: Option<Receiver<PaneMsg>>,
    /// The epilogue's prints without the script's name (a perf script's, as perf script
    /// prints them).
    bare: bool,
}

/// How long [`PaneRouter::finish`] waits for the writer.
const FINISH_WAIT: Duration = Duration::from_secs(1);

impl PaneRouter {
    /// For `--plain`/`--json`: write every message to `sink`; a write error is said at once.
    pub fn spawn(input: Receiver<PaneMsg>, sink: Sink) -> Result<PaneRouter> {
        PaneRouter::start(input, sink, None, true)
    }

    /// For the TUI: pass every message on to the panes (returned receiver, `capacity`
    /// messages), and write it to `sink` (`--script-output`) if there is one. Errors are kept
    /// for after the terminal is restored.
    pub fn spawn_for_panes(
        input: Receiver<PaneMsg>,
        sink: Sink,
        capacity: usize,
    ) -> Result<(PaneRouter, Receiver<PaneMsg>)> {
        let (tx, rx) = crossbeam_channel::bounded(capacity.max(1));
        let mut r = PaneRouter::start(input, sink, Some(tx), false)?;
        r.shown = Some(rx.clone());
        Ok((r, rx))
    }

    fn start(
        input: Receiver<PaneMsg>,
        sink: Sink,
        forward: Option<Sender<PaneMsg>>,
        say_errors_now: bool,
    ) -> Result<PaneRouter> {
        let keep_last = forward.is_some() && matches!(sink, Sink::None);
        let mut state = RouterState {
            sink,
            forward,
            frames: Frames::default(),
            last_lines: Vec::new(),
            keep_last,
            say_errors_now,
            report: RouterReport::default(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let rx = input.clone();
        let thread = std::thread::Builder::new()
            .name("perfwatch-pane".into())
            .spawn(move || {
                loop {
                    match rx.recv_timeout(Duration::from_millis(50)) {
                        Ok(m) => state.take(m),
                        Err(RecvTimeoutError::Disconnected) => break,
                        Err(RecvTimeoutError::Timeout) => {}
                    }
                    if flag.load(Ordering::Acquire) {
                        break;
                    }
                }
                state.flush();
                state
            })
            .context("cannot start the script output thread")?;
        Ok(PaneRouter {
            stop,
            thread: Some(thread),
            input,
            shown: None,
            bare: false,
        })
    }

    /// A perf script's router: what it prints after the TUI is gone reaches stderr bare.
    pub fn bare_epilogue(mut self) -> PaneRouter {
        self.bare = true;
        self
    }

    /// Once the scripts have stopped: write what is still queued, and return what the user
    /// should be told. Waits for a writer blocked on its file or on stderr at most a second.
    pub fn finish(mut self) -> RouterReport {
        self.stop.store(true, Ordering::Release);
        let Some(t) = self.thread.take() else {
            return RouterReport::default();
        };
        let deadline = Instant::now() + FINISH_WAIT;
        while !t.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        if !t.is_finished() {
            return RouterReport {
                stuck: true,
                ..Default::default()
            };
        }
        let Ok(mut state) = t.join() else {
            return RouterReport::default();
        };
        // The panes are gone: what they did not take, and what came after, is written out
        // (or kept for stderr) instead.
        state.forward = None;
        let keep_last = state.keep_last;
        let mut texts = Vec::new();
        // Passed on but not read by the panes: already written to the sink, if any.
        let unread: Vec<PaneMsg> = self.shown.iter().flat_map(|r| r.try_iter()).collect();
        for m in unread {
            if keep_last && matches!(m, PaneMsg::Text { .. }) {
                texts.push(m);
            }
        }
        // Not taken at all yet (trace_end's output, typically).
        for m in self.input.try_iter().collect::<Vec<_>>() {
            if keep_last && matches!(m, PaneMsg::Text { .. }) {
                texts.push(m.clone());
            }
            state.take(m);
        }
        state.flush();
        state.commit();
        if keep_last {
            let mut out = Vec::new();
            for (script, lines) in std::mem::take(&mut state.last_lines) {
                let _ = write_msg(&mut out, &PaneMsg::Lines { script, lines });
            }
            for m in &texts {
                let _ = match (self.bare, m) {
                    (
                        true,
                        PaneMsg::Text {
                            is_error: false, ..
                        },
                    ) => write_bare(&mut out, m),
                    _ => write_msg(&mut out, m),
                };
            }
            state.report.epilogue = out;
        }
        state.report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> PaneMsg {
        PaneMsg::Text {
            script: "a.py".into(),
            text: s.into(),
            is_error: false,
        }
    }

    fn lines(l: &[&str]) -> PaneMsg {
        PaneMsg::Lines {
            script: "a.py".into(),
            lines: l.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn lines_are_prefixed_and_escaped() {
        let mut v = Vec::new();
        write_msg(&mut v, &lines(&["one", "t\x1b[2Jwo"])).unwrap();
        write_msg(
            &mut v,
            &PaneMsg::Text {
                script: "a.py".into(),
                text: "x\ny".into(),
                is_error: true,
            },
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(v).unwrap(),
            "[a.py] one\n[a.py] t\\x1b[2Jwo\n[a.py] x\n[a.py] y\n"
        );
    }

    /// The TUI without `--script-output`: the panes get everything while they run; at the end
    /// the last on_tick() lines and what came after the panes stopped reading are returned.
    #[test]
    fn the_tui_gets_its_last_lines_and_trace_end_output_back() {
        let (tx, rx) = crossbeam_channel::bounded(16);
        let (router, panes) = PaneRouter::spawn_for_panes(rx, Sink::None, 16).unwrap();
        tx.send(lines(&["tick 1"])).unwrap();
        tx.send(text("printed")).unwrap();
        let first = panes.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(first, lines(&["tick 1"]));
        // The TUI stops reading; more ticks, then trace_end's output.
        tx.send(lines(&["tick 2", "total 7"])).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        tx.send(text("final table")).unwrap();
        let r = router.finish();
        assert_eq!(
            String::from_utf8(r.epilogue).unwrap(),
            "[a.py] tick 2\n[a.py] total 7\n[a.py] printed\n[a.py] final table\n"
        );
        assert!(r.write_error.is_none());
    }

    /// A write error is kept once, with the file and the error, and what follows is counted.
    #[test]
    fn a_write_error_is_said_once_and_counted() {
        let (tx, rx) = crossbeam_channel::bounded(16);
        let file = File::options().write(true).open("/dev/full").unwrap();
        let sink = Sink::File {
            path: "/dev/full".into(),
            file: io::LineWriter::new(file),
            output: None,
            bare: false,
        };
        let (router, _panes) = PaneRouter::spawn_for_panes(rx, sink, 16).unwrap();
        for i in 0..5 {
            tx.send(text(&format!("line {i}"))).unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
        let r = router.finish();
        let e = r.write_error.expect("a write error");
        assert!(
            e.contains("'/dev/full'") && e.contains("No space left on device"),
            "{e}"
        );
        assert_eq!(r.unwritten, 5);
        assert!(r.epilogue.is_empty());
    }

    #[test]
    fn a_clear_screen_starts_a_frame_of_pane_lines() {
        let t = |text: &str| PaneMsg::Text {
            script: "sctop.py".into(),
            text: text.into(),
            is_error: false,
        };
        let lines = |l: &[&str]| PaneMsg::Lines {
            script: "sctop.py".into(),
            lines: l.iter().map(|s| s.to_string()).collect(),
        };
        let mut f = Frames::default();
        // Before any clear: text, as it was.
        assert_eq!(f.translate(t("hello")), t("hello"));
        assert_eq!(f.translate(t("\x1b[H\x1b[2J")), lines(&[]));
        assert_eq!(
            f.translate(t("syscall events:")),
            lines(&["syscall events:"])
        );
        assert_eq!(
            f.translate(t("a  1\nb  2")),
            lines(&["syscall events:", "a  1", "b  2"])
        );
        // The next clear: a new frame.
        assert_eq!(f.translate(t("\x1b[H\x1b[2J\nx  3")), lines(&["x  3"]));
        // Errors stay text.
        let e = PaneMsg::Text {
            script: "sctop.py".into(),
            text: "Traceback".into(),
            is_error: true,
        };
        assert_eq!(f.translate(e.clone()), e);
        // Another script is not in a frame.
        let other = PaneMsg::Text {
            script: "o.py".into(),
            text: "x".into(),
            is_error: false,
        };
        assert_eq!(f.translate(other.clone()), other);
    }
}
