package collector

import (
	"fmt"
	"slices"

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

// vendorEvents are the cache, coherence, NUMA and TLB events of each
// microarchitecture cacheheat knows, by the pmu-events directory name of
// l2Table. Each encoding is the EventCode and UMask of the named entry in
// linux tools/perf/pmu-events/arch/x86/<uarch>/<file> (Intel's perfmon
// JSON for Intel, AMD's Processor Programming Reference for AMD, which
// those files are generated from); docs/EVENTS.md lists them.
var vendorEvents = map[string][]vendorEvent{
	"skylakex": intelServer("skylakex", "mem_load_l3_hit_retired.xsnp_hitm", 0x08, "mem_load_l3_miss_retired.remote_hitm", 0x04),
	// Ice Lake-SP's cache.json lists xsnp_hitm, the name perf c2c and
	// most guides use, as a deprecated alias of xsnp_fwd (the same
	// encoding): one of the two is catalogued, so they are never counted
	// twice.
	"icelakex": intelServer("icelakex", "mem_load_l3_hit_retired.xsnp_hitm", 0x08, "mem_load_l3_miss_retired.remote_hitm", 0x04),
	// Sapphire Rapids renamed HITM to FWD (a snoop that forwarded the
	// line, modified or clean) and moved the dTLB walk event to 0x12.
	"sapphirerapids": intelServer("sapphirerapids", "mem_load_l3_hit_retired.xsnp_fwd", 0x12, "mem_load_l3_miss_retired.remote_fwd", 0x08),
	// Zen 2 and 3 list the fill sources in memory.json, Zen 4 in cache.json.
	"amdzen2": amdFills("memory.json", "ls_refills_from_sys.", "ls_mabresp_lcl_cache", 0x02, "ls_mabresp_rmt_cache", "ls_mabresp_lcl_dram", "ls_mabresp_rmt_dram"),
	"amdzen3": amdFills("memory.json", "ls_dmnd_fills_from_sys.", "ext_cache_local", 0x04, "ext_cache_remote", "mem_io_local", "mem_io_remote"),
	"amdzen4": amdFills("cache.json", "ls_dmnd_fills_from_sys.", "near_cache", 0x04, "far_cache", "dram_io_near", "dram_io_far"),
}

// intelServer lists the events Skylake-SP, Ice Lake-SP and Sapphire Rapids
// share, with the three that differ: the same-socket HITM/FWD event name,
// the dTLB walk event code and the remote cache event. The MEM_LOAD_*
// events are in each directory's cache.json (on Ice Lake-SP and later
// they count on general counters 0-3 only).
func intelServer(uarch, hitm string, dtlbEvent uint64, remoteCache string, remoteCacheUmask uint64) []vendorEvent {
	return []vendorEvent{
		{hitm, 0xd2, 0x04, roleCacheToCache, "cache.json", "retired loads that hit a line modified (or forwarded) in another core's cache on this socket (HITM)"},
		{"mem_load_l3_hit_retired.xsnp_miss", 0xd2, 0x01, roleAccess, "cache.json", "retired loads that hit L3 after a cross-core snoop missed"},
		{"mem_load_l3_miss_retired.local_dram", 0xd3, 0x01, roleMiss, "cache.json", "retired loads served by this socket's DRAM"},
		{"mem_load_l3_miss_retired.remote_dram", 0xd3, 0x02, roleRemote, "cache.json", "retired loads served by another socket's DRAM"},
		{remoteCache, 0xd3, remoteCacheUmask, roleCacheToCache, "cache.json", "retired loads served by a modified line in another socket's cache"},
		{"mem_load_retired.l2_miss", 0xd1, 0x10, roleMiss, "cache.json", "retired loads that missed L2"},
		{"mem_load_retired.l3_miss", 0xd1, 0x20, roleMiss, "cache.json", "retired loads that missed L3"},
		{"longest_lat_cache.miss", 0x2e, 0x41, roleMiss, "cache.json", "core requests that missed the last-level cache (architectural event)"},
		{"longest_lat_cache.reference", 0x2e, 0x4f, roleAccess, "cache.json", "core requests to the last-level cache (architectural event)"},
		{"dtlb_load_misses.walk_completed", dtlbEvent, 0x0e, roleMiss, "virtual-memory.json", "loads whose dTLB miss ended in a completed page walk"},
	}
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
// l2Table.
func uarchOf(cpu host.CPUInfo) string {
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
