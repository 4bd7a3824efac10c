"""perfwatch's engine from a Python program.

Two faces over one engine (perfwatch's per-CPU ring readers, time ordering, process model
and symbolizer, running on Rust threads; events reach Python in batches, and the GIL is
released while waiting):

* the Pythonic one::

      import perfwatch
      for ev in perfwatch.watch(events=["cpu-clock"], duration=5):
          print(ev.type, ev.sample_pid, ev.sym, ev.dso)

* perf's Python binding API, so that a program written for it runs with the import changed
  (``import perfwatch as perf``): ``cpu_map``, ``thread_map``, ``evsel``, ``evlist``,
  ``tracepoint`` and the ``TYPE_*``, ``COUNT_*``, ``SAMPLE_*``, ``RECORD_*`` constants.
"""

import collections
import glob
import os

from perfwatch._native import Event, NativeCounter, NativeSession, RecordEvent

__all__ = [
    "watch", "Watch", "Event", "RecordEvent",
    "cpu_map", "thread_map", "evsel", "evlist", "tracepoint",
    "sample_event", "task_event", "comm_event", "mmap_event", "lost_event",
    "throttle_event", "switch_event", "read_event", "counts_values",
]

# ---------------------------------------------------------------- the Pythonic face


class Watch:
    """An iterator over ordered, symbolized events; see :func:`watch`.

    Stops (events disabled and closed, threads joined) when exhausted, on ``close()``, at the
    end of a ``with`` block, on an exception out of the loop (KeyboardInterrupt included), on
    ``break`` (when the iterator is dropped) and on garbage collection.
    """

    def __init__(self, events=None, cpus=None, pid=None, call_graph=None, duration=None,
                 freq=None, period=None, mmap_pages=None, context_switch=False):
        if isinstance(events, str):
            events = [events]
        if isinstance(cpus, int):
            cpus = [cpus]
        if isinstance(pid, int):
            pid = [pid]
        if call_graph is True:
            call_graph = 127
        elif call_graph is False:
            call_graph = None
        self._session = NativeSession(
            list(events or []), cpus=None if cpus is None else list(cpus),
            pids=None if pid is None else list(pid), call_graph=call_graph,
            duration=duration, freq=freq, period=period, mmap_pages=mmap_pages,
            context_switch=context_switch)
        self._batch = collections.deque()
        self._stats = None

    @property
    def cpus(self):
        """The CPUs being read."""
        return list(self._session.cpus) if self._session else []

    def __iter__(self):
        return self

    def __next__(self):
        while not self._batch:
            if self._session is None:
                raise StopIteration
            try:
                got = self._session.next_batch(None)
            except BaseException:
                self.close()
                raise
            if got is None:
                self.close()
                raise StopIteration
            self._batch.extend(got)
        return self._batch.popleft()

    def stats(self):
        """Counters: records, lost (the kernel's ring was full), lost_samples, dropped (by
        perfwatch), and the same per CPU under "per_cpu" (kept after the end)."""
        if self._session is not None:
            return self._session.stats()
        return self._stats or {}

    def close(self):
        """Stop: events disabled and closed, every thread joined. Idempotent."""
        s, self._session = self._session, None
        if s is not None:
            self._stats = s.stats()
            s.close()
        self._batch.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def watch(events=None, cpus=None, pid=None, call_graph=None, duration=None, **kw):
    """Watch perf events; iterate over them in time order, symbolized.

    events      names as ``perfwatch -e`` takes them (``"cpu-clock"``,
                ``"sched:sched_switch"``, ``"dummy"`` for side-band records only); default:
                perfwatch's default event
    cpus        only these CPUs (default: all online)
    pid         only this process (or these processes); default: system-wide
    call_graph  record call chains (True, or the most frames to keep)
    duration    stop by itself after this many seconds
    freq, period, mmap_pages, context_switch  as -F, -c, -m, --switch

    Fork, exit, comm and mmap records come along with the samples. Each event is an
    :class:`Event`: ``type`` ("sample", "fork", ...), ``sample_cpu``, ``sample_pid``,
    ``sample_tid``, ``sample_time``, ``name``, ``sym``, ``dso``, ``callchain``, ``fields``
    and a tracepoint's fields as attributes, ``str()`` as ``perfwatch --plain`` prints it.
    """
    return Watch(events, cpus, pid, call_graph, duration, **kw)


