"""Checks of the `perfwatch` Python module (issue 30), run by tests/pymod.rs with the python
of a fresh virtualenv the wheel was pip-installed into (as root: system-wide events).

    python test_module.py --stress PATH/perfwatch-stress --twatch benches/twatch.py --cc cc

Each check prints "ok NAME" or raises; the exit status is 0 only when all passed.
"""

import argparse
import collections
import gc
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

import perfwatch

SPIN_C = r"""
volatile unsigned long sink;
__attribute__((noinline)) void pw_hot_alpha(void) { for (int i = 0; i < 200000; i++) sink += i; }
__attribute__((noinline)) void pw_hot_beta(void) { for (int i = 0; i < 200000; i++) sink ^= i * 3; }
int main(void) { for (;;) { pw_hot_alpha(); pw_hot_beta(); } }
"""

DEADLINE = 60.0


def perf_fds():
    """This process's perf event fds."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if "perf_event" in target:
            out.append(target)
    return out


def tasks():
    return len(os.listdir("/proc/self/task"))


def tasks_back_to(n, within=10.0):
    """The thread count once it is back to `n` (or after `within` s). The readers and the
    session thread are joined by close(); the symbol loaders and the /proc seed are detached
    helpers that end as soon as the read they are in ends (a kallsyms read can take a
    second), so they are given a bounded wait."""
    deadline = time.monotonic() + within
    while tasks() > n and time.monotonic() < deadline:
        time.sleep(0.05)
    return tasks()


def check_import_from_venv():
    assert sys.prefix != sys.base_prefix, "not run from a virtualenv"
    assert perfwatch.__file__.startswith(sys.prefix), perfwatch.__file__
    print("ok import from the virtualenv:", perfwatch.__file__)


def check_names_functions(cc):
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "spin.c")
        exe = os.path.join(d, "spin")
        with open(src, "w") as f:
            f.write(SPIN_C)
        subprocess.run([cc, "-O1", "-g", "-fno-omit-frame-pointer", "-o", exe, src], check=True)
        child = subprocess.Popen([exe])
        try:
            seen = set()
            chains = 0
            start = time.monotonic()
            with perfwatch.watch(events=["cpu-clock"], pid=child.pid, call_graph=True,
                                 duration=DEADLINE) as w:
                for ev in w:
                    if ev.type != "sample":
                        continue
                    assert ev.sample_pid == child.pid, (ev.sample_pid, child.pid)
                    if ev.sym:
                        seen.add(ev.sym)
                        assert ev.dso == exe or ev.dso.startswith("["), ev.dso
                    if ev.callchain:
                        chains += 1
                    if {"pw_hot_alpha", "pw_hot_beta"} <= seen and chains:
                        break
            assert {"pw_hot_alpha", "pw_hot_beta"} <= seen, ("functions not named", seen)
            assert chains > 0, "no call chains"
        finally:
            child.kill()
            child.wait()
    print("ok watch() names the C program's functions: %s in %.1f s"
          % (sorted(seen & {"pw_hot_alpha", "pw_hot_beta"}), time.monotonic() - start))


def check_tracepoint_fields():
    """sched:sched_process_fork: parent_pid and child_pid as attributes and in fields."""
    children = []
    stop = threading.Event()
    forker_tid = []

    def forker():
        # The tracepoint's parent_pid is the forking thread's id.
        forker_tid.append(threading.get_native_id())
        while not stop.is_set():
            p = subprocess.Popen(["/bin/true"])
            children.append(p.pid)
            p.wait()
            time.sleep(0.05)

    t = threading.Thread(target=forker)
    found = None
    with perfwatch.watch(events=["sched:sched_process_fork"], duration=DEADLINE) as w:
        t.start()
        try:
            for ev in w:
                if ev.type == "sample" and ev.parent_pid in forker_tid:
                    found = ev
                    break
        finally:
            stop.set()
            t.join()
    assert found is not None, "no sched_process_fork of ours"
    assert found.name == "sched:sched_process_fork", found.name
    assert found.fields["child_pid"] == found.child_pid
    assert found.child_pid in children, (found.child_pid, children)
    assert "parent_comm" in found.fields
    print("ok a tracepoint gives its fields:", str(found))


def check_break_cleans_up():
    before_tasks = tasks()
    before_fds = perf_fds()
    assert not before_fds, before_fds
    n = 0
    w = perfwatch.watch(events=["cpu-clock", "dummy"])
    during = len(perf_fds())
    threads_during = tasks()
    for ev in w:
        n += 1
        if n >= 50:
            break
    # The loop's `break` leaves the iterator to the garbage collector, as a real loop does.
    del w
    gc.collect()
    after = perf_fds()
    assert during > 0, "no perf fd while watching?"
    assert threads_during > before_tasks, "no reader thread while watching?"
    assert not after, ("perf fds left behind", after)
    left = tasks_back_to(before_tasks)
    assert left == before_tasks, ("threads left behind", left, before_tasks)
    assert threading.active_count() == 1, threading.enumerate()
    print("ok break after %d events: %d perf fds and %d threads before, none left after"
          % (n, during, threads_during - before_tasks))


def check_stats_and_interrupt():
    """Ctrl-C while the loop waits: KeyboardInterrupt, then everything closed."""
    # Python raises KeyboardInterrupt only where SIGINT was not ignored at its start (a
    # `nohup ... &` job starts with it ignored): what a Ctrl-C does is set here.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    before_tasks = tasks()
    # A deadline: without the interrupt the loop ends after 30 s and the check fails.
    w = perfwatch.watch(events=["dummy"], duration=30)
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    interrupted = False
    try:
        for _ in w:
            pass
    except KeyboardInterrupt:
        interrupted = True
    timer.join()
    assert interrupted, "no KeyboardInterrupt"
    s = w.stats()
    assert "lost" in s and "dropped" in s and s["per_cpu"], s
    assert not perf_fds(), perf_fds()
    left = tasks_back_to(before_tasks)
    assert left == before_tasks, ("threads left behind", left, before_tasks)
    print("ok Ctrl-C stops the loop cleanly; stats:", {k: s[k] for k in ("records", "lost", "dropped")})


def check_binding_tracepoint():
    """perf's own tools/perf/python/tracepoint.py, with `import perfwatch as perf`: a
    tracepoint evsel by id, isinstance(event, perf.sample_event), fields as attributes."""
    perf = perfwatch

    def tracepoint(sys_, name):
        config = perf.tracepoint(sys_, name)
        return perf.evsel(type=perf.TYPE_TRACEPOINT, config=config, freq=0, sample_period=1,
                          wakeup_events=1,
                          sample_type=perf.SAMPLE_PERIOD | perf.SAMPLE_TID | perf.SAMPLE_CPU
                          | perf.SAMPLE_RAW | perf.SAMPLE_TIME)

    assert perf.tracepoint("sched", "no_such_tracepoint") == -1
    cpus = perf.cpu_map()
    evlist = perf.evlist(cpus, perf.thread_map(-1))
    evlist.add(tracepoint("sched", "sched_switch"))
    evlist.open()
    try:
        evlist.poll(timeout=0)
        raise AssertionError("poll() before mmap() did not fail")
    except OSError:
        pass
    evlist.mmap()
    # CPUs that are not there have nothing, whatever their number.
    assert evlist.read_on_cpu(-1) is None and evlist.read_on_cpu(1 << 20) is None
    got = []
    kept = None
    deadline = time.monotonic() + DEADLINE
    while len(got) < 5 and time.monotonic() < deadline:
        evlist.poll(timeout=100)
        for cpu in cpus:
            event = evlist.read_on_cpu(cpu)
            if not event or not isinstance(event, perf.sample_event):
                continue
            assert event.type == perf.RECORD_SAMPLE, event.type
            assert not isinstance(event, perf.task_event)
            assert event.sample_cpu == cpu, (event.sample_cpu, cpu)
            kept = event
            got.append("prev_comm=%s prev_pid=%d ==> next_comm=%s next_pid=%d" % (
                event.prev_comm, event.prev_pid, event.next_comm, event.next_pid))
    evlist.close()
    assert len(got) >= 5, got
    # The record's object: str() as --plain prints it, the fields as attributes and in
    # `fields`, perfwatch's extras, and AttributeError for what it does not have.
    text = str(kept)
    assert text.startswith("{ type: sample, ") and "prev_pid: %d" % kept.prev_pid in text, text
    assert kept.fields["next_pid"] == kept.next_pid
    assert kept.name == "sched:sched_switch", kept.name
    assert getattr(kept, "no_such_member", 7) == 7
    assert evlist.read_on_cpu(cpus[0]) is None, "records handed out after close()"
    print("ok perf's tracepoint.py on perfwatch:", got[0])


def check_get_pollfd():
    """evlist.get_pollfd(): select.poll on its files wakes when records come, and read_on_cpu
    reads them without evlist.poll(), as a program on perf's binding does."""
    import select
    perf = perfwatch
    cpus = perf.cpu_map()
    evlist = perf.evlist(cpus, perf.thread_map(-1))
    evlist.add(perf.evsel(type=perf.TYPE_SOFTWARE, config=perf.COUNT_SW_DUMMY, task=1,
                          comm=1, mmap=1, sample_id_all=1))
    assert evlist.get_pollfd() == [], "files before mmap()"
    evlist.mmap()
    files = evlist.get_pollfd()
    assert files and all(f.fileno() >= 0 for f in files), files
    p = select.poll()
    for f in files:
        p.register(f, select.POLLIN)
    child = subprocess.Popen(["/bin/true"])
    child.wait()
    seen = False
    wakes = 0
    deadline = time.monotonic() + DEADLINE
    while not seen and time.monotonic() < deadline:
        if not p.poll(1000):
            continue
        wakes += 1
        for cpu in cpus:
            while True:
                ev = evlist.read_on_cpu(cpu)
                if ev is None:
                    break
                if ev.type == perf.RECORD_EXIT and ev.pid == child.pid:
                    seen = True
    evlist.close()
    for f in files:
        f.close()
    assert seen, "no exit record of the child after %d wake-ups" % wakes
    assert not perf_fds(), perf_fds()
    print("ok get_pollfd: select.poll woke %d time(s), read_on_cpu read the child's exit"
          % wakes)


