#!/usr/bin/env bash
# What the recorder's timer slack buys, in one recorder process: the
# slack of all its threads is set from outside (/proc/TID/timerslack_ns),
# alternating between the values in SLACKS for PAIRS rounds of SECONDS,
# and each round's recorder time (schedstat of its threads) and context
# switches are printed. One process for all rounds, so its start (loading,
# symbolizing) is in none of them. Run the load to record beside it.
#   SLACKS="50000 1000000" bash bench/slack-toggle.sh PAIRS SECONDS BIN RECORD-ARGS...
# e.g. bash bench/slack-toggle.sh 6 15 bin/cacheheat record -q -a -F 99 -o /tmp/t.rec
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: $0 PAIRS SECONDS BIN RECORD-ARGS..." >&2; exit 2; }
pairs=$1 secs=$2 bin=$3
shift 3
"$bin" "$@" >/dev/null 2>&1 &
pid=$!
trap 'kill -INT $pid 2>/dev/null; wait $pid || true' EXIT
sleep 8 # loaded, attached, first processes symbolized
cpu() { cat /proc/$pid/task/*/schedstat | awk '{n += $1; s += $3} END {print n, s}'; }
setslack() { for t in $(ls /proc/$pid/task); do echo "$1" >/proc/$t/timerslack_ns 2>/dev/null || true; done; }
echo "| round | timer slack, ns | recorder, % of one CPU | its context switches |"
echo "|---|---|---|---|"
for r in $(seq 1 "$pairs"); do
  for s in ${SLACKS:-50000 1000000}; do
    setslack "$s"
    read -r c0 w0 <<<"$(cpu)"
    sleep "$secs"
    read -r c1 w1 <<<"$(cpu)"
    echo "| $r | $s | $(awk -v a="$c0" -v b="$c1" -v s="$secs" 'BEGIN {printf "%.4f%%", (b - a) / (s * 1e7)}') | $((w1 - w0)) |"
  done
done
