package collector

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cacheheat/cacheheat/host"
)

// Event kinds, as shown in caps, the recording and the report.
const (
	KindHardware = "hardware" // PERF_TYPE_HARDWARE: needs a PMU
	KindCache    = "cache"    // PERF_TYPE_HW_CACHE: needs a PMU
	KindSoftware = "software" // PERF_TYPE_SOFTWARE: always there
	KindRaw      = "raw"      // PERF_TYPE_RAW: a vendor encoding, needs a PMU
)

// ErrUnknownEvent is returned (wrapped) by LookupEvent for a name that is
// neither in the catalogue nor a raw rNNNN event.
var ErrUnknownEvent = errors.New("unknown event")

// Event is one perf event cacheheat knows how to open. The pipeline treats
// every event the same way; only Type and Config differ.
type Event struct {
	Name   string `json:"name"`   // perf's name, e.g. "LLC-load-misses"
	Kind   string `json:"kind"`   // KindHardware, KindCache, KindSoftware, KindRaw
	Type   uint32 `json:"type"`   // unix.PERF_TYPE_*
	Config uint64 `json:"config"` // attr.config
	Desc   string `json:"desc"`
	Source string `json:"source,omitempty"` // where a raw encoding comes from (for l2-* and raw vendor events)
	// Missing is non-empty when the event is in the catalogue but has no
	// encoding on this CPU (l2-misses on an unknown model); it says why, and
	// such an event is never opened.
	Missing string `json:"missing,omitempty"`
	// Role says what the event measures (role* in vendor.go): the
	// simulated PMU picks its stand-in by it.
	Role string `json:"role,omitempty"`
	// Counters are the general counters a raw event may count on (bit
	// n: counter n), from the vendor's table; 0: any.
	Counters uint64 `json:"counters,omitempty"`
	// CountersHTOff are those it may count on with Hyper-Threading off,
	// where the table says (Haswell to Cascade Lake); 0: as Counters.
	CountersHTOff uint64 `json:"counters_ht_off,omitempty"`
	// StandIn is the software event opened in this event's place on a
	// simulated PMU (simulated.go); nil on a real one.
	StandIn *Event `json:"stand_in,omitempty"`
}

// Attr is the counting perf_event_attr for the event: the same attr for
// every kind, so hardware and software events take one code path.
func (e Event) Attr() unix.PerfEventAttr {
	if e.StandIn != nil {
		return e.StandIn.Attr()
	}
	return unix.PerfEventAttr{
		Type:        e.Type,
		Config:      e.Config,
		Size:        uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Bits:        unix.PerfBitDisabled,
		Read_format: unix.PERF_FORMAT_TOTAL_TIME_ENABLED | unix.PERF_FORMAT_TOTAL_TIME_RUNNING,
	}
}

// IsHardware says whether the event needs a hardware PMU.
func (e Event) IsHardware() bool { return e.Kind != KindSoftware }

// hwCache builds a PERF_TYPE_HW_CACHE config: id | op<<8 | result<<16
// (perf_event_open(2)).
func hwCache(id, op, result uint64) uint64 { return id | op<<8 | result<<16 }

