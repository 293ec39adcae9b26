package heatmap

import (
	"math"
	"sort"
	"strings"

	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
)

// The process table and the stack-sample views (top stacks and flame
// graphs).

// ProcessTable lists the target's processes and threads with their totals.
type ProcessTable struct {
	Events []string     `json:"events"`
	Rows   []ProcessRow `json:"rows"`
	// Omitted counts processes left out to keep the page small.
	Omitted int `json:"omitted"`
}

// ProcessRow is a process (TID 0) or one of its threads.
type ProcessRow struct {
	PID     int      `json:"pid"`
	TID     int      `json:"tid,omitempty"`
	Comm    string   `json:"comm"`
	Cmdline string   `json:"cmdline,omitempty"`
	Totals  []uint64 `json:"totals"` // in Events order

	// Container is the process's container id as `docker ps` shows it (12
	// hex digits) or its pod uid, when it had one.
	Container string `json:"container,omitempty"`
}

// Processes builds the process table, keeping the limit processes with
// the most counts of the first event.
func Processes(m *model.Model, limit int) ProcessTable {
	ps := append([]profile.ProcessSummary(nil), m.Processes...)
	evSet := map[string]bool{}
	for _, p := range ps {
		for k := range p.Totals {
			evSet[k] = true
		}
	}
	var events []string
	for _, e := range m.Events {
		if evSet[e] {
			events = append(events, e)
			delete(evSet, e)
		}
	}
	var rest []string
	for e := range evSet {
		rest = append(rest, e)
	}
	sort.Strings(rest)
	events = append(events, rest...)
	if events == nil {
		events = []string{}
	}
	if len(events) > 0 {
		first := events[0]
		sort.SliceStable(ps, func(i, j int) bool { return ps[i].Totals[first] > ps[j].Totals[first] })
	}
	t := ProcessTable{Events: events, Rows: []ProcessRow{}}
	if len(ps) > limit {
		t.Omitted = len(ps) - limit
		ps = ps[:limit]
	}
	vec := func(m map[string]uint64) []uint64 {
		v := make([]uint64, len(events))
		for i, e := range events {
			v[i] = m[e]
		}
		return v
	}
	for _, p := range ps {
		t.Rows = append(t.Rows, ProcessRow{PID: p.PID, Comm: p.Comm, Container: shortContainer(p.Container), Cmdline: strings.Join(p.Cmdline, " "), Totals: vec(p.Totals)})
		for _, th := range p.Threads {
			t.Rows = append(t.Rows, ProcessRow{PID: p.PID, TID: th.TID, Comm: th.Comm, Totals: vec(th.Totals)})
		}
	}
	return t
}

// SampleView is the stack data of one sample event.
type SampleView struct {
	Event     string                 `json:"event"`
	Total     uint64                 `json:"total"`
	Self      []profile.FunctionStat `json:"self"`
	Inclusive []profile.FunctionStat `json:"inclusive"`
	Stacks    []StackStat            `json:"stacks"`
	Flame     FlameNode              `json:"flame"`
	// Unnamed is what of the samples names no function, and why.
	Unnamed profile.UnnamedSummary `json:"unnamed"`
}

// StackStat is one distinct stack (innermost frame first) and its count.
type StackStat struct {
	Frames []string `json:"frames"`
	Count  uint64   `json:"count"`
}

// FlameNode is a node of the flame graph: a function on a call path from
// the root, with the samples whose stack passes through it.
type FlameNode struct {
	Name     string      `json:"n"`
	Value    uint64      `json:"v"`
	Children []FlameNode `json:"c,omitempty"`
	// Delta is, in a differential flame graph, the change of the node's
	// share of all samples, NEW minus BASE (0.02: two points more).
	Delta float64 `json:"d,omitempty"`
}

const (
	topFunctions = 25
	// topStacks are kept in the page; it shows 20 and expands to all.
	topStacks = 100
	// flameMinShare drops flame-graph nodes below this share of all
	// samples: too narrow to see, and they would bloat the page.
	flameMinShare = 0.001
	flameMaxDepth = 128
)

// SampleViews builds the function tables, top stacks and flame graph of
// every sample event that has samples.
func SampleViews(m *model.Model) []SampleView {
	out := []SampleView{}
	for _, ev := range m.SampleEvents {
		if v := sampleView(m, ev, m.Samples[ev]); v.Total > 0 {
			out = append(out, v)
		}
	}
	return out
}

type flameBuild struct {
	value    uint64
	children map[string]*flameBuild
}

func sampleView(m *model.Model, ev string, smp *model.Samples) SampleView {
	v := SampleView{Event: ev, Stacks: []StackStat{}, Total: smp.Total, Unnamed: smp.UnnamedSummary(0)}
	root := &flameBuild{children: map[string]*flameBuild{}}
	stacks := smp.ByStack
	keys := make([]model.StackPair, 0, len(stacks))
	for k := range stacks {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if stacks[a] != stacks[b] {
			return stacks[a] > stacks[b]
		}
		if a.User != b.User {
			return a.User < b.User
		}
		return a.Kernel < b.Kernel
	})
	// Stacks that differ only where a frame's name does not show (the
	// address inside a function) are one row of "Top stacks".
	byName := map[string]int{}
	for _, k := range keys {
		names := m.FrameNames(k)
		id := strings.Join(names, "\x00")
		if at, ok := byName[id]; ok {
			v.Stacks[at].Count += stacks[k]
		} else {
			byName[id] = len(v.Stacks)
			v.Stacks = append(v.Stacks, StackStat{Frames: names, Count: stacks[k]})
		}
		// The flame graph grows from the outermost frame.
		n := root
		n.value += stacks[k]
		for j := len(names) - 1; j >= 0 && len(names)-1-j < flameMaxDepth; j-- {
			c, ok := n.children[names[j]]
			if !ok {
				c = &flameBuild{children: map[string]*flameBuild{}}
				n.children[names[j]] = c
			}
			c.value += stacks[k]
			n = c
		}
	}
	sort.SliceStable(v.Stacks, func(i, j int) bool { return v.Stacks[i].Count > v.Stacks[j].Count })
	if len(v.Stacks) > topStacks {
		v.Stacks = v.Stacks[:topStacks]
	}
	self, total := m.FunctionCounts(smp)
	v.Self = profile.TopN(self, topFunctions)
	v.Inclusive = profile.TopN(total, topFunctions)
	minV := uint64(math.Ceil(float64(v.Total) * flameMinShare))
	v.Flame = flameTree("all", root, minV)
	return v
}

func flameTree(name string, b *flameBuild, minV uint64) FlameNode {
	n := FlameNode{Name: name, Value: b.value}
	for _, k := range b.shown(minV) {
		n.Children = append(n.Children, flameTree(k, b.children[k], minV))
	}
	return n
}

// shown are the names of b's children of at least minV samples, largest
// first (ties by name): the frames a flame graph draws.
func (b *flameBuild) shown(minV uint64) []string {
	names := make([]string, 0, len(b.children))
	for k, c := range b.children {
		if c.value >= minV {
			names = append(names, k)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		ci, cj := b.children[names[i]], b.children[names[j]]
		if ci.value != cj.value {
			return ci.value > cj.value
		}
		return names[i] < names[j]
	})
	return names
}
