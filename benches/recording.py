#!/usr/bin/env python3
"""Reading a recording side by side (issue 25): `perfwatch -i big.data --plain > /dev/null`
and `perfwatch -i big.data --format perf > /dev/null` (perf script's own lines) against
`perf script -i big.data > /dev/null` on the same file of >= 1 M samples with call chains
(-g). Each reader's CPU time (utime + stime of the process and its threads, from wait4) and
wall time are printed with the ratio; the goals are perfwatch at <= 1/5 of perf script's
CPU with --plain, <= 1/2 with --format perf. With --compare, both perf-format outputs are
read again through pipes and compared sample by sample (how many are the same lines, and
how the others differ, with the first of each kind).

Without --data, the file is recorded first: `perf record -g -a -F 20000` over a CPU-bound
load on every CPU, long enough for --samples samples (the count is checked with
`perf report --stats`, and the recording made longer if it falls short).

With --script S.py (repeatable; a name alone is taken from perf's scripts directory), each
script also runs on the same file both ways: `perfwatch -i FILE --script S.py` against
`perf script -i FILE -s S.py` (issue 26: goal perfwatch <= 0.5x perf's CPU).

Usage: benches/recording.py --perfwatch target/release/perfwatch [--data big.data]
       [--samples 1000000] [--keep] [--compare] [--script syscall-counts.py --script stackcollapse.py]
Needs root (system-wide perf record) and perf. Runs each reader once.
"""

import argparse
import gzip
import os
import re
import subprocess
import sys
import tempfile
import time

PERF_SCRIPTS = "/usr/lib/perf-core/scripts/python"


def timed(argv):
    """Run argv with stdout to /dev/null; (CPU seconds, wall seconds, stderr tail, max RSS KiB)."""
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        err.seek(0)
        tail = err.read().decode(errors="replace")[-2000:]
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{argv[0]} exited with {code}:\n{tail}")
    return ru.ru_utime + ru.ru_stime, wall, tail, ru.ru_maxrss


def samples_in(path):
    out = subprocess.run(["perf", "report", "-i", path, "--stats"], capture_output=True,
                         text=True, check=True).stdout
    m = re.search(r"SAMPLE events:\s+(\d+)", out)
    return int(m.group(1)) if m else 0


