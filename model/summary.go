package model

import (
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cacheheat/cacheheat/profile"
)

// topSampleFunctions is how many functions the summary lists by samples.
const topSampleFunctions = 20

// Summary is the recording's `inspect --json` document (profile.Summary
// defines its stable fields).
func (m *Model) Summary() profile.Summary {
	h := m.Header
	s := profile.Summary{
		FormatVersion: h.Major(),
		Host: profile.SummaryHost{
			Hostname: h.Host.Hostname, Kernel: h.Host.Kernel, CPUModel: h.Host.CPUModel,
			Vendor: h.Host.Vendor, CPUs: len(h.Host.Topology.CPUs), NUMANodes: len(h.Host.Topology.Nodes),
		},
		Target:      h.Target,
		IntervalS:   float64(h.Settings.IntervalNS) / 1e9,
		Windows:     m.Windows(),
		DurationS:   m.DurationS(),
		Mode:        h.Host.Mode,
		Truncated:   m.Truncated,
		Warning:     m.Warning,
		Events:      []profile.EventSummary{},
		PMU:         h.PMU,
		Synthetic:   h.Synthetic,
		Totals:      map[string]profile.Total{},
		HostTotals:  map[string]profile.Total{},
		Processes:   m.Processes,
		Histograms:  []profile.HistogramSummary{},
		AppMetrics:  map[string]float64{},
		Drops:       m.Drops,
		DropWindows: append([]profile.WindowDrops{}, m.DropWindows...),
		Functions:   []profile.FunctionSummary{},
		OffCPU:      m.Light.OffCPUSummary(10),
	}
	if s.Target.PIDs == nil {
		s.Target.PIDs = []int{}
	}
	for _, e := range h.Events {
		es := profile.EventSummary{EventStatus: e}
		if t, ok := m.Scaling[e.Name]; ok && e.Status == profile.StatusMeasured {
			es.EnabledNS, es.RunningNS = t[0], t[1]
			es.Scaling = math.Round(profile.ScalingFactor(t[0], t[1])*1000) / 1000
		}
		s.Events = append(s.Events, es)
	}
	s.StretchedWindows, s.LongestWindowS = m.Stretch.Stretched, float64(m.Stretch.LongestNS)/1e9
	s.QuietWindows, s.QuietS = m.Stretch.Quiet, float64(m.Stretch.QuietNS)/1e9
	if t := m.Trailer; t != nil {
		s.EndReason, s.ExitStatus, s.ExitSignal, s.Warnings = t.EndReason, t.ExitStatus, t.ExitSignal, t.Warnings
		for k, v := range t.AppMetrics {
			s.AppMetrics[k] = v
		}
		s.AppMetricsPartial = t.AppMetricsPartial
	} else {
		for k, v := range m.AppMetrics {
			s.AppMetrics[k] = v
		}
	}
	nodeOf := h.Host.Topology.NodeOf()
	for name, per := range m.Totals {
		s.Totals[name] = makeTotal(per, nodeOf)
	}
	for name, per := range m.HostTotals {
		s.HostTotals[name] = makeTotal(per, nodeOf)
	}
	for i := range m.Histograms {
		hg := &m.Histograms[i]
		hs := profile.HistogramSummary{Name: hg.Name, Unit: "ns", P50: hg.P(0.5), P90: hg.P(0.9), P99: hg.P(0.99)}
		for b, c := range hg.Total {
			hs.Count += c
			if c > 0 {
				hs.Max = profile.BucketUpper(b)
			}
		}
		s.Histograms = append(s.Histograms, hs)
	}
	s.Samples = m.samplesSummary()
	s.Samples.Dropped = s.Drops.StackErrors + s.Drops.SampleMapFull
	for _, a := range m.Light.FunctionTotals(0, m.Windows()) {
		s.Functions = append(s.Functions, a.Summarize())
	}
	return s
}

func makeTotal(per []uint64, nodeOf []int) profile.Total {
	t := profile.Total{PerCPU: map[string]uint64{}, PerNode: map[string]uint64{}}
	for cpu, v := range per {
		t.Total += v
		if cpu < len(nodeOf) && nodeOf[cpu] >= 0 {
			t.PerCPU[strconv.Itoa(cpu)] += v
			t.PerNode[strconv.Itoa(nodeOf[cpu])] += v
		}
	}
	return t
}

func (m *Model) samplesSummary() profile.SamplesSummary {
	ev := m.PrimarySample
	ss := profile.SamplesSummary{Event: ev, TopFunctions: []profile.FunctionStat{}, RequestedHz: float64(m.Header.Settings.SampleHz)}
	for _, r := range m.SampleRates {
		if r.Event == ev {
			ss.AchievedHz = r.Achieved
		}
	}
	if s := m.Samples[ev]; s != nil {
		ss.Total = s.Total
		ss.Unnamed = s.UnnamedSummary(0)
		self, _ := m.FunctionCounts(s)
		ss.TopFunctions = profile.TopN(self, topSampleFunctions)
	}
	return ss
}

// FunctionCounts returns an event's self counts (innermost frame) and
// total counts (function anywhere on the stack, once per sample) per
// function name, "[unknown]" for samples without frames.
func (m *Model) FunctionCounts(s *Samples) (self, total map[string]uint64) {
	self, total = map[string]uint64{}, map[string]uint64{}
	for p, n := range s.ByStack {
		names := m.FrameNames(p)
		self[names[0]] += n
		seen := map[string]bool{}
		for _, name := range names {
			if !seen[name] {
				seen[name] = true
				total[name] += n
			}
		}
	}
	return self, total
}

// FrameNames names a stack pair's frames innermost first, or
// "[unknown]" alone when it has none. A run of frames that name no
// function in one module is one frame, "[module]": a hundred addresses
// of a JIT or a stripped library say no more than one, and would make
// one stack as deep as the flame graph is tall.
func (m *Model) FrameNames(p StackPair) []string {
	fr := m.Frames(p)
	if len(fr) == 0 {
		return []string{"[unknown]"}
	}
	names := make([]string, 0, len(fr))
	lastMod := ""
	for _, f := range fr {
		if f.Function != "" {
			names = append(names, f.String())
			lastMod = ""
			continue
		}
		mod := unnamedModule(f)
		if mod != lastMod {
			names = append(names, mod)
		}
		lastMod = mod
	}
	return names
}

// unnamedModule names a frame without a function by its module alone.
func unnamedModule(f profile.Frame) string {
	switch {
	case f.Module == "":
		return "[unknown]"
	case strings.HasPrefix(f.Module, "["):
		return f.Module
	}
	return "[" + filepath.Base(f.Module) + "]"
}
