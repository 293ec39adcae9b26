#!/usr/bin/env bash
# What a CPU sample's user stack costs by its depth: a C program recursing
# DEPTH frames into a busy loop, pinned to CPU 1, recorded by each build
# at 999 Hz on that CPU alone (record -p PID -C 1), and the cpu-clock
# sampler's ns per run from bpf_stats over 8 s. Builds interleaved,
# rounds repeated (BENCHMARKS.md, "The user stack walk").
# Needs root, gcc, bpftool, python3, 2 CPUs or more.
# Usage: bench/ustack.sh ROUNDS "DEPTHS" name=bin[,name=bin..]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2} DEPTHS=${2:-"1 20 60"}
IFS=, read -ra BINS <<<"${3:-cacheheat=bin/cacheheat}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/deep.c" <<'C'
#include <stdlib.h>
volatile unsigned long sink;
__attribute__((noinline)) void leaf(void) { while (sink < 1UL << 62) sink++; }
__attribute__((noinline)) void rec(int n) { if (n > 0) rec(n - 1); else leaf(); sink++; }
int main(int argc, char **argv) { rec(atoi(argv[1])); return 0; }
C
gcc -O1 -fno-omit-frame-pointer -fno-optimize-sibling-calls -o "$dir/deep" "$dir/deep.c"
sysctl -qw kernel.bpf_stats_enabled=1
stat() { # runs and ns of sample_clock
  bpftool prog show --json | python3 -c '
import json, sys
for p in json.load(sys.stdin):
    if p.get("name") == "sample_clock":
        print(p.get("run_cnt", 0), p.get("run_time_ns", 0))'
}
for r in $(seq 1 "$ROUNDS"); do
  for d in $DEPTHS; do
    for b in "${BINS[@]}"; do
      n=${b%%=*} p=${b#*=}
      taskset -c 1 "$dir/deep" "$d" & w=$!
      "$p" record -q -p "$w" -C 1 -F 999 -o "$dir/r.rec" >/dev/null 2>&1 & rec=$!
      sleep 4
      read -r c0 t0 <<<"$(stat)"
      sleep 8
      read -r c1 t1 <<<"$(stat)"
      kill -INT "$rec"; wait "$rec" || true
      kill "$w"; wait "$w" 2>/dev/null || true
      echo "round $r depth $d $n $(( (t1 - t0) / (c1 - c0) )) ns/sample ($(( c1 - c0 )) samples)"
    done
  done
done
