package probe

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/profile"
	"github.com/cacheheat/cacheheat/workloads"
)

func fixture(t *testing.T, name string) profile.Topology {
	t.Helper()
	topo, err := host.ReadTopology(filepath.Join("..", "host", "testdata", "hosts", name))
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func ids(topo profile.Topology) []int {
	out := make([]int, len(topo.CPUs))
	for i, c := range topo.CPUs {
		out[i] = c.ID
	}
	return out
}

// TestOrderAndGroups: on the fixture hosts, the order puts SMT siblings
// side by side and every L3 domain, node and package in one run, and the
// groups say so; Relation names what two CPUs share.
func TestOrderAndGroups(t *testing.T) {
	for _, c := range []struct {
		host  string
		kinds map[string]int // groups of each kind
		rel   [][3]string    // a, b, relation
	}{
		// 2 sockets x 4 cores x 2 threads: SMT pairs (n, n+8), one L3,
		// node and package per socket.
		{"intel2s", map[string]int{"smt": 8, "l3": 2, "node": 2, "package": 2}, [][3]string{{"0", "8", "smt"}, {"0", "1", "l3"}, {"0", "4", "remote"}}},
		// 2 sockets x 8 CCDs of one core (SMT): 16 L3 domains, 8 nodes.
		{"epyc-nps4", map[string]int{"smt": 16, "l3": 16, "node": 8, "package": 2}, nil},
	} {
		topo := fixture(t, c.host)
		order := host.TopologyOrder(topo, ids(topo))
		if len(order) != len(topo.CPUs) {
			t.Fatalf("%s: order has %d CPUs, want %d", c.host, len(order), len(topo.CPUs))
		}
		groups := Groups(topo, order)
		got := map[string]int{}
		for _, g := range groups {
			got[g.Kind]++
			// Every group is one contiguous run of the order.
			first := slices.Index(order, g.CPUs[0])
			if !slices.Equal(order[first:first+len(g.CPUs)], g.CPUs) {
				t.Errorf("%s: %s group %d (%v) is not contiguous in the order %v", c.host, g.Kind, g.ID, g.CPUs, order)
			}
		}
		for k, n := range c.kinds {
			if got[k] != n {
				t.Errorf("%s: %d %s groups, want %d (%v)", c.host, got[k], k, n, got)
			}
		}
		for _, r := range c.rel {
			a, b := atoi(r[0]), atoi(r[1])
			if rel := Relation(topo, a, b); rel != r[2] {
				t.Errorf("%s: Relation(%d, %d) = %s, want %s", c.host, a, b, rel, r[2])
			}
		}
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// TestSamplePairs: above MaxFullCPUs, each CPU gets a partner of every
// relation it has, both directions, and the total stays near the budget.
func TestSamplePairs(t *testing.T) {
	topo := fixture(t, "epyc-nps4") // 32 CPUs
	order := host.TopologyOrder(topo, ids(topo))
	pairs := samplePairs(topo, order, 8)
	if len(pairs) > 2*(8*7/2+5*len(order)) || len(pairs) == 0 {
		t.Fatalf("%d pairs sampled for a budget of 8 CPUs", len(pairs))
	}
	have := map[[2]int]bool{}
	rels := map[int]map[string]bool{}
	for _, p := range pairs {
		have[p] = true
		if rels[p[0]] == nil {
			rels[p[0]] = map[string]bool{}
		}
		rels[p[0]][Relation(topo, p[0], p[1])] = true
	}
	for p := range have {
		if !have[[2]int{p[1], p[0]}] {
			t.Errorf("pair %v sampled in one direction only", p)
		}
	}
	for _, c := range order {
		for _, want := range []string{"smt", "node", "package", "remote"} {
			if !rels[c][want] {
				t.Errorf("CPU %d has no sampled partner it shares %q with (has %v)", c, want, rels[c])
			}
		}
	}
}

// TestCheckCPUs: CPUs that are offline, absent or outside the affinity
// mask are refused by name; nil asks for every allowed online CPU.
func TestCheckCPUs(t *testing.T) {
	topo := fixture(t, "offline") // CPUs 5 and 7 offline
	allowed := []int{0, 1, 2, 3, 4, 6}
	if _, err := checkCPUs([]int{0, 5}, allowed, topo); !errors.Is(err, ErrCPUs) || !strings.Contains(err.Error(), "CPU 5 is offline or absent") {
		t.Errorf("offline CPU 5: %v", err)
	}
	if _, err := checkCPUs([]int{0, 99}, allowed, topo); !errors.Is(err, ErrCPUs) || !strings.Contains(err.Error(), "99") {
		t.Errorf("absent CPU 99: %v", err)
	}
	if _, err := checkCPUs([]int{0, 6}, []int{0, 1}, topo); !errors.Is(err, ErrCPUs) || !strings.Contains(err.Error(), "may not run on CPU 6") {
		t.Errorf("CPU 6 outside the affinity mask: %v", err)
	}
	got, err := checkCPUs(nil, allowed, topo)
	if err != nil || !slices.Equal(got, allowed) {
		t.Errorf("every allowed CPU: %v, %v", got, err)
	}
}

// TestLevelSteps: a staircase that rises past each cache's size is found
// within one step of it; a flat one finds no step for any level.
func TestLevelSteps(t *testing.T) {
	caches := map[int]profile.Cache{1: {Level: 1, SizeBytes: 32 << 10}, 2: {Level: 2, SizeBytes: 1 << 20}, 3: {Level: 3, SizeBytes: 32 << 20}}
	var stairs, flat []Step
	for s := int64(4 << 10); s <= 256<<20; s *= 2 {
		ns := 1.0
		switch {
		case s > 32<<20:
			ns = 90
		case s > 1<<20:
			ns = 12
		case s > 32<<10:
			ns = 4
		}
		stairs = append(stairs, Step{SizeBytes: s, NS: ns})
		flat = append(flat, Step{SizeBytes: s, NS: 1})
	}
	for _, l := range levelSteps(stairs, caches) {
		if !l.Within || l.StepBytes != 2*l.SizeBytes {
			t.Errorf("L%d %d B: step at %d B (within %v), want at %d B", l.Level, l.SizeBytes, l.StepBytes, l.Within, 2*l.SizeBytes)
		}
	}
	for _, l := range levelSteps(flat, caches) {
		if l.Within || l.StepBytes != 0 {
			t.Errorf("flat staircase: L%d found a step at %d B", l.Level, l.StepBytes)
		}
	}
}

// TestMatrixHere measures the first two CPUs this process may run on,
// both directions: each cell is a positive time, and the two directions'
// fastest rounds agree within a factor of two (the line and its
// protocol are the same both ways; a busy host slows rounds, rarely the
// fastest).
func TestMatrixHere(t *testing.T) {
	allowed := workloads.AllowedCPUs()
	if len(allowed) < 2 {
		t.Skipf("needs two CPUs; this process may run on %v only", allowed)
	}
	topo, err := host.DetectTopology("/")
	if err != nil {
		t.Fatal(err)
	}
	order := host.TopologyOrder(topo, allowed[:2])
	m := measureMatrix(context.Background(), order, topo, Options{Quick: true, MaxFullCPUs: 32}, func(string, ...any) {})
	if len(m.Cells) != 2 {
		t.Fatalf("%d cells, want 2: %+v (%s)", len(m.Cells), m.Cells, m.SampleNote)
	}
	ab, okab := m.Cell(order[0], order[1])
	ba, okba := m.Cell(order[1], order[0])
	if !okab || !okba {
		t.Fatalf("a direction gave no number: %+v", m.Cells)
	}
	for _, c := range []Cell{ab, ba} {
		if !(c.MinNS > 0 && c.MinNS <= c.MedianNS && c.MedianNS <= c.MaxNS) {
			t.Errorf("cell %d->%d: min %v median %v max %v", c.From, c.To, c.MinNS, c.MedianNS, c.MaxNS)
		}
	}
	if r := max(ab.MinNS, ba.MinNS) / min(ab.MinNS, ba.MinNS); r > 2 {
		t.Errorf("fastest rounds %v ns (%d->%d) and %v ns (%d->%d): %.1fx apart", ab.MinNS, ab.From, ab.To, ba.MinNS, ba.From, ba.To, r)
	}
	t.Logf("%d->%d %.1f ns, %d->%d %.1f ns (medians), GOMAXPROCS %d", ab.From, ab.To, ab.MedianNS, ba.From, ba.To, ba.MedianNS, runtime.GOMAXPROCS(0))
}

// TestInterrupted: a cancelled context stops the probe at once and the
// result says it was interrupted.
func TestInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err := Run(ctx, Options{Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Interrupted || (r.C2C != nil && len(r.C2C.Cells) > 0) || len(r.Staircase) > 0 {
		t.Errorf("cancelled before it began: interrupted %v, %+v", r.Interrupted, r)
	}
}

// TestOneCPU: with one CPU there is no matrix, and the result says why.
func TestOneCPU(t *testing.T) {
	allowed := workloads.AllowedCPUs()
	r, err := Run(context.Background(), Options{CPUs: allowed[:1], Quick: true, Parts: []string{"c2c"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.C2C != nil || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "needs two CPUs") {
		t.Errorf("one CPU: matrix %v, notes %q", r.C2C, r.Notes)
	}
}

// TestStaircaseNotes: a cache whose size the staircase does not bear out
// is said (the 16-CPU VM reports a 300 MiB L3 and its latency reaches
// DRAM's at 16 MiB); a staircase that steps at each cache says nothing.
func TestStaircaseNotes(t *testing.T) {
	caches := map[int]profile.Cache{1: {Level: 1, SizeBytes: 48 << 10}, 2: {Level: 2, SizeBytes: 2 << 20}, 3: {Level: 3, SizeBytes: 300 << 20}}
	// Measured on that VM (bench/probe.sh, full probe), ns per load.
	vm := []float64{2.1, 2.1, 2.1, 2.5, 6.4, 6.6, 6.5, 6.8, 7.1, 39.2, 44.8, 88.2, 124.7, 130.1, 128.3, 127.5, 129.1, 131.0, 132.3}
	var steps []Step
	for i, ns := range vm {
		steps = append(steps, Step{SizeBytes: 4 << 10 << i, NS: ns})
	}
	s := Staircase{Steps: steps, Levels: levelSteps(steps, caches)}
	notes := staircaseNotes([]Staircase{s})
	if len(notes) != 1 || !strings.Contains(notes[0], "300 MiB L3") {
		t.Errorf("the VM's staircase: notes %q, want one on its 300 MiB L3", notes)
	}
	caches[3] = profile.Cache{Level: 3, SizeBytes: 8 << 20}
	s.Levels = levelSteps(steps, caches)
	if notes := staircaseNotes([]Staircase{s}); len(notes) != 0 {
		t.Errorf("an 8 MiB L3 on the same staircase: notes %q, want none", notes)
	}
}

// TestSamplePairs128 keeps a 128-CPU host practical: 2 packages, 4
// nodes each, 2 L3 domains per node, 4 cores per L3 with SMT. The sample
// (about 32 x 31 pairs plus each CPU's nearest of every relation) is
// under a tenth of the 16,256 ordered pairs.
func TestSamplePairs128(t *testing.T) {
	var topo profile.Topology
	id := 0
	for pkg := 0; pkg < 2; pkg++ {
		for node := 0; node < 4; node++ {
			for l3 := 0; l3 < 2; l3++ {
				for core := 0; core < 4; core++ {
					a, b := id, id+1
					for _, c := range []int{a, b} {
						topo.CPUs = append(topo.CPUs, profile.CPU{ID: c, Package: pkg, Node: pkg*4 + node, L3: (pkg*4+node)*2 + l3, Core: (node*2+l3)*4 + core, Siblings: []int{a, b}})
					}
					id += 2
				}
			}
		}
	}
	order := host.TopologyOrder(topo, ids(topo))
	pairs := samplePairs(topo, order, 32)
	if len(pairs) == 0 || len(pairs) > 16256/10*2 {
		t.Fatalf("128 CPUs: %d of 16256 ordered pairs sampled", len(pairs))
	}
	rels := map[string]int{}
	for _, p := range pairs {
		rels[Relation(topo, p[0], p[1])]++
	}
	for _, r := range []string{"smt", "l3", "node", "package", "remote"} {
		if rels[r] == 0 {
			t.Errorf("no %s pair sampled: %v", r, rels)
		}
	}
	t.Logf("128 CPUs: %d ordered pairs sampled, by relation %v", len(pairs), rels)
}
