// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
//go:build ignore

// cacheheat's BPF side. At each context switch and each sample, the
// programs attribute what happened on the CPU since the last switch or
// sample to the task that was running, when it is a target. Software
// events come from what the scheduler and the task already keep (switch
// timestamps, the task's fault and migration counters, the switch itself),
// so a switch reads no perf counter; every other event (a hardware PMU's)
// is a per-CPU counting perf event (pid=-1) whose fd sits in a
// PERF_EVENT_ARRAY, read with bpf_perf_event_read_value, and only around
// target tasks. User space turns the cumulative values kept here into
// per-window deltas, so nothing is ever reset under a running program.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "cacheheat.h"
#include "helpers.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

// Sizes, modes and slot numbers shared with user space are in
// cacheheat.h. TASK_COMM_LEN is the kernel's (vmlinux.h).

// Set by user space before load: an enum mode.
const volatile u32 target_mode = MODE_ALL;
const volatile u64 target_cgroup = 0;
// The target cgroup's depth below the cgroup v2 root: a task is a target
// when its cgroup's ancestor at this depth is the target cgroup, so tasks
// in descendant cgroups (a container's, a service's children) count too.
const volatile u32 target_cgroup_level = 0;
const volatile u32 nr_events = 0;

// Where each slot's counts come from (enum slot_source), set by user space. The
// software events are counted as perf counts them for a task, without
// reading their perf counters:
// - cpu-clock: the time between the task's switch-in (or last sample) and
//   its switch-out, from bpf_ktime_get_ns;
// - context-switches: one per switch-out of the task. perf bumps that
//   counter after the sched_switch tracepoint, for the task switched out;
// - cpu-migrations: from the task's se.nr_migrations. A task is migrated
//   while it is off the CPU, and perf counts the migration when it next
//   runs, on the new CPU, once however many moves there were; so is it
//   here, at the end of that slice;
// - page-faults, major-faults: perf counts a fault where it enters the
//   fault handler, with registers; the task's min_flt and maj_flt also
//   count faults taken on its behalf without them (get_user_pages: mlock,
//   MAP_POPULATE), and not the ones that failed. So these two are still
//   read from their perf counters, but only at the end of a slice in
//   which the task's own fault counts moved: a slice without faults reads
//   nothing.
const volatile u32 slot_src[MAX_EVENTS] = {};
// The number of SRC_COUNTER slots, and the fault slots (bit i: slot i).
const volatile u32 nr_counters = 0;
const volatile u64 fault_slots = 0;
// The slot whose enabled time stands for every slot's, or -1. A real PMU
// multiplexes in the kernel, which reports each counter's own enabled and
// running times. The simulated PMU (collector/simulated.go) rotates its
// software stand-ins from user space by disabling them, which stops their
// enabled clock too; there the enabled time is that of a counter that is
// never rotated, and running stays each stand-in's own.
const volatile s32 enabled_ref_slot = -1;
// CLOCK_MONOTONIC when the recording was set up. A task started since has
// all its migrations counted; an older one from the first time it is seen.
const volatile u64 start_ns = 0;

// The key of last's one entry for the samplers (sample), in .rodata
// rather than on the stack: the kernel runs a perf_event program whose
// stack is 64 bytes or more on a private per-CPU stack of its own
// (kernel/bpf/verifier.c, bpf_enable_priv_stack; the x86-64 JIT points r9
// at it), a line that is cold on an idle CPU, and a sample of the idle
// task then touches no stack at all (BENCHMARKS.md, "The idle CPU's
// sample"). The tp_btf programs run on the kernel's stack (their JIT
// code addresses it by rbp), which a switch has just used.
static const u32 last_key = 0;

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
_Static_assert(MAX_EVENTS == 40, "FOR_EACH_SLOT lists MAX_EVENTS slots");
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

// Target processes (tgid) in MODE_PIDS, each an enum target_state;
// children of targets are added at fork so that a target's whole process
// tree is followed.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, u32);
	__type(value, u8);
} targets SEC(".maps");

// target_bytes mirrors targets for the switch path: byte tgid of the map's
// memory is tgid's enum target_state (0: none), eight to an element. An
// array lookup is a few inlined instructions where a hash lookup is a
// call and a hash; is_target runs for both tasks of every context switch
// and every wake-up, mostly for tasks that are not targets. User space
// sizes it to pid_max before load (one element outside MODE_PIDS) and
// writes its bytes through the map's memory, one byte at a time, so that
// it never overwrites a byte the programs set; tgids past its end fall
// back to targets. targets stays the set user space lists.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} target_bytes SEC(".maps");

// target_byte returns tgid's byte of target_bytes, or NULL past its end.
static __always_inline volatile u8 *target_byte(u32 tgid)
{
	u32 idx = tgid >> 3;
	u64 *w = bpf_map_lookup_elem(&target_bytes, &idx);
	if (!w)
		return NULL;
	return (volatile u8 *)w + (tgid & 7);
}

// target_state_of is tgid's enum target_state.
static __always_inline u8 target_state_of(u32 tgid)
{
	volatile u8 *b = target_byte(tgid);
	if (b)
		return *b;
	u8 *v = bpf_map_lookup_elem(&targets, &tgid);
	return v ? *v : 0;
}

// set_target sets tgid's state in both maps (0 when the set is full).
static __always_inline long set_target(u32 tgid, u8 state)
{
	long err = bpf_map_update_elem(&targets, &tgid, &state, BPF_ANY);
	volatile u8 *b = target_byte(tgid);
	if (!err && b)
		*b = state;
	return err;
}

struct task_key {
	u32 tgid;
	u32 pid;
};

struct task_val {
	u64 counts[MAX_EVENTS];
	char comm[TASK_COMM_LEN];
	u64 migrations; // se.nr_migrations when last counted
	// exited is set when the thread exits. User space deletes the entry
	// once a later snapshot has taken the thread's last counts, so the map
	// holds live threads only (see collector's prune).
	u64 exited;
};

// Scratch space for a new task record (task_entry).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct task_val);
} task_scratch SEC(".maps");

// Cumulative per-thread counts of the target's tasks.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, struct task_key);
	__type(value, struct task_val);
} tasks SEC(".maps");

struct last_val {
	// First, together, all that a sample of the idle task reads or writes
	// (sample): on an idle CPU every line it touches is cold, a few
	// hundred ns each in a guest, and most samples of a host-wide
	// recording are of idle CPUs. fires counts the sample programs' runs,
	// of any task (the achieved rate).
	u64 fires[SAMPLE_SLOTS];
	u64 sw_ts;
	u64 hf_task;
	u32 hf_pid;
	// busy is set while a switch (or an exec or exit) updates this CPU's
	// values. A hardware sample arrives as an NMI, and a cpu-clock sample
	// as an interrupt during exec and exit, and can land half-way through;
	// the sample then leaves the values alone (its stack is still taken),
	// and what it would have counted is picked up whole by the next
	// account.
	u32 busy;
	u64 faults_seen;
	// host_faults are this CPU's fault counters (the fault slots, in slot
	// order) as the cpu-clock sampler read them here, where reading needs
	// no interrupt, after a task faulted on this CPU (read_host_faults);
	// host_seen is faults_seen + 1 at that read, written after the values
	// and placed before them: user space's copy of this struct goes in
	// address order, so a copy that shows host_seen shows the values it
	// stands for. 0: never read.
	u64 host_seen;
	u64 host_faults[HOST_FAULTS];
	u64 counter[MAX_EVENTS];
	u64 enabled[MAX_EVENTS];
	u64 running[MAX_EVENTS];
	u64 ts;        // when the running task was switched in or last accounted
	u64 faults;    // its min_flt + maj_flt then
	u64 majfaults; // its maj_flt then
	u64 ref_enabled; // enabled time of enabled_ref_slot at the last read
	u32 pid;       // the running task (thread id); 0 until the first switch
	u32 counted;   // counter[] of the SRC_COUNTER slots was read for pid
	// own_faults: at the next account the fault slots count pid's own
	// fault counts since faults and majfaults (a replayed switch-in,
	// replay_in), not the perf counters, whose value at the switch-in was
	// never read; the counters are read then for a new baseline.
	u32 own_faults;
	// clk_off is bpf_ktime_get_ns() less this CPU's rq->clock where a
	// switch read both (the kernel had just updated rq->clock): the run
	// queue's clock now, at a sample, where rq->clock is up to a tick old
	// (replay_in). 0: not read yet.
	u64 clk_off;
	// The running target's switch-in, accounted later (switched_in): when
	// it was (0: done, or none to do) and how long it had waited on the
	// run queue's last part by the kernel's account (NO_RUNQ: not queued,
	// or not known).
	u64 in_ts;
	u64 in_q;
	// Fault slots whose counter[] is not the counter's value now (bit i:
	// slot i): faults of a task that is not a target moved them unread.
	u64 faults_stale;
	// busy_ns is the time this CPU ran any task but its idle task,
	// cumulative, summed at each switch and cpu-clock sample from sw_ts
	// (above), the last of them (a task that runs for seconds without a
	// switch still counts in the window it ran in): what cpu-clock per CPU
	// means in the report and the exporter (perf's per-CPU cpu-clock
	// counter also counts the idle task's time).
	u64 busy_ns;
	// What this CPU's software counters count, kept here so that user
	// space need not interrupt the CPU to read them while they can be
	// told (collector readCounters): switches is every context switch
	// (perf's context-switches), migrated_in every switch-in of a task
	// perf counts a migration for (its sched_migrated, cleared only after
	// this tracepoint), and faults_seen (above) moves whenever a task that
	// ran here took a fault (min_flt + maj_flt since hf_base, hf_pid's at
	// the last switch or cpu-clock sample; a task without a baseline moves
	// it by one). hf_task is hf_pid's task_struct, only ever read by
	// helper (note_faults).
	u64 switches;
	u64 migrated_in;
	u64 hf_base;
};

// What each CPU's running task and counters were at the last switch or
// sample.
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
	u64 samples[SAMPLE_SLOTS]; // samples of the target's tasks (their runs: last_val's fires)
	u64 stack_errors;
	u64 sample_map_full; // samples dropped: sample_ring was full
	u64 proc_map_full;
	u64 map_errors;
	// Writes to task records (their creation included), each counted
	// after it: user space walks the task map only when this moved since
	// its last walk (a walk visits every bucket; a recorder of idle
	// targets has nothing new to read).
	u64 task_writes;
	// Samples added to the others map, each counted after its add: user
	// space drains that map only when this moved (a drain starts with a
	// walk of every bucket, on a quiet host for nothing).
	u64 other_writes;
	// Targets (-p, command) that forked a new process or exec'd, each
	// counted after the target set was written: user space lists the set
	// and checks the targets' binaries only when this moved.
	u64 target_changes;
	// Switch-ins of targets the tracepoint did not show, replayed from the
	// kernel's account when the thread was next seen (replay_in), and
	// slices not counted around such switches: of a switch-in that could
	// not be replayed, up to then; of the task that left, when the replay
	// came from the miss sampler under -a; of a thread that came in and
	// left untraced, or whose switch-in's work was dropped, which the
	// kernel's count of its switch-ins shows (sched_info_wait).
	u64 unseen_in;
	u64 unseen_lost;
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

// Samples reach user space through one BPF ring buffer, never through a
// map that user space walks: a CPU sample carries its stacks' addresses
// (bpf_get_stack), an off-CPU sample the ids of its stacks in
// offcpu_stacks, and user space aggregates them. A full ring drops the
// sample and counts it (stats sample_map_full); the programs never wait.
// Its size is set by user space from the CPU count before load.
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} sample_ring SEC(".maps");

// The reader is woken only when the ring holds ring_wake_bytes (half of
// it, set by user space): otherwise it collects at the end of each
// window, so a recorder sleeps between windows however often samples
// come, and not at all when none came.
const volatile u64 ring_wake_bytes = 128 * 1024;

struct sample_rec {
	u32 pid; // tgid
	u32 tid;
	u32 cpu;
	u16 slot;
	u16 pad;
	// CPU samples: the bytes of kernel and then user stack addresses that
	// follow this header in the record (bpf_get_stack's output,
	// innermost first); ustack/kstack hold bpf_get_stack's errors.
	u32 ulen;
	u32 klen;
	// Off-CPU samples: ids in offcpu_stacks, -1: none; ustack OWN_USTACK:
	// the thread's last SLOT_OFFCPU_USTACK record. CPU samples: 0, or
	// bpf_get_stack's error for that stack.
	s32 ustack;
	s32 kstack;
	u32 gstack; // off-CPU only: key of the goroutine's stack in gostacks, 0: none
	u32 wait;   // off-CPU only: the switch-out's wait code (enum wait_bits)
	u64 value;  // 1 for a CPU sample; off-CPU: nanoseconds blocked, weighted
};

