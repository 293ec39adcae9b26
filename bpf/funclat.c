// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
//go:build ignore

// Function latency with the calling task's own counters per call. An entry
// probe snapshots the task's kernel counters (task_struct, read with
// CO-RE); the return probe takes the deltas, buckets the call by log2
// latency and adds the deltas to that bucket, so user space can compare the
// slow calls with the median ones without a per-call event stream. C
// functions return through a uretprobe and are keyed by thread; Go
// functions are probed at their RET instructions and keyed by goroutine
// (docs/FUNCTIONS.md says why). Everything here is cumulative: user space
// turns two snapshots into a window.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "funclat.h"
#include "helpers.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

// Keeps struct func_event in the BTF for bpf2go: the ring buffer carries it
// only as bytes.
const struct func_event *unused_func_event __attribute__((unused));
// The enums of funclat.h reach BTF, and so Go, only when something uses
// them.
const enum func_size *unused_func_size __attribute__((unused));
const enum cookie_bits *unused_cookie_bits __attribute__((unused));
const enum func_counter *unused_func_counter __attribute__((unused));

// Only calls by tasks in this cgroup v2 (or its descendants) count, when
// set (-G); process targets are filtered by the probes' pid instead.
const volatile u64 target_cgroup = 0;
const volatile u32 target_cgroup_level = 0;
// Whether per-call events go to the ring buffer (--func-events).
const volatile bool events_on = false;

// The counters snapshotted at entry, in this order.
enum snap_field {
	SN_EXEC_START = 0, // se.exec_start: when the task last got the CPU or was last accounted
	SN_SUM_EXEC,       // se.sum_exec_runtime
	SN_RUN_DELAY,      // sched_info.run_delay
	SN_MINFLT,
	SN_MAJFLT,
	SN_NVCSW,
	SN_NIVCSW,
	SN_MIGRATIONS,
	SN_COUNT,
};

// A call in flight: one per (thread or goroutine, function, stack depth),
// so recursive calls each have their own entry and an entry left behind by
// a call that never returned is found and counted when the same depth is
// entered again.
struct inflight_key {
	u64 id;    // pid_tgid (C) or the goroutine's g pointer (Go)
	u64 depth; // stack position of the call (see call_depth)
	u32 func;
	u32 pad;
};

struct inflight_val {
	u64 start;
	u32 tid;
	u32 pad;
	u64 snap[SN_COUNT];
};

// LRU: calls that never return (longjmp, a panic that unwinds past the
// function, a thread that exits inside it) cannot fill the map for good.
// User space sets the size; evictions show up as unmatched returns and in
// entries - returns - in flight.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct inflight_key);
	__type(value, struct inflight_val);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FUNC_MAX * FUNC_BUCKETS);
	__type(key, u32);
	__type(value, struct func_bucket);
} func_hist SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FUNC_MAX);
	__type(key, u32);
	__type(value, struct func_stats);
} func_stat_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} func_events SEC(".maps");

static __always_inline bool in_target_cgroup(struct task_struct *t)
{
	return !target_cgroup || in_cgroup_subtree(t, target_cgroup, target_cgroup_level);
}

static __always_inline void snapshot(struct task_struct *t, u64 *s)
{
	s[SN_EXEC_START] = BPF_CORE_READ(t, se.exec_start);
	s[SN_SUM_EXEC] = BPF_CORE_READ(t, se.sum_exec_runtime);
	s[SN_RUN_DELAY] = BPF_CORE_READ(t, sched_info.run_delay);
	s[SN_MINFLT] = BPF_CORE_READ(t, min_flt);
	s[SN_MAJFLT] = BPF_CORE_READ(t, maj_flt);
	s[SN_NVCSW] = BPF_CORE_READ(t, nvcsw);
	s[SN_NIVCSW] = BPF_CORE_READ(t, nivcsw);
	s[SN_MIGRATIONS] = BPF_CORE_READ(t, se.nr_migrations);
}

// call_key fills the in-flight key of the call whose entry or return
// probe is running. sp_adjust is what to subtract from the stack pointer
// to get its value at entry: 8 after a C function returned (its return
// address is popped), 0 at entry and at a Go RET instruction.
static __always_inline bool call_key(struct pt_regs *ctx, u64 cookie, u64 sp_adjust, struct inflight_key *k)
{
	// pt_regs is amd64's (vmlinux.h comes from an amd64 kernel): sp and r14.
	u64 sp = ctx->sp - sp_adjust;

	k->func = cookie & COOKIE_FUNC_MASK;
	k->pad = 0;
	if (!(cookie & COOKIE_GO)) {
		k->id = bpf_get_current_pid_tgid();
		k->depth = sp;
		return true;
	}
	// Go (register ABI, amd64): R14 holds the running goroutine's g, whose
	// first field is its stack {lo, hi}. The stack moves when it grows, so
	// the depth is the distance from the stack's top, which a move keeps.
	u64 g = ctx->r14, hi = 0;
	if (!g || bpf_probe_read_user(&hi, sizeof(hi), (void *)(g + 8)) || hi < sp)
		return false;
	k->id = g;
	k->depth = hi - sp;
	return true;
}

static __always_inline struct func_stats *stats_of(u32 func)
{
	return bpf_map_lookup_elem(&func_stat_map, &func);
}

