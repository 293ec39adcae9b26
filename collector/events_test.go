package collector

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	perf "github.com/hodgesds/perf-utils"
	"golang.org/x/sys/unix"

	"github.com/cacheheat/cacheheat/host"
)

// the list in docs/EVENTS.md, in its order.
var designEvents = []string{
	"cpu-clock", "page-faults", "major-faults", "context-switches", "cpu-migrations",
	"cycles", "instructions", "cache-references", "cache-misses",
	"L1-dcache-loads", "L1-dcache-load-misses", "LLC-loads", "LLC-load-misses",
	"LLC-stores", "LLC-store-misses", "dTLB-load-misses", "node-loads", "node-load-misses",
	"branch-misses", "l2-misses", "l2-references",
}

func TestCatalogueMatchesDesign(t *testing.T) {
	for _, cpu := range []host.CPUInfo{{}, {Vendor: "GenuineIntel", Family: 6, Model: 85}} {
		var names []string
		for _, e := range Catalogue(cpu) {
			names = append(names, e.Name)
		}
		if !slices.Equal(names, designEvents) {
			t.Errorf("catalogue for %+v:\n got  %v\n want %v", cpu, names, designEvents)
		}
	}
}

// TestEncodingsMatchPerfUtils cross-checks the generic encodings against
// hodgesds/perf-utils' attr constructors, written independently.
func TestEncodingsMatchPerfUtils(t *testing.T) {
	const (
		rd   = unix.PERF_COUNT_HW_CACHE_OP_READ
		wr   = unix.PERF_COUNT_HW_CACHE_OP_WRITE
		acc  = unix.PERF_COUNT_HW_CACHE_RESULT_ACCESS
		miss = unix.PERF_COUNT_HW_CACHE_RESULT_MISS
	)
	want := map[string]unix.PerfEventAttr{
		"cpu-clock":             perf.CPUClockEventAttr(),
		"page-faults":           perf.PageFaultsEventAttr(),
		"major-faults":          perf.MajorPageFaultsEventAttr(),
		"context-switches":      perf.ContextSwitchesEventAttr(),
		"cpu-migrations":        perf.CPUMigrationsEventAttr(),
		"cycles":                perf.CPUCyclesEventAttr(),
		"instructions":          perf.CPUInstructionsEventAttr(),
		"cache-references":      perf.CacheRefEventAttr(),
		"cache-misses":          perf.CacheMissEventAttr(),
		"L1-dcache-loads":       perf.L1DataEventAttr(rd, acc),
		"L1-dcache-load-misses": perf.L1DataEventAttr(rd, miss),
		"LLC-loads":             perf.LLCacheEventAttr(rd, acc),
		"LLC-load-misses":       perf.LLCacheEventAttr(rd, miss),
		"LLC-stores":            perf.LLCacheEventAttr(wr, acc),
		"LLC-store-misses":      perf.LLCacheEventAttr(wr, miss),
		"dTLB-load-misses":      perf.DataTLBEventAttr(rd, miss),
		"node-loads":            perf.NodeCacheEventAttr(rd, acc),
		"node-load-misses":      perf.NodeCacheEventAttr(rd, miss),
	}
	for name, attr := range want {
		e, err := LookupEvent(name, host.CPUInfo{})
		if err != nil {
			t.Fatal(err)
		}
		if e.Type != attr.Type || e.Config != attr.Config {
			t.Errorf("%s: type %d config %#x; perf-utils says type %d config %#x", name, e.Type, e.Config, attr.Type, attr.Config)
		}
	}
	// perf-utils has no branch-misses attr constructor.
	if e, _ := LookupEvent("branch-misses", host.CPUInfo{}); e.Type != unix.PERF_TYPE_HARDWARE || e.Config != unix.PERF_COUNT_HW_BRANCH_MISSES {
		t.Errorf("branch-misses = %+v", e)
	}
}

