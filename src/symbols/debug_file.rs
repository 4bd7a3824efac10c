//! Where a stripped binary's names are, besides the binary: a separate debug file, found by
//! build id or by `.gnu_debuglink` in the places gdb and perf look, and MiniDebugInfo (the
//! xz-compressed ELF with a `.symtab` that Fedora puts in a `.gnu_debugdata` section).
//!
//! The candidates come in gdb's order (`Separate Debug Files` in its manual), then the two
//! path-named places perf adds (`/usr/lib/debug/PATH.debug`, as Fedora names them, and
//! `/usr/lib/debug/PATH`, as Ubuntu does). Each is opened by [`super::trusted`]'s rules: in a
//! debug directory, root's files (and root's links, which Fedora's `.build-id` entries are);
//! beside the binary, also its owner's files, and no link at all. A debug file is used only
//! when its build id is the binary's (the caller checks).

use std::io::Read;
use std::path::PathBuf;

use super::request::BuildId;
use super::trusted::Trust;

/// Where a candidate is, which decides whose files are trusted there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// Under a debug directory (`/usr/lib/debug`).
    System,
    /// In the binary's own directory (its `.gnu_debuglink` name there, or in `.debug/`).
    Beside,
}

impl Place {
    /// The rules for this place, for a binary owned by `owner`.
    pub(crate) fn trust(self, owner: u32) -> Trust {
        match self {
            Place::System => Trust::system(),
            Place::Beside => Trust::beside(owner),
        }
    }
}

/// The paths a debug file of the binary at `path` may have, in the order they are tried:
/// by build id under each debug directory; by debug link beside the binary, in its `.debug/`,
/// and under each debug directory; by the binary's path under each debug directory.
pub(crate) fn candidates(
    build_id: BuildId,
    debuglink: Option<&[u8]>,
    path: &[u8],
    debug_dirs: &[PathBuf],
) -> Vec<(Vec<u8>, Place)> {
    use std::os::unix::ffi::OsStrExt;
    let hex = build_id.to_hex();
    let dirs: Vec<&[u8]> = debug_dirs
        .iter()
        .map(|d| d.as_os_str().as_bytes())
        .collect();
    let mut out = Vec::new();
    if hex.len() > 2 {
        for d in &dirs {
            let p = format!("/.build-id/{}/{}.debug", &hex[..2], &hex[2..]);
            out.push(([d, p.as_bytes()].concat(), Place::System));
        }
    }
    // The binary's directory (an absolute path: what the kernel records).
    let dir = &path[..path.iter().rposition(|&b| b == b'/').unwrap_or(0)];
    if let Some(link) = debuglink {
        out.push(([dir, b"/", link].concat(), Place::Beside));
        out.push(([dir, b"/.debug/", link].concat(), Place::Beside));
        for d in &dirs {
            out.push(([d, dir, b"/", link].concat(), Place::System));
        }
    }
    if path.starts_with(b"/") {
        for d in &dirs {
            out.push(([d, path, b".debug"].concat(), Place::System));
            out.push(([d, path].concat(), Place::System));
        }
    }
    out.dedup();
    out
}

/// Why a `.gnu_debugdata` section gave nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MiniError {
    /// Not xz, corrupt, or a dictionary larger than [`MAX_DICT_KIB`].
    Corrupt(String),
    /// It decompresses to more than the limit.
    TooLarge(usize),
}

impl std::fmt::Display for MiniError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MiniError::Corrupt(e) => write!(f, "its .gnu_debugdata cannot be decompressed ({e})"),
            MiniError::TooLarge(n) => write!(
                f,
                "its .gnu_debugdata decompresses to more than {}: not used",
                super::section::human(*n as u64)
            ),
        }
    }
}

/// The xz decoder's memory at most (a dictionary of 64 MiB, `xz -9`'s, and its overhead).
pub(crate) const MAX_DICT_KIB: u32 = 65 << 10;