// stack_scratch's (and ustack_scratch's) entries: one for the samplers,
// one for on_switch's off-CPU user stacks (see sample).
#define SAMPLER_SCRATCH 0
#define SWITCH_SCRATCH 1

// A CPU sample is put together here and copied to the ring at its length.
// A record reserved at its largest (2 KiB) and written in place cost ~500
// ns more per sample than the old stack-map path (bench/cost.py,
// falseshare at 999 Hz): bpf_get_stack zero-fills the unused frames, and
// each record is 32 cache lines of cold ring memory. Here the zeroing hits
// this CPU's hot scratch and the ring gets only the frames (a few hundred
// bytes); a reserve's size must be a constant, so the copy is
// bpf_ringbuf_output.
struct stack_rec {
	struct sample_rec h;
	u64 frames[2 * MAX_STACK_DEPTH]; // the kernel stack, then the user stack
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2); // SAMPLER_SCRATCH, SWITCH_SCRATCH
	__type(key, u32);
	__type(value, struct stack_rec);
} stack_scratch SEC(".maps");

// ring_flags wakes the reader only past ring_wake_bytes (see there).
static __always_inline u64 ring_flags(void)
{
	return bpf_ringbuf_query(&sample_ring, BPF_RB_AVAIL_DATA) >= ring_wake_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

// wake_armed is set by user space after a window in which the target did
// nothing (a quiet window, collector/quiet.go): the recorder then takes no
// window until the first target event, which clears it and sends one
// SLOT_WAKE record that wakes the ring's reader at once. Set only then, so
// a busy target pays one load of it per switch-in and sample. Plain loads
// and stores: two CPUs may both send a record, and the reader takes one.
u32 wake_armed = 0;

static __noinline void wake_recorder(void)
{
	wake_armed = 0;
	struct sample_rec r = {.slot = SLOT_WAKE};
	// A full ring has woken its reader already; the next event tries again.
	if (bpf_ringbuf_output(&sample_ring, &r, sizeof(r), BPF_RB_FORCE_WAKEUP))
		wake_armed = 1;
}

// Off-CPU stacks, as BCC's offcputime: at a target thread's voluntary
// switch-out its user and kernel stacks are taken, and at its switch-in the
// time it was blocked is added to that stack pair under sample slot
// SLOT_OFFCPU, sent through sample_ring (the value is nanoseconds, not a
// count). The kernel stack goes to offcpu_stacks; the user stack is walked
// here and sent through sample_ring at once (offcpu_user_stack), where the
// switch-in's record follows it.
// Taking stacks costs a few microseconds, so each CPU takes them for one
// switch-out in k, chosen at random (never by timing, which would lock
// onto a periodic program), with k set every OFFCPU_PERIOD_NS so that a
// CPU takes at most about offcpu_stacks_per_sec stacks (none in idle
// waits, idle_wait). A sampled switch-out's time counts k times, so stack
// times are unbiased estimates; the exact blocked time of every voluntary
// switch-out is counted in offcpu_stats.
#define OFFCPU_PERIOD_NS 100000000ULL
// At least one switch-out in offcpu_min_k: taking stacks costs about ten
// times the rest of on_switch, so at low switch rates, where the rate
// alone would take every one, they would still dominate its mean cost.
const volatile u64 offcpu_min_k = 32;
const volatile u64 offcpu_stacks_per_sec = 50;

struct offcpu_start {
	u64 ts;
	s32 ustack;
	s32 kstack;
	u32 weight; // 1/chance of the stacks, in 1/OFFCPU_W1 units; 0: none
	u32 gstack;
	u64 last_ns; // how long the thread's previous block lasted
};

// The chance of taking a switch-out's stacks is the larger of 1/k and the
// thread's previous block over OFFCPU_SIZE_NS (1 from there on): the
// previous block predicts this one, and long blocks carry most of the
// blocked time. Sampled one in k alone, a Go runtime thread parked for a
// second, counted 32 times, once outweighed the rcu readers' lock waits;
// so one sample's time is bounded by about OFFCPU_SIZE_NS. A thread takes
// at most 1 / OFFCPU_SIZE_NS of them a second by size. The chance is known
// when the stacks are taken, and the time counts 1/chance times, so the
// stack times stay unbiased (Horvitz-Thompson). Chances by size are given
// at most offcpu_stacks_per_sec times a second per CPU; past that budget a
// switch-out's chance is 1/k again, still known when it is decided.
#define OFFCPU_SIZE_NS 100000000ULL
// An id for a stack not taken (a stack id is never negative; errors are
// -errno, and -EPERM is none of bpf_get_stackid's).
#define NO_STACK (-1)
#define OFFCPU_W1 1024
#define OFFCPU_P1 (1u << 20) // chances in 1/OFFCPU_P1 units

// The process that last woke a thread and its name, for peer waits
// (wait_in). on_waking writes it only when it changes: a thread woken by
// the same process as last time (a ping-pong's peer, a lock's other
// waiters) then costs its waker's CPU no write to a line the thread's CPU
// reads at the switch-in. It is never cleared by the thread: every
// wake-up passes sched_waking, so what it holds at a switch-in is the
// wake-up that ended the wait, or 0 when no task did: an interrupt (a
// timeout, a device) or a wake-up on an idle CPU.
struct waker {
	u32 tgid; // 0: none
	u32 unused;
	u64 comm[TASK_COMM_LEN / 8];
};

// What a target thread's next switch-in needs from its last wakeup and
// switch-out, in task-local storage: reaching it is a pointer chase, not a
// hash of the thread id, and the kernel frees it with the task. The
// timestamps are 0 when unset.
//
// The waker comes first. The kernel keeps the map's pointer right before
// a task's storage value (struct bpf_local_storage_elem: sdata, at byte
// 64 of it in the 6.18 BTF), and every lookup reads that pointer to check
// its hit, on_waking's on the waker's CPU included: the pointer and the
// value's first bytes share a cache line. The fields the thread's own CPU
// writes at each switch-out start 64 bytes after the waker, so no line
// holds both them and the waker or that pointer, however the element is
// aligned, and a wake-up that writes nothing reads only lines that
// neither CPU wrote since.
struct thread_state {
	// Written on the waker's CPU (on_waking), and only when it changes.
	struct waker waker;
	u8 apart[64];
	u64 wakeup_ts; // wakeup (or preemption): run queue latency starts
	// With runq_from_sched_info, in place of wakeup_ts: the kernel's
	// sched_info.run_delay and pcount as they stood after the thread's
	// last counted switch-in (sched_info_wait); pcount 0: not known.
	u64 run_delay;
	u64 pcount;
	u64 offcpu_ts; // switch-out; by cgroup, the reason in the low bits
	// The thread's min_flt + maj_flt and maj_flt at that switch-out: a
	// switch-in the tracepoint did not show starts its faults from them
	// (replay_in).
	u64 out_faults;
	u64 out_majfaults;
	struct offcpu_start off;
	u32 wait; // the last switch-out's wait code (enum wait_bits)
	// go_gen + 1 when the thread's process was last found not to be a Go
	// program (go_procs), 0 before: see go_parked.
	u32 not_go;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct thread_state);
} thread_state SEC(".maps");

// Go: a goroutine blocked on a lock, a channel or a sleep parks in the Go
// scheduler, and its thread's stack at switch-out is the scheduler's own
// (park_m, schedule, stoplockedm, notesleep, futex) from a fresh frame
// chain on the g0 stack: where the goroutine blocked is not on it. When
// the goroutine is locked to its thread (runtime.LockOSThread), the
// thread's blocked time is that goroutine's, so its stack is walked here
// from the registers the scheduler saved for it (g.sched), by frame
// pointers. User space fills go_procs with the runtime's struct offsets
// read from the binary's DWARF, for processes that are Go programs.
struct go_offsets {
	u32 g_m;       // runtime.g.m
	u32 g_sched;   // runtime.g.sched (a gobuf)
	u32 m_g0;      // runtime.m.g0
	u32 m_lockedg; // runtime.m.lockedg
	u32 gobuf_pc;
	u32 gobuf_bp;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u32); // tgid
	__type(value, struct go_offsets);
} go_procs SEC(".maps");

struct go_stack {
	u64 pc[GO_STACK_DEPTH];
};

// Goroutine stacks by a hash of their PCs (never 0).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, u32);
	__type(value, struct go_stack);
} gostacks SEC(".maps");

// Scratch space for one goroutine stack (too big for the BPF stack).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct go_stack);
} gostack_scratch SEC(".maps");

// go_gen counts user space's changes of go_procs (collector/goruntime.go),
// each after the change. A thread whose process has no entry keeps that
// answer in its state (not_go) with the generation it was found at, so
// that the switch-outs of programs that are not Go, most of them, look
// go_procs up once a change rather than once a switch-out (20-30 ns of
// on_switch's switch-out under a pipe ping-pong on the 2-CPU VM). An exec
// deletes its process's entry here without a new generation: the entry
// can only go, and a missing one is looked up (entries are not kept in
// the state).
u32 go_gen = 0;

// go_parked says whether task t, a thread of a Go program, is parked in
// the Go scheduler (its g is its M's g0) and sets *lg to the goroutine
// locked to it (0: none, an idle M waiting for work); s is t's state, or
// NULL. false: not a Go program, not in the scheduler (a goroutine
// blocked in a system call holds its thread), or the runtime's memory
// could not be read.
static __always_inline bool go_parked(struct task_struct *t, struct thread_state *s, struct go_offsets **op, u64 *lg)
{
	u32 tgid = t->tgid;
	// Read before the lookup: a lookup that follows a change of go_procs
	// sees the change once the generation it read says so.
	u32 gen = go_gen;
	if (s && s->not_go == gen + 1)
		return false;
	struct go_offsets *o = bpf_map_lookup_elem(&go_procs, &tgid);
	if (!o) {
		if (s)
			s->not_go = gen + 1;
		return false;
	}
	u64 fs = t->thread.fsbase; // a plain load: t is a BTF pointer
	u64 g = 0, m = 0, g0 = 0;
	if (!fs || bpf_probe_read_user(&g, sizeof(g), (void *)(fs - 8)) || !g)
		return false;
	if (bpf_probe_read_user(&m, sizeof(m), (void *)(g + o->g_m)) || !m)
		return false;
	if (bpf_probe_read_user(&g0, sizeof(g0), (void *)(m + o->m_g0)) || g0 != g)
		return false;
	if (bpf_probe_read_user(lg, sizeof(*lg), (void *)(m + o->m_lockedg)))
		return false;
	*op = o;
	return true;
}

// go_locked_stack walks the stack of the goroutine locked to task t's
// thread and returns its key in gostacks, or 0. g is read from the
// thread's TLS (fs:-8 on linux/amd64) and checked to be its M's g0, the
// goroutine the scheduler runs on while the thread sleeps.
static __always_inline u32 go_locked_stack(struct task_struct *t)
{
	struct go_offsets *o = NULL;
	u64 lg = 0, pc = 0, bp = 0;
	if (!go_parked(t, NULL, &o, &lg) || !lg || !o)
		return 0;
	u64 sched = lg + o->g_sched;
	if (bpf_probe_read_user(&pc, sizeof(pc), (void *)(sched + o->gobuf_pc)) ||
	    bpf_probe_read_user(&bp, sizeof(bp), (void *)(sched + o->gobuf_bp)) || !pc)
		return 0;
	u32 zero = 0;
	struct go_stack *st = bpf_map_lookup_elem(&gostack_scratch, &zero);
	if (!st)
		return 0;
	u32 h = 2166136261u; // FNV-1a over the PCs
	st->pc[0] = pc;
	h = (h ^ (u32)pc) * 16777619u;
	h = (h ^ (u32)(pc >> 32)) * 16777619u;
	for (int i = 1; i < GO_STACK_DEPTH; i++) {
		u64 frame[2] = {};
		if (!bp || bpf_probe_read_user(frame, sizeof(frame), (void *)bp) || !frame[1]) {
			st->pc[i] = 0;
			break;
		}
		st->pc[i] = frame[1];
		h = (h ^ (u32)frame[1]) * 16777619u;
		h = (h ^ (u32)(frame[1] >> 32)) * 16777619u;
		bp = frame[0];
	}
	if (!h)
		h = 1;
	bpf_map_update_elem(&gostacks, &h, st, BPF_NOEXIST);
	return h;
}

