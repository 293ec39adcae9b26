#!/usr/bin/env bash
# Report size and speed on a long, wide recording: 1 h of 1 s windows on
# 128 CPUs with ten events (a synthetic recording from bench/genrec; its
# counts are made up, its shape is what matters). The issue's budget:
# at most 5 MB, written in at most 3 s.
# Usage: bench/report.sh [RUNS]   (default 3; prints a BENCHMARKS.md row)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
bin=bin/cacheheat
[ -x "$bin" ] || go build -o "$bin" ./cmd/cacheheat
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
rec="$tmp/big.rec"
go run ./bench/genrec -o "$rec" -cpus 128 -windows 3600 -interval 1s
rec_mb=$(awk -v b="$(stat -c %s "$rec")" 'BEGIN { printf "%.1f", b / 1e6 }')
best=""
for i in $(seq "$runs"); do
  start=$(date +%s.%N)
  "$bin" report "$rec" -o "$tmp/big.html" >/dev/null
  end=$(date +%s.%N)
  t=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.2f", e - s }')
  echo "run $i: ${t}s" >&2
  if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$t; fi
done
html_mb=$(awk -v b="$(stat -c %s "$tmp/big.html")" 'BEGIN { printf "%.2f", b / 1e6 }')
echo "| 1 h x 128 CPUs x 10 events, 1 s windows (${rec_mb} MB recording) | ${html_mb} MB | ${best} s (best of ${runs}, read + render + write) |"
