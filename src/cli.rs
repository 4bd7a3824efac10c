//! Command-line interface, in perf's conventions (`-e`, `-a`, `-C`, `-p`, `-t`, `-F`, `-c`,
//! `-m`, `-- COMMAND`).

use std::ffi::OsString;
use std::time::Duration;

use clap::Parser;

use crate::perf::cpus::parse_cpu_list;

const HELP_BEFORE_FILTER: &str = "\
EXAMPLES:
  sudo perfwatch                      live view of every CPU (TUI)
  sudo perfwatch --plain              one line per record, like perf's twatch.py
  sudo perfwatch --json -e dummy      fork/exit/comm/mmap records only, as JSON lines
  sudo perfwatch -C 0,2-3 -F 4000     CPUs 0, 2 and 3, 4000 samples per second
  sudo perfwatch -p 1234              process 1234, its threads and children
  perfwatch --plain -- make -j8       a command, from its exec, with its children
  sudo perfwatch --plain -e cpu-clock,sched:sched_switch   a clock beside a tracepoint
  perfwatch --list-events sched       the events and tracepoints there are, like perf list

PERMISSIONS:
  System-wide monitoring needs root, CAP_PERFMON, or kernel.perf_event_paranoid <= 0.
  Watching your own processes (-p, -t, -- COMMAND) needs kernel.perf_event_paranoid <= 2
  (kernel samples are left out above 1).

";

const HELP_AFTER_FILTER: &str = "\
EXIT STATUS:
  0    stopped normally (q, Ctrl-C/SIGINT, --duration, monitored tasks gone, closed pipe)
  1    an error (permission, unsupported event, failed start-up)
  2    bad command line
  101  an internal error (a bug; the summary is still printed)
  128+N  stopped by signal N (SIGTERM 143, SIGHUP 129, SIGQUIT 131)
  With -- COMMAND: the command's own exit status.";

/// The text after the options: examples, permissions, the filter syntax (one copy, shared
/// with the TUI's help overlay) and the exit statuses. The man page's sections are made from
/// it too (`--generate man`, see the `generate` module): a heading is a line in capitals ending
/// in `:`, an entry is a line with two columns.
pub fn after_help() -> String {
    format!(
        "{HELP_BEFORE_FILTER}FILTER (--filter EXPR, and / in the TUI):\n  {}\n  e.g. --filter 'type:fork,exit,comm !comm:kworker*'\n\n{}\n{HELP_AFTER_FILTER}",
        crate::filter::SYNTAX_HELP,
        replay_keys(),
    )
}

/// The replay keys of the TUI (`-i FILE` on a terminal), from the table its help shows.
fn replay_keys() -> String {
    let mut s = String::from("REPLAY KEYS (perfwatch -i FILE on a terminal):\n");
    for (k, what) in crate::frontend::tui::input::REPLAY_KEYS {
        s += &format!("  {k:<10}  {what}\n");
    }
    s
}

/// A live Linux event monitor: fork, exit, exec, mmap and samples from every CPU.
#[derive(Parser, Debug, Clone)]
#[command(name = "perfwatch", version, about, after_help = after_help(), max_term_width = 100)]
pub struct Cli {
    /// Events to sample, comma-separated or repeated [default: cycles]: cycles, instructions,
    /// cpu-clock, task-clock, page-faults, context-switches, cpu-migrations, dummy (side-band
    /// records only), or SUBSYS:TRACEPOINT (its fields decoded). Modifiers :u (user mode only),
    /// :k (kernel only), :p/:pp/:ppp (precise, hardware events); terms EVENT/period=N/ or
    /// EVENT/freq=HZ/. Only cycles falls back to cpu-clock (task-clock for a task) on a
    /// machine without it, as in perf; any other missing event is an error.
    #[arg(short = 'e', long = "event", value_name = "EVENT[,EVENT...]")]
    pub events: Vec<String>,

