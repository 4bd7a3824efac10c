//! The `/metrics` endpoint: one thread, one poll(2) loop over the listener and at most
//! [`MAX_CONNECTIONS`] non-blocking connections, serving GET `/metrics` only (405 for other
//! methods, 404 for other paths), one request per connection.
//!
//! Why not a crate: tiny_http gives each connection a thread of its own (a thousand held-open
//! connections are a thousand threads), and a blocking server with a fixed pool lets a few
//! slow clients hold every worker; a poll loop over non-blocking sockets is about as short as
//! the glue either would need, and its bounds are plain to see: a request is at most
//! [`MAX_REQUEST`] bytes, a connection lives at most [`CONNECTION_TIMEOUT`], and when the table
//! is full the oldest connection makes room for a new one, so a flood of idle sockets cannot
//! lock a scraper out. The response's body is the tap's published text, shared (an `Arc`),
//! not copied per connection. Nothing here ever touches the pipeline: it reads the published
//! snapshot and the monitor's atomic counters.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{Live, Published, family_header};

/// Open connections at most.
pub(crate) const MAX_CONNECTIONS: usize = 1024;
/// The longest request perfwatch reads.
pub(crate) const MAX_REQUEST: usize = 8192;
/// How long a connection may take to send its request and read the answer.
pub(crate) const CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);

/// The running endpoint; dropping it stops the thread.
pub(crate) struct MetricsServer {
    stop: Arc<AtomicBool>,
    /// Written to on drop: wakes the loop from poll(2), which otherwise sleeps until a
    /// connection or its deadline needs it (no tick: an idle agent's endpoint costs nothing).
    wake: UnixStream,
    thread: Option<JoinHandle<()>>,
}

/// The endpoint's socket, bound before the events are opened (an address in use stops
/// perfwatch before it starts), served once the monitor's counters exist.
pub(crate) struct BoundMetrics(TcpListener);

