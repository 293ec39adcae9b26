package attribution

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/cacheheat/cacheheat/profile"
)

// Units of evidence values.
const (
	UnitRatio     = "ratio" // a fraction in [0, 1], printed as a percentage
	UnitNS        = "ns"
	UnitTimes     = "x" // a multiple of a baseline
	UnitPerSecond = "/s"
	UnitPerThread = "/s per thread"
	UnitMPKI      = "per 1000 instructions"
	UnitSamples   = "samples"
	UnitEvents    = "events"
)

// Need kinds.
const (
	NeedEvent     = "event"
	NeedHistogram = "histogram"
	NeedSamples   = "samples"
)

// Need is one input of a rule. For events and histograms, AnyOf lists
// alternatives of which one suffices (a vendor's name for the same
// thing, or any histogram at all).
type Need struct {
	Kind  string   `json:"kind"`
	AnyOf []string `json:"any_of,omitempty"`
	// Label names a need with many alternatives in short.
	Label string `json:"label,omitempty"`
}

func event(names ...string) Need { return Need{Kind: NeedEvent, AnyOf: names} }
func hist(names ...string) Need  { return Need{Kind: NeedHistogram, AnyOf: names} }

var samples = Need{Kind: NeedSamples}

// String names the need as the report shows it.
func (n Need) String() string {
	if n.Label != "" {
		return n.Label
	}
	switch n.Kind {
	case NeedSamples:
		return "stack samples"
	case NeedFunctions:
		return "--func functions"
	case NeedHistogram:
		return strings.Join(n.AnyOf, " or ") + " histogram"
	}
	return strings.Join(n.AnyOf, " or ")
}

// Threshold is one limit a rule holds a metric to.
type Threshold struct {
	Metric string  `json:"metric"`
	Op     string  `json:"op"` // ">", ">=", "<", "<="
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	// Why says where the number comes from.
	Why string `json:"why"`
}

// pass reports whether v meets the threshold; NaN (a ratio of nothing)
// never does.
func (t Threshold) pass(v float64) bool {
	if math.IsNaN(v) {
		return false
	}
	switch t.Op {
	case ">":
		return v > t.Value
	case ">=":
		return v >= t.Value
	case "<":
		return v < t.Value
	case "<=":
		return v <= t.Value
	}
	return false
}

func (t Threshold) evidence(v float64) Evidence {
	return Evidence{Metric: t.Metric, Value: v, Threshold: t.Value, Op: t.Op, Unit: t.Unit}
}

// Rule is one row of the rule table. Everything but eval is data that
// docs/ATTRIBUTION.md is generated from.
type Rule struct {
	ID    string `json:"id"` // stable: scripts and CI depend on it
	Title string `json:"title"`
	Needs []Need `json:"needs"`
	// Formula says how the metrics are computed from the inputs.
	Formula    string      `json:"formula"`
	Thresholds []Threshold `json:"thresholds"`
	// Source cites where the pattern and its numbers come from.
	Source string `json:"source"`
	Advice string `json:"advice"`
	// Approximation is set when a metric is approximated from generic
	// events; every finding of the rule carries it.
	Approximation string `json:"approximation,omitempty"`
	// Confidence is the base confidence of a finding.
	Confidence float64 `json:"confidence"`

	eval func(m *Metrics, r *Rule) []Finding
}

// T returns the named threshold. A missing name is a bug in the table,
// caught by the tests.
func (r *Rule) T(metric string) Threshold {
	for _, t := range r.Thresholds {
		if t.Metric == metric {
			return t
		}
	}
	panic(fmt.Sprintf("attribution: rule %s has no threshold %q", r.ID, metric))
}

// Rules returns the rule table, for docs and tests.
func Rules() []Rule {
	out := make([]Rule, len(table))
	copy(out, table)
	return out
}

// Hardware says whether the rule needs a hardware event: one of its event
// needs has no software alternative. Its findings come from PMU counts
// (or a simulated PMU's stand-ins).
func (r *Rule) Hardware() bool {
	for _, n := range r.Needs {
		if n.Kind != NeedEvent {
			continue
		}
		hw := true
		for _, e := range n.AnyOf {
			if slices.Contains(softwareEvents, e) {
				hw = false
			}
		}
		if hw {
			return true
		}
	}
	return false
}

// softwareEvents are the kernel's software events the rules read.
var softwareEvents = []string{evCPUClock, evPageFaults, evContextSwitch, evCPUMigrations}

func (r *Rule) events() []string {
	var out []string
	for _, n := range r.Needs {
		if n.Kind == NeedEvent {
			out = append(out, n.AnyOf...)
		}
	}
	return out
}

// notEvaluated reports the needs a recording does not satisfy, with the
// reason for each, grouped so that "A, B (unsupported on this host: no
// PMU)" is said once.
func (r *Rule) notEvaluated(m *Metrics) (NotEvaluated, bool) {
	var needs []string
	var reasons []string
	byReason := map[string][]string{}
	for _, n := range r.Needs {
		name, reason, ok := m.satisfies(n)
		if ok {
			continue
		}
		needs = append(needs, name)
		if _, seen := byReason[reason]; !seen {
			reasons = append(reasons, reason)
		}
		byReason[reason] = append(byReason[reason], name)
	}
	if len(needs) == 0 {
		return NotEvaluated{}, false
	}
	var parts []string
	for _, reason := range reasons {
		if len(reasons) == 1 {
			parts = append(parts, reason)
		} else {
			parts = append(parts, strings.Join(byReason[reason], ", ")+": "+reason)
		}
	}
	return NotEvaluated{Rule: r.ID, Title: r.Title, Needs: needs, Reason: strings.Join(parts, "; ")}, true
}

