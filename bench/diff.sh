#!/usr/bin/env bash
# Records the rcu workload's good and bad variants (and good twice) and
# runs `cacheheat diff` both ways and on the same variant: the numbers of
# BENCHMARKS.md's "diff" section. Needs root (BPF). About 40 s.
set -uo pipefail
cd "$(dirname "$0")/.."
make -s build
bin=$PWD/bin/cacheheat
out=${OUT:-out/bench-diff}
mkdir -p "$out"
for v in good bad good2; do
  variant=${v%2}
  "$bin" record -q -i 250ms -o "$out/$v.rec" -- "$bin" workload run rcu --variant "$variant" -t 4 -d 8s 2>/dev/null | tail -1
done
for pair in "good bad" "bad good" "good good2"; do
  set -- $pair
  echo "== cacheheat diff $1.rec $2.rec"
  "$bin" diff "$out/$1.rec" "$out/$2.rec" -o "$out/$1-$2.html" --markdown "$out/$1-$2.md" | grep -v '^no change'
  echo "exit ${PIPESTATUS[0]}"
done
