//! Refuse, when running as root, a script that someone else could have written or swapped.
//!
//! `sudo perfwatch --script x.py` runs `x.py` with root's privileges. If another user could
//! have changed the file, or could make the path lead to a file of theirs, that user gets
//! root. So, as OpenSSH checks `authorized_keys` (`safe_path`), perfwatch walks the whole
//! path one component at a time, from `/`, never following a symbolic link it has not looked
//! at, and opens the file once at the end of that walk: the file it checked is the file it
//! reads and compiles (`fstat` of that very descriptor), whatever is renamed or swapped in
//! the meantime.
//!
//! The rules ([`judge_script`], a pure function over what the walk saw, so that they are
//! tested on crafted metadata):
//!
//! - every directory, symbolic link and the file itself is owned by root or by the invoking
//!   user (`SUDO_UID`);
//! - no directory on the way is writable by group or others, unless it is sticky (`/tmp`):
//!   then only its owner and the owner of an entry can rename or remove that entry, and the
//!   entry is owned right by the first rule;
//! - the file is a regular file, not writable by group or others.
//!
//! A directory that goes on Python's import path must pass the same walk and, in addition,
//! not be writable by group or others at all, sticky or not: anyone could add a module to it
//! ([`judge_import_dir`]). `--force-script` overrides the script rules, loudly.

use std::collections::VecDeque;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

use crate::text::escape;

/// What a path component is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    Symlink,
    Other,
}

impl Kind {
    fn of(mode: u32) -> Kind {
        match mode & libc::S_IFMT {
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFREG => Kind::File,
            libc::S_IFLNK => Kind::Symlink,
            _ => Kind::Other,
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Kind::Dir => "the directory",
            Kind::File => "the file",
            Kind::Symlink => "the symbolic link",
            Kind::Other => "the special file",
        }
    }
}

/// One path component as the walk found it (a symbolic link is described as itself, not as
/// what it points to).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// Where it is, escaped for messages.
    pub path: String,
    pub kind: Kind,
    pub uid: u32,
    /// Permission bits with the sticky bit (`st_mode & 0o7777`).
    pub mode: u32,
    pub dev: u64,
    pub ino: u64,
}

impl Node {
    fn writable_by(&self) -> Option<&'static str> {
        match (self.mode & 0o020 != 0, self.mode & 0o002 != 0) {
            (true, true) => Some("group and others"),
            (true, false) => Some("its group"),
            (false, true) => Some("others"),
            (false, false) => None,
        }
    }

    fn sticky(&self) -> bool {
        self.mode & 0o1000 != 0
    }
}

/// One lookup of the walk: `entry`, found in directory `dir`. `dir` is None for `/` itself
/// and for `..`, which nobody can replace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub dir: Option<Node>,
    pub entry: Node,
}

/// The identity the check is made for: the effective uid and, under sudo, the invoking uid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Invoker {
    pub euid: u32,
    pub sudo_uid: Option<u32>,
}

impl Invoker {
    /// The current process: `geteuid()` and `$SUDO_UID` (ignored when it is not a number).
    pub fn current() -> Invoker {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = crate::sys::geteuid();
        let sudo_uid = std::env::var("SUDO_UID")
            .ok()
            .and_then(|s| s.trim().parse().ok());
        Invoker { euid, sudo_uid }
    }

    /// Whose files perfwatch trusts: root's, its own, and under sudo the invoking user's.
    pub fn trusts(&self, uid: u32) -> bool {
        uid == 0 || uid == self.euid || (self.euid == 0 && Some(uid) == self.sudo_uid)
    }

    fn trusted_owners(&self) -> String {
        match (self.euid, self.sudo_uid) {
            (0, Some(u)) if u != 0 => format!("root or the invoking user (uid {u})"),
            (0, _) => "root".to_string(),
            (e, _) => format!("root or you (uid {e})"),
        }
    }
}

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsafe {
    #[error(
        "{what} '{path}' is owned by uid {owner}, not by {trusted}; someone else could change \
         what perfwatch runs"
    )]
    ForeignOwner {
        what: &'static str,
        path: String,
        owner: u32,
        trusted: String,
    },
    #[error(
        "{what} '{path}' is writable by {who} (mode {mode:04o}); someone else could change what \
         perfwatch runs"
    )]
    Writable {
        what: &'static str,
        path: String,
        who: &'static str,
        mode: u32,
    },
    #[error(
        "the directory '{path}' is writable by {who} (mode {mode:04o}) and not sticky; someone \
         else could replace '{entry}' in it"
    )]
    OpenDir {
        path: String,
        who: &'static str,
        mode: u32,
        entry: String,
    },
    #[error(
        "the directory '{path}' is writable by {who} (mode {mode:04o}); anyone could add a module to it"
    )]
    SharedDir {
        path: String,
        who: &'static str,
        mode: u32,
    },
    #[error("'{path}' is not a regular file")]
    NotAFile { path: String },
}

