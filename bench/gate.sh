#!/usr/bin/env bash
# The CI gate's goals, measured: `cacheheat diff` of repeated runs
# (record -r N) of a CPU-bound C program (cmd/cacheheat/testdata/programs/
# work.c), a slower build being the same program doing more steps.
#   slow5   -r 10 a side, 5% more work: caught (exit 1) in >= 9 of 10 pairs
#   self    -r 10 a side, the same program: exit 0 in >= 19 of 20 pairs
#   selfbg  the same beside a 2-thread background load (stress-ng --cpu 2)
#   slow25  -r 5 a side, 25% more work, beside that load: caught
# Prints one table row per case: exits 0/1/2 counted. Needs root (BPF), cc
# and, for the loaded cases, stress-ng. About 10 minutes on 2 CPUs.
# Usage: bench/gate.sh [CASE...]   (default: all four)
# GATE_LOG=FILE appends each pair's gate lines (verdict, ratio, interval,
# p) to FILE.
set -uo pipefail
cd "$(dirname "$0")/.."
make -s build
bin=$PWD/bin/cacheheat
tmp=$(mktemp -d)
bg=""
trap '[ -n "$bg" ] && kill "$bg" 2>/dev/null; rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/work" cmd/cacheheat/testdata/programs/work.c
base=100000000 # ~0.15 s of work on this host

# pairs NAME PAIRS RUNS NEW_STEPS: records PAIRS pairs (base, then new) and
# diffs each; prints the exit codes counted.
pairs() {
  local name=$1 n=$2 runs=$3 steps=$4 c0=0 c1=0 c2=0 other=0
  for i in $(seq "$n"); do
    "$bin" record -q -r "$runs" -o "$tmp/a.rec" -- "$tmp/work" "$base" >/dev/null 2>&1
    "$bin" record -q -r "$runs" -o "$tmp/b.rec" -- "$tmp/work" "$steps" >/dev/null 2>&1
    "$bin" diff "$tmp/a.rec" "$tmp/b.rec" >"$tmp/diff.txt" 2>/dev/null
    code=$?
    # The gate metrics' lines, for GATE_LOG (verdict, ratio, interval, p).
    [ -n "${GATE_LOG:-}" ] && grep -E ' (wall|cpu) time ' "$tmp/diff.txt" | sed "s/^/$name pair $i: /" >>"$GATE_LOG"
    case $code in
      0) c0=$((c0 + 1)) ;;
      1) c1=$((c1 + 1)) ;;
      2) c2=$((c2 + 1)) ;;
      *) other=$((other + 1)) ;;
    esac
  done
  echo "| $name | $n pairs, -r $runs | exit 0: $c0, exit 1: $c1, exit 2: $c2, other: $other |"
}

load() {
  stress-ng --cpu 2 --timeout 0 >/dev/null 2>&1 &
  bg=$!
}
unload() {
  [ -n "$bg" ] && kill "$bg" 2>/dev/null
  wait "$bg" 2>/dev/null
  bg=""
}

cases=${*:-slow5 self selfbg slow25}
echo "| case | pairs | exits |"
echo "|---|---|---|"
for c in $cases; do
  case $c in
    slow5) pairs "5% more work, quiet" 10 10 105000000 ;;
    self) pairs "the same program, quiet" 20 10 "$base" ;;
    selfbg) load; pairs "the same program, beside stress-ng --cpu 2" 20 10 "$base"; unload ;;
    slow25) load; pairs "25% more work, beside stress-ng --cpu 2" 10 5 125000000; unload ;;
  esac
done
