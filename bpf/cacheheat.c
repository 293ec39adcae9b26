//go:build ignore

// cacheheat's BPF side. Every measured event is a per-CPU counting perf
// event (pid=-1) whose fd sits in the `counters` PERF_EVENT_ARRAY; the
// programs here read those counters at each context switch and at each
// sample, and attribute the delta since the previous read on that CPU to
// the task that was running. Events are data: software and hardware events
// take the same path. User space turns the cumulative values kept here into
// per-window deltas, so nothing is ever reset under a running program.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define MAX_EVENTS 16
#define HIST_BUCKETS 40
#define MAX_STACK_DEPTH 127
#define TASK_COMM_LEN 16

// Target modes, set by user space before load.
#define MODE_ALL 0
#define MODE_PIDS 1
#define MODE_CGROUP 2

// Sample event slots: 0 is cpu-clock, 1 the primary miss event.
#define SAMPLE_SLOTS 2

const volatile u32 target_mode = MODE_ALL;
const volatile u64 target_cgroup = 0;
// The target cgroup's depth below the cgroup v2 root: a task is a target
// when its cgroup's ancestor at this depth is the target cgroup, so tasks
// in descendant cgroups (a container's, a service's children) count too.
const volatile u32 target_cgroup_level = 0;
const volatile u32 nr_events = 0;
// The slot of context-switches, or -1. The kernel bumps that counter after
// the sched_switch tracepoint, so a read there would hand each switch to
// the next task on the CPU; the switch is counted for prev here instead, as
// perf counts it for the task switched out.
const volatile s32 switch_slot = -1;

// The per-CPU counting events: one PERF_EVENT_ARRAY per event slot,
// indexed by CPU (max_entries is left to the loader, which sizes it to the
// possible CPUs). One map per slot, not one big array, because loaders
// clamp a perf event array to the number of CPUs.
#define COUNTER_MAP(n)                                   \
	struct {                                         \
		__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY); \
		__uint(key_size, sizeof(u32));           \
		__uint(value_size, sizeof(u32));         \
	} counters##n SEC(".maps")

COUNTER_MAP(0);
COUNTER_MAP(1);
COUNTER_MAP(2);
COUNTER_MAP(3);
COUNTER_MAP(4);
COUNTER_MAP(5);
COUNTER_MAP(6);
COUNTER_MAP(7);
COUNTER_MAP(8);
COUNTER_MAP(9);
COUNTER_MAP(10);
COUNTER_MAP(11);
COUNTER_MAP(12);
COUNTER_MAP(13);
COUNTER_MAP(14);
COUNTER_MAP(15);

#define READ_SLOT(n) \
	case n:      \
		return bpf_perf_event_read_value(&counters##n, BPF_F_CURRENT_CPU, v, sizeof(*v))

// read_slot reads event slot i on this CPU.
static __always_inline long read_slot(u32 i, struct bpf_perf_event_value *v)
{
	switch (i) {
	READ_SLOT(0);
	READ_SLOT(1);
	READ_SLOT(2);
	READ_SLOT(3);
	READ_SLOT(4);
	READ_SLOT(5);
	READ_SLOT(6);
	READ_SLOT(7);
	READ_SLOT(8);
	READ_SLOT(9);
	READ_SLOT(10);
	READ_SLOT(11);
	READ_SLOT(12);
	READ_SLOT(13);
	READ_SLOT(14);
	READ_SLOT(15);
	}
	return -1;
}

// Target processes (tgid) in MODE_PIDS; children of targets are added at
// fork so that a target's whole process tree is followed. A value of
// TARGET_AT_EXEC marks a command that becomes a target when it execs, as
// perf's enable_on_exec: the launcher before it is not the command.
#define TARGET_YES 1
#define TARGET_AT_EXEC 2
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, u32);
	__type(value, u8);
} targets SEC(".maps");

struct task_key {
	u32 tgid;
	u32 pid;
};

struct task_val {
	u64 counts[MAX_EVENTS];
	char comm[TASK_COMM_LEN];
};

// Cumulative per-thread counts of the target's tasks.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, struct task_key);
	__type(value, struct task_val);
} tasks SEC(".maps");

