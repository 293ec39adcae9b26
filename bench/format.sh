#!/usr/bin/env bash
# Recording format v1 vs v2, side by side in one run (BENCHMARKS.md).
#
#   bench/format.sh synth [RUNS]   1 h x 128 CPUs synthetic recording (bench/genrec)
#                                  in both formats: file size, read time (best of
#                                  RUNS), report time and peak RSS (best of RUNS)
#   bench/format.sh marginal [R20 R60]
#                                  root: record -a at 99 Hz over 'workload run
#                                  falseshare -t 2' for 20 s and 60 s (or take
#                                  the two recordings given), print the marginal
#                                  size per CPU-window of the files as recorded,
#                                  (size(60 s) - size(20 s)) / (40 windows x CPUs),
#                                  rewrite both in v1 and in the current v2 and
#                                  print it for each, then what each window field
#                                  costs of it (recsize -breakdown). Goal: v2 <=
#                                  100 bytes. The recordings are kept in
#                                  $KEEP when it is set.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-synth}"
runs="${2:-3}"
bin=bin/cacheheat
go build -o "$bin" ./cmd/cacheheat
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/recsize" ./bench/recsize

case "$mode" in
synth)
  echo "| format | file | read (best of $runs) | report (best of $runs) | report peak RSS (max of $runs) |"
  echo "|---|---|---|---|---|"
  for v in 1 2; do
    rec="$tmp/big-v$v.rec"
    go run ./bench/genrec -o "$rec" -cpus 128 -windows 3600 -interval 1s -format "$v"
    mb=$(awk -v b="$(stat -c %s "$rec")" 'BEGIN { printf "%.1f", b / 1e6 }')
    read=$("$tmp/recsize" -read "$rec" "$runs")
    best="" rss=0
    for i in $(seq "$runs"); do
      /usr/bin/time -f "%e %M" -o "$tmp/time" "$bin" report "$rec" -o "$tmp/big.html" >/dev/null
      read -r t kb <"$tmp/time"
      echo "v$v report run $i: ${t}s, ${kb} KB peak RSS" >&2
      if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$t; fi
      if [ "$kb" -gt "$rss" ]; then rss=$kb; fi
    done
    echo "| v$v | ${mb} MB | ${read} s | ${best} s | $((rss / 1024)) MB |"
  done
  ;;
marginal)
  if [ $# -ge 3 ]; then
    cp "$2" "$tmp/r20.rec"
    cp "$3" "$tmp/r60.rec"
  else
    [ "$(id -u)" = 0 ] || { echo "marginal: needs root to record" >&2; exit 3; }
    for d in 20 60; do
      "$bin" workload run falseshare -t 2 -d "$((d + 5))s" >/dev/null &
      wl=$!
      sleep 1
      "$bin" record -a -q -F 99 -d "${d}s" -o "$tmp/r$d.rec"
      kill "$wl" 2>/dev/null || true
      wait "$wl" 2>/dev/null || true
    done
    if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$tmp"/r20.rec "$tmp"/r60.rec "$KEEP"/; fi
  fi
  s20=$(stat -c %s "$tmp/r20.rec")
  s60=$(stat -c %s "$tmp/r60.rec")
  cpus=$(nproc)
  echo "as recorded: $s20 and $s60 bytes; (size(60 s) - size(20 s)) / (40 x $cpus CPUs) = $(( (s60 - s20) / (40 * cpus) )) bytes per CPU-window"
  "$tmp/recsize" -marginal "$tmp/r20.rec" "$tmp/r60.rec"
  "$tmp/recsize" -breakdown "$tmp/r20.rec" "$tmp/r60.rec"
  ;;
*)
  echo "usage: bench/format.sh synth [RUNS] | marginal [R20 R60]" >&2
  exit 2
  ;;
esac
