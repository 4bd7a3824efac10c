#!/usr/bin/env python3
"""Issue 29's no-stall measure: N freshly copied binaries, each run once, under
`perfwatch --json -a -F 999 -e cpu-clock`; some of them (--slow K) on a FUSE mount that holds
perfwatch's reads HOLD seconds (tests/helpers/fuse_hold.py, fusepy), read with
--read-user-fs so that their reads really are slow.

Prints:
- the longest gap between two pieces of perfwatch's stdout while the binaries run (events
  keep arriving all along: the machine is sampled at 999 Hz per CPU);
- the share of the local copies' samples that are named (sym not null), and the share of
  all the copies' samples.

Each binary is a small C program (a named function spun for SPIN_MS) compiled once and
copied N times (a fresh inode each: each copy is read on its own). Two run at a time. Run as
root; it takes /tmp/perfwatch-bench.lock so that no other benchmark runs beside it:

    python3 benches/no_stall.py --perfwatch target/release/perfwatch [--n 2000] [--slow 20]
    python3 benches/no_stall.py --perfwatch OLD --old ...   # a build before --read-user-fs
"""

import argparse
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

SPIN_C = r"""
#include <stdlib.h>
#include <time.h>
volatile unsigned long sink;
__attribute__((noinline)) void stall_bench_spin(void) { for (int i = 0; i < 1000; i++) sink += i; }
int main(int argc, char **argv) {
    struct timespec t0, t;
    long ms = argc > 1 ? atol(argv[1]) : 10;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        stall_bench_spin();
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
    return 0;
}
"""

HOLD_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                           "helpers", "fuse_hold.py")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perfwatch", required=True)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--slow", type=int, default=20, help="copies on the held FUSE mount")
    ap.add_argument("--hold", type=float, default=3.0)
    ap.add_argument("--spin-ms", type=int, default=10)
    ap.add_argument("--same", action="store_true",
                    help="run one local copy N times (nothing new to read: the floor)")
    ap.add_argument("--old", action="store_true",
                    help="a perfwatch from before --read-user-fs (it reads such files anyway)")
    ap.add_argument("--python", default="/usr/bin/python3", help="a python3 with fusepy")
    a = ap.parse_args()

    lock = open("/tmp/perfwatch-bench.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    work = tempfile.mkdtemp(prefix="pw-nostall-")
    server = None
    mnt = os.path.join(work, "mnt")
    try:
        src = os.path.join(work, "spin.c")
        with open(src, "w") as f:
            f.write(SPIN_C)
        proto = os.path.join(work, "proto")
        subprocess.run(["cc", "-O1", "-o", proto, src], check=True)
        local = os.path.join(work, "local")
        held = os.path.join(work, "held")
        os.makedirs(local)
        os.makedirs(held)
        os.makedirs(mnt)
        bins = []
        for i in range(a.n):
            on_fuse = i % max(1, a.n // max(1, a.slow)) == 0 and sum(
                1 for b in bins if b.startswith(mnt)) < a.slow
            d = held if on_fuse else local
            p = os.path.join(d, f"pwstall{0 if a.same else i}")
            if not os.path.exists(p):
                shutil.copy(proto, p)
            bins.append(os.path.join(mnt, f"pwstall{i}") if on_fuse else p)
        if a.slow:
            server = subprocess.Popen([a.python, HOLD_SERVER, held, mnt, str(a.hold),
                                       os.path.join(work, "log")])
            for _ in range(200):
                with open("/proc/self/mountinfo") as f:
                    if any(l.split()[4] == mnt for l in f):
                        break
                time.sleep(0.05)
            else:
                sys.exit("the FUSE mount never came")

        args = [a.perfwatch, "--json", "-a", "-F", "999", "-e", "cpu-clock"]
        if a.slow and not a.old:
            args.append("--read-user-fs")
        err = open(os.environ.get("NOSTALL_STDERR") or os.path.join(work, "stderr"), "w+")
        pw = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err)
        arrivals = []
        chunks = []

        def reader():
            fd = pw.stdout.fileno()
            while True:
                b = os.read(fd, 1 << 16)
                if not b:
                    return
                arrivals.append(time.monotonic())
                chunks.append(b)

        t = threading.Thread(target=reader)
        t.start()
        time.sleep(3)  # started, kallsyms read
        start = time.monotonic()
        queue = list(bins)
        running = []
        while queue or running:
            running = [p for p in running if p.poll() is None]
            while queue and len(running) < 2:
                running.append(subprocess.Popen([queue.pop(0), str(a.spin_ms)]))
            time.sleep(0.001)
        end = time.monotonic()
        time.sleep(2)
        pw.send_signal(2)
        stop = time.monotonic()
        try:
            pw.wait(timeout=30)
            stopped = f"{time.monotonic() - stop:.1f} s"
        except subprocess.TimeoutExpired:
            # A held read keeps it: let the server go (its reads fail), then it ends.
            stopped = "not within 30 s"
            if server:
                server.kill()
                server.wait()
                server = None
            pw.wait(timeout=60)
        t.join(timeout=30)

        # The window's edges count: a perfwatch that writes nothing while they run has
        # one gap as long as the run.
        during = [start] + [x for x in arrivals if start <= x <= end] + [end]
        gaps = [b - x for x, b in zip(during, during[1:])]
        longest = max(gaps) if gaps else float("nan")
        text = b"".join(chunks).decode("utf-8", "replace")
        local_total = local_named = all_total = all_named = 0
        for line in text.splitlines():
            if 'pwstall' not in line or '"sample"' not in line:
                continue
            try:
                v = json.loads(line)
            except ValueError:
                continue
            if v.get("type") != "sample" or "pwstall" not in (v.get("dso") or ""):
                continue
            named = v.get("sym") is not None
            all_total += 1
            all_named += named
            if not v["dso"].startswith(mnt):
                local_total += 1
                local_named += named
        print(f"binaries: {a.n} ({a.slow} on a FUSE mount holding reads {a.hold} s), "
              f"run in {end - start:.1f} s")
        print(f"SIGINT to exit: {stopped}")
        print(f"longest stdout gap while they ran: {longest * 1000:.0f} ms "
              f"({len(during) - 2} writes)")
        print(f"local copies' samples named: {local_named}/{local_total} "
              f"({100 * local_named / max(1, local_total):.1f}%)")
        err.seek(0)
        notes = [l.strip() for l in err if "pwstall" in l]
        print(f"notes about the copies: {len(notes)}; the first: {notes[:3]}")
        print(f"all copies' samples named: {all_named}/{all_total} "
              f"({100 * all_named / max(1, all_total):.1f}%)")
    finally:
        if server:
            server.kill()
            server.wait()
            subprocess.run(["umount", "-l", mnt], stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