    /// Read a recording instead of watching live: a perf.data file (`perf record -o FILE`), or
    /// `-` for perf's pipe format on stdin (`perf record -o - ... | perfwatch -i - --plain`).
    /// Its records go through the same ordering, symbols, filters, scripts and line formats
    /// (--plain, --json, --folded); on a terminal without them, the full-screen view replays
    /// it on its own clock (REPLAY KEYS below).
    #[arg(short = 'i', long = "input", value_name = "FILE", conflicts_with_all = ["events", "all_cpus", "cpu", "pid", "tid", "cgroup", "command", "freq", "period", "callchains", "call_graph", "switch", "clockid"])]
    pub input: Option<std::path::PathBuf>,

    /// List the events perfwatch can open (hardware, software, and the tracepoints in
    /// tracefs), those containing FILTER if given, like `perf list`, and exit.
    #[arg(long = "list-events", value_name = "FILTER", num_args = 0..=1, default_missing_value = "")]
    pub list_events: Option<String>,

    /// Only tasks in this cgroup, on every CPU (a path under the cgroup file system, e.g.
    /// system.slice/docker-ID.scope), like perf's -G.
    #[arg(short = 'G', long = "cgroup", value_name = "NAME", conflicts_with_all = ["pid", "tid"])]
    pub cgroup: Option<String>,

    /// The clock of event times, as perf record -k: monotonic (default), monotonic_raw,
    /// realtime, boottime, tai, or a clockid number.
    #[arg(short = 'k', long = "clockid", value_name = "CLOCK", value_parser = clockid)]
    pub clockid: Option<ClockId>,

    /// Also show tracepoints' common_* fields (common_pid, common_flags, ...).
    #[arg(long = "common-fields")]
    pub common_fields: bool,

    /// Record call chains (frame pointers) with every sample, like perf's -g.
    #[arg(short = 'g')]
    pub callchains: bool,

    /// Call chains, as perf's --call-graph: fp (frame pointers, as -g), or dwarf[,SIZE]: copy
    /// SIZE bytes of the user stack (default 8192) and the registers with each sample and
    /// unwind them with the binaries' unwind tables (programs built without frame pointers).
    /// lbr is refused, with the reason.
    #[arg(long = "call-graph", value_name = "MODE", value_parser = call_graph_mode)]
    pub call_graph: Option<CallGraphMode>,

    /// With -g: the deepest chain the kernel records, in frames [default:
    /// kernel.perf_event_max_stack].
    #[arg(long = "max-stack", value_name = "N", value_parser = max_stack)]
    pub max_stack: Option<u16>,

    /// Folded stacks (comm;outermost;...;innermost COUNT), the input of flamegraph.pl and
    /// inferno, of the samples that pass the filters (implies -g). Alone: printed on stdout at
    /// the end instead of one line per record. With FILE (and the TUI, --plain or --json):
    /// written to FILE at the end.
    #[arg(long = "folded", value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub folded: Option<std::path::PathBuf>,

    /// Sample at this frequency (samples per second per CPU) [default: 1000].
    #[arg(short = 'F', long = "freq", value_name = "HZ", value_parser = positive_u64, conflicts_with = "period")]
    pub freq: Option<u64>,

    /// Sample once every N events instead of at a frequency.
    #[arg(short = 'c', long = "period", visible_alias = "count", value_name = "N", value_parser = positive_u64)]
    pub period: Option<u64>,

    /// System-wide on all online CPUs (the default without -p, -t or a command).
    #[arg(short = 'a', long = "all-cpus", conflicts_with_all = ["pid", "tid"])]
    pub all_cpus: bool,

    /// Only these CPUs, as a list such as 0,2-3.
    #[arg(short = 'C', long = "cpu", value_name = "LIST", value_parser = cpu_list)]
    pub cpu: Option<CpuSet>,

    /// Watch these processes (comma-separated), all their threads and their new children.
    #[arg(short = 'p', long = "pid", value_name = "PID[,PID...]", value_parser = id_list, conflicts_with = "tid")]
    pub pid: Option<IdList>,

