"""Per-thread time on a CPU from /proc, for the benchmarks that measure what a process costs.

/proc/PID/task/*/schedstat's first field counts in nanoseconds, where utime+stime count in
clock ticks; it covers the live threads only (one that ended takes its time with it).
"""

import os


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
