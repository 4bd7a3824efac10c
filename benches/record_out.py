#!/usr/bin/env python3
"""Writing a recording (issue 25, -o): what `-o FILE` costs a live run, and how large its file
is beside `perf record`'s, side by side in one run.

Under the same load (a CPU-bound shell loop on every CPU and a loop of /bin/true forks, for
side-band records), for the same events, rate and duration, system-wide:
  1. perfwatch --quiet                (the live run without -o)
  2. perfwatch --quiet -o FILE        (the same run writing perf.data)
  3. perf record -o FILE              (the peer, same events, rate, duration)
An unmeasured perfwatch run first warms the caches; the two perfwatch runs then alternate
(--repeat times each) and their CPU and records are summed. Each one's CPU time is utime + stime of the process and its threads (wait4). perfwatch's
records come from its summary ("N records in"), perf's from `perf report --stats`. Printed:
CPU per record of 1 and 2 and their ratio (goal: 2 at most 1.2x of 1), and the file sizes,
whole and per sample, of 2 and 3 with their ratio (goal: at most 1.2x).

Usage: benches/record_out.py --perfwatch target/release/perfwatch [--duration 10]
       [--freq 4000] [--event cpu-clock] [-g]
Needs root (system-wide) and perf. Runs each of the three once.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recording import samples_in, timed  # noqa: E402


def start_load(secs):
    ncpu = os.cpu_count() or 1
    spin = ["timeout %d sh -c 'while :; do :; done'" % secs] * ncpu
    forks = ["timeout %d sh -c 'while :; do /bin/true; done'" % secs]
    return subprocess.Popen(["sh", "-c", " & ".join(spin + forks) + " ; wait"])


def records_of(stderr):
    m = re.search(r"perfwatch: (\d+) records in", stderr)
    return int(m.group(1)) if m else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--perfwatch", required=True)
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--freq", type=int, default=4000)
    ap.add_argument("--event", default="cpu-clock")
    ap.add_argument("-g", action="store_true", help="with call chains")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each perfwatch variant")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="pw-recout-")
    pw_file = os.path.join(tmp, "pw.data")
    perf_file = os.path.join(tmp, "perf.data")
    common = ["-a", "-e", a.event, "-F", str(a.freq)] + (["-g"] if a.g else [])
    d = str(a.duration)
    runs = {
        "perfwatch --quiet": [a.perfwatch, "--quiet", "-d", d] + common,
        "perfwatch --quiet -o FILE": [a.perfwatch, "--quiet", "-d", d, "-o", pw_file] + common,
        "perf record -o FILE": ["perf", "record", "-q", "-o", perf_file] + common
        + ["--", "sleep", d],
    }
    # A first run reads every binary's symbols cold: one unmeasured run warms the page
    # cache, then the two perfwatch runs alternate, --repeat times each, so that the load of
    # a shared machine falls on both alike.
    print("warm-up run (not measured)", flush=True)
    load = start_load(int(a.duration) + 3)
    timed(runs["perfwatch --quiet"])
    load.wait()
    order = ["perfwatch --quiet", "perfwatch --quiet -o FILE"] * a.repeat + ["perf record -o FILE"]
    totals = {k: [0.0, 0] for k in runs}
    size = {}
    for name in order:
        argv = runs[name]
        load = start_load(int(a.duration) + 3)
        cpu, wall, err, rss = timed(argv)
        load.wait()
        if name.startswith("perf record"):
            n = samples_in(perf_file)
            size[name] = os.path.getsize(perf_file)
        else:
            n = records_of(err)
            if "-o" in argv:
                size[name] = os.path.getsize(pw_file)
        totals[name][0] += cpu
        totals[name][1] += n
        print(f"{name:<28}{cpu:>8.2f} s CPU{wall:>8.2f} s wall{n:>10} records"
              f"{size.get(name, 0) / 1e6:>9.2f} MB", flush=True)
    (c0, n0), (c1, n1) = totals["perfwatch --quiet"], totals["perfwatch --quiet -o FILE"]
    n2 = samples_in(perf_file)
    s1, s2 = size["perfwatch --quiet -o FILE"], size["perf record -o FILE"]
    per0 = c0 / max(n0, 1) * 1e6
    per1 = c1 / max(n1, 1) * 1e6
    print(f"CPU per record ({a.repeat} runs each): without -o {per0:.2f} us, with -o "
          f"{per1:.2f} us: {per1 / max(per0, 1e-9):.2f}x (goal <= 1.2x)")
    pw_samples = samples_in(pw_file)
    b1 = s1 / max(pw_samples, 1)
    b2 = s2 / max(n2, 1)
    print(f"file: perfwatch {s1 / 1e6:.2f} MB for {pw_samples} samples ({b1:.1f} B/sample), "
          f"perf record {s2 / 1e6:.2f} MB for {n2} samples ({b2:.1f} B/sample): "
          f"{s1 / max(s2, 1):.2f}x whole, {b1 / max(b2, 1e-9):.2f}x per sample (goal <= 1.2x)")
    for f in (pw_file, perf_file):
        if os.path.exists(f):
            os.unlink(f)
    os.rmdir(tmp)


if __name__ == "__main__":
    main()
