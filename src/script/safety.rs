//! Refuse, when running as root, a script that someone else could have written.
//!
//! `sudo perfwatch --script x.py` runs `x.py` with root's privileges. If another user could
//! have changed the file, that user gets root. perf refuses foreign-owned config files for the
//! same reason (`perf config` / `perf script` check ownership and mode); we do the same for
//! scripts: as root (euid 0), a script must be owned by root or by the user who ran sudo
//! (`SUDO_UID`), and must not be writable by group or others. `--force-script` overrides.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Why a script was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnsafeScript {
    #[error(
        "refusing to run script '{path}' as root: it is owned by uid {owner}, not by root{sudo}; \
         a script someone else can edit would run with root's privileges \
         (check it, then `chown root` it, or pass --force-script to run it anyway)"
    )]
    ForeignOwner {
        path: String,
        owner: u32,
        sudo: String,
    },
    #[error(
        "refusing to run script '{path}' as root: it is writable by {who} (mode {mode:04o}); \
         a script someone else can edit would run with root's privileges \
         (`chmod go-w '{path}'`, or pass --force-script to run it anyway)"
    )]
    Writable {
        path: String,
        who: &'static str,
        mode: u32,
    },
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
        let euid = unsafe { libc::geteuid() };
        let sudo_uid = std::env::var("SUDO_UID")
            .ok()
            .and_then(|s| s.trim().parse().ok());
        Invoker { euid, sudo_uid }
    }
}

/// Check a script's owner and mode. Only root is checked: an ordinary user running a script
/// runs it with their own rights, whoever wrote it.
pub fn check(path: &Path, meta: &std::fs::Metadata, who: Invoker) -> Result<(), UnsafeScript> {
    if who.euid != 0 {
        return Ok(());
    }
    let shown = crate::text::escape(path.as_os_str().as_encoded_bytes());
    let owner = meta.uid();
    if owner != 0 && Some(owner) != who.sudo_uid {
        return Err(UnsafeScript::ForeignOwner {
            path: shown,
            owner,
            sudo: who
                .sudo_uid
                .map(|u| format!(" or the invoking user (uid {u})"))
                .unwrap_or_default(),
        });
    }
    let mode = meta.mode() & 0o7777;
    let who = match (mode & 0o020 != 0, mode & 0o002 != 0) {
        (true, true) => "group and others",
        (true, false) => "its group",
        (false, true) => "others",
        (false, false) => return Ok(()),
    };
    Err(UnsafeScript::Writable {
        path: shown,
        who,
        mode,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const ROOT: Invoker = Invoker {
        euid: 0,
        sudo_uid: None,
    };

    fn file(mode: u32) -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.py");
        std::fs::write(&p, "def on_tick(): pass\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        (d, p)
    }

    fn meta_as(p: &Path, uid: u32) -> std::fs::Metadata {
        if uid != std::fs::metadata(p).unwrap().uid() {
            std::os::unix::fs::chown(p, Some(uid), None).unwrap();
        }
        std::fs::metadata(p).unwrap()
    }

    #[test]
    fn writable_by_others_is_refused_for_root() {
        let (_d, p) = file(0o646);
        let m = std::fs::metadata(&p).unwrap();
        let e = check(
            &p,
            &m,
            Invoker {
                euid: 0,
                sudo_uid: Some(m.uid()),
            },
        )
        .unwrap_err();
        let t = e.to_string();
        assert!(
            t.contains("writable by others (mode 0646)") && t.contains("--force-script"),
            "{t}"
        );
        let (_d, p) = file(0o664);
        let m = std::fs::metadata(&p).unwrap();
        let e = check(
            &p,
            &m,
            Invoker {
                euid: 0,
                sudo_uid: Some(m.uid()),
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("writable by its group"), "{e}");
    }

    #[test]
    fn ordinary_users_are_not_checked() {
        let (_d, p) = file(0o666);
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(
            check(
                &p,
                &m,
                Invoker {
                    euid: 1000,
                    sudo_uid: None
                }
            ),
            Ok(())
        );
    }

    #[test]
    fn foreign_owner_is_refused_unless_it_is_the_sudo_user() {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true: this test needs root"
            );
            // To the real stderr: libtest would swallow an eprintln! of a passing test.
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                b"\nSKIPPED script::safety::tests::foreign_owner_is_refused_unless_it_is_the_sudo_user: needs root to chown\n",
            );
            return;
        }
        let (_d, p) = file(0o644);
        let m = meta_as(&p, 65534);
        let e = check(&p, &m, ROOT).unwrap_err();
        assert!(
            e.to_string().contains("owned by uid 65534, not by root;"),
            "{e}"
        );
        let sudo = Invoker {
            euid: 0,
            sudo_uid: Some(65534),
        };
        assert_eq!(check(&p, &m, sudo), Ok(()));
        let other = Invoker {
            euid: 0,
            sudo_uid: Some(1000),
        };
        let e = check(&p, &m, other).unwrap_err();
        assert!(
            e.to_string().contains("or the invoking user (uid 1000)"),
            "{e}"
        );
        let m = meta_as(&p, 0);
        assert_eq!(check(&p, &m, ROOT), Ok(()));
    }
}
