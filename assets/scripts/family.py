"""Only one command's family: keep the events of tasks named FAMILY_COMM and their descendants.

    sudo FAMILY_COMM=make perfwatch --plain --script assets/scripts/family.py

A task joins the family when it execs a program with that name (its COMM record), or when a
member forks it; it leaves when it exits. Everything else is filtered out of the log and the
--plain/--json output (the counters still count it). Tasks that were already running when
perfwatch started join at their next fork or exec.
"""
import os

import perfwatch

TARGET = os.environ.get("FAMILY_COMM", "make")[:15]  # the kernel keeps 15 bytes of a comm
family = set()


def trace_begin():
    print(f"following '{TARGET}' and its descendants")


def filter(event):
    t = event.type
    if t == perfwatch.RECORD_COMM:
        if event.comm == TARGET:
            family.add(event.pid)
        return event.pid in family
    if t == perfwatch.RECORD_FORK:
        if event.ppid in family:
            family.add(event.pid)
        return event.pid in family
    if t == perfwatch.RECORD_EXIT:
        keep = event.pid in family
        if keep and event.pid == event.tid:
            family.discard(event.pid)
        return keep
    if t == perfwatch.RECORD_MMAP:
        return event.pid in family
    return event.sample_pid in family


def on_tick():
    return [f"{TARGET}: {len(family)} live tasks in the family"]
