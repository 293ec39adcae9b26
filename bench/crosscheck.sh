#!/usr/bin/env bash
# Cross-checks cacheheat record's per-process counts against perf stat on
# the same run: cacheheat records `perf stat -- CMD`, so both tools count
# the very same execution of CMD (BENCHMARKS.md, "Cross-checks").
#
# cacheheat's count for CMD's processes includes what perf's forked child
# does between fork and exec (perf counts from exec: enable_on_exec), so a
# constant difference of a few dozen page faults is expected; `true` as the
# command measures that constant.
# Needs root, perf and python3. Usage: RUNS=3 bench/crosscheck.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/cacheheat}
RUNS=${RUNS:-3}
[ -x "$BIN" ] || go build -o "$BIN" ./cmd/cacheheat
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

commands=(
  "true"
  "$BIN workload run falseshare -t 2 -d 2s"
  "sh -c 'for i in \$(seq 100); do sleep 0.01; done'"
  "stress-ng --vm 1 --vm-bytes 64M --vm-ops 8 --vm-keep -q"
)

echo "| command | event | perf stat | cacheheat | difference | difference less the fork-to-exec constant |"
echo "|---|---|---|---|---|---|"
for c in "${commands[@]}"; do
  for r in $(seq "$RUNS"); do
    eval "$BIN record -q -e page-faults,context-switches -o $out/rec.$r -- perf stat -x, -e page-faults,context-switches -o $out/perf.$r -- $c" >/dev/null 2>&1
    "$BIN" inspect --json "$out/rec.$r" > "$out/rec.$r.json"
  done
  python3 - "$c" "$out" "$RUNS" <<'PY'
import json, os, statistics, sys
cmd, out, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
const_file = f"{out}/const.json"
const = json.load(open(const_file)) if os.path.exists(const_file) else None
diffs = {"page-faults": [], "context-switches": []}
for r in range(1, runs + 1):
    perf = {}
    for line in open(f"{out}/perf.{r}"):
        f = line.strip().split(",")
        if len(f) > 2 and f[2] in ("page-faults", "context-switches"):
            perf[f[2]] = float(f[0])
    d = json.load(open(f"{out}/rec.{r}.json"))
    # Every recorded process but perf itself: CMD and its children.
    procs = [p for p in d["processes"] if p["comm"] != "perf"]
    for ev in ("page-faults", "context-switches"):
        p, c = perf[ev], sum(x["totals"].get(ev, 0) for x in procs)
        diff = f"{c - p:+.0f} ({(c - p) / p * 100:+.1f}%)" if p else f"{c - p:+.0f}"
        diffs[ev].append(c - p)
        adj = "(the constant)"
        if const is not None:
            a = c - const[ev] - p
            adj = f"{a:+.0f} ({a / p * 100:+.1f}%)" if p else f"{a:+.0f}"
        print(f"| `{cmd}` (run {r}) | {ev} | {p:.0f} | {c:.0f} | {diff} | {adj} |")
if const is None:
    # The first command is `true`: its difference is the constant.
    json.dump({ev: statistics.median(v) for ev, v in diffs.items()}, open(const_file, "w"))
PY
done
