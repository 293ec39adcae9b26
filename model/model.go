package model

import (
	"fmt"

	"github.com/cacheheat/cacheheat/profile"
)

// Model is a recording reduced to what its views show. Per-CPU arrays are
// indexed by CPU id (length MaxCPU()+1 of the topology).
type Model struct {
	Header    profile.Header
	Trailer   *profile.Trailer // nil when the recording was cut short
	Truncated bool
	Warning   string
	// Stacks holds every stack the samples and off-CPU stacks refer to.
	Stacks map[uint64]profile.Stack
	// Light is the recording without its bulk: its windows keep their
	// index, time span, quiet mark, off-CPU stacks and waits, --func calls, and nothing
	// else (no counters, processes, histograms or samples; those are
	// reduced into the fields below).
	Light *profile.Recording

	// Events are the measured events: the header's, in its order, then
	// any event that windows carry but the header does not list.
	Events []string
	// Totals and HostTotals sum each event's per-CPU counts over the
	// windows: the target's tasks and every task.
	Totals     map[string][]uint64
	HostTotals map[string][]uint64
	// Series holds each event's target per-CPU counts window by window
	// (nil for a window without the event): the per-core heatmap's data.
	Series map[string][]profile.Counts
	// Scaling sums each event's enabled and running time over windows.
	Scaling map[string][2]uint64
	// Processes are the target's processes over the recording, sorted by
	// PID, their threads by TID; Samples counts the primary sample
	// event's.
	Processes []profile.ProcessSummary
	// Histograms are the latency histograms in first-seen order.
	Histograms []Histogram
	// SampleEvents are the events with stack samples: the header's
	// sample events, then any other event samples carry. Samples holds
	// each one's aggregates; PrimarySample is the one views lead with.
	SampleEvents  []string
	Samples       map[string]*Samples
	PrimarySample string
	// SampleRates compares requested and achieved sampling, per event in
	// first-seen order, averaged over the windows that sampled it.
	SampleRates []SampleRate
	Drops       profile.Drops
	// DropWindows are the windows that lost data, in order.
	DropWindows []profile.WindowDrops
	// AppMetrics merges the windows' application metrics (later windows
	// win); LastAppMetrics is the last window's that had any.
	AppMetrics     map[string]float64
	LastAppMetrics map[string]float64
	Stretch        profile.Stretch

	// ThreadSeconds sums, over windows, the number of target threads
	// (or processes without thread detail) in the window times its
	// length: the denominator of per-thread rates. Threads is the number
	// of distinct threads seen.
	ThreadSeconds float64
	Threads       int

	// What the findings read beyond the views (derived.go).
	//
	// Working counts, window by window, the target threads that did
	// work in the window (workingShare of its busiest, at least
	// workingFloorNS).
	Working []int
	// CPUTime is each CPU's time by who had it.
	CPUTime CPUTime
	// RunqNSPerCPU estimates the target's run-queue wait on each CPU (the
	// CPU it was switched in on) from the runq-latency histogram, bucket
	// midpoints (profile.HistogramSum).
	RunqNSPerCPU []float64
	// Others counts the other processes' samples (the recorder's
	// others, by process); OthersTotal sums them.
	Others      map[Other]uint64
	OthersTotal uint64
	// SelfNames interns the innermost functions of Samples' Self rows.
	SelfNames []string
}

// Histogram is one latency histogram over the recording.
type Histogram struct {
	Name string
	// Total sums the buckets over CPUs and windows; PerWindow sums them
	// over CPUs, window by window (nil where a window lacks it).
	Total     []uint64
	PerWindow [][]uint64
}

// P returns the q-quantile of the whole recording's histogram.
func (h *Histogram) P(q float64) float64 { return profile.Percentile(h.Total, q) }

// Count is the number of values the histogram counted.
func (h *Histogram) Count() uint64 { return sum(h.Total) }

// StackPair names a sample's stacks (0: none).
type StackPair struct{ User, Kernel uint64 }

