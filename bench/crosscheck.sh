#!/usr/bin/env bash
# Cross-checks cacheheat record's per-process counts against perf stat on
# the same run: cacheheat records `perf stat -- CMD`, so both tools count
# the very same execution of CMD (BENCHMARKS.md, "Cross-checks").
#
# cacheheat's count for CMD's processes includes what perf's forked child
# does between fork and exec (perf counts from exec: enable_on_exec), so a
# constant difference of a few dozen page faults is expected; `true` as the
# command measures that constant.
# Events: page-faults, context-switches, cpu-migrations, and cacheheat's
# cpu-clock (ns on the CPU) against perf's task-clock (ms). Agreement is
# within 2% for the counts and 3% for the time, after the constant; a
# difference of at most 2 events is within one fork-to-exec's noise and
# passes too. The script exits 1 when any row is outside.
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
  "$BIN workload run rcu --variant bad -t 2 -d 2s"
  "sh -c 'for i in \$(seq 100); do sleep 0.01; done'"
  "stress-ng --vm 1 --vm-bytes 64M --vm-ops 8 --vm-keep -q"
)

echo "| command | event | perf stat | cacheheat | difference | difference less the fork-to-exec constant | agrees |"
echo "|---|---|---|---|---|---|---|"
fail=0
for c in "${commands[@]}"; do
  for r in $(seq "$RUNS"); do
    eval "$BIN record -q -e page-faults,context-switches,cpu-migrations,cpu-clock -o $out/rec.$r -- perf stat -x, -e page-faults,context-switches,cpu-migrations,task-clock -o $out/perf.$r -- $c" >/dev/null 2>&1
    "$BIN" inspect --json "$out/rec.$r" > "$out/rec.$r.json"
  done
  python3 - "$c" "$out" "$RUNS" <<'PY' || fail=1
import json, os, statistics, sys
cmd, out, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
const_file = f"{out}/const.json"
const = json.load(open(const_file)) if os.path.exists(const_file) else None
# cacheheat's event, perf's event, the unit of the numbers shown, the
# allowed relative difference.
events = [("page-faults", "page-faults", 1, 0.02), ("context-switches", "context-switches", 1, 0.02),
          ("cpu-migrations", "cpu-migrations", 1, 0.02), ("cpu-clock", "task-clock", 1e6, 0.03)]
diffs = {ev: [] for ev, *_ in events}
ok = True
for r in range(1, runs + 1):
    perf = {}
    for line in open(f"{out}/perf.{r}"):
        f = line.strip().split(",")
        if len(f) > 2 and f[2] in [pe for _, pe, _, _ in events]:
            perf[f[2]] = float(f[0]) * (1e6 if f[2] == "task-clock" else 1)  # task-clock: ms to ns
    d = json.load(open(f"{out}/rec.{r}.json"))
    # Every recorded process but perf itself: CMD and its children.
    procs = [p for p in d["processes"] if p["comm"] != "perf"]
    for ev, pev, unit, tol in events:
        p, c = perf[pev], sum(x["totals"].get(ev, 0) for x in procs)
        name = ev if ev == pev else f"{ev} / {pev} (ms)"
        diff = f"{(c - p) / unit:+.1f} ({(c - p) / p * 100:+.1f}%)" if p else f"{(c - p) / unit:+.1f}"
        diffs[ev].append(c - p)
        adj, verdict = "(the constant)", ""
        if const is not None:
            a = c - const[ev] - p
            adj = f"{a / unit:+.1f} ({a / p * 100:+.1f}%)" if p else f"{a / unit:+.1f}"
            good = abs(a) <= tol * p or (unit == 1 and abs(a) <= 2)
            verdict = "yes" if good else "**NO**"
            ok = ok and good
        print(f"| `{cmd}` (run {r}) | {name} | {p / unit:.1f} | {c / unit:.1f} | {diff} | {adj} | {verdict} |")
if const is None:
    # The first command is `true`: its difference is the constant.
    json.dump({ev: statistics.median(v) for ev, v in diffs.items()}, open(const_file, "w"))
sys.exit(0 if ok else 1)
PY
done
exit $fail
