package attribution

import (
	"fmt"
	"math"
	"strings"

	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/profile"
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

// Rule ids: stable, scripts and CI depend on them.
const (
	RuleL1Contention   = "l1-bandwidth-contention"
	RuleL3Writeback    = "l3-writeback-congestion"
	RuleLLCThrashing   = "llc-thrashing"
	RuleRemoteNUMA     = "remote-numa"
	RuleDTLB           = "dtlb-pressure"
	RuleFalseSharing   = "false-sharing"
	RuleCoreHotspot    = "core-hotspot"
	RuleCPUSaturation  = "cpu-saturation"
	RuleNoisyNeighbour = "noisy-neighbour"
	RuleLockContention = "lock-contention"
	RuleIOWait         = "io-wait"
	RuleStartupIO      = "startup-io"
	RulePeerWait       = "peer-wait"
	RulePageFaults     = "page-fault-storm"
	RuleMigrations     = "migration-churn"
	RuleLatencyTail    = "latency-tail"
	RuleFunctionTail   = "function-tail"
)

// ShowsSamples as a rule's Shows points its findings at the heatmap of
// the recording's primary sample event (metric.Samples).
const ShowsSamples = "samples"

// Sources of a finding's functions besides a sample event.
const (
	FuncsOffCPU = "off-CPU stacks"
	FuncsNone   = "none"
)

// NeedOffCPU is off-CPU stacks; NeedIdle is the CPUs' idle time. Both are
// recorded by every recorder that has them; older recordings lack them.
const (
	NeedOffCPU = "offcpu-stacks"
	NeedIdle   = "cpu-idle"
)

var (
	offCPUStacks = Need{Kind: NeedOffCPU}
	cpuIdle      = Need{Kind: NeedIdle}
)

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
	case NeedOffCPU:
		return "off-CPU stacks"
	case NeedIdle:
		return "CPU idle time"
	case NeedWaits:
		return "the kernel's wait reasons"
	case NeedFunctions:
		return "--func functions"
	case NeedHistogram:
		return strings.Join(n.AnyOf, " or ") + " histogram"
	}
	return strings.Join(n.AnyOf, " or ")
}

// Threshold is one limit a rule holds a metric to.
type Threshold struct {
	Metric metric.ID `json:"metric"`
	Op     string    `json:"op"` // ">", ">=", "<", "<="
	Value  float64   `json:"value"`
	Unit   string    `json:"unit"`
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
	// Functions says where a finding's functions come from: the samples
	// of the event it is about. "" is cpu-clock samples; FuncsOffCPU and
	// FuncsNone are set by the rule itself.
	Functions string `json:"functions,omitempty"`
	// Shows is the per-core heatmap metric a finding points at (an
	// event, a derived metric, or ShowsSamples); "" when no heatmap
	// shows what the rule measures, or when eval names it per finding.
	Shows string `json:"shows,omitempty"`

	eval func(m *Metrics, r *Rule) []Finding
}

// T returns the first threshold on a metric. A missing name is a bug in
// the table, caught by the tests.
func (r *Rule) T(id metric.ID) Threshold { return r.bound(id, "") }

// bound returns the threshold on a metric with operator op ("" for any):
// a metric held within a range has two.
func (r *Rule) bound(id metric.ID, op string) Threshold {
	for _, t := range r.Thresholds {
		if t.Metric == id && (op == "" || t.Op == op) {
			return t
		}
	}
	panic(fmt.Sprintf("attribution: rule %s has no threshold %q %s", r.ID, id, op))
}

// runnableOver is where a target's own threads oversubscribe its CPUs:
// cpu-saturation's, and where noisy-neighbour leaves the finding to it.
var runnableOver = Threshold{Metric: mRunnablePerCPU, Op: ">", Value: 1.25, Unit: metric.UnitTimes, Why: "only more runnable threads than CPUs make the target queue behind itself (3 busy threads on 2 CPUs are 1.5 per CPU); as many busy threads as CPUs, with helper threads waking behind them, measured 1.05-1.1 here, and fewer threads would not help; threads that sleep and wake briefly add little, and queueing behind other processes is noisy-neighbour"}

// ownBusy: the target itself keeps its CPUs busy. Without it, many
// threads that wake briefly and wait behind other processes' work look
// runnable in numbers (512 sleeping threads beside a 2-thread load
// measured 2.9 runnable per CPU, using 3% of the CPUs themselves).
var ownBusy = Threshold{Metric: mTargetBusy, Op: ">=", Value: 0.5, Unit: metric.UnitRatio, Why: "the target's own on-CPU time fills at least half of the CPUs it may use: its threads queue behind its own work, not as a few wake-ups behind other processes (noisy-neighbour's case)"}

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
			if metric.Software(e) {
				hw = false
			}
		}
		if hw {
			return true
		}
	}
	return false
}

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
		if len(m.header.Functions) > 0 {
			return "", "", true
		}
		return n.String(), "not recorded (add --func SYMBOL)", false
	case NeedSamples:
		if m.HasSamples() {
			return "", "", true
		}
		return n.String(), "not recorded (add -F HZ)", false
	case NeedOffCPU:
		if m.HasOffCPU() {
			return "", "", true
		}
		return n.String(), "not in this recording (recorded by cacheheat versions with off-CPU stacks)", false
	case NeedIdle:
		if m.HasIdle() {
			return "", "", true
		}
		return n.String(), "not in this recording (recorded by cacheheat versions that read /proc/stat)", false
	case NeedWaits:
		if m.HasWaits() {
			return "", "", true
		}
		return n.String(), "not in this recording (recorded by cacheheat versions that read the kernel's wait reasons; older ones could not tell disk from pipe or socket waits)", false
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
	// suggest one the host can count (the host's own word on each event,
	// profile.Header.HostStatus): never an event it cannot.
	for _, e := range n.AnyOf {
		if st, tried := m.status[e]; tried {
			return e, whyNot(st), false
		}
	}
	var cannot []profile.EventStatus
	for _, e := range n.AnyOf {
		st, known := m.header.HostStatus(e, !metric.Software(e))
		switch {
		case !known:
			continue
		case st.Status == profile.StatusMeasured:
			return e, "not recorded (add -e " + e + ")", false
		}
		cannot = append(cannot, st)
	}
	if len(cannot) > 0 {
		return cannot[0].Name, whyNot(cannot[0]), false
	}
	if len(n.AnyOf) > 1 {
		return n.String(), "not recorded (the recorder knows no encoding of it for this CPU model)", false
	}
	return n.String(), "not recorded (add -e " + n.AnyOf[0] + " if this host can count it: cacheheat caps)", false
}

