//! Files perfwatch writes (`--folded FILE`, `--script-output FILE`): written beside the
//! target under a temporary name and renamed over it only once complete.
//!
//! Writing in place emptied the previous file at the start: a SIGKILL, an OOM kill or a hang
//! left 0 bytes where the last flame graph was, and a full disk a partial file under the final
//! name. So the output goes to `.NAME.perfwatch-XXXXXX` in the target's directory (created
//! with `O_EXCL`, never following a link, with the old file's mode and owner), is flushed and
//! `fsync`ed, and renamed into place at the end; on any error the temporary file is removed
//! and the old file stays. A run that is killed leaves the old file whole (and its temporary
//! file beside it).
//!
//! As root, the path is walked from `/` as [`crate::script::safety`] does (a symbolic link
//! someone else owns is refused), a symbolic link at the last component is refused ("is a
//! symbolic link"), and so is an existing file that is not regular, has other hard links, or
//! belongs to a user perfwatch does not trust. Without privileges, a path that is not a
//! regular file (`/dev/stderr`, a FIFO, a link to one) is written in place as before.

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::{Result, bail};

use super::safety::{Invoker, Walk, cstring, judge_links, openat};
use crate::text::escape;

/// An output file being written.
pub struct OutputFile {
    file: File,
    /// `None`: written in place (not a regular file, such as `/dev/stderr`).
    replace: Option<Replace>,
}

struct Replace {
    dir: OwnedFd,
    temp: CString,
    name: CString,
    renamed: bool,
}

impl Drop for Replace {
    fn drop(&mut self) {
        if self.renamed {
            return;
        }
        // Not committed (an error, or a panic): the temporary file goes, the old one stays.
        let _ = crate::sys::fs::unlinkat(self.dir.as_fd(), &self.temp, 0);
    }
}

