// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
// Sizes and layouts shared by bpf/funclat.c and the collector: function
// latency with the task's own counters per call. The enums reach Go through
// bpf2go's -type (gen.go), as in cacheheat.h; bpf/contract_test.go checks
// them.
#ifndef FUNCLAT_H
#define FUNCLAT_H

enum func_size {
	// Functions per recording (--func may be given this many times).
	FUNC_MAX = 16,
	// Log2 latency buckets, the layout of every cacheheat histogram:
	// bucket 0 holds [0, 2) ns, bucket i holds [2^i, 2^(i+1)) ns, the last
	// one also everything larger. 100 ns is bucket 6, 10 s bucket 33.
	FUNC_BUCKETS = 40,
};

// Per-call counter deltas, in this order everywhere (profile.FunctionCounters
// in user space).
enum func_counter {
	FC_ONCPU_NS = 0,   // on-CPU time of the calling thread
	FC_RUNQ_NS = 1,    // waiting on a run queue (sched_info.run_delay)
	FC_BLOCKED_NS = 2, // off-CPU and not runnable: latency - on-CPU - run queue
	FC_MINFLT = 3,     // minor page faults
	FC_MAJFLT = 4,     // major page faults
	FC_NVCSW = 5,      // voluntary context switches
	FC_NIVCSW = 6,     // involuntary context switches
	FC_MIGRATIONS = 7, // CPU migrations (se.nr_migrations)
	FC_COUNT = 8,
};

// One latency bucket of one function: cumulative since load.
struct func_bucket {
	u64 calls;
	// counted: calls whose counter deltas are in sum[]. A goroutine that
	// moved to another thread during the call has latency but no valid
	// per-thread deltas, so it is in calls and not in counted.
	u64 counted;
	u64 lat_ns;   // summed latency
	u64 sum[FC_COUNT];
};

// Per-function bookkeeping, cumulative since load.
struct func_stats {
	u64 entries;     // entry probes that started a call
	u64 returns;     // returns matched with their entry (= calls)
	u64 unmatched;   // returns without an entry: evicted from the full in-flight map, or entered before attach
	u64 abandoned;   // entries replaced by a new call at the same stack depth: the old one never returned (panic, longjmp)
	u64 moved;       // goroutines that returned on another thread
	u64 ev_dropped;  // per-call events lost because the ring buffer was full
	u64 inflight_full; // entries that could not be stored (map refused, or no goroutine in R14)
};

// A per-call event (--func-events).
struct func_event {
	u32 func;
	u32 tid;
	u32 pid;
	u32 moved;
	u64 start_ns; // bpf_ktime_get_ns at entry
	u64 lat_ns;
	u64 delta[FC_COUNT];
};

// Cookie bits of an attached probe: the function's index in the low bits,
// and whether it is a Go function (keyed by goroutine, returns probed at
// its RET instructions) or a C one (keyed by thread, uretprobe). The Go
// bit is above 32 bits, which an enum cannot hold: its shift is the enum.
enum cookie_bits {
	COOKIE_GO_SHIFT = 32,
	COOKIE_FUNC_MASK = 65535, // 0xffff
};
#define COOKIE_GO (1ULL << COOKIE_GO_SHIFT)

#endif
