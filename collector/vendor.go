package collector

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/cacheheat/cacheheat/host"
)

// Roles say what an event measures, in the words the simulated PMU's
// substitution table (simulated.go) and the curated defaults use. A role is
// data about the event, never a branch in the pipeline.
const (
	roleCycles       = "cycles"
	roleInstructions = "instructions"
	roleAccess       = "access"         // loads, references: the denominator of a miss ratio
	roleMiss         = "miss"           // a miss at some level
	roleCacheToCache = "cache-to-cache" // a load served by another core's (modified) line: HITM
	roleRemote       = "remote"         // served by another NUMA node
	roleOther        = "other"
)

// vendorEvent is one raw x86 event of a microarchitecture, under the name
// perf lists it by (the kernel's pmu-events JSON, lower case).
type vendorEvent struct {
	name         string
	event, umask uint64
	role         string
	file         string // the pmu-events file it is in: cache.json, memory.json, ...
	desc         string
}

//go:generate go run ./pmu/gen -subset pmu/perfmon -o perfmon_gen.go

// perfmonModel is a row of Intel perfmon's mapfile.csv (perfmon_gen.go):
// a CPUID pattern, the microarchitecture (perf's pmu-events directory
// name, which is also perfmon's file prefix) and its core event file.
type perfmonModel struct {
	pattern, uarch, file string
}

// perfmonEvent is one event of a perfmon core event file, as perfmon
// lists it (perfmon_gen.go).
type perfmonEvent struct {
	Name         string
	Event, Umask uint64
	// Counters are the general counters it may count on (bit n: counter
	// n), perfmon's Counter field: on Ice Lake and later many events
	// count on counters 0-3 only.
	Counters uint64
	// CountersHTOff are those it may count on when Hyper-Threading is
	// off, perfmon's CounterHTOff (Haswell to Cascade Lake: 8 counters
	// then, 4 a thread with it on); 0 where the table has no such field.
	CountersHTOff uint64
	// MSR is the extra MSR an offcore event needs ("" for none).
	MSR        string
	Deprecated bool
	Desc       string
}

// perfmonCommit is the intel/perfmon commit collector/pmu/perfmon was
// taken from (its SOURCE file).
const perfmonCommit = "6dadedf"

// intelRoles are the roles of the Intel events cacheheat uses, by perf's
// (lower-case) names: cacheheat's own reading of perfmon's descriptions.
// xsnp_hitm and its successor xsnp_fwd count loads served by a line
// another core on this socket held modified (Ice Lake-SP lists xsnp_hitm
// as a deprecated alias of xsnp_fwd, Sapphire Rapids only xsnp_fwd);
// remote_hitm is the same from another socket, while remote_fwd is a
// different snoop outcome (a clean line forwarded by another socket's
// cache): remote, not HITM.
var intelRoles = map[string]string{
	"mem_load_l3_hit_retired.xsnp_hitm":    roleCacheToCache,
	"mem_load_l3_hit_retired.xsnp_fwd":     roleCacheToCache,
	"mem_load_l3_hit_retired.xsnp_miss":    roleAccess,
	"mem_load_l3_miss_retired.local_dram":  roleMiss,
	"mem_load_l3_miss_retired.remote_dram": roleRemote,
	"mem_load_l3_miss_retired.remote_hitm": roleCacheToCache,
	"mem_load_l3_miss_retired.remote_fwd":  roleRemote,
	"mem_load_retired.l2_miss":             roleMiss,
	"mem_load_retired.l3_miss":             roleMiss,
	"longest_lat_cache.miss":               roleMiss,
	"longest_lat_cache.reference":          roleAccess,
	"dtlb_load_misses.walk_completed":      roleMiss,
}

// cpuidString is perf's x86 CPUID string: vendor-family-model-stepping,
// family in decimal, model and stepping in upper-case hex
// (tools/perf/arch/x86/util/header.c, get_cpuid_str: "%s-%u-%X-%X").
func cpuidString(cpu host.CPUInfo) string {
	return fmt.Sprintf("%s-%d-%X-%X", cpu.Vendor, cpu.Family, cpu.Model, cpu.Stepping)
}

// matchesCPUID is perf's strcmp_cpuid_str (the same file): the mapfile's
// pattern, an extended regular expression, must match the whole CPUID
// string; a pattern without a stepping (three dashes make a full one) is
// matched against the string without its stepping.
func matchesCPUID(pattern, id string) bool {
	re, err := cpuidPattern(pattern)
	return err == nil && matchesCompiled(re, pattern, id)
}

func cpuidPattern(pattern string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + pattern + ")$")
}

func matchesCompiled(re *regexp.Regexp, pattern, id string) bool {
	if strings.Count(pattern, "-") != 3 {
		id = id[:strings.LastIndex(id, "-")]
	}
	return re.MatchString(id)
}

