#!/usr/bin/env bash
# What one stack costs the BPF side: builds a variant of the current BPF
# source that times each stack call with bpf_ktime_get_ns and sums the
# times in globals, records `-a` beside rcu bad with it, and prints the
# means read from the object's .bss with bpftool. A diagnostic: the
# variant is never committed (each timing adds two clock reads, ~50 ns).
#   off-CPU (on_switch, a sampled voluntary switch-out): the user stack,
#     the kernel stack where taken, the same kernel stack taken again at
#     once (its unwind tables and the stack's memory now cached), the
#     locked goroutine's stack
#   sampler (sample_clock, a target's sample): the user stack, the ring
#     buffer output
# Needs root, clang and go (make generate), bpftool, python3.
# Usage: bench/stack-parts.sh [SECONDS] (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-10}
out=$(mktemp -d)
cp bpf/cacheheat.c "$out/orig.c"
restore() {
  pkill -INT -f "$out/timed record" 2>/dev/null || true
  cp "$out/orig.c" bpf/cacheheat.c; go generate ./bpf/... >/dev/null; rm -rf "$out"
}
trap restore EXIT
python3 - <<'PY'
p = "bpf/cacheheat.c"
s = open(p).read()
def sub(old, new):
    global s
    assert s.count(old) == 1, old
    s = s.replace(old, new)
sub("""			v.ustack = bpf_get_stackid(ctx, &offcpu_stacks, BPF_F_USER_STACK);
			// Decided only for a switch-out whose stacks are taken.
			if (!(state & TASK_INTERRUPTIBLE) || !own_path(wait))
				v.kstack = bpf_get_stackid(ctx, &offcpu_stacks, 0);
			v.gstack = go_locked_stack(bpf_get_current_task_btf());""",
"""			u64 t0 = bpf_ktime_get_ns();
			v.ustack = bpf_get_stackid(ctx, &offcpu_stacks, BPF_F_USER_STACK);
			u64 t1 = bpf_ktime_get_ns();
			__sync_fetch_and_add(&t_off_n, 1);
			__sync_fetch_and_add(&t_off_user, t1 - t0);
			if (!(state & TASK_INTERRUPTIBLE) || !own_path(wait)) {
				v.kstack = bpf_get_stackid(ctx, &offcpu_stacks, 0);
				u64 t2 = bpf_ktime_get_ns();
				bpf_get_stackid(ctx, &offcpu_stacks, 0);
				u64 t3 = bpf_ktime_get_ns();
				__sync_fetch_and_add(&t_off_kn, 1);
				__sync_fetch_and_add(&t_off_kernel, t2 - t1);
				__sync_fetch_and_add(&t_off_kernel_again, t3 - t2);
			}
			u64 t4 = bpf_ktime_get_ns();
			v.gstack = go_locked_stack(bpf_get_current_task_btf());
			__sync_fetch_and_add(&t_off_go, bpf_ktime_get_ns() - t4);""")
sub("static __noinline void offcpu_out(",
    "volatile u64 t_off_n, t_off_kn, t_off_user, t_off_kernel, t_off_kernel_again, t_off_go;\n"
    "volatile u64 t_smp_n, t_smp_user, t_smp_ring;\n"
    "static __noinline void offcpu_out(")
sub("""	ulen = bpf_get_stack(ctx, (void *)r->frames + klen, MAX_STACK_DEPTH * sizeof(u64), BPF_F_USER_STACK);""",
"""	u64 s0 = bpf_ktime_get_ns();
	ulen = bpf_get_stack(ctx, (void *)r->frames + klen, MAX_STACK_DEPTH * sizeof(u64), BPF_F_USER_STACK);
	__sync_fetch_and_add(&t_smp_user, bpf_ktime_get_ns() - s0);
	__sync_fetch_and_add(&t_smp_n, 1);""")
sub("""	if (bpf_ringbuf_output(&sample_ring, r, n, ring_flags()))""",
"""	u64 s1 = bpf_ktime_get_ns();
	long rr = bpf_ringbuf_output(&sample_ring, r, n, ring_flags());
	__sync_fetch_and_add(&t_smp_ring, bpf_ktime_get_ns() - s1);
	if (rr)""")
open(p, "w").write(s)
PY
go generate ./bpf/... >/dev/null
go build -o "$out/timed" ./cmd/cacheheat
cp "$out/timed" "$out/workload"
before=$(bpftool map show | awk '/name \.bss/ {print $1}' | tr -d : | sort -n | tail -1)
"$out/timed" record -a -o "$out/r.rec" -d "$((SECS + 6))s" >"$out/rec.log" 2>&1 &
rec=$!
for _ in $(seq 50); do
  id=$(bpftool map show | awk '/name \.bss/ {print $1}' | tr -d : | sort -n | tail -1)
  [ -n "$id" ] && [ "$id" != "$before" ] && break
  sleep 0.1
done
sleep 1
"$out/workload" workload run rcu --variant bad -t 2 -d "${SECS}s" >/dev/null
bpftool -j map dump id "$id" >"$out/bss.json"
python3 - "$out/bss.json" <<'PY'
import json, sys
v = {k: x for e in json.load(open(sys.argv[1]))[0]["formatted"]["value"][".bss"]
     for k, x in e.items() if k.startswith("t_")}
def per(a, n):
    return round(v[a] / v[n]) if v[n] else "-"
print("off-CPU: %d switch-outs with stacks, %d with a kernel stack" % (v["t_off_n"], v["t_off_kn"]))
print("  user stack %s ns, kernel stack %s ns, again at once %s ns, goroutine %s ns" % (
    per("t_off_user", "t_off_n"), per("t_off_kernel", "t_off_kn"),
    per("t_off_kernel_again", "t_off_kn"), per("t_off_go", "t_off_n")))
print("sampler: %d samples of targets: user stack %s ns, ring output %s ns" % (
    v["t_smp_n"], per("t_smp_user", "t_smp_n"), per("t_smp_ring", "t_smp_n")))
PY
wait "$rec"
