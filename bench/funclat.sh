#!/usr/bin/env bash
# Cost of record --func per call (BENCHMARKS.md, "Function probes"): the
# test program cmd/cacheheat/testdata/funclat/work.c in its "tiny" mode
# (every call ~100 ns of arithmetic, so what the probes add shows) times
# its own loop alone and under `record --func work`, interleaved so drift
# on a shared machine hits both alike. The loop's thread CPU time is used:
# the probes' traps run on the calling thread and are in it, while time
# preempted by other load on this shared host is not. Then the BPF
# programs' run time per call from the kernel's own accounting
# (kernel.bpf_stats_enabled), which leaves out the uprobe trap itself
# (breakpoint, single-step, return trampoline).
# Usage: bench/funclat.sh [ROUNDS] (default 7). Needs root, cc, bpftool.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-7}
[ "${TRACE:-}" ] && set -x
N=${N:-200000}
BIN=${BIN:-bin/cacheheat}
[ -x "$BIN" ] || go build -o "$BIN" ./cmd/cacheheat
tmp=$(mktemp -d)
trap 'exec 3>&- 2>/dev/null || true; rm -rf "$tmp"; [ -n "${recpid:-}" ] && kill "$recpid" 2>/dev/null || true' EXIT
cc -O2 -o "$tmp/work" cmd/cacheheat/testdata/funclat/work.c

loopns() { awk '/^loop_cpu_ns/ {print $2}'; }
# bpftrace with the same two probes (a latency histogram, as funclatency
# does) is the reference for what a uprobe and a uretprobe cost anyway.
bt="uprobe:$tmp/work:work { @s[tid] = nsecs; } uretprobe:$tmp/work:work /@s[tid]/ { @h = hist(nsecs - @s[tid]); delete(@s[tid]); }"
: > "$tmp/base"; : > "$tmp/func"; : > "$tmp/bt"
for r in $(seq "$ROUNDS"); do
  "$tmp/work" "$N" tiny | loopns >> "$tmp/base"
  $BIN record -q --func work -o "$tmp/f.rec" -- "$tmp/work" "$N" tiny 2>/dev/null | loopns >> "$tmp/func"
  if command -v bpftrace >/dev/null; then
    bpftrace -e "$bt" -c "$tmp/work $N tiny" 2>/dev/null | loopns >> "$tmp/bt"
  fi
  echo "round $r/$ROUNDS done" >&2
done
python3 - "$tmp" "$N" <<'PY'
import statistics, sys
d, n = sys.argv[1], int(sys.argv[2])
read = lambda f: [float(x) for x in open(f"{d}/{f}") if x.strip()]
base = statistics.median(read("base"))
print(f"{n} calls, median of {len(read('base'))} runs each")
print("| run | loop CPU time | per call | ratio to alone | added per call |")
print("|---|---|---|---|---|")
print(f"| alone | {base/1e6:.1f} ms | {base/n:.0f} ns | 1.00 | |")
for f, label in [("func", "under record --func work"), ("bt", "under bpftrace uprobe + uretprobe hist")]:
    v = read(f)
    if v:
        m = statistics.median(v)
        print(f"| {label} | {m/1e6:.1f} ms | {m/n:.0f} ns | {m/base:.2f} | {(m-base)/n:.0f} ns |")
PY

# The BPF programs' own run time per call: the program waits on its input
# before and after its loop, so the probes are attached (and still
# loaded) around exactly N calls.
old=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -qw kernel.bpf_stats_enabled="$old"; exec 3>&- 2>/dev/null || true; rm -rf "$tmp"; [ -n "${recpid:-}" ] && kill "$recpid" 2>/dev/null || true' EXIT
sysctl -qw kernel.bpf_stats_enabled=1
# The recorder's programs: the func_* programs loaded after this point
# (bpftool here lists no owning pids).
before=$(bpftool prog show -j | python3 -c 'import json,sys; print(" ".join(str(p["id"]) for p in json.load(sys.stdin)))')
bpfstats() { # run_cnt and run_time_ns of the new function programs
  bpftool prog show -j | python3 -c '
import json, sys
before = set(int(x) for x in sys.argv[1].split())
out = {}
for p in json.load(sys.stdin):
    if p.get("name") in ("func_entry", "func_return", "func_ret_insn") and p["id"] not in before:
        if p["name"] in out:
            sys.exit("two recorders with function probes are running; run this alone")
        out[p["name"]] = [p.get("run_cnt", 0), p.get("run_time_ns", 0)]
json.dump(out, sys.stdout)' "$before"
}
mkfifo "$tmp/in"
exec 3<> "$tmp/in" # opened first, so the program's open does not block (and it has exec'd when recorded)
"$tmp/work" "$N" tiny wait < "$tmp/in" > "$tmp/out" 3>&- &
workpid=$!
until [ "$(readlink "/proc/$workpid/exe")" = "$tmp/work" ]; do sleep 0.05; done
$BIN record -q --func work -p "$workpid" -o "$tmp/s.rec" >/dev/null 2>&1 3>&- &
recpid=$!
# The file appears once every probe is attached.
for i in $(seq 300); do [ -e "$tmp/s.rec.partial" ] && break; kill -0 "$recpid" || { echo "record exited" >&2; exit 1; }; sleep 0.2; done
b0=$(bpfstats)
echo >&3 # run the loop
until grep -q loop_cpu_ns "$tmp/out"; do sleep 0.1; done
b1=$(bpfstats)
exec 3>&- # let it exit
wait "$workpid"; wait "$recpid" || true
recpid=
sysctl -qw kernel.bpf_stats_enabled="$old"
python3 - "$N" "$b0" "$b1" <<'PY'
import json, sys
n, b0, b1 = int(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
print(f"\nBPF run time over {n} calls (kernel.bpf_stats_enabled)")
print("| program | invocations | mean run time |")
print("|---|---|---|")
tot = 0
for name in sorted(b1):
    cnt = b1[name][0] - b0.get(name, [0, 0])[0]
    ns = b1[name][1] - b0.get(name, [0, 0])[1]
    tot += ns
    if cnt:
        print(f"| {name} | {cnt} | {ns / cnt:.0f} ns |")
print(f"| **per call (entry + return)** | {n} | **{tot / n:.0f} ns** |")
PY
