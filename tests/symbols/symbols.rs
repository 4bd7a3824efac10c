//! The symbolizer against real binaries built here with `cc`, real processes (their mappings
//! read from /proc/PID/maps the way an MMAP2 record gives them), the running kernel's
//! kallsyms, perf maps written by a fake JIT, and perfwatch's own samples.

use crate::common;

use common::{InTime, cc};

use std::io::{BufRead, BufReader};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use perfwatch::symbols::{
    Config, DsoKind, FileIdentity, MappedFile, Mapping, Request, Symbolized, Symbolizer,
};
use perfwatch::testkit::symbols::kernel as crafted_kernel;

/// The test program: known functions (one with a Rust-mangled and one with a C++-mangled
/// name, one static) that it prints the addresses of, then runs `argv[1]` loops (forever
/// without an argument).
const SPIN_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
volatile unsigned long sink;
__attribute__((noinline)) void hot_a(void) { for (int i = 0; i < 2000; i++) sink += i; }
__attribute__((noinline)) void hot_b(void) { for (int i = 0; i < 2000; i++) sink ^= i * 3; }
void rust_fn(void) __asm__("_ZN4core3fmt5write17h0123456789abcdefE");
__attribute__((noinline)) void rust_fn(void) { for (int i = 0; i < 100; i++) sink++; }
void cpp_fn(int) __asm__("_ZN2ns6Widget4spinEi");
__attribute__((noinline)) void cpp_fn(int n) { for (int i = 0; i < n; i++) sink--; }
static __attribute__((noinline)) void local_fn(void) { for (int i = 0; i < 100; i++) sink += 2; }
int main(int argc, char **argv) {
    printf("%p %p %p %p %p\n", (void *)hot_a, (void *)hot_b, (void *)rust_fn, (void *)cpp_fn,
           (void *)local_fn);
    fflush(stdout);
    long loops = argc > 1 ? atol(argv[1]) : -1;
    for (long n = 0; loops < 0 || n < loops; n++) { hot_a(); hot_b(); rust_fn(); cpp_fn(50); local_fn(); }
    return 0;
}
"#;

const NAMES: [&str; 5] = [
    "hot_a",
    "hot_b",
    "core::fmt::write",
    "ns::Widget::spin(int)",
    "local_fn",
];

/// [`SPIN_C`] built as `dir/name` with `flags`.
fn spin(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    cc(dir, name, SPIN_C, flags)
}

/// Asserts that the symbolizer has said `count` things, the first of them each of `says`.
#[track_caller]
fn noted(s: &mut Symbolizer, count: usize, says: &[&str]) {
    let notes = s.take_notes();
    assert_eq!(notes.len(), count, "{notes:?}");
    for w in says {
        assert!(notes[0].message.contains(w), "{w:?}: {}", notes[0]);
    }
}

fn run(cmd: &mut Command) {
    let st = cmd.status_in_time().unwrap();
    assert!(st.success(), "{cmd:?} failed");
}

/// A running copy of a program, and the addresses it printed.
struct Running {
    child: Child,
    addrs: Vec<u64>,
}

impl Running {
    fn start(path: &Path, args: &[&str]) -> Running {
        Running::spawn(Command::new(path).args(args))
    }

    /// Start `c`, and read the addresses it prints on its first line.
    fn spawn(c: &mut Command) -> Running {
        let mut child = c.stdout(Stdio::piped()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addrs = line
            .split_whitespace()
            .map(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).unwrap())
            .collect();
        Running { child, addrs }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A process of ours that only waits (built in `dir`), running until dropped.
fn sleeper(dir: &Path) -> Running {
    let src = "#include <stdio.h>\n#include <unistd.h>\nint main(void){puts(\"0\");fflush(stdout);pause();}\n";
    Running::start(&cc(dir, "sleeper", src, &[]), &[])
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The mapping of `pid` that holds `addr`, as an MMAP2 record gives it: path, start,
/// length, file offset, device and inode (anonymous memory is `//anon`, as perf names it).
fn mapping_of(pid: u32, addr: u64) -> Mapping {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    for line in maps.lines() {
        let f: Vec<&str> = line.splitn(6, ' ').collect();
        let (s, e) = f[0].split_once('-').unwrap();
        let (s, e) = (
            u64::from_str_radix(s, 16).unwrap(),
            u64::from_str_radix(e, 16).unwrap(),
        );
        if addr < s || addr >= e {
            continue;
        }
        let pgoff = u64::from_str_radix(f[2], 16).unwrap();
        let (maj, min) = f[3].split_once(':').unwrap();
        let (maj, min) = (
            u32::from_str_radix(maj, 16).unwrap(),
            u32::from_str_radix(min, 16).unwrap(),
        );
        let ino: u64 = f[4].parse().unwrap();
        let path = f.get(5).map(|p| p.trim_start()).unwrap_or("");
        let path = if path.is_empty() { "//anon" } else { path };
        return Mapping {
            start: s,
            len: e - s,
            pgoff,
            file: MappedFile::new(path.as_bytes(), FileIdentity::from_mmap2(maj, min, ino, 0)),
        };
    }
    panic!("no mapping of {pid} holds {addr:#x}");
}

/// A symbolizer that reads nothing but what the test gives it (no system debug files).
fn symbolizer() -> Symbolizer {
    Symbolizer::new(Config {
        debug_dirs: vec![],
        ..Config::default()
    })
}

fn resolve(s: &mut Symbolizer, reqs: &[Request]) -> Vec<Symbolized> {
    let mut out = Vec::new();
    s.resolve(reqs, &mut out);
    out
}

/// Requests for each printed function at offset 0 and at `off` into it.
fn requests(r: &Running, maps: &[Mapping], off: u64) -> Vec<Request> {
    r.addrs
        .iter()
        .zip(maps)
        .flat_map(|(&a, m)| {
            [
                Request::user(r.pid(), a, m),
                Request::user(r.pid(), a + off, m),
            ]
        })
        .collect()
}

fn assert_named(answers: &[Symbolized], bin: &Path, off: u64) {
    let dso = bin.to_str().unwrap();
    for (i, want) in NAMES.iter().enumerate() {
        let (at0, atoff) = (&answers[2 * i], &answers[2 * i + 1]);
        assert_eq!(at0.name(), Some(*want), "{at0}");
        assert_eq!(at0.offset(), Some(0));
        assert_eq!(atoff.to_string(), format!("{want}+{off:#x}"));
        assert_eq!(at0.dso().name(), dso);
        assert_eq!(at0.dso().kind(), DsoKind::File);
        assert!(!at0.is_kernel());
    }
}

#[test]
fn functions_of_a_c_program_resolve_from_path_and_file_offset_and_after_it_exits() {
    let dir = tempfile::tempdir().unwrap();
    for (name, flags) in [
        ("spin_fp", &["-O2", "-g", "-fno-omit-frame-pointer"][..]),
        ("spin_nofp", &["-O2", "-fomit-frame-pointer"][..]),
        ("spin_nopie", &["-O1", "-no-pie"][..]),
    ] {
        let bin = spin(dir.path(), name, flags);
        let r = Running::start(&bin, &[]);
        let maps: Vec<Mapping> = r.addrs.iter().map(|&a| mapping_of(r.pid(), a)).collect();
        let reqs = requests(&r, &maps, 4);
        let mut s = symbolizer();
        assert_named(&resolve(&mut s, &reqs), &bin, 4);
        assert!(s.take_notes().is_empty());
        // Gone: what the mapping said is enough (nothing reads /proc/PID/maps).
        let pid = r.pid();
        r.stop();
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
        let mut s = symbolizer();
        assert_named(&resolve(&mut s, &reqs), &bin, 4);
    }
}

#[test]
fn a_stripped_copy_is_unknown_with_its_binary_named() {
    let dir = tempfile::tempdir().unwrap();
    let bin = spin(dir.path(), "spin", &["-O2"]);
    run(Command::new("strip").arg(&bin));
    let r = Running::start(&bin, &[]);
    let maps: Vec<Mapping> = r.addrs.iter().map(|&a| mapping_of(r.pid(), a)).collect();
    let mut s = symbolizer();
    let answers = resolve(&mut s, &requests(&r, &maps, 4));
    for a in &answers {
        assert_eq!(a.to_string(), "[unknown]");
        assert_eq!(a.dso().name(), bin.to_str().unwrap());
    }
    noted(&mut s, 1, &["no symbols"]);
}

#[test]
fn a_separate_debug_file_is_found_by_build_id_and_by_debuglink_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let bin = spin(dir.path(), "spin", &["-O2", "-g", "-Wl,--build-id"]);
    let debug = dir.path().join("spin.debug");
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&bin)
        .arg(&debug));
    run(Command::new("strip").arg("--strip-all").arg(&bin));

