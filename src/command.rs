//! `perfwatch -- COMMAND`: start a command held before its exec, so that events can be
//! opened on its pid with `enable_on_exec` and nothing it does is missed; then let it go.
//!
//! `std::process::Command` cannot do this (its `spawn` returns only after the exec), so this
//! is the classic fork / wait-on-a-pipe / exec with a close-on-exec pipe that reports a
//! failed exec, as perf's `evlist__prepare_workload` does. Everything the child needs is
//! allocated before the fork; after it, the child only makes async-signal-safe calls.
//!
//! The fork and the child's side of it are `sys::process::fork_held`.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::sys;

/// A forked child waiting, before its exec, for [`PausedChild::go`].
pub(crate) struct PausedChild {
    pid: libc::pid_t,
    go: Option<OwnedFd>,
    exec_error: Option<OwnedFd>,
    released: bool,
    reaped: bool,
    display: String,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum CommandError {
    #[error("cannot run '{0}': command not found")]
    NotFound(String),
    #[error("cannot run '{cmd}': {err}")]
    Exec { cmd: String, err: io::Error },
}

/// Find `prog` the way execvp would: as a path if it has a slash, else along $PATH.
pub fn resolve(prog: &OsStr) -> Option<PathBuf> {
    let is_exec = |p: &Path| {
        std::fs::metadata(p).map(|m| {
            use std::os::unix::fs::PermissionsExt;
            m.is_file() && m.permissions().mode() & 0o111 != 0
        })
    };
    if prog.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(prog));
    }
    let path =
        std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| is_exec(p).unwrap_or(false))
}

fn cstring(s: &OsStr, what: &str) -> Result<CString, CommandError> {
    CString::new(s.as_bytes()).map_err(|_| CommandError::Exec {
        cmd: what.to_string(),
        err: io::Error::new(io::ErrorKind::InvalidInput, "argument contains a NUL byte"),
    })
}

impl PausedChild {
    /// Fork a child that will exec `argv` once released.
    pub fn spawn(argv: &[OsString]) -> Result<PausedChild, CommandError> {
        let Some(prog) = argv.first() else {
            return Err(CommandError::NotFound(String::new()));
        };
        let display = crate::text::escape(prog.as_bytes());
        let path = resolve(prog).ok_or_else(|| CommandError::NotFound(display.clone()))?;
        let c_path = cstring(path.as_os_str(), &display)?;
        let c_args: Vec<CString> = argv
            .iter()
            .map(|a| cstring(a, &display))
            .collect::<Result<_, _>>()?;
        // perfwatch catches SIGINT and SIGTERM even when they were ignored at its start (the
        // exec would reset them to the default); the command gets them as perfwatch got them.
        let ignore: Vec<libc::c_int> = crate::signals::ALWAYS_CAUGHT
            .into_iter()
            .filter(|&sig| crate::signals::ignored_at_entry(sig))
            .collect();
        let held = sys::process::fork_held(&c_path, &c_args, &ignore).map_err(|err| {
            CommandError::Exec {
                cmd: display.clone(),
                err,
            }
        })?;
        Ok(PausedChild {
            pid: held.pid,
            go: Some(held.go),
            exec_error: Some(held.exec_error),
            released: false,
            reaped: false,
            display,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    pub fn display(&self) -> &str {
        &self.display
    }

    /// Let the child exec. Returns the exec error, if the exec failed.
    pub fn go(&mut self) -> Result<(), CommandError> {
        self.released = true;
        if let Some(go) = self.go.take() {
            sys::write(go.as_fd(), &[1]);
        }
        let mut e = [0u8; 4];
        let n = match self.exec_error.take() {
            Some(fd) => loop {
                let n = sys::read(fd.as_fd(), &mut e);
                if n >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    break n;
                }
            },
            None => 0,
        };
        let e = i32::from_ne_bytes(e);
        if n == 4 {
            self.wait();
            return Err(CommandError::Exec {
                cmd: self.display.clone(),
                err: io::Error::from_raw_os_error(e),
            });
        }
        Ok(())
    }

    /// The exit status as a shell reports it (128 + signal when killed), if it has exited.
    pub fn try_wait(&mut self) -> Option<i32> {
        self.wait_flags(libc::WNOHANG)
    }

    /// Wait for the child to exit.
    pub fn wait(&mut self) -> Option<i32> {
        self.wait_flags(0)
    }

    fn wait_flags(&mut self, flags: libc::c_int) -> Option<i32> {
        if self.reaped {
            return None;
        }
        let mut status = 0;
        loop {
            let r = sys::process::waitpid(self.pid, &mut status, flags);
            if r == self.pid {
                self.reaped = true;
                if libc::WIFEXITED(status) {
                    return Some(libc::WEXITSTATUS(status));
                }
                if libc::WIFSIGNALED(status) {
                    return Some(128 + libc::WTERMSIG(status));
                }
                return Some(1);
            }
            if r == 0 {
                return None;
            }
            if io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                self.reaped = true;
                return None;
            }
        }
    }

    /// Send `sig` to the child, if it is still ours to signal.
    pub fn signal(&self, sig: libc::c_int) {
        if !self.reaped {
            // Our own unreaped child's pid: it cannot be another process's yet.
            sys::process::kill(self.pid, sig);
        }
    }
}

impl Drop for PausedChild {
    fn drop(&mut self) {
        // An unreleased child sees end of file on its pipe and exits 127.
        drop(self.go.take());
        drop(self.exec_error.take());
        if !self.released {
            self.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn runs_and_reports_exit_code() {
        let mut c = PausedChild::spawn(&args(&["sh", "-c", "exit 7"])).unwrap();
        c.go().unwrap();
        assert_eq!(c.wait(), Some(7));
    }

    #[test]
    fn missing_command_is_named() {
        let e = PausedChild::spawn(&args(&["no-such-command-perfwatch"]))
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "cannot run 'no-such-command-perfwatch': command not found"
        );
    }

    #[test]
    fn exec_failure_is_reported_after_go() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("not-executable");
        std::fs::write(&p, "x").unwrap();
        let mut c = PausedChild::spawn(&[p.clone().into_os_string()]).unwrap();
        let e = c.go().unwrap_err();
        assert!(e.to_string().contains("Permission denied"), "{e}");
    }

    #[test]
    fn dropped_unreleased_child_exits() {
        let c = PausedChild::spawn(&args(&["true"])).unwrap();
        let pid = c.pid();
        drop(c);
        assert!(
            !Path::new(&format!("/proc/{pid}/status")).exists() || {
                let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
                !s.contains("perfwatch")
            }
        );
    }
}