impl BoundMetrics {
    pub fn bind(addr: SocketAddr) -> io::Result<BoundMetrics> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(BoundMetrics(listener))
    }

    /// Serve from a thread of its own.
    pub(crate) fn serve(self, published: Arc<Published>, live: Live) -> io::Result<MetricsServer> {
        let listener = self.0;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let start_time = process_start_time();
        let (wake, woken) = UnixStream::pair()?;
        let thread = std::thread::Builder::new()
            .name("perfwatch-metrics".into())
            .spawn(move || serve(listener, &published, &live, start_time, &flag, &woken))?;
        Ok(MetricsServer {
            stop,
            wake,
            thread: Some(thread),
        })
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = (&self.wake).write(&[1]);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Connection {
    stream: TcpStream,
    since: Instant,
    request: Vec<u8>,
    /// The answer once the request is read: head, shared body, tail; and how much is sent.
    answer: Option<Answer>,
}

fn serve(
    listener: TcpListener,
    published: &Published,
    live: &Live,
    start_time: Option<f64>,
    stop: &AtomicBool,
    woken: &UnixStream,
) {
    answer_first();
    let mut conns: VecDeque<Connection> = VecDeque::new();
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(MAX_CONNECTIONS + 2);
    while !stop.load(Ordering::Relaxed) {
        fds.clear();
        fds.push(libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        fds.push(libc::pollfd {
            fd: woken.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        for c in &conns {
            fds.push(libc::pollfd {
                fd: c.stream.as_raw_fd(),
                events: if c.answer.is_some() {
                    libc::POLLOUT
                } else {
                    libc::POLLIN
                },
                revents: 0,
            });
        }
        // Until the oldest connection's deadline (they are in the order they came), or
        // until something happens.
        let timeout = conns.front().map_or(-1, |c| {
            CONNECTION_TIMEOUT
                .saturating_sub(c.since.elapsed())
                .as_millis()
                .clamp(1, 60_000) as i32
        });
        let n = crate::sys::poll(&mut fds, timeout);
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        let now = Instant::now();
        // Connections first (their indexes match `fds` until the table changes).
        let mut keep = VecDeque::with_capacity(conns.len());
        for (i, mut c) in conns.drain(..).enumerate() {
            let ready = fds.get(i + 2).is_some_and(|p| p.revents != 0);
            let alive = if ready {
                step(&mut c, published, live, start_time)
            } else {
                true
            };
            if alive && now.duration_since(c.since) < CONNECTION_TIMEOUT {
                keep.push_back(c);
            }
        }
        conns = keep;
        if fds[0].revents != 0 {
            for _ in 0..256 {
                match listener.accept() {
                    Ok((stream, _)) => {
                        if stream.set_nonblocking(true).is_err() {
                            continue;
                        }
                        if conns.len() >= MAX_CONNECTIONS {
                            // The oldest makes room: idle sockets cannot lock a scraper out.
                            conns.pop_front();
                        }
                        conns.push_back(Connection {
                            stream,
                            since: now,
                            request: Vec::new(),
                            answer: None,
                        });
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    // EMFILE and the like: the backlog waits for the next turn.
                    Err(_) => break,
                }
            }
        }
    }
}

/// Give this thread (only) a nice value of [`NICE`] when allowed (root, CAP_SYS_NICE; else it
/// stays as it is). It sleeps but for a scrape, so it takes next to no CPU from anyone, and a
/// scrape no longer waits behind every runnable task of a loaded machine for its turn: on
/// the 2-CPU VM at a load average of 17, the longest of 200 scrapes was 182 ms without it.
fn answer_first() {
    let _ = crate::sys::set_thread_nice(NICE);
}

/// The endpoint thread's nice value.
const NICE: i32 = -10;

/// Read or write what the connection is ready for; false when it is done or broken.
fn step(c: &mut Connection, published: &Published, live: &Live, start_time: Option<f64>) -> bool {
    if c.answer.is_none() {
        let mut buf = [0u8; 2048];
        loop {
            match c.stream.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => {
                    let room = MAX_REQUEST.saturating_sub(c.request.len());
                    c.request.extend_from_slice(&buf[..n.min(room)]);
                    if let Some(a) = answer(&c.request, published, live, start_time) {
                        c.answer = Some(a);
                        break;
                    }
                    if c.request.len() >= MAX_REQUEST {
                        c.answer = Some(plain(431, "Request Header Fields Too Large", ""));
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }
    let Some((head, body, tail, sent)) = &mut c.answer else {
        return true;
    };
    loop {
        let (h, b) = (head.len(), body.len());
        let piece: &[u8] = if *sent < h {
            &head[*sent..]
        } else if *sent < h + b {
            &body.as_bytes()[*sent - h..]
        } else if *sent < h + b + tail.len() {
            &tail[*sent - h - b..]
        } else {
            return false;
        };
        match c.stream.write(piece) {
            Ok(0) => return false,
            Ok(n) => *sent += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// A response: head, shared body, tail, and how much of it is sent.
type Answer = (Vec<u8>, Arc<str>, Vec<u8>, usize);

/// The answer to a complete request (`None` while the head is not complete).
fn answer(req: &[u8], published: &Published, live: &Live, start: Option<f64>) -> Option<Answer> {
    let end = req
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .or_else(|| req.windows(2).position(|w| w == b"\n\n"))?;
    let line = req[..end].split(|&b| b == b'\n').next().unwrap_or(&[]);
    let mut parts = line.split(|&b| b == b' ');
    let (method, target) = (parts.next().unwrap_or(&[]), parts.next().unwrap_or(&[]));
    let path = target.split(|&b| b == b'?').next().unwrap_or(&[]);
    if path != b"/metrics" {
        return Some(plain(404, "Not Found", "perfwatch serves /metrics only\n"));
    }
    if method != b"GET" {
        return Some(plain(405, "Method Not Allowed", "GET /metrics only\n"));
    }
    let body = published.get();
    let tail = live_text(live, start).into_bytes();
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len() + tail.len()
    );
    Some((head.into_bytes(), body, tail, 0))
}

fn plain(code: u16, reason: &str, text: &str) -> Answer {
    let allow = if code == 405 { "Allow: GET\r\n" } else { "" };
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\n{allow}Content-Length: {}\r\n\
         Connection: close\r\n\r\n{text}",
        text.len()
    );
    (head.into_bytes(), Arc::from(""), Vec::new(), 0)
}

/// What the server reads itself at each scrape: the monitor's loss counters, and perfwatch's
/// own cost (the names Prometheus's client libraries use for a process).
fn live_text(live: &Live, start: Option<f64>) -> String {
    let mut t = String::with_capacity(2048);
    let totals = live.stats.snapshot();
    type Get = fn(&crate::stats::Counts) -> u64;
    let per_cpu: [(&str, &str, Get); 3] = [
        (
            "perfwatch_lost_records_total",
            "Records the kernel dropped because a ring was full (LOST records, PERF_FORMAT_LOST), per CPU.",
            |c| c.lost,
        ),
        (
            "perfwatch_lost_samples_total",
            "Samples the PMU side dropped (LOST_SAMPLES records), per CPU.",
            |c| c.lost_samples,
        ),
        (
            "perfwatch_dropped_records_total",
            "Records perfwatch itself dropped (a script that could not keep up), per CPU.",
            |c| c.dropped,
        ),
    ];
    for (name, help, get) in per_cpu {
        family_header(&mut t, name, "counter", help);
        for c in &totals.per_cpu {
            let _ = writeln!(t, "{name}{{cpu=\"{}\"}} {}", c.cpu, get(&c.counts));
        }
    }
    family_header(
        &mut t,
        "perfwatch_records_total",
        "counter",
        "Records read from the rings, per CPU.",
    );
    for c in &totals.per_cpu {
        let _ = writeln!(
            t,
            "perfwatch_records_total{{cpu=\"{}\"}} {}",
            c.cpu,
            c.counts.total_records()
        );
    }
    for (name, help, v) in [
        (
            "perfwatch_late_records_total",
            "Records that came after newer ones had gone out (a reader behind the ordering window).",
            &live.late,
        ),
        (
            "perfwatch_hidden_records_total",
            "Records of perfwatch itself, hidden (--show-self shows them).",
            &live.hidden,
        ),
    ] {
        family_header(&mut t, name, "counter", help);
        let _ = writeln!(t, "{name} {}", v.load(Ordering::Relaxed));
    }
    let (cpu, rss) = own_usage();
    if let Some(cpu) = cpu {
        family_header(
            &mut t,
            "process_cpu_seconds_total",
            "counter",
            "perfwatch's own user and system CPU time in seconds.",
        );
        let _ = writeln!(t, "process_cpu_seconds_total {cpu}");
    }
    if let Some(rss) = rss {
        family_header(
            &mut t,
            "process_resident_memory_bytes",
            "gauge",
            "perfwatch's own resident memory in bytes.",
        );
        let _ = writeln!(t, "process_resident_memory_bytes {rss}");
    }
    if let Some(start) = start {
        family_header(
            &mut t,
            "process_start_time_seconds",
            "gauge",
            "When perfwatch started, in seconds since the Unix epoch.",
        );
        let _ = writeln!(t, "process_start_time_seconds {start:.2}");
    }
    t
}

/// The fields of /proc/self/stat after the command name.
fn own_stat() -> Option<Vec<u64>> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    Some(
        rest.split_ascii_whitespace()
            .map(|f| f.parse().unwrap_or(0))
            .collect(),
    )
}

fn clock_ticks() -> f64 {
    let t = crate::sys::sysconf(libc::_SC_CLK_TCK);
    if t > 0 { t as f64 } else { 100.0 }
}

/// perfwatch's CPU seconds (utime + stime) and resident bytes.
fn own_usage() -> (Option<f64>, Option<u64>) {
    // Fields 14 and 15 of stat (11 and 12 after the name and state).
    let cpu = own_stat().and_then(|f| Some((f.get(11)? + f.get(12)?) as f64 / clock_ticks()));
    let page = crate::sys::sysconf(libc::_SC_PAGESIZE).max(4096) as u64;
    let rss = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_ascii_whitespace().nth(1)?.parse::<u64>().ok())
        .map(|pages| pages * page);
    (cpu, rss)
}

/// When perfwatch started (the boot time plus field 22 of stat), in Unix seconds.
fn process_start_time() -> Option<f64> {
    let ticks = *own_stat()?.get(19)?;
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let btime: f64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(btime + ticks as f64 / clock_ticks())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_port_is_loopback_and_other_interfaces_are_written_out() {
        use crate::cli::metrics_addr as parse_addr;
        assert_eq!(parse_addr("9464").unwrap().to_string(), "127.0.0.1:9464");
        assert_eq!(parse_addr(":9464").unwrap().to_string(), "127.0.0.1:9464");
        assert_eq!(
            parse_addr("0.0.0.0:9464").unwrap().to_string(),
            "0.0.0.0:9464"
        );
        assert_eq!(parse_addr("[::1]:1").unwrap().to_string(), "[::1]:1");
        assert!(parse_addr("x").unwrap_err().contains("'x'"));
    }

    #[test]
    fn requests_get_metrics_404_or_405() {
        let p = Published::default();
        p.put(Arc::from("# HELP a b\n"));
        let live = Live {
            stats: Arc::new(crate::stats::Stats::new(&[0])),
            late: Arc::default(),
            hidden: Arc::default(),
        };
        let code = |req: &[u8]| {
            let (h, b, t, _) = answer(req, &p, &live, Some(1.0)).unwrap();
            let head = String::from_utf8(h).unwrap();
            (head[9..12].to_string(), b.len() + t.len())
        };
        assert!(answer(b"GET /metrics HTTP/1.1\r\nHost: x\r\n", &p, &live, None).is_none());
        let (c, len) = code(b"GET /metrics HTTP/1.1\r\n\r\n");
        assert_eq!(c, "200");
        assert!(len > 11);
        assert_eq!(code(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n").0, "200");
        assert_eq!(code(b"POST /metrics HTTP/1.1\r\n\r\n").0, "405");
        assert_eq!(code(b"GET / HTTP/1.1\r\n\r\n").0, "404");
        assert_eq!(code(b"GET /metricsx HTTP/1.1\r\n\r\n").0, "404");
        assert_eq!(code(b"\r\n\r\n").0, "404");
    }
}