    /// Watch exactly these threads (comma-separated).
    #[arg(short = 't', long = "tid", value_name = "TID[,TID...]", value_parser = id_list)]
    pub tid: Option<IdList>,

    /// Ring buffer size per CPU: a power of two in pages, or a size such as 512K or 2M.
    #[arg(short = 'm', long = "mmap-pages", value_name = "PAGES|SIZE", default_value = "512K", value_parser = mmap_pages)]
    pub mmap_pages: MmapPages,

    /// Also record context switches (SWITCH / SWITCH_CPU_WIDE records).
    #[arg(long = "switch")]
    pub switch: bool,

    /// Stop after this long: seconds, or a number with ms, s, m or h.
    #[arg(short = 'd', long = "duration", value_name = "TIME", value_parser = duration)]
    pub duration: Option<Duration>,

    /// One line per record on stdout, as perf's Python binding prints them (the default when
    /// stdout is not a terminal).
    #[arg(long = "plain", conflicts_with = "json")]
    pub plain: bool,

    /// One JSON object per record on stdout.
    #[arg(long = "json")]
    pub json: bool,

    /// The line format on stdout: plain (--plain), json (--json), or perf: the samples as
    /// `perf script` prints them by default (live, and on a recording with -i).
    #[arg(long = "format", value_name = "FORMAT", value_enum, conflicts_with_all = ["plain", "json"])]
    pub format: Option<LineFormat>,

    /// Run this Python script on every event (repeatable; scripts run in the order given). It
    /// may define trace_begin(), trace_end(), filter(event), on_event(event), on_tick(); or
    /// be written for perf script (SUBSYS__EVENT handlers, process_event, trace_unhandled),
    /// whose handlers are called as perf script calls them, whose tracepoints are opened
    /// when no -e is given, and whose prints are what stdout carries with --plain/--json
    /// (see the README's perf scripts section).
    #[arg(long = "script", value_name = "FILE.py")]
    pub script: Vec<std::path::PathBuf>,

