#!/usr/bin/env bash
# Runs the bundled O3 workloads and writes the "Workloads" section of
# BENCHMARKS.md: the median good/bad speed ratio of each pair (bad and good
# runs interleaved, so drift on a shared host hits both alike), the
# pointer-chase staircase next to the cache sizes `cacheheat caps` reports,
# and STREAM bandwidth. `make bench` runs it.
#
# Environment: ROUNDS (default 3), DUR (default 2s), THREADS (default 2),
# CHASE_DUR (default 8s), BIN (default bin/cacheheat), OUT (default
# BENCHMARKS.md).
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DUR=${DUR:-2s}
THREADS=${THREADS:-2}
CHASE_DUR=${CHASE_DUR:-8s}
BIN=${BIN:-bin/cacheheat}
OUT=${OUT:-BENCHMARKS.md}
PAIRS=(falseshare align ffn kvcache rcu)

if [ ! -x "$BIN" ] || [ -n "$(find cmd workloads -newer "$BIN" -name '*.go' 2>/dev/null | head -1)" ]; then
  echo "bench: building $BIN" >&2
  go build -o "$BIN" ./cmd/cacheheat
fi

# field FILE EXPR reads a JSON field (jq syntax for simple paths) with jq,
# or python3 where jq is missing.
if command -v jq >/dev/null 2>&1; then
  field() { jq -r "$2" "$1"; }
elif command -v python3 >/dev/null 2>&1; then
  field() {
    python3 - "$1" "$2" <<'PY'
import json, re, sys
v = json.load(open(sys.argv[1]))
for part in re.findall(r'\.([A-Za-z_0-9]+)|\[(\d+)\]', sys.argv[2]):
    v = v[part[0]] if part[0] else v[int(part[1])]
print(v)
PY
  }
else
  echo "bench: needs jq or python3 to read the workloads' JSON" >&2
  exit 2
fi

# median of the numbers on stdin.
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmdline="ROUNDS=$ROUNDS DUR=$DUR THREADS=$THREADS CHASE_DUR=$CHASE_DUR bash bench/workloads.sh"
host=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
ncpu=$(nproc)
load=$(cut -d' ' -f1-3 /proc/loadavg)

human() { awk -v b="$1" 'BEGIN { if (b=="") {print "?"; exit}; split("B KiB MiB GiB",u," "); i=1; while (b>=1024 && i<4) {b/=1024; i++}; printf (b==int(b) ? "%d%s" : "%.1f%s"), b, u[i] }'; }

echo "bench: $ROUNDS rounds of ${PAIRS[*]} (bad, good interleaved), -d $DUR -t $THREADS" >&2
declare -A runs
for r in $(seq 1 "$ROUNDS"); do
  for w in "${PAIRS[@]}"; do
    for v in bad good; do
      f="$tmp/$w-$v-$r.json"
      "$BIN" workload run "$w" --variant "$v" -t "$THREADS" -d "$DUR" --json >"$f"
      ops=$(field "$f" .ops_per_sec)
      ok=$(field "$f" .ok)
      [ "$ok" = true ] || { echo "bench: $w $v failed its result check: $(field "$f" .check)" >&2; exit 1; }
      runs[$w-$v]+="$ops "
      echo "  round $r $w $v ops_per_sec=$ops" >&2
    done
  done
done

echo "bench: chase (-d $CHASE_DUR), stream (-d $DUR), numa" >&2
"$BIN" workload run chase -d "$CHASE_DUR" --json >"$tmp/chase.json"
"$BIN" workload run stream -t "$THREADS" -d "$DUR" --json >"$tmp/stream.json"
# Cache sizes as `cacheheat caps` reports them (needs jq for the query);
# else the ones the chase run used, which come from the same sysfs/CPUID.
L1=""; L2=""; L3=""; cache_src=""
if command -v jq >/dev/null 2>&1 && "$BIN" caps --json >"$tmp/caps.json" 2>/dev/null; then
  cache_size() { jq -r "[.topology.caches[]? | select(.level==$1 and .type!=\"Instruction\") | .size_bytes][0] // empty" "$tmp/caps.json"; }
  L1=$(cache_size 1); L2=$(cache_size 2); L3=$(cache_size 3)
  cache_src="cacheheat caps, $(jq -r '[.topology.caches[]?.source][0] // "unknown"' "$tmp/caps.json")"
fi
if [ -z "$L1" ]; then
  L1=$(field "$tmp/chase.json" .caches.l1d); L2=$(field "$tmp/chase.json" .caches.l2); L3=$(field "$tmp/chase.json" .caches.l3)
  cache_src="workloads, $(field "$tmp/chase.json" .caches.source)"
fi
numa_note=""
if ! "$BIN" workload run numa --variant bad -t "$THREADS" -d "$DUR" --json >"$tmp/numa-bad.json" 2>"$tmp/numa.err"; then
  numa_note=$(sed 's/^cacheheat: //' "$tmp/numa.err")
else
  "$BIN" workload run numa --variant good -t "$THREADS" -d "$DUR" --json >"$tmp/numa-good.json"