    // By build id, under a debug directory.
    let out = Command::new("readelf")
        .arg("-n")
        .arg(&bin)
        .output_in_time()
        .unwrap();
    let notes = String::from_utf8_lossy(&out.stdout);
    let id = notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("a build id")
        .trim()
        .to_string();
    let dbg_dir = dir.path().join("debug");
    std::fs::create_dir_all(dbg_dir.join(".build-id").join(&id[..2])).unwrap();
    std::fs::copy(
        &debug,
        dbg_dir
            .join(".build-id")
            .join(&id[..2])
            .join(format!("{}.debug", &id[2..])),
    )
    .unwrap();
    let r = Running::start(&bin, &[]);
    let maps: Vec<Mapping> = r.addrs.iter().map(|&a| mapping_of(r.pid(), a)).collect();
    let reqs = requests(&r, &maps, 2);
    let mut s = Symbolizer::new(Config {
        debug_dirs: vec![dbg_dir.clone()],
        ..Config::default()
    });
    assert_named(&resolve(&mut s, &reqs), &bin, 2);
    r.stop();

    // By .gnu_debuglink, beside the binary.
    let linked = dir.path().join("linked");
    std::fs::copy(&bin, &linked).unwrap();
    run(Command::new("objcopy")
        .arg(format!("--add-gnu-debuglink={}", debug.display()))
        .arg(&linked));
    let r = Running::start(&linked, &[]);
    let maps: Vec<Mapping> = r.addrs.iter().map(|&a| mapping_of(r.pid(), a)).collect();
    let reqs = requests(&r, &maps, 2);
    assert_named(&resolve(&mut symbolizer(), &reqs), &linked, 2);
    r.stop();

    // A debug file of another build at the linked path is not used.
    let other = cc(
        dir.path(),
        "other",
        &SPIN_C.replace("2000", "3000"),
        &["-O2", "-g"],
    );
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&other)
        .arg(&debug));
    let r = Running::start(&linked, &[]);
    let maps: Vec<Mapping> = r.addrs.iter().map(|&a| mapping_of(r.pid(), a)).collect();
    let answers = resolve(&mut symbolizer(), &requests(&r, &maps, 2));
    assert!(answers.iter().all(|a| !a.is_known()), "{answers:?}");
}

#[test]
fn a_replaced_binary_is_never_misread() {
    require_root!("map_files, chroot and chown");
    let dir = tempfile::tempdir().unwrap();
    let bin = spin(dir.path(), "spin", &["-O2"]);
    // Another program whose functions lie elsewhere.
    let other = cc(
        dir.path(),
        "other",
        &SPIN_C.replace("volatile unsigned long sink;", "volatile unsigned long sink;\n__attribute__((noinline)) void pad(void) { for (int i = 0; i < 300; i++) sink *= 7; }\nvoid *keep = pad;"),
        &["-O2", "-g"],
    );
    let r = Running::start(&bin, &[]);
    let maps: Vec<Mapping> = r.addrs.iter().map(|&a| mapping_of(r.pid(), a)).collect();
    let reqs = requests(&r, &maps, 4);

    // Replaced while it runs: a new file (new inode) at the same path.
    std::fs::remove_file(&bin).unwrap();
    std::fs::copy(&other, &bin).unwrap();
    // The process lives: its own mapping (/proc/PID/map_files) still has the old file.
    assert_named(&resolve(&mut symbolizer(), &reqs), &bin, 4);

    // The process is gone: the file at the path is not the mapped one, and says so.
    r.stop();
    let mut s = symbolizer();
    let answers = resolve(&mut s, &reqs);
    for a in &answers {
        assert_eq!(a.to_string(), "[unknown]", "a wrong name from the new file");
        assert_eq!(a.dso().name(), bin.to_str().unwrap());
    }
    noted(&mut s, 1, &["not the one that was mapped"]);

    // Deleted and gone: unknown, named.
    std::fs::remove_file(&bin).unwrap();
    let answers = resolve(&mut symbolizer(), &reqs);
    assert!(answers.iter().all(|a| !a.is_known()));
}

#[test]
fn a_deleted_binary_of_a_live_process_resolves_through_map_files() {
    require_root!("map_files, chroot and chown");
    let dir = tempfile::tempdir().unwrap();
    let bin = spin(dir.path(), "spin", &["-O2"]);
    let r = Running::start(&bin, &[]);
    std::fs::remove_file(&bin).unwrap();
    // /proc/PID/maps now says "(deleted)", as an MMAP2 record written after the unlink would.
    let maps: Vec<Mapping> = r.addrs.iter().map(|&a| mapping_of(r.pid(), a)).collect();
    assert!(maps[0].file.path().ends_with(b" (deleted)"));
    let answers = resolve(&mut symbolizer(), &requests(&r, &maps, 4));
    for (i, want) in NAMES.iter().enumerate() {
        assert_eq!(answers[2 * i].name(), Some(*want));
    }
}