def record(path, want):
    secs = max(5, want // 40000)
    while True:
        ncpu = os.cpu_count() or 1
        load = ["sh", "-c", " & ".join(["timeout %d sh -c 'while :; do :; done'" % secs] * ncpu)
                + " ; wait"]
        subprocess.run(["perf", "record", "-q", "-o", path, "-g", "-a", "-F", "20000", "--"] + load,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        n = samples_in(path)
        print(f"recorded {n} samples in {secs} s", flush=True)
        if n >= want:
            return n
        secs = int(secs * want / max(n, 1) * 1.1) + 1


def blocks(stream):
    """The samples of perf script's default output: a header line and its call chain's lines
    (a blank line after each sample with a chain; one line each without)."""
    block = []
    for line in stream:
        if line == b"\n":
            if block:
                yield block
            block = []
        elif not line.startswith(b"\t") and block:
            yield block
            block = [line]
        else:
            block.append(line)
    if block:
        yield block


def compare(perfwatch, data):
    """Read `perf script` and `perfwatch --format perf` on `data` side by side, sample by
    sample, and count how the samples that differ differ."""
    # Each output is written whole first (gzip -1 beside the data: a reader that waits on
    # the other would stall perfwatch's stdout, which gives up on a reader that stops).
    outs = []
    for argv in (["perf", "script", "-i", data], [perfwatch, "-i", data, "--format", "perf"]):
        path = f"{data}.{len(outs)}.txt.gz"
        with open(path, "wb") as f:
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            z = subprocess.Popen(["gzip", "-1"], stdin=p.stdout, stdout=f)
            p.stdout.close()
            p.wait()
            z.wait()
        outs.append(path)
    ps, pw = (gzip.open(path, "rb") for path in outs)
    n = same = 0
    kinds = {}
    first = {}
    for a, b in zip(blocks(ps), blocks(pw)):
        n += 1
        if a == b:
            same += 1
            continue
        if a[0] != b[0]:
            kind = "header line"
        elif len(a) != len(b):
            kind = "number of frames"
        else:
            x, y = next((x, y) for x, y in zip(a, b) if x != y)
            if b"[unknown]" in y and b"[unknown]" not in x:
                kind = "a frame perfwatch leaves [unknown]"
            elif b"[unknown]" in x and b"[unknown]" not in y:
                kind = "a frame perf leaves [unknown]"
            else:
                kind = "a frame named differently"
        kinds[kind] = kinds.get(kind, 0) + 1
        first.setdefault(kind, (a, b))
    rest_ps = sum(1 for _ in blocks(ps))
    rest_pw = sum(1 for _ in blocks(pw))
    for path in outs:
        os.unlink(path)
    print(f"compared: {n} samples side by side, {same} the same lines; perf script {rest_ps} "
          f"more, perfwatch {rest_pw} more")
    for kind, count in sorted(kinds.items(), key=lambda kv: -kv[1]):
        a, b = first[kind]
        print(f"  {count} differ in {kind}, first:\n    perf script: {b''.join(a[:4])!r}\n"
              f"    perfwatch:   {b''.join(b[:4])!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--perfwatch", required=True)
    ap.add_argument("--data")
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--keep", action="store_true", help="keep the recording made")
    ap.add_argument("--script", action="append", default=[],
                    help="a perf script to run both ways on the file")
    ap.add_argument("--no-plain", action="store_true", help="only the scripts' rows")
    ap.add_argument("--compare", action="store_true",
                    help="also compare --format perf's lines with perf script's")
    a = ap.parse_args()
    tmp = None
    data = a.data
    if data is None:
        tmp = tempfile.mkdtemp(prefix="pw-rec-")
        data = os.path.join(tmp, "big.data")
        record(data, a.samples)
    n = samples_in(data)
    size = os.path.getsize(data)
    print(f"file: {data}, {size / 1e6:.1f} MB, {n} samples", flush=True)
    # CPU times on a shared machine move with its load: said beside the figures.
    print("load average before: %.2f %.2f %.2f" % os.getloadavg(), flush=True)
    if not a.no_plain:
        rows = [("--plain", 5), ("--format perf", 2)]
        runs = []
        for flags, _ in rows:
            runs.append(timed([a.perfwatch, "-i", data] + flags.split()))
        perf_cpu, perf_wall, _, perf_rss = timed(["perf", "script", "-i", data])
        print(f"{'reader':<44}{'CPU s':>9}{'wall s':>9}{'samples':>10}{'max RSS MB':>12}")
        for (flags, _), (pw_cpu, pw_wall, pw_err, pw_rss) in zip(rows, runs):
            m = re.search(r"by type: sample (\d+)", pw_err)
            pw_samples = int(m.group(1)) if m else -1
            print(f"{'perfwatch -i FILE ' + flags + ' >/dev/null':<44}{pw_cpu:>9.2f}"
                  f"{pw_wall:>9.2f}{pw_samples:>10}{pw_rss / 1024:>12.0f}")
        print(f"{'perf script -i FILE >/dev/null':<44}{perf_cpu:>9.2f}{perf_wall:>9.2f}{n:>10}"
              f"{perf_rss / 1024:>12.0f}")
        for (flags, goal), (pw_cpu, *_) in zip(rows, runs):
            print(f"ratio {flags} (perf script CPU / perfwatch CPU): "
                  f"{perf_cpu / max(pw_cpu, 1e-9):.1f}x (goal >= {goal}x)")
        print("load average after: %.2f %.2f %.2f" % os.getloadavg(), flush=True)
        if a.compare:
            compare(a.perfwatch, data)
    for script in a.script:
        path = script if os.sep in script else os.path.join(PERF_SCRIPTS, script)
        name = os.path.basename(path)
        pw_cpu, pw_wall, _, pw_rss = timed([a.perfwatch, "-i", data, "--script", path])
        perf_cpu, perf_wall, _, perf_rss = timed(["perf", "script", "-i", data, "-s", path])
        print(f"{name}: perfwatch -i --script {pw_cpu:.2f} s CPU ({pw_wall:.2f} s wall, "
              f"{pw_rss / 1024:.0f} MB), perf script -s {perf_cpu:.2f} s CPU ({perf_wall:.2f} s "
              f"wall, {perf_rss / 1024:.0f} MB): perfwatch at {pw_cpu / max(perf_cpu, 1e-9):.2f}x "
              f"of perf's CPU (goal <= 0.5x)", flush=True)
    if tmp and not a.keep:
        os.unlink(data)
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