/// Decompress MiniDebugInfo (one xz stream) into at most `cap` bytes: a section that would
/// give more (a decompression bomb) is refused once `cap` bytes have come out, whatever its
/// headers say, and a dictionary over [`MAX_DICT_KIB`] before it is allocated.
pub(crate) fn mini_debuginfo(packed: &[u8], cap: usize) -> Result<Vec<u8>, MiniError> {
    let reader = lzma_rust2::XzReader::new_mem_limit(packed, false, MAX_DICT_KIB);
    let mut out = Vec::new();
    reader
        .take(cap as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| MiniError::Corrupt(e.to_string()))?;
    if out.len() > cap {
        return Err(MiniError::TooLarge(cap));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_come_in_gdbs_order_then_perfs() {
        let id = BuildId::new(&[0xab, 0xcd, 0xef, 0x01]).unwrap();
        let dirs = [PathBuf::from("/usr/lib/debug")];
        let got: Vec<(String, Place)> =
            candidates(id, Some(b"prog.debug"), b"/opt/x/bin/prog", &dirs)
                .into_iter()
                .map(|(p, w)| (String::from_utf8(p).unwrap(), w))
                .collect();
        let want = [
            ("/usr/lib/debug/.build-id/ab/cdef01.debug", Place::System),
            ("/opt/x/bin/prog.debug", Place::Beside),
            ("/opt/x/bin/.debug/prog.debug", Place::Beside),
            ("/usr/lib/debug/opt/x/bin/prog.debug", Place::System),
            ("/usr/lib/debug/opt/x/bin/prog.debug", Place::System),
            ("/usr/lib/debug/opt/x/bin/prog", Place::System),
        ];
        let want: Vec<(String, Place)> = want.iter().map(|(p, w)| (p.to_string(), *w)).collect();
        // The link named like the binary's own `.debug` path appears once.
        let mut dedup = want.clone();
        dedup.dedup();
        assert_eq!(got, dedup);
        // Without a debug link: by build id and by path only.
        let got = candidates(id, None, b"/usr/bin/prog", &dirs);
        assert_eq!(got.len(), 3);
        assert!(got.iter().all(|(_, w)| *w == Place::System));
    }

    /// `xz -9` of `data`, when xz is installed.
    fn xz(data: &[u8]) -> Option<Vec<u8>> {
        use std::io::Write;
        let mut c = std::process::Command::new("xz")
            .args(["-9", "-c"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .ok()?;
        let mut stdin = c.stdin.take()?;
        let data = data.to_vec();
        let feed = std::thread::spawn(move || stdin.write_all(&data));
        let out = c.wait_with_output().ok()?;
        feed.join().ok()?.ok()?;
        out.status.success().then_some(out.stdout)
    }

    #[test]
    fn mini_debuginfo_decompresses_within_its_bound_and_a_bomb_is_cut() {
        let Some(small) = xz(b"\x7fELF and some symbols") else {
            return;
        };
        assert_eq!(
            mini_debuginfo(&small, 1 << 20).unwrap(),
            b"\x7fELF and some symbols"
        );
        // 256 MiB of zeros, some 40 KiB packed: refused at the cap, quickly, in little memory.
        let bomb = xz(&vec![0u8; 256 << 20]).unwrap();
        assert!(bomb.len() < 1 << 20, "{}", bomb.len());
        let t0 = std::time::Instant::now();
        assert_eq!(
            mini_debuginfo(&bomb, 8 << 20),
            Err(MiniError::TooLarge(8 << 20))
        );
        assert!(t0.elapsed() < std::time::Duration::from_secs(20));
        // Garbage, a truncated stream, nothing.
        assert!(matches!(
            mini_debuginfo(b"not xz at all", 1 << 20),
            Err(MiniError::Corrupt(_))
        ));
        assert!(matches!(
            mini_debuginfo(&small[..small.len() / 2], 1 << 20),
            Err(MiniError::Corrupt(_))
        ));
        assert!(mini_debuginfo(&[], 1 << 20).is_err());
    }
}