// satisfies checks one need. When it is not met it returns the need's
// name and why, from the recording's event status.
func (m *Metrics) satisfies(n Need) (name, reason string, ok bool) {
	switch n.Kind {
	case NeedFunctions:
		if len(m.rec.Header.Functions) > 0 {
			return "", "", true
		}
		return n.String(), "not recorded (add --func SYMBOL)", false
	case NeedSamples:
		if m.HasSamples() {
			return "", "", true
		}
		return n.String(), "not recorded (add -F HZ)", false
	case NeedHistogram:
		for _, h := range n.AnyOf {
			if m.HasHistogram(h) {
				return "", "", true
			}
		}
		return n.String(), "not recorded by this recording", false
	}
	for _, e := range n.AnyOf {
		if m.Measured(e) {
			return "", "", true
		}
	}
	// Say why for the alternative the recorder tried; when it tried none,
	// suggest the first.
	for _, e := range n.AnyOf {
		st, tried := m.status[e]
		if !tried {
			continue
		}
		switch st.Status {
		case profile.StatusUnsupported:
			return e, "unsupported on this host: " + orUnknown(st.Reason), false
		case profile.StatusDenied:
			return e, "denied: " + orUnknown(st.Reason), false
		}
		return e, st.Status + ": " + orUnknown(st.Reason), false
	}
	if len(n.AnyOf) > 1 {
		return n.String(), "not recorded (the recorder knows no encoding of it for this CPU model)", false
	}
	return n.String(), "not recorded (add -e " + n.AnyOf[0] + ")", false
}