#[test]
fn a_binary_in_a_chroot_resolves_through_the_process_root() {
    require_root!("map_files, chroot and chown");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("bin")).unwrap();
    let built = spin(dir.path(), "spin", &["-O2", "-static"]);
    std::fs::copy(&built, root.join("bin/spin")).unwrap();
    // An absolute symlink inside the root that would lead out of it from the host's view.
    std::os::unix::fs::symlink(&built, root.join("bin/escape")).unwrap();
    let r = Running::spawn(Command::new("chroot").arg(&root).arg("/bin/spin"));
    let (pid, a) = (r.pid(), r.addrs[0]);
    let host = mapping_of(pid, a);
    // As the process's own MMAP2 record names it: the path inside its root. And a length
    // that is not the mapping's, so that /proc/PID/map_files cannot be used: only the root is.
    let inner = Mapping {
        len: host.len - 1,
        file: MappedFile::new(b"/bin/spin", *host.file.identity()),
        ..host.clone()
    };
    let got = symbolizer().resolve_one(&Request::user(pid, a, &inner));
    assert_eq!(got.name(), Some("hot_a"));
    assert_eq!(got.dso().name(), "/bin/spin");
    // A symlink inside the root that names the same binary by its host path: followed from
    // the host it would be read; resolved inside the root, where that path does not exist,
    // it is not.
    let escape = Mapping {
        file: MappedFile::new(b"/bin/escape", FileIdentity::Unknown),
        ..inner.clone()
    };
    let got = symbolizer().resolve_one(&Request::user(pid, a, &escape));
    assert_eq!(got.to_string(), "[unknown]");
    assert_eq!(got.dso().name(), "/bin/escape");
    r.stop();
}

#[test]
fn a_fake_jit_names_its_code_in_a_perf_map_that_outlives_it() {
    require_root!("map_files, chroot and chown");
    const JIT_C: &str = r#"
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
int main(void) {
    unsigned char *code = mmap(0, 8192, PROT_READ | PROT_WRITE | PROT_EXEC,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    code[0] = 0xc3;
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
    FILE *f = fopen(path, "w");
    fprintf(f, "%lx 40 jit_one\n", (unsigned long)code);
    fprintf(f, "garbage line\n");
    fprintf(f, "%lx 80 LazyCompile:~fib /app/x.js:3\n", (unsigned long)code + 0x100);
    fclose(f);
    ((void (*)(void))code)();
    printf("%p\n", (void *)code);
    fflush(stdout);
    pause();
    return 0;
}
"#;
    let dir = tempfile::tempdir().unwrap();
    let jit = cc(dir.path(), "jit", JIT_C, &["-O1"]);
    let r = Running::start(&jit, &[]);
    let pid = r.pid();
    let map_path = PathBuf::from(format!("/tmp/perf-{pid}.map"));
    struct Cleanup(PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _cleanup = Cleanup(map_path.clone());
    let code = r.addrs[0];
    let m = mapping_of(pid, code);
    assert_eq!(m.file.path(), b"//anon");
    let reqs = [
        Request::user(pid, code + 4, &m),
        Request::user(pid, code + 0x120, &m),
        Request::user(pid, code + 0x90, &m),
        // No mapping known at all: the perf map still names it.
        Request::unmapped(pid, code + 8),
    ];
    let check = |answers: &[Symbolized]| {
        assert_eq!(answers[0].to_string(), "jit_one+0x4");
        assert_eq!(answers[0].dso().name(), format!("/tmp/perf-{pid}.map"));
        assert_eq!(answers[0].dso().kind(), DsoKind::PerfMap);
        assert_eq!(answers[1].to_string(), "LazyCompile:~fib /app/x.js:3+0x20");
        assert_eq!(answers[2].to_string(), "[unknown]");
        assert_eq!(answers[2].dso().name(), "//anon");
        assert_eq!(answers[3].to_string(), "jit_one+0x8");
    };
    let mut s = symbolizer();
    check(&resolve(&mut s, &reqs));
    noted(&mut s, 1, &["1 of its 3 lines"]);
    r.stop();
    // The map outlives the process.
    check(&resolve(&mut symbolizer(), &reqs));

    // A map owned by someone else than root, perfwatch's user or the process's owner is not read.
    let c = std::ffi::CString::new(map_path.as_os_str().as_bytes()).unwrap();
    assert_eq!(unsafe { libc::chown(c.as_ptr(), 4242, 4242) }, 0);
    let mut s = symbolizer();
    assert!(!s.resolve_one(&reqs[0]).is_known());
    let notes = s.take_notes();
    assert!(notes[0].message.contains("owned by uid 4242"), "{notes:?}");

    // Neither is a symlink (in /tmp anyone can plant one), nor a FIFO (no hang either).
    std::fs::remove_file(&map_path).unwrap();
    let target = dir.path().join("target.map");
    std::fs::write(&target, format!("{code:x} 40 planted\n")).unwrap();
    std::os::unix::fs::symlink(&target, &map_path).unwrap();
    assert!(!symbolizer().resolve_one(&reqs[0]).is_known());
    std::fs::remove_file(&map_path).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let t = std::time::Instant::now();
    let mut s = symbolizer();
    assert!(!s.resolve_one(&reqs[0]).is_known());
    assert!(t.elapsed() < std::time::Duration::from_secs(1));
    assert!(s.take_notes()[0].message.contains("FIFO"));
}

#[test]
fn a_growing_perf_map_is_reread() {
    let dir = tempfile::tempdir().unwrap();
    // Any live process of ours will do as the JIT: the map is what matters.
    let r = sleeper(dir.path());
    let pid = r.pid();
    let path = PathBuf::from(format!("/tmp/perf-{pid}.map"));
    std::fs::write(&path, "10000 10 first\n").unwrap();
    let mut s = symbolizer();
    assert_eq!(
        s.resolve_one(&Request::unmapped(pid, 0x10004)).to_string(),
        "first+0x4"
    );
    assert!(!s.resolve_one(&Request::unmapped(pid, 0x20004)).is_known());
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut f, b"20000 10 second\n").unwrap();
    // Looked at again at most once a second.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(
        s.resolve_one(&Request::unmapped(pid, 0x20004)).to_string(),
        "second+0x4"
    );
    assert_eq!(
        s.resolve_one(&Request::unmapped(pid, 0x10004)).to_string(),
        "first+0x4"
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn kernel_addresses_from_kallsyms_name_kernel_functions() {
    let text = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let mut picked = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() == 3
            && matches!(f[1], "T" | "t")
            && ["vfs_read", "vfs_write", "do_sys_openat2", "schedule"].contains(&f[2])
        {
            picked.push((u64::from_str_radix(f[0], 16).unwrap(), f[2].to_string()));
        }
    }
    if picked.iter().all(|(a, _)| *a == 0) {
        common::refuse(
            test_name!(),
            "/proc/kallsyms hides its addresses here (not root, or kernel.kptr_restrict)",
        );
        return;
    }
    assert!(picked.len() >= 3, "{picked:?}");
    let mut s = symbolizer();
    for (addr, name) in &picked {
        let got = s.resolve_one(&Request::kernel(addr + 1));
        assert_eq!(got.to_string(), format!("{name}+0x1"));
        assert_eq!(got.dso().name(), "[kernel.kallsyms]");
        assert!(got.is_kernel());
    }
    // A module-owned symbol, where there is one, names its module.
    if let Some(line) = text
        .lines()
        .find(|l| l.contains("\t[") && l.split(' ').nth(1).is_some_and(|t| t == "t" || t == "T"))
    {
        let addr = u64::from_str_radix(line.split(' ').next().unwrap(), 16).unwrap();
        let module = line.rsplit('\t').next().unwrap();
        let got = s.resolve_one(&Request::kernel(addr));
        assert!(got.is_known(), "{line}");
        assert_eq!(got.dso().name(), module);
        assert_eq!(got.dso().kind(), DsoKind::KernelModule);
        assert!(got.is_kernel());
    }
}

#[test]
fn kallsyms_full_of_zeros_says_so_once_and_keeps_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Symbolizer::new(crafted_kernel(
        dir.path(),
        "0000000000000000 T _stext\n0000000000000000 T vfs_read\n0000000000000000 t x\t[ext4]\n",
    ));
    for a in [0xffffffff81000000u64, 0xffffffff81234567] {
        let got = s.resolve_one(&Request::kernel(a));
        assert_eq!(got.to_string(), "[unknown]");
        assert_eq!(got.dso().name(), "[kernel.kallsyms]");
    }
    noted(&mut s, 1, &["hidden", "kptr_restrict"]);
}