def on_cpu_ns(pid):
    with open("/proc/%d/schedstat" % pid) as f:
        return int(f.read().split()[0])


def check_counting():
    """evsel.open of an evsel that does not sample counts, and evsel.read(cpu, thread) gives
    its counts_values, as perf's binding's counting.py reads them: a spinning child's
    task-clock, summed over the CPUs, is the CPU time the kernel's schedstat gives it over
    the same span; cpu-clock on each CPU runs all the time it is enabled."""
    perf = perfwatch
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        cpus = perf.cpu_map()
        threads = perf.thread_map(child.pid)
        task = perf.evsel(type=perf.TYPE_SOFTWARE, config=perf.COUNT_SW_TASK_CLOCK,
                          read_format=perf.FORMAT_TOTAL_TIME_ENABLED
                          | perf.FORMAT_TOTAL_TIME_RUNNING)
        clock = perf.evsel(type=perf.TYPE_SOFTWARE, config=perf.COUNT_SW_CPU_CLOCK)
        before = on_cpu_ns(child.pid)
        task.open(cpus=cpus, threads=threads)
        clock.open(cpus=cpus, threads=perf.thread_map(-1))
        time.sleep(0.5)
        counts = [task.read(cpu, 0) for cpu in cpus]
        after = on_cpu_ns(child.pid)
        clocks = [clock.read(cpu, 0) for cpu in cpus]
    finally:
        child.kill()
        child.wait()
    total = sum(c.val for c in counts)
    want = after - before
    assert want > 0, (before, after)
    assert abs(total - want) <= 0.1 * want + 20e6, ("task-clock vs schedstat", total, want)
    for c in clocks:
        assert c.ena > 0 and c.run == c.ena, c  # software events are never multiplexed
        assert abs(c.val - c.ena) <= 0.05 * c.ena + 5e6, c
    try:
        task.read(1 << 20, 0)
        raise AssertionError("read of a CPU it was not opened on")
    except OSError:
        pass
    task.close()
    clock.close()
    gc.collect()
    assert not perf_fds(), perf_fds()
    print("ok evsel.read counts: task-clock %.0f ms (schedstat %.0f ms), cpu-clock %s"
          % (total / 1e6, want / 1e6, [c.values for c in clocks]))