func orUnknown(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

// severity grades a finding by its primary metric's margin over the
// threshold.
func severity(t Threshold, v float64) string {
	switch t.Op {
	case ">", ">=":
		if t.Value > 0 && v >= 2*t.Value {
			return SeverityHigh
		}
	case "<", "<=":
		if v <= t.Value/2 {
			return SeverityHigh
		}
	}
	return SeverityMedium
}

// allPass evaluates thresholds in order and returns the evidence; ok is
// false when any fails.
func allPass(pairs ...any) (ev []Evidence, ok bool) {
	ok = true
	for i := 0; i+1 < len(pairs); i += 2 {
		t := pairs[i].(Threshold)
		v := pairs[i+1].(float64)
		ev = append(ev, t.evidence(v))
		if !t.pass(v) {
			ok = false
		}
	}
	return ev, ok
}

// Shared threshold rationales.
const (
	whyInstrFloor = "floor: below 10^8 instructions/s (a twentieth of one 2 GHz core at IPC 1) ratios are noise and the cost is small"
	whyMemFloor   = "floor: 10^6 misses/s at 80 ns each (a local DRAM access on a two-socket server takes 70-90 ns) is 8% of one core's time"
	whySampleMin  = "floor: 50 samples is half a CPU-second at the default 99 Hz; the standard error of a 90% share is then 4 points, and all 50 on one core would be a 1-in-190 chance at a true share of 90%"
)

// table is the rule table. IDs are stable.
var table = []Rule{
	{
		ID:    "l1-bandwidth-contention",
		Title: "L1 bandwidth contention on one core",
		Needs: []Need{samples, event(evL1Loads), event(evL1LoadMisses), event(evLLCLoads), event(evLLCStores)},
		Formula: "top core share = target samples on the busiest core / all target samples; " +
			"L1 miss ratio = L1-dcache-load-misses / L1-dcache-loads on that core; " +
			"write-back/load = LLC-stores / LLC-loads on that core",
		Thresholds: []Threshold{
			{Metric: "samples", Op: ">=", Value: 50, Unit: UnitSamples, Why: whySampleMin},
			{Metric: "top core share of samples", Op: ">", Value: 0.90, Unit: UnitRatio, Why: "the O3 performance guide's bottleneck table: a hotspot is one core with more than 90% of the load"},
			{Metric: "L1 miss ratio", Op: ">", Value: 0.75, Unit: UnitRatio, Why: "the O3 performance guide's bottleneck table: L1/L2 miss ratio over 75%"},
			{Metric: "write-back/load", Op: "<", Value: 0.3, Unit: "", Why: "the O3 performance guide's bottleneck table: write-back/load under 0.3"},
		},
		Source:        "the O3 performance guide's bottleneck patterns, implemented as stated and not verified by this project",
		Advice:        "One core misses in L1 on most loads but writes little back: its working set streams through L1. Block (tile) the loop so a tile stays in L1/L2, or spread the work over more cores.",
		Approximation: "write-back/load is approximated by LLC-stores / LLC-loads: generic perf events have no L1 or L2 write-back count.",
		Confidence:    0.6,
		eval:          evalL1Contention,
	},
	{
		ID:    "l3-writeback-congestion",
		Title: "L3 write-back queue congestion on a NUMA node",
		Needs: []Need{event(evLLCLoads), event(evLLCLoadMisses), event(evLLCStores)},
		Formula: "per node: top core share = the node's busiest core's LLC-load-misses / the node's LLC-load-misses; " +
			"LLC miss ratio = LLC-load-misses / LLC-loads; write-back/load = LLC-stores / LLC-loads",
		Thresholds: []Threshold{
			{Metric: "LLC-load-misses/s on the node", Op: ">=", Value: 1e6, Unit: UnitPerSecond, Why: whyMemFloor},
			{Metric: "top core share of the node's misses", Op: "<=", Value: 0.90, Unit: UnitRatio, Why: "the O3 performance guide's bottleneck table: spread across a NUMA node (not the one-core hotspot)"},
			{Metric: "LLC miss ratio (low)", Op: ">=", Value: 0.40, Unit: UnitRatio, Why: "the O3 performance guide's bottleneck table: miss ratio 40-60%"},
			{Metric: "LLC miss ratio (high)", Op: "<=", Value: 0.60, Unit: UnitRatio, Why: "the O3 performance guide's bottleneck table: miss ratio 40-60%"},
			{Metric: "write-back/load", Op: ">", Value: 1.8, Unit: "", Why: "the O3 performance guide's bottleneck table: write-back/load over 1.8"},
		},
		Source:        "the O3 performance guide's bottleneck patterns, implemented as stated and not verified by this project",
		Advice:        "Many cores of one node write back more lines than they load: the L3/memory controller queue is the bottleneck. Reduce written data (in-place updates, narrower types), batch writes (write-combining), or spread the writers over nodes.",
		Approximation: "write-back/load is approximated by LLC-stores / LLC-loads: generic perf events have no L3 write-back count.",
		Confidence:    0.6,
		eval:          evalL3Writeback,
	},
	{
		ID:      "llc-thrashing",
		Title:   "last-level cache thrashing",
		Needs:   []Need{event(evLLCLoads), event(evLLCLoadMisses), event(evInstructions)},
		Formula: "LLC MPKI = 1000 * LLC-load-misses / instructions; LLC miss ratio = LLC-load-misses / LLC-loads (likwid L3CACHE group: L3 miss rate and miss ratio)",
		Thresholds: []Threshold{
			{Metric: "instructions/s", Op: ">=", Value: 1e8, Unit: UnitPerSecond, Why: whyInstrFloor},
			{Metric: "LLC MPKI", Op: ">", Value: 5, Unit: UnitMPKI, Why: "5 misses per 1000 instructions at ~250 cycles each (80 ns at 3 GHz) is over 1 stall cycle per instruction unless overlapped: memory-bound"},
			{Metric: "LLC miss ratio", Op: ">", Value: 0.5, Unit: UnitRatio, Why: "more than half the LLC lookups miss: the working set does not fit"},
		},
		Source:     "likwid performance groups L3CACHE (miss rate = misses / instructions, miss ratio = misses / requests); threshold: this project (see Why)",
		Advice:     "The working set does not fit in the LLC. Shrink it (smaller types, structure-of-arrays), tile loops so a tile fits, or make the access pattern sequential so prefetchers help.",
		Confidence: 0.8,
		eval:       evalLLCThrashing,
	},
	{
		ID:      "remote-numa",
		Title:   "remote NUMA memory accesses",
		Needs:   []Need{event(evNodeLoads), event(evNodeLoadMisses)},
		Formula: "remote share = node-load-misses / node-loads (perf's node events: loads served by the local node vs a remote one)",
		Thresholds: []Threshold{
			{Metric: "node-loads/s", Op: ">=", Value: 1e6, Unit: UnitPerSecond, Why: whyMemFloor},
			{Metric: "remote share", Op: ">", Value: 0.2, Unit: UnitRatio, Why: "remote DRAM costs about 2.5 times local on a two-socket server (180-220 ns against 70-90 ns); 20% remote raises the mean memory latency by ~30%"},
		},
		Source:     "perf generic node-loads/node-load-misses (the kernel's per-model offcore/L3-miss encodings); DRAM latencies: typical two-socket server figures",
		Advice:     "Threads read memory that lives on another node. Bind threads and memory together (numactl --cpunodebind=N --membind=N), allocate on the thread that uses the data (first touch), or interleave shared data.",
		Confidence: 0.8,
		eval:       evalRemoteNUMA,
	},
	{
		ID:      "dtlb-pressure",
		Title:   "data TLB pressure",
		Needs:   []Need{event(evDTLBLoadMisses), event(evInstructions)},
		Formula: "dTLB MPKI = 1000 * dTLB-load-misses / instructions (likwid TLB_DATA group: L1 DTLB load miss rate)",
		Thresholds: []Threshold{
			{Metric: "instructions/s", Op: ">=", Value: 1e8, Unit: UnitPerSecond, Why: whyInstrFloor},
			{Metric: "dTLB MPKI", Op: ">", Value: 1, Unit: UnitMPKI, Why: "a page walk costs 20-100+ cycles; one per 1000 instructions is 2-10% of cycles at IPC 1"},
		},
		Source:     "likwid performance groups TLB_DATA; threshold: this project (see Why)",
		Advice:     "Loads miss the data TLB: the working set spans too many pages. Use huge pages (THP: madvise(MADV_HUGEPAGE)), or improve locality so fewer pages are touched.",
		Confidence: 0.8,
		eval:       evalDTLB,
	},
	{
		ID:      "false-sharing",
		Title:   "false sharing (cache-to-cache transfers of modified lines)",
		Needs:   []Need{{Kind: NeedEvent, AnyOf: hitmEvents, Label: "HITM event (" + strings.Join(hitmEvents, " or ") + ")"}, event(evInstructions)},
		Formula: "HITM per 1000 instructions = 1000 * (loads that hit a line modified in another core's cache) / instructions; the vendor's events, summed where a model has several (Intel mem_load_l3_hit_retired.xsnp_hitm/xsnp_fwd; AMD Zen 4 ls_dmnd_fills_from_sys.near_cache + far_cache, Zen 3 ext_cache_local + ext_cache_remote, Zen 2 ls_refills_from_sys.ls_mabresp_rmt_cache; names from the kernel's pmu-events)",
		Thresholds: []Threshold{
			{Metric: "instructions/s", Op: ">=", Value: 1e8, Unit: UnitPerSecond, Why: whyInstrFloor},
			{Metric: "HITM per 1000 instructions", Op: ">", Value: 0.25, Unit: UnitMPKI, Why: "a load of a line modified in another core's cache costs ~127 ns (the O3 performance guide's figure), ~400 cycles at 3 GHz: 0.25 per 1000 instructions is ~10% of cycles at IPC 1, twice the 5%-of-cycles threshold of Intel TMA's Contested_Accesses node (toplev, tma_contested_accesses)"},
		},
		Source:     "Intel TMA (toplev) Contested_Accesses, which counts the same HITM loads; perf c2c; event names from the kernel's tools/perf/pmu-events; cost: the O3 performance guide",
		Advice:     "Cores write to cache lines that other cores read or write. Pad per-thread data to its own 64-byte line (alignas(64)), or batch updates per thread and combine at the end. 'perf c2c' names the lines.",
		Confidence: 0.7,
		eval:       evalFalseSharing,
	},
	{
		ID:      "core-hotspot",
		Title:   "load concentrated on one core",
		Needs:   []Need{samples},
		Formula: "top core share = target samples on the busiest core / all target samples; demand = (target on-CPU time on a core + its run-queue wait there) / recorded time, on-CPU time from cpu-clock (or samples / sample rate without it), run-queue wait from the runq-latency histogram when recorded",
		Thresholds: []Threshold{
			{Metric: "samples", Op: ">=", Value: 50, Unit: UnitSamples, Why: whySampleMin},
			{Metric: "top core share of samples", Op: ">", Value: 0.90, Unit: UnitRatio, Why: "the O3 performance guide's bottleneck table: a hotspot is one core with more than 90% of the load"},
			{Metric: "top core demand", Op: ">=", Value: 0.5, Unit: UnitRatio, Why: "floor: the target runs or waits to run on that core at least half the time, so the concentration costs throughput (an idle target never fires); demand, not on-CPU time, so that competing load on a shared host does not hide it"},
			{Metric: "least demanded other core", Op: "<", Value: 0.5, Unit: UnitRatio, Why: "the target leaves at least one other recorded core half unused"},
		},
		Source:     "the O3 performance guide's bottleneck patterns (one core over 90%)",
		Advice:     "The target runs on one core while others have spare time: it is single-threaded or pinned (taskset, cpuset, IRQ affinity). Parallelize the hot loop or widen the affinity mask.",
		Confidence: 0.9,
		eval:       evalCoreHotspot,
	},
	{
		ID:      "cpu-saturation",
		Title:   "CPU saturation (threads wait in the run queue)",
		Needs:   []Need{hist(profile.HistRunqLatency)},
		Formula: "per window: p99 of the runq-latency histogram (wakeup or preemption to running, summed over CPUs); saturated windows = windows with p99 over the threshold / all windows",
		Thresholds: []Threshold{
			{Metric: "run-queue events per window", Op: ">=", Value: 20, Unit: UnitEvents, Why: "floor: a p99 of fewer events is the maximum of a handful"},
			{Metric: "runq-latency p99", Op: ">", Value: 1e6, Unit: UnitNS, Why: "the scheduler's base slice is 0.75-3 ms: a p99 wait over 1 ms means runnable threads queue behind full slices of others"},
			{Metric: "share of windows saturated", Op: ">=", Value: 0.5, Unit: UnitRatio, Why: "saturation in most of the recording, not a burst (bursts are latency-tail's job)"},
		},
		Source:     "Brendan Gregg's USE method (CPU saturation = run-queue latency); runqlat (bcc); threshold: scheduler slice length",
		Advice:     "Use fewer threads (a pool sized to the CPUs), give the target more CPUs, or move competing load away. (A finding says whether the target's own demand or other load fills the CPUs.)",
		Confidence: 0.9,
		eval:       evalCPUSaturation,
	},
	{
		ID:      "off-cpu-blocking",
		Title:   "threads blocked off-CPU",
		Needs:   []Need{hist(profile.HistOffCPU), hist(profile.HistRunqLatency), event(evContextSwitch), event(evCPUClock)},
		Formula: "blocked share = (off-CPU time - run-queue wait) / (off-CPU time + on-CPU time): off-CPU time (switch-out to switch-in) from the offcpu histogram, minus the part spent runnable (runq-latency histogram), over all thread time; on-CPU time from cpu-clock; switch rate = context-switches / thread-seconds and / second",
		Thresholds: []Threshold{
			{Metric: "blocked share", Op: ">", Value: 0.5, Unit: UnitRatio, Why: "threads spend more time blocked (not runnable) than running or waiting to run"},
			{Metric: "context-switches per thread", Op: ">", Value: 100, Unit: UnitPerThread, Why: "a block every 10 ms or more often is lock or I/O churn, not a thread that simply sleeps (an idle sleep switches once)"},
			{Metric: "context-switches/s", Op: ">=", Value: 1000, Unit: UnitPerSecond, Why: "floor: at a few microseconds each plus the cache refill after it, 1000 switches/s is about 1% of a core; an idle Go runtime (sysmon's 10 ms tick) stays below it"},
		},
		Source:        "Brendan Gregg, off-CPU analysis; thresholds: this project (see Why)",
		Advice:        "Threads block more than they run, often: lock contention, synchronous I/O or a too-small pool. Look at the off-CPU stacks (where they block); shorten critical sections, use read-mostly structures (RCU) or batch the I/O.",
		Approximation: "off-CPU time and run-queue wait are estimated from their log2 histograms as each bucket's count times its midpoint (within -33%..+50% per value; a preemption lands in the same bucket of both, so it cancels).",
		Confidence:    0.8,
		eval:          evalOffCPU,
	},
	{
		ID:      "page-fault-storm",
		Title:   "page-fault storm",
		Needs:   []Need{event(evPageFaults)},
		Formula: "page-faults / recorded seconds, over the recording and per window",
		Thresholds: []Threshold{
			{Metric: "page-faults/s", Op: ">", Value: 10000, Unit: UnitPerSecond, Why: "a minor fault of a fresh page costs ~1-2 us (trap, zeroing 4 KiB, page-table update): 10,000/s is 1-2% of a core plus 40 MiB/s of cache-polluting zeroing; a steady-state process faults well under 100/s, so this is over 100x that baseline"},
		},
		Source:     "kernel page-faults software event; cost from the fault path (clear_page, ~1 us)",
		Advice:     "The target keeps touching fresh memory: it maps and frees buffers in a loop (malloc/free of large blocks goes to mmap/munmap) or its heap is returned to the OS between bursts. Reuse buffers, raise M_MMAP_THRESHOLD / M_TRIM_THRESHOLD, pre-fault (MAP_POPULATE) or use huge pages.",
		Confidence: 0.9,
		eval:       evalPageFaults,
	},
	{
		ID:      "migration-churn",
		Title:   "threads migrate between CPUs often",
		Needs:   []Need{event(evCPUMigrations)},
		Formula: "cpu-migrations / thread-seconds (threads present in a window times its length)",
		Thresholds: []Threshold{
			{Metric: "cpu-migrations per thread", Op: ">", Value: 50, Unit: UnitPerThread, Why: "each migration starts on cold L1/L2 (refilling 1+ MiB of L2 at ~10 GB/s is ~100 us): 50/s per thread is ~0.5% of its time or more, and a sign the scheduler keeps rebalancing"},
		},
		Source:     "kernel cpu-migrations software event; threshold: this project (see Why)",
		Advice:     "Threads hop between CPUs and restart on cold caches. Pin long-running threads (sched_setaffinity, taskset), use fewer threads than CPUs, or reduce wake-ups that trigger rebalancing.",
		Confidence: 0.7,
		eval:       evalMigrations,
	},
	{
		ID:      "latency-tail",
		Title:   "latency tail coincides with a cause",
		Needs:   []Need{hist(profile.HistRunqLatency, profile.HistOffCPU), event(tailCauses...)},
		Formula: "over windows at least half the median window length: tail windows = windows whose histogram p99 is over the floor and at least the tail factor times the median window's p99; cause = the counter whose rate in tail windows is the largest multiple of its median-window rate",
		Thresholds: []Threshold{
			{Metric: "events per window", Op: ">=", Value: 20, Unit: UnitEvents, Why: "floor: a p99 of fewer events is the maximum of a handful"},
			{Metric: "windows with enough events", Op: ">=", Value: 4, Unit: "windows", Why: "a median and a tail need several windows"},
			{Metric: "tail window p99", Op: ">", Value: 1e6, Unit: UnitNS, Why: "floor: the O3 performance guide's long-tail latency buckets start at 1 ms"},
			{Metric: "tail p99 over median window p99", Op: ">=", Value: 4, Unit: UnitTimes, Why: "two log2 buckets above the median: not bucket jitter"},
			{Metric: "cause rate over median window", Op: ">=", Value: 2, Unit: UnitTimes, Why: "the cause at least doubles in the tail windows"},
			{Metric: "cause rate excess", Op: ">=", Value: 100, Unit: UnitPerSecond, Why: "floor: the cause adds at least 100 events/s, not a few"},
		},
		Source:     "the O3 performance guide's long-tail latency attribution (generalized from its cache-miss cause to any counter)",
		Advice:     "Latency spikes in some windows coincide with a burst of the named cause; fix that cause first (see the rule that matches it), then re-record.",
		Confidence: 0.6,
		eval:       evalLatencyTail,
	},
	{
		ID:      "function-tail",
		Title:   "a function's slowest calls, and what they did more of",
		Needs:   []Need{functions},
		Formula: "per --func function: tail = calls in the log2 latency bucket holding p99 and above, median = calls in the bucket holding p50 and its two neighbours (never overlapping the tail); per-call means of latency and of each counter in both groups; the extra time of a tail call (tail mean latency minus median) is split over on-CPU, run-queue and blocked time; the cause is the fault, switch or migration counter whose per-call mean is the largest multiple of the median's (a counter absent from the median calls counts as 0.01 per call)",
		Thresholds: []Threshold{
			{Metric: "calls", Op: ">=", Value: 100, Unit: "calls", Why: "floor: with fewer calls the p99 is the slowest call or two"},
			{Metric: "tail mean over median mean", Op: ">=", Value: 4, Unit: UnitTimes, Why: "two log2 buckets: more than bucket jitter"},
			{Metric: "tail calls with counters", Op: ">=", Value: 1, Unit: "calls", Why: "per-call means need a call whose counters were read on one thread"},
			{Metric: "cause per call, tail over median", Op: ">=", Value: tailCauseRatio, Unit: UnitTimes, Why: "a counter that rises less than the latency itself explains little of it"},
			{Metric: "cause per call, tail minus median", Op: ">=", Value: tailCauseExcess, Unit: UnitEvents, Why: "floor: at least one more event per slow call, not a stray one in many"},
		},
		Source:     "per-call deltas of the thread's own kernel counters (task_struct), bucketed by latency in BPF; docs/FUNCTIONS.md",
		Advice:     "The finding's verdict names where the slow calls' extra time went and what they did more of; fix that cause and re-record.",
		Confidence: 0.8,
		eval:       evalFunctionTail,
	},
}

// tailCauses are the counters latency-tail compares, most specific
// first.
var tailCauses = []string{
	evLLCLoadMisses, evL1LoadMisses, evDTLBLoadMisses, evNodeLoadMisses,
	evPageFaults, evContextSwitch, evCPUMigrations,
}

// topCPU returns the recorded CPU with the most of v and its share.
func (m *Metrics) topCPU(v func(cpu int) float64, cpus []int) (top int, share, total float64) {
	top = -1
	var best float64
	for _, c := range cpus {
		x := v(c)
		total += x
		if top < 0 || x > best {
			top, best = c, x
		}
	}
	return top, ratio(best, total), total
}

func (m *Metrics) samplesOn(cpu int) float64 {
	if cpu < 0 || cpu >= len(m.SamplesPerCPU) {
		return 0
	}
	return float64(m.SamplesPerCPU[cpu])
}

func evalL1Contention(m *Metrics, r *Rule) []Finding {
	top, share, total := m.topCPU(m.samplesOn, m.CPUs)
	if top < 0 {
		return nil
	}
	ev, ok := allPass(
		r.T("samples"), total,
		r.T("top core share of samples"), share,
		r.T("L1 miss ratio"), ratio(m.PerCPU(evL1LoadMisses, top), m.PerCPU(evL1Loads, top)),
		r.T("write-back/load"), ratio(m.PerCPU(evLLCStores, top), m.PerCPU(evLLCLoads, top)),
	)
	if !ok {
		return nil
	}
	return []Finding{{Severity: severity(r.T("L1 miss ratio"), ev[2].Value), Scope: Scope{CPUs: []int{top}}, Evidence: ev}}
}

func evalL3Writeback(m *Metrics, r *Rule) []Finding {
	var out []Finding
	for _, node := range m.Nodes() {
		cpus := m.NodeCPUs(node)
		if len(cpus) < 2 {
			continue // one core cannot show a spread
		}
		_, share, misses := m.topCPU(func(c int) float64 { return m.PerCPU(evLLCLoadMisses, c) }, cpus)
		loads := m.NodeTotal(evLLCLoads, node)
		mr := ratio(misses, loads)
		ev, ok := allPass(
			r.T("LLC-load-misses/s on the node"), misses/m.DurationS,
			r.T("top core share of the node's misses"), share,
			r.T("LLC miss ratio (low)"), mr,
			r.T("LLC miss ratio (high)"), mr,
			r.T("write-back/load"), ratio(m.NodeTotal(evLLCStores, node), loads),
		)
		if ok {
			out = append(out, Finding{Severity: severity(r.T("write-back/load"), ev[4].Value), Scope: Scope{CPUs: cpus}, Evidence: ev})
		}
	}
	return out
}

// mpkiCPUs lists the CPUs whose own MPKI of event passes t: the heatmap
// region a whole-target finding points at.
func (m *Metrics) mpkiCPUs(event string, t Threshold) []int {
	var out []int
	for _, c := range m.CPUs {
		if t.pass(1000 * ratio(m.PerCPU(event, c), m.PerCPU(evInstructions, c))) {
			out = append(out, c)
		}
	}
	return out
}

func evalLLCThrashing(m *Metrics, r *Rule) []Finding {
	mpki := 1000 * ratio(m.Total(evLLCLoadMisses), m.Total(evInstructions))
	ev, ok := allPass(
		r.T("instructions/s"), m.Rate(evInstructions),
		r.T("LLC MPKI"), mpki,
		r.T("LLC miss ratio"), ratio(m.Total(evLLCLoadMisses), m.Total(evLLCLoads)),
	)
	if !ok {
		return nil
	}
	return []Finding{{Severity: severity(r.T("LLC MPKI"), mpki), Scope: Scope{CPUs: m.mpkiCPUs(evLLCLoadMisses, r.T("LLC MPKI"))}, Evidence: ev}}
}

func evalRemoteNUMA(m *Metrics, r *Rule) []Finding {
	share := ratio(m.Total(evNodeLoadMisses), m.Total(evNodeLoads))
	ev, ok := allPass(
		r.T("node-loads/s"), m.Rate(evNodeLoads),
		r.T("remote share"), share,
	)
	if !ok {
		return nil
	}
	var cpus []int
	for _, c := range m.CPUs {
		if r.T("remote share").pass(ratio(m.PerCPU(evNodeLoadMisses, c), m.PerCPU(evNodeLoads, c))) {
			cpus = append(cpus, c)
		}
	}
	return []Finding{{Severity: severity(r.T("remote share"), share), Scope: Scope{CPUs: cpus}, Evidence: ev}}
}

func evalDTLB(m *Metrics, r *Rule) []Finding {
	mpki := 1000 * ratio(m.Total(evDTLBLoadMisses), m.Total(evInstructions))
	ev, ok := allPass(
		r.T("instructions/s"), m.Rate(evInstructions),
		r.T("dTLB MPKI"), mpki,
	)
	if !ok {
		return nil
	}
	return []Finding{{Severity: severity(r.T("dTLB MPKI"), mpki), Scope: Scope{CPUs: m.mpkiCPUs(evDTLBLoadMisses, r.T("dTLB MPKI"))}, Evidence: ev}}
}

func evalFalseSharing(m *Metrics, r *Rule) []Finding {
	// A model's cache-to-cache events count disjoint sources (same node,
	// other node): their sum is every such load.
	var names []string
	var hitm float64
	perCPU := map[int]float64{}
	for _, e := range hitmEvents {
		if !m.Measured(e) {
			continue
		}
		names = append(names, e)
		hitm += m.Total(e)
		for _, c := range m.CPUs {
			perCPU[c] += m.PerCPU(e, c)
		}
	}
	hpki := 1000 * ratio(hitm, m.Total(evInstructions))
	ev, ok := allPass(
		r.T("instructions/s"), m.Rate(evInstructions),
		r.T("HITM per 1000 instructions"), hpki,
	)
	if !ok {
		return nil
	}
	ev[1].Metric = strings.Join(names, " + ") + " per 1000 instructions"
	var cpus []int
	for _, c := range m.CPUs {
		if r.T("HITM per 1000 instructions").pass(1000 * ratio(perCPU[c], m.PerCPU(evInstructions, c))) {
			cpus = append(cpus, c)
		}
	}
	return []Finding{{Severity: severity(r.T("HITM per 1000 instructions"), hpki), Scope: Scope{CPUs: cpus}, Evidence: ev}}
}

func evalCoreHotspot(m *Metrics, r *Rule) []Finding {
	if len(m.CPUs) < 2 {
		return nil // nowhere else to run
	}
	top, share, total := m.topCPU(m.samplesOn, m.CPUs)
	if top < 0 {
		return nil
	}
	least := math.Inf(1)
	for _, c := range m.CPUs {
		if c != top {
			least = min(least, m.Demand(c))
		}
	}
	ev, ok := allPass(
		r.T("samples"), total,
		r.T("top core share of samples"), share,
		r.T("top core demand"), m.Demand(top),
		r.T("least demanded other core"), least,
	)
	if !ok {
		return nil
	}
	return []Finding{{Severity: severity(r.T("top core demand"), ev[2].Value), Scope: Scope{CPUs: []int{top}}, Evidence: ev}}
}

func evalCPUSaturation(m *Metrics, r *Rule) []Finding {
	floor, p99t, sharet := r.T("run-queue events per window"), r.T("runq-latency p99"), r.T("share of windows saturated")
	var saturated []int
	var p99s []float64
	for i, w := range m.Windows {
		b := w.Hist[profile.HistRunqLatency]
		if !floor.pass(float64(HistogramCount(b))) {
			continue
		}
		p := profile.Percentile(b, 0.99)
		if p99t.pass(p) {
			saturated = append(saturated, i)
			p99s = append(p99s, p)
		}
	}
	if len(m.Windows) == 0 {
		return nil
	}
	share := float64(len(saturated)) / float64(len(m.Windows))
	if !sharet.pass(share) {
		return nil
	}
	// The CPUs to look at are those whose own p99 over the saturated
	// windows is over the threshold.
	var cpus []int
	perCPU := map[int][]uint64{}
	for _, i := range saturated {
		for cpu, b := range m.Windows[i].HistPerCPU[profile.HistRunqLatency] {
			if perCPU[cpu] == nil {
				perCPU[cpu] = make([]uint64, profile.HistBuckets)
			}
			for j, c := range b {
				perCPU[cpu][j] += c
			}
		}
	}
	for cpu, b := range perCPU {
		if floor.pass(float64(HistogramCount(b))) && p99t.pass(profile.Percentile(b, 0.99)) {
			cpus = append(cpus, cpu)
		}
	}
	sort.Ints(cpus)
	med := median(p99s)
	first, last := m.Windows[saturated[0]], m.Windows[saturated[len(saturated)-1]]
	// Who oversubscribes the CPUs decides the fix: the target's own
	// demand (running or runnable) against the CPUs it was recorded on.
	var demand float64
	for _, c := range m.CPUs {
		demand += m.Demand(c)
	}
	advice := fmt.Sprintf("The target's threads wanted %.1f CPUs (running or runnable) of the %d recorded: it has more runnable threads than CPUs. Use fewer threads (a pool sized to the CPUs) or give the target more CPUs.", demand, len(m.CPUs))
	if demand <= float64(len(m.CPUs)) {
		advice = fmt.Sprintf("The target's threads wanted only %.1f CPUs (running or runnable) of the %d recorded: the queueing comes from other load on these CPUs. Move that load away or reserve CPUs for the target (cpuset, isolcpus).", demand, len(m.CPUs))
	}
	return []Finding{{
		Advice:   advice,
		Severity: severity(p99t, med),
		Scope:    Scope{CPUs: cpus, StartNS: first.StartNS, EndNS: last.EndNS},
		Evidence: []Evidence{
			{Metric: "runq-latency p99 (median of saturated windows)", Value: med, Threshold: p99t.Value, Op: p99t.Op, Unit: p99t.Unit},
			sharet.evidence(share),
		},
	}}
}

func evalOffCPU(m *Metrics, r *Rule) []Finding {
	off := HistogramSum(m.rec.HistogramTotal(profile.HistOffCPU))
	runq := HistogramSum(m.rec.HistogramTotal(profile.HistRunqLatency))
	on := m.Total(evCPUClock)
	share := ratio(max(off-runq, 0), off+on)
	perThread := ratio(m.Total(evContextSwitch), m.ThreadSeconds)
	ev, ok := allPass(
		r.T("blocked share"), share,
		r.T("context-switches per thread"), perThread,
		r.T("context-switches/s"), m.Rate(evContextSwitch),
	)
	if !ok {
		return nil
	}
	return []Finding{{Severity: severity(r.T("context-switches per thread"), perThread), Scope: Scope{CPUs: m.busyCPUs(evContextSwitch)}, Evidence: ev}}
}

// busyCPUs lists the CPUs on which the target counted at least a tenth of
// its share of an event: where to look on the heatmap.
func (m *Metrics) busyCPUs(event string) []int {
	var out []int
	total := m.Total(event)
	for _, c := range m.CPUs {
		if total > 0 && m.PerCPU(event, c) >= 0.1*total/float64(len(m.CPUs)) {
			out = append(out, c)
		}
	}
	return out
}

func evalPageFaults(m *Metrics, r *Rule) []Finding {
	t := r.T("page-faults/s")
	rate := m.Rate(evPageFaults)
	if !t.pass(rate) {
		return nil
	}
	// The time range is the windows that are themselves over the floor.
	var start, end int64 = -1, 0
	for _, w := range m.Windows {
		if t.pass(w.Rate(evPageFaults)) {
			if start < 0 {
				start = w.StartNS
			}
			end = w.EndNS
		}
	}
	sc := Scope{CPUs: m.busyCPUs(evPageFaults)}
	if start >= 0 {
		sc.StartNS, sc.EndNS = start, end
	}
	return []Finding{{Severity: severity(t, rate), Scope: sc, Evidence: []Evidence{t.evidence(rate)}}}
}

func evalMigrations(m *Metrics, r *Rule) []Finding {
	if len(m.CPUs) < 2 {
		return nil
	}
	t := r.T("cpu-migrations per thread")
	v := ratio(m.Total(evCPUMigrations), m.ThreadSeconds)
	if !t.pass(v) {
		return nil
	}
	return []Finding{{Severity: severity(t, v), Scope: Scope{CPUs: m.busyCPUs(evCPUMigrations)}, Evidence: []Evidence{t.evidence(v)}}}
}

func evalLatencyTail(m *Metrics, r *Rule) []Finding {
	nwin, floor, factor := r.T("windows with enough events"), r.T("tail window p99"), r.T("tail p99 over median window p99")
	causeT, excessT := r.T("cause rate over median window"), r.T("cause rate excess")
	minEvents := r.T("events per window")
	var lens []float64
	for _, w := range m.Windows {
		lens = append(lens, w.DurationS)
	}
	full := median(lens) / 2
	var out []Finding
	for _, h := range []string{profile.HistRunqLatency, profile.HistOffCPU} {
		var idx []int
		var p99 []float64
		for i, w := range m.Windows {
			// A partial window (the last one, cut short by the target's
			// exit) holds the exit of every thread and a rate over a
			// fraction of a window: it is no sample of the steady state.
			if w.DurationS < full {
				continue
			}
			if b := w.Hist[h]; minEvents.pass(float64(HistogramCount(b))) {
				idx = append(idx, i)
				p99 = append(p99, profile.Percentile(b, 0.99))
			}
		}
		if !nwin.pass(float64(len(idx))) {
			continue
		}
		med := median(p99)
		var tail []int
		var tailP99 []float64
		for k, i := range idx {
			if floor.pass(p99[k]) && factor.pass(ratio(p99[k], med)) {
				tail = append(tail, i)
				tailP99 = append(tailP99, p99[k])
			}
		}
		if len(tail) == 0 {
			continue
		}
		// Pick the cause whose tail-window rate is the largest multiple of
		// its median-window rate.
		var best string
		var bestX, bestTail, bestMed float64
		for _, e := range tailCauses {
			if !m.Measured(e) {
				continue
			}
			var rates []float64
			for _, i := range idx {
				rates = append(rates, m.Windows[i].Rate(e))
			}
			medR := median(rates)
			var tailR float64
			for _, i := range tail {
				tailR += m.Windows[i].Rate(e)
			}
			tailR /= float64(len(tail))
			x := tailR / max(medR, 1) // a cause absent from the median window counts as 1/s
			if causeT.pass(x) && excessT.pass(tailR-medR) && x > bestX {
				best, bestX, bestTail, bestMed = e, x, tailR, medR
			}
		}
		if best == "" {
			continue
		}
		tp := median(tailP99)
		first, last := m.Windows[tail[0]], m.Windows[tail[len(tail)-1]]
		ev := []Evidence{
			{Metric: h + " p99 in tail windows (median)", Value: tp, Threshold: floor.Value, Op: floor.Op, Unit: UnitNS},
			factor.evidence(ratio(tp, med)),
			{Metric: best + "/s in tail windows over median window", Value: bestX, Threshold: causeT.Value, Op: causeT.Op, Unit: UnitTimes},
			{Metric: best + "/s in tail windows minus median window", Value: bestTail - bestMed, Threshold: excessT.Value, Op: excessT.Op, Unit: UnitPerSecond},
		}
		out = append(out, Finding{
			Severity: severity(factor, ratio(tp, med)),
			Scope:    Scope{CPUs: m.busyCPUs(best), StartNS: first.StartNS, EndNS: last.EndNS},
			Evidence: ev,
		})
	}
	return out
}
