#!/usr/bin/env python3
"""The headless agent's cost per host, side by side with perf record, in one run (issue 28).

Three phases, each with both monitors running at the same time on the same load:
  idle   nothing but the machine's own activity;
  busy   perfwatch-stress spin on every CPU and 200 fork+exec a second;
  procs  10 000 live processes (a C helper's sleeping children): one scrape's latency.

perfwatch runs as the agent would: `-a --quiet -F 1000 --metrics 127.0.0.1:PORT
--pprof-every 60s DIR`, scraped once a second by this script (as Prometheus would); perf runs
`perf record -a -F 1000 -o /dev/null`. For each phase: CPU seconds per second of wall time
(the larger of utime+stime from /proc/PID/stat, which counts exited threads, and the
live threads' schedstat, which counts below a clock tick), RSS at the end and the peak (VmHWM), and
the ratio perfwatch / perf, with the goals (CPU <= 1.0x perf record's, RSS <= 40 MiB, every
scrape <= 10 ms) beside each figure. `--baseline OTHER` runs a second perfwatch (an older
build) as a third monitor in the same run, so a change is measured on the same load. Run as
root, on the release build:

    cargo build --release --bins && sudo benches/agent.py
    benches/agent.py --seconds 20 --procs 10000 --perfwatch target/release/perfwatch \
        --baseline /tmp/perfwatch-main
"""

import argparse
import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "common"))
from procstat import on_cpu_ns  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

HOLDER_C = r"""
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int n = atoi(argv[1]);
    for (int i = 0; i < n; i++) {
        pid_t p = fork();
        if (p == 0) { for (;;) pause(); }
        if (p < 0) { perror("fork"); break; }
    }
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
}
"""