TASK_RE = re.compile(rb"type: (fork|exit), pid: (\d+), ppid: (\d+)")


LINE_RE = re.compile(rb"^cpu: (\d+), pid: (\d+), tid: (\d+) \{ type: (fork|exit), pid: (\d+), "
                     rb"ppid: (\d+), tid: (\d+), ptid: (\d+), time: \d+\}$", re.M)


def storm_lines(data, stress_pid, pids):
    """The storm's fork and exit lines, without their time (perf's binding stamps perf's
    clock, perfwatch CLOCK_MONOTONIC), by child pid."""
    out = collections.defaultdict(set)
    for m in LINE_RE.finditer(data):
        kind, pid, ppid = m.group(4), int(m.group(5)), int(m.group(6))
        if pid in pids and (kind == b"exit" or ppid == stress_pid):
            out[pid].add(m.group(0).rsplit(b", time: ", 1)[0])
    return out


LINE_ANY_RE = re.compile(rb"^cpu: \d+, pid: -?\d+, tid: -?\d+ \{ type: (fork|exit|comm|mmap), "
                         rb"pid: (\d+), .*$", re.M)


def child_lines(data, pids):
    """Every fork, exit, comm and mmap line of the storm's children (fork and exit lines
    without their time), by child pid."""
    out = collections.defaultdict(set)
    for m in LINE_ANY_RE.finditer(data):
        pid = int(m.group(2))
        if pid in pids:
            line = m.group(0)
            if m.group(1) in (b"fork", b"exit"):
                line = line.rsplit(b", time: ", 1)[0]
            out[pid].add((m.group(1), line))
    return out


