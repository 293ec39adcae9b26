#!/usr/bin/env bash
# Where on_switch's time goes: builds variants of the current BPF source
# beside the real one and measures them side by side with bench/cost.py
# (BENCHMARKS.md, "Recording cost"). A diagnostic: the variants are never
# committed, and none is a working recorder.
#   full      the real program
#   nostacks  no off-CPU stacks taken (the rest of the off-CPU work stays)
#   noaccount neither stacks nor the switching-out target's accounting
#   noswitchin neither of those nor the switch-in's work (its time and
#             run-queue wait taken at the switch-in, and switched_in at
#             the next switch-out: wait account, run-queue and off-CPU
#             histograms; a sample or exit still does a pending one)
#   empty     returns at once: the attach and dispatch floor
#   floor     on_switch, on_waking and on_wakeup all return at once: what
#             attaching to the scheduler tracepoints costs a switch-heavy
#             load before any work (for bench/switch.sh's BASE_BIN,
#             through KEEP); on_wakeup is not attached where run-queue
#             latency comes from the kernel's account (docs/INTERNALS.md)
# The workloads always run from a copy of the real binary (WORKLOAD_BIN), so the
# variants differ only in their BPF program.
# Needs root, clang and go (make generate), python3.
# Usage: bench/switch-parts.sh [ROUNDS] [SCENARIOS] (default 2 rcu-bad-99)
#        KEEP=DIR bench/switch-parts.sh 0   only builds the binaries into DIR
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}
SCEN=${2:-rcu-bad-99}
out=$(mktemp -d)
cp bpf/cacheheat.c "$out/orig.c"
restore() { cp "$out/orig.c" bpf/cacheheat.c; go generate ./bpf/... >/dev/null; rm -rf "$out"; }
trap restore EXIT
edit() { # edit VARIANT: the source edits of one variant, cumulative
  python3 - "$1" <<'PY'
import sys
v = sys.argv[1]
p = "bpf/cacheheat.c"
s = open(p).read()
def sub(old, new):
    global s
    assert s.count(old) == 1, old
    s = s.replace(old, new)
order = ["nostacks", "noaccount", "noswitchin"]
if v in ("empty", "floor"):
    sub("\tstruct last_val *l = get_last();\n\tif (!l)\n\t\treturn 0;\n\tbool prev_target",
        "\treturn 0;\n\tstruct last_val *l = get_last();\n\tif (!l)\n\t\treturn 0;\n\tbool prev_target")
if v == "floor":
    sub("\tif (by_cgroup || !is_target(p))\n\t\treturn 0;\n\tstruct thread_state *s = bpf_task_storage_get(&thread_state, p, 0, 0);",
        "\treturn 0;\n\tif (by_cgroup || !is_target(p))\n\t\treturn 0;\n\tstruct thread_state *s = bpf_task_storage_get(&thread_state, p, 0, 0);")
    sub("int BPF_PROG(on_wakeup, struct task_struct *p)\n{\n\trecord_wakeup(p);",
        "int BPF_PROG(on_wakeup, struct task_struct *p)\n{\n\treturn 0;\n\trecord_wakeup(p);")
elif v in order:
    n = order.index(v)
    sub("\tif (k && !idle_wait(wait)) {\n", "\tif (k && !idle_wait(wait) && 0) {\n")
    if n >= 1:
        sub("\t\t\taccount(l, prev, now, 1);\n", "\t\t\t;\n")
    if n >= 2:
        sub("\t\t\tpending_in(l, prev, s);\n", "\t\t\t;\n")
        sub("\t\tl->in_ts = now;\n\t\tl->in_q = runq_in(l, next, now);\n", "\t\t(void)runq_in;\n")
open(p, "w").write(s)
PY
}
bins=()
for v in full nostacks noaccount noswitchin empty floor; do
  cp "$out/orig.c" bpf/cacheheat.c
  [ "$v" = full ] || edit "$v"
  go generate ./bpf/... >/dev/null
  go build -o "$out/$v" ./cmd/cacheheat
  [ "$v" = floor ] || bins+=("$v=$out/$v") # on_switch as empty's; for KEEP
done
if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$out"/{full,nostacks,noaccount,noswitchin,empty,floor} "$KEEP"/; fi
[ "$ROUNDS" -gt 0 ] || exit 0
cp "$out/full" "$out/workload"
WORKLOAD_BIN="$out/workload" python3 bench/cost.py --rounds "$ROUNDS" --seconds 6 --scenarios "$SCEN" \
  --bin "$(IFS=,; echo "${bins[*]}")" | grep -E '^\| (scenario|---|.*on_switch)'
