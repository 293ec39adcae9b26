package attribution

import (
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
)

// Metrics is what the rules read: a recording reduced to totals, rates,
// per-CPU splits and per-window series. Every value is derived from the
// recording's counts; nothing is estimated except where a field says so.
type Metrics struct {
	header *profile.Header

	// DurationS is the recorded time, first window start to last window
	// end.
	DurationS float64
	// medianSpan is the median window length (s), set on first use.
	medianSpan float64
	// CPUs are the online CPU ids that were recorded (Settings.CPUs or the
	// whole topology).
	CPUs   []int
	nodeOf []int

	status map[string]profile.EventStatus
	// Totals and HostTotals sum each event's per-CPU counts over all
	// windows, for the target's tasks and for every task.
	Totals     map[string][]uint64
	HostTotals map[string][]uint64
	// pids are the target's processes seen.
	pids map[int]bool
	// ThreadSeconds sums, over windows, the number of target threads (or
	// processes without thread detail) that appear in the window times the
	// window's length: the denominator of per-thread rates.
	ThreadSeconds float64
	// Threads is the number of distinct target threads seen.
	Threads int
	hists   map[string]bool

	// SampleEvent is the primary stack-sample event and SamplesPerCPU its
	// target samples per CPU.
	SampleEvent   string
	SamplesPerCPU []uint64
	SampleTotal   uint64

	Windows []WindowMetrics

	// RunqNSPerCPU estimates the target's run-queue wait on each CPU (the
	// CPU it was switched in on) from the runq-latency histogram, bucket
	// midpoints (see profile.HistogramSum).
	RunqNSPerCPU []float64

	// The scheduling rules' reductions (sched.go), summed window by
	// window. threadNS is each target thread's cpu-clock (ns); spanNS the
	// windows' summed length; idleNS each CPU's idle time, idleAll
	// whether every window had it; othersNS each CPU's time neither idle
	// nor the target's.
	threadNS map[int]float64
	spanNS   float64
	idleNS   []float64
	idleAll  bool
	othersNS []float64
	// others counts the other processes' cpu-clock samples.
	others      map[model.Other]uint64
	othersTotal uint64
	// Off-CPU time: the recording's blocked and sampled sums (its scale)
	// and the weighted time by reason, thread and blamed function, in
	// first-seen order.
	hasOffCPU bool
	offScaler profile.OffCPUScaler
	off       []offRow
	// offWin holds, per window (index as Windows), its share of each row:
	// the blocking rules read the steady windows only.
	offWin [][]offPart
	// The kernel's wait account: whether the recording has it, and the
	// target's waits on other processes by who woke it.
	hasWaits  bool
	peers     map[peerKey]float64
	functions []*profile.FunctionAgg
	// scaling sums each event's enabled and running time.
	scaling map[string][2]uint64
	// self keeps each sample event's samples by window, CPU and innermost
	// function (the model's Self; names interns them).
	self  map[string][][]model.SelfCount
	names []string
}

// WindowMetrics is one window reduced to totals.
type WindowMetrics struct {
	StartNS, EndNS int64
	DurationS      float64
	// Quiet: the recorder slept through the window while the target did
	// nothing (profile.Window.Quiet).
	Quiet bool
	// Counts sums each event over CPUs (target's tasks).
	Counts map[string]uint64
	// Hist sums each histogram over CPUs.
	Hist map[string][]uint64
	// working is the number of target threads that did work in the
	// window (workingThreads).
	working int
	// Waits sums the target's off-CPU time by the kernel's wait reason
	// (profile.Wait); nil without waits.
	Waits map[string]float64
}

// Rate is an event's per-second rate in the window.
func (w *WindowMetrics) Rate(event string) float64 {
	if w.DurationS <= 0 {
		return 0
	}
	return float64(w.Counts[event]) / w.DurationS
}

// recordedCPUs lists the online CPUs the recording covers: those of
// Settings.CPUs that are online, or the whole topology, sorted.
func recordedCPUs(h *profile.Header) []int {
	var out []int
	online := map[int]bool{}
	for _, c := range h.Host.Topology.CPUs {
		online[c.ID] = true
		if len(h.Settings.CPUs) == 0 {
			out = append(out, c.ID)
		}
	}
	for _, c := range h.Settings.CPUs {
		if online[c] {
			out = append(out, c)
		}
	}
	sort.Ints(out)
	return out
}

// Measured reports whether an event was measured in this recording.
func (m *Metrics) Measured(event string) bool {
	return m.status[event].Status == profile.StatusMeasured
}

