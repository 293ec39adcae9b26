package heatmap

import (
	"math"
	"sort"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/model"
)

// The diff page shows where a change went: a differential flame graph
// (Brendan Gregg's: the NEW recording's stacks, each frame coloured by how
// its share of the samples changed from BASE), the functions whose share
// of the samples changed most, and which findings appeared or went away.

// FuncChange is one function's share of the samples on each side.
type FuncChange struct {
	Name string  `json:"name"`
	Base float64 `json:"base"`
	New  float64 `json:"new"`
}

// maxFuncChanges is how many functions the page lists.
const maxFuncChanges = 15

// diffFlame is the differential flame graph of the primary sample event
// both recordings have, and its name ("" when they share none).
func diffFlame(base, new *model.Model) (FlameNode, string) {
	ev := new.PrimarySample
	bs, ns := base.Samples[ev], new.Samples[ev]
	if bs == nil || ns == nil || bs.Total == 0 || ns.Total == 0 {
		return FlameNode{}, ""
	}
	bt, nt := sampleTree(base, bs), sampleTree(new, ns)
	root := diffTree("all", nt, bt, float64(ns.Total), float64(bs.Total), uint64(math.Ceil(float64(ns.Total)*flameMinShare)))
	return root, ev
}

// sampleTree is the flame tree of one event's samples, outermost frame
// first.
func sampleTree(m *model.Model, smp *model.Samples) *flameBuild {
	root := &flameBuild{children: map[string]*flameBuild{}}
	for k, n := range smp.ByStack {
		names := m.FrameNames(k)
		b := root
		b.value += n
		for j := len(names) - 1; j >= 0 && len(names)-1-j < flameMaxDepth; j-- {
			c, ok := b.children[names[j]]
			if !ok {
				c = &flameBuild{children: map[string]*flameBuild{}}
				b.children[names[j]] = c
			}
			c.value += n
			b = c
		}
	}
	return root
}

// diffTree is flameTree of NEW's node n, each node with its share's change
// against BASE's node at the same path (b, nil when BASE has none).
func diffTree(name string, n, b *flameBuild, nTotal, bTotal float64, minV uint64) FlameNode {
	out := FlameNode{Name: name, Value: n.value}
	var bv float64
	if b != nil {
		bv = float64(b.value)
	}
	out.Delta = round(float64(n.value)/nTotal-bv/bTotal, 5)
	for _, k := range n.shown(minV) {
		var bc *flameBuild
		if b != nil {
			bc = b.children[k]
		}
		out.Children = append(out.Children, diffTree(k, n.children[k], bc, nTotal, bTotal, minV))
	}
	return out
}

// funcChanges lists the functions (self: innermost frame) whose share of
// the event's samples changed most, gained first then lost.
func funcChanges(base, new *model.Model, ev string) []FuncChange {
	bs, ns := base.Samples[ev], new.Samples[ev]
	if bs == nil || ns == nil || bs.Total == 0 || ns.Total == 0 {
		return nil
	}
	bself, _ := base.FunctionCounts(bs)
	nself, _ := new.FunctionCounts(ns)
	share := map[string]*FuncChange{}
	for f, c := range bself {
		share[f] = &FuncChange{Name: f, Base: float64(c) / float64(bs.Total)}
	}
	for f, c := range nself {
		if share[f] == nil {
			share[f] = &FuncChange{Name: f}
		}
		share[f].New = float64(c) / float64(ns.Total)
	}
	out := make([]FuncChange, 0, len(share))
	for _, c := range share {
		if math.Abs(c.New-c.Base) >= 0.005 {
			out = append(out, *c)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		di, dj := out[i].New-out[i].Base, out[j].New-out[j].Base
		if math.Abs(di) != math.Abs(dj) {
			return math.Abs(di) > math.Abs(dj)
		}
		return out[i].Name < out[j].Name
	})
	if len(out) > maxFuncChanges {
		out = out[:maxFuncChanges]
	}
	return out
}

// FindingChange is a finding that appeared in NEW, went away from BASE,
// or is in both with another severity.
type FindingChange struct {
	Rule  string `json:"rule"`
	Title string `json:"title"`
	// Change is "appeared", "went away" or "severity BASE -> NEW".
	Change string `json:"change"`
	Advice string `json:"advice"`
}

// findingChanges compares the two sides' findings by rule.
func findingChanges(base, new *attribution.Result) []FindingChange {
	if base == nil || new == nil {
		return nil
	}
	bf := map[string]attribution.Finding{}
	for _, f := range base.Findings {
		bf[f.Rule] = f
	}
	nf := map[string]attribution.Finding{}
	var out []FindingChange
	for _, f := range new.Findings {
		nf[f.Rule] = f
		b, ok := bf[f.Rule]
		switch {
		case !ok:
			out = append(out, FindingChange{Rule: f.Rule, Title: f.Title, Change: "appeared (" + f.Severity + ")", Advice: f.Advice})
		case b.Severity != f.Severity:
			out = append(out, FindingChange{Rule: f.Rule, Title: f.Title, Change: "severity " + b.Severity + " → " + f.Severity, Advice: f.Advice})
		}
	}
	for _, f := range base.Findings {
		if _, ok := nf[f.Rule]; !ok {
			out = append(out, FindingChange{Rule: f.Rule, Title: f.Title, Change: "went away (was " + f.Severity + ")", Advice: f.Advice})
		}
	}
	return out
}
