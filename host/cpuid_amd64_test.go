package host

import (
	"math/bits"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/profile"
)

// TestCPUIDHostCaches decodes this CPU's caches and checks them for sanity
// and against glibc's reading of the same CPUID leaves (getconf).
func TestCPUIDHostCaches(t *testing.T) {
	decoded := decodeCPUIDCaches(cpuid)
	if len(decoded) == 0 {
		t.Skip("CPUID describes no caches on this CPU (or hypervisor)")
	}
	find := func(level int, typ string) *cpuidCache {
		for i := range decoded {
			if decoded[i].level == level && decoded[i].typ == typ {
				return &decoded[i]
			}
		}
		return nil
	}
	for _, c := range decoded {
		t.Logf("L%d %s: %d bytes, %d-byte lines, %d-way, shared by %d", c.level, c.typ, c.size, c.line, c.ways, c.sharing)
		// Sizes are m·2^k with a small odd m (48 KiB = 3·2^14, 1.25 MiB =
		// 5·2^18, 508 MiB = 127·2^22); garbage decodes are not.
		if c.size <= 0 || c.line <= 0 || c.size%int64(c.line) != 0 || c.size>>bits.TrailingZeros64(uint64(c.size)) > 255 {
			t.Errorf("L%d %s: implausible size %d or line %d", c.level, c.typ, c.size, c.line)
		}
	}
	l1d := find(1, "Data")
	if l1d == nil {
		t.Fatalf("no L1 data cache among %+v", decoded)
	}
	if l1d.line != 64 {
		t.Errorf("L1d line size %d, want 64", l1d.line)
	}

	getconf, err := exec.LookPath("getconf")
	if err != nil {
		t.Skip("no getconf to compare with")
	}
	for _, tc := range []struct {
		name  string
		level int
		typ   string
	}{{"LEVEL1_DCACHE_SIZE", 1, "Data"}, {"LEVEL2_CACHE_SIZE", 2, "Unified"}} {
		out, err := exec.Command(getconf, tc.name).Output()
		want, perr := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
		if err != nil || perr != nil || want <= 0 {
			t.Logf("getconf %s: %q %v: not comparing", tc.name, out, err)
			continue
		}
		c := find(tc.level, tc.typ)
		if c == nil {
			t.Errorf("getconf %s = %d, but no L%d %s decoded", tc.name, want, tc.level, tc.typ)
			continue
		}
		if c.size != want {
			t.Errorf("L%d %s: decoded %d bytes, getconf %s = %d", tc.level, tc.typ, c.size, tc.name, want)
		}
	}
}

// fakeCPUID answers from a table of (leaf, subleaf) registers; unknown
// leaves read as zeros, as on real CPUs below their maximum leaf.
type fakeCPUID map[[2]uint32][4]uint32

func (f fakeCPUID) cpuid(eax, ecx uint32) (uint32, uint32, uint32, uint32) {
	r := f[[2]uint32{eax, ecx}]
	return r[0], r[1], r[2], r[3]
}

var (
	amdVendor   = [4]uint32{0, 0x68747541, 0x444d4163, 0x69746e65} // AuthenticAMD
	intelVendor = [4]uint32{0, 0x756e6547, 0x6c65746e, 0x49656e69} // GenuineIntel
)

