"""perfwatch's own `Core` module for scripts written for `perf script -s`.

perfwatch serves this when perf's Perf-Trace-Util library is not installed (or does not
pass the ownership checks). It was written for perfwatch after the behaviour perf's
scripts rely on: the flag and symbolic value tables that perfwatch fills from the
tracepoints' print formats (define_*), the lookups over them (flag_str, symbol_str), and
the small helpers (autodict, trace_flag_str, taskState, EventHeaders).
"""

from collections import defaultdict


def autodict():
    """A dict whose missing keys are new autodicts: `d[a][b][c] += 1` after a TypeError."""
    return defaultdict(autodict)


# (event name, field name) -> {"delim": str, "values": {int: str}} / {"values": {int: str}}
flag_fields = autodict()
symbolic_fields = autodict()


def define_flag_field(event_name, field_name, delim):
    flag_fields[event_name][field_name]["delim"] = delim


def define_flag_value(event_name, field_name, value, field_str):
    flag_fields[event_name][field_name]["values"][value] = field_str


def define_symbolic_field(event_name, field_name):
    # The values alone make the table.
    return None


def define_symbolic_value(event_name, field_name, value, field_str):
    symbolic_fields[event_name][field_name]["values"][value] = field_str


def _table(tables, event_name, field_name):
    event = tables.get(event_name)
    if not event:
        return None
    return event.get(field_name) or None


def flag_str(event_name, field_name, value):
    """The names of the flags set in `value`, lowest bit first, joined by the field's
    delimiter (spaced); the name of 0 when `value` is 0 and 0 has one."""
    table = _table(flag_fields, event_name, field_name)
    if table is None:
        return ""
    names = table.get("values") or {}
    delim = table.get("delim")
    if not value and 0 in names:
        return names[0]
    parts = []
    for bit in sorted(k for k in names if k):
        if value & bit == bit:
            parts.append(names[bit])
            value &= ~bit
    return (" %s " % delim if delim else "").join(parts)


def symbol_str(event_name, field_name, value):
    """The name `value` has in the field's symbolic table, "" when none."""
    table = _table(symbolic_fields, event_name, field_name)
    if table is None:
        return ""
    return (table.get("values") or {}).get(value, "")


_TRACE_FLAGS = (
    (0x01, "IRQS_OFF"),
    (0x02, "IRQS_NOSUPPORT"),
    (0x04, "NEED_RESCHED"),
    (0x08, "HARDIRQ"),
    (0x10, "SOFTIRQ"),
)


def trace_flag_str(value):
    """common_flags as names joined by " | "; NONE for 0."""
    if not value:
        return "NONE"
    return " | ".join(name for bit, name in _TRACE_FLAGS if value & bit == bit)


def taskState(state):
    return {0: "R", 1: "S", 2: "D", 64: "DEAD"}.get(state, "Unknown")


class EventHeaders:
    """The common arguments of a tracepoint handler, kept together."""

    def __init__(self, common_cpu, common_secs, common_nsecs, common_pid, common_comm,
                 common_callchain):
        self.cpu = common_cpu
        self.secs = common_secs
        self.nsecs = common_nsecs
        self.pid = common_pid
        self.comm = common_comm
        self.callchain = common_callchain

    def ts(self):
        return self.secs * 1000000000 + self.nsecs

    def ts_format(self):
        return "%d.%d" % (self.secs, int(self.nsecs / 1000))
