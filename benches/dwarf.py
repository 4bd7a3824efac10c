#!/usr/bin/env python3
"""`--call-graph dwarf`: perfwatch against `perf record --call-graph dwarf` + `perf script`,
side by side on one run of each workload, and the unwind step's speed.

Completeness. Each workload is stopped right after its exec;
`perf record --call-graph dwarf -e cpu-clock -F HZ -m 16M -p PID` and `perfwatch --json
--call-graph dwarf -e cpu-clock -F HZ -m 16M -p PID` both attach, then it runs: both sample
the same execution (perf's chains read with `perf script --no-inline`, see perf_samples). Per workload: the
samples each took, the share whose chain reaches `main` (or glibc's
`__libc_start_call_main`, which calls it, or `_start`), the difference in points, and the
total variation between the two folded-stack distributions (user frames outermost first, an
unnamed frame as `[binary]`; glibc's start frames and the entry point left out: perf 6.1
names them otherwise, names a stripped binary's entry `_start` where perfwatch leaves it
unnamed, and loses them in some runs of a process it attached to before its exec); `chance`:
the total variation two samplers of the same distribution show at these sample counts by
chance alone (see noise_floor; the TV is to be read against it); `TV bin`: the
same over the path through the binaries alone (names left aside: perf prints libc's
functions by its debug info's aliases and inlines, so the name-level figure also measures
naming). The workloads:
Debian's `python3 -c 'busy loop'` and `xz -9` of 8 MB of text at 1 kHz, `sort` of 6 M lines
at 4 kHz (its many distinct stacks need ~20 000 samples to bring chance below 0.05).

Speed. `cargo bench --bench dwarf` (the unwind step on 400 real python3 stacks, samples/s on
one core), beside `perf script`'s rate on a perf.data of the same python3 loop (samples
unwound and printed per second of its CPU: perf's whole report path, the nearest thing perf
has to the step). Run as root from the worktree:

    python3 benches/dwarf.py --perfwatch target/release/perfwatch
"""

import argparse
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time

START = {"_start", "__libc_start_call_main", "__libc_start_main", "__libc_start_main_impl"}


def stopped(argv):
    """The workload, stopped right after its exec (Popen returns once the exec is done), so
    that both monitors attach to the program itself: perf 6.1 attached to a shell that then
    execs the workload keeps the shell's libc mapping in some runs and cannot unwind out of
    libc."""
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    os.kill(p.pid, signal.SIGSTOP)
    for _ in range(1000):
        with open(f"/proc/{p.pid}/stat") as f:
            if f.read().rsplit(") ", 1)[1].startswith("T"):
                return p
        time.sleep(0.01)
    raise SystemExit("the workload never stopped")


def watching(p, what):
    """Wait until a monitor has attached (its stderr stays quiet; give it a moment)."""
    time.sleep(1.5)
    if p.poll() is not None:
        raise SystemExit(f"{what} ended early")


def perf_samples(data):
    # --no-inline: with inline expansion perf 6.1 prints real libc frames (read,
    # _IO_file_xsgetn, strcoll_l, memcpy, ... each at its own return address) as
    # "NAME (inlined)" with no binary; a reader that drops inlined lines drops real frames,
    # the innermost ones most of all (in sort: 42% of perf's samples then seemed to stop in sort
    # itself, against 31% of perfwatch's; 32% with --no-inline).
    out = subprocess.run(["perf", "script", "--no-inline", "-F", "ip,sym,dso", "-i", data],
                         capture_output=True, text=True).stdout
    samples = []
    for block in out.split("\n\n"):
        frames = []
        for line in block.splitlines():
            parts = line.strip().split(" ", 1)
            if len(parts) != 2 or " (" not in parts[1]:
                continue
            sym, dso = parts[1].rsplit(" (", 1)
            dso = dso.rstrip(")")
            if dso == "inlined":
                continue
            frames.append((sym.split("+0x")[0], dso))
        if frames:
            samples.append(frames)
    return samples


def perfwatch_samples(path):
    samples = []
    with open(path) as f:
        for line in f:
            v = json.loads(line)
            if v.get("type") != "sample":
                continue
            frames = [(c.get("sym") or "[unknown]", c.get("dso") or "[unknown]")
                      for c in v.get("callchain") or []]
            if frames:
                samples.append(frames)
    return samples


def reaches_main(frames):
    return any(s in ("main",) or s in START for s, _ in frames)


def key(frames):
    user = [(s.split("@@")[0], d) for s, d in reversed(frames) if not d.startswith("[kernel")]
    # The entry point: perf names a stripped binary's `_start`, perfwatch leaves it unnamed.
    if user and user[0][0] in ("_start", "[unknown]"):
        user = user[1:]
    out = [f"[{os.path.basename(d)}]" if s == "[unknown]" else s for s, d in user if s not in START]
    return ";".join(out)


def binaries(frames):
    """The path through the binaries, repeats folded (names left aside)."""
    out = []
    for s, d in reversed(frames):
        b = os.path.basename(d)
        if not d.startswith("[kernel") and (not out or out[-1] != b):
            out.append(b)
    return ";".join(out)


def shares(samples, key=key):
    d = {}
    for s in samples:
        k = key(s)
        d[k] = d.get(k, 0) + 1
    n = max(len(samples), 1)
    return {k: v / n for k, v in d.items()}


