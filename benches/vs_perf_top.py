#!/usr/bin/env python3
"""perfwatch's TUI against `perf top`, side by side, on the same machine and load.

Both run system-wide with `-e cpu-clock -F FREQ` (and `-g` in the call-graph rows) in a
pseudo-terminal of 160x45, for SECONDS each, interleaved (perfwatch, perf top, perfwatch,
...), REPS times per configuration. The loads: *busy*, one CPU-bound process per online CPU
(`perfwatch-stress spin`), and *idle*, nothing. Measured per run:

- CPU: the monitor's time on CPU (all its threads, from schedstat) over the steady part of the run, from
  STEADY seconds after it started to the end, in milliseconds of CPU per second; start-up
  (perf top synthesising every task, perfwatch reading /proc and kallsyms) is left out,
  since what costs on a server is the monitor left running;
- peak RSS: VmHWM at the end of the run.

`--freq` takes a list: `4000,default` (the default) runs each configuration at -F 4000 and
at each tool's own default (no `-e`, no `-F`: perfwatch samples cpu-clock at 1000 Hz, perf
top at 4000 Hz, both falling back from cycles). The table gives medians, the ratio
perfwatch / perf top and the goals of issue 29 (CPU <= 0.35x, peak RSS <= 0.5x). Run as
root:

    python3 benches/vs_perf_top.py --perfwatch target/release/perfwatch \\
        --stress target/release/perfwatch-stress [--reps 3] [--seconds 10]

(`cargo bench --bench overhead -- --only top` runs it with the bench build.)
"""

import argparse
import fcntl
import os
import pty
import signal
import statistics
import struct
import subprocess
import sys
import termios
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "common"))
from procstat import CpuTracker, wait_or_kill  # noqa: E402

ROWS, COLS = 45, 160


