//! `perfwatch-stress`: a load generator for measuring perfwatch (and the tools it is compared
//! with) on a known load.
//!
//! Each mode makes one kind of kernel side-band record (or, for `spin`, sampling load), a given
//! number of times or for a given time, at a target rate or as fast as it goes. At the end it
//! prints, as one JSON object on stdout, what it did: counts, the pids/tids it created and the
//! CLOCK_MONOTONIC interval it ran in (the clock perfwatch stamps records with), so that a
//! harness can check that a monitor saw every one of them.

use std::ffi::CString;
use std::fmt::Write as _;
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};

const AFTER_HELP: &str = "\
OUTPUT:
  One JSON object on stdout (or --output FILE) when done:
  {\"tool\":\"perfwatch-stress\",\"mode\":\"fork\",\"pid\":1234,\"done\":1000,\"errors\":0,
   \"elapsed_s\":0.21,\"start_ns\":...,\"end_ns\":...,\"pids\":[...],...}
  start_ns/end_ns are CLOCK_MONOTONIC, the clock perfwatch's record times use.

EXAMPLES:
  perfwatch-stress fork --count 20000            fork + _exit, as fast as it goes
  perfwatch-stress exec --duration 2 --rate 500  fork + exec of /bin/true, 500 per second
  perfwatch-stress spin --duration 5             one busy thread pinned to each online CPU";

/// Generate a known load of forks, execs, threads, mmaps or busy CPUs, and say what was done.
#[derive(Parser, Debug)]
#[command(name = "perfwatch-stress", version, after_help = AFTER_HELP, max_term_width = 100)]
struct Args {
    /// What to do: fork (fork + immediate _exit), exec (fork + exec of --program), threads
    /// (spawn + join), mmap (map and unmap --file executable, which makes an MMAP record),
    /// spin (one busy thread pinned to each CPU; count = 1 ms busy slices per CPU), sleepers
    /// (count children that sleep until --hold ends, then are killed and reaped).
    #[arg(value_enum)]
    mode: Mode,

    /// Do this many operations (per CPU for spin) [default: 1000 if no --duration].
    #[arg(short = 'n', long, value_name = "N", conflicts_with = "duration")]
    count: Option<u64>,

    /// Run for this long instead: seconds, or a number with ms, s, m.
    #[arg(short = 'd', long, value_name = "TIME", value_parser = parse_duration)]
    duration: Option<Duration>,

    /// Target operations per second (per CPU for spin); 0 = as fast as possible.
    #[arg(short = 'r', long, value_name = "HZ", default_value_t = 0.0)]
    rate: f64,

    /// Program for exec mode (run with no arguments; it must exit 0).
    #[arg(long, value_name = "PATH", default_value = "/bin/true")]
    program: PathBuf,

    /// File for mmap mode [default: a temporary file of --size bytes, removed at the end].
    #[arg(long, value_name = "PATH")]
    file: Option<PathBuf>,

    /// Bytes to map in mmap mode.
    #[arg(long, value_name = "BYTES", default_value_t = 16384)]
    size: usize,

    /// CPUs for spin mode, as a list such as 0,2-3 [default: all online CPUs].
    #[arg(short = 'C', long, value_name = "LIST")]
    cpus: Option<String>,

    /// Wait this long before starting (lets a monitor settle); not part of elapsed_s.
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    delay: Option<Duration>,

    /// sleepers: how long the children stay once all are started ("ready" is said on
    /// stderr then).
    #[arg(long, value_name = "TIME", value_parser = parse_duration, default_value = "10")]
    hold: Duration,

    /// Write the JSON report here instead of stdout.
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Mode {
    Fork,
    Exec,
    Threads,
    Mmap,
    Spin,
    Sleepers,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Fork => "fork",
            Mode::Exec => "exec",
            Mode::Threads => "threads",
            Mode::Mmap => "mmap",
            Mode::Spin => "spin",
            Mode::Sleepers => "sleepers",
        }
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    perfwatch::cli::duration(s)
}

/// When to stop and how fast to go.
#[derive(Clone, Copy, Debug)]
struct Pace {
    count: Option<u64>,
    until: Option<Instant>,
    /// Interval between operations; zero = as fast as possible.
    interval: Duration,
    start: Instant,
}

impl Pace {
    fn new(args: &Args) -> Result<Pace> {
        if !(args.rate.is_finite() && args.rate >= 0.0) {
            bail!(
                "--rate '{}' must be a number of operations per second, or 0",
                args.rate
            );
        }
        let interval = if args.rate > 0.0 {
            Duration::try_from_secs_f64(1.0 / args.rate)
                .with_context(|| format!("--rate '{}' is too small", args.rate))?
        } else {
            Duration::ZERO
        };
        let start = Instant::now();
        Ok(Pace {
            count: match (args.count, args.duration) {
                (Some(n), _) => Some(n),
                (None, None) => Some(1000),
                (None, Some(_)) => None,
            },
            until: args.duration.map(|d| start + d),
            interval,
            start,
        })
    }

    /// Wait until operation `i` is due; false when the run is over.
    fn next(&self, i: u64) -> bool {
        if self.count.is_some_and(|n| i >= n) {
            return false;
        }
        let now = Instant::now();
        if self.until.is_some_and(|u| now >= u) {
            return false;
        }
        if !self.interval.is_zero() {
            let due = self.start + self.interval.saturating_mul(i.min(u32::MAX as u64) as u32);
            if due > now {
                let due = self.until.map_or(due, |u| due.min(u));
                std::thread::sleep(due - now);
                if self.until.is_some_and(|u| Instant::now() >= u) {
                    return false;
                }
            }
        }
        true
    }
}

/// What a run did, written as JSON at the end.
#[derive(Debug, Default)]
struct Report {
    done: u64,
    errors: u64,
    first_error: Option<String>,
    pids: Vec<i32>,
    tids: Vec<i32>,
    /// Extra fields, already rendered as `"key":value` pairs.
    extra: Vec<String>,
}

impl Report {
    fn error(&mut self, what: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(what);
        }
    }
}

