package heatmap

import "github.com/cacheheat/cacheheat/attribution"

// FindingsFrom prepares attribution's result for the page: the same
// findings, each with its heatmap link (attribution.Finding.Metric) kept
// only where the per-core heatmap g has that metric, so that the page
// never offers to show a metric it does not have.
func FindingsFrom(res attribution.Result, g Grid) *attribution.Result {
	out := res
	out.Findings = make([]attribution.Finding, len(res.Findings))
	for i, f := range res.Findings {
		if !g.has(f.Metric) {
			f.Metric = ""
		}
		out.Findings[i] = f
	}
	return &out
}

// has reports whether the grid offers a metric by that name.
func (g Grid) has(name string) bool {
	for _, m := range g.Metrics {
		if name != "" && m.Name == name {
			return true
		}
	}
	return false
}
