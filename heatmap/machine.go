package heatmap

import (
	"fmt"
	"slices"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/probe"
)

// A report read against its host's probe (cacheheat probe): the
// per-core rows in the probe's order, and contention findings with what
// a cache line bounce costs between their CPUs on that machine.

// MachineView is the report's note on the probe it uses.
type MachineView struct {
	Host string `json:"host"`
	Time string `json:"time"`
	// OtherHost is set when the probe was made on another host than the
	// recording (report --probe FILE): its numbers may not apply.
	OtherHost bool `json:"other_host,omitempty"`
	// Bounce is the matrix's median by relation, in words.
	Bounce []string `json:"bounce"`
}

// contentionRules are the findings a line bounce explains: their cost
// is cache lines moving between cores.
var contentionRules = []string{attribution.RuleFalseSharing, attribution.RuleLockContention}

// MachineFrom describes p for a report of a recording made on
// recordHost, and sets Machine on res's contention findings.
func MachineFrom(p *probe.Result, recordHost string, res *attribution.Result) *MachineView {
	v := &MachineView{Host: p.Host, Time: p.Time.Format("2006-01-02 15:04 UTC"), OtherHost: p.Host != recordHost}
	if p.C2C == nil {
		return v
	}
	for _, rel := range []string{"smt", "l3", "node", "package", "remote"} {
		if s, ok := probe.Summarize(p.C2C, probe.OfRelation(rel)); ok {
			v.Bounce = append(v.Bounce, fmt.Sprintf("%s %s", probe.RelationNames[rel], metric.FormatNS(s.Median)))
		}
	}
	if res == nil {
		return v
	}
	for i := range res.Findings {
		f := &res.Findings[i]
		if !slices.Contains(contentionRules, f.Rule) {
			continue
		}
		f.Machine = bounceAmong(p, f.Scope.CPUs)
	}
	return v
}

// bounceAmong says what a line transfer between two of cpus costs (all
// the probe's CPUs when fewer than two are given).
func bounceAmong(p *probe.Result, cpus []int) string {
	among := "any two CPUs"
	if len(cpus) < 2 {
		cpus = p.Order
	} else {
		among = "two of these CPUs"
	}
	sum, ok := probe.Summarize(p.C2C, func(c probe.Cell) bool { return slices.Contains(cpus, c.From) && slices.Contains(cpus, c.To) })
	if !ok {
		return ""
	}
	return fmt.Sprintf("On this machine a cache line moves between %s in %s (median of %d measured pairs, %s to %s; cacheheat probe of %s, %s): each contended transfer costs about that.",
		among, metric.FormatNS(sum.Median), sum.Pairs, metric.FormatNS(sum.Min), metric.FormatNS(sum.Max), p.Host, p.Time.Format("2006-01-02 15:04 UTC"))
}
