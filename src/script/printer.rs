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

/// Create (or truncate) the `--script-output` file without being turned against the system.
///
/// perfwatch usually runs as root, often through sudo, and the path may lie in a directory
/// the invoking user controls. So, as root: never follow a symlink at the last component (a link to
/// /etc/shadow would be truncated), refuse a file with other hard links or that is not a
/// regular file, and under sudo hand the file to the invoking user, saying so.
pub fn create_output(path: &Path) -> Result<File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        // Without privileges a path can only hurt its own user: /dev/stderr, FIFOs are fine.
        return Ok(File::create(path)?);
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                anyhow::anyhow!("it is a symbolic link, which perfwatch does not follow")
            } else {
                e.into()
            }
        })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        anyhow::bail!("it is not a regular file");
    }
    if meta.nlink() > 1 {
        anyhow::bail!("it has other hard links, which perfwatch does not write through");
    }
    file.set_len(0)?;
    let sudo_ids = std::env::var("SUDO_UID")
        .ok()
        .and_then(|u| u.parse::<u32>().ok())
        .zip(
            std::env::var("SUDO_GID")
                .ok()
                .and_then(|g| g.parse::<u32>().ok()),
        );
    if let Some((uid, gid)) = sudo_ids {
        if meta.uid() != uid {
            std::os::unix::fs::fchown(&file, Some(uid), Some(gid))?;
            eprintln!(
                "perfwatch: --script-output '{}' is owned by the invoking user (uid {uid}), not root",
                escape(path.as_os_str().as_encoded_bytes())
            );
        }
    }
    Ok(file)
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
            Some(p) => Box::new(io::LineWriter::new(create_output(p).with_context(
                || {
                    format!(
                        "cannot create --script-output file '{}'",
                        escape(p.as_os_str().as_encoded_bytes())
                    )
                },
            )?)),
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
