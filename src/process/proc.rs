//! What existed before perfwatch started, read from `/proc` the way `perf` synthesises it:
//! every process with its parent and its threads' names, its executable mappings (with
//! device and inode), and (when asked) its command line. Also the reads the model's writer
//! makes later: a command line after an exec, the parent of an orphan, whether a task still
//! exists.
//!
//! Everything read here is untrusted text (names, paths, command lines are chosen by whoever
//! runs the process); it is stored raw and escaped where it is shown. Processes that vanish
//! while they are read are skipped; nothing here fails.

use std::path::Path;
use std::sync::Arc;

use super::maps::{MappedFile, Mapping};
use crate::cmdline::CmdLine;
pub use crate::cmdline::MAX_ARGV;
use crate::symbols::FileIdentity;

/// One process as `/proc` showed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedProcess {
    pub pid: u32,
    pub ppid: Option<u32>,
    /// Its threads (the main one included) and their names.
    pub threads: Vec<(u32, Box<[u8]>)>,
    /// Its executable mappings.
    pub maps: Vec<Mapping>,
    /// Its command line (when asked for).
    pub argv: Option<CmdLine>,
    /// The file it runs (`/proc/PID/exe`), when asked for its command line.
    pub exe: Option<Box<[u8]>>,
    /// Its control group (`/system.slice/cron.service`), when the machine has them.
    pub cgroup: Option<Arc<str>>,
}

/// What to read besides the names.
#[derive(Clone, Debug, Default)]
pub struct SeedOptions {
    pub maps: bool,
    pub argv: bool,
}

/// Every process under `root` (normally `/proc`).
pub fn snapshot(root: &Path, opts: &SeedOptions) -> Vec<SeedProcess> {
    let Ok(dir) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out: Vec<SeedProcess> = dir
        .filter_map(|e| {
            let name = e.ok()?.file_name();
            let pid: u32 = name.to_str()?.parse().ok()?;
            process(root, pid, opts)
        })
        .collect();
    out.sort_by_key(|p| p.pid);
    out
}

