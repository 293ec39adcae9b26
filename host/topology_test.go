package host

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/cacheheat/cacheheat/profile"
)

// fixture returns the root of a fixture host under testdata/hosts
// (testdata/README.md describes them).
func fixture(name string) string { return filepath.Join("testdata", "hosts", name) }

// groups partitions the CPUs by key and returns the groups as sorted CPU
// lists, sorted by their first CPU: the grouping, independent of ids.
func groups(topo profile.Topology, key func(profile.CPU) string) [][]int {
	m := map[string][]int{}
	for _, c := range topo.CPUs {
		m[key(c)] = append(m[key(c)], c.ID)
	}
	var out [][]int
	for _, g := range m {
		slices.Sort(g)
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

func byNode(c profile.CPU) string    { return fmt.Sprint(c.Node) }
func byL3(c profile.CPU) string      { return fmt.Sprint(c.L3) }
func byPackage(c profile.CPU) string { return fmt.Sprint(c.Package) }
func byCore(c profile.CPU) string    { return fmt.Sprint(c.Package, "/", c.Core) }

// list expands the kernel's CPU list notation, for readable expectations.
func list(t *testing.T, s string) []int {
	t.Helper()
	l, err := ParseCPUList(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func lists(t *testing.T, ss ...string) [][]int {
	out := make([][]int, len(ss))
	for i, s := range ss {
		out[i] = list(t, s)
	}
	return out
}

// cachesAt returns the SharedCPUs of every cache of a level and type.
func cachesAt(topo profile.Topology, level int, typ string) [][]int {
	var out [][]int
	for _, c := range topo.Caches {
		if c.Level == level && c.Type == typ {
			out = append(out, c.SharedCPUs)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

func checkGroups(t *testing.T, what string, got, want [][]int) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s grouping:\n got  %v\n want %v", what, got, want)
	}
}

// checkSiblings asserts every CPU's Siblings is exactly its core group.
func checkSiblings(t *testing.T, topo profile.Topology) {
	t.Helper()
	for _, g := range groups(topo, byCore) {
		for _, id := range g {
			i := slices.IndexFunc(topo.CPUs, func(c profile.CPU) bool { return c.ID == id })
			if !slices.Equal(topo.CPUs[i].Siblings, g) {
				t.Errorf("cpu %d siblings = %v, want its core's CPUs %v", id, topo.CPUs[i].Siblings, g)
			}
		}
	}
}

func readFixture(t *testing.T, name string) profile.Topology {
	t.Helper()
	topo, err := ReadTopology(fixture(name))
	if err != nil {
		t.Fatalf("ReadTopology(%s): %v", name, err)
	}
	return topo
}

func TestTopologyVM2(t *testing.T) {
	topo := readFixture(t, "vm2")
	if len(topo.CPUs) != 2 || len(topo.OfflineCPUs) != 0 {
		t.Fatalf("cpus %+v offline %v, want 2 online CPUs", topo.CPUs, topo.OfflineCPUs)
	}
	checkGroups(t, "node", groups(topo, byNode), lists(t, "0-1"))
	checkGroups(t, "package", groups(topo, byPackage), lists(t, "0-1"))
	checkGroups(t, "core", groups(topo, byCore), lists(t, "0", "1"))
	checkSiblings(t, topo)
	// This VM exposes no cache directories: no caches, no L3 domain.
	if len(topo.Caches) != 0 {
		t.Errorf("caches = %+v, want none (the VM has no cpu*/cache)", topo.Caches)
	}
	for _, c := range topo.CPUs {
		if c.L3 != -1 {
			t.Errorf("cpu %d L3 = %d, want -1 without cache information", c.ID, c.L3)
		}
	}
	if len(topo.Nodes) != 1 || topo.Nodes[0].ID != 0 {
		t.Errorf("nodes = %+v, want node 0", topo.Nodes)
	}
}

func TestTopologyIntel2S(t *testing.T) {
	topo := readFixture(t, "intel2s")
	if len(topo.CPUs) != 16 {
		t.Fatalf("%d CPUs, want 16", len(topo.CPUs))
	}
	checkGroups(t, "node", groups(topo, byNode), lists(t, "0-3,8-11", "4-7,12-15"))
	checkGroups(t, "package", groups(topo, byPackage), lists(t, "0-3,8-11", "4-7,12-15"))
	checkGroups(t, "L3", groups(topo, byL3), lists(t, "0-3,8-11", "4-7,12-15"))
	checkGroups(t, "core", groups(topo, byCore), lists(t, "0,8", "1,9", "2,10", "3,11", "4,12", "5,13", "6,14", "7,15"))
	checkSiblings(t, topo)
	checkGroups(t, "L1d", cachesAt(topo, 1, "Data"), groups(topo, byCore))
	checkGroups(t, "L1i", cachesAt(topo, 1, "Instruction"), groups(topo, byCore))
	checkGroups(t, "L2", cachesAt(topo, 2, "Unified"), groups(topo, byCore))
	checkGroups(t, "L3 caches", cachesAt(topo, 3, "Unified"), lists(t, "0-3,8-11", "4-7,12-15"))
	for _, c := range topo.Caches {
		if c.Level == 3 && (c.SizeBytes != 28160<<10 || c.LineSize != 64 || c.Ways != 11) {
			t.Errorf("L3 %+v, want 28160K, 64-byte lines, 11 ways", c)
		}
	}
	// Intel core ids have gaps; the grouping must not depend on them.
	if got := topo.CPUs[2].Core; got != 8 {
		t.Errorf("cpu 2 core id = %d, want 8 (as sysfs says)", got)
	}
}

func TestTopologyEPYCNPS4(t *testing.T) {
	topo := readFixture(t, "epyc-nps4")
	if len(topo.CPUs) != 32 {
		t.Fatalf("%d CPUs, want 32", len(topo.CPUs))
	}
	// NPS4: four nodes per socket, each with two CCDs (L3 domains).
	checkGroups(t, "node", groups(topo, byNode), lists(t,
		"0-1,16-17", "2-3,18-19", "4-5,20-21", "6-7,22-23",
		"8-9,24-25", "10-11,26-27", "12-13,28-29", "14-15,30-31"))
	checkGroups(t, "package", groups(topo, byPackage), lists(t, "0-7,16-23", "8-15,24-31"))
	var wantL3 []string
	for ccd := 0; ccd < 16; ccd++ {
		wantL3 = append(wantL3, fmt.Sprintf("%d,%d", ccd, ccd+16))
	}
	checkGroups(t, "L3", groups(topo, byL3), lists(t, wantL3...))
	checkGroups(t, "core", groups(topo, byL3), groups(topo, byCore)) // one core per CCD on a 72F3
	checkSiblings(t, topo)
	checkGroups(t, "L3 caches", cachesAt(topo, 3, "Unified"), lists(t, wantL3...))

	// Each L3 domain lies in exactly one node, each node holds two, and
	// each socket holds eight: the hierarchy record and the report use.
	l3PerNode := map[int]map[int]bool{}
	l3PerPkg := map[int]map[int]bool{}
	for _, c := range topo.CPUs {
		if l3PerNode[c.Node] == nil {
			l3PerNode[c.Node] = map[int]bool{}
		}
		if l3PerPkg[c.Package] == nil {
			l3PerPkg[c.Package] = map[int]bool{}
		}
		l3PerNode[c.Node][c.L3] = true
		l3PerPkg[c.Package][c.L3] = true
	}
	for n, l3s := range l3PerNode {
		if len(l3s) != 2 {
			t.Errorf("node %d has %d L3 domains, want 2", n, len(l3s))
		}
	}
	for p, l3s := range l3PerPkg {
		if len(l3s) != 8 {
			t.Errorf("package %d has %d L3 domains, want 8", p, len(l3s))
		}
	}
	// The L3 ids are the kernel's, unique across sockets.
	if c := topo.CPUs[9]; c.L3 != 9 || c.Node != 4 || c.Package != 1 {
		t.Errorf("cpu 9 = %+v, want L3 9, node 4, package 1", c)
	}
}

func TestTopologyOffline(t *testing.T) {
	topo := readFixture(t, "offline")
	var ids []int
	for _, c := range topo.CPUs {
		ids = append(ids, c.ID)
	}
	if want := list(t, "0-4,6"); !slices.Equal(ids, want) {
		t.Fatalf("online CPUs %v, want %v", ids, want)
	}
	if !slices.Equal(topo.OfflineCPUs, []int{5, 7}) {
		t.Errorf("offline CPUs %v, want [5 7]", topo.OfflineCPUs)
	}
	checkGroups(t, "node", groups(topo, byNode), lists(t, "0-4,6"))
	checkGroups(t, "L3", groups(topo, byL3), lists(t, "0-4,6"))
	// Cores 1 and 3 lost their second thread.
	checkGroups(t, "core", groups(topo, byCore), lists(t, "0,4", "1", "2,6", "3"))
	checkSiblings(t, topo)
	checkGroups(t, "L2", cachesAt(topo, 2, "Unified"), lists(t, "0,4", "1", "2,6", "3"))
	checkGroups(t, "L3 caches", cachesAt(topo, 3, "Unified"), lists(t, "0-4,6"))
}

// TestTopologyThisHost reads the machine the tests run on: whatever it is,
// the result must be self-consistent.
func TestTopologyThisHost(t *testing.T) {
	topo, err := ReadTopology("/")
	if err != nil {
		t.Fatal(err)
	}
	if len(topo.CPUs) == 0 || len(topo.Nodes) == 0 {
		t.Fatalf("topology %+v: want CPUs and nodes", topo)
	}
	inNode := 0
	for _, n := range topo.Nodes {
		inNode += len(n.CPUs)
	}
	if inNode != len(topo.CPUs) {
		t.Errorf("nodes hold %d CPUs, host has %d online", inNode, len(topo.CPUs))
	}
	checkSiblings(t, topo)
}

func TestTopologyJSONHasNoNulls(t *testing.T) {
	topo := readFixture(t, "vm2")
	b, err := json.Marshal(topo)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["caches"] == nil {
		t.Errorf("caches is null in %s; scripts expect a list", b)
	}
}

func TestParseCPUList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		bad  bool
	}{
		{in: "", want: nil},
		{in: "0", want: []int{0}},
		{in: "0-3,8,10-11\n", want: []int{0, 1, 2, 3, 8, 10, 11}},
		{in: "3-1", bad: true},
		{in: "a", bad: true},
		{in: "0-", bad: true},
	} {
		got, err := ParseCPUList(tc.in)
		if (err != nil) != tc.bad || !slices.Equal(got, tc.want) {
			t.Errorf("ParseCPUList(%q) = %v, %v; want %v (error: %v)", tc.in, got, err, tc.want, tc.bad)
		}
		if !tc.bad {
			if back := FormatCPUList(got); back != "" || len(got) != 0 {
				again, _ := ParseCPUList(back)
				if !slices.Equal(again, got) {
					t.Errorf("FormatCPUList(%v) = %q does not round-trip", got, back)
				}
			}
		}
	}
	if got := FormatCPUList([]int{0, 1, 2, 3, 8, 10, 11}); got != "0-3,8,10-11" {
		t.Errorf("FormatCPUList = %q", got)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"48K": 48 << 10, "32768K": 32 << 20, "1M": 1 << 20, "512": 512} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}
