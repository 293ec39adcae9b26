#!/usr/bin/env bash
# The exporter's own cost, from the kernel's accounting (BENCHMARKS.md,
# "Exporter"): its BPF programs' run time (cacheheat_bpf_run_seconds_total,
# which the exporter reads with BPF run-time stats on) and its process's CPU
# time (/proc/PID/stat), as a share of one CPU, over IDLE_S seconds with no
# load of ours and over LOAD_S seconds of `workload run rcu --variant bad
# -t 2`; the host's context-switch rate in each period (the exporter's own
# cacheheat_cpu_events_total), since on a shared machine "idle" is whatever
# the neighbours do; /metrics scrape times; and the resident set size every
# 30 s for TOTAL_S seconds.
# Usage: bench/exporter.sh. Needs root. Env: IDLE_S=60 LOAD_S=60 TOTAL_S=600.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/cacheheat}
IDLE_S=${IDLE_S:-60}
LOAD_S=${LOAD_S:-60}
TOTAL_S=${TOTAL_S:-600}
ADDR=${ADDR:-127.0.0.1:19632}
[ -x "$BIN" ] || go build -o "$BIN" ./cmd/cacheheat
tmp=$(mktemp -d)
$BIN exporter --listen "$ADDR" >"$tmp/out" 2>"$tmp/err" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
start=$(date +%s)
sleep 5 # loading and attaching

rss() { awk '/VmRSS/ {print $2}' "/proc/$pid/status"; }
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
# host context switches so far, from the exporter's own counters
switches() {
  curl -s "http://$ADDR/metrics" | awk '/^cacheheat_cpu_events_total\{.*event="context-switches"/ {c += $2} END {printf "%d\n", c}'
}
# progs PID: JSON {name: [run_time_ns, run_cnt]} of the BPF programs PID
# holds (by id, from its fds), as the kernel accounts them
progs() {
  local ids
  ids=$(grep -h '^prog_id' /proc/"$1"/fdinfo/* 2>/dev/null | awk '{print $2}' | sort -u | tr '\n' ' ')
  bpftool prog show -j | python3 -c '
import json, sys
ids = set(int(x) for x in sys.argv[1].split())
out = {}
for p in json.load(sys.stdin):
    if p["id"] in ids:
        out[p["name"]] = [p.get("run_time_ns", 0), p.get("run_cnt", 0)]
json.dump(out, sys.stdout, separators=(",", ":"))' "$ids"
}
# measure LABEL SECONDS PIDS... : each PID's BPF and process CPU over the
# period, as a share of one CPU, and on_switch's mean run time
measure() {
  local label=$1 secs=$2; shift 2
  local c0 c1 t0 t1 before="" after="" p
  c0=$(switches); t0=$(date +%s.%N)
  for p in "$@"; do before+="$(progs "$p")|$(ticks "$p") "; done
  sleep "$secs"
  for p in "$@"; do after+="$(progs "$p")|$(ticks "$p") "; done
  c1=$(switches); t1=$(date +%s.%N)
  python3 - "$label" "$c0" "$c1" "$t0" "$t1" "$(getconf CLK_TCK)" "$before" "$after" "$*" <<'PY'
import json, sys
label, c0, c1, t0, t1, tck = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
before, after, who = sys.argv[7].split(), sys.argv[8].split(), sys.argv[9].split()
dt = t1 - t0
for i, (b, a) in enumerate(zip(before, after)):
    bj, bt = b.rsplit("|", 1); aj, at = a.rsplit("|", 1)
    bp, ap = json.loads(bj), json.loads(aj)
    ns = sum(ap[n][0] - bp.get(n, [0, 0])[0] for n in ap)
    sw = ap.get("on_switch", [0, 0]); sb = bp.get("on_switch", [0, 0])
    mean = (sw[0] - sb[0]) / max(1, sw[1] - sb[1])
    bpf, proc = ns / 1e9 / dt, (int(at) - int(bt)) / tck / dt
    name = ["exporter", "record -a -F 19 (same period)"][min(i, 1)]
    print(f"| {label} | {name} | {dt:.0f} s | {(c1 - c0) / dt:,.0f} | {bpf * 100:.3f}% | {proc * 100:.3f}% | {(bpf + proc) * 100:.3f}% | {mean:.0f} ns |")
PY
}

echo "| period | who | length | host context switches/s | BPF programs (of one CPU) | process | total | on_switch mean |"
echo "|---|---|---|---|---|---|---|---|"
measure "idle (no load of ours)" "$IDLE_S" "$pid"
$BIN workload run rcu --variant bad -t 2 -d "$((2 * LOAD_S + 15))s" >/dev/null 2>&1 &
wp=$!
sleep 2
measure "workload run rcu --variant bad -t 2" "$LOAD_S" "$pid"
# The recorder beside it, over the same load: what counting by cgroup
# costs over counting by thread, in the same seconds.
$BIN record -q -a -F 19 -d "$((LOAD_S + 8))s" -o "$tmp/r.rec" >/dev/null 2>&1 &
rp=$!
sleep 4
measure "rcu bad, with record -a beside" "$LOAD_S" "$pid" "$rp"
wait "$rp" 2>/dev/null || true
kill "$wp" 2>/dev/null || true; wait "$wp" 2>/dev/null || true

series=$(curl -s "http://$ADDR/metrics" | grep -vc '^#')
cgroups=$(curl -s "http://$ADDR/metrics" | grep '^cacheheat_runqueue_latency_seconds_count' | wc -l)
for i in $(seq 20); do
  curl -s -o /dev/null -H 'Accept-Encoding: gzip' -w '%{time_total}\n' "http://$ADDR/metrics"
done | sort -n | awk -v s="$series" -v g="$cgroups" '{t[NR] = $1} END {printf "\nscrape (gzip, as Prometheus asks): median %.1f ms, max %.1f ms over %d scrapes; %d series, %d cgroups\n", t[int((NR + 1) / 2)] * 1000, t[NR] * 1000, NR, s, g}'

echo
echo "RSS (kB) every 30 s since start:"
while [ $(( $(date +%s) - start )) -lt "$TOTAL_S" ]; do
  printf '%d s: %s kB\n' $(( $(date +%s) - start )) "$(rss)"
  sleep 30
done
printf '%d s: %s kB\n' $(( $(date +%s) - start )) "$(rss)"
