package probe

import (
	"slices"

	"github.com/cacheheat/cacheheat/profile"
)

// Groups lists the sets of the ordered CPUs that share a core (more
// than one SMT sibling measured), an L3, a node or a package, each with
// its CPUs in order. A level with a single group covering every CPU is
// left out: it outlines nothing.
func Groups(topo profile.Topology, order []int) []Group {
	info := map[int]profile.CPU{}
	for _, c := range topo.CPUs {
		info[c.ID] = c
	}
	var out []Group
	level := func(kind string, key func(profile.CPU) (int, bool), minSize int) {
		var gs []Group
		idx := map[int]int{}
		for _, c := range order {
			k, ok := key(info[c])
			if !ok {
				continue
			}
			i, seen := idx[k]
			if !seen {
				i = len(gs)
				idx[k] = i
				gs = append(gs, Group{Kind: kind, ID: k})
			}
			gs[i].CPUs = append(gs[i].CPUs, c)
		}
		if len(gs) == 1 && len(gs[0].CPUs) == len(order) {
			return
		}
		for _, g := range gs {
			if len(g.CPUs) >= minSize {
				out = append(out, g)
			}
		}
	}
	// One core: its package and core id (core ids repeat across packages).
	level("smt", func(c profile.CPU) (int, bool) { return c.Package<<20 | c.Core, len(c.Siblings) > 1 }, 2)
	level("l3", func(c profile.CPU) (int, bool) { return c.L3, c.L3 >= 0 }, 1)
	level("node", func(c profile.CPU) (int, bool) { return c.Node, true }, 1)
	level("package", func(c profile.CPU) (int, bool) { return c.Package, true }, 1)
	return out
}

// Relation says what two CPUs share, closest first: "smt" (one core),
// "l3", "node", "package" or "remote" (another package).
func Relation(topo profile.Topology, a, b int) string {
	var ca, cb profile.CPU
	for _, c := range topo.CPUs {
		switch c.ID {
		case a:
			ca = c
		case b:
			cb = c
		}
	}
	switch {
	case slices.Contains(ca.Siblings, b):
		return "smt"
	case ca.L3 >= 0 && ca.L3 == cb.L3:
		return "l3"
	case ca.Node == cb.Node:
		return "node"
	case ca.Package == cb.Package:
		return "package"
	}
	return "remote"
}