def run_twatch_pair(twatch, stress, load_args, perf_python):
    """benches/twatch.py with `import perf` changed to `import perfwatch as perf` and (with
    `perf_python`) twatch.py on perf's binding beside it, both through one stress load
    (`perfwatch-stress LOAD_ARGS`) until every child's exit is out of both. Returns the
    load's report and, per row ("perfwatch", "perf"), (returncode, stdout, stderr)."""
    with open(twatch) as f:
        src = f.read()
    assert "\nimport perf\n" in src
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "twatch.py")
        with open(script, "w") as f:
            f.write(src.replace("\nimport perf\n", "\nimport perfwatch as perf\n"))
        rows = {"perfwatch": [sys.executable, script]}
        if perf_python:
            rows["perf"] = [perf_python, twatch]
        mons = {}
        for name, argv in rows.items():
            out_path, err_path = os.path.join(d, name + ".out"), os.path.join(d, name + ".err")
            with open(out_path, "wb") as out, open(err_path, "wb") as err:
                mons[name] = (subprocess.Popen(argv, stdout=out, stderr=err), out_path, err_path)
        try:
            deadline = time.monotonic() + DEADLINE
            for name, (mon, _, err_path) in mons.items():
                while b"twatch: ready" not in open(err_path, "rb").read():
                    assert mon.poll() is None, (name, open(err_path, "rb").read())
                    assert time.monotonic() < deadline, "%s never ready" % name
                    time.sleep(0.05)
            load = json.loads(subprocess.run([stress] + load_args, check=True,
                                             capture_output=True, timeout=DEADLINE).stdout)
            # Until every child's exit is out of both (or the deadline), then SIGINT.
            pids = set(load["pids"])
            for _, out_path, _ in mons.values():
                while time.monotonic() < deadline:
                    data = open(out_path, "rb").read()
                    exited = {int(m.group(2)) for m in TASK_RE.finditer(data)
                              if m.group(1) == b"exit"}
                    if pids <= exited:
                        break
                    time.sleep(0.1)
        finally:
            for mon, _, _ in mons.values():
                mon.send_signal(signal.SIGINT)
            for mon, _, _ in mons.values():
                mon.wait(timeout=DEADLINE)
        res = {n: (m.returncode, open(o, "rb").read(),
                   open(e, "rb").read().decode(errors="replace"))
               for n, (m, o, e) in mons.items()}
    return load, res


