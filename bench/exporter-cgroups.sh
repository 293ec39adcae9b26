#!/usr/bin/env bash
# The exporter with many live cgroups (BENCHMARKS.md, "Exporter"): creates
# N cgroups under the cgroup v2 mount, each with one bash that wakes every
# second (a read with a timeout on a FIFO nobody writes), starts the
# exporter, and reports the series and cgroups it serves, /metrics scrape
# times (gzip, as Prometheus asks, and plain) and the exporter's RSS, then
# its CPU share over the last PERIOD_S seconds. Removes the cgroups at the
# end, and checks that their series are gone.
# Usage: bench/exporter-cgroups.sh. Needs root. Env: N=500 PERIOD_S=60.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/cacheheat}
N=${N:-500}
PERIOD_S=${PERIOD_S:-60}
ADDR=${ADDR:-127.0.0.1:19633}
[ -x "$BIN" ] || go build -o "$BIN" ./cmd/cacheheat
mount=$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
root="$mount/cacheheat-bench-$$.slice"
tmp=$(mktemp -d)
mkfifo "$tmp/fifo"
pids=()
cleanup() {
  [ -n "${exp:-}" ] && kill -TERM "$exp" 2>/dev/null && wait "$exp" 2>/dev/null
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for d in "$root"/*/; do rmdir "$d" 2>/dev/null || true; done
  rmdir "$root" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
mkdir "$root"
for i in $(seq "$N"); do
  d="$root/c$i.scope"
  mkdir "$d"
  bash -c 'echo $$ > '"$d"'/cgroup.procs; exec 3<>'"$tmp/fifo"'; while :; do read -t 1 -u 3 || :; done' &
  pids+=($!)
done
$BIN exporter --listen "$ADDR" -i 1s >/dev/null 2>"$tmp/err" &
exp=$!
sleep 15 # every cgroup has woken and been named
scrape() { curl -s -o /dev/null -H "Accept-Encoding: $1" -w '%{time_total} %{size_download}\n' "http://$ADDR/metrics"; }
series=$(curl -s "http://$ADDR/metrics" | grep -vc '^#')
cgroups=$(curl -s "http://$ADDR/metrics" | grep -c '^cacheheat_runqueue_latency_seconds_count')
echo "$N cgroups created; the exporter serves $series series, $cgroups cgroups with a run-queue histogram"
for enc in gzip identity; do
  for i in $(seq 10); do scrape "$enc"; done | sort -n | awk -v e="$enc" '{t[NR] = $1; s = $2} END {printf "scrape (%s): median %.0f ms, min %.0f ms, max %.0f ms over %d; %d bytes\n", e, t[int((NR + 1) / 2)] * 1000, t[1] * 1000, t[NR] * 1000, NR, s}'
done
t0=$(date +%s.%N); k0=$(awk '{print $14 + $15}' /proc/$exp/stat)
sleep "$PERIOD_S"
t1=$(date +%s.%N); k1=$(awk '{print $14 + $15}' /proc/$exp/stat)
python3 -c "import sys; print(f'exporter process over {float(sys.argv[2]) - float(sys.argv[1]):.0f} s (no scrapes): {(int(sys.argv[4]) - int(sys.argv[3])) / int(sys.argv[5]) / (float(sys.argv[2]) - float(sys.argv[1])) * 100:.2f}% of one CPU')" "$t0" "$t1" "$k0" "$k1" "$(getconf CLK_TCK)"
echo "exporter RSS: $(awk '/VmRSS/ {print $2}' /proc/$exp/status) kB, peak $(awk '/VmHWM/ {print $2}' /proc/$exp/status) kB"

# Removed cgroups leave the metrics within the exporter's 5 s rewalk.
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
wait "${pids[@]}" 2>/dev/null || true
pids=()
for d in "$root"/*/; do rmdir "$d"; done
sleep 8
left=$(curl -s "http://$ADDR/metrics" | grep -c "cacheheat-bench-$$" || true)
echo "after removing the cgroups: $left series still name them"