// perfmonPatterns are perfmonModels' patterns compiled once: every event
// lookup asks which model the CPU is.
var perfmonPatterns = sync.OnceValue(func() []*regexp.Regexp {
	out := make([]*regexp.Regexp, len(perfmonModels))
	for i, m := range perfmonModels {
		out[i], _ = cpuidPattern(m.pattern) // nil: a pattern Go cannot read matches nothing
	}
	return out
})

// perfmonModelOf is the mapfile row of an Intel cpu, or false.
func perfmonModelOf(cpu host.CPUInfo) (perfmonModel, bool) {
	id := cpuidString(cpu)
	for i, re := range perfmonPatterns() {
		if re != nil && matchesCompiled(re, perfmonModels[i].pattern, id) {
			return perfmonModels[i], true
		}
	}
	return perfmonModel{}, false
}

// perfmonEventOf finds an event of a microarchitecture by perfmon's name.
func perfmonEventOf(uarch, name string) (perfmonEvent, bool) {
	for _, e := range perfmonEvents[uarch] {
		if e.Name == name {
			return e, true
		}
	}
	return perfmonEvent{}, false
}

// intelVendorEvents are the events of intelRoles a microarchitecture's
// perfmon file lists, deprecated names left out (their successor, with
// the same encoding, is there).
func intelVendorEvents(m perfmonModel) []Event {
	var out []Event
	for _, e := range perfmonEvents[m.uarch] {
		name := strings.ToLower(e.Name)
		role, ok := intelRoles[name]
		if !ok || e.Deprecated {
			continue
		}
		out = append(out, e.toEvent(m, role))
	}
	return out
}

// deprecatedAlias finds name among the deprecated events of cpu's
// perfmon table (Ice Lake-SP's xsnp_hitm): perf still accepts such a name,
// and so does cacheheat, saying which event replaced it. The defaults
// never use one, so an event is never counted twice under two names.
func deprecatedAlias(name string, cpu host.CPUInfo) (Event, bool) {
	m, ok := perfmonModelOf(cpu)
	if !ok || intelRoles[name] == "" {
		return Event{}, false
	}
	for _, e := range perfmonEvents[m.uarch] {
		if !e.Deprecated || strings.ToLower(e.Name) != name {
			continue
		}
		ev := e.toEvent(m, intelRoles[name])
		for _, n := range perfmonEvents[m.uarch] {
			if !n.Deprecated && n.Event == e.Event && n.Umask == e.Umask {
				ev.Desc = fmt.Sprintf("deprecated name of %s: %s", strings.ToLower(n.Name), n.Desc)
			}
		}
		return ev, true
	}
	return Event{}, false
}

// toEvent is e as the catalogue opens it, under perf's (lower-case) name.
func (e perfmonEvent) toEvent(m perfmonModel, role string) Event {
	return Event{
		Name: strings.ToLower(e.Name), Kind: KindRaw, Type: unix.PERF_TYPE_RAW, Config: x86Raw(e.Event, e.Umask),
		Desc: e.Desc, Role: role, Counters: e.Counters, CountersHTOff: e.CountersHTOff, Source: perfmonSource(m, e),
	}
}

func perfmonSource(m perfmonModel, e perfmonEvent) string {
	return fmt.Sprintf("intel/perfmon %s %s: %s (event 0x%02x, umask 0x%02x)", perfmonCommit, m.file, e.Name, e.Event, e.Umask)
}

// vendorEvents are the cache, coherence, NUMA and TLB events of each AMD
// microarchitecture cacheheat knows, by the pmu-events directory name of
// l2Table. Each encoding is the EventCode and UMask of the named entry in
// linux tools/perf/pmu-events/arch/x86/<uarch>/<file> (AMD's Processor
// Programming Reference, which those files are generated from);
// docs/EVENTS.md lists them. Intel's are generated from perfmon
// (perfmon_gen.go); these are not yet: the kernel's tree, where AMD's
// JSON is, could not be brought into this project's tooling.
var vendorEvents = map[string][]vendorEvent{
	// Zen 2 and 3 list the fill sources in memory.json, Zen 4 in cache.json.
	"amdzen2": amdFills("memory.json", "ls_refills_from_sys.", "ls_mabresp_lcl_cache", 0x02, "ls_mabresp_rmt_cache", "ls_mabresp_lcl_dram", "ls_mabresp_rmt_dram"),
	"amdzen3": amdFills("memory.json", "ls_dmnd_fills_from_sys.", "ext_cache_local", 0x04, "ext_cache_remote", "mem_io_local", "mem_io_remote"),
	"amdzen4": amdFills("cache.json", "ls_dmnd_fills_from_sys.", "near_cache", 0x04, "far_cache", "dram_io_near", "dram_io_far"),
}

