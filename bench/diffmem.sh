#!/usr/bin/env bash
# `cacheheat diff` of two 1 h x 128 CPU synthetic recordings (bench/genrec,
# seeds 1 and 2), before and after diff streamed its recordings, side by
# side in one run, in format v1 and v2: wall time and peak RSS of the
# table (the CI path) and of the HTML report (-o, which also builds each
# side's model for the heatmaps). BASE is built from `git archive
# BASE_REV` (default main); runs are interleaved.
#
# Every metric of both recordings is extracted (about 1400 a side), but
# only --metric cpu-clock/s is tested: testing all of them takes more than
# 10 minutes of CPU (2000 bootstrap rounds of 3600 windows each), and the
# test's memory is per metric, freed before the next, so what the runs
# measure is reading and reducing the recordings.
#
#   bench/diffmem.sh [BASE_REV] [RUNS]     prints a BENCHMARKS.md table
set -euo pipefail
cd "$(dirname "$0")/.."
base_rev=${1:-main} runs=${2:-3} tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/bin-after" ./cmd/cacheheat
go build -o "$tmp/genrec" ./bench/genrec
mkdir "$tmp/src" && git archive "$base_rev" | tar -x -C "$tmp/src"
(cd "$tmp/src" && go build -o "$tmp/bin-before" ./cmd/cacheheat)
for v in 1 2; do
  for seed in 1 2; do
    "$tmp/genrec" -o "$tmp/big-v$v-$seed.rec" -cpus 128 -windows 3600 -interval 1s -format "$v" -seed "$seed"
  done
done

# Each run appends "NAME seconds KB" to $tmp/runs; the table shows each
# NAME's best time and largest peak RSS.
for i in $(seq "$runs"); do
  for v in 1 2; do
    for b in before after; do
      pair=("$tmp/big-v$v-1.rec" "$tmp/big-v$v-2.rec")
      for out in text html; do
        opt=()
        [ "$out" = html ] && opt=(-o "$tmp/diff.html")
        /usr/bin/time -f "$out-$v-$b %e %M" -a -o "$tmp/runs" "$tmp/bin-$b" diff --metric cpu-clock/s "${opt[@]}" "${pair[@]}" >/dev/null 2>&1 || true
      done
    done
  done
  echo "run $i of $runs done" >&2
done
cell() {
  awk -v n="$1" '$1 == n && (!k++ || $2 < t) { t = $2 } $1 == n && $3 > m { m = $3 } END { printf "%.2f s | %d MB", t, m / 1024 }' "$tmp/runs"
}

echo "| format | files | build | \`diff\` best of $runs | peak RSS (max) | \`diff -o diff.html\` best of $runs | peak RSS (max) |"
echo "|---|---|---|---|---|---|---|"
for v in 1 2; do
  mb=$(awk -v a="$(stat -c %s "$tmp/big-v$v-1.rec")" -v b="$(stat -c %s "$tmp/big-v$v-2.rec")" 'BEGIN { printf "%.1f + %.1f MB", a / 1e6, b / 1e6 }')
  for b in before after; do
    echo "| v$v | $mb | $b | $(cell "text-$v-$b") | $(cell "html-$v-$b") |"
  done
done