fi

{
  echo "## Workloads"
  echo
  echo "Produced by \`$cmdline\` (\`make bench\` runs it) on $(date -u '+%Y-%m-%d %H:%M UTC'),"
  echo "host: $host, $ncpu CPUs, load average at start $load."
  echo "Each pair ran $ROUNDS rounds of bad then good, interleaved, each run \`cacheheat workload run NAME --variant V -t $THREADS -d $DUR --json\`;"
  echo "the ratio is median(good ops/s) / median(bad ops/s). Every run's result check passed."
  if awk -v l="${load%% *}" -v n="$ncpu" 'BEGIN {exit !(l > n/2)}'; then
    echo
    echo "The host was shared with other jobs while this ran (load average above), so"
    echo "absolute numbers are noisy and ratios indicative; re-run on a quiet host before quoting them."
  fi
  echo
  echo "| workload | bad ops/s (median) | good ops/s (median) | good/bad | bad runs | good runs |"
  echo "|---|---|---|---|---|---|"
  for w in "${PAIRS[@]}"; do
    b=$(echo ${runs[$w-bad]} | tr ' ' '\n' | median)
    g=$(echo ${runs[$w-good]} | tr ' ' '\n' | median)
    ratio=$(awk -v g="$g" -v b="$b" 'BEGIN {printf "%.2fx", g/b}')
    fmt() { for x in $1; do printf '%.3g ' "$x"; done; }
    printf '| %s | %.4g | %.4g | **%s** | %s| %s|\n' "$w" "$b" "$g" "$ratio" "$(fmt "${runs[$w-bad]}")" "$(fmt "${runs[$w-good]}")"
  done
  echo
  echo "align's large ratio is the split lock: each record's atomic reference count straddles two"
  echo "cache lines in the bad layout. Its plain split loads and stores alone cost about 1.1x on this core."
  echo
  echo "### Pointer-chase staircase"
  echo
  echo "\`cacheheat workload run chase -d $CHASE_DUR\` (one thread, random cycle, one pointer per 64-byte line)."
  echo "Cache sizes ($cache_src): L1d $(human "$L1"), L2 $(human "$L2"), L3 $(human "$L3")."
  echo "The level column is what those sizes predict. Where latency jumps well before the reported L3 size,"
  echo "the host reports more L3 than one core can use (a VM's CPUID often shows a whole socket's L3)."
  echo
  echo "| working set | ns per access | level it fits in |"
  echo "|---|---|---|"
  n=$(field "$tmp/chase.json" '.steps | length')
  for i in $(seq 0 $((n - 1))); do
    sz=$(field "$tmp/chase.json" ".steps[$i].size_bytes")
    ns=$(field "$tmp/chase.json" ".steps[$i].ns_per_access")
    lvl=$(awk -v s="$sz" -v l1="${L1:-0}" -v l2="${L2:-0}" -v l3="${L3:-0}" 'BEGIN {
      if (l1 && s <= l1) print "L1d"; else if (l2 && s <= l2) print "L2"; else if (l3 && s <= l3) print "L3"; else print "DRAM" }')
    printf '| %s | %.2f | %s |\n' "$(human "$sz")" "$ns" "$lvl"
  done
  echo
  echo "### STREAM"
  echo
  echo "\`cacheheat workload run stream -t $THREADS -d $DUR\`, three arrays of $(human "$(field "$tmp/stream.json" .size_bytes)") each."
  echo
  echo "| kernel | GB/s |"
  echo "|---|---|"
  for i in 0 1 2 3; do
    printf '| %s | %.2f |\n' "$(field "$tmp/stream.json" ".kernels[$i].name")" "$(field "$tmp/stream.json" ".kernels[$i].gb_per_s")"
  done
  echo
  echo "### NUMA"
  echo
  if [ -n "$numa_note" ]; then
    echo "Not measured: \`cacheheat workload run numa\` exited 3: $numa_note."
  else
    b=$(field "$tmp/numa-bad.json" .ops_per_sec); g=$(field "$tmp/numa-good.json" .ops_per_sec)
    printf 'remote (bad) %.4g ops/s, local (good) %.4g ops/s, good/bad %.2fx.\n' "$b" "$g" "$(awk -v g="$g" -v b="$b" 'BEGIN {print g/b}')"
  fi
} >"$tmp/section.md"

# Replace our section (from "## Workloads" to the next "## " heading) and
# keep everyone else's.
if [ ! -f "$OUT" ]; then
  printf '# Benchmarks\n\n' >"$OUT"
fi
awk -v sec="$tmp/section.md" '
  /^## Workloads[[:space:]]*$/ { while ((getline l < sec) > 0) print l; print ""; skip=1; done=1; next }
  skip && /^## / { skip=0 }
  !skip { print }
  END { if (!done) { print ""; while ((getline l < sec) > 0) print l } }
' "$OUT" >"$tmp/out.md"
cat -s "$tmp/out.md" >"$OUT"
echo "bench: wrote the Workloads section of $OUT" >&2