// catalogue is the generic event list, perf's names. The l2-* entries are
// placeholders resolved per CPU model by resolveL2.
var catalogue = []Event{
	{Name: "cpu-clock", Kind: KindSoftware, Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK, Desc: "CPU time (ns) from the kernel's high-resolution timer"},
	{Name: "page-faults", Kind: KindSoftware, Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_PAGE_FAULTS, Desc: "page faults, minor and major"},
	{Name: "major-faults", Kind: KindSoftware, Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_PAGE_FAULTS_MAJ, Desc: "page faults that needed I/O"},
	{Name: "context-switches", Kind: KindSoftware, Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CONTEXT_SWITCHES, Desc: "context switches"},
	{Name: "cpu-migrations", Kind: KindSoftware, Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_MIGRATIONS, Desc: "moves of a task to another CPU (its cache stays behind)"},
	{Name: "cycles", Kind: KindHardware, Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_CPU_CYCLES, Desc: "core clock cycles", Role: roleCycles},
	{Name: "instructions", Kind: KindHardware, Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_INSTRUCTIONS, Desc: "instructions retired", Role: roleInstructions},
	{Name: "cache-references", Kind: KindHardware, Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_CACHE_REFERENCES, Desc: "cache references, as the kernel maps them: the last-level cache on Intel; L2 requests (0xff60) on AMD family 17h and later", Role: roleAccess},
	{Name: "cache-misses", Kind: KindHardware, Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_CACHE_MISSES, Desc: "cache misses, as the kernel maps them: the last-level cache on Intel; L2 misses (0x0964, l2_cache_req_stat.ic_dc_miss_in_l2) on AMD family 17h and later", Role: roleMiss},
	{Name: "L1-dcache-loads", Kind: KindCache, Type: unix.PERF_TYPE_HW_CACHE, Config: hwCache(unix.PERF_COUNT_HW_CACHE_L1D, unix.PERF_COUNT_HW_CACHE_OP_READ, unix.PERF_COUNT_HW_CACHE_RESULT_ACCESS), Desc: "L1 data cache loads", Role: roleAccess},
	{Name: "L1-dcache-load-misses", Kind: KindCache, Type: unix.PERF_TYPE_HW_CACHE, Config: hwCache(unix.PERF_COUNT_HW_CACHE_L1D, unix.PERF_COUNT_HW_CACHE_OP_READ, unix.PERF_COUNT_HW_CACHE_RESULT_MISS), Desc: "L1 data cache load misses", Role: roleMiss},
	{Name: "LLC-loads", Kind: KindCache, Type: unix.PERF_TYPE_HW_CACHE, Config: hwCache(unix.PERF_COUNT_HW_CACHE_LL, unix.PERF_COUNT_HW_CACHE_OP_READ, unix.PERF_COUNT_HW_CACHE_RESULT_ACCESS), Desc: "last-level cache loads", Role: roleAccess},
	{Name: "LLC-load-misses", Kind: KindCache, Type: unix.PERF_TYPE_HW_CACHE, Config: hwCache(unix.PERF_COUNT_HW_CACHE_LL, unix.PERF_COUNT_HW_CACHE_OP_READ, unix.PERF_COUNT_HW_CACHE_RESULT_MISS), Desc: "last-level cache load misses", Role: roleMiss},
	{Name: "LLC-stores", Kind: KindCache, Type: unix.PERF_TYPE_HW_CACHE, Config: hwCache(unix.PERF_COUNT_HW_CACHE_LL, unix.PERF_COUNT_HW_CACHE_OP_WRITE, unix.PERF_COUNT_HW_CACHE_RESULT_ACCESS), Desc: "last-level cache stores", Role: roleAccess},
	{Name: "LLC-store-misses", Kind: KindCache, Type: unix.PERF_TYPE_HW_CACHE, Config: hwCache(unix.PERF_COUNT_HW_CACHE_LL, unix.PERF_COUNT_HW_CACHE_OP_WRITE, unix.PERF_COUNT_HW_CACHE_RESULT_MISS), Desc: "last-level cache store misses", Role: roleMiss},
	{Name: "dTLB-load-misses", Kind: KindCache, Type: unix.PERF_TYPE_HW_CACHE, Config: hwCache(unix.PERF_COUNT_HW_CACHE_DTLB, unix.PERF_COUNT_HW_CACHE_OP_READ, unix.PERF_COUNT_HW_CACHE_RESULT_MISS), Desc: "data TLB load misses", Role: roleMiss},
	{Name: "node-loads", Kind: KindCache, Type: unix.PERF_TYPE_HW_CACHE, Config: hwCache(unix.PERF_COUNT_HW_CACHE_NODE, unix.PERF_COUNT_HW_CACHE_OP_READ, unix.PERF_COUNT_HW_CACHE_RESULT_ACCESS), Desc: "loads served by a NUMA node's memory", Role: roleAccess},
	{Name: "node-load-misses", Kind: KindCache, Type: unix.PERF_TYPE_HW_CACHE, Config: hwCache(unix.PERF_COUNT_HW_CACHE_NODE, unix.PERF_COUNT_HW_CACHE_OP_READ, unix.PERF_COUNT_HW_CACHE_RESULT_MISS), Desc: "loads served by a remote NUMA node's memory", Role: roleRemote},
	{Name: "branch-misses", Kind: KindHardware, Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_BRANCH_MISSES, Desc: "mispredicted branches", Role: roleOther},
	{Name: "l2-misses", Kind: KindRaw, Type: unix.PERF_TYPE_RAW, Desc: "L2 cache misses (vendor raw event)", Role: roleMiss},
	{Name: "l2-references", Kind: KindRaw, Type: unix.PERF_TYPE_RAW, Desc: "L2 cache references (vendor raw event)", Role: roleAccess},
}

