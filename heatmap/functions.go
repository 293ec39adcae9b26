package heatmap

import (
	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
)

// FunctionView is one --func function in the report: a time x latency
// heatmap of its calls and the comparison of its tail with its median.
type FunctionView struct {
	Spec    profile.FunctionSpec `json:"spec"`
	Latency Latency              `json:"latency"`
	// Chart is the index of the heatmap among the page's latency charts.
	Chart int     `json:"chart"`
	Calls uint64  `json:"calls"`
	P50   float64 `json:"p50_ns"`
	P99   float64 `json:"p99_ns"`
	// Tail is the tail-versus-median comparison; HasTail is false when the
	// calls are too few or too alike to split.
	Tail    attribution.TailCompare `json:"-"`
	HasTail bool                    `json:"has_tail"`
	Verdict string                  `json:"verdict,omitempty"`
	// TailFromNS is the lower bound of the first tail bucket.
	TailFromNS float64 `json:"tail_from_ns"`
	// Lost says what was not timed: unmatched returns, abandoned entries,
	// Go calls that changed threads, dropped events.
	Unmatched, Abandoned, Moved, InflightFull, EventsDropped uint64
}

// FunctionViews builds the function section; firstChart is the number of
// latency charts before it.
func FunctionViews(m *model.Model, maxCells, firstChart int) []FunctionView {
	var out []FunctionView
	for i, a := range m.Light.FunctionTotals(0, m.Windows()) {
		id := a.Spec.ID
		l := latencyMap(m, a.Spec.Name+" (calls)", a.Hist, maxCells, func(wi int, dst []uint64) {
			for _, fw := range m.Window(wi).Functions {
				if fw.ID != id {
					continue
				}
				for _, b := range fw.Buckets {
					if b.Bucket >= 0 && b.Bucket < len(dst) {
						dst[b.Bucket] += b.Calls
					}
				}
			}
		})
		v := FunctionView{
			Spec: a.Spec, Latency: l, Chart: firstChart + i, Calls: a.Calls,
			P50: profile.Percentile(a.Hist, 0.5), P99: profile.Percentile(a.Hist, 0.99),
			Unmatched: a.Unmatched, Abandoned: a.Abandoned, Moved: a.Moved, InflightFull: a.InflightFull, EventsDropped: a.EventsDropped,
		}
		v.Tail, v.HasTail = attribution.CompareTail(a)
		if v.HasTail {
			v.Verdict = v.Tail.Verdict()
			v.TailFromNS = profile.BucketLower(v.Tail.TailFrom)
		}
		out = append(out, v)
	}
	return out
}