static __always_inline int on_entry(struct pt_regs *ctx)
{
	u64 cookie = bpf_get_attach_cookie(ctx);
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct inflight_key k;
	struct inflight_val v;
	struct func_stats *st;

	if (!in_target_cgroup(t))
		return 0;
	st = stats_of(cookie & COOKIE_FUNC_MASK);
	if (!st)
		return 0;
	if (!call_key(ctx, cookie, 0, &k)) {
		st->inflight_full++; // no goroutine to key it by
		return 0;
	}
	v.tid = (u32)bpf_get_current_pid_tgid();
	v.pad = 0;
	snapshot(t, v.snap);
	v.start = bpf_ktime_get_ns();
	long err = bpf_map_update_elem(&inflight, &k, &v, BPF_NOEXIST);
	if (err == -17 /* EEXIST */) {
		st->abandoned++;
		err = bpf_map_update_elem(&inflight, &k, &v, BPF_ANY);
	}
	if (err) {
		st->inflight_full++;
		return 0;
	}
	st->entries++;
	return 0;
}

static __always_inline int on_return(struct pt_regs *ctx, u64 sp_adjust)
{
	u64 now = bpf_ktime_get_ns();
	u64 cookie = bpf_get_attach_cookie(ctx);
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct inflight_key k;
	struct inflight_val *in;
	struct func_stats *st;
	struct func_bucket *b;
	u64 snap[SN_COUNT], d[FC_COUNT] = {};
	u64 start, lat, off;
	bool moved;

	if (!in_target_cgroup(t)) // not an unmatched return: not a target's
		return 0;
	st = stats_of(cookie & COOKIE_FUNC_MASK);
	if (!st)
		return 0;
	if (!call_key(ctx, cookie, sp_adjust, &k)) {
		st->unmatched++;
		return 0;
	}
	in = bpf_map_lookup_elem(&inflight, &k);
	if (!in) {
		st->unmatched++;
		return 0;
	}
	snapshot(t, snap);
	start = in->start;
	lat = now > start ? now - start : 0;
	moved = in->tid != (u32)bpf_get_current_pid_tgid();
	if (!moved) {
		// The task runs at entry and at return, so its scheduler clock
		// since it last got the CPU is not yet in sum_exec_runtime at
		// either point. exec_start moves on by the accounted run time
		// plus the time off the CPU in between, hence off-CPU time is
		// exec_start's advance minus sum_exec_runtime's: exact at the
		// probes, with no tick granularity.
		off = (snap[SN_EXEC_START] - in->snap[SN_EXEC_START]) -
		      (snap[SN_SUM_EXEC] - in->snap[SN_SUM_EXEC]);
		if ((s64)off < 0)
			off = 0;
		if (off > lat)
			off = lat;
		d[FC_ONCPU_NS] = lat - off;
		d[FC_RUNQ_NS] = snap[SN_RUN_DELAY] - in->snap[SN_RUN_DELAY];
		if (d[FC_RUNQ_NS] > off)
			d[FC_RUNQ_NS] = off;
		d[FC_BLOCKED_NS] = off - d[FC_RUNQ_NS];
		d[FC_MINFLT] = snap[SN_MINFLT] - in->snap[SN_MINFLT];
		d[FC_MAJFLT] = snap[SN_MAJFLT] - in->snap[SN_MAJFLT];
		d[FC_NVCSW] = snap[SN_NVCSW] - in->snap[SN_NVCSW];
		d[FC_NIVCSW] = snap[SN_NIVCSW] - in->snap[SN_NIVCSW];
		d[FC_MIGRATIONS] = snap[SN_MIGRATIONS] - in->snap[SN_MIGRATIONS];
	}
	bpf_map_delete_elem(&inflight, &k);

	u32 idx = k.func * FUNC_BUCKETS + log2_bucket(lat, FUNC_BUCKETS - 1);
	b = bpf_map_lookup_elem(&func_hist, &idx);
	if (!b)
		return 0;
	b->calls++;
	b->lat_ns += lat;
	st->returns++;
	if (moved) {
		st->moved++;
	} else {
		b->counted++;
		for (int i = 0; i < FC_COUNT; i++)
			b->sum[i] += d[i];
	}

	if (events_on) {
		struct func_event *e = bpf_ringbuf_reserve(&func_events, sizeof(*e), 0);
		if (!e) {
			st->ev_dropped++;
			return 0;
		}
		u64 pt = bpf_get_current_pid_tgid();
		e->func = k.func;
		e->tid = (u32)pt;
		e->pid = pt >> 32;
		e->moved = moved;
		e->start_ns = start;
		e->lat_ns = lat;
		for (int i = 0; i < FC_COUNT; i++)
			e->delta[i] = d[i];
		bpf_ringbuf_submit(e, 0);
	}
	return 0;
}

SEC("uprobe")
int func_entry(struct pt_regs *ctx)
{
	return on_entry(ctx);
}

// A C function's return: the uretprobe runs after RET popped the return
// address.
SEC("uretprobe")
int func_return(struct pt_regs *ctx)
{
	return on_return(ctx, 8);
}

// A Go function's return: a uprobe on one of its RET instructions, before
// the return address is popped.
SEC("uprobe")
int func_ret_insn(struct pt_regs *ctx)
{
	return on_return(ctx, 0);
}
