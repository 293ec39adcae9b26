#!/usr/bin/env bash
# cacheheat probe against an independent C ping-pong (issue 29): the
# time of probe --quick and of a full probe, then bench/c2c over every
# ordered pair of the same CPUs, compared pair by pair (bench/probecmp),
# and the staircase's steps against the cache sizes.
#   bash bench/probe.sh                 # builds what it needs here
#   BIN=... C2C=... PROBECMP=... bash bench/probe.sh   # prebuilt (the 16-CPU machine)
set -uo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -z "${BIN:-}" ]; then
  make -s build
  BIN=$PWD/bin/cacheheat
  cc -O2 -pthread -o "$tmp/c2c" bench/c2c/c2c.c
  C2C=$tmp/c2c
  go build -o "$tmp/probecmp" ./bench/probecmp
  PROBECMP=$tmp/probecmp
fi
export CACHEHEAT_PROBE_DIR=$tmp/probes
now() { date +%s.%N; }
t0=$(now)
"$BIN" probe --quick --json -o "$tmp/quick.json" >/dev/null 2>&1
t1=$(now)
"$BIN" probe --json -o "$tmp/full.json" >/dev/null 2>&1
t2=$(now)
echo "probe --quick: $(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }") s wall; probe (full): $(awk "BEGIN { printf \"%.1f\", $t2 - $t1 }") s wall"
# Every CPU this shell may run on, in id order.
cpus=$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/self/status | tr ',' '\n' | awk -F- '{ if (NF == 2) for (i = $1; i <= $2; i++) print i; else print $1 }' | tr '\n' ' ')
t3=$(now)
"$C2C" $cpus >"$tmp/c2c.txt"
t4=$(now)
echo "C ping-pong over the same pairs: $(awk "BEGIN { printf \"%.1f\", $t4 - $t3 }") s"
"$C2C" $cpus >"$tmp/c2c-2.txt"
echo
echo "C against a second run of C (the floor):"
"$PROBECMP" "$tmp/c2c-2.txt" "$tmp/c2c.txt"
echo
echo "full probe against C:"
"$PROBECMP" "$tmp/full.json" "$tmp/c2c.txt"
echo
echo "--quick against C:"
"$PROBECMP" "$tmp/quick.json" "$tmp/c2c.txt"