// whyNot says why an event the host was asked about was not measured.
func whyNot(st profile.EventStatus) string {
	switch st.Status {
	case profile.StatusUnsupported:
		return "unsupported on this host: " + orUnknown(st.Reason)
	case profile.StatusDenied:
		return "denied: " + orUnknown(st.Reason)
	}
	return st.Status + ": " + orUnknown(st.Reason)
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
		ID:    RuleL1Contention,
		Shows: ShowsSamples,
		Title: "L1 bandwidth contention on one core",
		Needs: []Need{samples, event(metric.L1DLoads), event(metric.L1DLoadMisses), event(metric.LLCLoads), event(metric.LLCStores)},
		Formula: "top core share = target samples on the busiest core / all target samples; " +
			"L1-dcache-load-miss-ratio = L1-dcache-load-misses / L1-dcache-loads on that core; " +
			"write-back/load = LLC-stores / LLC-loads on that core",
		Thresholds: []Threshold{
			{Metric: mSamples, Op: ">=", Value: 50, Unit: metric.UnitSamples, Why: whySampleMin},
			{Metric: mTopCoreSampleShare, Op: ">", Value: 0.90, Unit: metric.UnitRatio, Why: "the O3 performance guide's bottleneck table: a hotspot is one core with more than 90% of the load"},
			{Metric: metric.L1DLoadMissRatio, Op: ">", Value: 0.75, Unit: metric.UnitRatio, Why: "the O3 performance guide's bottleneck table: L1/L2 miss ratio over 75%"},
			{Metric: mWritebackPerLoad, Op: "<", Value: 0.3, Unit: "", Why: "the O3 performance guide's bottleneck table: write-back/load under 0.3"},
		},
		Source:        "the O3 performance guide's bottleneck patterns, implemented as stated and not verified by this project",
		Advice:        "One core misses in L1 on most loads but writes little back: its working set streams through L1. Block (tile) the loop so a tile stays in L1/L2, or spread the work over more cores.",
		Approximation: "write-back/load is approximated by LLC-stores / LLC-loads: generic perf events have no L1 or L2 write-back count.",
		Confidence:    0.6,
		eval:          evalL1Contention,
	},
	{
		ID:    RuleL3Writeback,
		Shows: metric.LLCLoadMisses,
		Title: "L3 write-back queue congestion on a NUMA node",
		Needs: []Need{event(metric.LLCLoads), event(metric.LLCLoadMisses), event(metric.LLCStores)},
		Formula: "per node: top core share = the node's busiest core's LLC-load-misses / the node's LLC-load-misses; " +
			"LLC-load-miss-ratio = LLC-load-misses / LLC-loads; write-back/load = LLC-stores / LLC-loads",
		Thresholds: []Threshold{
			{Metric: mNodeLLCMissRate, Op: ">=", Value: 1e6, Unit: metric.UnitPerSecond, Why: whyMemFloor},
			{Metric: mTopCoreNodeMissShare, Op: "<=", Value: 0.90, Unit: metric.UnitRatio, Why: "the O3 performance guide's bottleneck table: spread across a NUMA node (not the one-core hotspot)"},
			{Metric: metric.LLCLoadMissRatio, Op: ">=", Value: 0.40, Unit: metric.UnitRatio, Why: "the O3 performance guide's bottleneck table: miss ratio 40-60%"},
			{Metric: metric.LLCLoadMissRatio, Op: "<=", Value: 0.60, Unit: metric.UnitRatio, Why: "the O3 performance guide's bottleneck table: miss ratio 40-60%"},
			{Metric: mWritebackPerLoad, Op: ">", Value: 1.8, Unit: "", Why: "the O3 performance guide's bottleneck table: write-back/load over 1.8"},
		},
		Source:        "the O3 performance guide's bottleneck patterns, implemented as stated and not verified by this project",
		Advice:        "Many cores of one node write back more lines than they load: the L3/memory controller queue is the bottleneck. Reduce written data (in-place updates, narrower types), batch writes (write-combining), or spread the writers over nodes.",
		Approximation: "write-back/load is approximated by LLC-stores / LLC-loads: generic perf events have no L3 write-back count.",
		Confidence:    0.6,
		eval:          evalL3Writeback,
	},
	{
		ID:      RuleLLCThrashing,
		Shows:   string(metric.LLCLoadMPKI),
		Title:   "last-level cache thrashing",
		Needs:   []Need{event(metric.LLCLoads), event(metric.LLCLoadMisses), event(metric.Instructions)},
		Formula: "LLC-load-MPKI = 1000 * LLC-load-misses / instructions; LLC-load-miss-ratio = LLC-load-misses / LLC-loads (likwid L3CACHE group: L3 miss rate and miss ratio)",
		Thresholds: []Threshold{
			{Metric: rateInstructions, Op: ">=", Value: 1e8, Unit: metric.UnitPerSecond, Why: whyInstrFloor},
			{Metric: metric.LLCLoadMPKI, Op: ">", Value: 5, Unit: metric.UnitPerKiloInstr, Why: "5 misses per 1000 instructions at ~250 cycles each (80 ns at 3 GHz) is over 1 stall cycle per instruction unless overlapped: memory-bound"},
			{Metric: metric.LLCLoadMissRatio, Op: ">", Value: 0.5, Unit: metric.UnitRatio, Why: "more than half the LLC lookups miss: the working set does not fit"},
		},
		Source:     "likwid performance groups L3CACHE (miss rate = misses / instructions, miss ratio = misses / requests); threshold: this project (see Why)",
		Advice:     "The working set does not fit in the LLC. Shrink it (smaller types, structure-of-arrays), tile loops so a tile fits, or make the access pattern sequential so prefetchers help.",
		Confidence: 0.8,
		eval:       evalLLCThrashing,
	},
	{
		ID:      RuleRemoteNUMA,
		Shows:   string(metric.NodeLoadMissRatio),
		Title:   "remote NUMA memory accesses",
		Needs:   []Need{event(metric.NodeLoads), event(metric.NodeLoadMisses)},
		Formula: "node-load-miss-ratio (the remote share) = node-load-misses / node-loads (perf's node events: loads served by the local node vs a remote one)",
		Thresholds: []Threshold{
			{Metric: rateNodeLoads, Op: ">=", Value: 1e6, Unit: metric.UnitPerSecond, Why: whyMemFloor},
			{Metric: metric.NodeLoadMissRatio, Op: ">", Value: 0.2, Unit: metric.UnitRatio, Why: "remote DRAM costs about 2.5 times local on a two-socket server (180-220 ns against 70-90 ns); 20% remote raises the mean memory latency by ~30%"},
		},
		Source:     "perf generic node-loads/node-load-misses (the kernel's per-model offcore/L3-miss encodings); DRAM latencies: typical two-socket server figures",
		Advice:     "Threads read memory that lives on another node. Bind threads and memory together (numactl --cpunodebind=N --membind=N), allocate on the thread that uses the data (first touch), or interleave shared data.",
		Confidence: 0.8,
		eval:       evalRemoteNUMA,
	},
	{
		ID:      RuleDTLB,
		Shows:   string(metric.DTLBLoadMPKI),
		Title:   "data TLB pressure",
		Needs:   []Need{event(metric.DTLBLoadMisses), event(metric.Instructions)},
		Formula: "dTLB-load-MPKI = 1000 * dTLB-load-misses / instructions (likwid TLB_DATA group: L1 DTLB load miss rate)",
		Thresholds: []Threshold{
			{Metric: rateInstructions, Op: ">=", Value: 1e8, Unit: metric.UnitPerSecond, Why: whyInstrFloor},
			{Metric: metric.DTLBLoadMPKI, Op: ">", Value: 1, Unit: metric.UnitPerKiloInstr, Why: "a page walk costs 20-100+ cycles; one per 1000 instructions is 2-10% of cycles at IPC 1"},
		},
		Source:     "likwid performance groups TLB_DATA; threshold: this project (see Why)",
		Advice:     "Loads miss the data TLB: the working set spans too many pages. Use huge pages (THP: madvise(MADV_HUGEPAGE)), or improve locality so fewer pages are touched.",
		Confidence: 0.8,
		eval:       evalDTLB,
	},
	{
		ID:      RuleFalseSharing,
		Title:   "false sharing (cache-to-cache transfers of modified lines)",
		Needs:   []Need{{Kind: NeedEvent, AnyOf: metric.HITMEvents, Label: "HITM event (" + strings.Join(metric.HITMEvents, " or ") + ")"}, event(metric.Instructions)},
		Formula: "HITM-PKI (HITM loads per 1000 instructions) = 1000 * (loads that hit a line modified in another core's cache) / instructions; the vendor's events, summed where a model has several (Intel mem_load_l3_hit_retired.xsnp_hitm/xsnp_fwd; AMD Zen 4 ls_dmnd_fills_from_sys.near_cache + far_cache, Zen 3 ext_cache_local + ext_cache_remote, Zen 2 ls_refills_from_sys.ls_mabresp_rmt_cache; names from the kernel's pmu-events)",
		Thresholds: []Threshold{
			{Metric: rateInstructions, Op: ">=", Value: 1e8, Unit: metric.UnitPerSecond, Why: whyInstrFloor},
			{Metric: metric.HITMPKI, Op: ">", Value: 0.25, Unit: metric.UnitPerKiloInstr, Why: "a load of a line modified in another core's cache costs ~127 ns (the O3 performance guide's figure), ~400 cycles at 3 GHz: 0.25 per 1000 instructions is ~10% of cycles at IPC 1, twice the 5%-of-cycles threshold of Intel TMA's Contested_Accesses node (toplev, tma_contested_accesses)"},
		},
		Source:     "Intel TMA (toplev) Contested_Accesses, which counts the same HITM loads; perf c2c; event names from the kernel's tools/perf/pmu-events; cost: the O3 performance guide",
		Advice:     "Cores write to cache lines that other cores read or write. Pad per-thread data to its own 64-byte line (alignas(64)), or batch updates per thread and combine at the end. 'perf c2c' names the lines.",
		Confidence: 0.7,
		eval:       evalFalseSharing,
	},
	{
		ID:      RuleCoreHotspot,
		Shows:   ShowsSamples,
		Title:   "load concentrated on one core",
		Formula: "top core share = target samples on the busiest core / all target samples; demand = (target on-CPU time on a core + its run-queue wait there) / recorded time, on-CPU time from cpu-clock (or samples / sample rate without it), run-queue wait from the runq-latency histogram when recorded; busy = 1 - the core's idle time (all tasks, /proc/stat) / recorded time; working threads = target threads that ran at least half as long as the window's busiest target thread and at least 1 ms, median over windows",
		Needs:   []Need{samples, cpuIdle},
		Thresholds: []Threshold{
			{Metric: mSamples, Op: ">=", Value: 50, Unit: metric.UnitSamples, Why: whySampleMin},
			{Metric: mWorkingThreads, Op: ">=", Value: 2, Unit: "threads", Why: "one thread runs on one core at a time: a single working thread on one core is the program's nature, not a placement to fix"},
			{Metric: mTopCoreSampleShare, Op: ">", Value: 0.90, Unit: metric.UnitRatio, Why: "the O3 performance guide's bottleneck table: a hotspot is one core with more than 90% of the load"},
			{Metric: mTopCoreDemand, Op: ">=", Value: 0.5, Unit: metric.UnitRatio, Why: "floor: the target runs or waits to run on that core at least half the time, so the concentration costs throughput (an idle target never fires); demand, not on-CPU time, so that competing load on a shared host does not hide it"},
			{Metric: mLeastBusyOther, Op: "<", Value: 0.5, Unit: metric.UnitRatio, Why: "another recorded core is idle at least half the time (all tasks counted): there is room to spread to; a core busy with other processes' work is no room"},
		},
		Source:     "the O3 performance guide's bottleneck patterns (one core over 90%)",
		Advice:     "The target runs on one core while others have spare time: it is single-threaded or pinned (taskset, cpuset, IRQ affinity). Parallelize the hot loop or widen the affinity mask.",
		Confidence: 0.9,
		eval:       evalCoreHotspot,
	},
	{
		ID:      RuleCPUSaturation,
		Title:   "CPU saturation (the target's own threads queue for its CPUs)",
		Needs:   []Need{hist(profile.HistRunqLatency), event(metric.CPUClock)},
		Formula: "per window (warm-up left out): p99 of the runq-latency histogram (wakeup or preemption to running, summed over CPUs); saturated windows = windows with p99 over the threshold / all windows; runnable threads = (target on-CPU time + target run-queue wait, from the runq-latency histogram's bucket midpoints) / window length: how many of its threads were running or waiting to run on average, median over windows; own share = the target's on-CPU time / the allowed CPUs' time; allowed CPUs = the target's affinity at the start (or the recorded CPUs)",
		Thresholds: []Threshold{
			{Metric: mRunqEvents, Op: ">=", Value: 20, Unit: metric.UnitEvents, Why: "floor: a p99 of fewer events is the maximum of a handful"},
			{Metric: mRunqP99, Op: ">", Value: 1e6, Unit: metric.UnitNS, Why: "the scheduler's base slice is 0.75-3 ms: a p99 wait over 1 ms means runnable threads queue behind full slices of others"},
			{Metric: mSaturatedShare, Op: ">=", Value: 0.5, Unit: metric.UnitRatio, Why: "saturation in most of the recording, not a burst (bursts are latency-tail's job)"},
			runnableOver,
			ownBusy,
		},
		Source:     "Brendan Gregg's USE method (CPU saturation = run-queue latency); runqlat (bcc); threshold: scheduler slice length",
		Advice:     "Use fewer threads (a pool sized to the CPUs) or give the target more CPUs.",
		Confidence: 0.9,
		eval:       evalCPUSaturation,
	},
	{
		ID:      RuleNoisyNeighbour,
		Title:   "other processes take the target's CPUs",
		Needs:   []Need{hist(profile.HistRunqLatency), event(metric.CPUClock), cpuIdle, samples},
		Formula: "as cpu-saturation for the run-queue p99 and working threads; other processes' share = (recorded time - idle time - target on-CPU time) / recorded time, over the CPUs the target may run on; who = the other processes' cpu-clock samples (the sampler records them by process, without stacks)",
		Thresholds: []Threshold{
			{Metric: mRunqEvents, Op: ">=", Value: 20, Unit: metric.UnitEvents, Why: "floor: a p99 of fewer events is the maximum of a handful"},
			{Metric: mRunqP99, Op: ">", Value: 1e6, Unit: metric.UnitNS, Why: "the scheduler's base slice is 0.75-3 ms: a p99 wait over 1 ms means runnable threads queue behind full slices of others"},
			{Metric: mSaturatedShare, Op: ">=", Value: 0.5, Unit: metric.UnitRatio, Why: "queueing in most of the recording, not a burst"},
			{Metric: mOthersShare, Op: ">=", Value: 0.1, Unit: metric.UnitRatio, Why: "other processes ran at least a tenth of the time on the CPUs the target may use; fires only when the target's own working threads fit its CPUs (otherwise it is cpu-saturation)"},
		},
		Source:     "Brendan Gregg's USE method (saturation), split by who runs; this project",
		Advice:     "Move the competing load away or reserve CPUs for the target (cpuset, isolcpus).",
		Confidence: 0.8,
		Functions:  FuncsNone,
		eval:       evalNoisyNeighbour,
	},
	{
		ID:      RuleLockContention,
		Title:   "threads wait for locks",
		Needs:   []Need{offCPUStacks, event(metric.CPUClock)},
		Formula: "lock wait = off-CPU time of the target's working threads (with at least 1% of the target's on-CPU time), in the steady windows (not a command's first window, nor a last partial one where its threads exit), whose wait the kernel put in a futex, file lock or mmap_lock and whose stacks show no join or idle pool (pthread mutexes and rwlocks, semaphores, Go's sync.Mutex/RWMutex and the runtime's semacquire, or a bare futex), stacks of sampled switch-outs (about 50 a second per CPU, a long previous block raising the chance; see \"Off-CPU reasons and stacks\") weighted by 1/chance and scaled to the exact time of their wait; share = lock wait / (lock wait + target on-CPU time), both over the steady windows",
		Thresholds: []Threshold{
			{Metric: mLockWaitShare, Op: ">", Value: 0.02, Unit: metric.UnitRatio, Why: "the working threads lose more than 2% of their time waiting for locks: more than run-to-run noise of a throughput benchmark on a quiet host"},
			{Metric: mLockWaitRate, Op: ">=", Value: 10e6, Unit: metric.UnitNS, Why: "floor: 10 ms of waiting per second of recording; a process that starts and stops its threads waits a few ms in total"},
		},
		Source:     "Brendan Gregg, off-CPU analysis (offcputime); thresholds: this project (see Why)",
		Advice:     "Working threads block on a lock, named with their share of the wait. Shorten the critical sections, split the lock, or use read-mostly structures (an atomically swapped copy) for data that is mostly read.",
		Confidence: 0.8,
		Functions:  FuncsOffCPU,
		eval:       evalBlocked(profile.OffCPULock),
	},
	{
		ID:      RuleIOWait,
		Title:   "threads wait for disk I/O",
		Needs:   []Need{waitsNeed, event(metric.CPUClock)},
		Formula: "disk I/O wait = the target's off-CPU time whose wait the kernel tied to block I/O (in_iowait: io_schedule), to a regular file or block device, or to a sync, counted at every switch-in (exact, not sampled); share = disk I/O wait / (disk I/O wait + target on-CPU time); not when it all happened at start-up (startup-io); pipes, sockets and other processes are peer-wait's; functions from the off-CPU stacks of those waits",
		Thresholds: []Threshold{
			{Metric: mIOWaitShare, Op: ">", Value: 0.1, Unit: metric.UnitRatio, Why: "the threads spend more than a tenth of their time waiting for the disk"},
			{Metric: mIOWaitRate, Op: ">=", Value: 50e6, Unit: metric.UnitNS, Why: "floor: 50 ms of waiting per second of recording"},
		},
		Source:     "Brendan Gregg, off-CPU analysis; the kernel's in_iowait (iowait in /proc/stat, vmstat's wa); thresholds: this project (see Why)",
		Advice:     "Threads wait for the disk, in the functions named. Batch or overlap the I/O (async I/O, io_uring, more requests in flight), cache what is read again, or move it off the hot path.",
		Confidence: 0.8,
		Functions:  FuncsOffCPU,
		eval:       evalDiskIO(false),
	},
	{
		ID:      RuleStartupIO,
		Title:   "disk I/O at start-up only",
		Needs:   []Need{waitsNeed, event(metric.CPUClock)},
		Formula: "as io-wait, over the windows that hold 90% of the disk I/O wait from the first one, when they end within the first half of a recording of at least 4 windows; rate over those windows' length",
		Thresholds: []Threshold{
			{Metric: mStartupIOShare, Op: ">", Value: 0.1, Unit: metric.UnitRatio, Why: "as io-wait: more than a tenth of the threads' time"},
			{Metric: mStartupIORate, Op: ">=", Value: 50e6, Unit: metric.UnitNS, Why: "as io-wait, per second of the windows it happened in"},
		},
		Source:     "this project: a cold start reads the binary, libraries and data once (a page cache dropped, a new container)",
		Advice:     "Disk I/O at start-up, then almost none.",
		Confidence: 0.8,
		Functions:  FuncsOffCPU,
		eval:       evalDiskIO(true),
	},
	{
		ID:      RulePeerWait,
		Title:   "threads wait on other processes or the network",
		Needs:   []Need{waitsNeed, event(metric.CPUClock)},
		Formula: "peer wait = the target's off-CPU time in pipes, Unix and IP sockets, waits for children and System V IPC (the kernel's account, exact); share = peer wait / (peer wait + target on-CPU time); who = the processes that woke it out of those waits (sched_waking's current task), by their share of that time; a dependency to know about, not the program's own problem (severity info)",
		Thresholds: []Threshold{
			{Metric: mPeerWaitShare, Op: ">", Value: 0.25, Unit: metric.UnitRatio, Why: "the threads wait on someone else a quarter of their time or more: their speed is partly the peer's (a pipe ping-pong measured 41-72% here, quiet and beside load)"},
			{Metric: mPeerWaitRate, Op: ">=", Value: 100e6, Unit: metric.UnitNS, Why: "floor: 100 ms of waiting per second of recording"},
		},
		Source:     "Brendan Gregg, off-wake time (wakeuptime, offwaketime): blocked time by the waker; this project",
		Advice:     "The target waits on other processes or the network.",
		Confidence: 0.8,
		Functions:  FuncsNone,
		eval:       evalPeerWait,
	},
	{
		ID:      RulePageFaults,
		Shows:   metric.PageFaults,
		Title:   "page-fault storm",
		Needs:   []Need{event(metric.PageFaults)},
		Formula: "page-faults / recorded seconds, over the recording and per window, leaving out the warm-up window of a command the recorder started (its setup faults); functions from page-faults samples (every 997th fault, with stacks)",
		Thresholds: []Threshold{
			{Metric: ratePageFaults, Op: ">", Value: 10000, Unit: metric.UnitPerSecond, Why: "a minor fault of a fresh page costs ~1-2 us (trap, zeroing 4 KiB, page-table update): 10,000/s is 1-2% of a core plus 40 MiB/s of cache-polluting zeroing; a steady-state process faults well under 100/s, so this is over 100x that baseline"},
		},
		Source:     "kernel page-faults software event; cost from the fault path (clear_page, ~1 us)",
		Advice:     "The target keeps touching fresh memory: it maps and frees buffers in a loop (malloc/free of large blocks goes to mmap/munmap) or its heap is returned to the OS between bursts. Reuse buffers, raise M_MMAP_THRESHOLD / M_TRIM_THRESHOLD, pre-fault (MAP_POPULATE) or use huge pages.",
		Confidence: 0.9,
		Functions:  metric.PageFaults,
		eval:       evalPageFaults,
	},
	{
		ID:      RuleMigrations,
		Shows:   metric.CPUMigrations,
		Title:   "threads migrate between CPUs often",
		Needs:   []Need{event(metric.CPUMigrations)},
		Formula: "cpu-migrations / thread-seconds (threads present in a window times its length)",
		Thresholds: []Threshold{
			{Metric: mMigrationsPerThread, Op: ">", Value: 50, Unit: metric.UnitPerThread, Why: "each migration starts on cold L1/L2 (refilling 1+ MiB of L2 at ~10 GB/s is ~100 us): 50/s per thread is ~0.5% of its time or more, and a sign the scheduler keeps rebalancing"},
		},
		Source:     "kernel cpu-migrations software event; threshold: this project (see Why)",
		Advice:     "Threads hop between CPUs and restart on cold caches. Pin long-running threads (sched_setaffinity, taskset), use fewer threads than CPUs, or reduce wake-ups that trigger rebalancing.",
		Confidence: 0.7,
		eval:       evalMigrations,
	},
	{
		ID:      RuleLatencyTail,
		Title:   "latency tail coincides with a cause",
		Needs:   []Need{hist(profile.HistRunqLatency, profile.HistOffCPU), event(tailCauses...)},
		Formula: "over windows at least half the median window length: tail windows = windows whose histogram p99 is over the floor, at least the tail factor times the median window's p99, and outside the run's own spread (log2 of the p99 more than 3 median absolute deviations of the windows' log2 p99s above their median, the deviation taken as at least half a bucket); cause = the counter whose rate in tail windows is the largest multiple of its median-window rate",
		Thresholds: []Threshold{
			{Metric: mEventsPerWindow, Op: ">=", Value: 20, Unit: metric.UnitEvents, Why: "floor: a p99 of fewer events is the maximum of a handful"},
			{Metric: mEnoughWindows, Op: ">=", Value: 8, Unit: "windows", Why: "a median, a spread and a tail apart from both need more than a few windows: with four, one noisy window is a quarter of the run"},
			{Metric: mTailWindows, Op: ">=", Value: 2, Unit: "windows", Why: "a tail recurs: one window over the rest is as likely the host's noise (a neighbour's burst, a page-cache flush) as the program's"},
			{Metric: mTailP99, Op: ">", Value: 1e6, Unit: metric.UnitNS, Why: "floor: the O3 performance guide's long-tail latency buckets start at 1 ms"},
			{Metric: mTailOverMedian, Op: ">=", Value: 4, Unit: metric.UnitTimes, Why: "two log2 buckets above the median: not bucket jitter"},
			{Metric: mCauseOverMedian, Op: ">=", Value: 2, Unit: metric.UnitTimes, Why: "the cause at least doubles in the tail windows"},
			{Metric: mCauseExcess, Op: ">=", Value: 100, Unit: metric.UnitPerSecond, Why: "floor: the cause adds at least 100 events/s, not a few"},
		},
		Source:     "the O3 performance guide's long-tail latency attribution (generalized from its cache-miss cause to any counter)",
		Advice:     "Latency spikes in some windows coincide with a burst of the named cause; fix that cause first (see the rule that matches it), then re-record.",
		Confidence: 0.6,
		eval:       evalLatencyTail,
	},
	{
		ID:      RuleFunctionTail,
		Title:   "a function's slowest calls, and what they did more of",
		Needs:   []Need{functions},
		Formula: "per --func function: tail = calls in the log2 latency bucket holding p99 and above, median = calls in the bucket holding p50 and its two neighbours (never overlapping the tail); per-call means of latency and of each counter in both groups; the extra time of a tail call (tail mean latency minus median) is split over on-CPU, run-queue and blocked time; the cause is the fault, switch or migration counter whose per-call mean is the largest multiple of the median's (a counter absent from the median calls counts as 0.01 per call)",
		Thresholds: []Threshold{
			{Metric: mCalls, Op: ">=", Value: 100, Unit: "calls", Why: "floor: with fewer calls the p99 is the slowest call or two"},
			{Metric: mTailMeanOverMedian, Op: ">=", Value: 4, Unit: metric.UnitTimes, Why: "two log2 buckets: more than bucket jitter"},
			{Metric: mTailCounted, Op: ">=", Value: 1, Unit: "calls", Why: "per-call means need a call whose counters were read on one thread"},
			{Metric: mCausePerCallRatio, Op: ">=", Value: tailCauseRatio, Unit: metric.UnitTimes, Why: "a counter that rises less than the latency itself explains little of it"},
			{Metric: mCausePerCallExcess, Op: ">=", Value: tailCauseExcess, Unit: metric.UnitEvents, Why: "floor: at least one more event per slow call, not a stray one in many"},
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
	metric.LLCLoadMisses, metric.L1DLoadMisses, metric.DTLBLoadMisses, metric.NodeLoadMisses,
	metric.PageFaults, metric.ContextSwitches, metric.CPUMigrations,
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
		r.T(mSamples), total,
		r.T(mTopCoreSampleShare), share,
		r.T(metric.L1DLoadMissRatio), ratio(m.PerCPU(metric.L1DLoadMisses, top), m.PerCPU(metric.L1DLoads, top)),
		r.T(mWritebackPerLoad), ratio(m.PerCPU(metric.LLCStores, top), m.PerCPU(metric.LLCLoads, top)),
	)
	if !ok {
		return nil
	}
	return []Finding{{Severity: severity(r.T(metric.L1DLoadMissRatio), ev[2].Value), Scope: Scope{CPUs: []int{top}}, Evidence: ev}}
}