#[test]
fn the_vdso_resolves_from_perfwatchs_own_copy_while_it_can_be_compared() {
    let dir = tempfile::tempdir().unwrap();
    let r = sleeper(dir.path());
    let pid = r.pid();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let Some(line) = maps.lines().find(|l| l.ends_with("[vdso]")) else {
        skip!("no vDSO in this process's maps");
    };
    let start = u64::from_str_radix(line.split('-').next().unwrap(), 16).unwrap();
    let m = mapping_of(pid, start);
    assert_eq!(m.file.path(), b"[vdso]");
    let reqs: Vec<Request> = (0..m.len)
        .step_by(4)
        .map(|o| Request::user(pid, start + o, &m))
        .collect();
    let mut s = symbolizer();
    let answers = resolve(&mut s, &reqs);
    let named: Vec<&str> = answers.iter().filter_map(|a| a.name()).collect();
    assert!(
        named.iter().any(|n| n.contains("clock_gettime")),
        "{:?}",
        named.iter().collect::<std::collections::BTreeSet<_>>()
    );
    assert!(answers.iter().all(|a| a.dso().name() == "[vdso]"));
    r.stop();
    // Gone: nothing to compare with, so unknown, said once.
    let mut s = symbolizer();
    let answers = resolve(&mut s, &reqs);
    assert!(
        answers
            .iter()
            .all(|a| !a.is_known() && a.dso().name() == "[vdso]")
    );
    assert_eq!(s.take_notes().len(), 1);
}

#[test]
fn corrupt_truncated_and_odd_files_in_a_mapping_are_unknown_once_and_never_hang() {
    let dir = tempfile::tempdir().unwrap();
    let bin = spin(dir.path(), "spin", &["-O2"]);
    let good = std::fs::read(&bin).unwrap();
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let mut cases: Vec<(PathBuf, &str)> = vec![
        (fifo, "FIFO"),
        (PathBuf::from("/dev/zero"), ""),
        (dir.path().to_path_buf(), "directory"),
        (dir.path().join("missing"), "gone"),
    ];
    let mut write = |name: &str, bytes: &[u8], why: &'static str| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        cases.push((p, why));
    };
    write("empty", b"", "not an ELF file");
    write("text", b"#!/bin/sh\n", "not an ELF file");
    write("truncated", &good[..good.len().min(3000)], "");
    let mut corrupt = good.clone();
    // Section headers that point past the end of the file.
    corrupt[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
    write("corrupt", &corrupt, "corrupt");
    let mut zeros = good.clone();
    for b in zeros.iter_mut().skip(0x40) {
        *b = 0;
    }
    write("zeroed", &zeros, "");
    // A sparse 8 GiB file whose one section claims a 4 GiB symbol table.
    let sparse = dir.path().join("sparse");
    {
        let f = std::fs::File::create(&sparse).unwrap();
        f.set_len(8 << 30).unwrap();
        let mut h = good[..0x40].to_vec();
        h[0x28..0x30].copy_from_slice(&0x1000u64.to_le_bytes()); // e_shoff
        h[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes()); // e_shentsize
        h[0x3c..0x3e].copy_from_slice(&2u16.to_le_bytes()); // e_shnum
        h[0x3e..0x40].copy_from_slice(&0u16.to_le_bytes()); // e_shstrndx
        let mut sh = vec![0u8; 128];
        sh[64 + 4..64 + 8].copy_from_slice(&2u32.to_le_bytes()); // SHT_SYMTAB
        sh[64 + 24..64 + 32].copy_from_slice(&0x2000u64.to_le_bytes()); // sh_offset
        sh[64 + 32..64 + 40].copy_from_slice(&(4u64 << 30).to_le_bytes()); // sh_size
        sh[64 + 56..64 + 64].copy_from_slice(&24u64.to_le_bytes()); // sh_entsize
        std::os::unix::fs::FileExt::write_all_at(&f, &h, 0).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, &sh, 0x1000).unwrap();
    }
    cases.push((sparse, "too large"));

    let t = std::time::Instant::now();
    for (path, why) in &cases {
        let m = Mapping {
            start: 0x5555_0000_0000,
            len: 0x10000,
            pgoff: 0,
            file: MappedFile::new(path.as_os_str().as_bytes(), FileIdentity::Unknown),
        };
        let mut s = symbolizer();
        let reqs: Vec<Request> = (0..50)
            .map(|i| Request::user(0, 0x5555_0000_1000 + i * 16, &m))
            .collect();
        let answers = resolve(&mut s, &reqs);
        assert!(answers.iter().all(|a| !a.is_known()), "{path:?}");
        let notes = s.take_notes();
        assert!(notes.len() <= 1, "{path:?}: {notes:?}");
        if !why.is_empty() {
            assert!(
                notes.iter().any(|n| n.message.contains(why)),
                "{path:?}: {notes:?}"
            );
        }
    }
    assert!(
        t.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn each_unique_address_is_resolved_once_and_the_table_budget_holds() {
    let dir = tempfile::tempdir().unwrap();
    let bins: Vec<PathBuf> = (0..4)
        .map(|i| spin(dir.path(), &format!("spin{i}"), &["-O2", "-g"]))
        .collect();
    let running: Vec<Running> = bins.iter().map(|b| Running::start(b, &[])).collect();
    let reqs: Vec<Request> = running
        .iter()
        .flat_map(|r| {
            let maps: Vec<Mapping> = r.addrs.iter().map(|&a| mapping_of(r.pid(), a)).collect();
            requests(r, &maps, 4)
        })
        .collect();
    let mut s = symbolizer();
    let first = resolve(&mut s, &reqs);
    let st = s.stats();
    assert_eq!(st.cache_hits, 0);
    assert_eq!(st.loads, 4);
    let again = resolve(&mut s, &reqs);
    assert_eq!(s.stats().cache_hits, reqs.len() as u64);
    assert_eq!(s.stats().loads, 4);
    for (a, b) in first.iter().zip(&again) {
        assert!(Arc::ptr_eq(a.symbol(), b.symbol()));
    }
    // A budget that holds one binary's table at a time: evictions, the same answers.
    let one = st.table_bytes / 4 + 4096;
    let mut s = Symbolizer::new(Config {
        debug_dirs: vec![],
        table_budget: one,
        result_entries: 4,
        ..Config::default()
    });
    for _ in 0..3 {
        let answers = resolve(&mut s, &reqs);
        assert!(s.stats().table_bytes <= one, "{:?}", s.stats());
        for (a, b) in answers.iter().zip(&first) {
            assert_eq!(a.to_string(), b.to_string());
            assert_eq!(a.symbol().key(), b.symbol().key());
        }
    }
    assert!(s.stats().evictions > 0);
    // A budget too small for any binary: unknown, said once per binary.
    let mut s = Symbolizer::new(Config {
        debug_dirs: vec![],
        table_budget: 64,
        ..Config::default()
    });
    let answers = resolve(&mut s, &reqs);
    assert!(answers.iter().all(|a| !a.is_known()));
    noted(&mut s, 4, &["too large"]);
}

#[test]
fn the_kernel_table_stays_when_a_binary_does_not_fit_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (0..2000)
        .map(|i| {
            format!(
                "{:016x} T kernel_fn_{i}\n",
                0xffffffff81000000u64 + i * 0x100
            )
        })
        .collect();
    let bin = spin(dir.path(), "spin", &["-O2", "-g"]);
    let r = Running::start(&bin, &[]);
    let m = mapping_of(r.pid(), r.addrs[0]);
    let kernel_fn_1 = || Request::kernel(0xffffffff81000104);
    // Reads wait as long as a loaded machine needs: a read cut at the live view's deadline
    // would say "timed out", not "too large".
    let mut s = Symbolizer::new(Config {
        debug_dirs: vec![],
        preload_kernel: true,
        load_timeout: std::time::Duration::from_secs(60),
        ..crafted_kernel(dir.path(), &text)
    });
    // The kernel's size once it is in: it is read in the background, and a kernel address
    // waits for it (right after new(), the read may not have started yet).
    assert_eq!(s.resolve_one(&kernel_fn_1()).to_string(), "kernel_fn_1+0x4");
    let kernel_bytes = s.stats().table_bytes;
    assert!(kernel_bytes > 40_000, "{kernel_bytes}");
    // Room for the kernel and a few hundred bytes: the binary does not fit. The kernel is
    // in (a kernel address waits for it) before the binary is asked for, or its size could
    // not be known yet.
    let mut s = Symbolizer::new(Config {
        table_budget: kernel_bytes + 300,
        ..s.config().clone()
    });
    assert_eq!(s.resolve_one(&kernel_fn_1()).to_string(), "kernel_fn_1+0x4");
    let got = s.resolve_one(&Request::user(r.pid(), r.addrs[0], &m));
    assert!(!got.is_known());
    assert!(s.take_notes()[0].message.contains("too large"));
    let loads = s.stats().loads;
    assert_eq!(s.resolve_one(&kernel_fn_1()).to_string(), "kernel_fn_1+0x4");
    assert_eq!(s.stats().loads, loads, "the kernel was read again");
    assert!(s.stats().table_bytes <= kernel_bytes + 300);
}

