// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
// The contract between bpf/cacheheat.c and package collector: every size,
// mode and slot number both sides use, defined once, here. They are enums,
// not #defines, because enums are types in the object's BTF: bpf2go exports
// each one listed with -type in gen.go as Go constants (CacheheatMode,
// CacheheatSizes, ...), so collector uses the generated values and never a
// copy. bpf/contract_test.go checks the generated Go against the object.
// An enum only reaches BTF when something uses it; the unused_* pointers at
// the end of cacheheat.c are there for that.
#ifndef CACHEHEAT_H
#define CACHEHEAT_H

enum sizes {
	// MAX_EVENTS is the number of counter slots: one PERF_EVENT_ARRAY per
	// slot (counters0..counters39) and one count per slot in every task
	// record. It is sized so that the whole catalogue of any CPU model
	// cacheheat knows fits at once (checked by collector's tests), so the
	// slots never decide which events a recording may ask for; a PMU with
	// fewer counters multiplexes them instead.
	MAX_EVENTS = 40,
	// HOST_FAULTS is how many fault slots (page-faults, minor-faults,
	// major-faults) a CPU's last_val keeps as read in place by the
	// sampler (host_faults).
	HOST_FAULTS = 3,
	// Log2 latency buckets: bucket 0 holds [0, 2) ns, bucket i
	// [2^i, 2^(i+1)) ns, the last one also everything larger (the layout
	// of profile.Histogram).
	HIST_BUCKETS = 40,
	// Frames of a stack map entry: the kernel's PERF_MAX_STACK_DEPTH.
	MAX_STACK_DEPTH = 127,
	// Frames of a goroutine stack walked by frame pointers.
	GO_STACK_DEPTH = 32,
};

// Who is a target (the target_mode setting).
enum mode {
	MODE_ALL = 0,    // every task (record -a, the exporter)
	MODE_PIDS = 1,   // the processes in the targets map and their children
	MODE_CGROUP = 2, // the tasks of target_cgroup and its descendants
};

// Values of the targets map in MODE_PIDS.
enum target_state {
	TARGET_YES = 1,
	// A command that becomes a target when it execs, as perf's
	// enable_on_exec: the launcher before it is not the command.
	TARGET_AT_EXEC = 2,
};

// Where each counter slot's counts come from (the slot_src setting);
// cacheheat.c says why the software events are not read from their perf
// counters at every switch.
enum slot_source {
	SRC_COUNTER = 0,   // the slot's per-CPU perf counter
	SRC_CLOCK = 1,     // cpu-clock: switch timestamps
	SRC_SWITCH = 2,    // context-switches: one per switch-out
	SRC_MIGRATION = 3, // cpu-migrations: the task's se.nr_migrations
	SRC_FAULT = 4,     // page-faults: the perf counter, read only after the task faulted
	SRC_MAJFAULT = 5,  // major-faults: likewise
};

// The slot field of a sample key: which sampling program took it.
enum sample_slot {
	SLOT_CLOCK = 0,   // the cpu-clock sampler
	SLOT_MISS = 1,    // the primary miss event's (page faults in software mode)
	SAMPLE_SLOTS = 2, // sampling slots: last_val's fires[], stats_val's samples[]
	// Off-CPU time at a voluntary switch-out: the value is nanoseconds
	// blocked, not a count, and the stacks are in offcpu_stacks, or the
	// user stack in the thread's SLOT_OFFCPU_USTACK record before it.
	SLOT_OFFCPU = 2,
	// No sample: the first target event after user space armed
	// wake_armed (a quiet window), sent to wake the sleeping recorder.
	SLOT_WAKE = 3,
	// An off-CPU sample's user stack, walked at the switch-out (the
	// frames follow the header, ulen bytes); the SLOT_OFFCPU record of
	// the same thread that follows it in the ring has ustack OWN_USTACK.
	SLOT_OFFCPU_USTACK = 4,
};

// Why a task left the CPU, from its state at the switch: the index of the
// per-cgroup off-CPU histograms.
enum offcpu_reason {
	OFFCPU_PREEMPTED = 0, // still runnable: preempted or yielded
	OFFCPU_SLEEP = 1,     // TASK_INTERRUPTIBLE: futex, poll, sleep, pipe
	OFFCPU_BLOCKED = 2,   // TASK_UNINTERRUPTIBLE: mostly disk I/O
	OFFCPU_IDLE = 3,      // TASK_IDLE (NOLOAD): idle kernel worker threads
	OFFCPU_OTHER = 4,     // stopped, traced, dead
	OFFCPU_REASONS = 5,
};

// A wait code: what the kernel knew of a target thread when it left the
// CPU, packed in a u32. The BPF side only records it; user space names
// the off-CPU reason from it with a table (collector/wait.go), so the
// classification is data, tested without a kernel. The syscall number is
// x86-64's (the programs are x86-only, see in_kernel). Values are written
// in decimal: bpf/contract_test.go reads this file.
enum wait_bits {
	WAIT_NR_MASK = 1023,       // bits 0-9: the system call the thread blocked in
	WAIT_NR_NONE = 1023,       // not in a system call (an exception: a page fault)
	WAIT_FD_SHIFT = 10,        // bits 10-13: enum fd_kind of the call's file descriptor
	WAIT_FD_MASK = 15360,      // 0xf << 10
	WAIT_IOWAIT = 16384,       // 1 << 14: in_iowait, blocked in io_schedule (block I/O)
	WAIT_UNINTERRUPTIBLE = 32768, // 1 << 15: TASK_UNINTERRUPTIBLE
	WAIT_NOLOAD = 65536,       // 1 << 16: TASK_IDLE, an idle kernel worker
	WAIT_GO_IDLE = 131072,     // 1 << 17: a Go thread in the scheduler with no goroutine locked to it
	WAIT_KTHREAD = 262144,     // 1 << 18: a kernel thread, no system call to read
	WAIT_PREEMPTED = 524288,   // 1 << 19: still runnable, preempted or yielded
	WAIT_JOIN = 1048576,       // 1 << 20: a futex wait for another thread of the process to exit (pthread_join)
	WAIT_NO_WAKER = 2097152,   // 1 << 21: set at the switch-in: woken from an interrupt or on an idle CPU (a timeout, a signal), by no task
	// Bits 24-29, in an off-CPU stack sample's key only: the log2 bucket
	// of the sampled wait's length, so user space can scale samples to
	// the exact time of waits of their code and length.
	WAIT_BUCKET_SHIFT = 24,
	WAIT_BUCKET_MASK = 1056964608, // 63 << 24
};

// What a system call's file descriptor (its first argument) is, from the
// inode's type and, for a socket, its address family.
enum fd_kind {
	FD_NONE = 0,       // the call takes no file descriptor (or it was not read)
	FD_REG = 1,        // a regular file
	FD_DIR = 2,
	FD_CHR = 3,        // a character device: a terminal, /dev/...
	FD_BLK = 4,        // a block device
	FD_FIFO = 5,       // a pipe or FIFO
	FD_SOCK_INET = 6,  // an IPv4 or IPv6 socket
	FD_SOCK_UNIX = 7,  // a Unix-domain socket
	FD_SOCK_OTHER = 8, // netlink and other families
	FD_ANON = 9,       // an anonymous inode: eventfd, timerfd, signalfd, epoll
	FD_BAD = 10,       // not an open descriptor
};

#endif
