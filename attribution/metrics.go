package attribution

import (
	"math"
	"sort"

	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/profile"
)

// Metrics is what the rules read: a recording reduced to totals, rates,
// per-CPU splits and per-window series. Every value is derived from the
// recording's counts; nothing is estimated except where a field says so.
type Metrics struct {
	rec *profile.Recording
	// selfNames caches selfName by (user, kernel) stack id.
	selfNames map[[2]uint64]string

	// DurationS is the recorded time, first window start to last window
	// end.
	DurationS float64
	// CPUs are the online CPU ids that were recorded (Settings.CPUs or the
	// whole topology).
	CPUs   []int
	nodeOf []int

	status map[string]profile.EventStatus
	// Totals and HostTotals sum each event's per-CPU counts over all
	// windows, for the target's tasks and for every task.
	Totals     map[string][]uint64
	HostTotals map[string][]uint64
	Processes  []profile.ProcessSummary
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
	// midpoints (see HistogramSum).
	RunqNSPerCPU []float64
}

// WindowMetrics is one window reduced to totals.
type WindowMetrics struct {
	StartNS, EndNS int64
	DurationS      float64
	// Counts sums each event over CPUs (target's tasks).
	Counts map[string]uint64
	// Hist sums each histogram over CPUs; HistPerCPU keeps the split.
	Hist       map[string][]uint64
	HistPerCPU map[string][]profile.Counts
}

// Rate is an event's per-second rate in the window.
func (w *WindowMetrics) Rate(event string) float64 {
	if w.DurationS <= 0 {
		return 0
	}
	return float64(w.Counts[event]) / w.DurationS
}