// ---- perfwatch's own samples, resolved from what its records said ----

fn num(v: &serde_json::Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_str()
            .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
    })
}

/// A sample as perfwatch named it, and as this test's own symbolizer names it.
struct Seen {
    pid: u32,
    comm: String,
    /// perfwatch's `sym` (None: `null`, unknown) and `dso`.
    sym: Option<String>,
    dso: Option<String>,
    /// The test's answer, from the MMAP2 records perfwatch printed.
    ours: Symbolized,
}

/// Run `perfwatch --json -a -e cpu-clock -F FREQ -- COMMAND...`, take the names it gave
/// every sample, and resolve each sample again here from the MMAP2 records it printed (a
/// minimal process model: per pid, the latest mapping that holds the address), after
/// everything has exited, with no deadline. Where this test can name a sample, perfwatch
/// must have given it the same name or none: live, a binary's first read that outlasts its
/// deadline, or a record that reaches the ordering window late, leaves a sample [unknown],
/// which the loaded machines tests run on can cause for any process. For the processes
/// named `workload` (the test's own, whose binaries are small), the names must be the same.
///
/// Two of these run at once, system-wide, each sampling the other: a long workload is
/// watched at 1 kHz, not more.
fn watch_and_resolve(freq: &str, command: &[&str], workload: &str) -> Vec<Seen> {
    let args = [
        &["--json", "-a", "-e", "cpu-clock", "-F", freq, "--"],
        command,
    ]
    .concat();
    let out = Command::new(assert_cmd::cargo::cargo_bin("perfwatch"))
        .args(&args)
        .stderr(Stdio::inherit())
        .output_in_time()
        .unwrap();
    assert!(out.status.success(), "perfwatch {args:?}: {:?}", out.status);
    let mut maps: std::collections::HashMap<u32, Vec<Mapping>> = Default::default();
    let mut comms: std::collections::HashMap<u32, String> = Default::default();
    let mut reqs = Vec::new();
    let mut pids = Vec::new();
    let mut named = Vec::new();
    for line in out.stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let v: serde_json::Value = serde_json::from_slice(line).unwrap();
        match v["type"].as_str() {
            Some("comm") => {
                comms.insert(
                    v["pid"].as_i64().unwrap() as u32,
                    v["comm"].as_str().unwrap().into(),
                );
            }
            Some("mmap") => {
                let id = FileIdentity::from_mmap2(
                    num(&v["maj"]).unwrap_or(0) as u32,
                    num(&v["min"]).unwrap_or(0) as u32,
                    num(&v["ino"]).unwrap_or(0),
                    num(&v["ino_generation"]).unwrap_or(0),
                );
                let m = Mapping {
                    start: num(&v["start"]).unwrap(),
                    len: num(&v["len"]).unwrap(),
                    pgoff: num(&v["pgoff"]).unwrap(),
                    file: MappedFile::new(v["filename"].as_str().unwrap().as_bytes(), id),
                };
                maps.entry(v["pid"].as_i64().unwrap() as u32)
                    .or_default()
                    .push(m);
            }
            Some("sample") => {
                // -1 when the kernel could not tell (a task in the middle of exiting).
                let pid = v["sample_pid"].as_i64().unwrap() as u32;
                let ip = num(&v["sample_ip"]).unwrap();
                let r = if ip >= 0xffff_8000_0000_0000 {
                    Request::kernel(ip)
                } else {
                    match maps
                        .get(&pid)
                        .and_then(|ms| ms.iter().rev().find(|m| m.contains(ip)))
                    {
                        Some(m) => Request::user(pid, ip, m),
                        None => Request::unmapped(pid, ip),
                    }
                };
                reqs.push(r);
                pids.push(pid);
                assert!(v.get("sym").is_some(), "a sample without a name: {v}");
                named.push((
                    v["sym"].as_str().map(String::from),
                    v["dso"].as_str().map(String::from),
                ));
            }
            _ => {}
        }
    }
    let mut s = Symbolizer::default();
    let answers = resolve(&mut s, &reqs);
    let seen: Vec<Seen> = pids
        .into_iter()
        .zip(answers)
        .zip(named)
        .map(|((pid, ours), (sym, dso))| Seen {
            pid,
            comm: comms.get(&pid).cloned().unwrap_or_default(),
            sym,
            dso,
            ours,
        })
        .collect();
    for x in seen.iter().filter(|x| x.ours.is_known()) {
        if x.sym.is_none() && x.comm != workload {
            continue;
        }
        assert_eq!(
            (x.sym.as_deref(), x.dso.as_deref()),
            (x.ours.name(), Some(x.ours.dso().name())),
            "perfwatch named a sample of {} ({}) otherwise",
            x.pid,
            x.comm
        );
    }
    seen
}