    /// An argument for scripts written for perf script (repeatable, in order): their
    /// sys.argv is [FILE.py, ARG...], as `perf script -s FILE.py ARG...` gives it, e.g.
    /// --script syscall-counts.py --script-arg bash.
    #[arg(
        long = "script-arg",
        value_name = "ARG",
        requires = "script",
        allow_hyphen_values = true
    )]
    pub script_arg: Vec<String>,

    /// Run scripts that other users could have written (as root, perfwatch refuses a script
    /// that it, a directory above it or a link on its path is not owned by root or the sudo
    /// user, or is writable by group or others). Says so on stderr.
    #[arg(long = "force-script", requires = "script")]
    pub force_script: bool,

    /// Write the scripts' on_tick() lines and print() output to FILE: instead of stderr with
    /// --plain/--json, besides the panes in the TUI. As root it is created 0600.
    #[arg(long = "script-output", value_name = "FILE", requires = "script")]
    pub script_output: Option<std::path::PathBuf>,

    /// Show only the records that match EXPR (the TUI's `/` filter language; see FILTER
    /// below). Counters still count every record.
    #[arg(long = "filter", value_name = "EXPR", value_parser = filter_expr)]
    pub filter: Option<crate::filter::Filter>,

    /// Read the symbols of binaries on FUSE and network filesystems (fuse.*, fuseblk, NFS,
    /// CIFS, 9p...). By default they are not read, because a read that such a filesystem's
    /// server never answers could keep perfwatch from exiting: their samples are named by
    /// the binary alone, and it is said once. With this option the output still waits for
    /// them at most 100 ms, but a read the server holds for ever keeps perfwatch from exiting
    /// until the server lets go: use it for mounts you trust.
    #[arg(long = "read-user-fs")]
    pub read_user_fs: bool,

    /// Show perfwatch's own records (its threads' samples, mappings, exits). Watching the
    /// whole system, they are hidden by default and counted as hidden in the summary.
    #[arg(long = "show-self")]
    pub show_self: bool,

    /// Records the TUI's event log keeps (older ones are forgotten, so memory stays bounded).
    #[arg(long = "history", value_name = "N", default_value_t = crate::frontend::tui::app::DEFAULT_HISTORY, value_parser = history_len)]
    pub history: usize,

    /// Serve Prometheus text at GET /metrics on ADDR (a bare PORT binds 127.0.0.1; other
    /// interfaces only when written out: 0.0.0.0:9464), beside any frontend.
    #[arg(long = "metrics", value_name = "ADDR", value_parser = metrics_addr)]
    pub metrics: Option<std::net::SocketAddr>,

    /// Bytes of parsed symbol tables kept (16M, 64M, 1G): a binary whose tables need more is
    /// named by its file only. Default 32M; 16M in the headless agent (--quiet with
    /// --metrics or --pprof).
    #[arg(long = "symbol-cache", value_name = "SIZE", value_parser = symbol_cache_size)]
    pub symbol_cache: Option<usize>,

    /// Series per labelled family in --metrics (command names, control groups, symbols): the
    /// N most active get one, the rest count in "other".
    #[arg(
        long = "metrics-top",
        value_name = "N",
        default_value_t = 20,
        requires = "metrics"
    )]
    pub metrics_top: usize,

    /// Write a pprof profile (profile.proto, gzip) of the samples to FILE at the end (implies
    /// -g): stacks, functions, mappings, cpu/nanoseconds from each sample's period.
    #[arg(long = "pprof", value_name = "FILE")]
    pub pprof: Option<std::path::PathBuf>,

    /// Write one pprof profile per PERIOD into DIR (named by the period's start time, the last
    /// one at stop), for continuous profiling (implies -g).
    #[arg(long = "pprof-every", value_names = ["PERIOD", "DIR"], num_args = 2)]
    pub pprof_every: Vec<OsString>,

    /// Also write what is recorded to FILE as perf.data (perf report -i, perf script -i,
    /// perfwatch -i read it), beside any view; `-o -` writes perf's pipe format to stdout
    /// (not a terminal) in place of the lines (-o - | perf script -i -). With -i, a copy of
    /// the recording as it is read (perf's pipe to a file, a -z file decompressed).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,

    /// No screen and no lines: run headless (with --metrics, --pprof-every, --folded FILE)
    /// until a signal or -d; the summary still goes to stderr.
    #[arg(long = "quiet", conflicts_with_all = ["plain", "json", "format"])]
    pub quiet: bool,

    /// Command to run and watch (from its exec, with its children); perfwatch stops when it
    /// exits and exits with its status. With -a or -C, watch the whole system while it runs.
    #[arg(value_name = "COMMAND", trailing_var_arg = true, conflicts_with_all = ["pid", "tid"])]
    pub command: Vec<OsString>,

    /// Print the man page (roff) or a completion script for bash, zsh, fish or PowerShell on
    /// stdout, and exit.
    #[arg(long = "generate", value_name = "KIND", value_enum, exclusive = true)]
    pub generate: Option<Generate>,
}

/// What `--generate` writes on stdout (written by the `generate` module, which reads this
/// definition; the values live here so that the definition imports nothing above it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Generate {
    /// The man page (roff), e.g. `perfwatch --generate man > /usr/local/share/man/man1/perfwatch.1`.
    Man,
    /// A bash completion script.
    CompleteBash,
    /// A zsh completion script (`_perfwatch`).
    CompleteZsh,
    /// A fish completion script.
    CompleteFish,
    /// A PowerShell completion script.
    CompletePowershell,
}

/// `--format`: the line format on stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LineFormat {
    /// As --plain: perf's Python binding's lines.
    Plain,
    /// As --json: one JSON object per record.
    Json,
    /// perf script's default lines (samples only, as perf script prints them).
    Perf,
}

