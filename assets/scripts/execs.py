"""Exec tracking with lifetimes: every program started, and how long it ran once it exits.

    sudo perfwatch --script assets/scripts/execs.py

The pane shows the most recent programs that have ended (name, pid, lifetime from exec to
exit) and how many are still running.
"""
from collections import deque

import perfwatch

running = {}  # pid -> (comm, exec time in ns)
ended = deque(maxlen=12)
total = 0


def on_event(event):
    global total
    t = event.type
    if t == perfwatch.RECORD_COMM and event.exec:
        running[event.pid] = (event.comm, event.sample_time)
        total += 1
    elif t == perfwatch.RECORD_EXIT and event.pid == event.tid and event.pid in running:
        comm, start = running.pop(event.pid)
        ended.append((comm, event.pid, (event.time - start) / 1e6))


def lines():
    out = [f"{total} execs, {len(running)} still running; recently ended:"]
    for comm, pid, ms in reversed(ended):
        out.append(f"  {comm:<16} pid {pid:<8} ran {ms:10.3f} ms")
    return out


# The pane while perfwatch runs; once more on stderr at the end.
on_tick = lines


def trace_end():
    print("\n".join(lines()))
