"""A live histogram of task lifetimes (fork to exit), in power-of-two buckets.

    sudo perfwatch --script assets/scripts/lifetimes.py
"""
import perfwatch

born = {}  # tid -> fork time (ns)
buckets = {}  # log2(lifetime in us) -> count
WIDTH = 40


def on_event(event):
    t = event.type
    if t == perfwatch.RECORD_FORK:
        born[event.tid] = event.time
    elif t == perfwatch.RECORD_EXIT:
        start = born.pop(event.tid, None)
        if start is not None:
            us = max(1, (event.time - start) // 1000)
            b = us.bit_length() - 1
            buckets[b] = buckets.get(b, 0) + 1


def label(b):
    us = 1 << b
    if us >= 1_000_000:
        return f"{us // 1_000_000:>4} s "
    if us >= 1000:
        return f"{us // 1000:>4} ms"
    return f"{us:>4} us"


def histogram():
    if not buckets:
        return ["no task has both started and ended yet"]
    top = max(buckets.values())
    out = [f"task lifetimes ({sum(buckets.values())} tasks)"]
    for b in range(min(buckets), max(buckets) + 1):
        n = buckets.get(b, 0)
        out.append(f">= {label(b)} |{'#' * (n * WIDTH // top):<{WIDTH}}| {n}")
    return out


# The pane while perfwatch runs; once more on stderr at the end.
on_tick = histogram


def trace_end():
    print("\n".join(histogram()))