# ---------------------------------------------------------------- perf's binding API

TYPE_HARDWARE = 0
TYPE_SOFTWARE = 1
TYPE_TRACEPOINT = 2
TYPE_HW_CACHE = 3
TYPE_RAW = 4
TYPE_BREAKPOINT = 5

COUNT_HW_CPU_CYCLES = 0
COUNT_HW_INSTRUCTIONS = 1
COUNT_HW_CACHE_REFERENCES = 2
COUNT_HW_CACHE_MISSES = 3
COUNT_HW_BRANCH_INSTRUCTIONS = 4
COUNT_HW_BRANCH_MISSES = 5
COUNT_HW_BUS_CYCLES = 6
COUNT_HW_STALLED_CYCLES_FRONTEND = 7
COUNT_HW_STALLED_CYCLES_BACKEND = 8
COUNT_HW_CACHE_L1D = 0
COUNT_HW_CACHE_L1I = 1
COUNT_HW_CACHE_LL = 2
COUNT_HW_CACHE_DTLB = 3
COUNT_HW_CACHE_ITLB = 4
COUNT_HW_CACHE_BPU = 5
COUNT_HW_CACHE_OP_READ = 0
COUNT_HW_CACHE_OP_WRITE = 1
COUNT_HW_CACHE_OP_PREFETCH = 2
COUNT_HW_CACHE_RESULT_ACCESS = 0
COUNT_HW_CACHE_RESULT_MISS = 1

COUNT_SW_CPU_CLOCK = 0
COUNT_SW_TASK_CLOCK = 1
COUNT_SW_PAGE_FAULTS = 2
COUNT_SW_CONTEXT_SWITCHES = 3
COUNT_SW_CPU_MIGRATIONS = 4
COUNT_SW_PAGE_FAULTS_MIN = 5
COUNT_SW_PAGE_FAULTS_MAJ = 6
COUNT_SW_ALIGNMENT_FAULTS = 7
COUNT_SW_EMULATION_FAULTS = 8
COUNT_SW_DUMMY = 9

SAMPLE_IP = 1 << 0
SAMPLE_TID = 1 << 1
SAMPLE_TIME = 1 << 2
SAMPLE_ADDR = 1 << 3
SAMPLE_READ = 1 << 4
SAMPLE_CALLCHAIN = 1 << 5
SAMPLE_ID = 1 << 6
SAMPLE_CPU = 1 << 7
SAMPLE_PERIOD = 1 << 8
SAMPLE_STREAM_ID = 1 << 9
SAMPLE_RAW = 1 << 10

FORMAT_TOTAL_TIME_ENABLED = 1
FORMAT_TOTAL_TIME_RUNNING = 2
FORMAT_ID = 4
FORMAT_GROUP = 8

RECORD_MMAP = 1
RECORD_LOST = 2
RECORD_COMM = 3
RECORD_EXIT = 4
RECORD_THROTTLE = 5
RECORD_UNTHROTTLE = 6
RECORD_FORK = 7
RECORD_READ = 8
RECORD_SAMPLE = 9
RECORD_MMAP2 = 10
RECORD_AUX = 11
RECORD_ITRACE_START = 12
RECORD_LOST_SAMPLES = 13
RECORD_SWITCH = 14
RECORD_SWITCH_CPU_WIDE = 15
RECORD_MISC_SWITCH_OUT = 1 << 13