func evalL3Writeback(m *Metrics, r *Rule) []Finding {
	var out []Finding
	for _, node := range m.Nodes() {
		cpus := m.NodeCPUs(node)
		if len(cpus) < 2 {
			continue // one core cannot show a spread
		}
		_, share, misses := m.topCPU(func(c int) float64 { return m.PerCPU(metric.LLCLoadMisses, c) }, cpus)
		loads := m.NodeTotal(metric.LLCLoads, node)
		mr := ratio(misses, loads)
		ev, ok := allPass(
			r.T(mNodeLLCMissRate), misses/m.DurationS,
			r.T(mTopCoreNodeMissShare), share,
			r.bound(metric.LLCLoadMissRatio, ">="), mr,
			r.bound(metric.LLCLoadMissRatio, "<="), mr,
			r.T(mWritebackPerLoad), ratio(m.NodeTotal(metric.LLCStores, node), loads),
		)
		if ok {
			out = append(out, Finding{Severity: severity(r.T(mWritebackPerLoad), ev[4].Value), Scope: Scope{CPUs: cpus}, Evidence: ev})
		}
	}
	return out
}

// mpkiCPUs lists the CPUs whose own MPKI of event passes t: the heatmap
// region a whole-target finding points at.
func (m *Metrics) mpkiCPUs(event string, t Threshold) []int {
	var out []int
	for _, c := range m.CPUs {
		if t.pass(1000 * ratio(m.PerCPU(event, c), m.PerCPU(metric.Instructions, c))) {
			out = append(out, c)
		}
	}
	return out
}