// Off-CPU stacks have their own stack map, never cleared while recording:
// a thread may stay blocked across many windows, and its stack id must
// still name its stack when it wakes. A full or colliding map shows as
// stack errors.
struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 8192);
	__uint(key_size, sizeof(u32));
	__uint(value_size, MAX_STACK_DEPTH * sizeof(u64));
} offcpu_stacks SEC(".maps");

struct offcpu_stat {
	u64 blocked_ns; // blocked time of every voluntary switch-out
	u64 sampled_ns; // the weighted time of those with stacks
	u64 stack_errors;
	u64 map_errors;
	u64 period_start; // this CPU's sampling period
	u64 period_outs;  // voluntary switch-outs in it
	u64 k;            // one in k switch-outs gets stacks (0: not set yet)
	u64 period_sized; // stacks taken for their size in this period
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct offcpu_stat);
} offcpu_stats SEC(".maps");

// The target's off-CPU time by wait code: every switch-out's time to its
// switch-in (exact, not sampled), with its log2 histogram, per CPU,
// cumulative. The codes seen are few (the system calls a program blocks
// in), so a hash of them stays small; a full map counts map errors.
struct wait_val {
	u64 ns;
	u64 count;
	u64 hist[HIST_BUCKETS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, u32);
	__type(value, struct wait_val);
} waits SEC(".maps");

// Who woke a target thread out of a wait on another process (a pipe, a
// Unix socket, a child, a futex): its blocked time by the waker, for the
// finding that names what a program waited on. User space takes and
// deletes the entries each window.
struct peer_key {
	u32 tgid;       // the blocked process
	u32 waker_tgid; // the process that woke it
	u32 wait;       // the wait code
	char waker_comm[TASK_COMM_LEN];
};

struct peer_val {
	u64 ns;
	u64 count;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct peer_key);
	__type(value, struct peer_val);
} peers SEC(".maps");

// cpu-clock samples of tasks that are not targets, by process: who else
// used the CPUs (a noisy neighbour). User space drains it each window.
struct other_key {
	u32 tgid;
	char comm[TASK_COMM_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct other_key);
	__type(value, u64);
} others SEC(".maps");

static __always_inline void other_sample(struct stats_val *s, struct task_struct *t)
{
	struct other_key k = {.tgid = t->tgid};
	if (t->pid == 0)
		return; // idle
	bpf_probe_read_kernel_str(k.comm, sizeof(k.comm), t->group_leader->comm);
	static const u64 zero;
	long err;
	u64 *n = lookup_or_try_init(&others, &k, &zero, &err);
	if (!n) {
		// Full, or drained between the insert and the lookup: this
		// sample of who else is lost, and counted.
		s->map_errors++;
		return;
	}
	__sync_fetch_and_add(n, 1);
	s->other_writes++;
}

// The task state field was renamed from state to __state in Linux 5.14.
// These two views of task_struct let CO-RE read whichever this kernel has
// (the ___suffix is dropped when matching kernel types).
struct task_struct___pre514 {
	long state;
} __attribute__((preserve_access_index));

struct task_struct___since514 {
	unsigned int __state;
} __attribute__((preserve_access_index));

// Task state bits, from include/linux/sched.h. They are macros, not
// types, so they are in neither BTF nor vmlinux.h and CO-RE cannot
// relocate them (it relocates fields, types and enum values); what CO-RE
// can do for the state, task_state below does. The values have not
// changed since Linux 4.14, which moved TASK_DEAD from 0x40 to 0x80; the
// programs need 5.11 or later (bpf_get_current_task_btf).
#define TASK_RUNNING 0x0000
#define TASK_INTERRUPTIBLE 0x0001
#define TASK_UNINTERRUPTIBLE 0x0002
#define TASK_DEAD 0x0080
#define TASK_NOLOAD 0x0400

static __always_inline long task_state(struct task_struct *t)
{
	struct task_struct___since514 *n = (void *)t;
	struct task_struct___pre514 *o = (void *)t;

	// A plain load, not BPF_CORE_READ: t is a BTF pointer (a tp_btf
	// argument), so the verifier turns it into a faulting load, without a
	// helper call; on_switch runs at every context switch. Before 5.14
	// (rare now) a helper reads the old field.
	if (bpf_core_field_exists(n->__state))
		return n->__state;
	return BPF_CORE_READ(o, state);
}

// Inode types (include/uapi/linux/stat.h) and socket families
// (include/linux/socket.h): macros, so in neither BTF nor vmlinux.h.
#define S_IFMT 00170000
#define S_IFSOCK 0140000
#define S_IFREG 0100000
#define S_IFBLK 0060000
#define S_IFDIR 0040000
#define S_IFCHR 0020000
#define S_IFIFO 0010000
#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10
#define PF_KTHREAD 0x00200000
#define ENOSYS_RET ((unsigned long)-38)

// bpf_rdonly_cast (a kfunc, Linux 6.2 and later) turns a pointer the
// verifier cannot type (one read from memory by helper) into a typed
// read-only one, whose fields are then plain faulting loads instead of a
// helper call each. have_rdonly_cast is set before load when the kernel
// has it; without it the verifier drops that code and the helpers read.
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;
const volatile bool have_rdonly_cast = false;

// bpf_task_from_pid and bpf_task_release (kfuncs, Linux 6.2 and later):
// have_task_from_pid is set before load when the kernel has them.
extern struct task_struct *bpf_task_from_pid(s32 pid) __ksym __weak;
extern void bpf_task_release(struct task_struct *p) __ksym __weak;
const volatile bool have_task_from_pid = false;

#define NR_FUTEX 202
#define FUTEX_WAIT 0
#define FUTEX_WAIT_BITSET 9
#define FUTEX_PRIVATE_FLAG 128
#define FUTEX_CMD_MASK 127

// futex_join says whether thread t's futex wait (regs: its system call's
// arguments) is glibc's pthread_join: a shared FUTEX_WAIT or
// FUTEX_WAIT_BITSET (no FUTEX_PRIVATE_FLAG) for a word that holds the TID
// of another live thread of the same process, which the kernel clears and
// wakes when that thread exits (CLONE_CHILD_CLEARTID). glibc's own frames
// are not on the stack (it is built without frame pointers: the walk
// stops at __futex_abstimed_wait_common), and a thread waiting for its
// workers to finish was then taken for a lock's waiter. Mutexes, rwlocks
// and condition variables of one process wait on private futexes.
static __always_inline bool futex_join(struct task_struct *t, struct pt_regs *regs)
{
	u32 op = regs->si;
	u32 tid = regs->dx;
	u32 cmd = op & FUTEX_CMD_MASK;
	if (!have_task_from_pid || (op & FUTEX_PRIVATE_FLAG) || (cmd != FUTEX_WAIT && cmd != FUTEX_WAIT_BITSET) ||
	    !tid || tid == t->pid)
		return false;
	struct task_struct *j = bpf_task_from_pid(tid);
	if (!j)
		return false;
	bool same = j->tgid == t->tgid;
	bpf_task_release(j);
	return same;
}

// fd_kind_of says what file descriptor fd of task t is (enum fd_kind).
static __always_inline u32 fd_kind_of(struct task_struct *t, u64 fd)
{
	// Plain loads as far as the descriptor array (t is a BTF pointer, as
	// in task_state). The array of pointers is not a type the verifier
	// follows: its slot is typed by a cast (any kernel struct that starts
	// with a pointer serves; llist_node does), or read by helper, which
	// cost 40 ns more a switch-out under the ping-pong on the 2-CPU VM
	// (BENCHMARKS.md, "Twenty-first session").
	struct fdtable *fdt = t->files->fdt;
	if (!fdt || fd >= fdt->max_fds)
		return FD_BAD;
	struct file **arr = fdt->fd;
	struct file *f = NULL;
	if (!arr)
		return FD_BAD;
	if (have_rdonly_cast) {
		struct llist_node *slot = bpf_rdonly_cast(&arr[fd & 0xffffff], bpf_core_type_id_kernel(struct llist_node));
		f = (struct file *)slot->next;
	} else if (bpf_probe_read_kernel(&f, sizeof(f), &arr[fd & 0xffffff])) {
		return FD_BAD;
	}
	if (!f)
		return FD_BAD;
	u32 mode;
	if (have_rdonly_cast) {
		f = bpf_rdonly_cast(f, bpf_core_type_id_kernel(struct file));
		mode = f->f_inode->i_mode & S_IFMT;
	} else {
		mode = BPF_CORE_READ(f, f_inode, i_mode) & S_IFMT;
	}
	switch (mode) {
	case S_IFREG:
		return FD_REG;
	case S_IFDIR:
		return FD_DIR;
	case S_IFCHR:
		return FD_CHR;
	case S_IFBLK:
		return FD_BLK;
	case S_IFIFO:
		return FD_FIFO;
	case S_IFSOCK: {
		struct socket *sock;
		u16 family;
		if (have_rdonly_cast) {
			sock = bpf_rdonly_cast(f->private_data, bpf_core_type_id_kernel(struct socket));
			family = sock->sk->__sk_common.skc_family;
		} else {
			sock = BPF_CORE_READ(f, private_data);
			family = BPF_CORE_READ(sock, sk, __sk_common.skc_family);
		}
		if (family == AF_UNIX)
			return FD_SOCK_UNIX;
		if (family == AF_INET || family == AF_INET6)
			return FD_SOCK_INET;
		return FD_SOCK_OTHER;
	}
	case 0:
		return FD_ANON;
	}
	return FD_NONE;
}

// takes_fd says whether x86-64 system call nr takes a file descriptor as
// its first argument and can block on it: the reads, writes, socket calls,
// syncs and file locks whose descriptor tells a pipe from a socket from a
// disk file.
static __always_inline bool takes_fd(u64 nr)
{
	switch (nr) {
	case 0: case 1: case 17: case 18: case 19: case 20: // read write pread64 pwrite64 readv writev
	case 295: case 296: case 327: case 328:             // preadv pwritev preadv2 pwritev2
	case 40: case 275: case 276: case 278:              // sendfile splice tee vmsplice
	case 42: case 43: case 288:                         // connect accept accept4
	case 44: case 45: case 46: case 47: case 299: case 307: // sendto recvfrom sendmsg recvmsg recvmmsg sendmmsg
	case 72: case 73: case 74: case 75: case 277:       // fcntl flock fsync fdatasync sync_file_range
	case 16:                                            // ioctl
		return true;
	}
	return false;
}

// wait_code says what the kernel knows of target thread t leaving the CPU
// in state st (enum wait_bits): the system call it blocked in and what its
// descriptor is, whether it waits for block I/O (in_iowait, set by
// io_schedule), its state, and for a Go thread whether it is an idle M.
// A thread in a system call has ax = -ENOSYS in its saved user registers
// until the call returns (x86-64 entry code); an exception (a page fault)
// saves the user's ax and an error code in orig_ax instead.
static __always_inline u32 wait_code(struct task_struct *t, struct thread_state *s, long st)
{
	u32 code = 0;
	if (st & TASK_UNINTERRUPTIBLE)
		code |= WAIT_UNINTERRUPTIBLE;
	if (st & TASK_NOLOAD)
		code |= WAIT_NOLOAD;
	if (BPF_CORE_READ_BITFIELD(t, in_iowait))
		code |= WAIT_IOWAIT;
	if (t->flags & PF_KTHREAD)
		return code | WAIT_KTHREAD | WAIT_NR_NONE;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(t);
	if (!regs)
		return code | WAIT_NR_NONE;
	u64 nr = regs->orig_ax;
	if (regs->ax != ENOSYS_RET || nr >= WAIT_NR_NONE) {
		code |= WAIT_NR_NONE;
	} else {
		code |= nr;
		if (takes_fd(nr))
			code |= fd_kind_of(t, regs->di) << WAIT_FD_SHIFT;
		else if (nr == NR_FUTEX && futex_join(t, regs))
			code |= WAIT_JOIN;
	}
	struct go_offsets *o = NULL;
	u64 lg = 0;
	if (go_parked(t, s, &o, &lg) && !lg)
		code |= WAIT_GO_IDLE;
	return code;
}

// Per-cgroup aggregation, for the exporter: set before load, and off for a
// recording, where the verifier then drops the code below as dead. Counts,
// run-queue latency and off-CPU time are summed by the task's cgroup v2 id
// (the kernfs node id, which is the cgroup directory's inode number), so
// tasks that exit between two reads still count for their cgroup. In this
// mode there are no stacks; the per-thread records stay, for each thread's
// baselines (and are pruned as threads exit), but the collector builds no
// processes from them.
const volatile bool by_cgroup = false;

