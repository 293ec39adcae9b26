#!/usr/bin/env bash
# Switch-heavy load under each recorder (issue 28): a pipe ping-pong (two
# processes passing one byte over two pipes: two context switches per
# round trip; cmd/cacheheat/testdata/programs/pingpong.c) and stress-ng
# --switch, their throughput alone and under `cacheheat record -a`, `perf
# record -a -g` and a bpftrace offcputime-style one-liner (the anchors),
# in interleaved rounds so that drift on a shared host hits every mode
# alike. Prints each mode's median throughput over the rounds and its
# ratio to the unrecorded median; then bench/cost.py's kernel-accounted
# ns per run of each cacheheat program under the ping-pong.
#   bash bench/switch.sh [ROUNDS] [SECONDS]     (default 5 rounds of 5 s)
#   BASE_BIN=OLD bash bench/switch.sh ...       adds mode "base": OLD's
#   record -a in the same rounds (a change measured against its parent);
#   BASE_BIN=name=PATH,name2=PATH2 adds one mode per build, by its name
#   MODES="none cacheheat base" bash bench/switch.sh ...  only those
#   modes (default: all that are installed; none is always run)
#   PIN=1 bash bench/switch.sh ...              runs the ping-pong's two
#   processes on CPUs 2 and 3, one each, and stress-ng on CPUs 4-5
#   (taskset): on 16 CPUs where the scheduler puts the ping-pong's two
#   processes changes its rate by 10% and more from run to run
#   (BENCHMARKS.md, "Fifteenth session")
# Needs root, cc; perf, bpftrace and stress-ng for their rows (a mode
# whose tool is missing is left out and said so).
set -uo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
SECS=${2:-5}
BIN=${BIN:-$PWD/bin/cacheheat}
[ -x "$BIN" ] || make -s build
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; [ -n "${rp:-}" ] && kill "$rp" 2>/dev/null; true' EXIT
if [ -n "${PIN:-}" ] && { [ "$(nproc)" -lt 6 ] || ! command -v taskset >/dev/null; }; then
  echo "PIN=1 needs taskset and 6 CPUs (it uses CPUs 2-5); this host has $(nproc)" >&2
  exit 2
fi
PP=${PINGPONG:-$tmp/pingpong}
[ -x "$PP" ] || cc -O2 -o "$PP" cmd/cacheheat/testdata/programs/pingpong.c

# pin CPUS CMD...: runs CMD on CPUS when PIN is set.
pin() {
  local cpus=$1
  shift
  if [ -n "${PIN:-}" ]; then taskset -c "$cpus" "$@"; else "$@"; fi
}

# load NAME: one run of a load, its throughput per second.
load() {
  case $1 in
  pingpong) "$PP" "$SECS" ${PIN:+2 3} | awk '{ gsub(/[(\/s)]/, "", $4); print $4 }' ;;
  switch) pin 4,5 stress-ng --switch 2 -t "${SECS}s" --metrics-brief 2>&1 | awk '/switch / && $5 ~ /^[0-9.]+$/ && $6 ~ /^[0-9.]+$/ && !n++ { print $9 }' ;;
  esac
}

# start MODE: starts a recorder in the background (rp), waits until it
# is attached.
start() {
  rp=
  case $1 in
  none) return ;;
  cacheheat)
    "$BIN" record -q -a -o "$tmp/r.rec" >/dev/null 2>&1 &
    rp=$! ;;
  perf)
    perf record -q -a -g -F 99 -o "$tmp/perf.data" >/dev/null 2>&1 &
    rp=$! ;;
  bpftrace)
    # offcputime: each switch-out's stack, the time until its switch-in.
    bpftrace -e 'tracepoint:sched:sched_switch { @s[args->prev_pid] = nsecs; if (@s[args->next_pid]) { @off[kstack, ustack] = sum(nsecs - @s[args->next_pid]); delete(@s[args->next_pid]); } }' >/dev/null 2>"$tmp/bpftrace.err" &
    rp=$! ;;
  *)
    "${builds[$1]}" record -q -a -o "$tmp/r.rec" >/dev/null 2>&1 &
    rp=$! ;;
  esac
  sleep 4 # loaded and attached (verifier and symbol tables done)
  # A recorder that did not start would make its row the unrecorded
  # one under another name: stop here instead.
  if ! kill -0 "$rp" 2>/dev/null; then
    echo "$1 did not start: $(cat "$tmp/bpftrace.err" 2>/dev/null | head -3)" >&2
    exit 1
  fi
}

stop() {
  [ -n "$rp" ] || return 0
  kill -INT "$rp" 2>/dev/null
  wait "$rp" 2>/dev/null
  rp=
}

# wanted MODE: whether MODES (if set) names MODE.
wanted() { [ -z "${MODES:-}" ] || [[ " $MODES " == *" $1 "* ]]; }
modes=(none)
wanted cacheheat && modes+=(cacheheat)
# builds: BASE_BIN's builds by mode name.
declare -A builds=()
IFS=, read -ra parts <<<"${BASE_BIN:-}"
for b in "${parts[@]}"; do
  name=base
  [[ $b == *=* ]] && name=${b%%=*} b=${b#*=}
  case $name in none | cacheheat | perf | bpftrace)
    echo "BASE_BIN: $name is a mode of its own; name the build otherwise" >&2
    exit 2 ;;
  esac
  builds[$name]=$b
  wanted "$name" && modes+=("$name")
done
if wanted perf; then
  command -v perf >/dev/null && modes+=(perf) || echo "perf not installed: its row is left out" >&2
fi
if wanted bpftrace; then
  if command -v bpftrace >/dev/null; then
    mount | grep -q ' /sys/kernel/tracing ' || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
    modes+=(bpftrace)
  else
    echo "bpftrace not installed: its row is left out" >&2
  fi
fi
loads=(pingpong)
command -v stress-ng >/dev/null && loads+=(switch) || echo "stress-ng not installed: its rows are left out" >&2

: >"$tmp/res"
for r in $(seq "$ROUNDS"); do
  for m in "${modes[@]}"; do
    start "$m"
    for l in "${loads[@]}"; do
      echo "$l $m $(load "$l")" >>"$tmp/res"
    done
    stop
  done
done
echo "| load | mode | median per second ($ROUNDS rounds of ${SECS} s) | against unrecorded |"
echo "|---|---|---|---|"
for l in "${loads[@]}"; do
  base=$(awk -v l="$l" '$1 == l && $2 == "none" { print $3 }' "$tmp/res" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
  for m in "${modes[@]}"; do
    med=$(awk -v l="$l" -v m="$m" '$1 == l && $2 == m { print $3 }' "$tmp/res" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
    echo "| $l | $m | $med | $(awk -v a="$med" -v b="$base" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }') |"
  done
done

echo
echo "Each round, in order (load, mode, per second):"
sed 's/^/    /' "$tmp/res"
echo
echo "Each cacheheat program's cost under the ping-pong (bench/cost.py, the kernel's run-time stats):"
bins=
for m in "${modes[@]}"; do
  [ "$m" = cacheheat ] && bins+=,cacheheat=$BIN
  [ -n "${builds[$m]:-}" ] && bins+=,$m=${builds[$m]}
done
[ -n "$bins" ] || exit 0
bins=${bins#,}
PINGPONG_CPUS=${PIN:+"2 3"} PINGPONG=$PP python3 bench/cost.py --bin "$bins" --rounds 3 --seconds "$SECS" --scenarios pingpong-99