_HW_NAMES = {
    0: "cycles", 1: "instructions", 2: "cache-references", 3: "cache-misses",
    4: "branch-instructions", 5: "branch-misses", 6: "bus-cycles",
    7: "stalled-cycles-frontend", 8: "stalled-cycles-backend", 9: "ref-cycles",
}
_SW_NAMES = {
    0: "cpu-clock", 1: "task-clock", 2: "page-faults", 3: "context-switches",
    4: "cpu-migrations", 5: "minor-faults", 6: "major-faults", 7: "alignment-faults",
    8: "emulation-faults", 9: "dummy",
}
_TRACEFS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")


def _tracepoint_name(tp_id):
    """sys:name of a tracepoint id, from tracefs."""
    for root in _TRACEFS:
        for path in glob.glob(os.path.join(root, "events", "*", "*", "id")):
            try:
                with open(path) as f:
                    if int(f.read().strip()) == tp_id:
                        parts = path.split(os.sep)
                        return "%s:%s" % (parts[-3], parts[-2])
            except (OSError, ValueError):
                continue
    return None


def tracepoint(sys, name):
    """The id of tracepoint sys:name (for ``evsel(type=TYPE_TRACEPOINT, config=id)``), or
    -1 when there is none, as perf's binding answers."""
    for root in _TRACEFS:
        try:
            with open(os.path.join(root, "events", sys, name, "id")) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            continue
    return -1


def _online_cpus():
    try:
        with open("/sys/devices/system/cpu/online") as f:
            return _parse_cpus(f.read())
    except OSError:
        return list(range(os.cpu_count() or 1))


def _parse_cpus(text):
    cpus = []
    for part in text.strip().split(","):
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            cpus.extend(range(int(a), int(b) + 1))
        else:
            cpus.append(int(part))
    return cpus


class _RecordKind(type):
    """``isinstance(event, perf.sample_event)`` and the like, as with perf's binding's event
    classes: true when the event's record type is one of the class's."""

    def __instancecheck__(cls, obj):
        if isinstance(obj, RecordEvent):
            return obj.type_name in cls._types
        return isinstance(obj, Event) and obj.type in cls._types


class sample_event(metaclass=_RecordKind):
    """Samples (``isinstance`` only: the objects are :class:`RecordEvent`)."""
    _types = ("sample",)


class task_event(metaclass=_RecordKind):
    """Fork and exit records."""
    _types = ("fork", "exit")


class comm_event(metaclass=_RecordKind):
    _types = ("comm",)


class mmap_event(metaclass=_RecordKind):
    _types = ("mmap",)


class lost_event(metaclass=_RecordKind):
    _types = ("lost",)


class throttle_event(metaclass=_RecordKind):
    _types = ("throttle", "unthrottle")


class switch_event(metaclass=_RecordKind):
    _types = ("context_switch",)


class read_event(metaclass=_RecordKind):
    """Never matches: perfwatch reads no counters into records."""
    _types = ()


class cpu_map:
    """The CPUs to open events on, as perf's binding has it: ``cpu_map()`` (all online) or
    ``cpu_map(cpustr="0-3,5")``."""

    def __init__(self, cpustr=None):
        self._cpus = _online_cpus() if cpustr is None else _parse_cpus(cpustr)

    def __len__(self):
        return len(self._cpus)

    def __getitem__(self, i):
        return self._cpus[i]

    def __iter__(self):
        return iter(self._cpus)


class thread_map:
    """The tasks to watch, as perf's binding has it: ``thread_map()`` or ``thread_map(-1)``
    (every task: system-wide), ``thread_map(pid)`` (that process's threads)."""

    def __init__(self, pid=-1, tid=-1, uid=None):
        self.pid = pid
        self.tid = tid
        if pid != -1:
            try:
                self._threads = sorted(int(t) for t in os.listdir("/proc/%d/task" % pid))
            except OSError:
                self._threads = [pid]
        elif tid != -1:
            self._threads = [tid]
        else:
            self._threads = [-1]

    def __len__(self):
        return len(self._threads)

    def __getitem__(self, i):
        return self._threads[i]

    def __iter__(self):
        return iter(self._threads)


