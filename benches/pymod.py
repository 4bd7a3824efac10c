#!/usr/bin/env python3
"""CPU per record of perf's Python binding against the `perfwatch` module (issue 30), side by
side on the fork storm of the overhead harness, in one run:

  * binding    benches/twatch.py on /usr/bin/python3 with perf's binding (`import perf`)
  * as perf    the same twatch.py with `import perfwatch as perf`
  * watch()    `for ev in perfwatch.watch(events=["dummy"]): n += 1` (counting only)

    python3 benches/pymod.py --python VENV/bin/python [--count 20000] [--rounds 1]

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
import overhead  # noqa: E402  (run_stress, task_cpu_ns, seen_in, the regexes)

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


def run_row(argv, stress, count, settle, out_path, err_path):
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        p = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                             start_new_session=True)
    deadline = time.monotonic() + 30
    while b"twatch: ready" not in open(err_path, "rb").read():
        if p.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("%s never ready: %s" % (argv, open(err_path, "rb").read()))
        time.sleep(0.05)
    time.sleep(0.5)
    cpu0 = overhead.task_cpu_ns(p.pid)
    load = overhead.run_stress(stress, ["fork", "--count", str(count)])
    time.sleep(settle)
    cpu1 = overhead.task_cpu_ns(p.pid)
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
    a = ap.parse_args()
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
                              os.path.join(d, "err"))
                results[name].append(res)
                print("round %d %-38s %s" % (r + 1, name, res), file=sys.stderr, flush=True)
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
    print("CPU ns/rec: the monitor's CPU from just before the storm of %d forks to %.0f s after "
          "it, / its records; forks+exits: the worst round's share of the storm's children with "
          "both records printed; median of %d round(s)" % (a.count, a.settle, a.rounds))


if __name__ == "__main__":
    main()
