#!/usr/bin/env bash
# What a recorder of an idle target costs with quiet windows (record
# --quiet-max, default 1m) and without (--quiet-max 0): four recorders at
# once for SECONDS, each of its own cgroup, one empty and one holding a
# shell that wakes every 10 s (an idle service's timer), each with and
# without. Per recorder: its CPU time (the sum of its threads' run time,
# schedstat), its context switches and the windows it wrote.
#   bash bench/quiet.sh SECONDS BIN   (root; SECONDS > 60 includes a --quiet-max wake-up)
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 SECONDS BIN" >&2; exit 2; }
secs=$1 bin=$2
root=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/self/mounts)/cacheheat-quiet-$$
tmp=$(mktemp -d)
pids=() sh_pid=
cleanup() {
  set +e
  for p in "${pids[@]:-}"; do
    [ -n "$p" ] && kill -INT "$p" 2>/dev/null && wait "$p" 2>/dev/null
  done
  # The shell and the sleep it runs: every process of the cgroup.
  [ -e "$root/timer/cgroup.kill" ] && echo 1 > "$root/timer/cgroup.kill"
  [ -n "$sh_pid" ] && wait "$sh_pid" 2>/dev/null
  for _ in 1 2 3 4 5; do rmdir "$root/empty" "$root/timer" "$root" 2>/dev/null && break; sleep 0.2; done
  rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$root/empty" "$root/timer"
sh -c 'while :; do sleep 10; done' &
sh_pid=$!
echo "$sh_pid" > "$root/timer/cgroup.procs"
stat() { cat /proc/"$1"/task/*/schedstat | awk '{n += $1; s += $3} END {print n, s}'; }
names=()
for cg in empty timer; do
  for q in 0 1m; do
    "$bin" record -q -G "$root/$cg" --quiet-max "$q" -o "$tmp/$cg-$q.rec" >/dev/null 2>&1 &
    pids+=($!) names+=("$cg --quiet-max $q")
  done
done
sleep 5 # loaded and attached
declare -a c0 s0
for i in "${!pids[@]}"; do read -r c0[i] s0[i] < <(stat "${pids[i]}"); done
sleep "$secs"
echo "| target | quiet-max | recorder, % of one CPU | its context switches in $secs s | windows written |"
echo "|---|---|---|---|---|"
for i in "${!pids[@]}"; do
  read -r c1 s1 < <(stat "${pids[i]}")
  kill -INT "${pids[i]}"; wait "${pids[i]}" || true
  w=$("$bin" inspect --json "$tmp/$(echo "${names[i]}" | awk '{print $1 "-" $3}').rec" | python3 -c 'import json,sys; print(json.load(sys.stdin)["windows"])')
  echo "| ${names[i]% --*} | ${names[i]##* } | $(awk -v a="${c0[i]}" -v b="$c1" -v s="$secs" 'BEGIN {printf "%.4f%%", (b - a) / (s * 1e7)}') | $((s1 - s0[i])) | $w |"
done
pids=()