// By cgroup, the off-CPU reason (enum offcpu_reason) rides in the low bits
// of the switch-out timestamp.
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
	static const struct cgroup_val zero_cv;
	long err;
	struct cgroup_val *cv = lookup_or_try_init(&cgroups, &id, &zero_cv, &err);
	if (!cv && err) {
		u32 zero = 0;
		u64 *full = bpf_map_lookup_elem(&cgroup_full, &zero);
		if (full)
			(*full)++;
	}
	return cv;
}

// offcpu_reason_of classifies a task's state at its switch-out.
static __always_inline u32 offcpu_reason_of(long st)
{
	if (st == TASK_RUNNING)
		return OFFCPU_PREEMPTED;
	if (st & TASK_NOLOAD)
		return OFFCPU_IDLE;
	if (st & TASK_INTERRUPTIBLE)
		return OFFCPU_SLEEP;
	if (st & TASK_UNINTERRUPTIBLE)
		return OFFCPU_BLOCKED;
	return OFFCPU_OTHER;
}

static __always_inline struct stats_val *get_stats(void)
{
	u32 zero = 0;
	return bpf_map_lookup_elem(&stats, &zero);
}

// task_written counts a write to a task record (stats task_writes).
static __always_inline void task_written(void)
{
	struct stats_val *s = get_stats();
	if (s)
		s->task_writes++;
}

static __always_inline struct last_val *get_last(void)
{
	u32 zero = 0;
	return bpf_map_lookup_elem(&last, &zero);
}

static __always_inline bool is_target(struct task_struct *t)
{
	u32 tgid = t->tgid;

	if (t->pid == 0)
		return false; // the idle task is no one's target
	switch (target_mode) {
	case MODE_ALL:
		return true;
	case MODE_PIDS:
		return target_state_of(tgid) == TARGET_YES;
	case MODE_CGROUP:
		return in_cgroup_subtree(t, target_cgroup, target_cgroup_level);
	}
	return false;
}

// task_entry returns target task t's counts, creating them (with its name)
// the first time t is seen; a rename updates the name (on_rename).
static __always_inline struct task_val *task_entry(struct task_struct *t)
{
	struct task_key k = {.tgid = t->tgid, .pid = t->pid};
	struct task_val *tv = bpf_map_lookup_elem(&tasks, &k);
	if (tv)
		return tv;
	// A new record is built in scratch space: with MAX_EVENTS counts it is
	// too big for the BPF stack.
	u32 zero = 0;
	struct task_val *init = bpf_map_lookup_elem(&task_scratch, &zero);
	if (!init)
		return NULL;
	__builtin_memset(init, 0, sizeof(*init));
	// A task started during the recording has all its migrations counted;
	// an older one from now on.
	if (t->start_time < start_ns)
		init->migrations = t->se.nr_migrations;
	bpf_probe_read_kernel_str(init->comm, sizeof(init->comm), t->comm);
	long err = bpf_map_update_elem(&tasks, &k, init, BPF_NOEXIST);
	if (!err)
		task_written();
	if (err && err != -EEXIST) {
		struct stats_val *s = get_stats();
		if (s) {
			if (err == -E2BIG) // the map is full
				s->proc_map_full++;
			else
				s->map_errors++;
		}
		return NULL;
	}
	return bpf_map_lookup_elem(&tasks, &k);
}

// busy_to adds to this CPU's busy time the time task t, running on it,
// ran since the last switch or accounting (t's time is accounted at the
// same points, so that under -a the two agree window by window).
static __always_inline void busy_to(struct last_val *l, struct task_struct *t, u64 now)
{
	if (l->sw_ts && t->pid && now > l->sw_ts)
		l->busy_ns += now - l->sw_ts;
	l->sw_ts = now;
}

// unseen_faults is what faults_seen moves by when task t runs here but
// hf_task was the last task seen on this CPU: it left through a switch
// the tracepoint did not show. Some kernels do not trace every switch:
// the 6.18 Firecracker guest these numbers come from never shows its
// agent's tokio-rt-worker threads switching out, while perf counts those
// switches (`perf stat -a -e context-switches -e sched:sched_switch`:
// 1,319 against 1,267 in 20 s, 50 of them switch-ins of those threads).
// The faults are known when t never faulted (the idle task, most kernel
// threads: their count is 0, so none were missed since t came in) and
// hf_task's own count still reads as its baseline (the task may be gone
// and its memory reused: its pid must match too); otherwise one, which
// only makes user space read the counters.
static __noinline u64 unseen_faults(struct last_val *l, struct task_struct *t)
{
	struct task_struct *h = (struct task_struct *)l->hf_task;
	if (t->min_flt + t->maj_flt || !h)
		return 1;
	if (BPF_CORE_READ(h, pid) != l->hf_pid)
		return 1;
	u64 f = BPF_CORE_READ(h, min_flt) + BPF_CORE_READ(h, maj_flt);
	return f == l->hf_base ? 0 : 1;
}

// note_faults moves faults_seen by the faults task t, running here, took
// since its baseline, and makes its fault count now the baseline. A task
// other than the baseline's means a switch the tracepoint did not show:
// it is counted, as perf counts it (unseen_faults).
static __always_inline void note_faults(struct last_val *l, struct task_struct *t)
{
	u64 f = t->min_flt + t->maj_flt;
	if (l->hf_pid == t->pid) {
		l->faults_seen += f - l->hf_base;
	} else if (l->hf_task) {
		l->switches++;
		l->faults_seen += unseen_faults(l, t);
	} else {
		l->faults_seen++; // the CPU's first note: no baseline yet
	}
	l->hf_pid = t->pid;
	l->hf_base = f;
	l->hf_task = (u64)t;
}

// switch_counts counts the switch from prev to next as perf's per-CPU
// software counters do (see struct last_val).
static __always_inline void switch_counts(struct last_val *l, struct task_struct *prev, struct task_struct *next)
{
	l->switches++;
	if (bpf_core_field_exists(next->sched_migrated) && BPF_CORE_READ_BITFIELD(next, sched_migrated))
		l->migrated_in++;
	note_faults(l, prev);
	l->hf_pid = next->pid;
	l->hf_base = next->min_flt + next->maj_flt;
	l->hf_task = (u64)next;
}

// read_host_faults reads this CPU's fault counters in place (see struct
// last_val): user space then tells the CPU's software group from them and
// the switch counts, where it would otherwise read the group from another
// CPU, which interrupts this one (collector readCounters). Only after a
// fault was noted here since the last such read: at most once a sample
// period.
static __noinline void read_host_faults(struct last_val *l)
{
	u32 n = 0;
	for (u32 i = 0; i < MAX_EVENTS; i++) {
		if (i >= nr_events)
			break;
		if (!(fault_slots & (1ull << i)))
			continue;
		struct bpf_perf_event_value v = {};
		if (n >= HOST_FAULTS || read_slot(i, &v))
			return;
		l->host_faults[n++] = v.counter;
	}
	barrier();
	l->host_seen = l->faults_seen + 1;
}

// read_host_faults_due reads this CPU's fault counters in place when a
// fault was noted here since the last such read (for the cpu-clock
// sampler, on every path through it).
static __always_inline void read_host_faults_due(struct last_val *l)
{
	if (fault_slots && l->host_seen != l->faults_seen + 1)
		read_host_faults(l);
}

static __always_inline bool is_fault_src(u32 src)
{
	return src == SRC_FAULT || src == SRC_MAJFAULT;
}

// take_over starts this CPU's accounting for task t from now: its clock and
// fault counts; for a target with counters, also the perf counters of the
// SRC_COUNTER slots, and those of the fault slots that are stale.
static __always_inline void take_over(struct last_val *l, struct task_struct *t, u64 now, bool target)
{
	l->pid = t->pid;
	l->ts = now;
	l->faults = t->min_flt + t->maj_flt;
	l->majfaults = t->maj_flt;
	l->counted = 0;
	l->own_faults = 0;
	l->in_ts = 0;
	if (!target || (!nr_counters && !l->faults_stale))
		return;
	for (u32 i = 0; i < MAX_EVENTS; i++) {
		if (i >= nr_events)
			break;
		u32 src = slot_src[i];
		if (src != SRC_COUNTER && !(is_fault_src(src) && (l->faults_stale & (1ull << i))))
			continue;
		struct bpf_perf_event_value v = {};
		if (read_slot(i, &v))
			continue;
		l->counter[i] = v.counter;
		l->enabled[i] = v.enabled;
		l->running[i] = v.running;
		l->faults_stale &= ~(1ull << i);
	}
	l->counted = nr_counters != 0;
	if (enabled_ref_slot >= 0) {
		struct bpf_perf_event_value rv = {};
		if (!read_slot(enabled_ref_slot, &rv))
			l->ref_enabled = rv.enabled;
	}
}

// leave notes that task t, not a target, leaves the CPU: the faults it
// took moved the fault counters past their last read.
static __always_inline void leave(struct last_val *l, struct task_struct *t)
{
	if (l->pid != t->pid || t->min_flt + t->maj_flt != l->faults)
		l->faults_stale = fault_slots;
}

