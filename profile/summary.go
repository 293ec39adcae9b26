package profile

import (
	"math"
	"sort"
	"strconv"
	"strings"
)

// Summary is the stable `inspect --json` document. Fields may
// be added; none may be renamed or removed without a new format_version.
// model.Model.Summary derives it.
type Summary struct {
	FormatVersion string         `json:"format_version"`
	Host          SummaryHost    `json:"host"`
	Target        Target         `json:"target"`
	IntervalS     float64        `json:"interval_s"`
	Windows       int            `json:"windows"`
	DurationS     float64        `json:"duration_s"`
	EndReason     string         `json:"end_reason"` // "" when truncated
	ExitStatus    *int           `json:"exit_status,omitempty"`
	ExitSignal    string         `json:"exit_signal,omitempty"`
	Mode          string         `json:"mode"`
	Truncated     bool           `json:"truncated"`
	Warning       string         `json:"warning,omitempty"`
	Events        []EventSummary `json:"events"`
	// PMU and Synthetic repeat the header's: a simulated or synthetic
	// recording must never pass for a measured one.
	PMU        *PMU               `json:"pmu,omitempty"`
	Synthetic  string             `json:"synthetic,omitempty"`
	Totals     map[string]Total   `json:"totals"`
	HostTotals map[string]Total   `json:"host_totals"`
	Processes  []ProcessSummary   `json:"processes"`
	Histograms []HistogramSummary `json:"histograms"`
	Samples    SamplesSummary     `json:"samples"`
	Drops      Drops              `json:"drops"`
	// DropWindows are the windows that lost data, in order: where in the
	// recording the drops counted in Drops happened.
	DropWindows []WindowDrops      `json:"drop_windows"`
	AppMetrics  map[string]float64 `json:"app_metrics"`
	// Functions are the --func functions' latency and per-call counters.
	Functions []FunctionSummary `json:"functions"`
	// AppMetricsPartial: the command had not finished when its metrics
	// were last read (Trailer.AppMetricsPartial).
	AppMetricsPartial bool `json:"app_metrics_partial,omitempty"`
	// OffCPU is where the target was blocked; absent in recordings
	// without off-CPU stacks.
	OffCPU *OffCPUSummary `json:"offcpu,omitempty"`
	// StretchedWindows counts windows that lasted more than
	// StretchFactor times the interval (the recorder was starved);
	// LongestWindowS is the longest window.
	StretchedWindows int     `json:"stretched_windows"`
	LongestWindowS   float64 `json:"longest_window_s"`
	// QuietWindows counts the windows the recorder slept through while
	// the target did nothing (Window.Quiet), QuietS their length summed.
	QuietWindows int     `json:"quiet_windows"`
	QuietS       float64 `json:"quiet_s"`
	// Warnings are the recorder's own (the trailer's): data lost,
	// malformed app metrics, stretched windows.
	Warnings []string `json:"warnings,omitempty"`
}

// EventSummary is an event's status with its multiplexing over the whole
// recording: the time its counters were enabled and running, summed over
// CPUs and windows, and Scaling = enabled / running, the factor its
// counts were extrapolated by (1 when it was never multiplexed, 0 when it
// never counted).
type EventSummary struct {
	EventStatus
	EnabledNS uint64  `json:"enabled_ns,omitempty"`
	RunningNS uint64  `json:"running_ns,omitempty"`
	Scaling   float64 `json:"scaling,omitempty"`
}

// ScalingFactor is enabled / running, 0 when the counter never ran.
func ScalingFactor(enabled, running uint64) float64 {
	if running == 0 {
		return 0
	}
	return float64(enabled) / float64(running)
}

// SummaryHost is the host block of the summary.
type SummaryHost struct {
	Hostname  string `json:"hostname"`
	Kernel    string `json:"kernel"`
	CPUModel  string `json:"cpu_model"`
	Vendor    string `json:"vendor"`
	CPUs      int    `json:"cpus"`
	NUMANodes int    `json:"numa_nodes"`
}

// Total is one event's total with its per-CPU and per-node split. Map keys
// are decimal ids, as JSON object keys must be strings.
type Total struct {
	Total   uint64            `json:"total"`
	PerCPU  map[string]uint64 `json:"per_cpu"`
	PerNode map[string]uint64 `json:"per_node"`
}

// ProcessSummary is one target process over the whole recording.
type ProcessSummary struct {
	PID     int               `json:"pid"`
	Comm    string            `json:"comm"`
	Cmdline []string          `json:"cmdline,omitempty"`
	Totals  map[string]uint64 `json:"totals"`
	// Samples counts the process's stack samples of the primary sample
	// event (samples.event); Summarize fills it. Unnamed is what of them
	// was left unnamed and why (absent when all were named).
	Samples uint64          `json:"samples"`
	Unnamed *UnnamedSummary `json:"unnamed,omitempty"`
	Threads []ThreadSummary `json:"threads,omitempty"`

	// Container: the process's container id or pod uid, when it had one.
	Container string `json:"container,omitempty"`
}