// defaultSoftware are the software events recorded by default beside every
// hardware and cache event.
var defaultSoftware = []string{"cpu-clock", "page-faults", "major-faults", "context-switches", "cpu-migrations"}

// Catalogue returns the generic event list, in its order, with l2-misses
// and l2-references resolved to cpu's raw events. On a CPU without a known
// encoding they are still listed, with Missing saying why. On a simulated
// CPU the hardware events carry their stand-ins.
func Catalogue(cpu host.CPUInfo) []Event {
	out := make([]Event, len(catalogue))
	copy(out, catalogue)
	for i := range out {
		if out[i].Kind == KindRaw {
			out[i] = resolveL2(out[i], cpu)
		}
	}
	return simulate(out, cpu)
}

// ModelCatalogue is Catalogue followed by the vendor events of cpu's
// microarchitecture (vendor.go): every event cacheheat can name on it.
func ModelCatalogue(cpu host.CPUInfo) []Event {
	return append(Catalogue(cpu), simulate(VendorEvents(cpu), cpu)...)
}

// DefaultEvents returns what record measures without -e: the vendor's
// curated hardware events (vendor.go), or every hardware and cache event
// of the catalogue for a vendor without a curated list, then the software
// events that work everywhere. Hardware events are probed; what the host
// cannot count is recorded as unsupported with the reason.
func DefaultEvents(cpu host.CPUInfo) []Event {
	var out []Event
	cat := ModelCatalogue(cpu)
	find := func(name string) (Event, bool) {
		for _, e := range cat {
			if e.Name == name {
				return e, true
			}
		}
		return Event{}, false
	}
	if cur, ok := curatedDefaults[cpu.Vendor]; ok {
		for _, name := range cur.generic {
			if e, ok := find(name); ok {
				out = append(out, e)
			}
		}
		for _, e := range cat {
			if e.Kind == KindRaw && (slices.Contains(cur.names, e.Name) || slices.Contains(cur.roles, e.Role)) && !strings.HasPrefix(e.Name, "l2-") {
				out = append(out, e)
			}
		}
	} else {
		for _, e := range Catalogue(cpu) {
			if e.IsHardware() {
				out = append(out, e)
			}
		}
	}
	for _, name := range defaultSoftware {
		e, _ := find(name)
		out = append(out, e)
	}
	return out
}

func lookupCatalogue(name string, cpu host.CPUInfo) (Event, bool) {
	for _, e := range ModelCatalogue(cpu) {
		if e.Name == name {
			return e, true
		}
	}
	return Event{}, false
}

// LookupEvent finds an event by its perf name (the generic catalogue and
// the vendor events of cpu's model), or parses a raw event "rNNNN"
// (hexadecimal config, as perf writes it). A vendor event of another
// model is returned with Missing saying which models have it, so that it
// is recorded as unsupported with the reason rather than refused.
func LookupEvent(name string, cpu host.CPUInfo) (Event, error) {
	if e, ok := lookupCatalogue(name, cpu); ok {
		return e, nil
	}
	if e, ok := deprecatedAlias(name, cpu); ok {
		return simulate([]Event{e}, cpu)[0], nil
	}
	if uarchs := vendorEventElsewhere(name); len(uarchs) > 0 {
		return Event{
			Name: name, Kind: KindRaw, Type: unix.PERF_TYPE_RAW,
			Missing: fmt.Sprintf("%s is an event of %s, not of this CPU (%s family %d model %d)", name, strings.Join(uarchs, ", "), orUnknown(cpu.Vendor), cpu.Family, cpu.Model),
		}, nil
	}
	if hex, ok := strings.CutPrefix(name, "r"); ok && hex != "" {
		config, err := strconv.ParseUint(hex, 16, 64)
		if err == nil {
			e := Event{
				Name:   name,
				Kind:   KindRaw,
				Type:   unix.PERF_TYPE_RAW,
				Config: config,
				Desc:   fmt.Sprintf("raw PMU event config 0x%x", config),
				Source: "given on the command line",
				Role:   roleOther,
			}
			return simulate([]Event{e}, cpu)[0], nil
		}
	}
	names := make([]string, 0, len(catalogue)+1)
	for _, e := range catalogue {
		names = append(names, e.Name)
	}
	names = append(names, "rNNNN (raw, hex)", "the vendor events of docs/EVENTS.md")
	return Event{}, fmt.Errorf("%w %q; valid events: %s", ErrUnknownEvent, name, strings.Join(names, ", "))
}