// NewMetrics derives the metrics of a recording.
func NewMetrics(rec *profile.Recording) *Metrics {
	m := &Metrics{
		rec:         rec,
		status:      map[string]profile.EventStatus{},
		Totals:      rec.CounterTotals(false),
		HostTotals:  rec.CounterTotals(true),
		Processes:   rec.ProcessTotals(),
		hists:       map[string]bool{},
		nodeOf:      rec.Header.Host.Topology.NodeOf(),
		CPUs:        recordedCPUs(&rec.Header),
		SampleEvent: rec.PrimarySampleEvent(),
	}
	for _, e := range rec.Header.Events {
		m.status[e.Name] = e
	}
	if n := len(rec.Windows); n > 0 {
		m.DurationS = float64(rec.Windows[n-1].EndNS-rec.Windows[0].StartNS) / 1e9
	}
	ncpu := rec.Header.Host.Topology.MaxCPU() + 1
	m.SamplesPerCPU = make([]uint64, ncpu)
	tids := map[int]bool{}
	for i := range rec.Windows {
		m.addWindow(&rec.Windows[i], tids)
	}
	m.Threads = len(tids)
	m.RunqNSPerCPU = make([]float64, ncpu)
	for _, w := range m.Windows {
		for cpu, b := range w.HistPerCPU[profile.HistRunqLatency] {
			if cpu < ncpu {
				m.RunqNSPerCPU[cpu] += HistogramSum(b)
			}
		}
	}
	return m
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

// addWindow reduces one window: its counts and histograms, the primary
// event's samples per CPU, and the target threads present (into tids).
func (m *Metrics) addWindow(w *profile.Window, tids map[int]bool) {
	wm := WindowMetrics{
		StartNS: w.StartNS, EndNS: w.EndNS,
		DurationS:  float64(w.EndNS-w.StartNS) / 1e9,
		Counts:     map[string]uint64{},
		Hist:       map[string][]uint64{},
		HistPerCPU: map[string][]profile.Counts{},
	}
	for _, c := range w.Counters {
		for _, v := range c.PerCPU {
			wm.Counts[c.Event] += v
		}
	}
	for _, h := range w.Histograms {
		m.hists[h.Name] = true
		wm.addHistogram(h)
	}
	for _, s := range w.Samples {
		if s.Event == m.SampleEvent && s.CPU >= 0 && s.CPU < len(m.SamplesPerCPU) {
			m.SamplesPerCPU[s.CPU] += s.Count
			m.SampleTotal += s.Count
		}
	}
	var present int
	for _, p := range w.Processes {
		if len(p.Threads) == 0 {
			present++
			tids[-p.PID] = true
			continue
		}
		for _, t := range p.Threads {
			present++
			tids[t.TID] = true
		}
	}
	m.ThreadSeconds += float64(present) * wm.DurationS
	m.Windows = append(m.Windows, wm)
}

// addHistogram adds one of the window's histograms to its sums.
func (wm *WindowMetrics) addHistogram(h profile.Histogram) {
	sum, ok := wm.Hist[h.Name]
	if !ok {
		sum = make([]uint64, profile.HistBuckets)
		wm.Hist[h.Name] = sum
	}
	h.AddTo(sum)
	// A window holds each histogram once: keep the recording's per-CPU
	// counts rather than copying them (128 CPUs x 40 buckets a window is
	// most of this pass on a large host). A repeated name is merged into
	// a copy.
	per, seen := wm.HistPerCPU[h.Name]
	if !seen {
		wm.HistPerCPU[h.Name] = h.PerCPU
		return
	}
	merged := make([]profile.Counts, max(len(per), len(h.PerCPU)))
	for cpu := range merged {
		merged[cpu] = make(profile.Counts, profile.HistBuckets)
		for _, src := range [][]profile.Counts{per, h.PerCPU} {
			if cpu < len(src) {
				for i, c := range src[cpu] {
					merged[cpu][i] += c
				}
			}
		}
	}
	wm.HistPerCPU[h.Name] = merged
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
	return len(m.rec.Header.Settings.SampleEvents) > 0 && (m.rec.Header.Settings.SampleHz > 0 || m.rec.Header.Settings.SamplePeriod > 0)
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
	if hz := m.rec.Header.Settings.SampleHz; hz > 0 && cpu < len(m.SamplesPerCPU) {
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

// HistogramSum estimates the sum of the values in a log2 histogram: each
// bucket's count times its midpoint. A value in [2^i, 2^(i+1)) is off from
// the midpoint 1.5*2^i by at most a third, so the estimate is within
// -33%..+50% of the truth, bounded the same way for every bucket.
func HistogramSum(b []uint64) float64 {
	var s float64
	for i, c := range b {
		if c > 0 {
			s += float64(c) * (profile.BucketLower(i) + profile.BucketUpper(i)) / 2
		}
	}
	return s
}

// HistogramCount is the number of values in a histogram.
func HistogramCount(b []uint64) uint64 {
	var n uint64
	for _, c := range b {
		n += c
	}
	return n
}

// selfName names the code a sample hit: the innermost user frame names the
// target's code; a kernel frame (a syscall or fault handler) says less
// about where to look, so the innermost kernel frame is used only when the
// sample has no user frame.
func (m *Metrics) selfName(s profile.Sample) string {
	key := [2]uint64{s.UserStack, s.KernelStack}
	if name, ok := m.selfNames[key]; ok {
		return name
	}
	if m.selfNames == nil {
		m.selfNames = map[[2]uint64]string{}
	}
	name := m.innermost(s)
	m.selfNames[key] = name
	return name
}

func (m *Metrics) innermost(s profile.Sample) string {
	for _, id := range []uint64{s.UserStack, s.KernelStack} {
		if id == 0 {
			continue
		}
		if fr := m.rec.Stacks[id].Frames; len(fr) > 0 {
			return fr[0].String()
		}
	}
	return "[unknown]"
}

// PIDs lists the target's process ids.
func (m *Metrics) PIDs() []int {
	var out []int
	for _, p := range m.Processes {
		out = append(out, p.PID)
	}
	return out
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

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