// amdFills lists the demand data-cache fill sources of Zen 2 to 4 (event
// 0x43, whose unit masks name where a fill came from: 0x10 a CCX on another
// node, 0x08 this node's DRAM, 0x40 another node's DRAM, and on Zen 3 and 4
// 0x04 another CCX on this node) and the dTLB miss event. Zen 2 calls the
// family ls_refills_from_sys, Zen 3 and 4 ls_dmnd_fills_from_sys, with other
// unit-mask names each time. Zen 2's local-cache mask (0x02) also counts
// L3 hits, so there only the remote-cache fill is a cache-to-cache
// transfer.
func amdFills(fillsFile, family, localCache string, localUmask uint64, remoteCache, localDRAM, remoteDRAM string) []vendorEvent {
	localRole := roleCacheToCache
	if localUmask != 0x04 {
		localRole = roleAccess
	}
	return []vendorEvent{
		{family + localCache, 0x43, localUmask, localRole, fillsFile, "demand data-cache fills from another core's cache on this node"},
		{family + remoteCache, 0x43, 0x10, roleCacheToCache, fillsFile, "demand data-cache fills from a core's cache on another node"},
		{family + localDRAM, 0x43, 0x08, roleMiss, fillsFile, "demand data-cache fills from this node's DRAM or I/O"},
		{family + remoteDRAM, 0x43, 0x40, roleRemote, fillsFile, "demand data-cache fills from another node's DRAM or I/O"},
		{"ls_l1_d_tlb_miss.all", 0x45, 0xff, roleMiss, "memory.json", "L1 dTLB misses (served by the L2 TLB or a page walk)"},
	}
}

// uarchOf names cpu's pmu-events directory, or "" for a model not in
// perfmon's mapfile (Intel) or l2Table (AMD).
func uarchOf(cpu host.CPUInfo) string {
	if m, ok := perfmonModelOf(cpu); ok {
		return m.uarch
	}
	for _, r := range l2Table {
		if r.matches(cpu) {
			return r.uarch
		}
	}
	return ""
}

// VendorEvents returns the raw vendor events of cpu's microarchitecture
// (none for a model cacheheat has no table for).
func VendorEvents(cpu host.CPUInfo) []Event {
	if m, ok := perfmonModelOf(cpu); ok {
		return intelVendorEvents(m)
	}
	uarch := uarchOf(cpu)
	var out []Event
	for _, v := range vendorEvents[uarch] {
		out = append(out, v.toEvent(uarch))
	}
	return out
}

func (v vendorEvent) toEvent(uarch string) Event {
	return Event{
		Name: v.name, Kind: KindRaw, Type: unix.PERF_TYPE_RAW, Config: x86Raw(v.event, v.umask),
		Desc: v.desc, Role: v.role,
		Source: fmt.Sprintf("linux tools/perf/pmu-events/arch/x86/%s/%s (event 0x%02x, umask 0x%02x)", uarch, v.file, v.event, v.umask),
	}
}

// vendorEventElsewhere finds a vendor event of another microarchitecture,
// so that asking for it names the models that have it instead of calling
// it unknown.
func vendorEventElsewhere(name string) []string {
	var uarchs []string
	for uarch, evs := range vendorEvents {
		for _, v := range evs {
			if v.name == name {
				uarchs = append(uarchs, uarch)
			}
		}
	}
	for uarch, evs := range perfmonEvents {
		for _, e := range evs {
			if n := strings.ToLower(e.Name); n == name && intelRoles[n] != "" && !e.Deprecated && !slices.Contains(uarchs, uarch) {
				uarchs = append(uarchs, uarch)
			}
		}
	}
	slices.Sort(uarchs)
	return uarchs
}

// curatedDefaults are the hardware events recorded without -e, per vendor:
// the inputs of IPC, L1/L2/LLC misses per kilo-instruction and miss ratios,
// dTLB misses, remote memory and cache-to-cache transfers (the metrics of
// the rules in package attribution and of toplev's memory-bound tree), in
// few enough events that the PMU multiplexes little. The vendor events
// named by role are added from the model's table where it has them.
var curatedDefaults = map[string]struct {
	generic []string
	roles   []string // vendor events of these roles, in table order
	names   []string // and these by name (the remote-DRAM event)
}{
	// 10 events on the 8 general counters of Ice Lake and Sapphire
	// Rapids (instructions and cycles go to fixed counters); a 4-counter
	// Skylake-SP thread multiplexes them about 2.5 times.
	"GenuineIntel": {
		generic: []string{"instructions", "cycles", "L1-dcache-loads", "L1-dcache-load-misses", "l2-misses",
			"LLC-loads", "LLC-load-misses", "LLC-stores", "dTLB-load-misses", "node-loads", "node-load-misses"},
		names: []string{"mem_load_l3_hit_retired.xsnp_hitm", "mem_load_l3_hit_retired.xsnp_fwd"},
	},
	// Zen has no LLC or node mapping for the generic cache events (the
	// kernel's table for family 17h and later leaves them out); the
	// demand-fill sources say where misses were served instead. 10 events
	// on 6 counters.
	"AuthenticAMD": {
		generic: []string{"instructions", "cycles", "L1-dcache-loads", "L1-dcache-load-misses", "l2-references", "l2-misses", "dTLB-load-misses"},
		roles:   []string{roleCacheToCache, roleRemote},
	},
}