// HasHistogram reports whether the recorder collected a histogram: a
// window carries it.
func (m *Metrics) HasHistogram(name string) bool { return m.hists[name] }

// HasSamples reports whether stack samples were taken.
func (m *Metrics) HasSamples() bool {
	st := &m.header.Settings
	return len(st.SampleEvents) > 0 && (st.SampleHz > 0 || st.SamplePeriod > 0)
}

// Total is an event's total over the target's tasks.
func (m *Metrics) Total(event string) float64 { return sum(m.Totals[event]) }

// Rate is an event's per-second rate over the whole recording.
func (m *Metrics) Rate(event string) float64 {
	if m.DurationS <= 0 {
		return 0
	}
	return m.Total(event) / m.DurationS
}

// PerCPU is an event's target total on one CPU.
func (m *Metrics) PerCPU(event string, cpu int) float64 {
	v := m.Totals[event]
	if cpu < 0 || cpu >= len(v) {
		return 0
	}
	return float64(v[cpu])
}

// NodeTotal is an event's target total over a node's recorded CPUs.
func (m *Metrics) NodeTotal(event string, node int) float64 {
	var t float64
	for _, c := range m.NodeCPUs(node) {
		t += m.PerCPU(event, c)
	}
	return t
}

// NodeCPUs lists the recorded CPUs of a node.
func (m *Metrics) NodeCPUs(node int) []int {
	var out []int
	for _, c := range m.CPUs {
		if c < len(m.nodeOf) && m.nodeOf[c] == node {
			out = append(out, c)
		}
	}
	return out
}

// Nodes lists the nodes that have recorded CPUs.
func (m *Metrics) Nodes() []int {
	seen := map[int]bool{}
	var out []int
	for _, c := range m.CPUs {
		if c < len(m.nodeOf) && !seen[m.nodeOf[c]] {
			seen[m.nodeOf[c]] = true
			out = append(out, m.nodeOf[c])
		}
	}
	sort.Ints(out)
	return out
}

// NodesOf maps CPUs to their nodes, sorted and unique.
func (m *Metrics) NodesOf(cpus []int) []int {
	seen := map[int]bool{}
	var out []int
	for _, c := range cpus {
		if c >= 0 && c < len(m.nodeOf) && m.nodeOf[c] >= 0 && !seen[m.nodeOf[c]] {
			seen[m.nodeOf[c]] = true
			out = append(out, m.nodeOf[c])
		}
	}
	sort.Ints(out)
	return out
}

// Busy is the fraction of a CPU's time the target ran on it. It comes from
// the target's cpu-clock count (nanoseconds of on-CPU time) when that was
// measured, otherwise from stack samples divided by the sampling rate.
func (m *Metrics) Busy(cpu int) float64 {
	if m.DurationS <= 0 {
		return 0
	}
	if m.Measured(metric.CPUClock) {
		return m.PerCPU(metric.CPUClock, cpu) / 1e9 / m.DurationS
	}
	if hz := m.header.Settings.SampleHz; hz > 0 && cpu < len(m.SamplesPerCPU) {
		return float64(m.SamplesPerCPU[cpu]) / float64(hz) / m.DurationS
	}
	return 0
}

// Demand is the fraction of a CPU's time the target ran on it or waited
// in its run queue: how much of the core it wanted, whatever other load
// took. On a shared host a busy thread's Busy is what it got; Demand is
// what it asked for.
func (m *Metrics) Demand(cpu int) float64 {
	if m.DurationS <= 0 || cpu < 0 || cpu >= len(m.RunqNSPerCPU) {
		return m.Busy(cpu)
	}
	return m.Busy(cpu) + m.RunqNSPerCPU[cpu]/1e9/m.DurationS
}

// OnCPUSeconds is the target's total on-CPU time from cpu-clock.
func (m *Metrics) OnCPUSeconds() float64 { return m.Total(metric.CPUClock) / 1e9 }

// HistogramCount is the number of values in a histogram.
func HistogramCount(b []uint64) uint64 {
	var n uint64
	for _, c := range b {
		n += c
	}
	return n
}

// PIDs lists the target's process ids, sorted.
func (m *Metrics) PIDs() []int {
	if len(m.pids) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(m.pids))
}

func sum(v []uint64) float64 {
	var t float64
	for _, x := range v {
		t += float64(x)
	}
	return t
}

// ratio divides, returning NaN for an empty denominator so that a rule
// never compares a ratio of nothing against a threshold.
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}
