//! `--plain`/`--json` mode: where the scripts' pane goes when there is no pane.
//!
//! `on_tick()` lines and `print()` output are written as `[script.py] line` to stderr, or to
//! `--script-output FILE`, by a thread of their own, so that neither a slow terminal nor a
//! chatty script holds up the event stream on stdout.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result};
use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::pane::PaneMsg;
use crate::text::escape;

/// Write one pane message as lines, each prefixed with the script's name. Script output is
/// escaped like everything else that reaches a terminal: it may repeat untrusted comm names.
pub fn write_msg(out: &mut impl Write, msg: &PaneMsg) -> io::Result<()> {
    let (script, lines): (&str, Vec<&str>) = match msg {
        PaneMsg::Lines { script, lines } => (script, lines.iter().map(String::as_str).collect()),
        PaneMsg::Text { script, text, .. } => (script, text.lines().collect()),
    };
    for l in lines {
        writeln!(
            out,
            "[{}] {}",
            escape(script.as_bytes()),
            escape(l.as_bytes())
        )?;
    }
    Ok(())
}

/// The thread that writes pane messages in plain mode.
pub struct PanePrinter {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl PanePrinter {
    /// Start writing `rx` to `output` (a file, created or truncated) or to stderr.
    pub fn spawn(rx: Receiver<PaneMsg>, output: Option<&Path>) -> Result<PanePrinter> {
        let mut out: Box<dyn Write + Send> = match output {
            Some(p) => Box::new(io::LineWriter::new(File::create(p).with_context(|| {
                format!(
                    "cannot create --script-output file '{}'",
                    escape(p.as_os_str().as_encoded_bytes())
                )
            })?)),
            None => Box::new(io::stderr()),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("perfwatch-pane".into())
            .spawn(move || {
                loop {
                    match rx.recv_timeout(Duration::from_millis(50)) {
                        Ok(m) => {
                            let _ = write_msg(&mut out, &m);
                        }
                        Err(RecvTimeoutError::Disconnected) => break,
                        Err(RecvTimeoutError::Timeout) => {}
                    }
                    if flag.load(Ordering::Acquire) {
                        for m in rx.try_iter() {
                            let _ = write_msg(&mut out, &m);
                        }
                        break;
                    }
                }
                let _ = out.flush();
            })
            .context("cannot start the script output thread")?;
        Ok(PanePrinter {
            stop,
            thread: Some(thread),
        })
    }

    /// Write what is queued, then end.
    pub fn finish(mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_prefixed_and_escaped() {
        let mut v = Vec::new();
        write_msg(
            &mut v,
            &PaneMsg::Lines {
                script: "a.py".into(),
                lines: vec!["one".into(), "t\x1b[2Jwo".into()],
            },
        )
        .unwrap();
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
}