// ThreadSummary is one thread over the whole recording.
type ThreadSummary struct {
	TID    int               `json:"tid"`
	Comm   string            `json:"comm"`
	Totals map[string]uint64 `json:"totals"`
}

// HistogramSummary gives a histogram's count and percentiles.
type HistogramSummary struct {
	Name  string  `json:"name"`
	Unit  string  `json:"unit"`
	Count uint64  `json:"count"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"` // upper bound of the highest non-empty bucket
}

// SamplesSummary describes the stack samples of the primary sample event.
type SamplesSummary struct {
	Event        string         `json:"event"`
	Total        uint64         `json:"total"`
	Dropped      uint64         `json:"dropped"`
	RequestedHz  float64        `json:"requested_hz"`
	AchievedHz   float64        `json:"achieved_hz"`
	TopFunctions []FunctionStat `json:"top_functions"`
	// Unnamed is what of the samples was left unnamed, and why.
	Unnamed UnnamedSummary `json:"unnamed"`
}

// UnnamedSummary counts samples whose innermost frame names no function:
// how many, their share, and how many for each reason (why a process
// that exited, stripped file, JIT code or hidden kernel symbols).
type UnnamedSummary struct {
	Samples uint64            `json:"samples"`
	Share   float64           `json:"share"`
	Reasons map[string]uint64 `json:"reasons"`
}

// FunctionStat counts samples whose innermost resolved frame (self) is a
// function.
type FunctionStat struct {
	Name    string `json:"name"`
	Samples uint64 `json:"samples"`
}

// CounterTotals sums each event's per-CPU deltas over all windows: the
// target's (host=false) or every task's (host=true).
func (r *Recording) CounterTotals(host bool) map[string][]uint64 {
	out := map[string][]uint64{}
	n := r.Header.Host.Topology.MaxCPU() + 1
	for _, w := range r.Windows {
		for _, c := range w.Counters {
			src := c.PerCPU
			if host {
				src = c.HostPerCPU
				if src == nil {
					continue
				}
			}
			AddCounts(out, c.Event, src, n)
		}
	}
	return out
}

// AddCounts adds per-CPU counts (CPU ids below ncpu) into dst[name], made
// on first use: how CounterTotals sums a recording in memory and how
// stream consumers (model, attribution) sum window by window.
func AddCounts(dst map[string][]uint64, name string, per Counts, ncpu int) {
	d, ok := dst[name]
	if !ok {
		d = make([]uint64, ncpu)
		dst[name] = d
	}
	for i, v := range per {
		if i < ncpu {
			d[i] += v
		}
	}
}

// ProcessTotals sums per-process and per-thread counts over all windows,
// sorted by PID.
func (r *Recording) ProcessTotals() []ProcessSummary {
	var t ProcessTotaler
	for _, w := range r.Windows {
		for _, p := range w.Processes {
			t.Add(p)
		}
	}
	return t.Totals()
}

// ProcessTotaler sums processes and their threads window by window: the
// one place that says how a process's totals and names are kept, for a
// recording in memory (ProcessTotals) and for a stream (the model).
type ProcessTotaler struct {
	byPID   map[int]*ProcessSummary
	threads map[int]map[int]*ThreadSummary
}

// Add adds one window's row of a process.
func (a *ProcessTotaler) Add(p Process) {
	if a.byPID == nil {
		a.byPID = map[int]*ProcessSummary{}
		a.threads = map[int]map[int]*ThreadSummary{}
	}
	ps, ok := a.byPID[p.PID]
	if !ok {
		ps = &ProcessSummary{PID: p.PID, Totals: map[string]uint64{}}
		a.byPID[p.PID] = ps
		a.threads[p.PID] = map[int]*ThreadSummary{}
	}
	// The latest name wins: a process that exec()s changes comm.
	if p.Comm != "" {
		ps.Comm = p.Comm
	}
	if len(p.Cmdline) > 0 {
		ps.Cmdline = p.Cmdline
	}
	if p.Container != "" {
		ps.Container = p.Container
	}
	for k, v := range p.Counts {
		ps.Totals[k] += v
	}
	for _, t := range p.Threads {
		ts, ok := a.threads[p.PID][t.TID]
		if !ok {
			ts = &ThreadSummary{TID: t.TID, Totals: map[string]uint64{}}
			a.threads[p.PID][t.TID] = ts
		}
		if t.Comm != "" {
			ts.Comm = t.Comm
		}
		for k, v := range t.Counts {
			ts.Totals[k] += v
		}
	}
}

