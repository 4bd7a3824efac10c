//! The fleet outputs against the real engines, on loopback: a real Prometheus (Debian's
//! `prometheus`) scrapes `--metrics` every second and its PromQL answer for a marker command's
//! forks is exactly what the marker did; `go tool pprof` (Debian's `golang-go`) reads
//! `--pprof` of a C program with known functions and agrees with perfwatch's own `--folded`
//! of the same run; the endpoint answers GET /metrics only, and 1000 connections held open
//! while events flow change no count of the run.

use crate::common;

use common::InTime;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Forks N children that exit at once, one after the other; with a second argument, first
/// waits until that file exists (so that a test can act before the forks start).
const MARKER_C: &str = r#"
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1;
    if (argc > 2) while (access(argv[2], F_OK) != 0) usleep(10000);
    for (int i = 0; i < n; i++) {
        pid_t p = fork();
        if (p == 0) _exit(0);
        if (p > 0) waitpid(p, 0, 0);
    }
    return 0;
}
"#;

/// `main -> outer -> hot` (about 80% of the time) and `main -> cold` (about 20%).
const PROG_C: &str = r#"
#include <stdlib.h>
volatile unsigned long sink;
__attribute__((noinline)) void tick(void) { sink++; }
__attribute__((noinline)) void hot(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) sink += i * i;
    tick();
}
__attribute__((noinline)) void cold(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) sink ^= i + 1;
    tick();
}
__attribute__((noinline)) void outer(unsigned long n) { hot(n); sink++; }
int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 100;
    for (unsigned long i = 0; i < n; i++) { outer(4000000); cold(1000000); }
    return 0;
}
"#;

/// Return from the calling test unless `go` (for `go tool pprof`) runs: a failure under
/// `CI=true`, else a visible skip.
macro_rules! require_go {
    () => {
        if Command::new("go").arg("version").output_in_time().is_err() {
            common::refuse(
                test_name!(),
                "no go (Debian's golang-go; .ci/run installs it)",
            );
            return;
        }
    };
}

fn cc(dir: &Path, name: &str, src: &str) -> PathBuf {
    common::cc(dir, name, src, &["-O1", "-fno-omit-frame-pointer"])
}

/// A port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One HTTP/1.0 request; the status and the body (`None` when nothing answered).
fn http(addr: SocketAddr, method: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "{method} {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut got = Vec::new();
    s.read_to_end(&mut got).ok()?;
    let text = String::from_utf8_lossy(&got).into_owned();
    let code = text.get(9..12)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    Some((code, body))
}

