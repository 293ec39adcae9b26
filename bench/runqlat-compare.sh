#!/usr/bin/env bash
# Run-queue latency: cacheheat record -a against bpftrace's runqlat.bt on
# the same load at the same time (BENCHMARKS.md, "Cross-checks"). The
# bpftrace program is runqlat.bt with TASK_RUNNING written as 0 (the
# distribution's copy #includes linux/sched.h, which fails to compile on
# hosts without matching headers) and the histogram in ns, as cacheheat's.
# Needs root, bpftrace, stress-ng and a mounted tracefs.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/cacheheat}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/runqlat.bt" <<'BT'
tracepoint:sched:sched_wakeup, tracepoint:sched:sched_wakeup_new { @qtime[args->pid] = nsecs; }
tracepoint:sched:sched_switch {
  if (args->prev_state == 0) { @qtime[args->prev_pid] = nsecs; }
  $ns = @qtime[args->next_pid];
  if ($ns) { @ns = hist(nsecs - $ns); }
  delete(@qtime[args->next_pid]);
}
END { clear(@qtime); }
BT
# bpftrace's tracepoints need tracefs, which this host does not mount.
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
stress-ng --cpu 4 --timeout 14s -q &
load=$!
sleep 1
timeout -s INT 9 bpftrace "$tmp/runqlat.bt" > "$tmp/bt.out" 2>/dev/null &
bt=$!
sleep 2 # bpftrace compiles and attaches
"$BIN" record -q -a -e cpu-clock -d 5s -o "$tmp/r.rec" >/dev/null
wait "$bt" || true
wait "$load" || true
"$BIN" inspect --json "$tmp/r.rec" > "$tmp/r.json"
python3 - "$tmp/bt.out" "$tmp/r.json" <<'PY'
import json, re, sys
# bpftrace: "[lo, hi)  count |@@@|" with K/M/G suffixes.
mult = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
bt = {}
for line in open(sys.argv[1]):
    m = re.match(r"\[(\d+)([KMG]?)(?:, (\d+)([KMG]?))?\)?\]?\s+(\d+)", line.strip())
    if m:
        lo = int(m.group(1)) * mult[m.group(2)]
        b = max(lo.bit_length() - 1, 0)
        bt[b] = bt.get(b, 0) + int(m.group(5))
d = json.load(open(sys.argv[2]))
h = next(x for x in d["histograms"] if x["name"] == "runq-latency")
def pct(hist, q):
    total = sum(hist.values()); rank = q * total; cum = 0
    for b in sorted(hist):
        if cum + hist[b] >= rank:
            lo, hi = (0 if b == 0 else 2 ** b), 2 ** (b + 1)
            return lo + (hi - lo) * (rank - cum) / hist[b]
        cum += hist[b]
print("| tool | events | p50 | p90 | p99 |")
print("|---|---|---|---|---|")
n = sum(bt.values())
if not n:
    sys.exit("bpftrace printed no histogram: cannot compare")
print(f"| runqlat.bt (bpftrace, 9 s) | {n} | {pct(bt,.5)/1e3:.1f} us | {pct(bt,.9)/1e3:.1f} us | {pct(bt,.99)/1e3:.1f} us |")
print(f"| cacheheat record -a (5 s) | {h['count']} | {h['p50']/1e3:.1f} us | {h['p90']/1e3:.1f} us | {h['p99']/1e3:.1f} us |")
PY