#[test]
fn samples_of_short_lived_processes_name_their_functions_after_they_exited() {
    require_perf!();
    // A name of its own: other tests in this binary run programs called spin at the same
    // time, and their temporary directories (binaries included) are gone when this one
    // resolves what it saw system-wide.
    let dir = tempfile::tempdir().unwrap();
    let bin = spin(dir.path(), "pwshort", &["-O2", "-fno-omit-frame-pointer"]);
    // Six processes of about 50 ms each, watched system-wide.
    let script = format!(
        "for i in 1 2 3 4 5 6; do {} 6000 >/dev/null & done; wait",
        bin.display()
    );
    let got = watch_and_resolve("4000", &["sh", "-c", &script], "pwshort");
    // perfwatch's own names, for the user-space samples of the spin processes.
    let spin: Vec<&Seen> = got
        .iter()
        .filter(|x| x.comm == "pwshort" && !x.ours.is_kernel())
        .collect();
    let pids: std::collections::BTreeSet<u32> = got
        .iter()
        .filter(|x| x.comm == "pwshort")
        .map(|x| x.pid)
        .collect();
    assert!(
        pids.len() >= 4,
        "samples from {} spin processes",
        pids.len()
    );
    assert!(spin.len() >= 50, "{} user samples of spin", spin.len());
    let show = |v: &[&Seen]| {
        v.iter()
            .take(20)
            .map(|x| format!("{:?} in {:?}", x.sym, x.dso))
            .collect::<Vec<_>>()
    };
    // Every sample placed in its binary, from the mappings of a process that has exited...
    let unplaced: Vec<&Seen> = spin.iter().copied().filter(|x| x.dso.is_none()).collect();
    assert!(
        unplaced.len() * 50 <= spin.len(),
        "{} of {} in no binary: {:?}",
        unplaced.len(),
        spin.len(),
        show(&unplaced)
    );
    // ... every sample in spin's own binary named (a PLT stub has no symbol: a few may be
    // unknown). Only there: whether the dynamic linker's and libc's samples have names
    // depends on which debug packages the machine has (libc6-dbg), not on perfwatch...
    let in_spin: Vec<&Seen> = spin
        .iter()
        .copied()
        .filter(|x| x.dso.as_deref() == bin.to_str())
        .collect();
    let unknown: Vec<&Seen> = in_spin
        .iter()
        .copied()
        .filter(|x| x.sym.is_none())
        .collect();
    assert!(
        unknown.len() * 50 <= in_spin.len(),
        "{} of {} in spin unknown: {:?}",
        unknown.len(),
        in_spin.len(),
        show(&unknown)
    );
    // ... and most of them (the rest is the dynamic linker starting them) after the
    // functions spin spends its time in, in spin.
    let ours = spin
        .iter()
        .filter(|x| {
            x.dso.as_deref() == bin.to_str() && NAMES.contains(&x.sym.as_deref().unwrap_or(""))
        })
        .count();
    assert!(
        ours * 2 >= spin.len(),
        "{ours} of {} samples named after spin's functions: {:?}",
        spin.len(),
        show(&spin)
    );
}

#[test]
fn kernel_samples_of_a_syscall_heavy_command_name_kernel_functions() {
    require_perf!();
    // About a second of system calls, hundreds of kernel samples at 1 kHz (a tenth of it
    // gave about 60, which a loaded machine could take below the 50 asked for).
    let got = watch_and_resolve(
        "1000",
        &[
            "dd",
            "if=/dev/zero",
            "of=/dev/null",
            "bs=1",
            "count=4000000",
        ],
        "dd",
    );
    let kernel: Vec<&Seen> = got
        .iter()
        .filter(|x| x.comm == "dd" && x.ours.is_kernel())
        .collect();
    if kernel.is_empty() {
        let hidden = std::fs::read_to_string("/proc/kallsyms")
            .is_ok_and(|t| t.starts_with("0000000000000000"));
        assert!(hidden, "no kernel samples of dd");
        common::refuse(
            test_name!(),
            "/proc/kallsyms hides its addresses here: kernel samples cannot be symbolized",
        );
        return;
    }
    // perfwatch reads kallsyms in the background from its start; samples that come before
    // the read is in, past its load deadline (seconds, on a loaded machine), are [unknown] by
    // design. Once the table is in, every kernel sample is named: the samples are in time
    // order, from the first one named on.
    let is_named = |x: &Seen| x.sym.is_some() && x.dso.as_deref() == Some("[kernel.kallsyms]");
    let first = kernel
        .iter()
        .position(|x| is_named(x))
        .unwrap_or(kernel.len());
    let after = &kernel[first..];
    println!(
        "{} kernel samples of dd, {first} before kallsyms was in",
        kernel.len()
    );
    assert!(after.len() >= 50, "{} kernel samples named", after.len());
    let named = after.iter().filter(|x| is_named(x)).count();
    assert!(
        named * 100 >= after.len() * 95,
        "{named} of {} named",
        after.len()
    );
    assert!(
        kernel.iter().any(|x| x
            .sym
            .as_deref()
            .is_some_and(|n| n.contains("read") || n.contains("write"))),
        "{:?}",
        kernel.iter().take(30).map(|x| &x.sym).collect::<Vec<_>>()
    );
}

