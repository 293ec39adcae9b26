#!/usr/bin/env bash
# Peak memory of 'cacheheat serve' under concurrent requests for large
# recordings (synthetic, from bench/genrec: their counts are made up, their
# size is what matters). Three cases, each on a fresh server:
#   one:      10 concurrent /report of one recording (shared render)
#   distinct: 10 concurrent /report of 10 recordings (ten names, one file
#             hard-linked: the server sees 10 recordings)
#   index:    the index page of a directory of 2 of them
# The budget: under 1 GB in every case.
# Usage: bench/serve.sh [WINDOWS]   (default 620: ~44 MB at 128 CPUs)
# GENREC=path uses a built bench/genrec (a host without Go).
set -euo pipefail
cd "$(dirname "$0")/.."
windows="${1:-620}"
bin=bin/cacheheat
[ -x "$bin" ] || go build -o "$bin" ./cmd/cacheheat
tmp="$(mktemp -d)"
srv=""
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT
if [ -n "${GENREC:-}" ]; then
  "$GENREC" -o "$tmp/big.rec" -cpus 128 -windows "$windows" -interval 1s
else
  go run ./bench/genrec -o "$tmp/big.rec" -cpus 128 -windows "$windows" -interval 1s
fi
rec_mb=$(awk -v b="$(stat -c %s "$tmp/big.rec")" 'BEGIN { printf "%.1f", b / 1e6 }')

# serve_case NAME DIR PATH...: starts serve on DIR, requests every PATH at
# once, prints a table row with the server's peak RSS and stops it.
serve_case() {
  local name=$1 dir=$2
  shift 2
  "$bin" serve --dir "$dir" --addr 127.0.0.1:0 >"$tmp/serve.out" &
  srv=$!
  for _ in $(seq 100); do grep -q http "$tmp/serve.out" 2>/dev/null && break; sleep 0.1; done
  local url start end i=0
  url=$(grep -o 'http://[^/]*' "$tmp/serve.out")
  rm -f "$tmp"/code*
  start=$(date +%s.%N)
  local pids=()
  for p in "$@"; do
    i=$((i + 1))
    curl -s -o /dev/null -w "%{http_code}\n" "$url$p" >"$tmp/code$i" &
    pids+=($!)
  done
  wait "${pids[@]}" || true
  end=$(date +%s.%N)
  local codes peak t
  codes=$(cat "$tmp"/code* | sort | uniq -c | tr -s ' ' | tr '\n' ',')
  peak=$(awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$srv/status")
  t=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", e - s }')
  kill "$srv"
  wait "$srv" 2>/dev/null || true
  srv=""
  echo "| $name (${rec_mb} MB each) | ${peak} MB | ${t} s (status:${codes%,}) |"
}

echo "| case | peak RSS of serve | time |"
echo "|---|---|---|"
mkdir "$tmp/one" "$tmp/ten" "$tmp/two"
ln "$tmp/big.rec" "$tmp/one/big.rec"
reqs=()
for i in $(seq 10); do reqs+=("/report?f=big.rec"); done
serve_case "10 concurrent /report of one recording" "$tmp/one" "${reqs[@]}"
reqs=()
for i in $(seq 10); do
  ln "$tmp/big.rec" "$tmp/ten/r$i.rec"
  reqs+=("/report?f=r$i.rec")
done
serve_case "10 concurrent /report of 10 recordings" "$tmp/ten" "${reqs[@]}"
ln "$tmp/big.rec" "$tmp/two/a.rec"
ln "$tmp/big.rec" "$tmp/two/b.rec"
serve_case "the index of 2 recordings" "$tmp/two" "/"