/// The rules every step of a walk must pass: each entry owned by someone trusted, and no
/// directory on the way replaceable by others.
fn judge_chain(steps: &[Step], who: Invoker) -> Result<(), Unsafe> {
    for s in steps {
        if let Some(d) = &s.dir {
            if let Some(w) = d.writable_by() {
                if !d.sticky() {
                    return Err(Unsafe::OpenDir {
                        path: d.path.clone(),
                        who: w,
                        mode: d.mode,
                        entry: s.entry.path.clone(),
                    });
                }
            }
        }
        trusted(&s.entry, who)?;
    }
    Ok(())
}

/// `node` must belong to someone `who` trusts.
fn trusted(node: &Node, who: Invoker) -> Result<(), Unsafe> {
    if who.trusts(node.uid) {
        return Ok(());
    }
    Err(Unsafe::ForeignOwner {
        what: node.kind.noun(),
        path: node.path.clone(),
        owner: node.uid,
        trusted: who.trusted_owners(),
    })
}

/// May a script found by this walk run with `who`'s privileges? `steps` ends with the
/// script's own entry (the metadata of the descriptor it is read from).
pub fn judge_script(steps: &[Step], who: Invoker) -> Result<(), Unsafe> {
    let Some(last) = steps.last() else {
        return Err(Unsafe::NotAFile {
            path: String::new(),
        });
    };
    if last.entry.kind != Kind::File {
        return Err(Unsafe::NotAFile {
            path: last.entry.path.clone(),
        });
    }
    judge_chain(steps, who)?;
    if let Some(w) = last.entry.writable_by() {
        return Err(Unsafe::Writable {
            what: "the file",
            path: last.entry.path.clone(),
            who: w,
            mode: last.entry.mode,
        });
    }
    Ok(())
}

/// May the directory a script was found in go on Python's import path? The script's walk
/// must pass, and the directory must not be writable by group or others even if sticky.
pub fn judge_import_dir(steps: &[Step], dir: &Node, who: Invoker) -> Result<(), Unsafe> {
    judge_script(steps, who)?;
    match dir.writable_by() {
        Some(w) => Err(Unsafe::SharedDir {
            path: dir.path.clone(),
            who: w,
            mode: dir.mode,
        }),
        None => Ok(()),
    }
}

/// The symbolic links a walk followed must belong to someone trusted: a link another user
/// owns could point anywhere the next time (for `--script-output`).
pub fn judge_links(steps: &[Step], who: Invoker) -> Result<(), Unsafe> {
    steps
        .iter()
        .filter(|s| s.entry.kind == Kind::Symlink)
        .try_for_each(|s| trusted(&s.entry, who))
}

/// Symbolic links followed at most, as the kernel's own limit.
const MAX_LINKS: u32 = 40;

pub(super) fn cstring(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

pub(super) fn openat(dir: &OwnedFd, name: &CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    crate::sys::fs::openat(dir.as_fd(), name, flags, mode)
}

fn open_root() -> io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_PATH: the access mode is ignored; std adds O_CLOEXEC.
    let root = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
        .open("/")?;
    Ok(OwnedFd::from(root))
}

/// `fstat` of a descriptor (an `O_PATH` one included: a symbolic link opened with
/// `O_NOFOLLOW` is described as itself).
pub fn stat_fd(fd: &OwnedFd, path: &Path) -> io::Result<Node> {
    // An empty name with AT_EMPTY_PATH: the descriptor itself.
    let st = crate::sys::fs::fstatat(
        fd.as_fd(),
        c"",
        libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
    )?;
    Ok(Node {
        path: escape(path.as_os_str().as_bytes()),
        kind: Kind::of(st.st_mode),
        uid: st.st_uid,
        mode: st.st_mode & 0o7777,
        dev: st.st_dev,
        ino: st.st_ino,
    })
}