// account adds to target task t, the task running on this CPU, what this
// CPU counted since t was switched in or last accounted, and returns its
// counts. switch_out is 1 when t is leaving the CPU (the switch is
// counted), 0 otherwise.
static __always_inline struct task_val *account(struct last_val *l, struct task_struct *t, u64 now, u64 switch_out)
{
	if (l->pid != t->pid) {
		// t started running before this CPU's first switch or sample
		// (nothing to attribute yet), or came in through a switch the
		// tracepoint did not show that could not be replayed (replay_in).
		l->faults_stale = fault_slots;
		return NULL;
	}
	struct task_val *tv = task_entry(t);
	u32 zero = 0;
	struct totals_val *tot = bpf_map_lookup_elem(&target_totals, &zero);
	u64 faults = t->min_flt + t->maj_flt;
	u64 majfaults = t->maj_flt;
	u64 migrations = t->se.nr_migrations;
	// perf counts a migration when the task next runs, once however many
	// times it was moved while waiting: so one per slice that follows a
	// move.
	u64 mig = 0;
	if (tv) {
		mig = migrations != tv->migrations;
		tv->migrations = migrations;
	}
	// With a reference slot, its enabled delta is every counter slot's.
	u64 ref_de = 0;
	bool have_ref = false;
	if (enabled_ref_slot >= 0 && l->counted) {
		struct bpf_perf_event_value rv = {};
		if (!read_slot(enabled_ref_slot, &rv)) {
			ref_de = rv.enabled - l->ref_enabled;
			l->ref_enabled = rv.enabled;
			have_ref = true;
		}
	}
	struct cgroup_val *cv = cgroup_of(t);
	for (u32 i = 0; i < MAX_EVENTS; i++) {
		if (i >= nr_events)
			break;
		u64 dc = 0;
		u32 src = slot_src[i];
		switch (src) {
		case SRC_CLOCK:
			dc = now - l->ts;
			break;
		case SRC_SWITCH:
			dc = switch_out;
			break;
		case SRC_MIGRATION:
			dc = mig;
			break;
		default: {
			// A fault slot is read only when t faulted in this slice, or
			// to start its baseline after a replayed switch-in.
			if (src == SRC_FAULT && faults == l->faults && !l->own_faults)
				break;
			if (src == SRC_MAJFAULT && majfaults == l->majfaults && !l->own_faults)
				break;
			if (src == SRC_COUNTER && !l->counted)
				continue;
			struct bpf_perf_event_value v = {};
			if (read_slot(i, &v))
				continue;
			bool stale = is_fault_src(src) && (l->faults_stale & (1ull << i));
			l->faults_stale &= ~(1ull << i);
			dc = v.counter - l->counter[i];
			if (is_fault_src(src) && l->own_faults) {
				dc = src == SRC_FAULT ? faults - l->faults : majfaults - l->majfaults;
				stale = false;
			}
			u64 de = have_ref && src == SRC_COUNTER ? ref_de : v.enabled - l->enabled[i];
			u64 dr = v.running - l->running[i];
			l->counter[i] = v.counter;
			l->enabled[i] = v.enabled;
			l->running[i] = v.running;
			if (stale)
				continue; // the baseline is gone: a new one from now
			// Multiplexed counters are scaled by their enabled/running
			// times, as perf does.
			if (dr && dr < de)
				dc = dc * de / dr;
		}
		}
		// Only this CPU writes its own total, and t runs on one CPU at a
		// time: plain adds.
		if (tv)
			tv->counts[i] += dc;
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
	l->ts = now;
	l->faults = faults;
	l->majfaults = majfaults;
	l->own_faults = 0;
	if (tv)
		task_written();
	return tv;
}

// thread_of returns target thread t's state, created on first use. NULL
// only when the kernel refuses (out of memory, or task storage busy on this
// CPU in a nested program): that switch's latencies go uncounted, and are
// counted as a map error.
static __always_inline struct thread_state *thread_of(struct task_struct *t)
{
	struct thread_state *s = bpf_task_storage_get(&thread_state, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!s) {
		struct stats_val *st = get_stats();
		if (st)
			st->map_errors++;
	}
	return s;
}

// take returns and clears a timestamp.
static __always_inline u64 take(u64 *ts)
{
	u64 v = *ts;
	*ts = 0;
	return v;
}

// Run-queue latency, from the kernel's own account when it keeps one
// (CONFIG_SCHED_INFO: task->sched_info, what /proc/PID/schedstat reports)
// and a task leads to its CPU's run queue (CONFIG_FAIR_GROUP_SCHED:
// se.cfs_rq->rq); user space checks the kernel's BTF and sets
// runq_from_sched_info. Then sched_wakeup and sched_wakeup_new have no
// program, and a wake-up costs one program (on_waking) instead of two;
// otherwise on_wakeup takes the wake-up's time, as runqlat.bt does.
const volatile bool runq_from_sched_info = false;

// In last_val.in_q: NO_RUNQ, the thread switching in was not queued, or its
// wait is not known; REPLAYED_RUNQ, its switch-in was not seen (replay_in).
#define NO_RUNQ (~0ULL)
#define REPLAYED_RUNQ (~1ULL)

// runq_in is how long target thread t, switching in now on this CPU (l),
// waited on the run queue there by the kernel's account, or NO_RUNQ.
// sched_switch fires before the kernel adds this wait to its account
// (sched_info_switch, in context_switch): last_queued is still the run
// queue's clock when t was queued, and rq->clock is the clock the kernel
// then closes the wait with, so the two agree to the nanosecond. Only t's
// own fields and this CPU's run queue are read: the thread's state is not
// touched at a switch-in (switched_in). rq->clock was just updated, so its
// offset from the monotonic clock is kept for replay_in.
static __always_inline u64 runq_in(struct last_val *l, struct task_struct *t, u64 now)
{
	if (!runq_from_sched_info)
		return NO_RUNQ;
	u64 queued = t->sched_info.last_queued;
	if (!queued)
		return NO_RUNQ;
	u64 clock = t->se.cfs_rq->rq->clock;
	l->clk_off = now - clock;
	if (clock < queued)
		return NO_RUNQ;
	return clock - queued;
}

// sched_info_wait sets *d to how long target thread t waited on the run
// queue before its last switch-in on this CPU (l), and says whether it
// waited (the kernel queued it: woken, new or preempted). The kernel has
// added that wait to its account by now (sched_info_arrive). A thread moved
// to another CPU while queued had the wait's part on the old CPU added to
// run_delay at the move (sched_info_dequeue) and the last part at the
// switch-in: run_delay moved by the whole wait since the switch-in counted
// before when that was the one just before (pcount moved by one);
// otherwise (a switch-in not seen) only the last part, l->in_q, counts. A
// replayed switch-in (replay_in) has no last part: it is how far run_delay
// moved since the thread's last counted switch-in.
static __always_inline bool sched_info_wait(struct last_val *l, struct task_struct *t, struct thread_state *s, u64 *d)
{
	u64 rd = t->sched_info.run_delay;
	u64 pc = t->sched_info.pcount;
	u64 q = l->in_q;
	bool known = s->pcount && rd >= s->run_delay;
	u64 w = rd - s->run_delay;
	bool whole = known && pc == s->pcount + 1 && (q >= REPLAYED_RUNQ || w >= q);
	// More than this switch-in since the last counted one: the thread
	// came in untraced, and left untraced before any switch, sample or
	// exit of it could replay it (to a task whose own replay then found
	// another as the CPU's last), so that slice was not counted, nor the
	// wait it ended; or a switch-in's work was dropped (an NMI's replay,
	// or a switch-in after the thread's exit). The kernel counted it:
	// so are they.
	if (s->pcount && pc > s->pcount + 1) {
		struct stats_val *st = get_stats();
		if (st)
			st->unseen_lost += pc - s->pcount - 1;
	}
	bool moved = known && pc != s->pcount && w;
	s->run_delay = rd;
	s->pcount = pc;
	if (q == REPLAYED_RUNQ) {
		*d = w;
		return moved;
	}
	if (q == NO_RUNQ)
		return false;
	*d = whole ? w : q;
	return true;
}

// run_queued sets *d to how long target thread t, which switched in on this
// CPU (l) at in, waited on the run queue before, and says whether it did.
static __always_inline bool run_queued(struct last_val *l, struct task_struct *t, struct thread_state *s, u64 in, u64 *d)
{
	if (runq_from_sched_info)
		return sched_info_wait(l, t, s, d);
	u64 ts = take(&s->wakeup_ts);
	if (!ts || in < ts)
		return false;
	*d = in - ts;
	return true;
}

static __always_inline void record_wakeup(struct task_struct *p)
{
	if (!is_target(p))
		return;
	struct thread_state *s = thread_of(p);
	if (s)
		s->wakeup_ts = bpf_ktime_get_ns();
}

// own_path_calls has the bit of each system call number whose kernel side
// of an interruptible wait is the call's own wait (futex_wait_queue,
// ep_poll, do_nanosleep, do_wait...), set by user space before load from
// its table of calls (collector/wait.go). The wait code already names the
// call, so the kernel stack of such a wait is not taken: on a 2-CPU VM a
// kernel stack of a switch-out cost 12-17 us against 3-3.6 us for the user
// stack (its unwind tables are cold at a few dozen stacks a second per
// CPU), and futex, poll and sleep waits are most of a busy host's.
const volatile u64 own_path_calls[WAIT_NR_MASK / 64 + 1] = {};

// own_path says whether wait code w (a thread leaving in an interruptible
// wait) is in one of own_path_calls: a wait with a kernel path of its own
// (uninterruptible, block I/O, a fault, a kernel thread) keeps its stack.
static __always_inline bool own_path(u32 w)
{
	if (w & (WAIT_UNINTERRUPTIBLE | WAIT_IOWAIT | WAIT_NOLOAD | WAIT_KTHREAD))
		return false;
	u32 nr = w & WAIT_NR_MASK;
	if (nr == WAIT_NR_NONE)
		return false;
	return (own_path_calls[nr >> 6] >> (nr & 63)) & 1;
}

// idle_wait says whether wait code w is a wait user space calls idle from
// the code alone, whatever the stacks would say (collector/wait.go waitOf,
// whose order of cases this follows): a kernel thread waiting for work, a
// TASK_NOLOAD wait, an idle Go M, a pthread_join. Idle stacks are shown
// nowhere (the report's flame graph and top stacks, inspect's and the
// lines view leave them out; no rule reads them), and the wait account
// has the exact time of such waits without them (profile.OffCPUScaler's
// Unsampled). Kernel workers and a Go program's idle Ms are most of a
// host's long blocks, which the chance by size took nearly every time.
static __always_inline bool idle_wait(u32 w)
{
	if (w & WAIT_KTHREAD)
		return !(w & WAIT_IOWAIT) && (!(w & WAIT_UNINTERRUPTIBLE) || (w & WAIT_NOLOAD));
	if (w & WAIT_NOLOAD)
		return true;
	if ((w & WAIT_NR_MASK) == WAIT_NR_NONE || (w & WAIT_IOWAIT))
		return false;
	return w & (WAIT_GO_IDLE | WAIT_JOIN);
}

// offcpu_out notes a target thread's voluntary switch-out, given its
// state and wait code (prev is the current task here, so its stacks are
// the current stacks). A switch-out in an idle wait (idle_wait) takes no
// stacks; it still counts towards k, so every other switch-out keeps the
// chance it would have had, and a CPU takes at most about
// offcpu_stacks_per_sec stacks a second.
// An off-CPU sample's ustack when its user stack went through sample_ring
// (SLOT_OFFCPU_USTACK) rather than offcpu_stacks: above any stack id, and
// not negative, which would be an error.
#define OWN_USTACK 0x7fffffff

#define KERNEL_WALK (-4096) // offcpu_user_stack: left to bpf_get_stackid

__noinline int offcpu_user_stack(void);

static __noinline void offcpu_out(void *ctx, struct offcpu_start *e, u64 now, u32 wait, long state)
{
	u32 zero = 0;
	struct offcpu_stat *st = bpf_map_lookup_elem(&offcpu_stats, &zero);
	struct offcpu_start v = {.ts = now, .ustack = NO_STACK, .kstack = NO_STACK};

	if (!st)
		return;
	u64 want = offcpu_stacks_per_sec * OFFCPU_PERIOD_NS / 1000000000ULL;
	if (now - st->period_start >= OFFCPU_PERIOD_NS) {
		// k for the next period from this one's rate.
		u64 k = want ? st->period_outs / want + 1 : 0;
		st->k = k && k < offcpu_min_k ? offcpu_min_k : k;
		st->period_start = now;
		st->period_outs = 0;
		st->period_sized = 0;
	}
	st->period_outs++;
	// k 0: no stacks wanted (offcpu_stacks_per_sec 0), or the first
	// period has not set it yet.
	u64 k = st->k;
	if (k && !idle_wait(wait)) {
		u64 last = e->last_ns;
		u64 p = OFFCPU_P1 / k;
		u64 by_size = last / (OFFCPU_SIZE_NS / OFFCPU_P1);
		// By size only while this period's budget lasts: a host has
		// hundreds of threads that wake a few times a second after long
		// blocks, and taking all their stacks cost ~600 ns per switch.
		// Not capped further by the CPU's switch rate: with fewer stacks
		// by size, long blocks fall back to 1/k and their heavy weights
		// made the lock estimate of rcu bad swing 5x (BENCHMARKS.md).
		bool sized = by_size > p && st->period_sized < want;
		if (sized)
			p = by_size;
		if (p > OFFCPU_P1)
			p = OFFCPU_P1;
		if (p && (bpf_get_prandom_u32() & (OFFCPU_P1 - 1)) < p) {
			if (sized)
				st->period_sized++;
			v.weight = (u64)OFFCPU_W1 * OFFCPU_P1 / p;
			v.ustack = offcpu_user_stack();
			if (v.ustack == KERNEL_WALK)
				v.ustack = bpf_get_stackid(ctx, &offcpu_stacks, BPF_F_USER_STACK);
			// Decided only for a switch-out whose stacks are taken.
			if (!(state & TASK_INTERRUPTIBLE) || !own_path(wait))
				v.kstack = bpf_get_stackid(ctx, &offcpu_stacks, 0);
			v.gstack = go_locked_stack(bpf_get_current_task_btf());
		}
	}
	v.last_ns = e->last_ns;
	*e = v;
}

// offcpu_in adds the blocked time of a thread switching in to its stacks.
static __noinline void offcpu_in(struct task_struct *next, struct offcpu_start *v, u32 wait, u64 now)
{
	u32 zero = 0;
	u32 tid = next->pid;
	if (!v->ts)
		return; // not switched out voluntarily since its last switch-in
	struct offcpu_stat *st = bpf_map_lookup_elem(&offcpu_stats, &zero);
	u64 dt = now > v->ts ? now - v->ts : 0;
	v->ts = 0;
	v->last_ns = dt;
	if (st)
		st->blocked_ns += dt;
	if (v->weight) {
		// The wait's length, before weighting, goes in the key: a rare
		// long wait sampled at a small chance carries a large weight,
		// and user space scales it against waits of its own length only.
		wait |= log2_bucket(dt, HIST_BUCKETS - 1) << WAIT_BUCKET_SHIFT;
		// The sampled switch-out stands for 1/chance of them.
		dt = dt * v->weight / OFFCPU_W1;
		// -EFAULT: no user stack (a kernel thread), not a loss; nor is
		// a kernel stack not taken (own_path).
		if (st && ((v->ustack < 0 && v->ustack != -EFAULT) ||
			   (v->kstack < 0 && v->kstack != -EFAULT && v->kstack != NO_STACK)))
			st->stack_errors++;
		struct sample_rec *r = bpf_ringbuf_reserve(&sample_ring, sizeof(*r), 0);
		if (!r) {
			struct stats_val *s = get_stats();
			if (s)
				s->sample_map_full++;
			return;
		}
		if (st)
			st->sampled_ns += dt;
		*r = (struct sample_rec){
			.pid = next->tgid,
			.tid = tid,
			.cpu = bpf_get_smp_processor_id(),
			.slot = SLOT_OFFCPU,
			.ustack = v->ustack,
			.kstack = v->kstack,
			.gstack = v->gstack,
			.wait = wait,
			.value = dt,
		};
		bpf_ringbuf_submit(r, ring_flags());
	}
}

// peer_wait says whether wait code w is a wait on another process whose
// waker names it: a pipe, a Unix socket, a child (wait4, waitid), System V
// IPC, or a futex (its waker released the lock or signalled the
// condition). Network, timer and disk wake-ups come from interrupts,
// where the current task is not the waker.
static __always_inline bool peer_wait(u32 w)
{
	if (w & (WAIT_IOWAIT | WAIT_PREEMPTED | WAIT_KTHREAD | WAIT_GO_IDLE))
		return false;
	u32 fd = (w & WAIT_FD_MASK) >> WAIT_FD_SHIFT;
	if (fd == FD_FIFO || fd == FD_SOCK_UNIX)
		return true;
	switch (w & WAIT_NR_MASK) {
	case 61: case 247:            // wait4 waitid
	case 65: case 69: case 70: case 220: // semop msgsnd msgrcv semtimedop
	case 202: case 449: case 455: // futex futex_waitv futex_wait
		return true;
	}
	return false;
}

// wait_in adds a target thread's time off the CPU, dt ns ending now in log2
// bucket b, to its wait code's totals, and to its waker's when it waited
// on another process.
static __noinline void wait_in(struct task_struct *t, struct thread_state *s, u64 dt, u32 b)
{
	u32 w = s->wait;
	static const struct wait_val zero_wait;
	long err;
	struct wait_val *v = lookup_or_try_init(&waits, &w, &zero_wait, &err);
	if (!v) {
		struct stats_val *st = get_stats();
		if (st && err)
			st->map_errors++;
		return;
	}
	// Per CPU: plain adds.
	v->ns += dt;
	v->count++;
	if (b < HIST_BUCKETS)
		v->hist[b]++;
	if (!s->waker.tgid || !peer_wait(w))
		return;
	struct peer_key pk = {.tgid = t->tgid, .waker_tgid = s->waker.tgid, .wait = w};
	__builtin_memcpy(pk.waker_comm, s->waker.comm, sizeof(pk.waker_comm));
	static const struct peer_val zero_peer;
	struct peer_val *pv = lookup_or_try_init(&peers, &pk, &zero_peer, &err);
	if (!pv) {
		struct stats_val *st = get_stats();
		if (st && err)
			st->map_errors++;
		return;
	}
	__sync_fetch_and_add(&pv->ns, dt);
	__sync_fetch_and_add(&pv->count, 1);
}

// preempt_count_at is where this CPU's preempt count lies from its run
// queue, both per-CPU variables (__preempt_count, x86-64; runqueues):
// their offsets in the kernel's per-CPU section differ by this, and so do
// their addresses on every CPU. User space takes it from the kernel's BTF
// before load; 0: unknown (another architecture, or no such variables).
// BTF-typed kernel variables (bpf_this_cpu_ptr(&__preempt_count), the
// kernel's own way) are not resolved by cilium/ebpf v0.22.
const volatile s64 preempt_count_at = 0;

// include/linux/preempt.h
#define SOFTIRQ_OFFSET 0x00000100
#define HARDIRQ_MASK 0x000f0000
#define NMI_MASK 0x00f00000

// in_interrupt says whether this program runs in an interrupt (a timer, a
// device, a softirq being served) rather than in task cur's own context,
// the kernel's !in_task(). cur runs on this CPU, so its run queue is this
// CPU's (checked), and this CPU's preempt count lies preempt_count_at from
// it. false when that cannot be told.
static __always_inline bool in_interrupt(struct task_struct *cur)
{
	if (!preempt_count_at)
		return false;
	struct rq *rq = cur->se.cfs_rq->rq;
	if (!rq || rq->cpu != bpf_get_smp_processor_id())
		return false;
	u32 pc = 0;
	void *at = (void *)rq + preempt_count_at;
	if (have_rdonly_cast) {
		// A plain load, not a helper call: 55 ns less per wake-up on
		// the 2-CPU VM (BENCHMARKS.md, "Twenty-first session"). The
		// count is an int; any kernel struct that starts with one
		// types the load (refcount_t's does).
		struct refcount_struct *r = bpf_rdonly_cast(at, bpf_core_type_id_kernel(struct refcount_struct));
		pc = r->refs.counter;
	} else if (bpf_probe_read_kernel(&pc, sizeof(pc), at)) {
		return false;
	}
	return pc & (NMI_MASK | HARDIRQ_MASK | SOFTIRQ_OFFSET);
}

// name_end zeroes the bytes of a task name c (TASK_COMM_LEN bytes, read
// as two words) after its first NUL, so that a name read from the task
// is the same key whatever the kernel left past it: 6.18 pads a name
// with zeros (seen after a rename from a longer one), kernels that copied
// it with strlcpy left the longer name's tail. The lowest 0x80 bit of
// (x - 0x01..01) & ~x & 0x80..80 marks x's first zero byte (little
// endian: the name's first byte is the word's lowest).
static __always_inline void name_end(u64 *c)
{
	const u64 ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
	u64 z = (c[0] - ones) & ~c[0] & highs;
	if (z) {
		c[0] &= ((z & -z) >> 7) - 1;
		c[1] = 0;
		return;
	}
	z = (c[1] - ones) & ~c[1] & highs;
	if (z)
		c[1] &= ((z & -z) >> 7) - 1;
}

// sched_waking fires in the waker's context (sched_wakeup may fire on the
// woken task's CPU, from an interrupt): the current task is who woke p,
// unless an interrupt woke it (a timeout, a device), which interrupted
// whatever ran there. Only target threads with a state record are noted,
// and nothing is created here.
SEC("tp_btf/sched_waking")
int BPF_PROG(on_waking, struct task_struct *p)
{
	if (by_cgroup || !is_target(p))
		return 0;
	struct thread_state *s = bpf_task_storage_get(&thread_state, p, 0, 0);
	if (!s)
		return 0;
	struct task_struct *cur = bpf_get_current_task_btf();
	if (cur->pid == 0 || in_interrupt(cur)) {
		// No waker task.
		if (s->waker.tgid)
			s->waker.tgid = 0;
		return 0;
	}
	// Two plain loads of the name (cur is a BTF pointer), not
	// bpf_get_current_comm, which cost 67 ns a wake-up on the 2-CPU VM.
	u64 comm[TASK_COMM_LEN / 8];
	__builtin_memcpy(comm, cur->comm, sizeof(comm));
	name_end(comm);
	u32 tgid = cur->tgid;
	if (s->waker.tgid == tgid && s->waker.comm[0] == comm[0] && s->waker.comm[1] == comm[1])
		return 0; // as last time: nothing written (struct waker)
	s->waker.tgid = tgid;
	s->waker.comm[0] = comm[0];
	s->waker.comm[1] = comm[1];
	return 0;
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

// switched_in does target thread t's switch-in work, for its switch-in at
// in on this CPU (l): its wait's end (the off-CPU time, the wait code and
// its waker, the off-CPU stack record) and its run-queue wait, into the
// histograms. It runs at the thread's next switch-out, cpu-clock sample or
// exit, whichever comes first (switched_in_now), not at the switch-in: a
// switch-in is on the path of whatever woke the thread (a ping-pong's
// round trip, a lock's hand-over), its switch-out mostly is not. What
// cannot wait, the switch-in takes into l (in_ts, in_q). The waker is read
// here: a wake-up between the switch-in and this point is one that raced
// the thread's next block (the thread still running), and names its waker
// for the wait before.
static __noinline void switched_in(struct last_val *l, struct task_struct *t, struct thread_state *s, u64 in)
{
	// A wait that no task ended (struct waker): a timeout or a signal
	// from an interrupt; user space tells a futex that timed out from a
	// lock's wait by it (collector/wait.go).
	if (!by_cgroup && !(s->wait & WAIT_PREEMPTED) && !s->waker.tgid)
		s->wait |= WAIT_NO_WAKER;
	offcpu_in(t, &s->off, s->wait, in);

	u32 zero = 0;
	struct hist_val *h = bpf_map_lookup_elem(&hists, &zero);
	struct cgroup_val *cv = NULL;
	u64 q;
	if (run_queued(l, t, s, in, &q)) {
		u32 b = log2_bucket(q, HIST_BUCKETS - 1);
		if (h)
			h->runq[b]++;
		cv = cgroup_of(t);
		if (cv && b < HIST_BUCKETS) {
			__sync_fetch_and_add(&cv->runq[b], 1);
			__sync_fetch_and_add(&cv->runq_ns, q);
		}
	}
	u64 ts = take(&s->offcpu_ts);
	if (ts) {
		u32 r = OFFCPU_OTHER;
		if (by_cgroup) {
			r = ts & OFFCPU_MASK;
			ts &= ~OFFCPU_MASK;
		}
		if (in >= ts) {
			u32 b = log2_bucket(in - ts, HIST_BUCKETS - 1);
			if (!by_cgroup)
				wait_in(t, s, in - ts, b);
			// After wait_in: user space walks waits and peers only when
			// this count moved since its last walk (readWaits), so the
			// count must not run ahead of what it stands for.
			if (h)
				h->offcpu[b]++;
			if (by_cgroup) {
				if (!cv)
					cv = cgroup_of(t);
				if (cv && r < OFFCPU_REASONS && b < HIST_BUCKETS) {
					__sync_fetch_and_add(&cv->offcpu[r][b], 1);
					__sync_fetch_and_add(&cv->offcpu_ns[r], in - ts);
				}
			}
		}
	}
}

// pending_in does target thread t's switch-in work, given its state s, if
// its switch-in on this CPU (l) is still to be done.
static __always_inline void pending_in(struct last_val *l, struct task_struct *t, struct thread_state *s)
{
	if (!l->in_ts || l->pid != t->pid)
		return;
	u64 in = l->in_ts;
	l->in_ts = 0;
	switched_in(l, t, s, in);
}

// switched_in_now does pending_in for running target thread t, looking its
// state up only when there is work. Not when the state cannot be had (task
// storage busy on this CPU): the next switch-out, sample or exit tries
// again.
static __always_inline void switched_in_now(struct last_val *l, struct task_struct *t)
{
	if (!l->in_ts || l->pid != t->pid)
		return;
	struct thread_state *s = thread_of(t);
	if (s)
		pending_in(l, t, s);
}

// left_switched_in does the switch-in work still to do (switched_in) of the
// target thread that left this CPU through a switch the tracepoint did not
// show, before replay_in takes the CPU over for the one that came in. Not
// from an NMI (see replay_in). Apart from replay_in, whose frame would
// otherwise put switched_in's calls past the verifier's 512 bytes of stack.
static __noinline void left_switched_in(struct last_val *l)
{
	if (!have_task_from_pid)
		return;
	struct task_struct *o = bpf_task_from_pid(l->pid);
	if (!o)
		return;
	switched_in_now(l, o);
	bpf_task_release(o);
}

// replay_in does the switch-in of target thread t, running on this CPU
// now, that the tracepoint did not show, and says whether it could. Not
// every switch is traced (see unseen_faults): on the 6.18 Firecracker
// guest the agent's threads switch out untraced after running 0.1-8 ms,
// so the task they hand the CPU to comes in untraced, 3% of all switches
// beside `stress-ng --cpu 2`; without this its slice, and the wait its
// switch-in ends, were lost. The kernel's own account says when it came
// in: sched_info.last_arrival is the run queue's clock at the switch-in,
// so the clock now less it is how long t has run since. At a switch-out
// (at_switch) the kernel has just updated rq->clock; at a sample or exit
// it can be a tick old, and the clock now is taken from the monotonic
// clock and clk_off, their difference at the last switch that read both
// on this CPU (the two run at one rate to a few parts per million). It
// is bounded by the last switch or sample this CPU showed (l->ts). The
// task that left untraced is counted up to then (not from a hardware
// event's sampler: no_nmi), and t's slice from then as any other, its
// faults from t's own counts since its last switch-out (the perf counters
// moved unread for the task that left); neither slice's hardware counts
// are (their values at the switch were never read). t's wait and
// run-queue wait are then closed as at any switch-in (switched_in, from
// the caller's next switched_in_now or switch-out).
static __noinline bool replay_in(struct last_val *l, struct task_struct *t, u64 now, bool at_switch, bool no_nmi)
{
	if (!l->ts)
		return false; // t ran before this CPU's first switch or sample
	struct stats_val *st = get_stats();
	u64 clock = runq_from_sched_info ? t->se.cfs_rq->rq->clock : 0;
	u64 arrival = runq_from_sched_info ? t->sched_info.last_arrival : 0;
	if (at_switch && clock)
		l->clk_off = now - clock;
	else if (l->clk_off && now - l->clk_off > clock)
		clock = now - l->clk_off;
	if (!arrival || clock < arrival || now < l->ts) {
		if (st)
			st->unseen_lost++;
		return false;
	}
	u64 ran = clock - arrival;
	if (ran > now - l->ts)
		ran = now - l->ts;
	if (st)
		st->unseen_in++;
	u64 in = now - ran;
	// The task that left untraced ran from l->ts until t came in: that is
	// counted to it when it is a target (under -a, this guest's agent
	// itself), its faults from its own counts since it came in, and not
	// its hardware counts, which moved for t's time too. Not from the
	// miss sampler of a hardware event, which runs in an NMI (miss_in_nmi):
	// dropping the task reference there could be the last one, and the
	// task's release is not known to be safe in an NMI. The cpu-clock
	// sampler runs in a timer interrupt. Its own switch-in's work, if
	// still to do, was done before (replay).
	bool left_lost = !no_nmi && l->pid && target_mode == MODE_ALL; // under -a every task but the idle one is a target
	if (no_nmi && have_task_from_pid && l->pid) {
		struct task_struct *o = bpf_task_from_pid(l->pid);
		if (o) {
			if (is_target(o)) {
				l->counted = 0;
				l->own_faults = 1;
				account(l, o, in, 1);
			}
			bpf_task_release(o);
		}
	}
	// A switch-in's work it could not do is counted at the task's next
	// one (sched_info_wait).
	if (st && left_lost)
		st->unseen_lost++;
	struct thread_state *s = bpf_task_storage_get(&thread_state, t, 0, 0);
	// The switch-out it last left through was seen: its faults since are
	// this slice's.
	bool baseline = s && s->offcpu_ts;
	u64 faults = baseline ? s->out_faults : 0;
	u64 majfaults = baseline ? s->out_majfaults : 0;
	take_over(l, t, in, false);
	// The task that left unseen may have faulted: the counters moved. The
	// account that follows reads them for a new baseline, and counts the
	// faults before it from t's own counts (none without a baseline).
	l->faults_stale = fault_slots;
	l->own_faults = 1;
	if (baseline) {
		l->faults = faults;
		l->majfaults = majfaults;
	}
	// Its switch-in's work follows as any other's (switched_in).
	l->in_ts = in;
	l->in_q = REPLAYED_RUNQ;
	return true;
}

// replay does what replay_in does, after the switch-in work of the task
// that left (left_switched_in).
static __always_inline bool replay(struct last_val *l, struct task_struct *t, u64 now, bool at_switch, bool no_nmi)
{
	if (l->in_ts && no_nmi)
		left_switched_in(l);
	return replay_in(l, t, now, at_switch, no_nmi);
}

// miss_in_nmi: the miss sampler's event is not a software one, so its
// program may run in an NMI (a hardware event's overflow on x86); a
// software event's runs where the event happened (a page fault: the task).
const volatile bool miss_in_nmi = false;

// untraced_tgid: switches into this process from another are ignored, as
// this guest's tracepoint leaves some out (replay_in): a test's knob
// (collector TestUntracedSwitchIn), 0 otherwise, when the verifier drops
// the branch (one load of it stays).
const volatile u32 untraced_tgid = 0;

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	if (untraced_tgid && next->tgid == untraced_tgid && prev->tgid != untraced_tgid)
		return 0;
	struct last_val *l = get_last();
	if (!l)
		return 0;
	bool prev_target = is_target(prev);
	bool next_target = is_target(next);
	u64 now = bpf_ktime_get_ns();
	l->busy = 1;
	barrier();
	busy_to(l, prev, now);
	switch_counts(l, prev, next);

	if (prev_target) {
		if (l->pid != prev->pid)
			replay(l, prev, now, true, true);
		long state = task_state(prev);
		// An exiting task's last slice is not counted (on_exit).
		if (!(state & TASK_DEAD))
			account(l, prev, now, 1);
		struct thread_state *s = state & TASK_DEAD ? NULL : thread_of(prev);
		if (s) {
			// Its switch-in first: the fields below are for the next.
			pending_in(l, prev, s);
			// A preempted task goes straight back onto the run queue:
			// its run queue latency starts now, as in runqlat.bt (and
			// in the kernel's account, sched_info_depart).
			if (state == TASK_RUNNING && !runq_from_sched_info)
				s->wakeup_ts = now;
			// By cgroup, the off-CPU reason rides in the timestamp's
			// low bits (OFFCPU_MASK ns of resolution).
			s->offcpu_ts = by_cgroup ? (now & ~OFFCPU_MASK) | offcpu_reason_of(state) : now;
			s->out_faults = prev->min_flt + prev->maj_flt;
			s->out_majfaults = prev->maj_flt;
			// Voluntary: the thread blocked (not preempted). Its wait
			// code is taken now, while its registers still say which
			// call it blocked in; the wake-up that ends the wait
			// leaves its waker in s->waker.
			if (!preempt && state != TASK_RUNNING) {
				s->wait = by_cgroup ? 0 : wait_code(prev, s, state);
				offcpu_out(ctx, &s->off, now, s->wait, state);
			} else {
				s->wait = WAIT_PREEMPTED;
			}
		}
	} else {
		leave(l, prev);
	}
	// The counters are read only around targets: at a target's switch-in
	// for its baseline, at its switch-out for its delta (account).
	take_over(l, next, now, next_target);
	if (next_target) {
		// The rest of the switch-in waits for switched_in.
		l->in_ts = now;
		l->in_q = runq_in(l, next, now);
	}
	barrier();
	l->busy = 0;
	if (next_target && wake_armed)
		wake_recorder();
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	if (target_mode != MODE_PIDS)
		return 0;
	u32 ptgid = parent->tgid;
	u32 ctgid = child->tgid;
	if (ptgid == ctgid || target_state_of(ptgid) != TARGET_YES)
		return 0;
	struct stats_val *s = get_stats();
	if (!s)
		return 0;
	if (set_target(ctgid, TARGET_YES))
		s->map_errors++;
	else
		s->target_changes++;
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	u32 tgid = p->tgid;
	if (target_mode != MODE_PIDS || target_state_of(tgid) != TARGET_AT_EXEC) {
		// A new image: the Go runtime offsets user space found for the
		// old one no longer hold (it checks the new binary). A command
		// released at its exec keeps those it was given for the binary
		// it execs.
		bpf_map_delete_elem(&go_procs, &tgid);
		if (target_mode == MODE_PIDS && target_state_of(tgid) == TARGET_YES) {
			struct stats_val *s = get_stats();
			if (s)
				s->target_changes++; // its binary is to be checked
		}
		return 0;
	}
	// Counts up to here belong to the launcher: this CPU's accounting of
	// p starts now, and so do its migrations.
	set_target(tgid, TARGET_YES);
	struct last_val *l = get_last();
	if (!l)
		return 0;
	u64 now = bpf_ktime_get_ns();
	l->busy = 1;
	barrier();
	busy_to(l, p, now);
	take_over(l, p, now, true);
	struct task_val *tv = task_entry(p);
	if (tv) {
		tv->migrations = p->se.nr_migrations;
		task_written();
	}
	barrier();
	l->busy = 0;
	return 0;
}

// A task's name changes by exec, prctl(PR_SET_NAME) or a write to
// /proc/PID/comm (by any thread, even of another process), all through
// __set_task_comm, which fires this with the new name: names are copied
// here and when a task is first seen, never at a switch.
SEC("tp_btf/task_rename")
int BPF_PROG(on_rename, struct task_struct *t, const char *comm)
{
	struct task_key k = {.tgid = t->tgid, .pid = t->pid};
	struct task_val *tv = bpf_map_lookup_elem(&tasks, &k);
	if (tv) {
		bpf_probe_read_kernel_str(tv->comm, sizeof(tv->comm), comm);
		task_written();
	}
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *t)
{
	// perf stops counting an exiting task later in do_exit
	// (perf_event_exit_task), after this tracepoint and the release of the
	// task's memory; its counts so far are taken here, what follows until
	// its last switch-out only if it is switched out meanwhile (the final
	// switch-out counts nothing). On a loop of short processes this is
	// closer to perf's task-clock than counting the final slice too (+8%).
	if (is_target(t)) {
		struct last_val *l = get_last();
		if (l) {
			u64 now = bpf_ktime_get_ns();
			l->busy = 1;
			barrier();
			busy_to(l, t, now);
			if (l->pid != t->pid)
				replay(l, t, now, false, true);
			switched_in_now(l, t);
			account(l, t, now, 0);
			barrier();
			l->busy = 0;
		}
	}
	// The thread's last switch is still to come: mark its record for
	// user space to delete after the next snapshot, not now.
	struct task_key k = {.tgid = t->tgid, .pid = t->pid};
	struct task_val *tv = bpf_map_lookup_elem(&tasks, &k);
	if (tv) {
		tv->exited = 1;
		task_written();
	}
	return 0;
}

// CTX_REG reads register r of a sample's context. The context's registers
// may only be read as whole words: volatile keeps the compiler from
// narrowing a load (cs's to its two bytes).
#define CTX_REG(ctx, r) (*(volatile u64 *)((void *)&(ctx)->regs + __builtin_offsetof(struct pt_regs, r)))

// A CPU sample's user stack is walked here by its frame pointers, as the
// kernel walks it for bpf_get_stack (x86-64 perf_callchain_user): the
// interrupted instruction, then the return address of each frame from the
// frame pointer on, until MAX_STACK_DEPTH entries or a frame that cannot
// be read. The kernel reads each frame's two words with two user accesses
// of their own, about 55 ns a frame on the 2-CPU VM; here the stack is
// copied a piece at a time, one user access each, and the frames are read
// from the copy: under rcu bad (Go, 99 Hz) a sample costs about 1 us less
// (BENCHMARKS.md, "The user stack walk"), a 60-frame stack half. A stack
// of a few frames costs the same either way. The walk is a bpf_loop
// callback, verified once rather than for each of its 127 steps; without
// bpf_loop (kernels before 5.17), for a 32-bit task and for one inside a
// function with a uretprobe (uretprobe_pending), the kernel walks.
#define USTACK_PIECE 2048
#define USER_PAGE 4096ULL
#define USER_CS 0x33 // x86-64 __USER_CS: a 64-bit task
// Past the largest user address of x86-64 (5-level paging). A lower limit
// is the helper's to apply: it refuses what is not a user address.
#define USER_END 0x00fffffffffff000ULL
#define PF_USER_WORKER 0x00004000

// have_bpf_loop is set before load when the kernel has bpf_loop.
const volatile bool have_bpf_loop = false;

struct ustack_piece {
	u8 b[USTACK_PIECE];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2); // as stack_scratch
	__type(key, u32);
	__type(value, struct ustack_piece);
} ustack_scratch SEC(".maps");

