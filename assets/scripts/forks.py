"""Fork counts per parent, busiest first, in the script pane (or on stderr with --plain).

    sudo perfwatch --script assets/scripts/forks.py
"""
from collections import Counter

import perfwatch

forks = Counter()
names = {}
TOP = 10


def on_event(event):
    if event.type == perfwatch.RECORD_FORK and event.pid != event.ppid:
        # A new process (threads share their parent's pid and are not counted).
        forks[event.ppid] += 1
        if event.ppid not in names:
            names[event.ppid] = perfwatch.comm(event.ppid) or "?"


def table():
    lines = [f"{'forks':>7}  parent"]
    for ppid, n in forks.most_common(TOP):
        lines.append(f"{n:>7}  {names.get(ppid, '?')}[{ppid}]")
    return lines


# The pane while perfwatch runs; once more on stderr at the end.
on_tick = table


def trace_end():
    print("\n".join(table()))
