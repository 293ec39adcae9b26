#!/usr/bin/env bash
# The cpu-clock sampler's cost (bpf_stats ns per run of sample_clock) and
# the recorder's CPU time under `record -a` beside a load that faults all
# the time (stress-ng --fault 1), where the sampler reads its CPU's fault
# counters in place after nearly every sample (docs/INTERNALS.md,
# "Collection"). Builds interleaved, ROUNDS rounds of SECONDS each.
#   bash bench/sampler-faults.sh ROUNDS SECONDS BIN [BIN...]   (root; stress-ng, bpftool, python3)
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 ROUNDS SECONDS BIN [BIN...]" >&2; exit 2; }
rounds=$1 secs=$2
shift 2
tmp=$(mktemp -d)
old=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -qw kernel.bpf_stats_enabled=$old; rm -rf "$tmp"' EXIT
sysctl -qw kernel.bpf_stats_enabled=1
prog() { bpftool prog show --json | python3 -c 'import json,sys; d=[p for p in json.load(sys.stdin) if p.get("name")=="sample_clock"]; print(sum(p.get("run_time_ns",0) for p in d), sum(p.get("run_cnt",0) for p in d))'; }
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{n += $1} END {print n}'; }
echo "| round | binary | sample_clock ns/run | runs | recorder, % of one CPU |"
echo "|---|---|---|---|---|"
for r in $(seq 1 "$rounds"); do
  for bin in "$@"; do
    stress-ng --fault 1 -q &
    load=$!
    "$bin" record -q -a -F 99 -o "$tmp/r.rec" >/dev/null 2>&1 &
    pid=$!
    sleep 4 # loaded and attached
    p0=$(prog) c0=$(cpu_ns $pid)
    sleep "$secs"
    p1=$(prog) c1=$(cpu_ns $pid)
    kill -INT $pid; wait $pid || true
    kill $load; wait $load 2>/dev/null || true
    echo "$r $(basename "$bin") $p0 $p1 $c0 $c1 $secs" | awk '{printf "| %s | %s | %.0f | %d | %.3f%% |\n", $1, $2, ($5-$3)/($6-$4), $6-$4, ($8-$7)/($9*1e7)}'
  done
done
