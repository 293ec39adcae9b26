package heatmap

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/probe"
)

// fixtureProbe is a probe result on the intel2s fixture (16 CPUs, two
// sockets, SMT) with every ordered pair measured: 10 ns between SMT
// siblings, 50 ns in a socket, 130 ns across, and hostile strings where
// a machine's names go.
func fixtureProbe(t *testing.T) *probe.Result {
	t.Helper()
	topo, err := host.ReadTopology(filepath.Join("..", "host", "testdata", "hosts", "intel2s"))
	if err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for _, c := range topo.CPUs {
		cpus = append(cpus, c.ID)
	}
	order := host.TopologyOrder(topo, cpus)
	r := &probe.Result{
		Host: `<img src=x onerror="window.__pwned=1">`, CPUModel: `</script><script>window.__pwned=1</script>`,
		Kernel: "6.18", Time: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC), Topology: topo,
		Order: order, Groups: probe.Groups(topo, order),
		C2C:       &probe.Matrix{CPUs: order, Rounds: 7, Exchanges: 2000, Pairs: len(order) * (len(order) - 1), LineNode: "the from CPU's node"},
		Staircase: []probe.Staircase{{Node: 0, CPU: 0, Steps: []probe.Step{{SizeBytes: 4096, NS: 1}, {SizeBytes: 8192, NS: 1.1}, {SizeBytes: 16384, NS: 5}}}},
		Bandwidth: []probe.Bandwidth{{Level: "L1", SizeBytes: 16384, Threads: 1, ReadGBps: 50, CopyGBps: 100, AllThreads: 16, AllSizeB: 16384, AllReadGB: 800, AllCopyGB: 1600}},
	}
	for _, a := range order {
		for _, b := range order {
			if a == b {
				continue
			}
			ns := map[string]float64{"smt": 10, "l3": 50, "node": 50, "package": 50, "remote": 130}[probe.Relation(topo, a, b)]
			r.C2C.Cells = append(r.C2C.Cells, probe.Cell{From: a, To: b, MedianNS: ns, MinNS: ns * 0.9, MaxNS: ns * 1.2, Relation: probe.Relation(topo, a, b)})
		}
	}
	return r
}

// TestProbePageInBrowser: the machine page draws its matrix and
// staircase in headless Chromium, offline, with no console error and no
// injected script run; the summary table has one row per relation.
func TestProbePageInBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("needs Chromium at %s (.ci/run installs it): %v", chromiumPath, err)
	}
	page := filepath.Join(t.TempDir(), "machine.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteProbe(f, fixtureProbe(t)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	raw, _ := os.ReadFile(page)
	if strings.Contains(string(raw), `<img src=x`) || strings.Contains(string(raw), `</script><script>window.__pwned`) {
		t.Error("a host or CPU name reached the page unescaped")
	}
	st, dom := runSelftest(t, page)
	if len(st.Errors) > 0 || st.Pwned != "undefined" {
		t.Errorf("console errors %q, window.__pwned %s", st.Errors, st.Pwned)
	}
	if len(st.Charts) != 2 {
		t.Fatalf("%d charts drawn, want the matrix and the staircase", len(st.Charts))
	}
	for _, c := range st.Charts {
		if c.NonBlank < 1000 {
			t.Errorf("chart %s canvas has %d non-blank pixels", c.ID, c.NonBlank)
		}
		if len(c.Overlaps) > 0 {
			t.Errorf("chart %s: overlapping texts %q", c.ID, c.Overlaps)
		}
	}
	for _, want := range []string{"SMT siblings (one core)", "same L3", "other package"} {
		if !strings.Contains(dom, "<td>"+want+"</td>") {
			t.Errorf("summary table has no row %q", want)
		}
	}
}
