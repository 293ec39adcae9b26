#!/usr/bin/env bash
# Peak memory of 'cacheheat serve' answering 10 concurrent /report requests
# for one ~75 MB recording (a synthetic recording from bench/genrec: its
# counts are made up, its size is what matters). The budget: under 1 GB
# (before renders were limited and shared: 3.7 GB).
# Usage: bench/serve.sh [WINDOWS]   (default 1060: ~75 MB at 128 CPUs)
set -euo pipefail
cd "$(dirname "$0")/.."
windows="${1:-1060}"
bin=bin/cacheheat
[ -x "$bin" ] || go build -o "$bin" ./cmd/cacheheat
tmp="$(mktemp -d)"
srv=""
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT
go run ./bench/genrec -o "$tmp/big.rec" -cpus 128 -windows "$windows" -interval 1s
rec_mb=$(awk -v b="$(stat -c %s "$tmp/big.rec")" 'BEGIN { printf "%.1f", b / 1e6 }')
"$bin" serve --dir "$tmp" --addr 127.0.0.1:0 >"$tmp/serve.out" &
srv=$!
for _ in $(seq 100); do grep -q http "$tmp/serve.out" 2>/dev/null && break; sleep 0.1; done
url=$(grep -o 'http://[^/]*' "$tmp/serve.out")
start=$(date +%s.%N)
for i in $(seq 10); do
  curl -s -o "$tmp/r$i.html" -w "%{http_code}\n" "$url/report?f=big.rec" >"$tmp/code$i" &
done
wait $(jobs -p | grep -v "^$srv$") 2>/dev/null || true
end=$(date +%s.%N)
codes=$(cat "$tmp"/code* | sort | uniq -c | tr -s ' ' | tr '\n' ',')
peak=$(awk '/VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$srv/status")
t=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", e - s }')
echo "| serve: 10 concurrent /report of one ${rec_mb} MB recording | peak RSS ${peak} MB | ${t} s for all 10 (status:${codes%,}) |"
