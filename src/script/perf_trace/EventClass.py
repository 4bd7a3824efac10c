"""perfwatch's own `EventClass` module for scripts written for `perf script -s`.

Served with Core and Util when perf's Perf-Trace-Util library is not used; written for
perfwatch after the API perf's scripts use (stackcollapse.py imports it,
event_analyzing_sample.py builds events with create_event()). PEBS records are told apart
by the size of their raw buffer, as perf's module does; perfwatch never records them, so
its events are PerfEvent.
"""

import struct

EVTYPE_GENERIC = 0
EVTYPE_PEBS = 1
EVTYPE_PEBS_LL = 2
EVTYPE_IBS = 3

_PEBS_SIZE = 144
_PEBS_NHM_SIZE = 176
_PEBS_REGS = ("flags", "ip", "ax", "bx", "cx", "dx", "si", "di", "bp", "sp")
_PEBS_LL = ("status", "dla", "dse", "lat")


def create_event(name, comm, dso, symbol, raw_buf):
    kind = {_PEBS_SIZE: PebsEvent, _PEBS_NHM_SIZE: PebsNHM}.get(len(raw_buf), PerfEvent)
    return kind(name, comm, dso, symbol, raw_buf)


class PerfEvent(object):
    event_num = 0

    def __init__(self, name, comm, dso, symbol, raw_buf, ev_type=EVTYPE_GENERIC):
        self.name = name
        self.comm = comm
        self.dso = dso
        self.symbol = symbol
        self.raw_buf = raw_buf
        self.ev_type = ev_type
        PerfEvent.event_num += 1

    def show(self):
        print("PMU event: name=%12s, symbol=%24s, comm=%8s, dso=%12s"
              % (self.name, self.symbol, self.comm, self.dso))


class PebsEvent(PerfEvent):
    pebs_num = 0

    def __init__(self, name, comm, dso, symbol, raw_buf, ev_type=EVTYPE_PEBS):
        values = struct.unpack("10Q", bytes(raw_buf[:80]))
        for key, value in zip(_PEBS_REGS, values):
            setattr(self, key, value)
        PerfEvent.__init__(self, name, comm, dso, symbol, raw_buf, ev_type)
        PebsEvent.pebs_num += 1


class PebsNHM(PebsEvent):
    pebs_nhm_num = 0

    def __init__(self, name, comm, dso, symbol, raw_buf, ev_type=EVTYPE_PEBS_LL):
        values = struct.unpack("4Q", bytes(raw_buf[_PEBS_SIZE:_PEBS_NHM_SIZE]))
        for key, value in zip(_PEBS_LL, values):
            setattr(self, key, value)
        PebsEvent.__init__(self, name, comm, dso, symbol, raw_buf, ev_type)
        PebsNHM.pebs_nhm_num += 1
