package attribution

import (
	"fmt"
	"strings"

	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/profile"
)

// Dump renders the metrics the software rules read, for tuning thresholds
// on real recordings and for docs/ATTRIBUTION.md.
func (m *Metrics) Dump() string {
	var b strings.Builder
	fmt.Fprintf(&b, "duration %.2fs windows %d threads %d thread-seconds %.2f\n", m.DurationS, len(m.Windows), m.Threads, m.ThreadSeconds)
	for _, e := range []string{metric.CPUClock, metric.PageFaults, metric.ContextSwitches, metric.CPUMigrations} {
		fmt.Fprintf(&b, "%-17s total %.0f rate %.1f/s per-thread %.1f/s\n", e, m.Total(e), m.Rate(e), ratio(m.Total(e), m.ThreadSeconds))
	}
	var samples []string
	for _, c := range m.CPUs {
		samples = append(samples, fmt.Sprintf("cpu%d %.0f samples busy %.3f demand %.3f", c, m.samplesOn(c), m.Busy(c), m.Demand(c)))
	}
	_, share, total := m.topCPU(m.samplesOn, m.CPUs)
	fmt.Fprintf(&b, "samples %.0f top share %.3f: %s\n", total, share, strings.Join(samples, ", "))
	off := profile.HistogramSum(m.histogramTotal(profile.HistOffCPU))
	on := m.Total(metric.CPUClock)
	runq := profile.HistogramSum(m.histogramTotal(profile.HistRunqLatency))
	fmt.Fprintf(&b, "off-CPU %.3fs run-queue wait %.3fs on-CPU %.3fs blocked share %.3f\n", off/1e9, runq/1e9, on/1e9, ratio(max(off-runq, 0), off+on))
	for _, w := range m.Windows {
		fmt.Fprintf(&b, "window %5.1fs", float64(w.StartNS)/1e9)
		for _, h := range []string{profile.HistRunqLatency, profile.HistOffCPU} {
			hb := w.Hist[h]
			fmt.Fprintf(&b, "  %s n=%d p99=%s", h, HistogramCount(hb), metric.FormatValue(profile.Percentile(hb, 0.99), metric.UnitNS))
		}
		for _, e := range []string{metric.PageFaults, metric.ContextSwitches, metric.CPUMigrations} {
			fmt.Fprintf(&b, "  %s=%.0f/s", e, w.Rate(e))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// histogramTotal sums a histogram over CPUs and windows.
func (m *Metrics) histogramTotal(name string) []uint64 {
	out := make([]uint64, profile.HistBuckets)
	for _, w := range m.Windows {
		for i, c := range w.Hist[name] {
			out[i] += c
		}
	}
	return out
}
