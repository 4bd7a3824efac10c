"""perfwatch's own `Util` module for scripts written for `perf script -s`.

Served when perf's Perf-Trace-Util library is not installed (or does not pass the
ownership checks); written for perfwatch after the behaviour perf's scripts rely on. As
with perf's, syscall_name() gives names through the `audit` module when it can be
imported, else the number as text.
"""

import errno
import os
import sys

FUTEX_WAIT = 0
FUTEX_WAKE = 1
FUTEX_PRIVATE_FLAG = 128
FUTEX_CLOCK_REALTIME = 256
FUTEX_CMD_MASK = ~(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME)

NSECS_PER_SEC = 1000000000


def avg(total, n):
    return total / n


def nsecs(secs, nsecs):
    return secs * NSECS_PER_SEC + nsecs


def nsecs_secs(nsecs):
    # True division, as perf's: a float.
    return nsecs / NSECS_PER_SEC


def nsecs_nsecs(nsecs):
    return nsecs % NSECS_PER_SEC


def nsecs_str(nsecs):
    # perf's returns a one-element tuple (a trailing comma); scripts format it with `%`,
    # which takes the tuple as its arguments. Kept so that they print the same.
    return ("%5u.%09u" % (nsecs_secs(nsecs), nsecs_nsecs(nsecs)),)


def add_stats(stats, key, value):
    """stats[key] = (min, max, running avg, count), updated with `value`."""
    if key not in stats:
        stats[key] = (value, value, value, 1)
        return
    lo, hi, mean, count = stats[key]
    stats[key] = (min(lo, value), max(hi, value), (mean + value) / 2, count + 1)


def clear_term():
    print("\x1b[H\x1b[2J")


_audit = None
_machine = None
try:
    import audit as _audit

    _machine = {
        "x86_64": "MACH_86_64",
        "alpha": "MACH_ALPHA",
        "ia64": "MACH_IA64",
        "ppc": "MACH_PPC",
        "ppc64": "MACH_PPC64",
        "ppc64le": "MACH_PPC64LE",
        "s390": "MACH_S390",
        "s390x": "MACH_S390X",
        "i386": "MACH_X86",
        "i586": "MACH_X86",
        "i686": "MACH_X86",
        "armeb": "MACH_ARMEB",
    }.get(os.uname()[4])
    _machine = getattr(_audit, _machine) if _machine else None
except Exception:
    _audit = None
if _audit is None or _machine is None:
    print("perfwatch's Util: the audit module cannot be imported: syscall_name() gives "
          "numbers", file=sys.stderr)


def syscall_name(id):
    try:
        return _audit.audit_syscall_to_name(id, _machine)
    except Exception:
        return str(id)


def strerror(nr):
    try:
        return errno.errorcode[abs(nr)]
    except Exception:
        return "Unknown %d errno" % nr