func TestL2Resolution(t *testing.T) {
	for _, tc := range []struct {
		host      string
		miss, ref uint64
		uarch     string
	}{
		// Xeon Gold 6248: model 0x55 stepping 7, Cascade Lake by perfmon's
		// mapfile (steppings 5-F), not Skylake-SP.
		{"intel2s", 0x3f24, 0xff24, "intel/perfmon " + perfmonCommit + " CLX/events/cascadelakex_core.json"},
		{"offline", 0x3f24, 0xff24, "intel/perfmon " + perfmonCommit + " SKL/events/skylake_core.json"},
		{"epyc-nps4", 0x0964, 0xff64, "tools/perf/pmu-events/arch/x86/amdzen3/cache.json"},
		{"vm2", 0x0964, 0xff64, "tools/perf/pmu-events/arch/x86/amdzen5/l2-cache.json"},
	} {
		cpu, err := host.ReadCPUInfo(fixture(tc.host))
		if err != nil {
			t.Fatal(err)
		}
		miss, _ := LookupEvent("l2-misses", cpu)
		ref, _ := LookupEvent("l2-references", cpu)
		if miss.Config != tc.miss || ref.Config != tc.ref || miss.Type != unix.PERF_TYPE_RAW || miss.Missing != "" {
			t.Errorf("%s: l2-misses %+v, l2-references %+v; want configs %#x, %#x", tc.host, miss, ref, tc.miss, tc.ref)
		}
		for _, e := range []Event{miss, ref} {
			if !strings.Contains(e.Source, tc.uarch) {
				t.Errorf("%s %s: source %q does not cite %s", tc.host, e.Name, e.Source, tc.uarch)
			}
		}
	}
	// Zen 3 and Zen 4 share family 25; the model decides.
	for model, uarch := range map[int]string{0x01: "amdzen3", 0x21: "amdzen3", 0x50: "amdzen3", 0x11: "amdzen4", 0x31: "amdzen4", 0xa0: "amdzen4"} {
		e, _ := LookupEvent("l2-misses", host.CPUInfo{Vendor: "AuthenticAMD", Family: 25, Model: model})
		if !strings.Contains(e.Source, "/"+uarch+"/") {
			t.Errorf("family 25 model %#x: source %q, want %s", model, e.Source, uarch)
		}
	}
	if e, _ := LookupEvent("l2-misses", host.CPUInfo{Vendor: "AuthenticAMD", Family: 26, Model: 0x50}); e.Missing == "" {
		t.Errorf("family 26 model 0x50 (not Zen 5 in the mapfile) resolved to %+v, want no encoding", e)
	}
}

func TestL2UnknownModelIsListedWithReason(t *testing.T) {
	cpu := host.CPUInfo{Vendor: "GenuineIntel", Family: 6, Model: 0xfe}
	e, err := LookupEvent("l2-misses", cpu)
	if err != nil {
		t.Fatal(err)
	}
	want := "no raw encoding known for GenuineIntel family 6 model 254 (CPUID GenuineIntel-6-FE-0 is not in perfmon's mapfile at " + perfmonCommit + "; the architectural events cycles, instructions, cache-references and cache-misses still count)"
	if e.Missing != want {
		t.Errorf("Missing = %q, want %q", e.Missing, want)
	}
	st := ProbeEvent(e)
	if st.Status != "unsupported" || st.Reason != want {
		t.Errorf("probe of an unencodable event = %+v", st)
	}
}