func evalLLCThrashing(m *Metrics, r *Rule) []Finding {
	mpki := 1000 * ratio(m.Total(metric.LLCLoadMisses), m.Total(metric.Instructions))
	ev, ok := allPass(
		r.T(rateInstructions), m.Rate(metric.Instructions),
		r.T(metric.LLCLoadMPKI), mpki,
		r.T(metric.LLCLoadMissRatio), ratio(m.Total(metric.LLCLoadMisses), m.Total(metric.LLCLoads)),
	)
	if !ok {
		return nil
	}
	return []Finding{{Severity: severity(r.T(metric.LLCLoadMPKI), mpki), Scope: Scope{CPUs: m.mpkiCPUs(metric.LLCLoadMisses, r.T(metric.LLCLoadMPKI))}, Evidence: ev}}
}

func evalRemoteNUMA(m *Metrics, r *Rule) []Finding {
	share := ratio(m.Total(metric.NodeLoadMisses), m.Total(metric.NodeLoads))
	ev, ok := allPass(
		r.T(rateNodeLoads), m.Rate(metric.NodeLoads),
		r.T(metric.NodeLoadMissRatio), share,
	)
	if !ok {
		return nil
	}
	var cpus []int
	for _, c := range m.CPUs {
		if r.T(metric.NodeLoadMissRatio).pass(ratio(m.PerCPU(metric.NodeLoadMisses, c), m.PerCPU(metric.NodeLoads, c))) {
			cpus = append(cpus, c)
		}
	}
	return []Finding{{Severity: severity(r.T(metric.NodeLoadMissRatio), share), Scope: Scope{CPUs: cpus}, Evidence: ev}}
}

