#!/usr/bin/env bash
# Recording overhead: a workload's throughput (ops_per_sec of a bundled
# workload) alone, under `cacheheat record -a` at 99 Hz and at 999 Hz, and
# under `perf record -F 99 -a -g`, interleaved so that drift on a shared
# machine hits every mode alike. Prints the median throughput ratio of each
# mode to the baseline (BENCHMARKS.md, "Recording overhead"), then the
# kernel-accounted cost of recording (bench/cost.py).
# Usage: bench/overhead.sh [ROUNDS] (default 9). Needs root; perf for
# its row (left out when perf is not installed).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-9}
BIN=${BIN:-bin/cacheheat}
WORK=${WORK:-"falseshare --variant good -t 2 -d 5s"}
[ -x "$BIN" ] || go build -o "$BIN" ./cmd/cacheheat
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; [ -n "${recpid:-}" ] && kill "$recpid" 2>/dev/null || true' EXIT

ops() { # runs the workload, prints its ops_per_sec
  $BIN workload run $WORK --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["ops_per_sec"])'
}
under() { # under CMD...: runs the workload while CMD records the host
  "$@" >/dev/null 2>&1 &
  recpid=$!
  sleep 3 # let it load and attach (BPF verification takes CPU)
  ops
  kill -INT "$recpid"; wait "$recpid" 2>/dev/null || true
  recpid=
}

: > "$tmp/base"; : > "$tmp/f99"; : > "$tmp/f999"; : > "$tmp/perf"
for r in $(seq "$ROUNDS"); do
  ops >> "$tmp/base"
  under $BIN record -q -a -F 99 -o "$tmp/r.rec" >> "$tmp/f99"
  under $BIN record -q -a -F 999 -o "$tmp/r.rec" >> "$tmp/f999"
  if command -v perf >/dev/null; then
    under perf record -q -F 99 -a -g -o "$tmp/perf.data" >> "$tmp/perf"
  fi
  echo "round $r/$ROUNDS done" >&2
done
python3 - "$tmp" <<'PY'
import statistics, sys
d = sys.argv[1]
read = lambda n: [float(x) for x in open(f"{d}/{n}") if x.strip()]
base = statistics.median(read("base"))
print(f"baseline median ops_per_sec: {base:.4g}")
for name, label in [("f99", "cacheheat record -a -F 99"), ("f999", "cacheheat record -a -F 999"), ("perf", "perf record -F 99 -a -g")]:
    if not read(name):
        continue
    m = statistics.median(read(name))
    print(f"| {label} | {m:.4g} | {m/base:.3f} | {(1-m/base)*100:+.1f}% |")
PY

# What the recorder costs, from the kernel's own accounting rather than a
# throughput ratio (which this 2-vCPU VM's noise swamps at the 1% level):
# bench/cost.py, which needs only the binary and python3.
python3 bench/cost.py --bin "$BIN" --rounds 3 --raw "${RAW:-/dev/null}"
