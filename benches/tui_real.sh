#!/bin/sh
# The real binary's CPU time per record, TUI against --plain, at about 10,000 records/s:
# cpu-clock system-wide at FREQ Hz on each CPU (5000 x 2 CPUs), for SECS seconds. The TUI
# runs in a detached tmux session (a real terminal, 120x40); --plain writes to /dev/null.
# The difference between the two is what the TUI itself costs over the readers' work.
#
#   cargo build --release && sudo benches/tui_real.sh
set -eu
BIN=${BIN:-target/release/perfwatch}
SECS=${SECS:-15}
FREQ=${FREQ:-5000}
out=$(mktemp -d)
trap 'rm -rf "$out"; tmux kill-session -t pwbench 2>/dev/null || true' EXIT
tmux new-session -d -s pwbench -x 120 -y 40 \
  "/usr/bin/time -f '%U %S' -o $out/tui.time $BIN -F $FREQ -d $SECS 2>$out/tui.err; tmux wait-for -S pwbench-done"
tmux wait-for pwbench-done
/usr/bin/time -f '%U %S' -o "$out/plain.time" "$BIN" --plain -F "$FREQ" -d "$SECS" >/dev/null 2>"$out/plain.err"
for m in tui plain; do
  recs=$(sed -n 's/^perfwatch: \([0-9]*\) records in.*/\1/p' "$out/$m.err")
  read -r u s <"$out/$m.time"
  awk -v u="$u" -v s="$s" -v r="$recs" -v m="$m" -v t="$SECS" 'BEGIN {
    printf "%-6s %8d records (%.0f/s), %.2f s CPU: %.2f us per record (readers included)\n",
      m, r, r / t, u + s, (u + s) * 1e6 / r }'
done