/// How call chains are recorded (`--call-graph`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallGraphMode {
    /// Frame pointers: the kernel walks the stacks and writes the chain with the sample.
    Fp,
    /// DWARF: the kernel copies this many bytes of the user stack (and the registers) with
    /// each sample; perfwatch unwinds them with the binaries' unwind tables.
    Dwarf(u32),
}

/// perf's default `--call-graph dwarf` stack copy, in bytes.
pub(crate) const DEFAULT_DWARF_STACK: u32 = 8192;
/// The largest stack copy the kernel takes (a sample's size is 16 bits; perf's limit).
pub(crate) const MAX_DWARF_STACK: u32 = 65528;

/// Parse `--call-graph MODE` (perf's spelling): `fp`, `dwarf[,SIZE]` (SIZE rounded up to
/// a multiple of 8, as perf does); `lbr` is refused with the reason.
pub(crate) fn call_graph_mode(s: &str) -> Result<CallGraphMode, String> {
    let t = s.trim().to_ascii_lowercase();
    let mode = t.split(',').next().unwrap_or("");
    match mode {
        "fp" if t == "fp" => Ok(CallGraphMode::Fp),
        "fp" => Err(format!("'{s}': fp takes no size or other setting")),
        "dwarf" => match t.split_once(',') {
            None => Ok(CallGraphMode::Dwarf(DEFAULT_DWARF_STACK)),
            Some((_, size)) => {
                let n: u64 = size.trim().parse().map_err(|_| {
                    format!("'{s}': the dwarf stack size '{size}' is not a whole number of bytes")
                })?;
                let n = n.div_ceil(8).saturating_mul(8);
                if n == 0 || n > MAX_DWARF_STACK as u64 {
                    return Err(format!(
                        "'{s}': the dwarf stack size must be between 8 and {MAX_DWARF_STACK} bytes"
                    ));
                }
                Ok(CallGraphMode::Dwarf(n as u32))
            }
        },
        "lbr" => Err(format!(
            "'{s}': perfwatch records frame-pointer call chains only (fp). LBR call stacks need an \
             Intel PMU with call-stack LBR and reach only as deep as its branch records (16 to 32 \
             calls, user space only); use -g (--call-graph fp) or --call-graph dwarf"
        )),
        _ => Err(format!(
            "'{s}' is not a call-graph mode perfwatch records (fp, dwarf[,SIZE]; lbr is refused)"
        )),
    }
}

/// `--max-stack`: 1 to 65535 frames (the attr's sample_max_stack is 16 bits).
fn max_stack(s: &str) -> Result<u16, String> {
    let v: u64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a positive whole number"))?;
    if v == 0 || v > u16::MAX as u64 {
        return Err(format!("'{s}' must be between 1 and {}", u16::MAX));
    }
    Ok(v as u16)
}

/// A clock for `-k`: its id and the name it goes by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockId {
    pub id: libc::clockid_t,
    pub name: &'static str,
}

/// The clocks `-k` knows by name, with perf's aliases.
const CLOCKS: &[(&str, &str, libc::clockid_t)] = &[
    ("monotonic", "mono", libc::CLOCK_MONOTONIC),
    ("monotonic_raw", "raw", libc::CLOCK_MONOTONIC_RAW),
    ("realtime", "real", libc::CLOCK_REALTIME),
    ("boottime", "boot", libc::CLOCK_BOOTTIME),
    ("tai", "tai", libc::CLOCK_TAI),
];

/// How a clock is named in messages: `CLOCK_MONOTONIC, perf's -k mono`.
pub(crate) fn clock_name(id: libc::clockid_t) -> String {
    match CLOCKS.iter().find(|(_, _, c)| *c == id) {
        Some((name, alias, _)) => {
            format!("CLOCK_{}, perf's -k {alias}", name.to_ascii_uppercase())
        }
        None => format!("clock {id}"),
    }
}