def vm_hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def run_in_pty(argv, seconds, steady):
    """Run argv in a 160x45 pty for `seconds`; returns (CPU ms per second over the steady
    part, peak RSS in MiB)."""
    pid, fd = pty.fork()
    if pid == 0:
        # Default signal handling for the monitor, whatever the harness inherited.
        for s in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_DFL)
        os.environ["TERM"] = "xterm-256color"
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    os.kill(pid, signal.SIGWINCH)
    stop = threading.Event()

    def drain():
        # A monitor whose terminal is not read would block in its writes.
        while not stop.is_set():
            try:
                if not os.read(fd, 65536):
                    return
            except OSError:
                return

    t = threading.Thread(target=drain, daemon=True)
    t.start()
    time.sleep(steady)
    cpu = CpuTracker(pid)
    cpu.start()
    t0 = time.monotonic()
    while time.monotonic() < t0 + seconds - steady:
        time.sleep(0.1)
        cpu.poll()
    used, t1 = cpu.stop(), time.monotonic()
    rss = vm_hwm_kib(pid) / 1024
    os.write(fd, b"q")
    wait_or_kill(pid, 5)
    stop.set()
    os.close(fd)
    return used / 1e6 / (t1 - t0), rss


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--perfwatch", required=True)
    ap.add_argument("--stress", required=True)
    ap.add_argument("--perf", default="perf")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--steady", type=float, default=2.0)
    ap.add_argument("--freq", default="4000,default",
                    help="comma-separated: a rate, or `default` (each tool's own event and rate)")
    ap.add_argument("--before", help="an older perfwatch, run interleaved with the others "
                    "(its rows printed after the table)")
    ap.add_argument("--smoke", action="store_true", help="1 rep of 3 s: does it run")
    ap.add_argument("--load", choices=["busy", "idle", "both"], default="both")
    ap.add_argument("--graph", choices=["no", "yes", "both"], default="both",
                    help="without -g, with -g, or both")
    ap.add_argument("--call-graph", choices=["fp", "dwarf"], default="fp",
                    help="the call-graph rows' mode: fp (-g) or dwarf (--call-graph dwarf)")
    a = ap.parse_args(argv)
    if a.smoke:
        a.reps, a.seconds, a.steady = 1, 3.0, 1.0
    ncpu = os.cpu_count() or 1
    rows = []
    befores = []
    loads = ("busy", "idle") if a.load == "both" else (a.load,)
    graphs = {"no": (False,), "yes": (True,), "both": (False, True)}[a.graph]
    freqs = [f.strip() for f in str(a.freq).split(",") if f.strip()]
    for load, g, freq in [(lo, g, f) for lo in loads for f in freqs for g in graphs]:
        graph = ["-g"] if a.call_graph == "fp" else ["--call-graph", "dwarf"]
        rate = [] if freq == "default" else ["-e", "cpu-clock", "-F", str(int(freq))]
        ev = rate + (graph if g else [])
        monitors = [
            ("perfwatch TUI", [a.perfwatch] + ev),
            ("perf top", [a.perf, "top"] + ev),
        ] + ([("before", [a.before] + ev)] if a.before else [])
        spin = None
        if load == "busy":
            spin = subprocess.Popen(
                [a.stress, "spin", "--duration", str(int(a.seconds * 2 * a.reps + 30))],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(0.5)
        got = {name: [] for name, _ in monitors}
        try:
            for _ in range(a.reps):
                for name, cmd in monitors:
                    got[name].append(run_in_pty(cmd, a.seconds, a.steady))
        finally:
            if spin:
                spin.kill()
                spin.wait()
        rate_name = "default rate" if freq == "default" else f"-F {freq}"
        cfg = f"{load}, {ncpu} CPUs, {rate_name}{' ' + ' '.join(graph) if g else ''}"
        pw = got["perfwatch TUI"]
        pt = got["perf top"]
        med = lambda xs, i: statistics.median(x[i] for x in xs)
        rows.append((cfg, med(pw, 0), med(pt, 0), med(pw, 1), med(pt, 1),
                     [round(x[0], 1) for x in pw], [round(x[0], 1) for x in pt]))
        if a.before:
            old = got["before"]
            befores.append((cfg, med(old, 0), med(pt, 0), med(old, 1), med(pt, 1)))
        print(f"# {cfg}: perfwatch {[round(x[0],1) for x in pw]} ms/s, "
              f"perf top {[round(x[0],1) for x in pt]} ms/s"
              + (f", before {[round(x[0],1) for x in got['before']]} ms/s" if a.before else ""),
              file=sys.stderr, flush=True)
    print(f"\nperfwatch TUI vs perf top ({COLS}x{ROWS} pty, {a.seconds:.0f} s runs, CPU over the "
          f"last {a.seconds - a.steady:.0f} s, medians of {a.reps}, interleaved)\n")
    print("| load | perfwatch CPU ms/s | perf top CPU ms/s | CPU ratio | goal <= 0.35 | "
          "perfwatch peak RSS | perf top peak RSS | RSS ratio | goal <= 0.5 |")
    print("|---|---|---|---|---|---|---|---|---|")
    verdict = lambda x, goal: "MET" if x <= goal else "MISS"
    for cfg, c_pw, c_pt, r_pw, r_pt, _, _ in rows:
        ratio = c_pw / c_pt if c_pt > 0 else float("nan")
        rss = r_pw / r_pt if r_pt > 0 else float("nan")
        print(f"| {cfg} | {c_pw:.1f} | {c_pt:.1f} | {ratio:.2f} | {verdict(ratio, 0.35)} | "
              f"{r_pw:.1f} MiB | {r_pt:.1f} MiB | {rss:.2f} | {verdict(rss, 0.5)} |")
    if befores:
        print(f"\nThe same runs, interleaved: {a.before} (before)\n")
        print("| load | before CPU ms/s | perf top CPU ms/s | CPU ratio | before peak RSS | RSS ratio |")
        print("|---|---|---|---|---|---|")
        for cfg, c_pw, c_pt, r_pw, r_pt in befores:
            ratio = c_pw / c_pt if c_pt > 0 else float("nan")
            rss = r_pw / r_pt if r_pt > 0 else float("nan")
            print(f"| {cfg} | {c_pw:.1f} | {c_pt:.1f} | {ratio:.2f} | {r_pw:.1f} MiB | {rss:.2f} |")
    return 0


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("vs_perf_top: run as root (system-wide events)", file=sys.stderr)
        sys.exit(2)
    sys.exit(main())
