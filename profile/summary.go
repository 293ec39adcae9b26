package profile

import (
	"math"
	"sort"
	"strconv"
	"strings"
)

// Summary is the stable `inspect --json` document. Fields may
// be added; none may be renamed or removed without a new format_version.
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
	AppMetrics map[string]float64 `json:"app_metrics"`
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

// EventScaling sums each counted event's enabled and running times over
// the windows.
func (r *Recording) EventScaling() map[string][2]uint64 {
	out := map[string][2]uint64{}
	for _, w := range r.Windows {
		for _, c := range w.Counters {
			t := out[c.Event]
			t[0] += c.Enabled
			t[1] += c.Running
			out[c.Event] = t
		}
	}
	return out
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
	// event (samples.event); Summarize fills it.
	Samples uint64          `json:"samples"`
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
}

// FunctionStat counts samples whose innermost resolved frame (self) is a
// function.
type FunctionStat struct {
	Name    string `json:"name"`
	Samples uint64 `json:"samples"`
}

// Summarize builds the inspect summary of a recording.
func Summarize(r *Recording) Summary {
	h := r.Header
	s := Summary{
		FormatVersion: h.Major(),
		Host: SummaryHost{
			Hostname: h.Host.Hostname, Kernel: h.Host.Kernel, CPUModel: h.Host.CPUModel,
			Vendor: h.Host.Vendor, CPUs: len(h.Host.Topology.CPUs), NUMANodes: len(h.Host.Topology.Nodes),
		},
		Target:     h.Target,
		IntervalS:  float64(h.Settings.IntervalNS) / 1e9,
		Windows:    len(r.Windows),
		Mode:       h.Host.Mode,
		Truncated:  r.Truncated,
		Warning:    r.Warning,
		Events:     []EventSummary{},
		PMU:        h.PMU,
		Synthetic:  h.Synthetic,
		Totals:     map[string]Total{},
		HostTotals: map[string]Total{},
		Processes:  []ProcessSummary{},
		Histograms: []HistogramSummary{},
		AppMetrics: map[string]float64{},
	}
	if s.Target.PIDs == nil {
		s.Target.PIDs = []int{}
	}
	scaling := r.EventScaling()
	for _, e := range h.Events {
		es := EventSummary{EventStatus: e}
		if t, ok := scaling[e.Name]; ok && e.Status == StatusMeasured {
			es.EnabledNS, es.RunningNS = t[0], t[1]
			es.Scaling = math.Round(ScalingFactor(t[0], t[1])*1000) / 1000
		}
		s.Events = append(s.Events, es)
	}
	if n := len(r.Windows); n > 0 {
		s.DurationS = float64(r.Windows[n-1].EndNS-r.Windows[0].StartNS) / 1e9
	}
	st := Stretched(r)
	s.StretchedWindows, s.LongestWindowS = st.Stretched, float64(st.LongestNS)/1e9
	if r.Trailer != nil {
		s.EndReason = r.Trailer.EndReason
		s.ExitStatus = r.Trailer.ExitStatus
		s.ExitSignal = r.Trailer.ExitSignal
		s.Warnings = r.Trailer.Warnings
		for k, v := range r.Trailer.AppMetrics {
			s.AppMetrics[k] = v
		}
		s.AppMetricsPartial = r.Trailer.AppMetricsPartial
	}
	s.OffCPU = r.OffCPUSummary(10)
	nodeOf := h.Host.Topology.NodeOf()
	for name, per := range r.CounterTotals(false) {
		s.Totals[name] = makeTotal(per, nodeOf)
	}
	for name, per := range r.CounterTotals(true) {
		s.HostTotals[name] = makeTotal(per, nodeOf)
	}
	s.Processes = r.ProcessTotals()
	primary := r.PrimarySampleEvent()
	samplesByPID := map[int]uint64{}
	for _, w := range r.Windows {
		for _, smp := range w.Samples {
			if smp.Event == primary {
				samplesByPID[smp.PID] += smp.Count
			}
		}
	}
	for i := range s.Processes {
		s.Processes[i].Samples = samplesByPID[s.Processes[i].PID]
	}
	for _, name := range r.HistogramNames() {
		b := r.HistogramTotal(name)
		hs := HistogramSummary{Name: name, Unit: "ns", P50: Percentile(b, 0.5), P90: Percentile(b, 0.9), P99: Percentile(b, 0.99)}
		for i, c := range b {
			hs.Count += c
			if c > 0 {
				hs.Max = BucketUpper(i)
			}
		}
		s.Histograms = append(s.Histograms, hs)
	}
	s.Samples = r.samplesSummary(20)
	for _, w := range r.Windows {
		s.Drops.Add(w.Drops)
		if r.Trailer == nil {
			for k, v := range w.AppMetrics {
				s.AppMetrics[k] = v
			}
		}
	}
	s.Samples.Dropped = s.Drops.StackErrors + s.Drops.SampleMapFull
	s.Functions = []FunctionSummary{}
	for _, a := range r.FunctionTotals(0, len(r.Windows)) {
		s.Functions = append(s.Functions, a.Summarize())
	}
	return s
}