def cpu_seconds(pid):
    """(utime+stime of /proc/PID/stat: every thread, the exited ones too, in clock ticks;
    the live threads' time on a CPU from their schedstat, in nanoseconds), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return ticks, on_cpu_ns(pid) / 1e9


def used(c0, c1, wall):
    """CPU seconds per second between two cpu_seconds(): the larger of the two clocks' deltas
    (ticks miss what is under 10 ms, schedstat misses threads that ended)."""
    return max(c1[0] - c0[0], c1[1] - c0[1]) / wall


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def rss_parts_mib(pid):
    """(anonymous, file-backed) resident MiB from /proc/PID/smaps_rollup: what the agent
    allocated vs the pages of its binary and libraries it touched."""
    kib = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[1].isdigit():
                    kib[parts[0].rstrip(":")] = int(parts[1])
    except OSError:
        return 0.0, 0.0
    anon = kib.get("Anonymous", 0)
    return anon / 1024, (kib.get("Rss", 0) - anon) / 1024


def percentiles(values):
    """p50, p90, p99 and max of `values` (nearest rank)."""
    v = sorted(values)

    def rank(q):
        return v[min(len(v) - 1, max(0, int(round(q * len(v) + 0.5)) - 1))]
    return rank(0.50), rank(0.90), rank(0.99), v[-1]


def latency_line(values_ms):
    p50, p90, p99, top = percentiles(values_ms)
    return (f"p50 {p50:.2f} ms, p90 {p90:.2f} ms, p99 {p99:.2f} ms, max {top:.2f} ms "
            f"(goal: every scrape <= 10 ms, judged on the max: {'met' if top <= 10 else 'NOT met'})")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def scrape(port):
    """One GET /metrics: (seconds, bytes)."""
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", "/metrics")
    r = c.getresponse()
    body = r.read()
    c.close()
    if r.status != 200:
        raise RuntimeError(f"/metrics answered {r.status}")
    return time.perf_counter() - t0, len(body)


class Agent:
    """One perfwatch agent: its process, port and once-a-second scrape latencies."""

    def __init__(self, label, perfwatch, pprof_dir):
        self.label = label
        self.port = free_port()
        self.scrapes = []
        self.proc = subprocess.Popen(
            [perfwatch, "-a", "--quiet", "-F", "1000", "--metrics", f"127.0.0.1:{self.port}",
             "--pprof-every", "60s", pprof_dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def wait_ready(self):
        deadline = time.time() + 60
        while True:
            try:
                scrape(self.port)
                return
            except OSError:
                if time.time() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"{self.label}'s /metrics never answered: "
                                       + (self.proc.stderr.read()
                                          if self.proc.poll() is not None else ""))
                time.sleep(0.1)


class Monitors:
    """The perfwatch agents (this build, and the baseline if given) and perf record, started
    together, each agent scraped once a second."""

    def __init__(self, builds, pprof_dir):
        self.agents = []
        for i, (label, path) in enumerate(builds):
            d = os.path.join(pprof_dir, str(i))
            os.makedirs(d)
            self.agents.append(Agent(label, path, d))
        self.perf = subprocess.Popen(
            ["perf", "record", "-a", "-F", "1000", "-o", "/dev/null", "-q"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for a in self.agents:
            a.wait_ready()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.scraper, daemon=True)
        self.thread.start()

    def scraper(self):
        while not self.stop.wait(1.0):
            for a in self.agents:
                try:
                    a.scrapes.append(scrape(a.port)[0])
                except OSError:
                    pass

    def measure(self, seconds):
        """CPU s/s of each over `seconds`, and their RSS now and at peak (MiB)."""
        t0 = time.time()
        pids = [a.proc.pid for a in self.agents] + [self.perf.pid]
        c0 = [cpu_seconds(p) for p in pids]
        time.sleep(seconds)
        c1 = [cpu_seconds(p) for p in pids]
        wall = time.time() - t0
        out = {}
        for a, x0, x1 in zip(self.agents, c0, c1):
            pid = a.proc.pid
            out[a.label] = (used(x0, x1, wall), status_kib(pid, "VmRSS") / 1024,
                            status_kib(pid, "VmHWM") / 1024, rss_parts_mib(pid))
        out["perf"] = (used(c0[-1], c1[-1], wall), status_kib(self.perf.pid, "VmRSS") / 1024,
                       status_kib(self.perf.pid, "VmHWM") / 1024)
        return out

    def close(self):
        self.stop.set()
        self.thread.join()
        for p in [a.proc for a in self.agents] + [self.perf]:
            p.send_signal(signal.SIGINT)
        ends = []
        for a in self.agents:
            err = a.proc.communicate(timeout=60)[1]
            ends.append((a, a.proc.returncode, err))
        self.perf.wait(timeout=60)
        return ends


def report(phase, m):
    perf = m["perf"]
    print(f"{phase:<6} perf record:         {perf[0] * 100:6.3f}% of a CPU, RSS {perf[1]:6.1f} MiB "
          f"(peak {perf[2]:6.1f})")
    for label, pw in m.items():
        if label == "perf":
            continue
        ratio = pw[0] / perf[0] if perf[0] > 0 else float("inf")
        print(f"{'':<6} {label + ':':<20} {pw[0] * 100:6.3f}% of a CPU, RSS {pw[1]:6.1f} MiB "
              f"(peak {pw[2]:6.1f}; {pw[3][0]:.1f} anonymous, {pw[3][1]:.1f} file-backed)   "
              f"CPU {ratio:.1f}x perf record (goal <= 1.0x: "
              f"{'met' if ratio <= 1.0 else 'NOT met'}), RSS goal <= 40 MiB: "
              f"{'met' if pw[1] <= 40 else 'NOT met'}")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--perfwatch", default=os.path.join(ROOT, "target/release/perfwatch"))
    ap.add_argument("--stress", default=os.path.join(ROOT, "target/release/perfwatch-stress"))
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--procs", type=int, default=10000)
    ap.add_argument("--baseline", help="another perfwatch build, run beside in the same run")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("agent.py: run as root (system-wide events for both monitors)")
    for tool in ("perf", "cc"):
        if shutil.which(tool) is None:
            sys.exit(f"agent.py: needs {tool}")
    tmp = tempfile.mkdtemp(prefix="perfwatch-agent-bench-")
    builds = [("perfwatch", a.perfwatch)]
    if a.baseline:
        builds.append(("baseline", a.baseline))
    print(f"agent.py: {os.cpu_count()} CPUs, {a.seconds:.0f} s per phase, "
          + ", ".join(f"{label} {path}" for label, path in builds))
    mon = Monitors(builds, tmp)
    time.sleep(3)  # both settled (kallsyms read, /proc seeded)
    report("idle", mon.measure(a.seconds))

    load = [
        subprocess.Popen([a.stress, "spin", "--duration", str(a.seconds + 5)],
                         stdout=subprocess.DEVNULL),
        subprocess.Popen([a.stress, "exec", "--duration", str(a.seconds + 5), "--rate", "200"],
                         stdout=subprocess.DEVNULL),
    ]
    time.sleep(2)
    report("busy", mon.measure(a.seconds))
    for p in load:
        p.wait()

    holder_bin = os.path.join(tmp, "holder")
    with open(holder_bin + ".c", "w") as f:
        f.write(HOLDER_C)
    subprocess.run(["cc", "-O1", "-o", holder_bin, holder_bin + ".c"], check=True)
    holder = subprocess.Popen([holder_bin, str(a.procs)], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        if holder.stdout.readline().strip() != "ready":
            raise RuntimeError("the holder did not start its children")
        live = len([d for d in os.listdir("/proc") if d.isdigit()])
        time.sleep(3)  # the forks are through the pipeline
        for agent in mon.agents:
            lat = []
            size = 0
            for _ in range(200):
                t, size = scrape(agent.port)
                lat.append(t * 1000)
                time.sleep(0.02)
            print(f"procs  {agent.label}: {live} live processes, 200 scrapes ({size} bytes "
                  "each): " + latency_line(lat))
        report("procs", mon.measure(min(a.seconds, 5)))
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
    for agent, code, err in mon.close():
        scraped = sorted(agent.scrapes)
        if scraped:
            print(f"{agent.label}: scrapes once a second during the run: {len(scraped)}: "
                  + latency_line([t * 1000 for t in scraped]))
        print(f"{agent.label} exit status {code}; its summary:")
        print("  " + "\n  ".join(err.strip().splitlines()[-6:]))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
