#!/usr/bin/env python3
"""The line writers' cost on the fork storm (issue 29), side by side with perf record.

    python3 benches/line_writers.py [--count 20000] [--reps 3] [--bin DIR [--bin DIR2]] [--to-file]

Per repetition, interleaved: `perfwatch --plain -e dummy -a > /dev/null` and then
`perf record -e dummy -a -o FILE`, each started, waited for until ready, then the load
`perfwatch-stress fork --count N` runs, then the monitor is stopped with SIGINT.

CPU per record = the on-CPU time of ALL the monitor's threads *during the storm* (the sum of
/proc/PID/task/*/schedstat's first field, ns, read just before the load starts and just
after it ends; threads that end in between are counted up to their last reading, which a
thread of a long-lived monitor does not do) divided by the load's records (2 per fork: its
FORK and its EXIT). Nothing lost: perfwatch's summary says 0 lost by the kernel and 0
dropped (or, with --to-file, its FORK and EXIT lines of the load's pids are counted in a
/dev/shm file: that adds tmpfs page allocation to its writer thread's CPU); perf's side is
the FORK+EXIT count perf report --stats gives (background tasks included).
Prints both, and the ratio. Python 3 standard library only; needs root and /usr/bin/perf.
"""

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "common"))
from procstat import on_cpu_ns, threads_named, tids  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHM = "/dev/shm" if os.path.isdir("/dev/shm") else "/tmp"
TASK_RE = re.compile(rb"type: (fork|exit), pid: (\d+), ppid: (\d+)")


def per_thread_ns(pid):
    """{thread name (digits folded to N): [on-CPU ns, context switches]}."""
    out = {}
    for t in tids(pid) or []:
        try:
            with open("/proc/%d/task/%s/comm" % (pid, t)) as f:
                name = f.read().strip()
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                ns = int(f.read().split()[0])
            with open("/proc/%d/task/%s/status" % (pid, t)) as f:
                cs = sum(int(l.split()[1]) for l in f if "ctxt_switches" in l)
        except (OSError, ValueError, IndexError):
            continue
        key = re.sub(r"\d+$", "N", name)
        acc = out.setdefault(key, [0, 0])
        acc[0] += ns
        acc[1] += cs
    return out