func evalDTLB(m *Metrics, r *Rule) []Finding {
	mpki := 1000 * ratio(m.Total(metric.DTLBLoadMisses), m.Total(metric.Instructions))
	ev, ok := allPass(
		r.T(rateInstructions), m.Rate(metric.Instructions),
		r.T(metric.DTLBLoadMPKI), mpki,
	)
	if !ok {
		return nil
	}
	return []Finding{{Severity: severity(r.T(metric.DTLBLoadMPKI), mpki), Scope: Scope{CPUs: m.mpkiCPUs(metric.DTLBLoadMisses, r.T(metric.DTLBLoadMPKI))}, Evidence: ev}}
}

func evalFalseSharing(m *Metrics, r *Rule) []Finding {
	// A model's cache-to-cache events count disjoint sources (same node,
	// other node): their sum is every such load.
	var names []string
	var hitm float64
	perCPU := map[int]float64{}
	for _, e := range metric.HITMEvents {
		if !m.Measured(e) {
			continue
		}
		names = append(names, e)
		hitm += m.Total(e)
		for _, c := range m.CPUs {
			perCPU[c] += m.PerCPU(e, c)
		}
	}
	hpki := 1000 * ratio(hitm, m.Total(metric.Instructions))
	ev, ok := allPass(
		r.T(rateInstructions), m.Rate(metric.Instructions),
		r.T(metric.HITMPKI), hpki,
	)
	if !ok {
		return nil
	}
	ev[1].Events = names
	var cpus []int
	for _, c := range m.CPUs {
		if r.T(metric.HITMPKI).pass(1000 * ratio(perCPU[c], m.PerCPU(metric.Instructions, c))) {
			cpus = append(cpus, c)
		}
	}
	// The heatmap shows each event, not their sum: point at the first.
	return []Finding{{Severity: severity(r.T(metric.HITMPKI), hpki), Scope: Scope{CPUs: cpus}, Evidence: ev, Metric: names[0]}}
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
			least = min(least, m.CPUBusy(c))
		}
	}
	ev, ok := allPass(
		r.T(mSamples), total,
		r.T(mWorkingThreads), median(m.steadyWorking()),
		r.T(mTopCoreSampleShare), share,
		r.T(mTopCoreDemand), m.Demand(top),
		r.T(mLeastBusyOther), least,
	)
	if !ok {
		return nil
	}
	return []Finding{{Severity: severity(r.T(mTopCoreDemand), ev[3].Value), Scope: Scope{CPUs: []int{top}}, Evidence: ev}}
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
	t := r.T(ratePageFaults)
	var faults, secs float64
	for i, w := range m.Windows {
		if !m.warmup(i) {
			faults += float64(w.Counts[metric.PageFaults])
			secs += w.DurationS
		}
	}
	rate := ratio(faults, secs)
	if !t.pass(rate) {
		return nil
	}
	// The time range is the windows that are themselves over the floor.
	var start, end int64 = -1, 0
	for i, w := range m.Windows {
		if !m.warmup(i) && t.pass(w.Rate(metric.PageFaults)) {
			if start < 0 {
				start = w.StartNS
			}
			end = w.EndNS
		}
	}
	sc := Scope{CPUs: m.busyCPUs(metric.PageFaults)}
	if start >= 0 {
		sc.StartNS, sc.EndNS = start, end
	}
	return []Finding{{Severity: severity(t, rate), Scope: sc, Evidence: []Evidence{t.evidence(rate)}}}
}

