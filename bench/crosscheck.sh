#!/usr/bin/env bash
# Cross-checks cacheheat record's per-process counts against perf stat on
# comparable runs of the same commands (BENCHMARKS.md, "Cross-checks").
# Needs root, perf and python3. Prints one line per command and event:
# the medians of RUNS runs of each tool and their difference.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/cacheheat}
RUNS=${RUNS:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

commands=(
  "$BIN workload run falseshare -t 2 -d 2s"
  "sh -c 'for i in \$(seq 100); do sleep 0.01; done'"
  "stress-ng --vm 1 --vm-bytes 64M --vm-ops 8 --vm-keep -q"
)

for c in "${commands[@]}"; do
  for r in $(seq "$RUNS"); do
    # perf stat counts the command and its children (inherit), from exec.
    eval "perf stat -x, -e page-faults,context-switches -o $out/perf.$r -- $c" >/dev/null 2>&1
    eval "$BIN record -q -e page-faults,context-switches -o $out/rec.$r -- $c" >/dev/null 2>&1
    "$BIN" inspect --json "$out/rec.$r" > "$out/rec.$r.json"
  done
  python3 - "$c" "$out" "$RUNS" <<'PY'
import json, statistics, sys
cmd, out, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
perf = {"page-faults": [], "context-switches": []}
rec = {"page-faults": [], "context-switches": []}
for r in range(1, runs + 1):
    for line in open(f"{out}/perf.{r}"):
        f = line.strip().split(",")
        if len(f) > 2 and f[2] in perf:
            perf[f[2]].append(float(f[0]))
    d = json.load(open(f"{out}/rec.{r}.json"))
    for ev in rec:
        rec[ev].append(sum(p["totals"].get(ev, 0) for p in d["processes"]))
for ev in perf:
    p, c = statistics.median(perf[ev]), statistics.median(rec[ev])
    diff = (c - p) / p * 100 if p else float("nan")
    print(f"| `{cmd}` | {ev} | {p:.0f} | {c:.0f} | {diff:+.1f}% |")
PY
done
