#!/usr/bin/env bash
# The recorder's CPU over a process's start: `record -a`, then rcu bad
# (3 s, from a copy of BIN) started under it; prints the recorder's CPU in
# ms over the workload's run and 1.5 s after (indexing its binary, the
# first windows with it), then over the 4.5 s after that (steady), from
# the schedstat of the recorder's threads. Alternate binaries to compare.
# Needs root.
# Usage: bench/startcost.sh BIN [RUNS] (default 1)
set -euo pipefail
bin=$1
runs=${2:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$bin" "$tmp/workload"
cpu() { awk '{s += $1} END {printf "%d", s / 1e6}' /proc/"$1"/task/*/schedstat; }
for _ in $(seq "$runs"); do
  "$bin" record -a -q -o "$tmp/r.rec" -d 30s >/dev/null 2>&1 &
  rec=$!
  sleep 4
  c0=$(cpu $rec)
  "$tmp/workload" workload run rcu --variant bad -t 2 -d 3s >/dev/null
  sleep 1.5
  c1=$(cpu $rec)
  sleep 4.5
  c2=$(cpu $rec)
  kill -INT $rec
  wait $rec || true
  echo "start $((c1 - c0)) ms, steady $((c2 - c1)) ms"
done