func evalMigrations(m *Metrics, r *Rule) []Finding {
	if len(m.CPUs) < 2 {
		return nil
	}
	t := r.T(mMigrationsPerThread)
	v := ratio(m.Total(metric.CPUMigrations), m.ThreadSeconds)
	if !t.pass(v) {
		return nil
	}
	return []Finding{{Severity: severity(t, v), Scope: Scope{CPUs: m.busyCPUs(metric.CPUMigrations)}, Evidence: []Evidence{t.evidence(v)}}}
}

func evalLatencyTail(m *Metrics, r *Rule) []Finding {
	var out []Finding
	for _, h := range []string{profile.HistRunqLatency, profile.HistOffCPU} {
		if f, ok := m.latencyTail(r, h); ok {
			out = append(out, f)
		}
	}
	return out
}

// latencyTail is latency-tail on one histogram: the tail windows of its
// p99 and the counter that rises most in them.
func (m *Metrics) latencyTail(r *Rule, h string) (Finding, bool) {
	nwin, floor, factor := r.T(mEnoughWindows), r.T(mTailP99), r.T(mTailOverMedian)
	causeT, excessT, ntail := r.T(mCauseOverMedian), r.T(mCauseExcess), r.T(mTailWindows)
	idx, p99 := m.steadyP99s(h, r.T(mEventsPerWindow))
	if !nwin.pass(float64(len(idx))) {
		return Finding{}, false
	}
	med := median(p99)
	// The run's own spread of p99s, in log2 buckets: a window is a tail
	// only well outside it.
	logs := make([]float64, len(p99))
	for k, v := range p99 {
		logs[k] = math.Log2(math.Max(v, 1))
	}
	center := median(logs)
	dev := make([]float64, len(logs))
	for k, v := range logs {
		dev[k] = math.Abs(v - center)
	}
	spread := math.Max(median(dev), 0.5)
	var tail []int
	var tailP99 []float64
	for k, i := range idx {
		if floor.pass(p99[k]) && factor.pass(ratio(p99[k], med)) && logs[k]-center > 3*spread {
			tail = append(tail, i)
			tailP99 = append(tailP99, p99[k])
		}
	}
	if !ntail.pass(float64(len(tail))) {
		return Finding{}, false
	}
	c, ok := m.tailCause(idx, tail, causeT, excessT)
	if !ok {
		return Finding{}, false
	}
	tp := median(tailP99)
	first, last := m.Windows[tail[0]], m.Windows[tail[len(tail)-1]]
	ev := []Evidence{
		{Metric: metric.ID(h + " p99 in tail windows (median)"), Value: tp, Threshold: floor.Value, Op: floor.Op, Unit: metric.UnitNS},
		ntail.evidence(float64(len(tail))),
		factor.evidence(ratio(tp, med)),
		{Metric: metric.ID(c.event + "/s in tail windows over median window"), Value: c.times, Threshold: causeT.Value, Op: causeT.Op, Unit: metric.UnitTimes},
		{Metric: metric.ID(c.event + "/s in tail windows minus median window"), Value: c.tail - c.median, Threshold: excessT.Value, Op: excessT.Op, Unit: metric.UnitPerSecond},
	}
	return Finding{
		Severity: severity(factor, ratio(tp, med)),
		Scope:    Scope{CPUs: m.busyCPUs(c.event), StartNS: first.StartNS, EndNS: last.EndNS},
		Evidence: ev,
		Metric:   c.event,
	}, true
}

// steadyP99s returns the windows of the steady state that hold at least
// minEvents of histogram h, with h's p99 in each.
func (m *Metrics) steadyP99s(h string, minEvents Threshold) (idx []int, p99 []float64) {
	for i, w := range m.Windows {
		if !m.steadyWindow(i) {
			continue
		}
		if b := w.Hist[h]; minEvents.pass(float64(HistogramCount(b))) {
			idx = append(idx, i)
			p99 = append(p99, profile.Percentile(b, 0.99))
		}
	}
	return idx, p99
}

// tailCause is a counter's rate in the tail windows against the median
// window's.
type tailCause struct {
	event        string
	times        float64 // tail / max(median, 1)
	tail, median float64 // per second
}

// tailCause picks, of the measured tailCauses, the one whose tail-window
// rate is the largest multiple of its median-window rate among those
// that pass both thresholds.
func (m *Metrics) tailCause(idx, tail []int, causeT, excessT Threshold) (tailCause, bool) {
	var best tailCause
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
		if causeT.pass(x) && excessT.pass(tailR-medR) && x > best.times {
			best = tailCause{event: e, times: x, tail: tailR, median: medR}
		}
	}
	return best, best.event != ""
}