/// Wait (within the tests' deadline) until `ok()` says yes.
#[track_caller]
fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(
            t0.elapsed() < common::deadline(),
            "{what}: not within the deadline"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn percent(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The value of an instant PromQL query with one result (`None`: no series).
fn promql(prom: SocketAddr, q: &str) -> Option<f64> {
    let (code, body) = http(prom, "GET", &format!("/api/v1/query?query={}", percent(q)))?;
    assert_eq!(code, 200, "{q}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let r = v["data"]["result"].as_array()?;
    assert!(r.len() <= 1, "{q}: {body}");
    r.first()?["value"][1].as_str()?.parse().ok()
}

/// Kills (SIGKILL) and reaps a child when dropped: a failing test leaves nothing behind.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Stop perfwatch with SIGINT and return its stderr (it was sent to `err`).
fn interrupt(mut pw: Reaped, err: &Path) -> String {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(pw.0.id() as i32, libc::SIGINT) };
    let st = common::wait_in_time(&mut pw.0);
    let said = std::fs::read_to_string(err).unwrap_or_default();
    assert!(st.success(), "perfwatch: {st}\n{said}");
    said
}

#[test]
fn prometheus_counts_a_marker_commands_forks_exactly() {
    require_perf!();
    if !common::installed("prometheus") {
        common::refuse(
            test_name!(),
            "no prometheus (Debian's prometheus package; .ci/run installs it)",
        );
        return;
    }
    const N: u64 = 37;
    let dir = tempfile::tempdir().unwrap();
    // A name of its own: the other tests' markers run beside it, seen by its `-a`.
    let marker = cc(dir.path(), "fleetprom", MARKER_C);
    let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let err = dir.path().join("perfwatch.err");
    let mut pw = Reaped(
        common::perfwatch()
            .args(["-a", "--quiet", "--metrics", &metrics.to_string()])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap(),
    );
    common::wait_until_watching(&mut pw.0);
    wait_for("perfwatch's /metrics", || {
        http(metrics, "GET", "/metrics").is_some_and(|(c, _)| c == 200)
    });

    let prom: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: perfwatch\n    static_configs:\n      - targets: ['{metrics}']\n"
        ),
    )
    .unwrap();
    let _prom = Reaped(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={prom}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.err")).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for("prometheus ready", || {
        http(prom, "GET", "/-/ready").is_some_and(|(c, _)| c == 200)
    });
    wait_for("prometheus scraping perfwatch", || {
        promql(prom, "up{job=\"perfwatch\"}") == Some(1.0)
    });

    let st = Command::new(&marker)
        .arg(N.to_string())
        .status_in_time()
        .unwrap();
    assert!(st.success());
    // Scraped once the forks are in: exactly N, and it stays N.
    let forks = "sum(perfwatch_process_forks_total{comm=\"fleetprom\"})";
    let exits = "sum(perfwatch_process_exits_total{comm=\"fleetprom\"})";
    let mut seen = None;
    let t0 = Instant::now();
    while seen != Some((N + 1) as f64) {
        seen = promql(prom, exits);
        assert!(
            t0.elapsed() < common::deadline(),
            "{exits} is {seen:?}, not {}; forks {:?}; perfwatch said: {}",
            N + 1,
            promql(prom, forks),
            std::fs::read_to_string(&err).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // One more scrape: it stays so.
    let scraped = "timestamp(up{job=\"perfwatch\"})";
    let t0 = promql(prom, scraped).unwrap_or(0.0);
    wait_for("a later scrape", || {
        promql(prom, scraped).unwrap_or(0.0) > t0
    });
    assert_eq!(promql(prom, forks), Some(N as f64), "{forks}");
    assert_eq!(promql(prom, exits), Some((N + 1) as f64), "{exits}");
    // One exec is little activity: a series of its own when there was room, else in other.
    let execs = promql(
        prom,
        "sum(perfwatch_process_execs_total{comm=\"fleetprom\"})",
    );
    assert!(matches!(execs, None | Some(1.0)), "{execs:?}");
    // The loss series exist (one per CPU) and are 0.
    for family in [
        "perfwatch_lost_records_total",
        "perfwatch_lost_samples_total",
        "perfwatch_dropped_records_total",
    ] {
        let n = promql(prom, &format!("count({family})")).unwrap_or(0.0);
        assert!(n >= 1.0, "{family}: no series");
        assert_eq!(
            promql(prom, &format!("sum({family})")),
            Some(0.0),
            "{family}"
        );
    }
    assert!(promql(prom, "process_resident_memory_bytes").is_some_and(|b| b > 1e6));
    assert!(promql(prom, "sum(perfwatch_samples_total)").is_some_and(|n| n > 0.0));
    interrupt(pw, &err);
}

/// `go tool pprof -top`'s rows: (flat%, function), in its order.
fn pprof_top(profile: &Path, extra: &[&str]) -> Vec<(f64, String)> {
    let out = Command::new("go")
        .args(["tool", "pprof", "-top", "-nodecount=50"])
        .args(extra)
        .arg(profile)
        .env("HOME", profile.parent().unwrap())
        .output_in_time()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "go tool pprof: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut rows = Vec::new();
    let mut table = false;
    for line in text.lines() {
        if line.trim_start().starts_with("flat") {
            table = true;
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if table && f.len() >= 6 {
            let pct: f64 = f[1].trim_end_matches('%').parse().unwrap();
            rows.push((pct, f[5..].join(" ")));
        }
    }
    rows
}

#[test]
fn go_pprof_reads_the_profile_and_agrees_with_folded() {
    require_perf!();
    require_go!();
    let dir = tempfile::tempdir().unwrap();
    let prog = cc(dir.path(), "fleetprof", PROG_C);
    let (pb, folded) = (dir.path().join("run.pb.gz"), dir.path().join("run.folded"));
    let r = common::run(
        common::perfwatch()
            .args(["--quiet", "-F", "999", "--pprof"])
            .arg(&pb)
            .arg("--folded")
            .arg(&folded)
            .arg("--")
            .arg(&prog)
            .arg("800"),
    );
    r.exited(0);
    // perfwatch's own view: samples per leaf function.
    let text = std::fs::read_to_string(&folded).unwrap();
    let mut leaf: HashMap<String, u64> = HashMap::new();
    let mut total = 0;
    for line in text.lines() {
        let (stack, n) = line.rsplit_once(' ').unwrap();
        let n: u64 = n.parse().unwrap();
        let f = stack.rsplit(';').next().unwrap().trim_end_matches("_[k]");
        *leaf.entry(f.to_string()).or_default() += n;
        total += n;
    }
    assert!(total > 200, "{total} samples");
    let (top, top_n) = leaf.iter().max_by_key(|(_, n)| **n).unwrap();
    assert_eq!(top, "hot", "{leaf:?}");
    let folded_share = 100.0 * *top_n as f64 / total as f64;
    // pprof's, by samples and by cpu time.
    for extra in [&["-sample_index=samples"][..], &[]] {
        let rows = pprof_top(&pb, extra);
        let (pct, name) = rows.first().expect("pprof's top has rows");
        assert_eq!(name, "hot", "{rows:?}");
        assert!(
            (pct - folded_share).abs() <= 2.0,
            "pprof {extra:?} says hot is {pct}%, --folded {folded_share:.2}%"
        );
    }
    // The labels and the program's mapping with its build id.
    let raw = Command::new("go")
        .args(["tool", "pprof", "-raw"])
        .arg(&pb)
        .env("HOME", dir.path())
        .output_in_time()
        .unwrap();
    let raw = String::from_utf8_lossy(&raw.stdout).into_owned();
    assert!(raw.contains("comm:[fleetprof]"), "{raw:.2000}");
    assert!(raw.contains("pid:["), "{raw:.2000}");
    let notes = Command::new("readelf")
        .arg("-n")
        .arg(&prog)
        .output_in_time()
        .unwrap();
    let notes = String::from_utf8_lossy(&notes.stdout).into_owned();
    if let Some(id) = notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
    {
        let line = raw
            .lines()
            .find(|l| l.contains("fleetprof") && l.contains("0x"))
            .unwrap_or_default();
        assert!(
            raw.contains(id.trim()),
            "build id {id} not in the mappings: {line}"
        );
    }
}

#[test]
fn the_endpoint_answers_get_metrics_only_and_held_connections_change_no_count() {
    require_perf!();
    const N: usize = 300;
    // Connections held open while the marker forks (the server keeps 1024 at most).
    const HELD: usize = 1000;
    let dir = tempfile::tempdir().unwrap();
    let marker = cc(dir.path(), "fleetmark", MARKER_C);
    // The marker's fork, exit and comm records as --json shows them: with the endpoint
    // held by 1000 connections and flooded, and without.
    let counts = |held: bool| -> HashMap<String, usize> {
        let gate = dir.path().join(format!("gate-{held}"));
        let out = dir.path().join(format!("out-{held}.json"));
        let port = free_port();
        let metrics: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let mut c = common::perfwatch();
        c.arg("--json");
        if held {
            c.args(["--metrics", &metrics.to_string()]);
        }
        let mut pw = Reaped(
            c.arg("--")
                .arg(&marker)
                .arg(N.to_string())
                .arg(&gate)
                .stdout(std::fs::File::create(&out).unwrap())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        common::wait_until_watching(&mut pw.0);
        let mut hold = Vec::new();
        let mut flood = None;
        if held {
            wait_for("/metrics", || {
                http(metrics, "GET", "/metrics").is_some_and(|(c, _)| c == 200)
            });
            assert_eq!(http(metrics, "GET", "/").map(|r| r.0), Some(404));
            assert_eq!(http(metrics, "GET", "/metricsx").map(|r| r.0), Some(404));
            assert_eq!(http(metrics, "POST", "/metrics").map(|r| r.0), Some(405));
            assert_eq!(http(metrics, "HEAD", "/metrics").map(|r| r.0), Some(405));
            // SAFETY: getrlimit/setrlimit on a local struct.
            unsafe {
                let mut l = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < 4096 {
                    l.rlim_cur = l.rlim_max.min(4096);
                    libc::setrlimit(libc::RLIMIT_NOFILE, &l);
                }
            }
            for i in 0..HELD {
                let mut s = TcpStream::connect(metrics).unwrap();
                if i % 3 == 0 {
                    // Half-open: a request that never ends.
                    s.write_all(b"GET /metr").unwrap();
                } else if i % 3 == 1 {
                    // A reader that asks and never reads the answer.
                    s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
                }
                hold.push(s);
            }
            // A scrape still gets through beside them.
            let (code, body) = http(metrics, "GET", "/metrics").unwrap();
            assert_eq!(code, 200);
            assert!(body.contains("# TYPE perfwatch_samples_total counter"));
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let s2 = stop.clone();
            flood = Some((
                stop,
                std::thread::spawn(move || {
                    let mut n = 0;
                    while !s2.load(std::sync::atomic::Ordering::Relaxed) {
                        if http(metrics, "GET", "/metrics").is_some() {
                            n += 1;
                        }
                    }
                    n
                }),
            ));
        }
        std::fs::write(&gate, "").unwrap();
        let st = common::wait_in_time(&mut pw.0);
        assert!(st.success(), "perfwatch: {st}");
        if let Some((stop, t)) = flood {
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            let n = t.join().unwrap();
            assert!(n > 0, "the flood got no answer");
        }
        drop(hold);
        let mut counts = HashMap::new();
        for v in common::json_lines(&std::fs::read_to_string(&out).unwrap()) {
            let t = v["type"].as_str().unwrap_or("").to_string();
            if t == "fork" || t == "exit" || t == "comm" {
                *counts.entry(t).or_default() += 1;
            }
        }
        counts
    };
    let quiet = counts(false);
    let held = counts(true);
    assert_eq!(quiet.get("fork"), Some(&N), "{quiet:?}");
    assert_eq!(held, quiet);
}

#[test]
fn pprof_every_writes_a_profile_per_period_and_a_full_disk_is_said_once() {
    require_root!("to mount a tiny tmpfs");
    require_perf!();
    require_go!();
    let dir = tempfile::tempdir().unwrap();
    // A profile a second into `to` for 3.5 s, system-wide.
    let every_second = |to: &Path| {
        common::run(
            common::perfwatch()
                .args(["-a", "--quiet", "-F", "499", "--pprof-every", "1s"])
                .arg(to)
                .args(["-d", "3.5"]),
        )
    };
    let out = dir.path().join("profiles");
    std::fs::create_dir(&out).unwrap();
    let r = every_second(&out);
    r.exited(0).said(&["pprof: "]);
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    // One per whole second, and the last at stop.
    assert!((3..=5).contains(&names.len()), "{names:?}");
    for (i, n) in names.iter().enumerate() {
        let stamp = n
            .strip_prefix("perfwatch-")
            .and_then(|n| n.strip_suffix("Z.pb.gz"))
            .unwrap_or_else(|| panic!("{n}"));
        assert!(stamp.len() == 15 && stamp.as_bytes()[8] == b'T', "{n}");
        // Every file reads; the last one, at stop, may hold only a moment.
        let rows = pprof_top(&out.join(n), &[]);
        assert!(!rows.is_empty() || i + 1 == names.len(), "{n}: no samples");
    }

    // A full disk: said once, the run goes on to its end and its summary, status 1.
    let tiny = common::Tmpfs::mount(dir.path(), "4k");
    let mnt = tiny.path().to_path_buf();
    std::fs::write(mnt.join("filler"), vec![b'x'; 4096]).unwrap();
    let r = every_second(&mnt);
    r.exited(1).said(&["records in "]);
    assert_eq!(
        r.stderr
            .matches("cannot write --pprof-every profile")
            .count(),
        1,
        "{}",
        r.stderr
    );
}

/// The systemd unit's capabilities are enough: perfwatch run as `nobody` with exactly the
/// unit's `AmbientCapabilities` (through setpriv, as systemd would give them) watches the
/// whole system, serves /metrics and stops with status 0 at SIGINT (the unit's KillSignal).
#[test]
fn the_agent_units_capabilities_are_enough_without_root() {
    require_root!("to drop to nobody with capabilities");
    require_perf!();
    let unit = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/perfwatch-agent.service"),
    )
    .unwrap();
    let caps: Vec<String> = unit
        .lines()
        .find_map(|l| l.strip_prefix("AmbientCapabilities="))
        .expect("AmbientCapabilities= in the unit")
        .split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect();
    assert!(unit.contains("KillSignal=SIGINT") && unit.contains("--quiet"));
    let caps = caps.join(",");
    // A copy nobody can run (the build tree may sit under a private directory).
    let dir = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.path().join("perfwatch");
    std::fs::copy(assert_cmd::cargo::cargo_bin("perfwatch"), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let err = dir.path().join("err");
    let mut c = Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(format!("--inh-caps={caps}"))
        .arg(format!("--ambient-caps={caps}"))
        .arg(&bin)
        .args(["-a", "--quiet", "--metrics", &metrics.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap());
    common::default_signals(&mut c);
    let mut pw = Reaped(c.spawn().unwrap());
    common::wait_until_watching(&mut pw.0);
    wait_for("/metrics as nobody", || {
        http(metrics, "GET", "/metrics").is_some_and(|(c, b)| {
            c == 200
                && b.contains("perfwatch_samples_total{cpu=")
                && b.contains("process_cpu_seconds_total")
        })
    });
    let said = interrupt(pw, &err);
    assert!(said.contains("records in"), "{said}");
    assert!(!said.contains("perfwatch: error"), "{said}");
}

/// The endpoint beside the line frontends: `--plain` prints its lines and `/metrics` answers.
#[test]
fn metrics_are_served_beside_plain_lines() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut pw = Reaped(
        common::perfwatch()
            .args([
                "-a",
                "--plain",
                "-e",
                "dummy",
                "--metrics",
                &metrics.to_string(),
            ])
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap(),
    );
    common::wait_until_watching(&mut pw.0);
    let st = Command::new("true").status_in_time().unwrap();
    assert!(st.success());
    wait_for("a scraped exit of true", || {
        http(metrics, "GET", "/metrics")
            .is_some_and(|(c, b)| c == 200 && b.contains("perfwatch_process_exits_total{"))
            && std::fs::read_to_string(&out).is_ok_and(|t| t.contains("type: exit"))
    });
    interrupt(pw, &err);
}

/// How many times the reader threads (`perfwatch-cpuN`) of process `pid` have run so far
/// (schedstat's third field, summed), and how many there are.
fn reader_runs(pid: u32) -> (u64, u64) {
    let (mut runs, mut readers) = (0, 0);
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("perfwatch-cpu") {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
        if let Some(n) = stat
            .split_whitespace()
            .nth(2)
            .and_then(|n| n.parse::<u64>().ok())
        {
            runs += n;
            readers += 1;
        }
    }
    (runs, readers)
}

/// The headless agent's readers sleep until their ring's wakeup watermark or the next whole
/// second (its outputs are read once a second), where the default wakes them four times a
/// second. Side by side on the same CPUs and records (`-e dummy`: side-band records only,
/// which wake both alike at the watermark): the agent's readers run about three times a
/// second less each, still at least about once a second, and both stop on SIGINT as before.
#[test]
fn the_headless_agents_readers_wake_once_a_second_where_the_default_wakes_four_times() {
    require_perf!();
    let dir = tempfile::tempdir().unwrap();
    let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let start = |extra: &[&str], err: &Path| {
        let mut pw = Reaped(
            common::perfwatch()
                .args(["-a", "--quiet", "-e", "dummy"])
                .args(extra)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(err).unwrap())
                .spawn()
                .unwrap(),
        );
        common::wait_until_watching(&mut pw.0);
        pw
    };
    let (agent_err, plain_err) = (dir.path().join("agent"), dir.path().join("plain"));
    let agent = start(&["--metrics", &metrics.to_string()], &agent_err);
    let plain = start(&[], &plain_err);
    wait_for("/metrics", || {
        http(metrics, "GET", "/metrics").is_some_and(|(c, _)| c == 200)
    });
    let (a0, p0, t0) = (
        reader_runs(agent.0.id()),
        reader_runs(plain.0.id()),
        Instant::now(),
    );
    // A measuring window, not a wait for readiness.
    std::thread::sleep(Duration::from_secs(4));
    let (a1, p1) = (reader_runs(agent.0.id()), reader_runs(plain.0.id()));
    let secs = t0.elapsed().as_secs_f64();
    assert!(a1.1 > 0 && a1.1 == p1.1, "reader threads: {a1:?} {p1:?}");
    let rate = |r0: (u64, u64), r1: (u64, u64)| (r1.0 - r0.0) as f64 / r1.1 as f64 / secs;
    let (agent_rate, plain_rate) = (rate(a0, a1), rate(p0, p1));
    let said = interrupt(agent, &agent_err);
    assert!(said.contains("records in"), "{said}");
    interrupt(plain, &plain_err);
    assert!(
        plain_rate - agent_rate >= 1.5,
        "runs per reader per second: agent {agent_rate:.2}, default {plain_rate:.2}"
    );
    assert!(
        agent_rate >= 0.7,
        "the agent's readers must still wake about once a second: {agent_rate:.2}"
    );
}