// copy_piece copies the user stack from fp to the end of fp's page, at
// most USTACK_PIECE bytes and at least one frame, into w, and returns how
// many bytes it holds (0: none could be read). Not past the page: the
// stack's mapping can end there (the main thread's, above its first
// frames), and a read that faults costs more than a second piece.
static __always_inline u64 copy_piece(struct ustack_piece *w, u64 fp)
{
	u64 n = USER_PAGE - (fp & (USER_PAGE - 1));
	if (n < 16)
		n = 16;
	if (n > USTACK_PIECE)
		n = USTACK_PIECE;
	return bpf_probe_read_user(w->b, n, (void *)fp) ? 0 : n;
}

// A user stack walk in progress: the next frame, the copy of the stack
// that ustack_scratch holds (base, len: 0 for none), where in
// stack_scratch's frames its return addresses go, and how many there are.
// Step i writes entry at + i: an index from the loop's own counter, which
// the verifier knows the range of, lets it treat every step alike; a count
// kept here would be a new value at each step, and the callback verified
// for each.
struct walk {
	u64 fp;
	u64 base;
	u64 len;
	u64 n;
	u32 at;
	u32 key; // the scratch entry: SAMPLER_SCRATCH or SWITCH_SCRATCH
};

// walk_step takes frame i of walk c, as a bpf_loop callback: 1 ends it.
static long walk_step(u64 i, void *ctx)
{
	struct walk *c = ctx;
	u32 key = c->key;
	struct stack_rec *r = bpf_map_lookup_elem(&stack_scratch, &key);
	struct ustack_piece *w = bpf_map_lookup_elem(&ustack_scratch, &key);
	if (!r || !w)
		return 1;
	u64 fp = c->fp;
	// The kernel would read a frame at 0 and fail there.
	if (!fp || fp >= USER_END)
		return 1;
	u64 off = fp - c->base;
	if (c->len < 16 || fp < c->base || off > c->len - 16) {
		u64 n = copy_piece(w, fp);
		if (n < 16)
			return 1;
		c->base = fp;
		c->len = n;
		off = 0;
	}
	u64 k = c->at + i;
	if (off > USTACK_PIECE - 16 || k >= 2 * MAX_STACK_DEPTH)
		return 1; // never: off + 16 <= len, at + i < 2 * MAX_STACK_DEPTH (for the verifier)
	r->frames[k] = *(u64 *)&w->b[off + 8]; // the return address
	c->fp = *(u64 *)&w->b[off];
	c->n = i + 1;
	return 0;
}