struct last_val {
	u64 counter[MAX_EVENTS];
	u64 enabled[MAX_EVENTS];
	u64 running[MAX_EVENTS];
	u64 primed;
};

// The last counter values read on each CPU.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct last_val);
} last SEC(".maps");

struct totals_val {
	u64 counts[MAX_EVENTS];
};

// Cumulative per-CPU counts of the target's tasks.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct totals_val);
} target_totals SEC(".maps");

struct stats_val {
	u64 fires[SAMPLE_SLOTS];   // sample program runs, all tasks
	u64 samples[SAMPLE_SLOTS]; // samples of the target's tasks
	u64 stack_errors;
	u64 sample_map_full;
	u64 proc_map_full;
	u64 map_errors;
};

// Cumulative per-CPU sampling and drop counters.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct stats_val);
} stats SEC(".maps");

struct hist_val {
	u64 runq[HIST_BUCKETS];
	u64 offcpu[HIST_BUCKETS];
};

// Cumulative per-CPU latency histograms, log2 nanosecond buckets.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct hist_val);
} hists SEC(".maps");

// Wakeup and switch-out timestamps by thread id.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, u32);
	__type(value, u64);
} wakeup_ts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, u32);
	__type(value, u64);
} offcpu_ts SEC(".maps");

// Stacks are double-buffered: samples go to the stack map and sample keys
// of the active buffer while user space drains and clears the other, so a
// stack id is never reused under a sample that still refers to it.
struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(u32));
	__uint(value_size, MAX_STACK_DEPTH * sizeof(u64));
} stacks0 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(u32));
	__uint(value_size, MAX_STACK_DEPTH * sizeof(u64));
} stacks1 SEC(".maps");

// ctrl[0] is the active stack buffer (0 or 1), written by user space.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} ctrl SEC(".maps");

struct sample_key {
	u32 pid; // tgid
	u32 tid;
	u32 cpu;
	s32 ustack;
	s32 kstack;
	u16 slot;
	u16 buf;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct sample_key);
	__type(value, u64);
} samples SEC(".maps");

// Per-cgroup aggregation, for the exporter: set before load, and off for a
// recording, where the verifier then drops the code below as dead. Counts,
// run-queue latency and off-CPU time are summed by the task's cgroup v2 id
// (the kernfs node id, which is the cgroup directory's inode number), so
// tasks that exit between two reads still count for their cgroup. In this
// mode there are no per-thread counts and no stacks: a host-wide exporter
// would otherwise fill the tasks map with every thread it ever saw.
const volatile bool by_cgroup = false;

// Why a task left the CPU, from its state at the switch (OFFCPU_* index the
// per-cgroup off-CPU histograms; user space names them).
#define OFFCPU_PREEMPTED 0 // still runnable: preempted or yielded
#define OFFCPU_SLEEP 1 // TASK_INTERRUPTIBLE: futex, poll, sleep, pipe
#define OFFCPU_BLOCKED 2 // TASK_UNINTERRUPTIBLE: mostly disk I/O
#define OFFCPU_IDLE 3 // TASK_IDLE (NOLOAD): idle kernel worker threads
#define OFFCPU_OTHER 4 // stopped, traced, dead
#define OFFCPU_REASONS 5
#define OFFCPU_MASK 7ULL

struct cgroup_val {
	u64 counts[MAX_EVENTS];
	u64 runq[HIST_BUCKETS];
	u64 runq_ns; // the sum of the latencies in runq
	u64 offcpu[OFFCPU_REASONS][HIST_BUCKETS];
	u64 offcpu_ns[OFFCPU_REASONS];
};

// Cumulative values by cgroup id. User space sizes it before load (1 entry
// when by_cgroup is off) and deletes the entries of removed cgroups.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, u64);
	__type(value, struct cgroup_val);
} cgroups SEC(".maps");

// cgroup_full[0] counts per-cgroup updates lost to a full cgroups map.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} cgroup_full SEC(".maps");

