#!/usr/bin/env python3
"""CPU per record of perf's Python binding against the `perfwatch` module (issue 30), side by
side on the fork storm of the overhead harness, in one run:

  * binding    benches/twatch.py on /usr/bin/python3 with perf's binding (`import perf`)
  * as perf    the same twatch.py with `import perfwatch as perf`
  * watch()    `for ev in perfwatch.watch(events=["dummy"]): n += 1` (counting only)
  * own loop   twatch.py's loop alone over premade Python objects (no monitor): the floor

    python3 benches/pymod.py --python VENV/bin/python [--count 20000] [--rounds 1]
                             [--stress PATH] [--unbuffered]

VENV is a virtualenv with the module installed (`python3 -m venv VENV && VENV/bin/pip
install ./python`). Needs root. Per row: the monitor's CPU (every thread's schedstat) from
just before the storm to the end of the settle, divided by the records it handled; forks and
exits of the storm's children seen in its output (the twatch rows; the watch() row counts
only, so its completeness is its lost and dropped counters); the ratio to the binding.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import overhead  # noqa: E402  (run_stress, on_cpu_ns, seen_in, the regexes)

COUNT_LOOP = r"""
import signal, sys
import perfwatch
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
w = perfwatch.watch(events=["dummy"])
sys.stderr.write("twatch: ready\n"); sys.stderr.flush()
n = 0
try:
    for ev in w:
        n += 1
        if stop:
            break
except KeyboardInterrupt:
    pass
s = w.stats()
w.close()
sys.stderr.write("twatch: %d records, lost %d (dropped %d)\n" % (n, s["lost"], s["dropped"]))
"""


# twatch.py's own per-record work without any monitor: its loop (type checks, format of the
# three getters and str(event), write) over premade Python objects shaped as the storm's fork
# records, CPU per record. It is the part of every twatch row that no binding can remove.
OWN_LOOP = r"""
import os, sys, time
N = int(sys.argv[1])
class Ev:
    __slots__ = ("type", "sample_cpu", "sample_pid", "sample_tid", "text")
    def __init__(self, i):
        self.type, self.sample_cpu, self.sample_pid, self.sample_tid = 7, i & 1, 100000 + i, 100000 + i
        self.text = "{ type: fork, pid: %d, ppid: 4242, tid: %d, ptid: 4242, time: %d}" % (
            100000 + i, 100000 + i, 123456789012 + i)
    def __str__(self):
        return self.text
class perf:
    RECORD_LOST, RECORD_THROTTLE = 2, 5
events = [Ev(i) for i in range(N)]
out = open(sys.argv[2], "w")
records = 0
t0 = time.process_time()
for event in events:
    if not event:
        break
    records += 1
    t = event.type
    if t == perf.RECORD_LOST:
        pass
    elif t == perf.RECORD_THROTTLE:
        pass
    out.write("cpu: {0}, pid: {1}, tid: {2} {3}\n".format(
        event.sample_cpu, event.sample_pid, event.sample_tid, event))
out.flush()
print((time.process_time() - t0) * 1e9 / N)
"""


def own_loop_ns(python, records, out_path, env):
    """CPU ns per record of twatch's own loop (OWN_LOOP) over `records` premade events."""
    r = subprocess.run([python, "-c", OWN_LOOP, str(records), out_path], env=env,
                       capture_output=True, text=True, check=True, timeout=120)
    return float(r.stdout.strip())