class evsel:
    """An event, with perf's binding's keyword arguments (``type``, ``config``,
    ``sample_freq``/``sample_period``, ``freq``, ``sample_type``, ``task``, ``comm``,
    ``mmap``, ``context_switch``, ...). perfwatch always records fork, exit, comm and mmap
    records and the sample fields it needs, so the side-band flags and ``sample_type`` are
    accepted as they are; the rest of the attr is perfwatch's own."""

    def __init__(self, type=TYPE_HARDWARE, config=COUNT_HW_CPU_CYCLES, sample_freq=0,
                 sample_period=0, freq=0, context_switch=0, **attr):
        self.type = type
        self.config = config
        self.sample_freq = sample_freq
        self.sample_period = sample_period
        self.freq = freq
        self.context_switch = context_switch
        self.attr = attr
        self.cpus = None
        self.threads = None
        self._counters = {}

    def name(self):
        """The event's name as perfwatch's -e takes it."""
        if self.type == TYPE_HARDWARE and self.config in _HW_NAMES:
            return _HW_NAMES[self.config]
        if self.type == TYPE_SOFTWARE and self.config in _SW_NAMES:
            return _SW_NAMES[self.config]
        if self.type == TYPE_TRACEPOINT:
            name = _tracepoint_name(self.config)
            if name:
                return name
        if self.type == TYPE_RAW:
            return "r%x" % self.config
        raise OSError("perfwatch: event type %d config %#x is not supported by the "
                      "perfwatch module" % (self.type, self.config))

    def samples(self):
        """Whether the event samples (a period, or a frequency with ``freq=1``)."""
        return bool(self.sample_period) or bool(self.freq and self.sample_freq)

    def open(self, cpus=None, threads=None, group=False, inherit=False):
        """Record where the event is to be opened; perfwatch opens a sampling event at
        ``evlist.mmap()`` (its readers map each ring as they open it). An event that does not
        sample (no period, no frequency) is opened here to count, on every CPU of ``cpus``
        for every task of ``threads``, for :meth:`read`."""
        side_band = any(self.attr.get(k) for k in ("task", "comm", "mmap", "mmap2")) or \
            self.context_switch or (self.type == TYPE_SOFTWARE and self.config == COUNT_SW_DUMMY)
        if self.samples() or side_band:
            # Its records come through evlist.mmap() (a side-band-only evsel, as upstream
            # twatch.py's: perfwatch's dummy).
            self.name()  # an event perfwatch cannot open fails here, as in perf
        else:
            counters = {}
            cpu_list = list(cpus) if cpus is not None else [-1]
            tasks = list(threads) if threads is not None else [-1]
            for cpu in cpu_list:
                for i, tid in enumerate(tasks):
                    try:
                        counters[(cpu, i)] = NativeCounter(self.type, self.config, pid=tid,
                                                           cpu=cpu, inherit=bool(inherit))
                    except OSError as e:
                        # Said by read(): an evsel that is also added to an evlist (as a
                        # dummy) must not fail here for a counter nobody reads.
                        counters[(cpu, i)] = e
            self._counters = counters
        self.cpus = cpus
        self.threads = threads

    def read(self, cpu, thread):
        """The count of the event on CPU ``cpu`` (its number) for task ``thread`` (its index
        in the thread_map) since ``open``: a :class:`counts_values` (``val``, ``ena``,
        ``run``), as perf's binding reads a counting event."""
        c = self._counters.get((cpu, thread))
        if c is None:
            raise OSError("perfwatch: evsel.read(%r, %r): the event is not open there "
                          "(opened to count: %s)" % (cpu, thread, sorted(self._counters)))
        if isinstance(c, OSError):
            raise c
        return counts_values(*c.read())

    def close(self):
        """Close the counters :meth:`open` opened."""
        self._counters = {}