/// Parse `-k`: a clock name (with or without `CLOCK_`), an alias, or a number.
pub(crate) fn clockid(s: &str) -> Result<ClockId, String> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.strip_prefix("clock_").unwrap_or(&t);
    if let Some((name, _, id)) = CLOCKS.iter().find(|(n, a, _)| *n == t || *a == t) {
        return Ok(ClockId { id: *id, name });
    }
    if let Ok(n) = t.parse::<libc::clockid_t>() {
        if let Some((name, _, id)) = CLOCKS.iter().find(|(_, _, id)| *id == n) {
            return Ok(ClockId { id: *id, name });
        }
    }
    Err(format!(
        "'{s}' is not a clock perfwatch can stamp events with (monotonic, monotonic_raw, realtime, boottime, tai, or their numbers)"
    ))
}

/// A parsed `-C` list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuSet(pub Vec<u32>);

/// A parsed `-p`/`-t` list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdList(pub Vec<u32>);

/// Data pages per ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmapPages(pub usize);

/// The largest ring perfwatch will ask for: 1 GiB of 4 KiB pages per CPU.
const MAX_MMAP_PAGES: usize = 1 << 18;

fn positive_u64(s: &str) -> Result<u64, String> {
    let v: u64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a positive whole number"))?;
    if v == 0 {
        return Err(format!("'{s}' must be greater than zero"));
    }
    Ok(v)
}

fn filter_expr(s: &str) -> Result<crate::filter::Filter, String> {
    crate::filter::Filter::parse(s).map_err(|e| e.to_string())
}

/// `--history`: at least one entry, at most 10 million (about a gigabyte of events).
fn history_len(s: &str) -> Result<usize, String> {
    let v: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a positive whole number"))?;
    if v == 0 || v > 10_000_000 {
        return Err(format!("'{s}' must be between 1 and 10000000"));
    }
    Ok(v)
}

fn cpu_list(s: &str) -> Result<CpuSet, String> {
    parse_cpu_list(s).map(CpuSet).map_err(|e| e.to_string())
}

fn id_list(s: &str) -> Result<IdList, String> {
    let mut ids = Vec::new();
    for part in s.split(',') {
        let p = part.trim();
        let v: u32 = p
            .parse()
            .map_err(|_| format!("'{p}' is not a process or thread id"))?;
        if v == 0 || v > i32::MAX as u32 {
            return Err(format!("'{p}' is not a valid process or thread id"));
        }
        ids.push(v);
    }
    Ok(IdList(ids))
}

/// Parse `-m`: pages (`128`) or a size (`512K`, `2M`, `1G`); the page count must be a power of
/// two.
pub(crate) fn parse_mmap_pages(s: &str, page_size: usize) -> Result<usize, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        None => (t, None),
        Some((i, _)) => {
            let unit = t[i..].to_ascii_uppercase();
            let m: usize = match unit.trim_end_matches("IB").trim_end_matches('B') {
                "" => 1,
                "K" => 1 << 10,
                "M" => 1 << 20,
                "G" => 1 << 30,
                _ => return Err(format!("'{s}' is not a page count or a size such as 512K")),
            };
            (&t[..i], Some(m))
        }
    };
    let n: usize = num
        .parse()
        .map_err(|_| format!("'{s}' is not a page count or a size such as 512K"))?;
    let pages = match mult {
        None => n,
        Some(m) => {
            let bytes = n
                .checked_mul(m)
                .ok_or_else(|| format!("'{s}' is too large"))?;
            if bytes % page_size != 0 {
                return Err(format!(
                    "'{s}' is not a whole number of {page_size}-byte pages"
                ));
            }
            bytes / page_size
        }
    };
    if pages == 0 {
        return Err(format!("'{s}' must be at least one page"));
    }
    if !pages.is_power_of_two() {
        return Err(format!(
            "'{s}' is {pages} pages, which is not a power of two"
        ));
    }
    if pages > MAX_MMAP_PAGES {
        return Err(format!(
            "'{s}' is larger than the limit of {MAX_MMAP_PAGES} pages"
        ));
    }
    Ok(pages)
}

