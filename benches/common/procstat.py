"""Per-thread time on a CPU from /proc, for the benchmarks that measure what a process costs.

/proc/PID/task/*/schedstat's first field counts in nanoseconds, where utime+stime count in
clock ticks; it covers the live threads only (one that ended takes its time with it).
"""

import os
import signal
import time


def tids(pid):
    """The live threads of process `pid`, or None when it is gone."""
    try:
        return os.listdir("/proc/%d/task" % pid)
    except OSError:
        return None


def on_cpu_ns(pid):
    """Sum of the on-CPU ns of every live thread of `pid` so far; None when it is gone."""
    threads = tids(pid)
    if threads is None:
        return None
    total = 0
    for t in threads:
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return total


def threads_named(pid, prefix):
    """How many live threads of `pid` have a name that starts with `prefix`."""
    n = 0
    for t in tids(pid) or []:
        try:
            with open("/proc/%d/task/%s/comm" % (pid, t)) as f:
                n += f.read().startswith(prefix)
        except OSError:
            pass
    return n


class CpuTracker:
    """On-CPU ns of a process over a window, threads that end inside it included: each
    thread's schedstat is read at start(), at every poll() and at stop(), and a thread that
    ended counts up to where it was last seen (poll often: every 100 ms or so). Summing the
    live threads only (on_cpu_ns) goes wrong, even negative, when a thread ends inside it."""

    def __init__(self, pid):
        self.pid = pid
        self.first = {}
        self.last = {}

    def _read(self):
        got = {}
        for t in tids(self.pid) or []:
            try:
                with open("/proc/%d/task/%s/schedstat" % (self.pid, t)) as f:
                    got[t] = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
        return got

    def start(self):
        self.first = self._read()
        self.last = dict(self.first)

    def poll(self):
        self.last.update(self._read())

    def stop(self):
        """The ns on CPU since start()."""
        self.poll()
        return sum(ns - self.first.get(t, 0) for t, ns in self.last.items())


def wait_or_kill(pid, seconds):
    """Wait up to `seconds` for our child `pid` to end, else SIGKILL it: its wait status."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    return os.waitpid(pid, 0)[1]