// Totals returns the processes by PID, each with its threads by TID.
func (a *ProcessTotaler) Totals() []ProcessSummary {
	out := make([]ProcessSummary, 0, len(a.byPID))
	for pid, ps := range a.byPID {
		p := *ps
		p.Threads = nil
		for _, ts := range a.threads[pid] {
			p.Threads = append(p.Threads, *ts)
		}
		sort.Slice(p.Threads, func(i, j int) bool { return p.Threads[i].TID < p.Threads[j].TID })
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// HistogramNames lists the histograms present, in first-seen order.
func (r *Recording) HistogramNames() []string {
	var names []string
	seen := map[string]bool{}
	for _, w := range r.Windows {
		for _, h := range w.Histograms {
			if !seen[h.Name] {
				seen[h.Name] = true
				names = append(names, h.Name)
			}
		}
	}
	return names
}

// HistogramTotal sums a histogram over all CPUs and windows.
func (r *Recording) HistogramTotal(name string) []uint64 {
	out := make([]uint64, HistBuckets)
	for _, w := range r.Windows {
		for _, h := range w.Histograms {
			if h.Name == name {
				h.AddTo(out)
			}
		}
	}
	return out
}

// AddTo adds the histogram's counts, summed over CPUs, into dst (length
// HistBuckets).
func (h *Histogram) AddTo(dst []uint64) {
	for _, b := range h.PerCPU {
		for i, c := range b {
			if i < len(dst) {
				dst[i] += c
			}
		}
	}
}

// BucketLower is the smallest value counted in log2 bucket i.
func BucketLower(i int) float64 {
	if i == 0 {
		return 0
	}
	return math.Ldexp(1, i)
}

// BucketUpper is the bound above the values counted in bucket i.
func BucketUpper(i int) float64 { return math.Ldexp(1, i+1) }

// HistogramSum estimates the sum of the values in a log2 histogram: each
// bucket's count times its midpoint. A value in [2^i, 2^(i+1)) is off from
// the midpoint 1.5*2^i by at most a third, so the estimate is within
// -33%..+50% of the truth, bounded the same way for every bucket.
func HistogramSum(b []uint64) float64 {
	var s float64
	for i, c := range b {
		if c > 0 {
			s += float64(c) * (BucketLower(i) + BucketUpper(i)) / 2
		}
	}
	return s
}

// Percentile estimates the q-quantile (0 < q <= 1) of a log2 histogram,
// interpolating linearly inside the bucket that holds it. It returns 0 for
// an empty histogram.
func Percentile(buckets []uint64, q float64) float64 {
	var total uint64
	for _, c := range buckets {
		total += c
	}
	if total == 0 {
		return 0
	}
	rank := q * float64(total)
	var cum float64
	for i, c := range buckets {
		if c == 0 {
			continue
		}
		if cum+float64(c) >= rank {
			lo, hi := BucketLower(i), BucketUpper(i)
			return lo + (hi-lo)*(rank-cum)/float64(c)
		}
		cum += float64(c)
	}
	return BucketUpper(len(buckets) - 1)
}

// PrimarySampleEvent is the event whose samples the summary and report
// lead with: the first of Settings.SampleEvents that has samples.
func (r *Recording) PrimarySampleEvent() string {
	counts := map[string]uint64{}
	for _, w := range r.Windows {
		for _, s := range w.Samples {
			counts[s.Event] += s.Count
		}
	}
	return PrimaryOf(r.Header.Settings.SampleEvents, func(e string) uint64 { return counts[e] })
}

// PrimaryOf is the rule every reader names the primary sample event by:
// the first of a recording's sample events (Settings.SampleEvents) with
// samples, else the first of them; samples counts an event's samples.
func PrimaryOf(events []string, samples func(event string) uint64) string {
	for _, e := range events {
		if samples(e) > 0 {
			return e
		}
	}
	if len(events) > 0 {
		return events[0]
	}
	return ""
}

// SampleFrames returns a sample's frames innermost first: kernel frames,
// then user frames.
func (r *Recording) SampleFrames(s Sample) []Frame {
	var out []Frame
	if s.KernelStack != 0 {
		out = append(out, r.Stacks[s.KernelStack].Frames...)
	}
	if s.UserStack != 0 {
		out = append(out, r.Stacks[s.UserStack].Frames...)
	}
	return out
}

// TopN returns the n largest entries of counts, largest first, ties by
// name.
func TopN(counts map[string]uint64, n int) []FunctionStat {
	out := make([]FunctionStat, 0, len(counts))
	for k, v := range counts {
		out = append(out, FunctionStat{Name: k, Samples: v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Samples != out[j].Samples {
			return out[i].Samples > out[j].Samples
		}
		return out[i].Name < out[j].Name
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// GroupDigits writes a count in groups of three digits joined by sep
// ("12 345 678"); counts of four digits or fewer stay whole.
func GroupDigits(v uint64, sep string) string {
	s := strconv.FormatUint(v, 10)
	if len(s) <= 4 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteString(sep)
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Plural writes a count and its noun, in the plural unless n is 1:
// "1 window", "2 windows", "3 processes".
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "s") {
		noun += "es"
	} else {
		noun += "s"
	}
	return strconv.Itoa(n) + " " + noun
}

// WindowDrops is what one window lost.
type WindowDrops struct {
	Window int   `json:"window"` // its index
	Drops  Drops `json:"drops"`
}