func makeTotal(per []uint64, nodeOf []int) Total {
	t := Total{PerCPU: map[string]uint64{}, PerNode: map[string]uint64{}}
	for cpu, v := range per {
		t.Total += v
		if cpu < len(nodeOf) && nodeOf[cpu] >= 0 {
			t.PerCPU[strconv.Itoa(cpu)] += v
			t.PerNode[strconv.Itoa(nodeOf[cpu])] += v
		}
	}
	return t
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
			dst, ok := out[c.Event]
			if !ok {
				dst = make([]uint64, n)
				out[c.Event] = dst
			}
			for i, v := range src {
				if i < n {
					dst[i] += v
				}
			}
		}
	}
	return out
}

// ProcessTotals sums per-process and per-thread counts over all windows,
// sorted by PID.
func (r *Recording) ProcessTotals() []ProcessSummary {
	byPID := map[int]*ProcessSummary{}
	threads := map[int]map[int]*ThreadSummary{}
	for _, w := range r.Windows {
		for _, p := range w.Processes {
			ps, ok := byPID[p.PID]
			if !ok {
				ps = &ProcessSummary{PID: p.PID, Totals: map[string]uint64{}}
				byPID[p.PID] = ps
				threads[p.PID] = map[int]*ThreadSummary{}
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
				ts, ok := threads[p.PID][t.TID]
				if !ok {
					ts = &ThreadSummary{TID: t.TID, Totals: map[string]uint64{}}
					threads[p.PID][t.TID] = ts
				}
				if t.Comm != "" {
					ts.Comm = t.Comm
				}
				for k, v := range t.Counts {
					ts.Totals[k] += v
				}
			}
		}
	}
	out := make([]ProcessSummary, 0, len(byPID))
	for pid, ps := range byPID {
		for _, ts := range threads[pid] {
			ps.Threads = append(ps.Threads, *ts)
		}
		sort.Slice(ps.Threads, func(i, j int) bool { return ps.Threads[i].TID < ps.Threads[j].TID })
		out = append(out, *ps)
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
	for _, e := range r.Header.Settings.SampleEvents {
		if counts[e] > 0 {
			return e
		}
	}
	if len(r.Header.Settings.SampleEvents) > 0 {
		return r.Header.Settings.SampleEvents[0]
	}
	return ""
}

// FunctionCounts returns, for one sample event, self counts (innermost
// frame) and total counts (function anywhere on the stack, once per
// sample) per function name. User frames come before kernel frames: the
// innermost frame is the kernel's when the sample hit in the kernel.
func (r *Recording) FunctionCounts(event string) (self, total map[string]uint64) {
	self, total = map[string]uint64{}, map[string]uint64{}
	for _, w := range r.Windows {
		for _, s := range w.Samples {
			if s.Event != event {
				continue
			}
			frames := r.SampleFrames(s)
			if len(frames) == 0 {
				self["[unknown]"] += s.Count
				total["[unknown]"] += s.Count
				continue
			}
			self[frames[0].String()] += s.Count
			seen := map[string]bool{}
			for _, f := range frames {
				name := f.String()
				if !seen[name] {
					seen[name] = true
					total[name] += s.Count
				}
			}
		}
	}
	return self, total
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

func (r *Recording) samplesSummary(top int) SamplesSummary {
	ev := r.PrimarySampleEvent()
	ss := SamplesSummary{Event: ev, TopFunctions: []FunctionStat{}, RequestedHz: float64(r.Header.Settings.SampleHz)}
	var achieved float64
	var n int
	for _, w := range r.Windows {
		for _, s := range w.Samples {
			if s.Event == ev {
				ss.Total += s.Count
			}
		}
		for _, sr := range w.SampleRate {
			if sr.Event == ev {
				achieved += sr.Achieved
				n++
			}
		}
	}
	if n > 0 {
		ss.AchievedHz = achieved / float64(n)
	}
	self, _ := r.FunctionCounts(ev)
	ss.TopFunctions = TopN(self, top)
	return ss
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

// FormatNS writes a duration in nanoseconds with the unit that reads best
// and three significant digits: 512ns, 1.02us, 2.1ms, 1.1s. Every text and
// page that shows a latency uses it, so one value reads the same
// everywhere.
func FormatNS(ns float64) string {
	switch {
	case ns >= 1e9:
		return strconv.FormatFloat(ns/1e9, 'g', 3, 64) + "s"
	case ns >= 1e6:
		return strconv.FormatFloat(ns/1e6, 'g', 3, 64) + "ms"
	case ns >= 1e3:
		return strconv.FormatFloat(ns/1e3, 'g', 3, 64) + "us"
	}
	return strconv.FormatFloat(ns, 'g', 3, 64) + "ns"
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