// cgroup_of returns the per-cgroup values of task t's cgroup, created on
// first use, or NULL when by_cgroup is off or the map is full (counted).
static __always_inline struct cgroup_val *cgroup_of(struct task_struct *t)
{
	if (!by_cgroup)
		return NULL;
	// Plain loads, not BPF_CORE_READ: t is a BTF pointer, so the verifier
	// turns these into faulting loads, without a helper call per hop.
	u64 id = t->cgroups->dfl_cgrp->kn->id;
	struct cgroup_val *cv = bpf_map_lookup_elem(&cgroups, &id);
	if (cv)
		return cv;
	static const struct cgroup_val zero_cv;
	long err = bpf_map_update_elem(&cgroups, &id, &zero_cv, BPF_NOEXIST);
	if (err && err != -17 /* EEXIST */) {
		u32 zero = 0;
		u64 *full = bpf_map_lookup_elem(&cgroup_full, &zero);
		if (full)
			(*full)++;
		return NULL;
	}
	return bpf_map_lookup_elem(&cgroups, &id);
}

static __always_inline u32 offcpu_reason_of(struct task_struct *t)
{
	unsigned int st = t->__state;

	if (st == 0 /* TASK_RUNNING */)
		return OFFCPU_PREEMPTED;
	if (st & 0x400 /* TASK_NOLOAD */)
		return OFFCPU_IDLE;
	if (st & 1 /* TASK_INTERRUPTIBLE */)
		return OFFCPU_SLEEP;
	if (st & 2 /* TASK_UNINTERRUPTIBLE */)
		return OFFCPU_BLOCKED;
	return OFFCPU_OTHER;
}

static __always_inline struct stats_val *get_stats(void)
{
	u32 zero = 0;
	return bpf_map_lookup_elem(&stats, &zero);
}

static __always_inline bool is_target(struct task_struct *t)
{
	u32 tgid = t->tgid;

	if (t->pid == 0)
		return false; // the idle task is no one's target
	switch (target_mode) {
	case MODE_ALL:
		return true;
	case MODE_PIDS: {
		u8 *v = bpf_map_lookup_elem(&targets, &tgid);
		return v && *v == TARGET_YES;
	}
	case MODE_CGROUP: {
		struct cgroup *cg = BPF_CORE_READ(t, cgroups, dfl_cgrp);
		struct cgroup *anc = NULL;

		if (!cg || BPF_CORE_READ(cg, level) < (int)target_cgroup_level)
			return false;
		if (bpf_probe_read_kernel(&anc, sizeof(anc), &cg->ancestors[target_cgroup_level]) || !anc)
			return false;
		return BPF_CORE_READ(anc, kn, id) == target_cgroup;
	}
	}
	return false;
}

// account reads every counter on this CPU and adds the delta since the last
// read to task t when it is a target. Multiplexed counters are scaled by
// the enabled/running deltas, as perf does.
static __always_inline void account(struct task_struct *t, bool switching_out)
{
	u32 zero = 0;
	struct last_val *l = bpf_map_lookup_elem(&last, &zero);
	if (!l)
		return;
	bool target = is_target(t);
	struct task_val *tv = NULL;
	struct totals_val *tot = NULL;
	bool attribute = target && l->primed;
	if (attribute && !by_cgroup) {
		struct task_key k = {.tgid = t->tgid, .pid = t->pid};
		tv = bpf_map_lookup_elem(&tasks, &k);
		if (!tv) {
			struct task_val init = {};
			long err = bpf_map_update_elem(&tasks, &k, &init, BPF_NOEXIST);
			if (err && err != -17 /* EEXIST */) {
				struct stats_val *s = get_stats();
				if (s) {
					if (err == -7 /* E2BIG: map full */)
						__sync_fetch_and_add(&s->proc_map_full, 1);
					else
						__sync_fetch_and_add(&s->map_errors, 1);
				}
			}
			tv = bpf_map_lookup_elem(&tasks, &k);
		}
		if (tv)
			bpf_probe_read_kernel_str(tv->comm, sizeof(tv->comm), t->comm);
		tot = bpf_map_lookup_elem(&target_totals, &zero);
	}
	struct cgroup_val *cv = attribute ? cgroup_of(t) : NULL;
	u64 cdc[MAX_EVENTS] = {};
	for (u32 i = 0; i < MAX_EVENTS; i++) {
		if (i >= nr_events)
			break;
		struct bpf_perf_event_value v = {};
		if (read_slot(i, &v))
			continue;
		u64 dc = v.counter - l->counter[i];
		u64 de = v.enabled - l->enabled[i];
		u64 dr = v.running - l->running[i];
		l->counter[i] = v.counter;
		l->enabled[i] = v.enabled;
		l->running[i] = v.running;
		if (!attribute)
			continue;
		if (dr && dr < de)
			dc = dc * de / dr;
		if ((s32)i == switch_slot)
			dc = switching_out ? 1 : 0;
		if (tv)
			__sync_fetch_and_add(&tv->counts[i], dc);
		if (tot)
			tot->counts[i] += dc;
		if (by_cgroup)
			cdc[i] = dc;
	}
	l->primed = 1;
	// Added after the loop, under one null check: inside it the compiler
	// turns &cv->counts[i] into a pointer the verifier cannot follow.
	if (cv) {
		for (u32 i = 0; i < MAX_EVENTS; i++) {
			if (i >= nr_events)
				break;
			__sync_fetch_and_add(&cv->counts[i], cdc[i]);
		}
	}
}