def run_row(argv, stress, count, settle, out_path, err_path, env):
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        p = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                             start_new_session=True, env=env)
    deadline = time.monotonic() + 30
    while b"twatch: ready" not in open(err_path, "rb").read():
        if p.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("%s never ready: %s" % (argv, open(err_path, "rb").read()))
        time.sleep(0.05)
    time.sleep(0.5)
    cpu0 = overhead.on_cpu_ns(p.pid)
    load = overhead.run_stress(stress, ["fork", "--count", str(count)])
    time.sleep(settle)
    cpu1 = overhead.on_cpu_ns(p.pid)
    p.send_signal(signal.SIGINT)
    p.wait(timeout=60)
    err = open(err_path, "rb").read().decode(errors="replace")
    m = overhead.TWATCH_RE.search(err)
    if not m:
        raise RuntimeError("%s said no summary: %s" % (argv, err))
    records, lost = int(m.group(1)), int(m.group(2))
    data = open(out_path, "rb").read()
    seen = overhead.seen_in(data, overhead.PLAIN_TASK_RE, load["pid"], load["pids"])
    return {"records": records, "lost": lost, "cpu_ns": cpu1 - cpu0,
            "ns_per_record": (cpu1 - cpu0) / max(records, 1),
            "seen": seen, "want": 2 * len(load["pids"]), "summary": err.strip().splitlines()[-1]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True, help="a virtualenv's python with perfwatch installed")
    ap.add_argument("--stress", default=os.path.join(HERE, "..", "target", "release", "perfwatch-stress"))
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--settle", type=float, default=2.0)
    ap.add_argument("--unbuffered", action="store_true",
                    help="keep PYTHONUNBUFFERED from the environment (one write(2) per line "
                    "in every row; by default the rows run without it, as python3 does)")
    a = ap.parse_args()
    env = dict(os.environ)
    if not a.unbuffered:
        # twatch.py's stdout is a file: block-buffered, unless the environment says
        # otherwise -- then every row pays a write(2) per record, which is neither monitor's.
        env.pop("PYTHONUNBUFFERED", None)
    with tempfile.TemporaryDirectory(dir=overhead.SHM) as d:
        as_perf = os.path.join(d, "twatch_perfwatch.py")
        with open(overhead.TWATCH) as f:
            src = f.read()
        with open(as_perf, "w") as f:
            f.write(src.replace("\nimport perf\n", "\nimport perfwatch as perf\n"))
        loop = os.path.join(d, "count.py")
        with open(loop, "w") as f:
            f.write(COUNT_LOOP)
        rows = [("perf binding, twatch.py", [overhead.SYS_PYTHON, overhead.TWATCH]),
                ("import perfwatch as perf, twatch.py", [a.python, as_perf]),
                ("perfwatch.watch(), counting", [a.python, loop])]
        results = {name: [] for name, _ in rows}
        for r in range(a.rounds):
            for name, argv in rows:
                res = run_row(argv, a.stress, a.count, a.settle, os.path.join(d, "out"),
                              os.path.join(d, "err"), env)
                results[name].append(res)
                print("round %d %-38s %s" % (r + 1, name, res), file=sys.stderr, flush=True)
    own = own_loop_ns(a.python, max(results[rows[0][0]][0]["records"], 1000),
                      os.path.join(overhead.SHM, "pymod_own_loop.out"), env)
    os.unlink(os.path.join(overhead.SHM, "pymod_own_loop.out"))
    base = None
    print("%-38s %10s %12s %8s %14s %s" % ("row", "records", "CPU ns/rec", "x perf", "forks+exits", "lost"))
    for name, _ in rows:
        rs = results[name]
        ns = sorted(x["ns_per_record"] for x in rs)[len(rs) // 2]
        base = base or ns
        seen = min(x["seen"] / x["want"] for x in rs)
        counting = name.endswith("counting")
        print("%-38s %10d %12.0f %8.3f %14s %s" % (
            name, rs[0]["records"], ns, ns / base,
            "n/a (counts)" if counting else "%.2f%%" % (100 * seen),
            max(x["lost"] for x in rs)))
    print("%-38s %10s %12.0f %8.3f %14s %s" % ("twatch.py's own loop, no monitor", "", own,
                                               own / base, "", ""))
    print("CPU ns/rec: the monitor's CPU from just before the storm of %d forks to %.0f s after "
          "it, / its records (own loop: twatch's loop alone over premade objects, the share "
          "of every twatch row no binding can remove); forks+exits: the worst round's share of the storm's children with "
          "both records printed; median of %d round(s); stdout %s" % (
              a.count, a.settle, a.rounds,
              "unbuffered (PYTHONUNBUFFERED)" if a.unbuffered and "PYTHONUNBUFFERED" in env
              else "block-buffered"))


if __name__ == "__main__":
    main()