class counts_values:
    """A counting event's reading (``evsel.read``): ``val`` (the count), ``ena`` and ``run``
    (ns enabled and running), and ``values`` ([val, ena, run])."""

    __slots__ = ("val", "ena", "run")

    def __init__(self, val=0, ena=0, run=0):
        self.val, self.ena, self.run = val, ena, run

    @property
    def values(self):
        return [self.val, self.ena, self.run]

    def __repr__(self):
        return "counts_values(val=%d, ena=%d, run=%d)" % (self.val, self.ena, self.run)


class evlist:
    """The events, their rings and the reading of them, as perf's binding has it. Records
    come out of ``read_on_cpu`` one at a time, in time order within each CPU (perfwatch
    orders them across CPUs, and names samples' symbols: ``sym``, ``dso``). ``poll`` and
    ``read_on_cpu`` run in Rust: ``poll`` sorts the records into per-CPU queues there, and
    ``read_on_cpu`` makes a :class:`RecordEvent` for the one it hands out."""

    def __init__(self, cpus=None, threads=None):
        self._cpus = cpus if cpus is not None else cpu_map()
        self._threads = threads
        self._evsels = []
        self._session = None

    def add(self, evsel):
        self._evsels.append(evsel)

    def open(self):
        pass

    def mmap(self, pages=128, overwrite=False):
        """Open the events and start reading their rings."""
        if self._session is not None:
            return
        names = []
        freq = period = None
        switch = False
        for ev in self._evsels:
            if not ev.samples():
                # A counting event (perf's default attr: no period, no frequency) writes
                # nothing to its ring but the side-band records: perfwatch's dummy.
                names.append("dummy")
                continue
            names.append(ev.name())
            if ev.sample_period and not ev.freq:
                period = ev.sample_period
            elif ev.freq and ev.sample_freq:
                freq = ev.sample_freq
            switch = switch or bool(ev.context_switch)
        threads = self._threads
        pids = None
        if threads is not None and getattr(threads, "pid", -1) not in (-1, None):
            pids = [threads.pid]
        elif threads is not None and getattr(threads, "tid", -1) not in (-1, None):
            pids = [threads.tid]
        cpus = list(self._cpus) if self._cpus is not None else None
        if cpus is not None and sorted(cpus) == _online_cpus():
            cpus = None
        self._session = NativeSession(names or ["dummy"], cpus=cpus, pids=pids,
                                      freq=freq, period=period, mmap_pages=pages,
                                      context_switch=switch, binding=True)
        # The hot pair straight to Rust: no Python frame, no Python-level queue per record.
        self.poll = self._session.poll
        self.read_on_cpu = self._session.read_on_cpu

    def poll(self, timeout=-1):
        """Wait (at most ``timeout`` ms; -1: until something comes) for records; returns
        how many CPUs have some ready. (Once the events are mapped this is the session's
        own native ``poll``: the records wait in per-CPU queues in Rust.)"""
        raise OSError("evlist.poll() before evlist.mmap()")

    def read_on_cpu(self, cpu, sample_id_all=0):
        """The next record of CPU ``cpu``, or None. (Once the events are mapped this is the
        session's own native ``read_on_cpu``: the event object is made as it is read.)"""
        return None

    def get_pollfd(self):
        """Files to wait on with ``select``/``poll`` (as perf's binding gives its events'
        fds): perfwatch gives one, readable when records may be waiting; read them with
        ``read_on_cpu``. Empty before ``mmap()``. Each call gives new files, the caller's to
        close."""
        if self._session is None:
            return []
        return [os.fdopen(os.dup(self._session.pollfd()), "rb", buffering=0)]

    def stats(self):
        """perfwatch's counters (records, lost, dropped; per CPU)."""
        return self._session.stats() if self._session is not None else {}

    def close(self):
        """Stop reading: events closed, threads joined."""
        s, self._session = self._session, None
        self.__dict__.pop("poll", None)
        self.__dict__.pop("read_on_cpu", None)
        if s is not None:
            s.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
