package heatmap

import (
	"strings"

	"github.com/cacheheat/cacheheat/attribution"
)

// Findings is the findings section: root causes with their evidence, and
// the rules that could not be evaluated on this recording, from the
// attribution package.
type Findings struct {
	Items        []FindingView      `json:"items"`
	NotEvaluated []NotEvaluatedView `json:"not_evaluated"`
}

// FindingView is one finding as the page shows it. Metric names the
// heatmap metric its link selects; CPUs, Nodes and the time range are
// marked on the heatmap.
type FindingView struct {
	Rule          string         `json:"rule"`
	Title         string         `json:"title"`
	Severity      string         `json:"severity"`
	Confidence    float64        `json:"confidence"`
	CPUs          []int          `json:"cpus,omitempty"`
	Nodes         []int          `json:"nodes,omitempty"`
	PIDs          []int          `json:"pids,omitempty"`
	Functions     []string       `json:"functions,omitempty"`
	StartNS       int64          `json:"start_ns"`
	EndNS         int64          `json:"end_ns"`
	Metric        string         `json:"metric,omitempty"`
	Evidence      []EvidenceView `json:"evidence"`
	Advice        string         `json:"advice,omitempty"`
	Approximation string         `json:"approximation,omitempty"`
}

// EvidenceView is one number a finding rests on.
type EvidenceView struct {
	Metric    string  `json:"metric"`
	Value     float64 `json:"value"`
	Op        string  `json:"op"`
	Threshold float64 `json:"threshold"`
	Unit      string  `json:"unit,omitempty"`
}

// NotEvaluatedView is a rule that needs data this recording lacks.
type NotEvaluatedView struct {
	Rule   string   `json:"rule"`
	Title  string   `json:"title"`
	Needs  []string `json:"needs"`
	Reason string   `json:"reason"`
}

// evidenceAliases map the attribution rules' metric names to the heatmap
// metric that shows them, where the names differ.
var evidenceAliases = []struct{ key, metric string }{
	{"LLC MPKI", "LLC-load-misses MPKI"},
	{"dTLB MPKI", "dTLB-load-misses MPKI"},
	{"LLC miss ratio", "LLC-load-miss-ratio"},
	{"L1 miss ratio", "L1-dcache-load-miss-ratio"},
	{"samples", " samples"},
}

// FindingsFrom converts attribution's result for the page, linking each
// finding to the per-core heatmap metric its evidence is about.
func FindingsFrom(res attribution.Result, g Grid) *Findings {
	out := &Findings{Items: []FindingView{}, NotEvaluated: []NotEvaluatedView{}}
	for _, f := range res.Findings {
		v := FindingView{Rule: f.Rule, Title: f.Title, Severity: f.Severity, Confidence: f.Confidence,
			CPUs: f.Scope.CPUs, Nodes: f.Scope.Nodes, PIDs: f.Scope.PIDs, Functions: f.Scope.Functions,
			StartNS: f.Scope.StartNS, EndNS: f.Scope.EndNS, Evidence: []EvidenceView{},
			Advice: f.Advice, Approximation: f.Approximation}
		for _, e := range f.Evidence {
			v.Evidence = append(v.Evidence, EvidenceView{Metric: e.Metric, Value: e.Value, Op: e.Op, Threshold: e.Threshold, Unit: e.Unit})
			if v.Metric == "" {
				v.Metric = heatMetricFor(e.Metric, g)
			}
		}
		out.Items = append(out.Items, v)
	}
	for _, n := range res.NotEvaluated {
		out.NotEvaluated = append(out.NotEvaluated, NotEvaluatedView{Rule: n.Rule, Title: n.Title, Needs: n.Needs, Reason: n.Reason})
	}
	return out
}

// heatMetricFor finds the heatmap metric an evidence metric is about: the
// same name, the longest metric name it contains ("page-faults/s" is
// about page-faults), or an alias; "" when none fits.
func heatMetricFor(name string, g Grid) string {
	best := ""
	for _, m := range g.Metrics {
		if m.Name == name {
			return m.Name
		}
		if strings.Contains(name, m.Name) && len(m.Name) > len(best) {
			best = m.Name
		}
	}
	if best != "" {
		return best
	}
	for _, a := range evidenceAliases {
		if !strings.Contains(name, a.key) {
			continue
		}
		for _, m := range g.Metrics {
			if m.Name == a.metric || strings.HasSuffix(m.Name, a.metric) {
				return m.Name
			}
		}
	}
	return ""
}