// Samples aggregates one event's stack samples.
type Samples struct {
	Total uint64
	ByPID map[int]uint64
	// ByStack counts the samples of each stack pair.
	ByStack map[StackPair]uint64
	// PerCPU counts the samples on each CPU, window by window (nil where
	// a window has none): the per-core heatmap's samples metric.
	PerCPU []profile.Counts
	// Self holds, window by window, the samples by CPU and innermost
	// function (SelfName; nil where a window has none): what a finding
	// names its functions by, on its CPUs and in its time range.
	Self [][]SelfCount
	// Unnamed counts the samples whose innermost frame names no function,
	// by process and reason (unnamed.go); nil when all are named.
	Unnamed map[int]map[string]uint64
}

// SampleRate is one sample event's rate over the recording: the mean over
// the windows that report it.
type SampleRate struct {
	Event                 string
	RequestedHz, Achieved float64
	Samples               uint64
}

// Window is the i-th window's time span.
func (m *Model) Window(i int) *profile.Window { return &m.Light.Windows[i] }

// Windows is the number of windows.
func (m *Model) Windows() int { return len(m.Light.Windows) }

// DurationS is the recorded time, first window start to last window end.
func (m *Model) DurationS() float64 {
	ws := m.Light.Windows
	if len(ws) == 0 {
		return 0
	}
	return float64(ws[len(ws)-1].EndNS-ws[0].StartNS) / 1e9
}

// Histogram returns the histogram named name, nil when none was recorded.
func (m *Model) Histogram(name string) *Histogram {
	for i := range m.Histograms {
		if m.Histograms[i].Name == name {
			return &m.Histograms[i]
		}
	}
	return nil
}

// Frames returns a stack pair's frames innermost first: kernel frames,
// then user frames.
func (m *Model) Frames(p StackPair) []profile.Frame {
	return m.Light.SampleFrames(profile.Sample{UserStack: p.User, KernelStack: p.Kernel})
}

