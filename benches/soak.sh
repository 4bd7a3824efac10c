#!/usr/bin/env bash
# Soak: SECS seconds (default 600) of mixed load (forks, execs, threads, mmaps) under
# perfwatch, in the TUI (in a tmux pseudo-terminal) or --plain to /dev/null. Prints the
# monitor's RSS every 10 seconds, then its summary: RSS must stay flat, lost must be 0.
#
#   benches/soak.sh [SECS] [tui|plain]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
mode=${2:-tui}
cargo build --release -q --bins
pw=$PWD/target/release/perfwatch
st=$PWD/target/release/perfwatch-stress
work=$(mktemp -d)
trap 'tmux kill-session -t perfwatch-soak 2>/dev/null || true; rm -rf "$work"' EXIT

if [ "$mode" = tui ]; then
    tmux kill-session -t perfwatch-soak 2>/dev/null || true
    tmux new-session -d -s perfwatch-soak -x 120 -y 40 "exec $pw -F 1000 2>$work/summary"
    sleep 1
    pid=$(tmux display-message -p -t perfwatch-soak '#{pane_pid}')
else
    "$pw" --plain -F 1000 >/dev/null 2>"$work/summary" &
    pid=$!
fi
sleep 2
echo "soak: $mode, perfwatch pid $pid, ${secs}s of mixed load"

loads=()
"$st" fork --duration "$secs" --rate 2000 -o "$work/fork.json" & loads+=($!)
"$st" exec --duration "$secs" --rate 200 -o "$work/exec.json" & loads+=($!)
"$st" threads --duration "$secs" --rate 1000 -o "$work/threads.json" & loads+=($!)
"$st" mmap --duration "$secs" --rate 500 -o "$work/mmap.json" & loads+=($!)

printf '%8s %10s %10s %8s\n' "t(s)" "rss(KiB)" "hwm(KiB)" "cpu(s)"
t=0
while [ "$t" -lt "$secs" ]; do
    sleep 10
    t=$((t + 10))
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
    hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")
    cpu=$(awk -v hz="$(getconf CLK_TCK)" '{printf "%.1f", ($14 + $15) / hz}' "/proc/$pid/stat")
    printf '%8d %10s %10s %8s\n' "$t" "$rss" "$hwm" "$cpu"
done
wait "${loads[@]}"

kill -INT "$pid"
for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
sleep 0.5
echo "--- perfwatch summary"
cat "$work/summary"
echo "--- load generated"
for m in fork exec threads mmap; do
    printf '%-8s ' "$m"
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print({k: v for k, v in d.items() if not isinstance(v, list)})' "$work/$m.json"
done