// EventNames returns the catalogue's names in order.
func EventNames() []string {
	names := make([]string, len(catalogue))
	for i, e := range catalogue {
		names[i] = e.Name
	}
	return names
}

// modelRange is an inclusive range of CPU model numbers.
type modelRange struct{ lo, hi int }

// l2Encoding is one row of the l2-* table: for a vendor and family and any
// of the model ranges, the raw configs of l2-misses and l2-references and
// the kernel's JSON event names they come from.
type l2Encoding struct {
	vendor string
	family int
	models []modelRange
	uarch  string // the pmu-events directory name

	missConfig, refConfig uint64
	missName, refName     string
	source                string
}

// x86Raw packs an x86 event select and unit mask the way the kernel's
// "cpu" PMU reads attr.config: event bits 7:0 in config bits 0-7, the
// unit mask in bits 8-15, and (AMD's extended event codes, such as
// 0x1c0) event bits 11:8 in config bits 32-35, as the AMD driver's
// format says (arch/x86/events/amd/core.c: PMU_FORMAT_ATTR(event,
// "config:0-7,32-35")). Intel's event codes fit in 8 bits.
func x86Raw(event, umask uint64) uint64 {
	return event&0xff | umask<<8 | (event>>8&0xf)<<32
}

// l2Table maps AMD CPU models to raw L2 events. Model numbers and
// directory names come from tools/perf/pmu-events/arch/x86/mapfile.csv in
// the Linux kernel; each encoding from that directory's cache.json
// (docs/EVENTS.md lists them): l2_cache_req_stat.ic_dc_miss_in_l2 and all
// of l2_cache_req_stat (umask 0xff): core-to-L2 requests, not counting L2
// prefetches. Intel's come from perfmon's tables (intelL2).
var l2Table = []l2Encoding{
	amdL2("amdzen1", amdRefSum, 0x17, modelRange{0x00, 0x2f}),
	amdL2("amdzen2", amdRefSum, 0x17, modelRange{0x30, 0xff}),
	// mapfile.csv: AuthenticAMD-25-([245][[:xdigit:]]|[[:xdigit:]]) is
	// Zen 3, the rest of family 25 Zen 4.
	amdL2("amdzen3", amdRefSum, 0x19, modelRange{0x00, 0x0f}, modelRange{0x20, 0x2f}, modelRange{0x40, 0x5f}),
	amdL2("amdzen4", "l2_cache_req_stat.all", 0x19, modelRange{0x10, 0x1f}, modelRange{0x30, 0x3f}, modelRange{0x60, 0xff}),
	// Newer mapfiles narrow family 26 to ([12467][[:xdigit:]]|[[:xdigit:]])
	// for Zen 5; other family 26 models are left unknown rather than
	// guessed.
	// Zen 5's L2 events are in l2-cache.json (added by "perf vendor
	// events amd: Add Zen 5 core events", v2, 2024-05-03).
	amdL2("amdzen5", "l2_cache_req_stat.all", 0x1a, modelRange{0x00, 0x2f}, modelRange{0x40, 0x4f}, modelRange{0x60, 0x7f}),
}