/// Parse `--symbol-cache`: a size with a unit (`16M`, `1G`, `512K`) or bytes, at least 1M.
pub fn symbol_cache_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let bad = || format!("'{s}' is not a size such as 16M");
    let at = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let n: usize = t[..at].parse().map_err(|_| bad())?;
    let unit: usize = match t[at..]
        .to_ascii_uppercase()
        .trim_end_matches("IB")
        .trim_end_matches('B')
    {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return Err(bad()),
    };
    let bytes = n
        .checked_mul(unit)
        .ok_or_else(|| format!("'{s}' is too large"))?;
    if bytes < 1 << 20 {
        return Err(format!(
            "'{s}' is less than 1M (the kernel's symbols alone need more)"
        ));
    }
    Ok(bytes)
}

fn mmap_pages(s: &str) -> Result<MmapPages, String> {
    parse_mmap_pages(s, crate::perf::ring::page_size()).map(MmapPages)
}

/// Parse `--duration`: seconds (`2.5`) or with a unit (`500ms`, `10s`, `5m`, `1h`).
/// `--metrics ADDR`: a bare port (or `:PORT`) binds the loopback interface.
pub(crate) fn metrics_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    let t = s.trim();
    if let Ok(port) = t.trim_start_matches(':').parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    t.to_socket_addrs()
        .map_err(|e| format!("'{s}' is not ADDRESS:PORT or PORT ({e})"))?
        .next()
        .ok_or_else(|| format!("'{s}' names no address"))
}