// ReadFile builds the model of the recording at path, streaming it.
func ReadFile(path string) (*Model, error) {
	s, err := profile.OpenFile(path)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	m, err := Read(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Read builds the model of a stream's windows; the stream is read to its
// end.
func Read(s *profile.Stream) (*Model, error) {
	b := NewBuilder(s.Header, s.Stacks)
	for w := range s.Windows() {
		b.Add(w)
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	return b.Model(s.Trailer, s.Truncated, s.Warning), nil
}

// FromRecording builds the model of a recording already in memory.
func FromRecording(rec *profile.Recording) *Model {
	b := NewBuilder(rec.Header, rec.Stacks)
	for i := range rec.Windows {
		b.Add(&rec.Windows[i])
	}
	return b.Model(rec.Trailer, rec.Truncated, rec.Warning)
}

// Builder reduces windows into a Model, one at a time.
type Builder struct {
	m       *Model
	ncpu    int
	seenEv  map[string]bool
	seenSmp map[string]bool
	procs   profile.ProcessTotaler
	tids    map[int]bool // threads seen; -PID for a process without thread detail
	rates   map[string]*rateSum
	// unnamedOf caches why a stack pair's samples are unnamed ("": named).
	unnamedOf map[StackPair]string
	// selfIDs caches the interned SelfName of a stack pair; selfRows
	// indexes selfScratch, one window's Self rows, by key.
	selfIDs     map[StackPair]uint32
	nameIDs     map[string]uint32
	selfRows    map[selfKey]int
	selfScratch []selfKeyed
}

type rateSum struct {
	req, ach float64
	n        int
	samples  uint64
}

// NewBuilder starts a model of a recording with header h. stacks is the
// map the recording's stacks are (or will be) defined in; the model keeps
// it.
func NewBuilder(h profile.Header, stacks map[uint64]profile.Stack) *Builder {
	m := &Model{
		Header: h, Stacks: stacks,
		Light:      &profile.Recording{Header: h, Stacks: stacks},
		Totals:     map[string][]uint64{},
		HostTotals: map[string][]uint64{},
		Series:     map[string][]profile.Counts{},
		Scaling:    map[string][2]uint64{},
		Samples:    map[string]*Samples{},
		AppMetrics: map[string]float64{},
		Others:     map[Other]uint64{},
	}
	b := &Builder{m: m, ncpu: h.Host.Topology.MaxCPU() + 1, seenEv: map[string]bool{}, seenSmp: map[string]bool{},
		tids: map[int]bool{}, rates: map[string]*rateSum{}, unnamedOf: map[StackPair]string{},
		selfIDs: map[StackPair]uint32{}, nameIDs: map[string]uint32{}, selfRows: map[selfKey]int{}}
	m.CPUTime = CPUTime{Idle: make([]float64, b.ncpu), Others: make([]float64, b.ncpu), IdleAll: true}
	m.RunqNSPerCPU = make([]float64, b.ncpu)
	for _, e := range h.Events {
		if e.Status == profile.StatusMeasured && !b.seenEv[e.Name] {
			b.seenEv[e.Name] = true
			m.Events = append(m.Events, e.Name)
		}
	}
	for _, e := range h.Settings.SampleEvents {
		b.sampleEvent(e)
	}
	return b
}

// Add reduces the next window. The model keeps references to the
// window's per-CPU counter arrays (never modified), not the window.
func (b *Builder) Add(w *profile.Window) {
	m := b.m
	wi := len(m.Light.Windows)
	m.Light.Windows = append(m.Light.Windows, profile.Window{Index: w.Index, StartNS: w.StartNS, EndNS: w.EndNS, Quiet: w.Quiet, OffCPU: w.OffCPU, Functions: w.Functions, Waits: w.Waits, Peers: w.Peers})
	b.counters(wi, w.Counters)
	b.processes(w.Processes, float64(w.EndNS-w.StartNS)/1e9)
	b.histograms(wi, w.Histograms)
	b.samples(wi, w.Samples)
	m.Working = append(m.Working, working(w.Processes))
	b.cpuTime(w)
	b.runq(w.Histograms)
	b.selfCounts(wi, w.Samples)
	for _, o := range w.Others {
		m.Others[Other{o.PID, o.Comm}] += o.Samples
		m.OthersTotal += o.Samples
	}
	for _, sr := range w.SampleRate {
		r, ok := b.rates[sr.Event]
		if !ok {
			r = &rateSum{}
			b.rates[sr.Event] = r
			m.SampleRates = append(m.SampleRates, SampleRate{Event: sr.Event})
		}
		r.req += sr.Requested
		r.ach += sr.Achieved
		r.n++
		r.samples += sr.Samples
	}
	m.Drops.Add(w.Drops)
	if w.Drops.Total() > 0 {
		m.DropWindows = append(m.DropWindows, profile.WindowDrops{Window: w.Index, Drops: w.Drops})
	}
	for k, v := range w.AppMetrics {
		m.AppMetrics[k] = v
	}
	if len(w.AppMetrics) > 0 {
		m.LastAppMetrics = w.AppMetrics
	}
}

func (b *Builder) counters(wi int, cs []profile.Counter) {
	m := b.m
	for _, c := range cs {
		if !b.seenEv[c.Event] {
			b.seenEv[c.Event] = true
			m.Events = append(m.Events, c.Event)
		}
		t := m.Scaling[c.Event]
		t[0] += c.Enabled
		t[1] += c.Running
		m.Scaling[c.Event] = t
		profile.AddCounts(m.Totals, c.Event, c.PerCPU, b.ncpu)
		if c.HostPerCPU != nil {
			profile.AddCounts(m.HostTotals, c.Event, c.HostPerCPU, b.ncpu)
		}
		series := m.Series[c.Event]
		for len(series) <= wi {
			series = append(series, nil)
		}
		if series[wi] == nil {
			series[wi] = c.PerCPU
		} else {
			// The same event twice in a window: sum into a copy, never
			// into the window's own array.
			sum := make(profile.Counts, max(len(series[wi]), len(c.PerCPU)))
			copy(sum, series[wi])
			for i, v := range c.PerCPU {
				sum[i] += v
			}
			series[wi] = sum
		}
		m.Series[c.Event] = series
	}
}

func (b *Builder) processes(ps []profile.Process, seconds float64) {
	for _, p := range ps {
		if len(p.Threads) == 0 {
			b.m.ThreadSeconds += seconds
			b.tids[-p.PID] = true
		}
		for _, t := range p.Threads {
			b.m.ThreadSeconds += seconds
			b.tids[t.TID] = true
		}
		b.procs.Add(p)
	}
}

func (b *Builder) histograms(wi int, hs []profile.Histogram) {
	m := b.m
	for i := range hs {
		h := m.Histogram(hs[i].Name)
		if h == nil {
			m.Histograms = append(m.Histograms, Histogram{Name: hs[i].Name, Total: make([]uint64, profile.HistBuckets)})
			h = &m.Histograms[len(m.Histograms)-1]
		}
		for len(h.PerWindow) <= wi {
			h.PerWindow = append(h.PerWindow, nil)
		}
		if h.PerWindow[wi] == nil {
			h.PerWindow[wi] = make([]uint64, profile.HistBuckets)
		}
		hs[i].AddTo(h.PerWindow[wi])
		hs[i].AddTo(h.Total)
	}
}

func (b *Builder) sampleEvent(e string) *Samples {
	m := b.m
	if !b.seenSmp[e] {
		b.seenSmp[e] = true
		m.SampleEvents = append(m.SampleEvents, e)
		m.Samples[e] = &Samples{ByPID: map[int]uint64{}, ByStack: map[StackPair]uint64{}}
	}
	return m.Samples[e]
}

func (b *Builder) samples(wi int, ss []profile.Sample) {
	for _, s := range ss {
		a := b.sampleEvent(s.Event)
		a.Total += s.Count
		a.ByPID[s.PID] += s.Count
		a.ByStack[StackPair{s.UserStack, s.KernelStack}] += s.Count
		b.unnamed(a, s)
		if s.CPU < 0 || s.CPU >= b.ncpu {
			continue
		}
		for len(a.PerCPU) <= wi {
			a.PerCPU = append(a.PerCPU, nil)
		}
		if a.PerCPU[wi] == nil {
			a.PerCPU[wi] = make(profile.Counts, b.ncpu)
		}
		a.PerCPU[wi][s.CPU] += s.Count
	}
}

// Model completes the model of the windows added so far with how the
// recording ended (a live view passes a nil trailer). It may be called
// again after more windows: the model is the builder's own, and the next
// Add changes it.
func (b *Builder) Model(t *profile.Trailer, truncated bool, warning string) *Model {
	m := b.m
	m.Trailer, m.Truncated, m.Warning = t, truncated, warning
	n := len(m.Light.Windows)
	// Per-window series run to the last window, so views index them by
	// window without checking.
	for e, s := range m.Series {
		m.Series[e] = pad(s, n)
	}
	for i := range m.Histograms {
		m.Histograms[i].PerWindow = pad(m.Histograms[i].PerWindow, n)
	}
	for _, s := range m.Samples {
		s.PerCPU = pad(s.PerCPU, n)
		s.Self = pad(s.Self, n)
	}
	for i := range m.SampleRates {
		r := b.rates[m.SampleRates[i].Event]
		m.SampleRates[i] = SampleRate{Event: m.SampleRates[i].Event, RequestedHz: r.req / float64(r.n), Achieved: r.ach / float64(r.n), Samples: r.samples}
	}
	m.PrimarySample = primarySample(m)
	m.Threads = len(b.tids)
	m.Processes = b.procs.Totals()
	if s := m.Samples[m.PrimarySample]; s != nil {
		for i := range m.Processes {
			m.Processes[i].Samples = s.ByPID[m.Processes[i].PID]
			if u := s.UnnamedSummary(m.Processes[i].PID); u.Samples > 0 {
				m.Processes[i].Unnamed = &u
			}
		}
	}
	m.Stretch = profile.Stretched(m.Light)
	return m
}

func pad[T any](s []T, n int) []T {
	for len(s) < n {
		var zero T
		s = append(s, zero)
	}
	return s
}

// primarySample is the event whose samples the summary and report lead
// with: the first of the header's sample events that has samples, else
// the first of them.
func primarySample(m *Model) string {
	return profile.PrimaryOf(m.Header.Settings.SampleEvents, func(e string) uint64 {
		if s := m.Samples[e]; s != nil {
			return s.Total
		}
		return 0
	})
}

func sum(b []uint64) uint64 {
	var s uint64
	for _, v := range b {
		s += v
	}
	return s
}