// amdRefSum names l2-references on Zen 1 to 3, whose cache.json has no
// ".all" entry: umask 0xff is the union of the miss (0x09) and hit (0xf6)
// unit masks it does list; Zen 4 named that union l2_cache_req_stat.all.
const amdRefSum = "l2_cache_req_stat.ic_dc_miss_in_l2 (0x09) + l2_cache_req_stat.ic_dc_hit_in_l2 (0xf6)"

// intelL2Events are the perfmon events behind l2-misses and
// l2-references, best first: all L2 requests (demand, prefetch) where the
// model has the totals, demand requests where it has only those (Ice
// Lake-SP lists no L2_RQSTS.MISS and no L2_RQSTS.REFERENCES, nor
// demand references).
var intelL2Events = map[string][]string{
	"l2-misses":     {"L2_RQSTS.MISS", "L2_RQSTS.ALL_DEMAND_MISS"},
	"l2-references": {"L2_RQSTS.REFERENCES", "L2_RQSTS.ALL_DEMAND_REFERENCES"},
}

// intelL2 fills in an l2-* placeholder for an Intel model from its
// perfmon table.
func intelL2(e Event, m perfmonModel) Event {
	for _, name := range intelL2Events[e.Name] {
		pe, ok := perfmonEventOf(m.uarch, name)
		if !ok {
			continue
		}
		e.Config, e.Counters, e.CountersHTOff = x86Raw(pe.Event, pe.Umask), pe.Counters, pe.CountersHTOff
		e.Source = perfmonSource(m, pe)
		e.Desc = fmt.Sprintf("%s: %s", e.Desc, name)
		return e
	}
	e.Missing = fmt.Sprintf("perfmon's %s table has none of %s", m.uarch, strings.Join(intelL2Events[e.Name], ", "))
	return e
}

// amdL2File is the pmu-events file of uarch's l2_cache_req_stat events.
func amdL2File(uarch string) string {
	if uarch == "amdzen5" {
		return "l2-cache.json"
	}
	return "cache.json"
}

func amdL2(uarch, refName string, family int, models ...modelRange) l2Encoding {
	return l2Encoding{
		vendor: "AuthenticAMD", family: family, models: models, uarch: uarch,
		missConfig: x86Raw(0x64, 0x09), missName: "l2_cache_req_stat.ic_dc_miss_in_l2",
		refConfig: x86Raw(0x64, 0xff), refName: refName,
		source: "linux tools/perf/pmu-events/arch/x86/" + uarch + "/" + amdL2File(uarch),
	}
}

func (r l2Encoding) matches(cpu host.CPUInfo) bool {
	if r.vendor != cpu.Vendor || r.family != cpu.Family {
		return false
	}
	for _, m := range r.models {
		if cpu.Model >= m.lo && cpu.Model <= m.hi {
			return true
		}
	}
	return false
}

// resolveL2 fills in the raw encoding of an l2-* placeholder for cpu.
func resolveL2(e Event, cpu host.CPUInfo) Event {
	if m, ok := perfmonModelOf(cpu); ok {
		return intelL2(e, m)
	}
	for _, r := range l2Table {
		if !r.matches(cpu) {
			continue
		}
		name := r.missName
		e.Config = r.missConfig
		if e.Name == "l2-references" {
			name, e.Config = r.refName, r.refConfig
		}
		e.Source = fmt.Sprintf("%s: %s (event 0x%02x, umask 0x%02x)", r.source, name, e.Config&0xff, e.Config>>8&0xff)
		e.Desc = fmt.Sprintf("%s: %s", e.Desc, name)
		return e
	}
	e.Missing = fmt.Sprintf("no raw encoding known for %s family %d model %d", orUnknown(cpu.Vendor), cpu.Family, cpu.Model)
	if cpu.Vendor == "GenuineIntel" {
		// A model perfmon's mapfile does not list: the architectural
		// events still count (the kernel maps cache-references and
		// cache-misses to the architectural last-level cache pair).
		e.Missing += fmt.Sprintf(" (CPUID %s is not in perfmon's mapfile at %s; the architectural events cycles, instructions, cache-references and cache-misses still count)", cpuidString(cpu), perfmonCommit)
	}
	return e
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown vendor"
	}
	return s
}