func TestDecodeCPUIDCaches(t *testing.T) {
	// This VM (AMD EPYC family 0x1a): topology extensions advertised but
	// leaf 0x8000001D all zeros, so the legacy leaves answer.
	amdVM := fakeCPUID{
		{0, 0}:          {0xd, amdVendor[1], amdVendor[2], amdVendor[3]},
		{0x80000000, 0}: {0x80000021, amdVendor[1], amdVendor[2], amdVendor[3]},
		{0x80000001, 0}: {0x00b00f21, 0x40000000, 0x440001f1, 0x25d3fbff},
		{0x80000005, 0}: {0xff60ff40, 0xff60ff40, 0x300c0140, 0x20080140},
		{0x80000006, 0}: {0x40802040, 0x60804040, 0x04006140, 0x0fe09140},
	}
	// A Zen 4 with leaf 0x8000001D: 32K L1d/L1i 8-way, 1M L2 8-way per
	// core (2 threads), 32M L3 16-way shared by 16 threads.
	zen4 := fakeCPUID{
		{0, 0}:          {0x10, amdVendor[1], amdVendor[2], amdVendor[3]},
		{0x80000000, 0}: {0x80000028, amdVendor[1], amdVendor[2], amdVendor[3]},
		{0x80000001, 0}: {0, 0, 1 << 22, 0},
		{0x8000001D, 0}: {0x00004121, 0x01c0003f, 0x0000003f, 0},
		{0x8000001D, 1}: {0x00004122, 0x01c0003f, 0x0000003f, 0},
		{0x8000001D, 2}: {0x00004143, 0x01c0003f, 0x000007ff, 0x2},
		{0x8000001D, 3}: {0x0003c163, 0x03c0003f, 0x00007fff, 0x1},
	}
	// An Intel part with leaf 4: 48K L1d 12-way, 32K L1i 8-way, 1.25M L2
	// 10-way (2 threads), 30M L3 12-way (shared by up to 32).
	intel := fakeCPUID{
		{0, 0}: {0x1b, intelVendor[1], intelVendor[2], intelVendor[3]},
		{4, 0}: {0x04000121, 0x02c0003f, 0x0000003f, 0},
		{4, 1}: {0x04000122, 0x01c0003f, 0x0000003f, 0},
		{4, 2}: {0x04004143, 0x0240003f, 0x000007ff, 0},
		{4, 3}: {0x0407c163, 0x02c0003f, 0x00009fff, 0x4},
	}
	for _, tc := range []struct {
		name string
		f    fakeCPUID
		want []cpuidCache
	}{
		{"amd-legacy", amdVM, []cpuidCache{
			{1, "Data", 48 << 10, 64, 12, 0},
			{1, "Instruction", 32 << 10, 64, 8, 0},
			{2, "Unified", 1 << 20, 64, 8, 0},
			{3, "Unified", 508 << 20, 64, 0, 1<<31 - 1},
		}},
		{"amd-topoext", zen4, []cpuidCache{
			{1, "Data", 32 << 10, 64, 8, 2},
			{1, "Instruction", 32 << 10, 64, 8, 2},
			{2, "Unified", 1 << 20, 64, 8, 2},
			{3, "Unified", 32 << 20, 64, 16, 16},
		}},
		{"intel-leaf4", intel, []cpuidCache{
			{1, "Data", 48 << 10, 64, 12, 1},
			{1, "Instruction", 32 << 10, 64, 8, 1},
			{2, "Unified", 1280 << 10, 64, 10, 2},
			{3, "Unified", 30 << 20, 64, 12, 32},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decodeCPUIDCaches(tc.f.cpuid)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("decoded\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestCPUIDSharedCPUsGrouping(t *testing.T) {
	// Two packages of 8 CPUs, SMT pairs (0,1), (2,3), ...
	var cpus []profile.CPU
	for id := 0; id < 16; id++ {
		sib := id &^ 1
		cpus = append(cpus, profile.CPU{ID: id, Package: id / 8, Core: id % 8 / 2, L3: -1, Siblings: []int{sib, sib + 1}})
	}
	decoded := []cpuidCache{
		{level: 1, typ: "Data", size: 32 << 10, line: 64, sharing: 2},         // SMT siblings
		{level: 1, typ: "Instruction", size: 32 << 10, line: 64, sharing: 0},  // unknown: per core
		{level: 2, typ: "Unified", size: 1 << 20, line: 64, sharing: 4},       // consecutive fours
		{level: 3, typ: "Unified", size: 32 << 20, line: 64, sharing: 1 << 9}, // whole package
	}
	caches := groupCPUIDCaches(decoded, cpus)
	shared := func(level int, typ string) ([][]int, []int) {
		var sets [][]int
		var ids []int
		for _, c := range caches {
			if c.Source != "cpuid" {
				t.Errorf("cache %+v: source %q, want cpuid", c, c.Source)
			}
			if c.Level == level && c.Type == typ {
				sets = append(sets, c.SharedCPUs)
				ids = append(ids, c.ID)
			}
		}
		return sets, ids
	}
	pairs := lists(t, "0-1", "2-3", "4-5", "6-7", "8-9", "10-11", "12-13", "14-15")
	for _, tc := range []struct {
		level int
		typ   string
		want  [][]int
	}{
		{1, "Data", pairs},
		{1, "Instruction", pairs},
		{2, "Unified", lists(t, "0-3", "4-7", "8-11", "12-15")},
		{3, "Unified", lists(t, "0-7", "8-15")},
	} {
		got, ids := shared(tc.level, tc.typ)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("L%d %s shared by %v, want %v", tc.level, tc.typ, got, tc.want)
		}
		for i, id := range ids {
			if id != i {
				t.Errorf("L%d %s ids %v, want 0..%d", tc.level, tc.typ, ids, len(ids)-1)
				break
			}
		}
	}

	// A cache CPUID says is shared by more CPUs than the VM has is the
	// whole package; a package of one CPU without sibling lists still
	// gets a cache of its own.
	small := groupCPUIDCaches([]cpuidCache{{level: 3, typ: "Unified", size: 1 << 20, line: 64, sharing: 16}},
		[]profile.CPU{{ID: 0}, {ID: 1}})
	if len(small) != 1 || !reflect.DeepEqual(small[0].SharedCPUs, []int{0, 1}) {
		t.Errorf("2-CPU VM, L3 shared by 16: got %+v, want one L3 over 0-1", small)
	}
	lone := groupCPUIDCaches([]cpuidCache{{level: 1, typ: "Data", size: 1 << 15, line: 64}}, []profile.CPU{{ID: 3}})
	if len(lone) != 1 || !reflect.DeepEqual(lone[0].SharedCPUs, []int{3}) {
		t.Errorf("lone CPU: got %+v", lone)
	}
}

// TestCPUIDNotForFixtures checks that a fixture root without sysfs caches
// stays without: CPUID describes this machine, not the fixture's.
func TestCPUIDNotForFixtures(t *testing.T) {
	h, err := Detect(fixture("vm2"))
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Topology.Caches) != 0 {
		t.Errorf("vm2 fixture got caches %+v; the CPUID fallback is for root / only", h.Topology.Caches)
	}
}

// TestCPUIDHostTopology checks the fallback on this host: when sysfs has
// no caches, DetectTopology fills them from CPUID and points CPUs at their L3.
func TestCPUIDHostTopology(t *testing.T) {
	sysfs, err := ReadTopology("/")
	if err != nil {
		t.Skip(err)
	}
	if len(sysfs.Caches) > 0 {
		t.Skip("this host's sysfs lists caches; the CPUID fallback is not used")
	}
	topo, err := DetectTopology("/")
	if err != nil {
		t.Fatal(err)
	}
	if len(topo.Caches) == 0 {
		t.Skip("CPUID describes no caches here")
	}
	for _, c := range topo.Caches {
		t.Logf("L%d %s id %d: %d bytes, %d-byte lines, %d-way, CPUs %s", c.Level, c.Type, c.ID, c.SizeBytes, c.LineSize, c.Ways, FormatCPUList(c.SharedCPUs))
		if c.Source != "cpuid" {
			t.Errorf("cache %+v: source %q, want cpuid", c, c.Source)
		}
	}
	hasL3 := false
	for _, c := range topo.Caches {
		hasL3 = hasL3 || c.Level == 3
	}
	for _, c := range topo.CPUs {
		if hasL3 && c.L3 < 0 {
			t.Errorf("cpu %d: L3 %d although CPUID lists an L3", c.ID, c.L3)
		}
	}
}