fn monotonic_ns() -> u64 {
    perfwatch::clock::clock_ns(libc::CLOCK_MONOTONIC)
}

fn gettid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Reap `pid` and check that it exited with status 0.
fn reap(pid: libc::pid_t, what: &str, report: &mut Report) {
    let mut status = 0;
    loop {
        // SAFETY: pid is our child; status is a valid out pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        report.error(format!("waitpid({pid}): {e}"));
        return;
    }
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        report.done += 1;
    } else if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 127 {
        report.error(format!("{what}: could not exec (child {pid} exited 127)"));
    } else {
        report.error(format!(
            "{what}: child {pid} ended with wait status {status:#x}"
        ));
    }
}

/// Fork, returning the child's pid; retries briefly on EAGAIN (pid or process limits).
fn fork_retrying(report: &mut Report) -> Option<libc::pid_t> {
    for attempt in 0..100 {
        // SAFETY: the child only calls async-signal-safe functions (execv, _exit).
        let pid = unsafe { libc::fork() };
        if pid >= 0 {
            return Some(pid);
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EAGAIN) || attempt == 99 {
            report.error(format!("fork: {e}"));
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    None
}

fn run_fork(pace: &Pace, report: &mut Report) {
    let mut i = 0;
    while pace.next(i) {
        i += 1;
        match fork_retrying(report) {
            Some(0) => unsafe { libc::_exit(0) },
            Some(pid) => {
                report.pids.push(pid);
                reap(pid, "fork", report);
            }
            None => break,
        }
    }
}

/// Many live processes at once: `count` children that sleep (killed with this process if it
/// dies first), held for `hold` once all are started, then killed and reaped. A monitor's
/// process model and its TUI see them all at once.
fn run_sleepers(pace: &Pace, hold: Duration, report: &mut Report) {
    let mut children = Vec::new();
    let mut i = 0;
    while pace.next(i) {
        i += 1;
        match fork_retrying(report) {
            Some(0) => {
                // SAFETY: the child calls only async-signal-safe functions (prctl, pause,
                // _exit) and never returns to Rust code.
                unsafe {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    loop {
                        libc::pause();
                    }
                }
            }
            Some(pid) => children.push(pid),
            None => break,
        }
    }
    eprintln!("perfwatch-stress: {} sleepers ready", children.len());
    std::thread::sleep(hold);
    for &pid in &children {
        // SAFETY: pid is our own child, not yet reaped.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    for pid in children {
        let mut status = 0;
        // SAFETY: pid is our child; status is a valid out pointer.
        while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
            && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
        {}
        report.pids.push(pid);
        report.done += 1;
    }
}

fn run_exec(pace: &Pace, program: &std::path::Path, report: &mut Report) -> Result<()> {
    let prog = CString::new(program.as_os_str().as_bytes())
        .with_context(|| format!("--program '{}' contains a NUL byte", program.display()))?;
    let meta = std::fs::metadata(program)
        .with_context(|| format!("--program '{}' cannot be found", program.display()))?;
    if !meta.is_file() {
        bail!("--program '{}' is not a file", program.display());
    }
    // The kernel's comm for an exec'd program: the file name, cut to 15 bytes.
    let base = program
        .file_name()
        .map(|n| n.as_bytes().to_vec())
        .unwrap_or_default();
    let comm = String::from_utf8_lossy(&base[..base.len().min(15)]).into_owned();
    report.extra.push(format!(
        "\"program\":{}",
        json_str(&program.to_string_lossy())
    ));
    report.extra.push(format!("\"comm\":{}", json_str(&comm)));
    // Built before forking: the child must not allocate.
    let argv = [prog.as_ptr(), std::ptr::null()];
    let mut i = 0;
    while pace.next(i) {
        i += 1;
        match fork_retrying(report) {
            Some(0) => unsafe {
                libc::execv(prog.as_ptr(), argv.as_ptr());
                libc::_exit(127)
            },
            Some(pid) => {
                report.pids.push(pid);
                reap(pid, "exec", report);
            }
            None => break,
        }
    }
    Ok(())
}

fn run_threads(pace: &Pace, report: &mut Report) {
    let mut i = 0;
    while pace.next(i) {
        i += 1;
        match std::thread::Builder::new().spawn(gettid) {
            Ok(h) => match h.join() {
                Ok(tid) => {
                    report.tids.push(tid);
                    report.done += 1;
                }
                Err(_) => report.error("a thread panicked".to_string()),
            },
            Err(e) => {
                report.error(format!("spawning a thread: {e}"));
                break;
            }
        }
    }
}

/// A file removed when dropped (only the one we created ourselves).
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn run_mmap(pace: &Pace, args: &Args, report: &mut Report) -> Result<()> {
    if args.size == 0 {
        bail!("--size must be at least one byte");
    }
    let _temp;
    let path = match &args.file {
        Some(p) => p.clone(),
        None => {
            let p =
                std::env::temp_dir().join(format!("perfwatch-stress-{}.map", std::process::id()));
            std::fs::write(&p, vec![0u8; args.size])
                .with_context(|| format!("cannot create '{}'", p.display()))?;
            _temp = TempFile(p.clone());
            p
        }
    };
    let file =
        std::fs::File::open(&path).with_context(|| format!("cannot open '{}'", path.display()))?;
    let path = std::fs::canonicalize(&path).unwrap_or(path);
    report
        .extra
        .push(format!("\"file\":{}", json_str(&path.to_string_lossy())));
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
    let mut i = 0;
    while pace.next(i) {
        i += 1;
        // PROT_EXEC: without attr.mmap_data the kernel only reports executable mappings.
        // SAFETY: a fresh private mapping of an open file, unmapped right away.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                args.size,
                libc::PROT_READ | libc::PROT_EXEC,
                libc::MAP_PRIVATE,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            report.error(format!(
                "mmap of '{}': {}",
                path.display(),
                std::io::Error::last_os_error()
            ));
            break;
        }
        // SAFETY: p is the mapping just made, of args.size bytes.
        unsafe { libc::munmap(p, args.size) };
        report.done += 1;
    }
    Ok(())
}

/// Per-CPU result of spin mode.
struct Spun {
    cpu: u32,
    tid: i32,
    slices: u64,
    cpu_time_ns: u64,
    pinned: bool,
}

fn thread_cpu_ns() -> u64 {
    perfwatch::clock::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn pin_to(cpu: u32) -> bool {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET stays within it for cpu < CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu as usize >= libc::CPU_SETSIZE as usize {
            return false;
        }
        libc::CPU_SET(cpu as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

fn run_spin(pace: &Pace, args: &Args, report: &mut Report) -> Result<()> {
    let cpus = match &args.cpus {
        Some(list) => perfwatch::perf::cpus::parse_cpu_list(list)?,
        None => perfwatch::perf::cpus::online_cpus()?,
    };
    let handles: Vec<_> = cpus
        .iter()
        .map(|&cpu| {
            let pace = *pace;
            std::thread::Builder::new()
                .name(format!("spin-cpu{cpu}"))
                .spawn(move || {
                    let pinned = pin_to(cpu);
                    let t0 = thread_cpu_ns();
                    let mut slices = 0;
                    while pace.next(slices) {
                        let end = Instant::now() + Duration::from_millis(1);
                        let mut x = 0u64;
                        while Instant::now() < end {
                            for k in 0..1000u64 {
                                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(k));
                            }
                        }
                        slices += 1;
                    }
                    Spun {
                        cpu,
                        tid: gettid(),
                        slices,
                        cpu_time_ns: thread_cpu_ns() - t0,
                        pinned,
                    }
                })
        })
        .collect::<std::io::Result<_>>()
        .context("spawning the spin threads")?;
    let mut per_cpu = String::from("\"per_cpu\":[");
    for (i, h) in handles.into_iter().enumerate() {
        let s = h
            .join()
            .map_err(|_| anyhow::anyhow!("a spin thread panicked"))?;
        if !s.pinned {
            report.error(format!("could not pin a thread to CPU {}", s.cpu));
        }
        report.tids.push(s.tid);
        report.done += s.slices;
        if i > 0 {
            per_cpu.push(',');
        }
        let _ = write!(
            per_cpu,
            "{{\"cpu\":{},\"tid\":{},\"slices\":{},\"cpu_time_s\":{:.6},\"pinned\":{}}}",
            s.cpu,
            s.tid,
            s.slices,
            s.cpu_time_ns as f64 / 1e9,
            s.pinned
        );
    }
    per_cpu.push(']');
    report.extra.push(per_cpu);
    Ok(())
}

/// A JSON string literal.
fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_list(items: &[i32]) -> String {
    let mut s = String::with_capacity(items.len() * 7 + 2);
    s.push('[');
    for (i, v) in items.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{v}");
    }
    s.push(']');
    s
}

fn run(args: &Args) -> Result<String> {
    if let Some(d) = args.delay {
        std::thread::sleep(d);
    }
    let pace = Pace::new(args)?;
    let start_ns = monotonic_ns();
    let mut report = Report::default();
    match args.mode {
        Mode::Fork => run_fork(&pace, &mut report),
        Mode::Exec => run_exec(&pace, &args.program, &mut report)?,
        Mode::Threads => run_threads(&pace, &mut report),
        Mode::Mmap => run_mmap(&pace, args, &mut report)?,
        Mode::Spin => run_spin(&pace, args, &mut report)?,
        Mode::Sleepers => run_sleepers(&pace, args.hold, &mut report),
    }
    let elapsed = pace.start.elapsed().as_secs_f64();
    let end_ns = monotonic_ns();
    let mut j = String::new();
    let _ = write!(
        j,
        "{{\"tool\":\"perfwatch-stress\",\"mode\":\"{}\",\"pid\":{},\"tid\":{},\
         \"requested\":{{\"count\":{},\"duration_s\":{},\"rate\":{}}},\
         \"done\":{},\"errors\":{},\"first_error\":{},\"elapsed_s\":{:.6},\"rate_achieved\":{:.1},\
         \"start_ns\":{},\"end_ns\":{},\"pids\":{},\"tids\":{}",
        args.mode.name(),
        std::process::id(),
        gettid(),
        pace.count.map_or("null".to_string(), |n| n.to_string()),
        args.duration
            .map_or("null".to_string(), |d| format!("{}", d.as_secs_f64())),
        args.rate,
        report.done,
        report.errors,
        report
            .first_error
            .as_deref()
            .map_or("null".to_string(), json_str),
        elapsed,
        if elapsed > 0.0 {
            report.done as f64 / elapsed
        } else {
            0.0
        },
        start_ns,
        end_ns,
        json_list(&report.pids),
        json_list(&report.tids),
    );
    for e in &report.extra {
        j.push(',');
        j.push_str(e);
    }
    j.push_str("}\n");
    Ok(j)
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(json) => {
            let written = match &args.output {
                Some(p) => std::fs::write(p, &json)
                    .with_context(|| format!("cannot write '{}'", p.display())),
                None => std::io::stdout()
                    .lock()
                    .write_all(json.as_bytes())
                    .context("writing the report"),
            };
            match written {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("perfwatch-stress: error: {e:#}");
                    ExitCode::from(1)
                }
            }
        }
        Err(e) => {
            eprintln!("perfwatch-stress: error: {e:#}");
            ExitCode::from(1)
        }
    }
}