def check_twatch(twatch, stress, count, perf_python):
    """benches/twatch.py with `import perf` changed to `import perfwatch as perf` prints
    every fork and exit of a fork storm; and, beside it on the same storm, twatch.py on perf's
    binding (`perf_python`, when given) printed the same lines for every child it saw."""
    load, res = run_twatch_pair(twatch, stress, ["fork", "--count", str(count)], perf_python)
    rc, data, err = res["perfwatch"]
    assert rc == 0, (rc, err)
    pids = set(load["pids"])
    forked = {int(m.group(2)) for m in TASK_RE.finditer(data)
              if m.group(1) == b"fork" and int(m.group(3)) == load["pid"]}
    exited = {int(m.group(2)) for m in TASK_RE.finditer(data) if m.group(1) == b"exit"}
    assert len(pids) == count, (len(pids), count)
    assert pids <= forked, ("forks missing", len(pids - forked), "of", count)
    assert pids <= exited, ("exits missing", len(pids - exited), "of", count)
    assert re.search(r"twatch: \d+ records, lost 0 ", err), err
    same = ""
    if "perf" in res:
        ours = storm_lines(data, load["pid"], pids)
        theirs = storm_lines(res["perf"][1], load["pid"], pids)
        assert len(theirs) > count // 2, ("perf's binding saw too few children", len(theirs))
        for pid, lines in theirs.items():
            assert lines <= ours[pid], (pid, lines, ours[pid])
        same = "; the same lines as perf's binding for the %d children it saw" % len(theirs)
    print("ok twatch.py with `import perfwatch as perf`: %d/%d forks and exits%s, %s"
          % (len(pids & forked), count, same, err.strip().splitlines()[-1]))


def check_twatch_exec(twatch, stress, count, perf_python):
    """The same pair on a storm whose children exec /bin/true: perfwatch's twatch prints a
    fork, comm, mmap and exit line for every child, and every fork/exit/comm/mmap line perf's
    binding printed for a child is among perfwatch's, character for character (time aside)."""
    load, res = run_twatch_pair(twatch, stress, ["exec", "--count", str(count)], perf_python)
    rc, data, err = res["perfwatch"]
    assert rc == 0, (rc, err)
    pids = set(load["pids"])
    assert len(pids) == count, (len(pids), count)
    ours = child_lines(data, pids)
    for kind in (b"fork", b"comm", b"mmap", b"exit"):
        missing = [p for p in pids if not any(k == kind for k, _ in ours[p])]
        assert not missing, ("children without a %s line" % kind.decode(), len(missing),
                             "of", count, sorted(missing)[:5])
    comm = ("{ type: comm, pid: %d, tid: %d, comm: " % (min(pids), min(pids))).encode()
    assert any(comm in line for _, line in ours[min(pids)]), ours[min(pids)]
    same = ""
    if "perf" in res:
        theirs = child_lines(res["perf"][1], pids)
        assert len(theirs) > count // 2, ("perf's binding saw too few children", len(theirs))
        compared = collections.Counter()
        for pid, lines in theirs.items():
            assert lines <= ours[pid], (pid, sorted(lines - ours[pid]))
            compared.update(k.decode() for k, _ in lines)
        same = "; perf's binding's lines for its %d children all among them (%s)" % (
            len(theirs), ", ".join("%s %d" % kv for kv in sorted(compared.items())))
    print("ok twatch.py on an exec storm: fork, comm, mmap and exit lines of %d/%d children%s"
          % (len(ours), count, same))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stress", required=True)
    ap.add_argument("--twatch", required=True)
    ap.add_argument("--cc", default="cc")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--exec-count", type=int, default=300)
    ap.add_argument("--perf-python", help="a python with perf's binding (/usr/bin/python3)")
    a = ap.parse_args()
    check_import_from_venv()
    check_break_cleans_up()
    check_stats_and_interrupt()
    check_tracepoint_fields()
    check_binding_tracepoint()
    check_get_pollfd()
    check_counting()
    check_names_functions(a.cc)
    check_twatch(a.twatch, a.stress, a.count, a.perf_python)
    check_twatch_exec(a.twatch, a.stress, a.exec_count, a.perf_python)
    print("all ok")


if __name__ == "__main__":
    main()