// uretprobe_pending says whether task t is inside a function with a
// uretprobe (--func times a C function's calls with one): the function's
// return address on its stack is then the probe's trampoline, which the
// kernel's walk replaces with the real one (since 6.11,
// fixup_uretprobe_trampoline_entries); the walk here would not.
static __always_inline bool uretprobe_pending(struct task_struct *t)
{
	// Neither field exists in a kernel built without uprobes.
	if (!bpf_core_field_exists(t->utask))
		return false;
	struct uprobe_task *ut = t->utask;
	if (!ut || !bpf_core_field_exists(ut->return_instances))
		return false;
	return ut->return_instances != NULL;
}

// user_stack writes the current task t's user stack to r's frames from
// entry at (a count of u64s) on, for a sample with context ctx that
// interrupted the kernel or not, and returns its length in bytes or
// bpf_get_stack's error (-EFAULT: a kernel thread has none).
static __always_inline long user_stack(struct bpf_perf_event_data *ctx, struct task_struct *t, struct stack_rec *r, u32 at, bool kernel)
{
	u64 ip, fp, cs;
	if (!kernel) {
		ip = CTX_REG(ctx, ip);
		fp = CTX_REG(ctx, bp);
		cs = CTX_REG(ctx, cs);
	} else {
		// The registers saved at the kernel's entry, as the kernel's
		// walk takes them; none for a kernel thread or an io_uring
		// worker.
		if (t->flags & (PF_KTHREAD | PF_USER_WORKER))
			return -EFAULT;
		// An exiting task past its exit_mm: the kernel's walk gives
		// an empty stack.
		if (!t->mm)
			return 0;
		struct pt_regs *ur = (struct pt_regs *)bpf_task_pt_regs(t);
		if (!ur)
			return -EFAULT;
		ip = ur->ip;
		fp = ur->bp;
		cs = ur->cs;
	}
	if (at > MAX_STACK_DEPTH)
		return -EFAULT; // never: the kernel stack has at most MAX_STACK_DEPTH entries
	if (!have_bpf_loop || cs != USER_CS || uretprobe_pending(t))
		return bpf_get_stack(ctx, (void *)r->frames + at * sizeof(u64), MAX_STACK_DEPTH * sizeof(u64), BPF_F_USER_STACK);
	r->frames[at] = ip;
	struct walk c = {.fp = fp, .at = at + 1, .key = SAMPLER_SCRATCH};
	bpf_loop(MAX_STACK_DEPTH - 1, walk_step, &c, 0);
	u64 n = c.n + 1;
	if (n > MAX_STACK_DEPTH)
		n = MAX_STACK_DEPTH; // never: at most MAX_STACK_DEPTH - 1 steps
	return n * sizeof(u64);
}

