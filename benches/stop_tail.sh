#!/bin/bash
# The tail of a `-d` run, per CPU, side by side with `perf record -k mono` (issue 22, "Events
# missing without a count"). On a busy machine (two CPU-bound loops and a `perf record -a
# -F 4000` beside it), runs `PERFWATCH --json -a -e timer:hrtimer_expire_entry -d 3` RUNS
# times with a concurrent `perf record -k mono -a -e timer:hrtimer_expire_entry`, and says per
# CPU how many of perf's hits inside perfwatch's window perfwatch lacks. The window ends at
# the stop time the summary says ("stopped at"), or, for a build that does not say one, at
# perfwatch's last record on any CPU. Hits are matched by the tracepoint's own payload (the
# timer's `now` and address): the two tools' sample times differ by a microsecond.
#
# Usage (as root): benches/stop_tail.sh target/release/perfwatch [RUNS]
set -u
PW=$1
RUNS=${2:-3}
EV=timer:hrtimer_expire_entry
D=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$D"' EXIT
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
for run in $(seq "$RUNS"); do
    loops=()
    for _ in 1 2; do ( while :; do :; done ) & loops+=($!); done
    perf record -q -a -F 4000 -o /dev/null 2>/dev/null & load=$!
    perf record -q -k mono -a -e $EV -o "$D/ref.data" 2>/dev/null & ref=$!
    sleep 1
    "$PW" --json -a -e $EV -d 3 > "$D/pw.json" 2> "$D/pw.err" & pw=$!
    wait $pw
    sleep 0.5
    kill -INT $ref $load; wait $ref $load 2>/dev/null
    kill "${loops[@]}"; wait "${loops[@]}" 2>/dev/null
    perf script -i "$D/ref.data" -F pid,cpu,time,trace --ns 2>/dev/null > "$D/ref.txt"
    echo "run $run:"
    python3 - "$D/pw.json" "$D/ref.txt" "$D/pw.err" "$pw" <<'PY'
import collections, json, re, sys
pw = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    try:
        o = json.loads(line)
    except ValueError:
        continue
    if o.get("type") == "sample":
        pw[o["sample_cpu"]][(o["now"], int(o["hrtimer"], 16))] = o["sample_time"]
pid = int(sys.argv[4])
ref = collections.defaultdict(dict)
pat = re.compile(r"\s*(\d+)\s+\[(\d+)\]\s+(\d+)\.(\d+):.*hrtimer=(0x[0-9a-f]+)\s+function=\S+\s+now=(\d+)")
for line in open(sys.argv[2]):
    m = pat.match(line)
    if m and int(m.group(1)) != pid:  # perfwatch hides its own records
        ref[int(m.group(2))][(int(m.group(6)), int(m.group(5), 16))] = int(m.group(3)) * 10**9 + int(m.group(4))
err = open(sys.argv[3]).read()
m = re.search(r"stopped at (\d+)\.(\d+)", err)
last = max(max(v.values()) for v in pw.values() if v)
end = int(m.group(1)) * 10**9 + int(m.group(2)) if m else last
print("  window ends at", "the stop time T" if m else "perfwatch's last record", end)
for cpu in sorted(set(pw) | set(ref)):
    mine = pw.get(cpu, {})
    first = min(mine.values()) if mine else end
    theirs = {k: t for k, t in ref.get(cpu, {}).items() if first < t <= end - 1_000_000}
    miss = sorted(t for k, t in theirs.items() if k not in mine)
    tail = f", the last {(end - miss[0]) / 1e6:.1f} ms before the end" if miss else ""
    print(f"  cpu {cpu}: {len(theirs)} of perf's hits in the window, {len(miss)} missing{tail}")
for l in err.splitlines():
    if "lost by the kernel" in l or "stopped at" in l:
        print("  " + l.strip())
PY
done
