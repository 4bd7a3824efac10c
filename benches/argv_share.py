#!/usr/bin/env python3
"""What share of short-lived execs get their command line (issue 22's measure).

Runs `perfwatch --json -e dummy -- sh -c 'for i in $(seq N); do /bin/echo $i >/dev/null;
done; sleep 0.1'` REPS times and counts the `/bin/echo` exec records whose `argv` is a list
(and, of those, how many were read from the exec's stack, `argv_source: "exec"`), and
whether `sleep 0.1` got its own. With `--peer BIN`, the runs alternate between the two
binaries (perfwatch, peer, perfwatch, ...), so that both see the same machine.

tracefs must be mounted for the exec watcher; the script mounts it when it is not, and
unmounts it at the end. It takes /tmp/perfwatch-bench.lock for the whole run, so that no
other benchmark runs beside it. Run as root, with release builds:

    python3 benches/argv_share.py --perfwatch target/release/perfwatch [--peer OLD] [--reps 3]
"""

import argparse
import fcntl
import json
import statistics
import subprocess
import sys

TRACEFS = "/sys/kernel/tracing"


def mounted():
    with open("/proc/self/mounts") as f:
        return any(l.split()[1:3] == [TRACEFS, "tracefs"] for l in f)


def one_run(binary, n, timeout):
    script = f"for i in $(seq {n}); do /bin/echo $i >/dev/null; done; sleep 0.1"
    out = subprocess.run(
        [binary, "--json", "-e", "dummy", "-d", str(timeout), "--", "sh", "-c", script],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout + 30,
    ).stdout
    echo, with_argv, from_exec, sleep = 0, 0, 0, False
    for line in out.splitlines():
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if v.get("type") != "comm" or not v.get("exec"):
            continue
        if v.get("comm") == "echo":
            echo += 1
            if isinstance(v.get("argv"), list):
                with_argv += 1
                from_exec += v.get("argv_source") == "exec"
        elif v.get("comm") == "sleep":
            sleep = v.get("argv") == ["sleep", "0.1"]
    return echo, with_argv, from_exec, sleep


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perfwatch", required=True)
    ap.add_argument("--peer", help="another build, run alternately")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--execs", type=int, default=200)
    ap.add_argument("--timeout", type=int, default=60)
    a = ap.parse_args()
    lock = open("/tmp/perfwatch-bench.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    ours = not mounted()
    if ours:
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], check=True)
    try:
        binaries = [a.perfwatch] + ([a.peer] if a.peer else [])
        shares = {b: [] for b in binaries}
        for rep in range(a.reps):
            for b in binaries:
                echo, got, stack, sleep = one_run(b, a.execs, a.timeout)
                share = got / echo if echo else 0.0
                shares[b].append(share)
                print(
                    f"{b}: run {rep + 1}: {got}/{echo} /bin/echo execs with argv "
                    f"({stack} from the exec's stack), sleep 0.1 {'with' if sleep else 'without'} argv"
                )
        for b in binaries:
            print(f"{b}: median share {statistics.median(shares[b]):.1%}")
    finally:
        if ours:
            subprocess.run(["umount", TRACEFS])
    return 0


if __name__ == "__main__":
    sys.exit(main())