def wait_ready(p, ready, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if p.poll() is not None:
            return False
        if ready():
            time.sleep(0.3)
            return True
        time.sleep(0.05)
    return False


def stop(p, timeout=20.0):
    if p.poll() is None:
        os.kill(p.pid, signal.SIGINT)
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def run_load(stress, count):
    out = subprocess.run([stress, "fork", "--count", str(count)], stdout=subprocess.PIPE,
                         check=True, timeout=600).stdout
    return json.loads(out)


LOST_RE = re.compile(rb"lost by the kernel: (\d+) records \(ring full\), \d+ samples; "
                     rb"dropped by perfwatch: (\d+)")


def one(kind, bindir, count, to_file, env):
    out_path = os.path.join(SHM, "line_writers.%s.%d" % (kind, os.getpid()))
    err_path = out_path + ".err"
    stress = os.path.join(bindir, "perfwatch-stress")
    if kind == "perfwatch":
        argv = [os.path.join(bindir, "perfwatch"), "--plain", "-e", "dummy", "-a"]
        out = open(out_path, "wb") if to_file else subprocess.DEVNULL
    else:
        argv = ["/usr/bin/perf", "record", "-q", "-e", "dummy", "-a", "-o", out_path]
        out = subprocess.DEVNULL
    err = open(err_path, "wb")
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                         start_new_session=True, env=dict(os.environ, **env))
    if out is not subprocess.DEVNULL:
        out.close()
    err.close()
    if kind == "perfwatch":
        ok = wait_ready(p, lambda: threads_named(p.pid, "perfwatch-cpu") > 0)
    else:
        ok = wait_ready(p, lambda: os.path.exists(out_path) and os.path.getsize(out_path) > 0)
        time.sleep(1.0)  # perf synthesises the existing tasks at start
    if not ok:
        stop(p)
        sys.exit("%s did not start: %s" % (kind, open(err_path, "rb").read()[-2000:]))
    before = on_cpu_ns(p.pid)
    threads_before = per_thread_ns(p.pid)
    report = run_load(stress, count)
    time.sleep(0.3)  # the last records reach the monitor (readers poll at most every 100 ms)
    after = on_cpu_ns(p.pid)
    threads_after = per_thread_ns(p.pid)
    stop(p)
    records = 2 * report["done"]
    pids = set(report["pids"])
    if kind == "perfwatch" and to_file:
        seen = 0
        with open(out_path, "rb") as f:
            for m in TASK_RE.finditer(f.read()):
                if int(m.group(2)) in pids:
                    seen += 1
    elif kind == "perfwatch":
        # To /dev/null: complete when perfwatch says nothing was lost nor dropped.
        with open(err_path, "rb") as f:
            m = LOST_RE.search(f.read())
        seen = records if m and int(m.group(1)) == 0 and int(m.group(2)) == 0 else -1
    else:
        dump = subprocess.run(["/usr/bin/perf", "report", "-i", out_path, "--stats", "-q"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=120)
        text = dump.stdout.decode("utf-8", "replace")
        forks = re.search(r"FORK events:\s+(\d+)", text)
        exits = re.search(r"EXIT events:\s+(\d+)", text)
        seen = (int(forks.group(1)) if forks else 0) + (int(exits.group(1)) if exits else 0)
    for path in (out_path, err_path):
        try:
            os.unlink(path)
        except OSError:
            pass
    threads = {k: [v[0] - threads_before.get(k, [0, 0])[0], v[1] - threads_before.get(k, [0, 0])[1]]
               for k, v in threads_after.items()}
    return {"ns_per_record": (after - before) / records, "records": records, "seen": seen,
            "threads": threads, "elapsed_s": report["elapsed_s"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--bin", action="append", default=[],
                    help="a directory with perfwatch and perfwatch-stress (default target/release); "
                    "given twice, both builds run interleaved (before/after)")
    ap.add_argument("--to-file", action="store_true",
                    help="perfwatch writes to a file in /dev/shm (its lines counted by pid) "
                    "instead of /dev/null (completeness from its lost/dropped counters)")
    ap.add_argument("--env", action="append", default=[], metavar="K=V",
                    help="an environment variable for perfwatch (experiments)")
    a = ap.parse_args()
    env = dict(kv.split("=", 1) for kv in a.env)
    bins = a.bin or [os.path.join(ROOT, "target", "release")]
    kinds = [("perfwatch", b) for b in bins] + [("perf", bins[0])]
    rows = {label(k, b, bins): [] for k, b in kinds}
    for rep in range(a.reps):
        for kind, bindir in kinds:
            r = one(kind, bindir, a.count, a.to_file, env if kind == "perfwatch" else {})
            name = label(kind, bindir, bins)
            rows[name].append(r)
            top = sorted(r["threads"].items(), key=lambda kv: -kv[1][0])
            print("rep %d %-9s %7.1f ns/record  seen %d of %d  storm %.2f s  threads: %s" % (
                rep, name, r["ns_per_record"], r["seen"], r["records"], r["elapsed_s"],
                ", ".join("%s %.1f ms %d cs" % (k, v[0] / 1e6, v[1]) for k, v in top[:5])), flush=True)
    pf = statistics.median(r["ns_per_record"] for r in rows["perf"])
    print("median CPU per fork/exit record during the storm, %d forks, %d reps:" % (a.count, a.reps))
    print("  perf record -e dummy -a: %.1f ns" % pf)
    for name, rs in rows.items():
        if name == "perf":
            continue
        pw = statistics.median(r["ns_per_record"] for r in rs)
        lost = [r["records"] - r["seen"] for r in rs]
        print("  %s --plain -e dummy -a: %.1f ns, %.2f x perf record (goal <= 175 ns); "
              "load records missing per rep (-1: lost/dropped counted): %s"
              % (name, pw, pw / pf if pf else 0, lost))


def label(kind, bindir, bins):
    if kind == "perf":
        return "perf"
    return "perfwatch" if len(bins) == 1 else "perfwatch[%s]" % bindir


if __name__ == "__main__":
    main()