#[test]
fn perfwatch_names_programs_functions_a_stripped_copys_binary_and_a_jits_code() {
    require_perf!();
    const JIT_C: &str = r#"
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
int main(void) {
    unsigned char *code = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    code[0] = 0x90; code[1] = 0xeb; code[2] = 0xfd;   /* nop; jmp back to the nop */
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
    FILE *f = fopen(path, "w");
    fprintf(f, "%lx 10 pwjit_spin\n", (unsigned long)code);
    fclose(f);
    alarm(1);   /* the loop never returns: SIGALRM ends it */
    ((void (*)(void))code)();
    return 0;
}
"#;
    let dir = tempfile::tempdir().unwrap();
    let fp = spin(dir.path(), "pwsym_fp", &["-O2", "-fno-omit-frame-pointer"]);
    let nofp = spin(dir.path(), "pwsym_nofp", &["-O2", "-fomit-frame-pointer"]);
    let stripped = spin(dir.path(), "pwsym_strip", &["-O2"]);
    run(Command::new("strip").arg(&stripped));
    let jit = cc(dir.path(), "pwjit", JIT_C, &["-O1"]);
    let script = format!(
        "{} 60000 >/dev/null & {} 60000 >/dev/null & {} 60000 >/dev/null & {} & wait",
        fp.display(),
        nofp.display(),
        stripped.display(),
        jit.display()
    );
    let out = Command::new(assert_cmd::cargo::cargo_bin("perfwatch"))
        .args([
            "--plain",
            "-e",
            "cpu-clock",
            "-F",
            "4000",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stderr(Stdio::inherit())
        .output_in_time()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // The perf maps the JIT left.
    let mut comms = std::collections::HashMap::new();
    for line in text.lines().filter(|l| l.contains("{ type: comm,")) {
        let pid: u32 = line
            .split("{ type: comm, pid: ")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let comm = line
            .split(", comm: ")
            .nth(1)
            .unwrap()
            .trim_end_matches(" }");
        comms.insert(pid, comm.to_string());
        if comm == "pwjit" {
            let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
        }
    }
    assert!(out.status.success(), "{:?}", out.status);
    let samples: Vec<(String, String, String)> = text
        .lines()
        .filter(|l| l.contains("{ type: sample,"))
        .map(|l| {
            common::plain_sample(l).unwrap_or_else(|| panic!("a sample without sym and dso: {l}"))
        })
        .map(|(pid, sym, dso)| (comms.get(&pid).cloned().unwrap_or_default(), sym, dso))
        .collect();
    let of = |comm: &str, bin: &str| -> Vec<&String> {
        samples
            .iter()
            .filter(|(c, _, d)| c == comm && d == bin)
            .map(|(_, s, _)| s)
            .collect()
    };
    let named = |s: &str| NAMES.iter().any(|n| s.starts_with(&format!("{n}+0x")));
    for bin in [&fp, &nofp] {
        let comm = bin.file_name().unwrap().to_str().unwrap();
        let syms = of(comm, bin.to_str().unwrap());
        assert!(
            syms.len() >= 50,
            "{} samples of {comm} in its binary",
            syms.len()
        );
        let ok = syms.iter().filter(|s| named(s)).count();
        assert!(
            ok * 10 >= syms.len() * 9,
            "{ok} of {} of {comm} named: {:?}",
            syms.len(),
            &syms[..syms.len().min(10)]
        );
    }
    let syms = of("pwsym_strip", stripped.to_str().unwrap());
    assert!(
        syms.len() >= 50,
        "{} samples of the stripped copy in its binary",
        syms.len()
    );
    assert!(syms.iter().all(|s| *s == "[unknown]"), "{:?}", &syms[..10]);
    let jit_pid = comms
        .iter()
        .find(|(_, c)| *c == "pwjit")
        .map(|(p, _)| *p)
        .expect("pwjit ran");
    let syms = of("pwjit", &format!("/tmp/perf-{jit_pid}.map"));
    assert!(
        syms.len() >= 50,
        "{} samples of the JIT's code named from its map",
        syms.len()
    );
    assert!(
        syms.iter().all(|s| s.starts_with("pwjit_spin+0x")),
        "{:?}",
        &syms[..10]
    );
}

/// `sh -c SCRIPT` in `dir`, as `uid` (and gid) when given, through setpriv.
fn sh_as(uid: Option<u32>, dir: &Path, script: &str) {
    let mut c = match uid {
        Some(u) => {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={u}"))
                .arg(format!("--regid={u}"))
                .args(["--clear-groups", "sh", "-c", script]);
            c
        }
        None => {
            let mut c = Command::new("sh");
            c.args(["-c", script]);
            c
        }
    };
    run(c.current_dir(dir).env("HOME", dir));
}

/// Issue 31: a user's stripped binary whose `.gnu_debuglink` (beside it, or in its `.debug/`)
/// is a link to a root-only ELF of the same build id is never named with that file's
/// functions; the user's own debug file, a regular file of theirs, still names it.
#[test]
fn a_users_debug_link_to_a_root_only_file_is_never_followed() {
    require_root!("to build the attack as another user with setpriv");
    const USER: u32 = 1001;
    const ID: &str = "-Wl,--build-id=0x5eedf00d5eedf00d5eedf00d5eedf00d5eedf00d";
    // Root's binary: private, with a symbol table of its own names.
    let private = tempfile::tempdir().unwrap();
    let secret_src = SPIN_C
        .replace("hot_a", "root_secret_a")
        .replace("hot_b", "root_secret_b")
        .replace("local_fn", "root_local");
    let secret = cc(private.path(), "secret", &secret_src, &["-O2", ID]);
    // The user's: the same build id, stripped, with a debug link.
    let home = tempfile::tempdir().unwrap();
    let prog = spin(home.path(), "prog", &["-O2", ID]);
    spin(home.path(), "prog.full", &["-O2", ID]);
    run(Command::new("strip").arg("--strip-all").arg(&prog));
    run(Command::new("chown")
        .arg("-R")
        .arg(format!("{USER}:{USER}"))
        .arg(home.path()));
    let secret = secret.to_str().unwrap();
    sh_as(
        Some(USER),
        home.path(),
        &format!(
            "cp prog prog.debug && objcopy --add-gnu-debuglink=prog.debug prog && rm prog.debug \
             && ln -s {secret} prog.debug && mkdir .debug && ln -s {secret} .debug/prog.debug"
        ),
    );
    let named = |s: &mut Symbolizer| {
        let r = Running::spawn(
            Command::new("setpriv")
                .arg(format!("--reuid={USER}"))
                .arg(format!("--regid={USER}"))
                .arg("--clear-groups")
                .arg(&prog),
        );
        let maps: Vec<Mapping> = r.addrs.iter().map(|&a| mapping_of(r.pid(), a)).collect();
        let answers = resolve(s, &requests(&r, &maps, 2));
        r.stop();
        answers
    };
    let answers = named(&mut symbolizer());
    assert!(
        answers.iter().all(|a| !a.is_known()),
        "named from a file the user cannot read: {answers:?}"
    );
    // Not through a hard link either (where protected_hardlinks is off, root's file could
    // be linked into the user's directory): a root-owned file there is not the user's.
    sh_as(None, home.path(), "rm -f prog.debug .debug/prog.debug");
    if std::fs::hard_link(secret, home.path().join("prog.debug")).is_ok() {
        let answers = named(&mut symbolizer());
        assert!(answers.iter().all(|a| !a.is_known()), "{answers:?}");
        std::fs::remove_file(home.path().join("prog.debug")).unwrap();
    }
    // The user's own debug file, a regular file of theirs: used.
    sh_as(
        Some(USER),
        home.path(),
        "objcopy --only-keep-debug prog.full prog.debug",
    );
    let answers = named(&mut symbolizer());
    for (i, want) in NAMES.iter().enumerate() {
        assert_eq!(answers[2 * i].name(), Some(*want), "{answers:?}");
    }
}

/// Issue 27: a stripped binary with MiniDebugInfo (built the way Fedora's find-debuginfo
/// does: the functions `.dynsym` lacks, in a `.symtab`-only ELF, xz-compressed into
/// `.gnu_debugdata`) is named from it; one of another build, or one that decompresses to
/// more than the symbol budget (a decompression bomb), is not used, and that is said.
#[test]
fn mini_debuginfo_names_a_stripped_binary_and_a_bomb_or_another_build_is_refused() {
    if !common::installed("xz") {
        skip!("xz is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = spin(dir.path(), "mini", &["-O2", "-g"]);
    let other = cc(
        dir.path(),
        "other",
        &SPIN_C.replace("2000", "3000"),
        &["-O2", "-g"],
    );
    // gdb's manual, "MiniDebugInfo", and Fedora's find-debuginfo.
    let minify = |b: &str| {
        format!(
            "nm -D {b} --format=posix --defined-only | awk '{{print $1}}' | sort > {b}.dyn && \
             nm {b} --format=posix --defined-only | awk '$2==\"T\"||$2==\"t\"||$2==\"D\"{{print $1}}' | sort > {b}.funcs && \
             comm -13 {b}.dyn {b}.funcs > {b}.keep && \
             objcopy --only-keep-debug {b} {b}.dbg && \
             objcopy -S --remove-section .gdb_index --remove-section .comment --keep-symbols={b}.keep {b}.dbg {b}.mini && \
             xz -f {b}.mini"
        )
    };
    sh_as(None, dir.path(), &minify("mini"));
    sh_as(None, dir.path(), &minify("other"));
    sh_as(
        None,
        dir.path(),
        "strip --strip-all -R .comment mini && cp mini bomb && cp mini wrong && \
         objcopy --add-section .gnu_debugdata=mini.mini.xz mini && \
         objcopy --add-section .gnu_debugdata=other.mini.xz wrong && \
         head -c 100000000 /dev/zero | xz -9 > zeros.xz && \
         objcopy --add-section .gnu_debugdata=zeros.xz bomb",
    );
    drop(other);
    let resolve_bin = |name: &str, budget: usize| {
        let bin = dir.path().join(name);
        let r = Running::start(&bin, &[]);
        let maps: Vec<Mapping> = r.addrs.iter().map(|&a| mapping_of(r.pid(), a)).collect();
        let mut s = Symbolizer::new(Config {
            debug_dirs: vec![],
            table_budget: budget,
            ..Config::default()
        });
        let answers = resolve(&mut s, &requests(&r, &maps, 2));
        r.stop();
        (answers, s.take_notes())
    };
    let (answers, notes) = resolve_bin("mini", 32 << 20);
    assert_named(&answers, &bin, 2);
    assert!(notes.is_empty(), "{notes:?}");
    let (answers, notes) = resolve_bin("wrong", 32 << 20);
    assert!(answers.iter().all(|a| !a.is_known()), "{answers:?}");
    assert!(
        notes.iter().any(|n| n.message.contains("another build")),
        "{notes:?}"
    );
    let t0 = std::time::Instant::now();
    let (answers, notes) = resolve_bin("bomb", 4 << 20);
    assert!(answers.iter().all(|a| !a.is_known()), "{answers:?}");
    assert!(
        notes
            .iter()
            .any(|n| n.message.contains("decompresses to more than")),
        "{notes:?}"
    );
    assert!(t0.elapsed() < std::time::Duration::from_secs(30));
}

/// Issue 27: a debug file at the binary's build-id path that is of another build is not
/// used (a stale debug package, or a planted file).
#[test]
fn a_debug_file_of_another_build_at_the_build_id_path_is_not_used() {
    let dir = tempfile::tempdir().unwrap();
    let bin = spin(dir.path(), "spin", &["-O2", "-g"]);
    let other = cc(
        dir.path(),
        "other",
        &SPIN_C.replace("2000", "3000"),
        &["-O2", "-g"],
    );
    let id = {
        let out = Command::new("readelf")
            .arg("-n")
            .arg(&bin)
            .output_in_time()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
            .expect("a build id")
    };
    let at = dir
        .path()
        .join("debug/.build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]));
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    let right = dir.path().join("spin.dbg");
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&bin)
        .arg(&right));
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&other)
        .arg(&at));
    run(Command::new("strip").arg("--strip-all").arg(&bin));
    let r = Running::start(&bin, &[]);
    let maps: Vec<Mapping> = r.addrs.iter().map(|&a| mapping_of(r.pid(), a)).collect();
    let reqs = requests(&r, &maps, 2);
    let symbolizer = || {
        Symbolizer::new(Config {
            debug_dirs: vec![dir.path().join("debug")],
            ..Config::default()
        })
    };
    let answers = resolve(&mut symbolizer(), &reqs);
    assert!(answers.iter().all(|a| !a.is_known()), "{answers:?}");
    // The right one at the same place is used.
    std::fs::copy(&right, &at).unwrap();
    assert_named(&resolve(&mut symbolizer(), &reqs), &bin, 2);
}

#[test]
fn a_binary_read_ahead_at_its_mapping_names_its_samples_without_a_second_read() {
    let dir = tempfile::tempdir().unwrap();
    let bin = spin(dir.path(), "spin", &["-O2"]);
    let r = Running::start(&bin, &[]);
    let m = mapping_of(r.pid(), r.addrs[0]);
    let mut s = symbolizer();
    s.prefetch(r.pid(), &m);
    assert_eq!(s.stats().loads, 1, "the read started at once");
    // Let the process go: the read started while it was there.
    let (pid, hot_a) = (r.pid(), r.addrs[0]);
    drop(r);
    let reqs: Vec<Request> = vec![Request::user(pid, hot_a, &m)];
    let t0 = std::time::Instant::now();
    let got = loop {
        let a = resolve(&mut s, &reqs);
        if a[0].is_known() || t0.elapsed() > std::time::Duration::from_secs(20) {
            break a;
        }
    };
    assert_eq!(got[0].to_string(), "hot_a+0x0");
    assert_eq!(got[0].dso().name(), bin.to_str().unwrap());
    assert_eq!(s.stats().loads, 1, "read again");
    // Prefetching it again reads nothing.
    s.prefetch(0, &m);
    assert_eq!(s.stats().loads, 1);
}
