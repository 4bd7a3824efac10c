#!/usr/bin/python3
"""The reference monitor of the overhead harness: perf's Python binding in a twatch.py loop.

Run with Debian's /usr/bin/python3 (linux-perf ships the `perf` module for it). It opens a
dummy event on every CPU with fork/exit/comm/mmap side-band records, drains each CPU's ring
(read_on_cpu returns one event per call, so loop until None) and prints every record the way
perf's twatch.py does -- the same line shape as `perfwatch --plain`. On SIGINT/SIGTERM it
writes one summary line on stderr:  twatch: N records, lost L (M LOST records), throttle T
"""
import signal
import sys

import perf


def main():
    cpus = perf.cpu_map()
    threads = perf.thread_map(-1)
    evsel = perf.evsel(type=perf.TYPE_SOFTWARE, config=perf.COUNT_SW_DUMMY,
                       task=1, comm=1, mmap=1, wakeup_events=1, watermark=1,
                       sample_id_all=1,
                       sample_type=perf.SAMPLE_PERIOD | perf.SAMPLE_TID |
                       perf.SAMPLE_CPU | perf.SAMPLE_TIME)
    evsel.open(cpus=cpus, threads=threads)
    evlist = perf.evlist(cpus, threads)
    evlist.add(evsel)
    evlist.mmap()

    stop = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    out = sys.stdout
    records = lost = lost_records = throttle = 0
    sys.stderr.write("twatch: ready\n")
    sys.stderr.flush()
    while not stop:
        try:
            evlist.poll(timeout=100)
        except (InterruptedError, OSError):
            pass
        for cpu in cpus:
            while True:
                event = evlist.read_on_cpu(cpu)
                if not event:
                    break
                records += 1
                t = event.type
                if t == perf.RECORD_LOST:
                    lost_records += 1
                    lost += getattr(event, "lost", 0)
                elif t == perf.RECORD_THROTTLE:
                    throttle += 1
                out.write("cpu: {0}, pid: {1}, tid: {2} {3}\n".format(
                    event.sample_cpu, event.sample_pid, event.sample_tid, event))
    out.flush()
    sys.stderr.write("twatch: %d records, lost %d (%d LOST records), throttle %d\n"
                     % (records, lost, lost_records, throttle))


if __name__ == "__main__":
    main()