// offcpu_user_stack takes the user stack of the task switching out (the
// current one, at sched_switch) for an off-CPU sample, and returns its
// ustack: OWN_USTACK when its frames went to sample_ring in a
// SLOT_OFFCPU_USTACK record just now, KERNEL_WALK when the caller is to
// take it by bpf_get_stackid, or an error (-EFAULT: no user stack). A
// global function, verified once on its own: as a static one it was
// verified again for each of on_switch's paths to it, and loading the
// programs took 1 s longer (2.5 s against 1.4 s for `record -a -d 500ms`
// on the 2-CPU VM). The kernel's
// walk for bpf_get_stackid cost about 8 us a stack of a dozen frames under
// rcu bad on the 2-CPU VM, a third of on_switch there (BENCHMARKS.md,
// "the off-CPU user stack"); this is the sampler's walk (user_stack), from
// the registers the task entered the kernel with, in its own scratch
// entry. Where the sampler would leave the walk to the kernel (no
// bpf_loop, a 32-bit task, a pending uretprobe), so does this.
__noinline int offcpu_user_stack(void)
{
	struct task_struct *t = bpf_get_current_task_btf();
	if (t->flags & (PF_KTHREAD | PF_USER_WORKER) || !t->mm)
		return -EFAULT; // as bpf_get_stackid: no user stack
	struct pt_regs *ur = (struct pt_regs *)bpf_task_pt_regs(t);
	if (!ur)
		return -EFAULT;
	u64 ip = ur->ip, fp = ur->bp, cs = ur->cs;
	if (!have_bpf_loop || cs != USER_CS || uretprobe_pending(t))
		return KERNEL_WALK;
	u32 key = SWITCH_SCRATCH;
	struct stack_rec *r = bpf_map_lookup_elem(&stack_scratch, &key);
	if (!r)
		return NO_STACK; // never: an array's entry
	r->frames[0] = ip;
	struct walk c = {.fp = fp, .at = 1, .key = SWITCH_SCRATCH};
	bpf_loop(MAX_STACK_DEPTH - 1, walk_step, &c, 0);
	u64 n = c.n + 1;
	if (n > MAX_STACK_DEPTH)
		n = MAX_STACK_DEPTH; // never: at most MAX_STACK_DEPTH - 1 steps
	r->h = (struct sample_rec){
		.pid = t->tgid,
		.tid = t->pid,
		.cpu = bpf_get_smp_processor_id(),
		.slot = SLOT_OFFCPU_USTACK,
		.ulen = n * sizeof(u64),
	};
	if (bpf_ringbuf_output(&sample_ring, r, sizeof(r->h) + n * sizeof(u64), ring_flags())) {
		struct stats_val *s = get_stats();
		if (s)
			s->sample_map_full++;
		return -ENOSPC; // a stack error at the switch-in (offcpu_in)
	}
	return OWN_USTACK;
}

// in_kernel says whether a sample interrupted kernel code (x86: the code
// segment's privilege level); only then is there a kernel stack to take.
static __always_inline bool in_kernel(struct bpf_perf_event_data *ctx)
{
	return (CTX_REG(ctx, cs) & 3) == 0;
}

static __always_inline int sample(struct bpf_perf_event_data *ctx, u16 slot)
{
	struct last_val *l = bpf_map_lookup_elem(&last, &last_key); // get_last, without the stack
	if (!l)
		return 0;
	l->fires[slot & 1]++; // & 1: a provable bound for the verifier (SAMPLE_SLOTS)
	struct task_struct *t = (struct task_struct *)bpf_get_current_task_btf();
	// This CPU's idle task, as the last switch or sample here noted it
	// (only idle tasks have pid 0, and they never exit): what the path
	// below does for it, on last_val's first fields only (see there).
	// busy_to adds nothing for it, note_faults nothing (an idle task takes
	// no page faults: its min_flt + maj_flt stay 0), and it is no one's
	// target.
	if ((u64)t == l->hf_task && !l->hf_pid && !l->busy) {
		l->sw_ts = bpf_ktime_get_ns();
		if (slot == SLOT_CLOCK)
			read_host_faults_due(l);
		return 0;
	}
	struct stats_val *s = get_stats();
	if (!s)
		return 0;
	if (!l->busy) {
		busy_to(l, t, bpf_ktime_get_ns());
		note_faults(l, t);
		if (slot == SLOT_CLOCK)
			read_host_faults_due(l);
	}
	if (!is_target(t)) {
		if (slot == SLOT_CLOCK)
			other_sample(s, t);
		return 0;
	}
	// Attribute counts here too, so a thread that runs for a long time
	// without a context switch shows up in the window it ran in; a thread
	// that was already running when the programs were attached is taken
	// over here.
	u64 now = bpf_ktime_get_ns();
	// A switch, exec or exit that was interrupted keeps its values.
	if (!l->busy) {
		bool no_nmi = slot == SLOT_CLOCK || !miss_in_nmi;
		if (l->pid == t->pid || replay(l, t, now, false, no_nmi)) {
			account(l, t, now, 0);
			// Not from an NMI: task storage takes a lock.
			if (no_nmi)
				switched_in_now(l, t);
		} else {
			take_over(l, t, now, true);
		}
	}
	s->samples[slot & 1]++;
	if (wake_armed)
		wake_recorder();
	if (by_cgroup)
		return 0; // counts by cgroup only: no stacks

	// One scratch entry serves both samplers: perf_event programs do not
	// nest on a CPU (the kernel's bpf_overflow_handler runs one only while
	// no other kprobe or perf_event program is active there,
	// bpf_prog_active). on_switch, a tracing program, is not counted
	// there: a hardware event's sampler can run over it in an NMI, so its
	// off-CPU user stacks have an entry of their own (SWITCH_SCRATCH).
	u32 key = SAMPLER_SCRATCH;
	struct stack_rec *r = bpf_map_lookup_elem(&stack_scratch, &key);
	if (!r) {
		s->map_errors++; // never: an array's entry
		return 0;
	}
	u64 id = bpf_get_current_pid_tgid();
	r->h = (struct sample_rec){
		.pid = id >> 32,
		.tid = (u32)id,
		.cpu = bpf_get_smp_processor_id(),
		.slot = slot,
		.value = 1,
	};
	long klen = 0, ulen;
	bool kernel = in_kernel(ctx);
	if (kernel) {
		klen = bpf_get_stack(ctx, r->frames, MAX_STACK_DEPTH * sizeof(u64), 0);
		if (klen < 0) {
			r->h.kstack = klen;
			klen = 0;
		}
	}
	// klen is at most MAX_STACK_DEPTH frames, so the user stack fits
	// after it; the check restates that for the verifier.
	if (klen > MAX_STACK_DEPTH * sizeof(u64)) {
		s->map_errors++; // never (see above)
		return 0;
	}
	ulen = user_stack(ctx, t, r, klen / sizeof(u64), kernel);
	if (ulen < 0) {
		r->h.ustack = ulen;
		ulen = 0;
	}
	// -EFAULT: no user stack (a kernel thread), not a loss.
	if ((r->h.ustack < 0 && r->h.ustack != -EFAULT) || r->h.kstack < 0)
		s->stack_errors++;
	r->h.klen = klen;
	r->h.ulen = ulen;
	u64 n = sizeof(r->h) + klen + ulen;
	if (n > sizeof(*r)) {
		s->map_errors++; // never: each stack is at most MAX_STACK_DEPTH frames
		return 0;
	}
	if (bpf_ringbuf_output(&sample_ring, r, n, ring_flags()))
		s->sample_map_full++;
	return 0;
}

SEC("perf_event")
int sample_clock(struct bpf_perf_event_data *ctx)
{
	return sample(ctx, SLOT_CLOCK);
}

SEC("perf_event")
int sample_miss(struct bpf_perf_event_data *ctx)
{
	return sample(ctx, SLOT_MISS);
}

// Each enum of cacheheat.h is in the object's BTF only when something
// uses it; these pointers do, so bpf2go can export the enums to Go.
const enum sizes *unused_sizes __attribute__((unused));
const enum mode *unused_mode __attribute__((unused));
const enum target_state *unused_target_state __attribute__((unused));
const enum slot_source *unused_slot_source __attribute__((unused));
const enum sample_slot *unused_sample_slot __attribute__((unused));
const enum offcpu_reason *unused_offcpu_reason __attribute__((unused));
const enum wait_bits *unused_wait_bits __attribute__((unused));
const enum fd_kind *unused_fd_kind __attribute__((unused));
// The sample ring's records reach BTF only through these, for bpf2go.
const struct stack_rec *unused_stack_rec __attribute__((unused));