def side_by_side(perfwatch, argv, tmp, freq):
    target = stopped(argv)
    pid = str(target.pid)
    data = os.path.join(tmp, "perf.data")
    out = os.path.join(tmp, "pw.json")
    args = ["--call-graph", "dwarf", "-e", "cpu-clock", "-F", str(freq), "-m", "16M", "-p", pid]
    perf = subprocess.Popen(["perf", "record", "-q", *args, "-o", data],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out, "w") as f:
        pw = subprocess.Popen([perfwatch, "--json", *args], stdout=f, stderr=subprocess.PIPE)
        watching(perf, "perf record")
        watching(pw, "perfwatch")
        os.kill(target.pid, signal.SIGCONT)
        target.wait()
        perf.wait(timeout=60)
        _, err = pw.communicate(timeout=60)
    summary = [l for l in err.decode(errors="replace").splitlines()
               if "dwarf unwinding" in l or "lost by the kernel" in l]
    return perf_samples(data), perfwatch_samples(out), summary


def words(path, size):
    rng = random.Random(27)
    w = ["perf", "ring", "sample", "stack", "frame", "kernel", "symbol", "fold", "unwind"]
    with open(path, "w") as f:
        n = 0
        while n < size:
            line = " ".join(rng.choice(w) for _ in range(8)) + f" {rng.randrange(10**9)}\n"
            f.write(line)
            n += len(line)


def tv(a, b, key=key):
    sa, sb = shares(a, key), shares(b, key)
    return sum(abs(sa.get(k, 0) - sb.get(k, 0)) for k in set(sa) | set(sb)) / 2


def noise_floor(a, b, key=key, draws=20):
    """The total variation two samplers of one distribution show by chance alone at these
    sample counts: the mean over `draws` pairs of samples of len(a) and len(b) drawn from
    a and b pooled. A workload with many distinct stacks (sort's recursive merge: ~140 at
    1 500 samples) shows 0.14 between two honest samplers at 1 500 samples, 0.04 at 20 000."""
    pool = a + b
    rng = random.Random(27)
    t = [tv([rng.choice(pool) for _ in a], [rng.choice(pool) for _ in b], key) for _ in range(draws)]
    return sum(t) / len(t)


def completeness(perfwatch, tmp):
    text = os.path.join(tmp, "words")
    words(text, 8 << 20)
    lines = os.path.join(tmp, "lines")
    with open(lines, "w") as f:
        rng = random.Random(5)
        for _ in range(6_000_000):
            f.write(f"{rng.randrange(10**12)} {rng.randrange(10**6)}\n")
    # sort at 4 kHz: its recursive merge spreads the samples over many distinct stacks, and
    # the chance part of the total variation shrinks only with the sample count.
    workloads = [
        ("python3 busy loop", 1000, ["/usr/bin/python3", "-c", "x = 0\nfor i in range(30000000):\n    x += i * i\n"]),
        ("xz -9", 1000, ["xz", "-9", "-c", "-T1", text]),
        ("sort", 4000, ["sort", "-S", "256M", "--parallel=1", "-o", "/dev/null", lines]),
    ]
    print(f"{'workload':<20} {'perf n':>7} {'perfwatch n':>11} {'perf main':>9} {'pw main':>8} {'diff':>6} {'TV':>6} {'chance':>6} {'TV bin':>6}")
    for name, freq, argv in workloads:
        p, w, summary = side_by_side(perfwatch, argv, tmp, freq)
        rp = sum(map(reaches_main, p)) / max(len(p), 1)
        rw = sum(map(reaches_main, w)) / max(len(w), 1)
        print(f"{name:<20} {len(p):>7} {len(w):>11} {rp*100:>8.1f}% {rw*100:>7.1f}% {(rw-rp)*100:>+6.1f}"
              f" {tv(p, w):>6.3f} {noise_floor(p, w):>6.3f} {tv(p, w, binaries):>6.3f}")
        for line in summary:
            print("   ", line.strip())


def speed(tmp):
    bench = subprocess.run(["cargo", "bench", "--bench", "dwarf"], capture_output=True, text=True)
    lines = [l for l in bench.stdout.splitlines() if l.strip()]
    print("\n".join(lines) or bench.stderr[-2000:])
    data = os.path.join(tmp, "speed.data")
    subprocess.run(["perf", "record", "-q", "--call-graph", "dwarf", "-e", "cpu-clock", "-F", "1000",
                    "-o", data, "/usr/bin/python3", "-c",
                    "x = 0\nfor i in range(40000000):\n    x += i * i\n"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(["perf", "script", "-F", "ip,sym", "-i", data],
                         capture_output=True, text=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    n = sum(1 for b in out.split("\n\n") if b.strip())
    print(f"perf script (unwind + name + print): {n} samples in {cpu:.2f} s of CPU: {n / max(cpu, 1e-9):.0f} samples/s")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--perfwatch", default="target/release/perfwatch")
    ap.add_argument("--only", choices=["completeness", "speed"])
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if a.only in (None, "completeness"):
            completeness(a.perfwatch, tmp)
        if a.only in (None, "speed"):
            speed(tmp)


if __name__ == "__main__":
    sys.exit(main())