static __always_inline u32 log2_bucket(u64 v)
{
	u32 b = 0;
	for (int i = 0; i < HIST_BUCKETS - 1; i++) {
		if (v < 2)
			break;
		v >>= 1;
		b++;
	}
	return b;
}

static __always_inline void record_wakeup(struct task_struct *p)
{
	if (!is_target(p))
		return;
	u32 tid = p->pid;
	u64 now = bpf_ktime_get_ns();
	bpf_map_update_elem(&wakeup_ts, &tid, &now, BPF_ANY);
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(on_wakeup, struct task_struct *p)
{
	record_wakeup(p);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(on_wakeup_new, struct task_struct *p)
{
	record_wakeup(p);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	u64 now = bpf_ktime_get_ns();
	u32 zero = 0;

	// The last switch of an exiting task is not counted: perf has already
	// removed the task's counters by then (perf_event_exit_task).
	account(prev, !(prev->__state & 0x80 /* TASK_DEAD */));

	if (is_target(prev)) {
		u32 tid = prev->pid;
		// A preempted task goes straight back onto the run queue: its run
		// queue latency starts now, as in runqlat.bt.
		if (prev->__state == 0 /* TASK_RUNNING */)
			bpf_map_update_elem(&wakeup_ts, &tid, &now, BPF_ANY);
		// By cgroup, the off-CPU reason rides in the timestamp's low
		// bits (OFFCPU_MASK ns of resolution), saving a map per switch.
		u64 off = by_cgroup ? (now & ~OFFCPU_MASK) | offcpu_reason_of(prev) : now;
		bpf_map_update_elem(&offcpu_ts, &tid, &off, BPF_ANY);
	}

	u32 ntid = next->pid;
	if (ntid == 0)
		return 0;
	struct hist_val *h = bpf_map_lookup_elem(&hists, &zero);
	struct cgroup_val *cv = NULL;
	u64 *ts = bpf_map_lookup_elem(&wakeup_ts, &ntid);
	if (ts) {
		if (now >= *ts) {
			u32 b = log2_bucket(now - *ts);
			if (h)
				h->runq[b]++;
			cv = cgroup_of(next);
			if (cv && b < HIST_BUCKETS) {
				__sync_fetch_and_add(&cv->runq[b], 1);
				__sync_fetch_and_add(&cv->runq_ns, now - *ts);
			}
		}
		bpf_map_delete_elem(&wakeup_ts, &ntid);
	}
	ts = bpf_map_lookup_elem(&offcpu_ts, &ntid);
	if (ts) {
		u64 off = *ts;
		u32 r = OFFCPU_OTHER;
		if (by_cgroup) {
			r = off & OFFCPU_MASK;
			off &= ~OFFCPU_MASK;
		}
		if (now >= off) {
			u32 b = log2_bucket(now - off);
			if (h)
				h->offcpu[b]++;
			if (by_cgroup) {
				if (!cv)
					cv = cgroup_of(next);
				if (cv && r < OFFCPU_REASONS && b < HIST_BUCKETS) {
					__sync_fetch_and_add(&cv->offcpu[r][b], 1);
					__sync_fetch_and_add(&cv->offcpu_ns[r], now - off);
				}
			}
		}
		bpf_map_delete_elem(&offcpu_ts, &ntid);
	}
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	if (target_mode != MODE_PIDS)
		return 0;
	u32 ptgid = parent->tgid;
	u32 ctgid = child->tgid;
	u8 *pv = bpf_map_lookup_elem(&targets, &ptgid);
	if (ptgid == ctgid || !pv || *pv != TARGET_YES)
		return 0;
	u8 one = TARGET_YES;
	if (bpf_map_update_elem(&targets, &ctgid, &one, BPF_ANY)) {
		struct stats_val *s = get_stats();
		if (s)
			__sync_fetch_and_add(&s->map_errors, 1);
	}
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	if (target_mode != MODE_PIDS)
		return 0;
	u32 tgid = p->tgid;
	u8 *v = bpf_map_lookup_elem(&targets, &tgid);
	if (!v || *v != TARGET_AT_EXEC)
		return 0;
	// Counts up to here belong to the launcher: move this CPU's baseline
	// past them, then start counting.
	account(p, false);
	*v = TARGET_YES;
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *t)
{
	u32 tid = t->pid;
	bpf_map_delete_elem(&wakeup_ts, &tid);
	bpf_map_delete_elem(&offcpu_ts, &tid);
	return 0;
}

static __always_inline int sample(struct bpf_perf_event_data *ctx, u16 slot)
{
	u32 zero = 0;
	struct stats_val *s = get_stats();
	if (!s)
		return 0;
	s->fires[slot & 1]++;
	struct task_struct *t = (struct task_struct *)bpf_get_current_task_btf();
	// Attribute counters here too, so a thread that runs for a long time
	// without a context switch shows up in the window it ran in.
	account(t, false);
	if (!is_target(t))
		return 0;
	s->samples[slot & 1]++;
	if (by_cgroup)
		return 0; // counts by cgroup only: no stacks

	u32 *bufp = bpf_map_lookup_elem(&ctrl, &zero);
	u32 buf = bufp ? (*bufp & 1) : 0;
	u64 id = bpf_get_current_pid_tgid();
	struct sample_key k = {
		.pid = id >> 32,
		.tid = (u32)id,
		.cpu = bpf_get_smp_processor_id(),
		.slot = slot,
		.buf = buf,
	};
	if (buf) {
		k.ustack = bpf_get_stackid(ctx, &stacks1, BPF_F_USER_STACK);
		k.kstack = bpf_get_stackid(ctx, &stacks1, 0);
	} else {
		k.ustack = bpf_get_stackid(ctx, &stacks0, BPF_F_USER_STACK);
		k.kstack = bpf_get_stackid(ctx, &stacks0, 0);
	}
	// -EFAULT: no user stack (a kernel thread), not a loss.
	if ((k.ustack < 0 && k.ustack != -14) || (k.kstack < 0 && k.kstack != -14))
		s->stack_errors++;

	u64 *cnt = bpf_map_lookup_elem(&samples, &k);
	if (cnt) {
		__sync_fetch_and_add(cnt, 1);
		return 0;
	}
	u64 one = 1;
	long err = bpf_map_update_elem(&samples, &k, &one, BPF_NOEXIST);
	if (err == -17 /* EEXIST: raced with another CPU */) {
		cnt = bpf_map_lookup_elem(&samples, &k);
		if (cnt)
			__sync_fetch_and_add(cnt, 1);
	} else if (err == -7 /* E2BIG */) {
		s->sample_map_full++;
	} else if (err) {
		s->map_errors++;
	}
	return 0;
}

SEC("perf_event")
int sample_clock(struct bpf_perf_event_data *ctx)
{
	return sample(ctx, 0);
}

SEC("perf_event")
int sample_miss(struct bpf_perf_event_data *ctx)
{
	return sample(ctx, 1);
}
