// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
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

// MAX_EVENTS is the number of counter slots: one PERF_EVENT_ARRAY per slot
// and one count per slot in every task record. It is sized so that the
// whole catalogue of any CPU model cacheheat knows fits at once (checked by
// collector's tests), so the slots never decide which events a recording
// may ask for; a PMU with fewer counters multiplexes them instead. User
// space takes the number from this object (the countersN maps), not from a
// copy of this constant.
#define MAX_EVENTS 40
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
// The slot whose enabled time stands for every slot's, or -1. A real PMU
// multiplexes in the kernel, which reports each counter's own enabled and
// running times. The simulated PMU (collector/simulated.go) rotates its
// software stand-ins from user space by disabling them, which stops their
// enabled clock too; there the enabled time is that of a counter that is
// never rotated, and running stays each stand-in's own.
const volatile s32 enabled_ref_slot = -1;

// The per-CPU counting events: one PERF_EVENT_ARRAY per event slot,
// indexed by CPU (max_entries is left to the loader, which sizes it to the
// possible CPUs). One map per slot, not one big array, because loaders
// clamp a perf event array to the number of CPUs.
#define COUNTER_MAP(n)                                   \
	struct {                                         \
		__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY); \
		__uint(key_size, sizeof(u32));           \
		__uint(value_size, sizeof(u32));         \
	} counters##n SEC(".maps");

// FOR_EACH_SLOT(X) expands X(0) .. X(MAX_EVENTS-1).
#define FOR_EACH_SLOT(X)                                                  \
	X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9)                 \
	X(10) X(11) X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19)       \
	X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29)       \
	X(30) X(31) X(32) X(33) X(34) X(35) X(36) X(37) X(38) X(39)

FOR_EACH_SLOT(COUNTER_MAP)

#define READ_SLOT(n) \
	case n:      \
		return bpf_perf_event_read_value(&counters##n, BPF_F_CURRENT_CPU, v, sizeof(*v));

// read_slot reads event slot i on this CPU.
static __always_inline long read_slot(u32 i, struct bpf_perf_event_value *v)
{
	switch (i) {
	FOR_EACH_SLOT(READ_SLOT)
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
	// exited is set when the thread exits. User space deletes the entry
	// once a later snapshot has taken the thread's last counts, so the map
	// holds live threads only (see collector's prune).
	u64 exited;
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
	// busy is set while account() updates this CPU's values. A hardware
	// sample arrives as an NMI and can interrupt on_switch half-way
	// through; the nested account() then leaves the values alone, and the
	// counts it would have taken are picked up whole by the next read.
	u64 busy;
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

// The task state field was renamed from state to __state in Linux 5.14.
// These two views of task_struct let CO-RE read whichever this kernel has
// (the ___suffix is dropped when matching kernel types).
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

struct task_struct___since514 {
	unsigned int __state;
} __attribute__((preserve_access_index));

#define TASK_RUNNING 0
#define TASK_DEAD 0x80

static __always_inline long task_state(struct task_struct *t)
{
	struct task_struct___since514 *n = (void *)t;
	struct task_struct___pre514 *o = (void *)t;

	if (bpf_core_field_exists(n->__state))
		return BPF_CORE_READ(n, __state);
	return BPF_CORE_READ(o, state);
}

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

// offcpu_reason_of classifies a task's state at its switch-out.
static __always_inline u32 offcpu_reason_of(long st)
{
	if (st == TASK_RUNNING)
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
	// One account() at a time per CPU: an NMI (a hardware sample) that
	// lands inside another leaves this CPU's values to it. NMIs do not
	// nest, and the interrupted run finishes before anything else runs on
	// this CPU, so a plain flag suffices.
	if (l->busy)
		return;
	l->busy = 1;
	barrier();
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
	// With a reference slot, its enabled delta is every slot's.
	u64 ref_de = 0;
	bool have_ref = false;
	if (enabled_ref_slot >= 0) {
		u32 r = enabled_ref_slot;
		struct bpf_perf_event_value rv = {};
		if (r < MAX_EVENTS && !read_slot(r, &rv)) {
			ref_de = rv.enabled - l->enabled[r];
			have_ref = true;
		}
	}
	struct cgroup_val *cv = attribute ? cgroup_of(t) : NULL;
	for (u32 i = 0; i < MAX_EVENTS; i++) {
		if (i >= nr_events)
			break;
		struct bpf_perf_event_value v = {};
		if (read_slot(i, &v))
			continue;
		u64 dc = v.counter - l->counter[i];
		u64 de = have_ref ? ref_de : v.enabled - l->enabled[i];
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
		if (cv) {
			// A fresh copy per iteration: otherwise the compiler walks a
			// pointer into *cv from before the null check, which the
			// verifier refuses.
			struct cgroup_val *c = cv;
			barrier_var(c);
			__sync_fetch_and_add(&c->counts[i], dc);
		}
	}
	l->primed = 1;
	barrier();
	l->busy = 0;
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
	long state = task_state(prev);
	account(prev, !(state & TASK_DEAD));

	if (is_target(prev)) {
		u32 tid = prev->pid;
		// A preempted task goes straight back onto the run queue: its run
		// queue latency starts now, as in runqlat.bt.
		if (state == TASK_RUNNING)
			bpf_map_update_elem(&wakeup_ts, &tid, &now, BPF_ANY);
		// By cgroup, the off-CPU reason rides in the timestamp's low
		// bits (OFFCPU_MASK ns of resolution), saving a map per switch.
		u64 off = by_cgroup ? (now & ~OFFCPU_MASK) | offcpu_reason_of(state) : now;
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
	// The thread's last switch is still to come: mark its record for
	// user space to delete after the next snapshot, not now.
	struct task_key k = {.tgid = t->tgid, .pid = t->pid};
	struct task_val *tv = bpf_map_lookup_elem(&tasks, &k);
	if (tv)
		tv->exited = 1;
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