fn readlink_fd(fd: &OwnedFd) -> io::Result<PathBuf> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // An empty name: the link the O_PATH fd refers to.
    let n = crate::sys::fs::readlinkat(fd.as_fd(), c"", &mut buf)?;
    buf.truncate(n);
    Ok(PathBuf::from(OsString::from_vec(buf)))
}

fn components(p: &Path) -> impl Iterator<Item = OsString> + '_ {
    p.components().filter_map(|c| match c {
        Component::Normal(n) => Some(n.to_os_string()),
        Component::ParentDir => Some(OsString::from("..")),
        Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
    })
}

/// A path resolved one component at a time from `/`, recording what every lookup found.
pub struct Walk {
    pub steps: Vec<Step>,
    /// The directory the walk is in.
    pub dir: OwnedFd,
    pub dir_node: Node,
    /// The real path of `dir` (symbolic links resolved).
    pub dir_path: PathBuf,
    /// What the last component was when the walk looked at it (before it is opened).
    pub last: Option<Node>,
    queue: VecDeque<OsString>,
    links: u32,
}

impl Walk {
    /// Start at `/`, with `path` (made absolute from the current directory) to resolve.
    pub fn new(path: &Path) -> io::Result<Walk> {
        let abs = if path.is_absolute() {
            path.to_path_buf()
        } else {
            std::env::current_dir()?.join(path)
        };
        let dir = open_root()?;
        let root = PathBuf::from("/");
        let dir_node = stat_fd(&dir, &root)?;
        Ok(Walk {
            steps: vec![Step {
                dir: None,
                entry: dir_node.clone(),
            }],
            dir,
            dir_node,
            dir_path: root,
            last: None,
            queue: components(&abs).collect(),
            links: 0,
        })
    }

    fn restart_at_root(&mut self) -> io::Result<()> {
        self.dir = open_root()?;
        self.dir_path = PathBuf::from("/");
        self.dir_node = stat_fd(&self.dir, &self.dir_path)?;
        self.steps.push(Step {
            dir: None,
            entry: self.dir_node.clone(),
        });
        Ok(())
    }

    /// Resolve every component but the last; with `follow_last`, the last one too when it is
    /// a symbolic link or a directory. Returns the name of the last component (in
    /// [`Walk::dir`]), or None when the path ended at a directory.
    pub fn resolve(&mut self, follow_last: bool) -> io::Result<Option<OsString>> {
        while let Some(name) = self.queue.pop_front() {
            let last = self.queue.is_empty();
            if name == ".." {
                let up = openat(&self.dir, c"..", libc::O_PATH | libc::O_DIRECTORY, 0)?;
                self.dir_path.pop();
                self.dir_node = stat_fd(&up, &self.dir_path)?;
                self.dir = up;
                self.steps.push(Step {
                    dir: None,
                    entry: self.dir_node.clone(),
                });
                continue;
            }
            if last && !follow_last {
                return Ok(Some(name));
            }
            let c = cstring(&name)?;
            let fd = openat(&self.dir, &c, libc::O_PATH | libc::O_NOFOLLOW, 0)?;
            let path = self.dir_path.join(&name);
            let node = stat_fd(&fd, &path)?;
            self.steps.push(Step {
                dir: Some(self.dir_node.clone()),
                entry: node.clone(),
            });
            match node.kind {
                Kind::Symlink => {
                    self.links += 1;
                    if self.links > MAX_LINKS {
                        return Err(io::Error::from_raw_os_error(libc::ELOOP));
                    }
                    let target = readlink_fd(&fd)?;
                    for c in components(&target).collect::<Vec<_>>().into_iter().rev() {
                        self.queue.push_front(c);
                    }
                    if target.is_absolute() {
                        self.restart_at_root()?;
                    }
                }
                Kind::Dir => {
                    self.dir = fd;
                    self.dir_node = node;
                    self.dir_path = path;
                }
                Kind::File | Kind::Other => {
                    if last {
                        // The caller opens it, and judges the opened descriptor instead.
                        self.steps.pop();
                        self.last = Some(node);
                        return Ok(Some(name));
                    }
                    return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
                }
            }
        }
        Ok(None)
    }

