#!/usr/bin/env python3
"""Peak RSS of perfwatch's TUI against `perf top`, both with `--call-graph dwarf`, while 50
distinct binaries run: 50 copies of Debian's python3.11 (each its own file, so its own
unwind tables), each in a busy loop. Both run system-wide, `-e cpu-clock -F 1000`, in a
160x45 pty for SECONDS, one after the other (benches/vs_perf_top.py's harness); printed:
CPU ms/s over the steady part, and peak RSS (VmHWM). Run as root:

    python3 benches/dwarf_memory.py --perfwatch target/release/perfwatch [--seconds 15]
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vs_perf_top import run_in_pty  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--perfwatch", default="target/release/perfwatch")
    ap.add_argument("--binaries", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=15.0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        try:
            for i in range(a.binaries):
                exe = os.path.join(tmp, f"py{i}")
                shutil.copy("/usr/bin/python3.11", exe)
                procs.append(subprocess.Popen(
                    [exe, "-c", "import time\nx = 0\nwhile True:\n    x += 1\n"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            ev = ["-a", "-e", "cpu-clock", "-F", "1000", "--call-graph", "dwarf"]
            pw = run_in_pty([a.perfwatch] + ev, a.seconds, 3.0)
            pt = run_in_pty(["perf", "top", "-e", "cpu-clock", "-F", "1000", "--call-graph", "dwarf"],
                            a.seconds, 3.0)
        finally:
            for p in procs:
                p.kill()
                p.wait()
    print(f"{a.binaries} distinct binaries (python3.11 copies), busy; {a.seconds:.0f} s each, --call-graph dwarf")
    print(f"perfwatch TUI: {pw[0]:.1f} ms CPU/s, peak RSS {pw[1]:.1f} MiB")
    print(f"perf top:      {pt[0]:.1f} ms CPU/s, peak RSS {pt[1]:.1f} MiB")
    print(f"RSS ratio perfwatch / perf top: {pw[1] / pt[1]:.2f}")


if __name__ == "__main__":
    if os.geteuid() != 0:
        sys.exit("run as root")
    main()