func TestLookupRaw(t *testing.T) {
	e, err := LookupEvent("r01c4", host.CPUInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != KindRaw || e.Type != unix.PERF_TYPE_RAW || e.Config != 0x1c4 || e.Name != "r01c4" {
		t.Errorf("r01c4 = %+v", e)
	}
}

func TestLookupUnknown(t *testing.T) {
	for _, name := range []string{"LLC-misses", "r", "rxyz", ""} {
		_, err := LookupEvent(name, host.CPUInfo{})
		if !errors.Is(err, ErrUnknownEvent) {
			t.Errorf("LookupEvent(%q) error %v, want ErrUnknownEvent", name, err)
			continue
		}
		for _, valid := range designEvents {
			if !strings.Contains(err.Error(), valid) {
				t.Errorf("error %q does not list %s", err, valid)
			}
		}
		if !strings.Contains(err.Error(), "rNNNN") {
			t.Errorf("error %q does not mention raw events", err)
		}
	}
}

func TestDefaultEvents(t *testing.T) {
	var names []string
	for _, e := range DefaultEvents(host.CPUInfo{}) {
		names = append(names, e.Name)
	}
	for _, want := range designEvents {
		if !slices.Contains(names, want) {
			t.Errorf("default events %v lack %s", names, want)
		}
	}
	if len(names) != len(designEvents) {
		t.Errorf("default events %v: want each catalogue event once", names)
	}
}

var update = flag.Bool("update", false, "rewrite docs/EVENTS.md's generated tables from the catalogue (shared by every test of this package that writes golden files)")

const (
	docsPath   = "../docs/EVENTS.md"
	beginTable = "<!-- BEGIN GENERATED: go test ./collector -run EventsDoc -update -->\n"
	endTable   = "<!-- END GENERATED -->\n"
)

// renderEventTables writes the catalogue and the l2 table as Markdown, so
// the documentation cannot drift from the data.
func renderEventTables() string {
	var b strings.Builder
	typeName := map[uint32]string{
		unix.PERF_TYPE_HARDWARE: "PERF_TYPE_HARDWARE",
		unix.PERF_TYPE_SOFTWARE: "PERF_TYPE_SOFTWARE",
		unix.PERF_TYPE_HW_CACHE: "PERF_TYPE_HW_CACHE",
		unix.PERF_TYPE_RAW:      "PERF_TYPE_RAW",
	}
	b.WriteString("### The generic catalogue\n\n| event | kind | type | config | counts |\n|---|---|---|---|---|\n")
	for _, e := range catalogue {
		config := fmt.Sprintf("`%#x`", e.Config)
		if e.Kind == KindRaw {
			config = "per CPU model, below"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", e.Name, e.Kind, typeName[e.Type], config, e.Desc)
	}
	b.WriteString("\n### `l2-misses` and `l2-references` by CPU model\n\n")
	fmt.Fprintf(&b, "Intel: generated from [intel/perfmon](https://github.com/intel/perfmon) at `%s` (`collector/pmu/perfmon`): the CPUID patterns of its `mapfile.csv` (perf's `vendor-family-model[-stepping]`, model and stepping in hex) and the events of each core file. Counters: the general counters the event may count on.\n\n", perfmonCommit)
	b.WriteString("| CPUID pattern | perfmon file | `l2-misses` | `l2-references` |\n|---|---|---|---|\n")
	for _, m := range perfmonModels {
		cell := func(name string) string {
			e := intelL2(Event{Name: name}, m)
			if e.Missing != "" {
				return "none: " + e.Missing
			}
			return fmt.Sprintf("`r%x` %s, counters `%#x`", e.Config, strings.TrimPrefix(e.Desc, ": "), e.Counters)
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s |\n", m.pattern, m.file, cell("l2-misses"), cell("l2-references"))
	}
	b.WriteString("\nAMD (not yet generated: the kernel's JSON, where AMD's tables are, is not in this project's tooling):\n\n")
	b.WriteString("| vendor | family | models | pmu-events directory | `l2-misses` | `l2-references` |\n|---|---|---|---|---|---|\n")
	for _, r := range l2Table {
		var models []string
		for _, m := range r.models {
			if m.lo == m.hi {
				models = append(models, fmt.Sprintf("%#02x", m.lo))
			} else {
				models = append(models, fmt.Sprintf("%#02x-%#02x", m.lo, m.hi))
			}
		}
		fmt.Fprintf(&b, "| %s | %d (%#x) | %s | [`%s`](https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git/tree/tools/perf/pmu-events/arch/x86/%s/%s) | `r%x` %s | `r%x` %s |\n",
			r.vendor, r.family, r.family, strings.Join(models, ", "), r.uarch, r.uarch, amdL2File(r.uarch),
			r.missConfig, r.missName, r.refConfig, r.refName)
	}
	b.WriteString("\n### Vendor events by microarchitecture\n\n")
	b.WriteString("Named as `perf list` names them. The role (cacheheat's own reading) decides the simulated PMU's stand-in. Intel's, from perfmon's core file of each microarchitecture (deprecated names left out: their successor has the same encoding, and `-e` still accepts the old name):\n\n")
	b.WriteString("| microarchitecture | event | config | counters | role | counts (perfmon's description) |\n|---|---|---|---|---|---|\n")
	seenUarch := map[string]bool{}
	for _, m := range perfmonModels {
		if seenUarch[m.uarch] {
			continue
		}
		seenUarch[m.uarch] = true
		for _, e := range intelVendorEvents(m) {
			fmt.Fprintf(&b, "| `%s` | `%s` | `r%x` | `%#x` | %s | %s |\n", m.uarch, e.Name, e.Config, e.Counters, e.Role, e.Desc)
		}
	}
	b.WriteString("\nAMD's: each encoding is the `EventCode` and `UMask` of that entry in the file named, under `tools/perf/pmu-events/arch/x86/<directory>/` in the Linux kernel.\n\n")
	b.WriteString("| directory | event | config | role | file | counts |\n|---|---|---|---|---|---|\n")
	for _, uarch := range []string{"amdzen2", "amdzen3", "amdzen4"} {
		for _, v := range vendorEvents[uarch] {
			fmt.Fprintf(&b, "| `%s` | `%s` | `r%x` (event `%#02x`, umask `%#02x`) | %s | `%s` | %s |\n", uarch, v.name, x86Raw(v.event, v.umask), v.event, v.umask, v.role, v.file, v.desc)
		}
	}
	b.WriteString("\n### Simulated PMUs (`CACHEHEAT_SIMULATED_PMU`)\n\n")
	b.WriteString("| name | CPU | vendor, family, model | general counters | fixed | default hardware events |\n|---|---|---|---|---|---|\n")
	for _, f := range simulatedPMUs {
		cpu := f.cpu
		cpu.Simulated = f.name
		var def []string
		for _, e := range DefaultEvents(cpu) {
			if e.IsHardware() && e.Missing == "" {
				def = append(def, "`"+e.Name+"`")
			}
		}
		fixed := strings.Join(f.fixed, ", ")
		if fixed == "" {
			fixed = "none"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s %d (%#x), %d (%#x) | %d | %s | %s |\n", f.name, cpu.ModelName, cpu.Vendor, cpu.Family, cpu.Family, cpu.Model, cpu.Model, f.counters, fixed, strings.Join(def, ", "))
	}
	b.WriteString("\n### The substitution table\n\n| role | hardware events of that role | software stand-in |\n|---|---|---|\n")
	for _, role := range []string{roleCycles, roleInstructions, roleAccess, roleMiss, roleCacheToCache, roleRemote, roleOther} {
		var names []string
		for _, e := range catalogue {
			if e.Role == role {
				names = append(names, "`"+e.Name+"`")
			}
		}
		if role == roleCacheToCache || role == roleRemote {
			names = append(names, "vendor events of this role")
		}
		if role == roleOther {
			names = append(names, "raw `rNNNN`")
		}
		fmt.Fprintf(&b, "| %s | %s | `%s` |\n", role, strings.Join(names, ", "), standIns[role])
	}
	return b.String()
}

func TestEventsDoc(t *testing.T) {
	doc, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatalf("%v (docs/EVENTS.md documents the catalogue)", err)
	}
	s := string(doc)
	i, j := strings.Index(s, beginTable), strings.Index(s, endTable)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the generated-section markers %q ... %q", docsPath, beginTable, endTable)
	}
	want := s[:i+len(beginTable)] + renderEventTables() + s[j:]
	if *update {
		if err := os.WriteFile(docsPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if s != want {
		t.Errorf("%s is out of date with the catalogue; run go test ./collector -run EventsDoc -update", docsPath)
	}
}

// TestX86RawExtended: AMD's extended event codes (bits 11:8 of the
// event select) go to config bits 32-35, never into the unit mask.
func TestX86RawExtended(t *testing.T) {
	for _, c := range []struct{ event, umask, want uint64 }{
		{0x43, 0x04, 0x0443},
		{0x24, 0x3f, 0x3f24},
		{0x1c0, 0x00, 0x1_0000_00c0}, // an extended code (the kernel's Family 15h table lists 0x1C0)
		{0x4bd, 0x01, 0x4_0000_01bd},
	} {
		if got := x86Raw(c.event, c.umask); got != c.want {
			t.Errorf("x86Raw(%#x, %#x) = %#x, want %#x", c.event, c.umask, got, c.want)
		}
	}
}

// TestCPUIdentifiedByStepping: Intel models are identified as perf and
// perfmon's mapfile do, by family, model and stepping: model 0x55 is
// Skylake-SP up to stepping 4 and Cascade Lake from 5; a model the mapfile
// does not list has no microarchitecture.
func TestCPUIdentifiedByStepping(t *testing.T) {
	for _, c := range []struct {
		model, stepping int
		want            string
	}{
		{0x55, 4, "skylakex"},
		{0x55, 5, "cascadelakex"},
		{0x55, 7, "cascadelakex"},
		{0x6a, 6, "icelakex"},
		{0x8f, 8, "sapphirerapids"},
		{0xfe, 0, ""},
	} {
		cpu := host.CPUInfo{Vendor: "GenuineIntel", Family: 6, Model: c.model, Stepping: c.stepping}
		if got := uarchOf(cpu); got != c.want {
			t.Errorf("model %#x stepping %d (%s): %q, want %q", c.model, c.stepping, cpuidString(cpu), got, c.want)
		}
	}
}

// TestSnoopOutcomes: HITM (a line modified in another core's cache) and
// FWD (a clean line forwarded) are different snoop outcomes: a remote
// FWD is remote, not cache-to-cache; the same-socket event is HITM under
// its non-deprecated name on each model.
func TestSnoopOutcomes(t *testing.T) {
	roles := func(model, stepping int) map[string]string {
		out := map[string]string{}
		for _, e := range VendorEvents(host.CPUInfo{Vendor: "GenuineIntel", Family: 6, Model: model, Stepping: stepping}) {
			out[e.Name] = e.Role
		}
		return out
	}
	spr := roles(0x8f, 8)
	if spr["mem_load_l3_miss_retired.remote_fwd"] != roleRemote || spr["mem_load_l3_miss_retired.remote_hitm"] != roleCacheToCache {
		t.Errorf("Sapphire Rapids: remote_fwd %q, remote_hitm %q; want remote, cache-to-cache", spr["mem_load_l3_miss_retired.remote_fwd"], spr["mem_load_l3_miss_retired.remote_hitm"])
	}
	icx := roles(0x6a, 6)
	if _, ok := icx["mem_load_l3_hit_retired.xsnp_hitm"]; ok || icx["mem_load_l3_hit_retired.xsnp_fwd"] != roleCacheToCache {
		t.Errorf("Ice Lake-SP: %v; want xsnp_fwd as cache-to-cache and not its deprecated alias xsnp_hitm", icx)
	}
	if skx := roles(0x55, 4); skx["mem_load_l3_hit_retired.xsnp_hitm"] != roleCacheToCache {
		t.Errorf("Skylake-SP: %v; want xsnp_hitm as cache-to-cache", skx)
	}
}

// TestCounterMasksFromPerfmon: every Intel raw event carries the counters
// perfmon says it may use; on Ice Lake-SP the retired-load data sources
// count on general counters 0-3 only.
func TestCounterMasksFromPerfmon(t *testing.T) {
	for _, e := range VendorEvents(host.CPUInfo{Vendor: "GenuineIntel", Family: 6, Model: 0x6a, Stepping: 6}) {
		if e.Counters == 0 {
			t.Errorf("%s has no counter mask", e.Name)
		}
		if strings.HasPrefix(e.Name, "mem_load_") && e.Counters != 0xf {
			t.Errorf("%s counters %#x, want 0xf (0-3)", e.Name, e.Counters)
		}
	}
}