    /// Open `name` in the walk's directory with `flags` (never following a link), and record
    /// the opened descriptor's own metadata as the last step.
    pub fn open_last(
        &mut self,
        name: &OsStr,
        flags: i32,
        mode: u32,
    ) -> io::Result<(OwnedFd, Node)> {
        let c = cstring(name)?;
        let fd = openat(
            &self.dir,
            &c,
            flags | libc::O_NOFOLLOW | libc::O_NOCTTY,
            mode,
        )?;
        let node = stat_fd(&fd, &self.dir_path.join(name))?;
        self.steps.push(Step {
            dir: Some(self.dir_node.clone()),
            entry: node.clone(),
        });
        Ok((fd, node))
    }
}

/// Scripts larger than this are refused: nobody writes one, and reading a huge file as root
/// costs memory.
pub const MAX_SCRIPT_BYTES: u64 = 16 << 20;

/// A script opened once and read from that descriptor.
#[derive(Clone, Debug)]
pub struct OpenedScript {
    /// The path as the user gave it (messages, tracebacks).
    pub path: PathBuf,
    /// The source, read from the descriptor that was checked.
    pub source: Vec<u8>,
    /// The directory the script is really in, when it may go on Python's import path.
    pub import_dir: Option<PathBuf>,
    /// Why the script's directory stays off the import path (said once).
    pub import_note: Option<String>,
    /// Set when `--force-script` let through what the rules refuse: what they said.
    pub forced: Option<String>,
}

/// Why a script cannot be run.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("cannot open script '{path}': {err}")]
    Open { path: String, err: io::Error },
    #[error("script '{path}' is not a regular file")]
    NotAFile { path: String },
    #[error("script '{path}' is larger than {} MiB", MAX_SCRIPT_BYTES >> 20)]
    TooBig { path: String },
    #[error(
        "refusing to run script '{path}' as root: {why} (check it, then `chown root` and \
         `chmod go-w` what it names, or pass --force-script to run it anyway)"
    )]
    Unsafe { path: String, why: Unsafe },
}

/// Open a script the one safe way: walk its path from `/`, open the file at the end of the
/// walk with `O_NOFOLLOW`, judge what the walk saw and the descriptor's own metadata, and
/// read the source from that descriptor. As root the rules are enforced unless `force`;
/// for everyone they decide whether the script's directory may go on the import path.
pub fn open_script(path: &Path, force: bool, who: Invoker) -> Result<OpenedScript, ScriptError> {
    let shown = escape(path.as_os_str().as_bytes());
    let open_err = |err: io::Error| ScriptError::Open {
        path: shown.clone(),
        err,
    };
    let mut walk = Walk::new(path).map_err(open_err)?;
    let name = walk.resolve(true).map_err(open_err)?;
    let Some(name) = name else {
        return Err(ScriptError::NotAFile { path: shown });
    };
    // Never open a device or a FIFO as root just to look at it.
    if walk.last.as_ref().is_some_and(|n| n.kind != Kind::File) {
        return Err(ScriptError::NotAFile { path: shown });
    }
    // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below).
    let (fd, node) = walk
        .open_last(&name, libc::O_RDONLY | libc::O_NONBLOCK, 0)
        .map_err(open_err)?;
    if node.kind != Kind::File {
        return Err(ScriptError::NotAFile { path: shown });
    }
    let verdict = judge_script(&walk.steps, who);
    let forced = match (&verdict, who.euid == 0) {
        (Err(why), true) if !force => {
            return Err(ScriptError::Unsafe {
                path: shown,
                why: why.clone(),
            });
        }
        (Err(why), true) => Some(why.to_string()),
        _ => None,
    };
    let (import_dir, import_note) = match judge_import_dir(&walk.steps, &walk.dir_node, who) {
        Ok(()) => (
            Some(real_path(&walk.dir).unwrap_or(walk.dir_path.clone())),
            None,
        ),
        Err(why) => (None, Some(why.to_string())),
    };
    let mut file = std::fs::File::from(fd);
    let mut source = Vec::new();
    use std::io::Read;
    (&mut file)
        .take(MAX_SCRIPT_BYTES + 1)
        .read_to_end(&mut source)
        .map_err(open_err)?;
    if source.len() as u64 > MAX_SCRIPT_BYTES {
        return Err(ScriptError::TooBig { path: shown });
    }
    Ok(OpenedScript {
        path: path.to_path_buf(),
        source,
        import_dir,
        import_note,
        forced,
    })
}

