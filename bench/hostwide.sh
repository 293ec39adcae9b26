#!/usr/bin/env bash
# Host-wide counts against perf's: `cacheheat record -a` around `perf stat
# -a -- sleep 5`, so both count the same span, perf's own start and stop
# aside (cacheheat counts them; perf stat does not): page faults, context
# switches and migrations summed over the CPUs, three runs. Compare two
# builds by running it with each (BIN=...): their differences from perf
# should match.
#   bash bench/hostwide.sh        (root; perf and python3)
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-$PWD/bin/cacheheat}
[ -x "$BIN" ] || make -s build
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| run | event | perf stat -a | cacheheat record -a (host totals) | cacheheat - perf |"
echo "|---|---|---|---|---|"
for i in 1 2 3; do
  "$BIN" record -q -a -e page-faults,context-switches,cpu-migrations,cpu-clock -o "$tmp/r.rec" -- \
    perf stat -a -x, -e page-faults,context-switches,cpu-migrations -o "$tmp/perf.csv" -- sleep 5 >/dev/null 2>&1 || exit 1
  "$BIN" inspect --json "$tmp/r.rec" >"$tmp/r.json" || exit 1
  python3 - "$tmp/r.json" "$tmp/perf.csv" "$i" <<'PY'
import json, sys
rec = json.load(open(sys.argv[1]))["host_totals"]
perf = {}
for line in open(sys.argv[2]):
    p = line.strip().split(",")
    if len(p) > 2 and p[0].replace(".", "").isdigit():
        perf[p[2]] = float(p[0])
for ev in ("page-faults", "context-switches", "cpu-migrations"):
    c, pv = rec[ev]["total"], perf[ev]
    print(f"| {sys.argv[3]} | {ev} | {pv:.0f} | {c:.0f} | {c - pv:+.0f} |")
PY
done
