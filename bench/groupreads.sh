#!/usr/bin/env bash
# How often an empty cgroup's recorder reads the CPUs' software counter
# groups, and what it costs: each binary records an empty cgroup for
# SECONDS, rounds interleaved; the group reads are the recorder's read(2)
# calls (/proc/PID/io syscr: a window's other reads are bpf(2) calls),
# its CPU time the sum of its threads' run time (schedstat). A group of
# another CPU is read by interrupting that CPU (docs/INTERNALS.md,
# "Collection"), so fewer reads is what telling counts buys.
#   bash bench/groupreads.sh ROUNDS SECONDS BIN [BIN...]   (root)
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 ROUNDS SECONDS BIN [BIN...]" >&2; exit 2; }
rounds=$1 secs=$2
shift 2
cg=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/self/mounts)/cacheheat-groupreads-$$
mkdir -p "$cg"
tmp=$(mktemp -d)
trap 'rmdir "$cg"; rm -rf "$tmp"' EXIT
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{n += $1} END {print n}'; }
reads() { awk '/^syscr/ {print $2}' /proc/"$1"/io; }
echo "| round | binary | group reads in $secs s | recorder, % of one CPU |"
echo "|---|---|---|---|"
for r in $(seq 1 "$rounds"); do
  for bin in "$@"; do
    "$bin" record -q -G "$cg" -F 99 -o "$tmp/r.rec" >/dev/null 2>&1 &
    pid=$!
    sleep 5 # loaded and attached
    r0=$(reads $pid) c0=$(cpu_ns $pid)
    sleep "$secs"
    r1=$(reads $pid) c1=$(cpu_ns $pid)
    kill -INT $pid
    wait $pid || true
    echo "| $r | $(basename "$bin") | $((r1 - r0)) | $(awk -v a="$c0" -v b="$c1" -v s="$secs" 'BEGIN {printf "%.3f%%", (b - a) / (s * 1e7)}') |"
  done
done
