#!/usr/bin/env bash
# Reading, rendering and analysing a recording as a stream (model/ and
# attribution's Builder), before and after, side by side in one run: the
# 1 h x 128 CPU synthetic recording (bench/genrec) in format v1 and v2; for
# each build, the read time of profile.ReadFile (bench/recsize), and the
# wall time and peak RSS of `report`, `analyze` and `inspect`. BASE is
# built from `git archive BASE_REV` (default main). The row "after, no
# findings" is bench/modelreport: the report streamed through the model
# without findings, so that the difference to "after" is what attribution
# costs `report`.
#
#   bench/model.sh [BASE_REV] [RUNS]     prints a BENCHMARKS.md table
set -euo pipefail
cd "$(dirname "$0")/.."
base_rev="${1:-main}"
runs="${2:-3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/base"
git archive "$base_rev" | tar -x -C "$tmp/base"
(cd "$tmp/base" && go build -o "$tmp/bin-before" ./cmd/cacheheat && go build -o "$tmp/recsize-before" ./bench/recsize)
go build -o "$tmp/bin-after" ./cmd/cacheheat
go build -o "$tmp/recsize-after" ./bench/recsize
go build -o "$tmp/modelreport" ./bench/modelreport
for v in 1 2; do
  go run ./bench/genrec -o "$tmp/big-v$v.rec" -cpus 128 -windows 3600 -interval 1s -format "$v"
done

# run NAME CMD...: runs CMD once, appends "seconds KB" to $tmp/NAME.
run() {
  local name=$1
  shift
  /usr/bin/time -f "%e %M" -o "$tmp/time" "$@" >/dev/null
  cat "$tmp/time" >>"$tmp/$name"
}
# best NAME: "best seconds / max MB" of NAME's runs.
best() {
  awk 'NR == 1 || $1 < t { t = $1 } $2 > m { m = $2 } END { printf "%.2f s | %d MB", t, m / 1024 }' "$tmp/$1"
}

for i in $(seq "$runs"); do
  for v in 1 2; do
    for b in before after; do
      run "report-$v-$b" "$tmp/bin-$b" report "$tmp/big-v$v.rec" -o "$tmp/big.html"
      run "analyze-$v-$b" "$tmp/bin-$b" analyze "$tmp/big-v$v.rec"
      run "inspect-$v-$b" "$tmp/bin-$b" inspect "$tmp/big-v$v.rec"
    done
    run "nofindings-$v" "$tmp/modelreport" "$tmp/big-v$v.rec" "$tmp/big.html"
  done
  echo "run $i of $runs done" >&2
done

echo "| format | file | build | read (\`profile.ReadFile\`, best of $runs) | \`report\` best of $runs | \`report\` peak RSS (max) | \`analyze\` best of $runs | \`analyze\` peak RSS (max) | \`inspect\` best of $runs | \`inspect\` peak RSS (max) |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for v in 1 2; do
  mb=$(awk -v b="$(stat -c %s "$tmp/big-v$v.rec")" 'BEGIN { printf "%.1f", b / 1e6 }')
  for b in before after; do
    read=$("$tmp/recsize-$b" -read "$tmp/big-v$v.rec" "$runs")
    echo "| v$v | $mb MB | $b | $read s | $(best "report-$v-$b") | $(best "analyze-$v-$b") | $(best "inspect-$v-$b") |"
  done
  echo "| v$v | $mb MB | after, no findings | | $(best "nofindings-$v") | | | | |"
done