/// The path the kernel has for an open directory.
fn real_path(fd: &OwnedFd) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: Invoker = Invoker {
        euid: 0,
        sudo_uid: None,
    };
    const SUDO: Invoker = Invoker {
        euid: 0,
        sudo_uid: Some(1000),
    };

    fn node(path: &str, kind: Kind, uid: u32, mode: u32) -> Node {
        Node {
            path: path.into(),
            kind,
            uid,
            mode,
            dev: 1,
            ino: 1,
        }
    }

    fn dir(path: &str, uid: u32, mode: u32) -> Node {
        node(path, Kind::Dir, uid, mode)
    }

    /// The steps of a walk through `nodes`, each found in the directory before it.
    fn chain(nodes: &[Node]) -> Vec<Step> {
        let mut steps = vec![Step {
            dir: None,
            entry: nodes[0].clone(),
        }];
        for w in nodes.windows(2) {
            let parent = if w[0].kind == Kind::Dir {
                Some(w[0].clone())
            } else {
                // After a link the walk goes on from `/` (absolute target).
                None
            };
            steps.push(Step {
                dir: parent,
                entry: w[1].clone(),
            });
        }
        steps
    }

    /// [`chain`] from a root directory owned by root, mode 0755.
    fn rooted(nodes: &[Node]) -> Vec<Step> {
        chain(&[&[dir("/", 0, 0o755)], nodes].concat())
    }

    fn file(path: &str, uid: u32, mode: u32) -> Node {
        node(path, Kind::File, uid, mode)
    }

    /// Asserts that the script at the end of `steps` may not run as `who`, for a reason
    /// that says `says`.
    #[track_caller]
    fn refused(steps: &[Step], who: Invoker, says: impl AsRef<str>) {
        let e = judge_script(steps, who).unwrap_err().to_string();
        assert!(e.contains(says.as_ref()), "{e}");
    }

    #[test]
    fn a_root_owned_script_in_root_owned_directories_passes() {
        let s = rooted(&[dir("/usr", 0, 0o755), file("/usr/x.py", 0, 0o644)]);
        assert_eq!(judge_script(&s, ROOT), Ok(()));
        assert_eq!(judge_import_dir(&s, &dir("/usr", 0, 0o755), ROOT), Ok(()));
    }

    #[test]
    fn the_sudo_users_own_files_and_directories_pass() {
        let s = rooted(&[
            dir("/home", 0, 0o755),
            dir("/home/al", 1000, 0o700),
            file("/home/al/x.py", 1000, 0o600),
        ]);
        assert_eq!(judge_script(&s, SUDO), Ok(()));
        refused(
            &s,
            ROOT,
            "the directory '/home/al' is owned by uid 1000, not by root;",
        );
        let other = Invoker {
            euid: 0,
            sudo_uid: Some(1001),
        };
        refused(&s, other, "not by root or the invoking user (uid 1001)");
    }

    #[test]
    fn writable_files_are_refused() {
        for (mode, who) in [
            (0o646, "others"),
            (0o664, "its group"),
            (0o666, "group and others"),
        ] {
            let s = rooted(&[file("/x.py", 0, mode)]);
            refused(
                &s,
                ROOT,
                format!("'/x.py' is writable by {who} (mode {mode:04o})"),
            );
        }
    }

    #[test]
    fn a_directory_others_can_write_is_refused_unless_sticky() {
        let open = rooted(&[dir("/srv", 0, 0o777), file("/srv/x.py", 0, 0o644)]);
        refused(
            &open,
            ROOT,
            "the directory '/srv' is writable by group and others (mode 0777) and not sticky; \
                 someone else could replace '/srv/x.py'",
        );
        // Group-writable counts too, as for OpenSSH.
        let group = chain(&[
            dir("/", 0, 0o775),
            dir("/srv", 0, 0o755),
            file("/srv/x.py", 0, 0o644),
        ]);
        assert!(judge_script(&group, ROOT).is_err());
        // Sticky /tmp with an entry owned right is fine for the script...
        let tmp = rooted(&[dir("/tmp", 0, 0o1777), file("/tmp/x.py", 0, 0o644)]);
        assert_eq!(judge_script(&tmp, ROOT), Ok(()));
        // ...but not as an import directory: anyone can add json.py beside it.
        let e = judge_import_dir(&tmp, &dir("/tmp", 0, 0o1777), ROOT).unwrap_err();
        let says = "'/tmp' is writable by group and others (mode 1777); anyone could add a module";
        assert!(e.to_string().contains(says), "{e}");
        // Another user's entry in a sticky directory is theirs to replace.
        let theirs = rooted(&[
            dir("/tmp", 0, 0o1777),
            dir("/tmp/d", 65534, 0o755),
            file("/tmp/d/x.py", 0, 0o644),
        ]);
        assert!(judge_script(&theirs, ROOT).is_err());
    }

    #[test]
    fn symbolic_links_must_belong_to_someone_trusted() {
        let via = |owner| {
            rooted(&[
                dir("/tmp", 0, 0o1777),
                node("/tmp/link.py", Kind::Symlink, owner, 0o777),
                dir("/", 0, 0o755),
                dir("/opt", 0, 0o755),
                file("/opt/x.py", 0, 0o644),
            ])
        };
        let e = judge_script(&via(65534), ROOT).unwrap_err();
        assert!(
            e.to_string()
                .contains("the symbolic link '/tmp/link.py' is owned by uid 65534"),
            "{e}"
        );
        assert!(judge_links(&via(65534), ROOT).is_err());
        assert_eq!(judge_script(&via(0), ROOT), Ok(()));
        assert_eq!(judge_links(&via(0), ROOT), Ok(()));
        // A link's own mode (always 0777) is not a writable file.
        assert_eq!(judge_links(&via(1000), SUDO), Ok(()));
    }

    #[test]
    fn only_regular_files_run() {
        let s = rooted(&[node("/dev/null", Kind::Other, 0, 0o644)]);
        assert!(matches!(
            judge_script(&s, ROOT),
            Err(Unsafe::NotAFile { .. })
        ));
    }

    #[test]
    fn ordinary_users_trust_themselves_and_root() {
        let me = Invoker {
            euid: 1000,
            sudo_uid: None,
        };
        let s = rooted(&[
            dir("/home/me", 1000, 0o755),
            file("/home/me/x.py", 1000, 0o644),
        ]);
        assert_eq!(judge_script(&s, me), Ok(()));
        // SUDO_UID means nothing to an ordinary user.
        let spoof = Invoker {
            euid: 1000,
            sudo_uid: Some(65534),
        };
        let s = rooted(&[file("/x.py", 65534, 0o644)]);
        assert!(judge_script(&s, spoof).is_err());
    }

    #[test]
    fn the_walk_sees_every_component_and_the_link_itself() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::write(real.join("x.py"), "pass\n").unwrap();
        std::os::unix::fs::symlink("real/x.py", d.path().join("link.py")).unwrap();
        let mut w = Walk::new(&d.path().join("link.py")).unwrap();
        let name = w.resolve(true).unwrap().unwrap();
        assert_eq!(name, "x.py");
        let (_fd, node) = w.open_last(&name, libc::O_RDONLY, 0).unwrap();
        assert_eq!(node.kind, Kind::File);
        let kinds: Vec<Kind> = w.steps.iter().map(|s| s.entry.kind).collect();
        assert!(kinds.contains(&Kind::Symlink), "{:?}", w.steps);
        assert_eq!(w.steps.first().unwrap().entry.path, "/");
        assert!(w.steps.last().unwrap().entry.path.ends_with("/real/x.py"));
        assert!(w.dir_path.ends_with("real"), "{:?}", w.dir_path);
        // A loop of links ends with ELOOP, not a hang.
        std::os::unix::fs::symlink("b", d.path().join("a")).unwrap();
        std::os::unix::fs::symlink("a", d.path().join("b")).unwrap();
        let mut w = Walk::new(&d.path().join("a")).unwrap();
        assert_eq!(
            w.resolve(true).unwrap_err().raw_os_error(),
            Some(libc::ELOOP)
        );
    }

    #[test]
    fn open_script_reads_from_the_checked_descriptor() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.py");
        std::fs::write(&p, "def on_tick(): pass\n").unwrap();
        let me = Invoker::current();
        let s = open_script(&p, false, me).unwrap();
        assert_eq!(s.source, b"def on_tick(): pass\n");
        assert!(s.forced.is_none());
        // A private directory (the temporary one) may go on the import path.
        assert_eq!(
            s.import_dir.as_deref(),
            Some(std::fs::canonicalize(d.path()).unwrap().as_path()),
            "{:?}",
            s.import_note
        );
        let e = open_script(d.path(), false, me).unwrap_err();
        assert!(e.to_string().contains("is not a regular file"), "{e}");
        let e = open_script(&d.path().join("nope.py"), false, me).unwrap_err();
        assert!(e.to_string().contains("cannot open script"), "{e}");
    }
}
