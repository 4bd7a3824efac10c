"""Type stubs of the `perfwatch` module (perfwatch's engine from a Python program)."""

from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Union

class Event:
    """An ordered, symbolized event (the same objects `perfwatch --script` handlers get)."""

    @property
    def type(self) -> Any:
        """"fork", "exit", "comm", "mmap", "sample", "lost", "lost_samples", "throttle",
        "unthrottle", "context_switch" (an int RECORD_* on :class:`RecordEvent`)."""
    @property
    def sample_cpu(self) -> int: ...
    @property
    def sample_pid(self) -> int: ...
    @property
    def sample_tid(self) -> int: ...
    @property
    def sample_time(self) -> int: ...
    @property
    def sample_id(self) -> int: ...
    @property
    def sample_period(self) -> int: ...
    @property
    def sample_ip(self) -> int: ...
    @property
    def name(self) -> Optional[str]: ...
    @property
    def sym(self) -> Optional[str]: ...
    @property
    def dso(self) -> Optional[str]: ...
    @property
    def sym_offset(self) -> Optional[int]: ...
    @property
    def callchain(self) -> Optional[List[Dict[str, Any]]]: ...
    @property
    def fields(self) -> Dict[str, Any]: ...
    def as_dict(self) -> Dict[str, Any]: ...
    def __getattr__(self, name: str) -> Any:
        """Per-type members (pid, ppid, comm, filename, ...) and tracepoint fields."""

class RecordEvent(Event):
    """An event of the perf-binding face: ``type`` is the RECORD_* number."""

    @property
    def type(self) -> int: ...
    @property
    def type_name(self) -> str: ...

class Watch(Iterator[Event]):
    def __init__(self, events: Union[None, str, Sequence[str]] = ..., cpus: Union[None, int, Sequence[int]] = ...,
                 pid: Union[None, int, Sequence[int]] = ..., call_graph: Union[None, bool, int] = ...,
                 duration: Optional[float] = ..., freq: Optional[int] = ..., period: Optional[int] = ...,
                 mmap_pages: Optional[int] = ..., context_switch: bool = ...) -> None: ...
    @property
    def cpus(self) -> List[int]: ...
    def __iter__(self) -> "Watch": ...
    def __next__(self) -> Event: ...
    def stats(self) -> Dict[str, Any]: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Watch": ...
    def __exit__(self, *exc: Any) -> bool: ...

def watch(events: Union[None, str, Sequence[str]] = ..., cpus: Union[None, int, Sequence[int]] = ...,
          pid: Union[None, int, Sequence[int]] = ..., call_graph: Union[None, bool, int] = ...,
          duration: Optional[float] = ..., **kw: Any) -> Watch: ...

def tracepoint(sys: str, name: str) -> int: ...

# isinstance() checks on events, as with perf's binding's event classes.
class sample_event: ...
class task_event: ...
class comm_event: ...
class mmap_event: ...
class lost_event: ...
class throttle_event: ...
class switch_event: ...
class read_event: ...

class cpu_map:
    def __init__(self, cpustr: Optional[str] = ...) -> None: ...
    def __len__(self) -> int: ...
    def __getitem__(self, i: int) -> int: ...
    def __iter__(self) -> Iterator[int]: ...

class thread_map:
    pid: int
    tid: int
    def __init__(self, pid: int = ..., tid: int = ..., uid: Optional[int] = ...) -> None: ...
    def __len__(self) -> int: ...
    def __getitem__(self, i: int) -> int: ...
    def __iter__(self) -> Iterator[int]: ...

class evsel:
    type: int
    config: int
    sample_freq: int
    sample_period: int
    freq: int
    context_switch: int
    def __init__(self, type: int = ..., config: int = ..., sample_freq: int = ...,
                 sample_period: int = ..., freq: int = ..., context_switch: int = ...,
                 **attr: Any) -> None: ...
    def name(self) -> str: ...
    def samples(self) -> bool: ...
    def open(self, cpus: Optional[cpu_map] = ..., threads: Optional[thread_map] = ...,
             group: bool = ..., inherit: bool = ...) -> None: ...

class evlist:
    def __init__(self, cpus: Optional[cpu_map] = ..., threads: Optional[thread_map] = ...) -> None: ...
    def add(self, evsel: evsel) -> None: ...
    def open(self) -> None: ...
    def mmap(self, pages: int = ..., overwrite: bool = ...) -> None: ...
    def poll(self, timeout: int = ...) -> int: ...
    def read_on_cpu(self, cpu: int, unused: int = ...) -> Optional[RecordEvent]: ...
    def get_pollfd(self) -> List[Any]: ...
    def stats(self) -> Dict[str, Any]: ...
    def close(self) -> None: ...

TYPE_HARDWARE: int
TYPE_SOFTWARE: int
TYPE_TRACEPOINT: int
TYPE_HW_CACHE: int
TYPE_RAW: int
TYPE_BREAKPOINT: int
COUNT_HW_CPU_CYCLES: int
COUNT_HW_INSTRUCTIONS: int
COUNT_HW_CACHE_REFERENCES: int
COUNT_HW_CACHE_MISSES: int
COUNT_HW_BRANCH_INSTRUCTIONS: int
COUNT_HW_BRANCH_MISSES: int
COUNT_HW_BUS_CYCLES: int
COUNT_HW_STALLED_CYCLES_FRONTEND: int
COUNT_HW_STALLED_CYCLES_BACKEND: int
COUNT_HW_CACHE_L1D: int
COUNT_HW_CACHE_L1I: int
COUNT_HW_CACHE_LL: int
COUNT_HW_CACHE_DTLB: int
COUNT_HW_CACHE_ITLB: int
COUNT_HW_CACHE_BPU: int
COUNT_HW_CACHE_OP_READ: int
COUNT_HW_CACHE_OP_WRITE: int
COUNT_HW_CACHE_OP_PREFETCH: int
COUNT_HW_CACHE_RESULT_ACCESS: int
COUNT_HW_CACHE_RESULT_MISS: int
COUNT_SW_CPU_CLOCK: int
COUNT_SW_TASK_CLOCK: int
COUNT_SW_PAGE_FAULTS: int
COUNT_SW_CONTEXT_SWITCHES: int
COUNT_SW_CPU_MIGRATIONS: int
COUNT_SW_PAGE_FAULTS_MIN: int
COUNT_SW_PAGE_FAULTS_MAJ: int
COUNT_SW_ALIGNMENT_FAULTS: int
COUNT_SW_EMULATION_FAULTS: int
COUNT_SW_DUMMY: int
SAMPLE_IP: int
SAMPLE_TID: int
SAMPLE_TIME: int
SAMPLE_ADDR: int
SAMPLE_READ: int
SAMPLE_CALLCHAIN: int
SAMPLE_ID: int
SAMPLE_CPU: int
SAMPLE_PERIOD: int
SAMPLE_STREAM_ID: int
SAMPLE_RAW: int
FORMAT_TOTAL_TIME_ENABLED: int
FORMAT_TOTAL_TIME_RUNNING: int
FORMAT_ID: int
FORMAT_GROUP: int
RECORD_MMAP: int
RECORD_LOST: int
RECORD_COMM: int
RECORD_EXIT: int
RECORD_THROTTLE: int
RECORD_UNTHROTTLE: int
RECORD_FORK: int
RECORD_READ: int
RECORD_SAMPLE: int
RECORD_MMAP2: int
RECORD_AUX: int
RECORD_ITRACE_START: int
RECORD_LOST_SAMPLES: int
RECORD_SWITCH: int
RECORD_SWITCH_CPU_WIDE: int
RECORD_MISC_SWITCH_OUT: int