/// One process, or `None` when it is gone.
pub fn process(root: &Path, pid: u32, opts: &SeedOptions) -> Option<SeedProcess> {
    let base = root.join(pid.to_string());
    let ppid = std::fs::read(base.join("stat"))
        .ok()
        .and_then(|s| parse_ppid(&s));
    let mut threads: Vec<(u32, Box<[u8]>)> = match std::fs::read_dir(base.join("task")) {
        Ok(dir) => dir
            .filter_map(|e| {
                let name = e.ok()?.file_name();
                let tid: u32 = name.to_str()?.parse().ok()?;
                let comm = read_comm(&base.join("task").join(name))?;
                Some((tid, comm))
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    if threads.is_empty() {
        // No task directory to read (or the process is going): its own name.
        threads.push((pid, read_comm(&base)?));
    }
    threads.sort_by_key(|t| t.0);
    let maps = if opts.maps {
        std::fs::read(base.join("maps"))
            .map(|text| {
                text.split(|&b| b == b'\n')
                    .filter_map(parse_maps_line)
                    .filter(|m| m.prot & libc::PROT_EXEC as u32 != 0)
                    .collect()
            })
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    let (argv, exe) = if opts.argv {
        let exe = std::fs::read_link(base.join("exe"))
            .ok()
            .map(|p| p.into_os_string().into_encoded_bytes().into_boxed_slice());
        (read_cmdline(root, pid), exe)
    } else {
        (None, None)
    };
    let cgroup = std::fs::read(base.join("cgroup"))
        .ok()
        .and_then(|t| parse_cgroup(&t))
        .map(Arc::from);
    Some(SeedProcess {
        pid,
        ppid,
        threads,
        maps,
        argv,
        exe,
        cgroup,
    })
}

/// The path of a `/proc/PID/cgroup` file: the unified hierarchy's (`0::PATH`, cgroup v2),
/// else systemd's (`N:name=systemd:PATH`), else the first one's.
pub(crate) fn parse_cgroup(text: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(text);
    let entries: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
            Some((ctl, path))
        })
        .collect();
    let pick = entries
        .iter()
        .find(|(c, _)| c.is_empty())
        .or_else(|| entries.iter().find(|(c, _)| *c == "name=systemd"))
        .or(entries.first())?;
    Some(pick.1.to_string())
}

/// A `comm` file's name, without its newline.
fn read_comm(dir: &Path) -> Option<Box<[u8]>> {
    let mut comm = std::fs::read(dir.join("comm")).ok()?;
    if comm.last() == Some(&b'\n') {
        comm.pop();
    }
    Some(comm.into_boxed_slice())
}

/// The command line of `pid` (see [`crate::cmdline::read_proc`]).
pub(crate) fn read_cmdline(root: &Path, pid: u32) -> Option<CmdLine> {
    crate::cmdline::read_proc(root, pid)
}

/// The command line after an exec: read only while `/proc` still shows the program that
/// exec'd under that name (it may have exec'd again or exited by the time this runs).
pub(crate) fn read_cmdline_if(root: &Path, pid: u32, comm: &[u8]) -> Option<CmdLine> {
    let now = read_comm(&root.join(pid.to_string()))?;
    if &*now != comm {
        return None;
    }
    read_cmdline(root, pid)
}

/// The parent of process `pid` now, while `/proc` still shows it under the name `comm` when
/// one is given (a pid reused since is not taken for it).
pub(crate) fn read_ppid_if(root: &Path, pid: u32, comm: Option<&[u8]>) -> Option<u32> {
    let stat = std::fs::read(root.join(pid.to_string()).join("stat")).ok()?;
    let open = stat.iter().position(|&b| b == b'(')?;
    let close = stat.iter().rposition(|&b| b == b')')?;
    if comm.is_some_and(|c| stat.get(open + 1..close) != Some(c)) {
        return None;
    }
    parse_ppid(&stat)
}

/// Whether task `tid` of process `pid` still exists.
pub(crate) fn task_alive(root: &Path, pid: u32, tid: u32) -> bool {
    root.join(pid.to_string())
        .join("task")
        .join(tid.to_string())
        .exists()
}

/// The parent pid from `/proc/PID/stat`: the fourth field, counted after the name, which is
/// in parentheses and may itself hold spaces and parentheses.
pub fn parse_ppid(stat: &[u8]) -> Option<u32> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(stat.get(close + 1..)?).ok()?;
    let mut f = rest.split_ascii_whitespace();
    let _state = f.next()?;
    f.next()?.parse().ok()
}

/// One line of `/proc/PID/maps`:
/// `7f1c2a000000-7f1c2a022000 r-xp 00028000 fd:01 1183077   /usr/lib/libc.so.6`.
/// Anonymous memory is named `//anon`, as perf names it.
pub(crate) fn parse_maps_line(line: &[u8]) -> Option<Mapping> {
    // Paths may not be UTF-8: split the fixed fields on bytes.
    let mut fields = line.splitn(6, |&b| b == b' ');
    let range = std::str::from_utf8(fields.next()?).ok()?;
    let perms = fields.next()?;
    let offset = std::str::from_utf8(fields.next()?).ok()?;
    let dev = std::str::from_utf8(fields.next()?).ok()?;
    let inode = std::str::from_utf8(fields.next()?).ok()?;
    let path = fields.next().unwrap_or_default();
    let (start, end) = range.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    let pgoff = u64::from_str_radix(offset, 16).ok()?;
    let (maj, min) = dev.split_once(':')?;
    let maj = u32::from_str_radix(maj, 16).ok()?;
    let min = u32::from_str_radix(min, 16).ok()?;
    let ino: u64 = inode.parse().ok()?;
    if perms.len() < 4 || end <= start {
        return None;
    }
    let mut prot = 0;
    for (b, bit) in perms[..3]
        .iter()
        .zip([libc::PROT_READ, libc::PROT_WRITE, libc::PROT_EXEC])
    {
        if *b != b'-' {
            prot |= bit as u32;
        }
    }
    let flags = if perms[3] == b's' {
        libc::MAP_SHARED
    } else {
        libc::MAP_PRIVATE
    } as u32;
    let path = {
        let p = path
            .iter()
            .position(|&b| b != b' ')
            .map_or(&[][..], |i| &path[i..]);
        if p.is_empty() { &b"//anon"[..] } else { p }
    };
    // `/proc/PID/maps` gives no inode generation.
    let id = FileIdentity::from_mmap2(maj, min, ino, 0);
    Some(Mapping {
        start,
        len: end - start,
        pgoff,
        prot,
        flags,
        file: Arc::new(MappedFile::new(path.into(), id)),
        time: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_paths_v2_v1_and_none() {
        assert_eq!(
            parse_cgroup(b"0::/system.slice/cron.service\n").as_deref(),
            Some("/system.slice/cron.service")
        );
        let v1 = b"12:cpu,cpuacct:/a\n1:name=systemd:/user.slice/u.scope\n0::/\n";
        assert_eq!(
            parse_cgroup(v1).as_deref(),
            Some("/"),
            "the unified one first"
        );
        let v1_only = b"12:cpu,cpuacct:/a\n1:name=systemd:/user.slice/u.scope\n";
        assert_eq!(
            parse_cgroup(v1_only).as_deref(),
            Some("/user.slice/u.scope")
        );
        assert_eq!(parse_cgroup(b"garbage"), None);
        assert_eq!(parse_cgroup(b""), None);
    }

    #[test]
    fn ppid_survives_hostile_names() {
        assert_eq!(parse_ppid(b"123 (bash) S 45 123 123 0"), Some(45));
        assert_eq!(parse_ppid(b"9 (a) b) (c) R 77 9 9"), Some(77));
        assert_eq!(parse_ppid(b"9 (x"), None);
        assert_eq!(parse_ppid(b""), None);
    }

    #[test]
    fn maps_lines_parse_like_perf_synthesises_them() {
        let m = parse_maps_line(
            b"7f1c2a000000-7f1c2a022000 r-xp 00028000 fd:01 1183077                    /usr/lib/x86_64-linux-gnu/libc.so.6",
        )
        .unwrap();
        assert_eq!(
            (m.start, m.len, m.pgoff),
            (0x7f1c2a000000, 0x22000, 0x28000)
        );
        assert_eq!(&*m.file.path, b"/usr/lib/x86_64-linux-gnu/libc.so.6");
        assert_eq!(
            m.file.id,
            FileIdentity::Inode {
                maj: 0xfd,
                min: 1,
                ino: 1183077,
                generation: 0
            }
        );
        assert_eq!(m.prot, (libc::PROT_READ | libc::PROT_EXEC) as u32);
        let anon = parse_maps_line(b"7f0000000000-7f0000001000 rwxp 00000000 00:00 0 ").unwrap();
        assert_eq!(&*anon.file.path, b"//anon");
        assert_eq!(anon.file.id, FileIdentity::Unknown);
        let spaced =
            parse_maps_line(b"1000-2000 r-xs 00000000 08:01 5   /tmp/a b (deleted)").unwrap();
        assert_eq!(&*spaced.file.path, b"/tmp/a b (deleted)");
        assert_eq!(spaced.flags, libc::MAP_SHARED as u32);
        let raw = parse_maps_line(b"1000-2000 r-xp 00000000 08:01 5 /tmp/\xff\x1b").unwrap();
        assert_eq!(&*raw.file.path, b"/tmp/\xff\x1b");
        for bad in [
            &b""[..],
            b"zz-2000 r-xp 0 08:01 5",
            b"2000-1000 r-xp 00000000 08:01 5 /x",
            b"1000-2000 r-xp 00000000 0801 5 /x",
        ] {
            assert!(parse_maps_line(bad).is_none(), "{bad:?}");
        }
    }

    /// A fake `/proc` with one process of two threads.
    fn fake_proc() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("42");
        std::fs::create_dir_all(p.join("task/42")).unwrap();
        std::fs::create_dir_all(p.join("task/43")).unwrap();
        std::fs::write(p.join("stat"), "42 (srv (x)) S 7 42 42 0").unwrap();
        std::fs::write(p.join("comm"), "srv (x)\n").unwrap();
        std::fs::write(p.join("task/42/comm"), "srv (x)\n").unwrap();
        std::fs::write(p.join("task/43/comm"), "worker\n").unwrap();
        std::fs::write(
            p.join("maps"),
            "400000-401000 r--p 00000000 08:01 9 /usr/bin/srv\n\
             401000-402000 r-xp 00001000 08:01 9 /usr/bin/srv\n\
             7ff000000000-7ff000001000 r-xp 00000000 00:00 0                  [vdso]\n",
        )
        .unwrap();
        std::fs::write(p.join("cmdline"), b"srv\0--port\x001\0").unwrap();
        std::fs::create_dir_all(d.path().join("self")).unwrap();
        std::fs::create_dir_all(d.path().join("77")).unwrap(); // vanished: no files
        d
    }

    #[test]
    fn a_snapshot_reads_threads_exec_maps_and_argv() {
        let d = fake_proc();
        let all = snapshot(
            d.path(),
            &SeedOptions {
                maps: true,
                argv: true,
            },
        );
        assert_eq!(all.len(), 1, "{all:?}");
        let p = &all[0];
        assert_eq!((p.pid, p.ppid), (42, Some(7)));
        assert_eq!(
            p.threads,
            vec![(42, (*b"srv (x)").into()), (43, (*b"worker").into())]
        );
        let maps: Vec<_> = p.maps.iter().map(|m| (m.start, &*m.file.path)).collect();
        assert_eq!(
            maps,
            vec![
                (0x401000, &b"/usr/bin/srv"[..]),
                (0x7ff000000000, b"[vdso]")
            ]
        );
        assert_eq!(
            p.argv.as_ref().map(|a| a.raw()),
            Some(&b"srv\0--port\x001"[..])
        );
        let bare = snapshot(d.path(), &SeedOptions::default());
        assert!(bare[0].maps.is_empty() && bare[0].argv.is_none());
        assert!(task_alive(d.path(), 42, 43));
        assert!(!task_alive(d.path(), 42, 44));
        assert!(read_cmdline_if(d.path(), 42, b"srv (x)").is_some());
        assert!(read_cmdline_if(d.path(), 42, b"other").is_none());
    }

    /// A `stat` line of pid 42 named `name`, parent `ppid`, argument area `args` bytes long.
    fn stat_line(name: &str, ppid: u32, args: u64) -> String {
        // Fields 3 (state) to 52, after the name: 4 is the parent, 48 and 49 the area.
        let mut f: Vec<String> = (3..=52).map(|_| "0".to_string()).collect();
        f[0] = "S".into();
        f[4 - 3] = ppid.to_string();
        f[48 - 3] = "140000000".into();
        f[49 - 3] = (140000000 + args).to_string();
        format!("42 ({name}) {}", f.join(" "))
    }

    #[test]
    fn a_long_command_line_is_cut_and_counted() {
        let d = fake_proc();
        let p = d.path().join("42");
        let mut cmd = b"rm\0".to_vec();
        cmd.extend(std::iter::repeat_n(b'p', 5000));
        cmd.extend_from_slice(b"\0--really-delete-everything\0");
        std::fs::write(p.join("cmdline"), &cmd).unwrap();
        // The length from stat.
        std::fs::write(p.join("stat"), stat_line("srv (x)", 7, cmd.len() as u64)).unwrap();
        let c = read_cmdline(d.path(), 42).unwrap();
        assert_eq!(c.raw().len(), MAX_ARGV);
        assert_eq!(c.cut(), (cmd.len() - 1 - MAX_ARGV) as u64);
        assert!(c.line().ends_with(&format!("…[+{} bytes]", c.cut())));
        // Without it, by reading on: the same count.
        std::fs::write(p.join("stat"), "42 (srv (x)) S 7").unwrap();
        assert_eq!(read_cmdline(d.path(), 42).unwrap().cut(), c.cut());
        // A short one is whole.
        std::fs::write(p.join("cmdline"), b"a\0b\0").unwrap();
        let c = read_cmdline(d.path(), 42).unwrap();
        assert_eq!((c.raw(), c.cut()), (&b"a\0b"[..], 0));
    }

    #[test]
    fn the_parent_of_an_orphan_is_read_only_under_its_name() {
        let d = fake_proc();
        std::fs::write(d.path().join("42/stat"), stat_line("srv (x)", 1, 10)).unwrap();
        assert_eq!(read_ppid_if(d.path(), 42, Some(b"srv (x)")), Some(1));
        assert_eq!(read_ppid_if(d.path(), 42, None), Some(1));
        assert_eq!(
            read_ppid_if(d.path(), 42, Some(b"other")),
            None,
            "pid reused"
        );
        assert_eq!(read_ppid_if(d.path(), 43, None), None, "gone");
    }

    #[test]
    fn the_real_proc_has_init_and_us() {
        let all = snapshot(Path::new("/proc"), &SeedOptions::default());
        assert!(all.iter().any(|p| p.pid == 1));
        let me = std::process::id();
        let mine = all.iter().find(|p| p.pid == me).unwrap();
        assert!(mine.threads.iter().any(|(t, _)| *t == me));
        let with_maps = process(
            Path::new("/proc"),
            me,
            &SeedOptions {
                maps: true,
                argv: true,
            },
        )
        .unwrap();
        let exe = std::env::current_exe().unwrap();
        let exe = exe.as_os_str().as_encoded_bytes();
        assert!(
            with_maps.maps.iter().any(|m| &*m.file.path == exe),
            "our own code is mapped executable"
        );
        assert!(with_maps.argv.is_some());
    }
}