/// `fstatat` without following a link; `None` when nothing is there.
fn lstat_at(dir: &OwnedFd, name: &CString) -> io::Result<Option<libc::stat>> {
    match crate::sys::fs::fstatat(dir.as_fd(), name, libc::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(st)),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A name for the temporary file that nobody can guess ahead (it is created with `O_EXCL`
/// anyway: a guess only makes the creation fail).
fn temp_name(name: &OsStr, attempt: u32) -> OsString {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(attempt);
    h.write_u32(std::process::id());
    let mut t = OsString::from(".");
    t.push(name);
    t.push(format!(".perfwatch-{:06x}", h.finish() & 0xff_ffff));
    t
}

impl OutputFile {
    /// Start writing `path` for `option` (named in messages).
    pub fn create(option: &str, path: &Path) -> Result<OutputFile> {
        let who = Invoker::current();
        let mut walk = Walk::new(path)?;
        let name = walk
            .resolve(false)?
            .ok_or_else(|| anyhow::anyhow!("it is a directory"))?;
        if who.euid == 0 {
            judge_links(&walk.steps, who)?;
        }
        let name_c = cstring(&name)?;
        let old = lstat_at(&walk.dir, &name_c)?;
        if let Some(st) = &old {
            let kind = st.st_mode & libc::S_IFMT;
            if who.euid != 0 && kind != libc::S_IFREG {
                // Without privileges: /dev/stderr, a FIFO, a link the user made. In place.
                return Ok(OutputFile {
                    file: File::create(path)?,
                    replace: None,
                });
            }
            match kind {
                libc::S_IFREG => {}
                libc::S_IFLNK => bail!("it is a symbolic link, which perfwatch does not follow"),
                libc::S_IFDIR => bail!("it is a directory"),
                _ => bail!("it is not a regular file"),
            }
            if who.euid == 0 {
                if st.st_nlink > 1 {
                    bail!("it has other hard links, which perfwatch does not write through");
                }
                if !who.trusts(st.st_uid) {
                    bail!(
                        "it belongs to uid {}, not to root or the invoking user; perfwatch does \
                         not write into another user's file",
                        st.st_uid
                    );
                }
            }
        }
        // Root's new file is private (0600), as before; a user's follows their umask.
        let mode = match &old {
            Some(st) => st.st_mode & 0o7777,
            None if who.euid == 0 => 0o600,
            None => 0o666,
        };
        let mut attempt = 0;
        let (fd, temp) = loop {
            let temp = temp_name(&name, attempt);
            match walk.open_last(
                &temp,
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                mode,
            ) {
                Ok((fd, _)) => break (fd, temp),
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) && attempt < 16 => attempt += 1,
                Err(e) => return Err(e.into()),
            }
        };
        let file = File::from(fd);
        let replace = Replace {
            dir: walk.dir.try_clone()?,
            temp: cstring(&temp)?,
            name: name_c,
            renamed: false,
        };
        if let Some(st) = &old {
            // The old file's mode exactly (creation went through the umask) and owner.
            if who.euid == 0 {
                std::os::unix::fs::fchown(&file, Some(st.st_uid), Some(st.st_gid))?;
            }
            file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
        } else if who.euid == 0 {
            hand_to_sudo_user(option, path, &file)?;
        }
        Ok(OutputFile {
            file,
            replace: Some(replace),
        })
    }

    /// Where to write.
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// All written: flush it to disk and put it in place of the old file.
    pub fn commit(mut self) -> io::Result<()> {
        self.file.flush()?;
        let Some(mut r) = self.replace.take() else {
            return Ok(());
        };
        // On error `r` drops: the temporary file is removed, the old one stays.
        self.file.sync_all()?;
        crate::sys::fs::renameat(r.dir.as_fd(), &r.temp, &r.name)?;
        r.renamed = true;
        // The rename reaches the disk with its directory (best effort: the data already has).
        if let Ok(dir) = openat(&r.dir, c".", libc::O_RDONLY | libc::O_DIRECTORY, 0) {
            let _ = File::from(dir).sync_all();
        }
        Ok(())
    }
}

/// Under sudo, a new file belongs to the invoking user, as a file they had made would.
fn hand_to_sudo_user(option: &str, path: &Path, file: &File) -> Result<()> {
    let who = Invoker::current();
    let sudo_ids = who.sudo_uid.zip(
        std::env::var("SUDO_GID")
            .ok()
            .and_then(|g| g.parse::<u32>().ok()),
    );
    if let Some((uid, gid)) = sudo_ids
        && file.metadata()?.uid() != uid
    {
        std::os::unix::fs::fchown(file, Some(uid), Some(gid))?;
        eprintln!(
            "perfwatch: {option} '{}' is owned by the invoking user (uid {uid}), not root",
            escape(path.as_os_str().as_encoded_bytes())
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn the_old_file_stays_until_the_new_one_is_complete() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.folded");
        std::fs::write(&p, b"old\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        let mut o = OutputFile::create("--folded", &p).unwrap();
        o.file().write_all(b"new\n").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"old\n");
        assert_eq!(entries(dir.path()).len(), 2, "{:?}", entries(dir.path()));
        o.commit().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new\n");
        assert_eq!(entries(dir.path()), vec!["out.folded"]);
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o640);
        // Dropped without a commit (an error on the way): the old file is untouched and
        // nothing is left beside it.
        let mut o = OutputFile::create("--folded", &p).unwrap();
        o.file().write_all(b"partial").unwrap();
        drop(o);
        assert_eq!(std::fs::read(&p).unwrap(), b"new\n");
        assert_eq!(entries(dir.path()), vec!["out.folded"]);
    }

    #[test]
    fn a_new_file_is_made_and_links_and_directories_are_refused_as_what_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("new");
        let mut o = OutputFile::create("--folded", &p).unwrap();
        o.file().write_all(b"x").unwrap();
        o.commit().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"x");
        let e = OutputFile::create("--folded", dir.path())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("directory"), "{e}");
        if Invoker::current().euid == 0 {
            let link = dir.path().join("link");
            std::os::unix::fs::symlink(&p, &link).unwrap();
            let e = OutputFile::create("--folded", &link)
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains("is a symbolic link"), "{e}");
            assert_eq!(std::fs::read(&p).unwrap(), b"x");
            std::fs::hard_link(&p, dir.path().join("hard")).unwrap();
            let e = OutputFile::create("--folded", &p)
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains("hard links"), "{e}");
        }
    }
}
