#!/usr/bin/env python3
"""Tracepoint overhead side by side: a context-switch storm watched system-wide through
sched:sched_switch, by perfwatch (live, formatted: --plain to /dev/null) and by perf (perf
record -e sched:sched_switch -a, then perf script to /dev/null on the same kind of storm).

The load is `perf bench sched pipe -l LOOPS`: two processes passing a token through pipes,
two context switches per loop on each side. Each run starts the monitor, lets it settle,
runs the load, lets the monitor drain, stops it with SIGINT and takes its utime+stime from
wait4 (for perf, the record run plus the script run). CPU per record is that time divided by
the sched_switch samples the monitor handled (perfwatch's exit summary; perf script's lines).

Runs are interleaved (perfwatch, perf, perfwatch, perf, ...), because this VM's absolute
timings drift by a factor of two between runs; the table shows medians and the ratio.

Usage: benches/switch_storm.py --perfwatch PATH [--runs N] [--loops N]
(`cargo bench --bench switch_storm` passes the optimised binary). Needs root and perf.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time


def cpu_of(ru):
    return ru.ru_utime + ru.ru_stime


def wait_cpu(p):
    _, status, ru = os.wait4(p.pid, 0)
    return status, cpu_of(ru)


def load(loops):
    t0 = time.monotonic()
    subprocess.run(["perf", "bench", "sched", "pipe", "-l", str(loops)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.monotonic() - t0


def run_perfwatch(pw, loops, settle):
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen([pw, "-e", "sched:sched_switch", "-a", "--plain"],
                             stdout=subprocess.DEVNULL, stderr=err)
        time.sleep(settle)
        wall = load(loops)
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        status, cpu = wait_cpu(p)
        err.seek(0)
        text = err.read().decode(errors="replace")
    m = re.search(r"by type: sample (\d+)", text)
    lost = re.search(r"lost by the kernel: (\d+) records", text)
    if not m:
        sys.exit(f"switch_storm: no sample count in perfwatch's summary:\n{text}")
    return {"records": int(m.group(1)), "cpu": cpu, "lost": int(lost.group(1)) if lost else 0,
            "load_s": wall}


def run_perf(loops, settle, data):
    p = subprocess.Popen(["perf", "record", "-q", "-e", "sched:sched_switch", "-a", "-o", data],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(settle)
    wall = load(loops)
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    _, rec_cpu = wait_cpu(p)
    s = subprocess.Popen(["perf", "script", "-i", data], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    _, script_cpu = wait_cpu(s)
    # Count the samples in a separate pass that is not timed.
    out = subprocess.run(["perf", "script", "-i", data, "-F", "time"], capture_output=True)
    records = out.stdout.count(b"\n")
    return {"records": records, "cpu": rec_cpu + script_cpu, "record_cpu": rec_cpu,
            "script_cpu": script_cpu, "lost": 0, "load_s": wall}


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--perfwatch", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--loops", type=int, default=100000)
    ap.add_argument("--settle", type=float, default=1.0)
    ap.add_argument("--smoke", action="store_true", help="one short run each")
    a = ap.parse_args()
    if a.smoke:
        a.runs, a.loops = 1, 5000
    if os.geteuid() != 0:
        sys.exit("switch_storm: needs root (system-wide tracepoints)")
    if not os.path.isdir("/sys/kernel/tracing/events/sched"):
        sys.exit("switch_storm: tracefs is not mounted: mount -t tracefs nodev /sys/kernel/tracing")
    pw_runs, perf_runs = [], []
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as d:
        data = os.path.join(d, "perf.data")
        for i in range(a.runs):
            r = run_perfwatch(a.perfwatch, a.loops, a.settle)
            pw_runs.append(r)
            print(f"run {i + 1} perfwatch: {r['records']} records, {r['cpu']:.3f} s CPU, "
                  f"{1e6 * r['cpu'] / max(r['records'], 1):.2f} us/record, lost {r['lost']}",
                  file=sys.stderr)
            r = run_perf(a.loops, a.settle, data)
            perf_runs.append(r)
            print(f"run {i + 1} perf:      {r['records']} records, {r['cpu']:.3f} s CPU "
                  f"(record {r['record_cpu']:.3f}, script {r['script_cpu']:.3f}), "
                  f"{1e6 * r['cpu'] / max(r['records'], 1):.2f} us/record", file=sys.stderr)
    per = lambda r: 1e6 * r["cpu"] / max(r["records"], 1)
    pw_us = median([per(r) for r in pw_runs])
    perf_us = median([per(r) for r in perf_runs])
    ratios = [per(p) / per(q) for p, q in zip(pw_runs, perf_runs)]
    print(f"\nsched:sched_switch storm (perf bench sched pipe -l {a.loops}), {a.runs} interleaved"
          f" runs, medians:\n")
    print("| monitor | records | CPU µs/record | × perf |")
    print("|---|---|---|---|")
    print(f"| perfwatch `-e sched:sched_switch -a --plain` > /dev/null | "
          f"{int(median([r['records'] for r in pw_runs]))} | {pw_us:.2f} | "
          f"{median(ratios):.2f} |")
    print(f"| `perf record -e sched:sched_switch -a` + `perf script` > /dev/null | "
          f"{int(median([r['records'] for r in perf_runs]))} | {perf_us:.2f} | 1 |")
    print(f"\nper-pair ratios: {', '.join(f'{x:.2f}' for x in ratios)}")


if __name__ == "__main__":
    main()