pub fn duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a duration (seconds, or with ms, s, m, h)"))?;
    let secs = v * scale;
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!("'{s}' must be a positive duration"));
    }
    Duration::try_from_secs_f64(secs).map_err(|_| format!("'{s}' is too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbol_cache_takes_sizes_of_a_megabyte_or_more() {
        assert_eq!(symbol_cache_size("16M"), Ok(16 << 20));
        assert_eq!(symbol_cache_size("1GiB"), Ok(1 << 30));
        assert_eq!(symbol_cache_size("2048k"), Ok(2 << 20));
        assert_eq!(symbol_cache_size("1048576"), Ok(1 << 20));
        for bad in ["", "M", "16X", "-1M", "512K", "99999999999999999999G"] {
            assert!(symbol_cache_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn mmap_pages_accepts_pages_and_sizes() {
        assert_eq!(parse_mmap_pages("128", 4096), Ok(128));
        assert_eq!(parse_mmap_pages("512K", 4096), Ok(128));
        assert_eq!(parse_mmap_pages("2M", 4096), Ok(512));
        assert_eq!(parse_mmap_pages("1", 4096), Ok(1));
        for bad in [
            "0",
            "3",
            "100",
            "abc",
            "-1",
            "5K",
            "1T",
            "",
            "99999999999999999999",
        ] {
            let e = parse_mmap_pages(bad, 4096).unwrap_err();
            assert!(e.contains(&format!("'{bad}'")), "{bad}: {e}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
        for bad in ["0", "-1", "abc", "nan", "inf", "1e400", ""] {
            assert!(duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn clocks() {
        assert_eq!(clockid("monotonic").unwrap().id, libc::CLOCK_MONOTONIC);
        assert_eq!(clockid("CLOCK_REALTIME").unwrap().id, libc::CLOCK_REALTIME);
        assert_eq!(clockid("raw").unwrap().name, "monotonic_raw");
        assert_eq!(clockid("7").unwrap().name, "boottime");
        for bad in ["", "sideways", "99", "-1", "3"] {
            let e = clockid(bad).unwrap_err();
            assert!(e.contains(&format!("'{bad}'")), "{e}");
        }
    }

    #[test]
    fn event_lists_and_list_events() {
        let c = Cli::try_parse_from(["perfwatch", "-e", "cpu-clock,dummy", "-e", "page-faults:u"])
            .unwrap();
        assert_eq!(c.events, ["cpu-clock,dummy", "page-faults:u"]);
        let c = Cli::try_parse_from(["perfwatch", "--list-events"]).unwrap();
        assert_eq!(c.list_events.as_deref(), Some(""));
        let c = Cli::try_parse_from(["perfwatch", "--list-events", "sched"]).unwrap();
        assert_eq!(c.list_events.as_deref(), Some("sched"));
        assert!(Cli::try_parse_from(["perfwatch", "-G", "x", "-p", "1"]).is_err());
    }

    #[test]
    fn call_graph_options() {
        assert_eq!(call_graph_mode("fp"), Ok(CallGraphMode::Fp));
        assert_eq!(call_graph_mode(" FP "), Ok(CallGraphMode::Fp));
        assert_eq!(call_graph_mode("dwarf"), Ok(CallGraphMode::Dwarf(8192)));
        assert_eq!(
            call_graph_mode("dwarf,16384"),
            Ok(CallGraphMode::Dwarf(16384))
        );
        assert_eq!(call_graph_mode("dwarf,100"), Ok(CallGraphMode::Dwarf(104)));
        for (bad, says) in [
            ("dwarf,0", "between"),
            ("dwarf,65536", "between"),
            ("dwarf,x", "whole number"),
            ("lbr", "LBR"),
            ("fp,8", "no size"),
            ("", "not a call-graph mode"),
            ("frame", "not a call-graph mode"),
        ] {
            let e = call_graph_mode(bad).unwrap_err();
            assert!(
                e.contains(&format!("'{bad}'")) && e.contains(says),
                "{bad}: {e}"
            );
        }
        assert_eq!(max_stack("32"), Ok(32));
        assert_eq!(max_stack("65535"), Ok(65535));
        for bad in ["0", "65536", "-1", "x", ""] {
            assert!(max_stack(bad).unwrap_err().contains(&format!("'{bad}'")));
        }
        let c = Cli::try_parse_from(["perfwatch", "-g", "--max-stack", "16", "--folded"]).unwrap();
        assert!(c.callchains);
        assert_eq!(c.max_stack, Some(16));
        assert_eq!(c.folded.as_deref(), Some(std::path::Path::new("-")));
        let c = Cli::try_parse_from(["perfwatch", "--folded", "out.folded", "--plain"]).unwrap();
        assert_eq!(
            c.folded.as_deref(),
            Some(std::path::Path::new("out.folded"))
        );
        let c = Cli::try_parse_from(["perfwatch", "--folded", "--", "sleep", "1"]).unwrap();
        assert_eq!(c.folded.as_deref(), Some(std::path::Path::new("-")));
        assert_eq!(c.command, ["sleep", "1"]);
        let c = Cli::try_parse_from(["perfwatch", "--call-graph", "dwarf,4096"]).unwrap();
        assert_eq!(c.call_graph, Some(CallGraphMode::Dwarf(4096)));
        assert!(Cli::try_parse_from(["perfwatch", "--call-graph", "lbr"]).is_err());
    }

    #[test]
    fn id_lists() {
        assert_eq!(id_list("1,22"), Ok(IdList(vec![1, 22])));
        assert!(id_list("0").is_err());
        assert!(id_list("x").is_err());
        assert!(id_list("-5").is_err());
        assert!(id_list("1,,2").is_err());
    }

    #[test]
    fn parses_perf_style_command_lines() {
        let c = Cli::try_parse_from([
            "perfwatch",
            "-e",
            "dummy",
            "-C",
            "0",
            "--plain",
            "--",
            "sh",
            "-c",
            "true",
        ])
        .unwrap();
        assert_eq!(c.command, vec!["sh", "-c", "true"]);
        assert_eq!(c.cpu, Some(CpuSet(vec![0])));
        assert!(Cli::try_parse_from(["perfwatch", "-p", "1", "-t", "2"]).is_err());
        assert!(Cli::try_parse_from(["perfwatch", "-F", "10", "-c", "10"]).is_err());
        assert!(Cli::try_parse_from(["perfwatch", "--plain", "--json"]).is_err());
        assert!(Cli::try_parse_from(["perfwatch", "-p", "1", "--", "true"]).is_err());
    }
}
