package collector

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/profile"
)

// EnvSimulatedPMU names a PMU fixture (simulatedPMUs) that cacheheat then
// believes it runs on. It exists so that the hardware path (event
// selection, counter slots, multiplexing, scaling, attribution of hardware
// rules, the report) runs on hosts without a PMU, the machines the project
// is built and tested on. Every count it produces is a software event
// standing in for a hardware one, and everything says so.
const EnvSimulatedPMU = "CACHEHEAT_SIMULATED_PMU"

// SimulatedWarning is the one sentence every output of a simulated
// recording carries.
const SimulatedWarning = profile.SimulatedWarning

// ErrUnknownPMU is returned (wrapped) for a CACHEHEAT_SIMULATED_PMU value
// that names no fixture.
var ErrUnknownPMU = errors.New("unknown simulated PMU")

// pmuFixture is a CPU model's PMU as the simulation presents it: the CPU
// identity the catalogue resolves vendor events for (the generic events
// its kernel driver maps follow from it: KernelMapsGeneric), and its
// counters.
type pmuFixture struct {
	name string
	cpu  host.CPUInfo
	// counters is the number of general-purpose counters per logical CPU
	// (CPUID leaf 0xA on Intel, 6 core counters on Zen).
	counters int
	// htOff: Hyper-Threading is off, so a Skylake-SP thread has its
	// core's 8 counters, and each event may use the counters of its
	// table's CounterHTOff list (Event.CountersHTOff).
	htOff bool
	// fixed are the events counted on fixed counters, never multiplexed.
	fixed []string
}

// Generic events per vendor, as the kernel's drivers map them. Intel's
// cache tables (arch/x86/events/intel/core.c: snb_, hsw_, skl_...
// hw_cache_event_ids) map every one of the catalogue's: LL and NODE
// through OFFCORE_RESPONSE (0x1b7) with extra registers, on client and
// server parts alike. AMD's family 17h+ table (arch/x86/events/amd/core.c)
// has no LLC or NODE entries, so LLC-* and node-* are ENOENT on Zen.
var amdGeneric = []string{"cycles", "instructions", "cache-references", "cache-misses",
	"L1-dcache-loads", "L1-dcache-load-misses", "dTLB-load-misses", "branch-misses", "l2-misses", "l2-references"}

// KernelMapsGeneric says whether the kernel's driver maps a generic
// hardware or cache event (or an l2-* placeholder's model) on cpu: what a
// PMU of that model answers ENOENT to. Other vendors and older AMD
// families: assumed mapped, and probed.
func KernelMapsGeneric(cpu host.CPUInfo, name string) bool {
	if cpu.Vendor == "AuthenticAMD" && cpu.Family >= 0x17 {
		return slices.Contains(amdGeneric, name)
	}
	return true
}

// simulatedPMUs are the fixtures, one per microarchitecture of the vendor
// event table. CPU identities are those of a shipping part of each.
var simulatedPMUs = []pmuFixture{
	{name: "intel-skx", cpu: host.CPUInfo{Vendor: "GenuineIntel", ModelName: "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz", Family: 6, Model: 0x55, Stepping: 4},
		counters: 4, fixed: []string{"instructions", "cycles"}},
	{name: "intel-skx-htoff", cpu: host.CPUInfo{Vendor: "GenuineIntel", ModelName: "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz", Family: 6, Model: 0x55, Stepping: 4},
		counters: 8, htOff: true, fixed: []string{"instructions", "cycles"}},
	{name: "intel-icx", cpu: host.CPUInfo{Vendor: "GenuineIntel", ModelName: "Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz", Family: 6, Model: 0x6a, Stepping: 6},
		counters: 8, fixed: []string{"instructions", "cycles"}},
	{name: "intel-spr", cpu: host.CPUInfo{Vendor: "GenuineIntel", ModelName: "Intel(R) Xeon(R) Platinum 8480+", Family: 6, Model: 0x8f, Stepping: 8},
		counters: 8, fixed: []string{"instructions", "cycles"}},
	{name: "amd-zen2", cpu: host.CPUInfo{Vendor: "AuthenticAMD", ModelName: "AMD EPYC 7742 64-Core Processor", Family: 0x17, Model: 0x31, Stepping: 0},
		counters: 6},
	{name: "amd-zen3", cpu: host.CPUInfo{Vendor: "AuthenticAMD", ModelName: "AMD EPYC 7763 64-Core Processor", Family: 0x19, Model: 0x01, Stepping: 1},
		counters: 6},
	{name: "amd-zen4", cpu: host.CPUInfo{Vendor: "AuthenticAMD", ModelName: "AMD EPYC 9654 96-Core Processor", Family: 0x19, Model: 0x11, Stepping: 1},
		counters: 6},
}

// SimulatedPMUNames lists the fixtures.
func SimulatedPMUNames() []string {
	var out []string
	for _, f := range simulatedPMUs {
		out = append(out, f.name)
	}
	return out
}

func findFixture(name string) (pmuFixture, bool) {
	for _, f := range simulatedPMUs {
		if f.name == name {
			return f, true
		}
	}
	return pmuFixture{}, false
}

// simulatedFixture returns the fixture the environment asks for, if any.
func simulatedFixture() (*pmuFixture, error) {
	name := os.Getenv(EnvSimulatedPMU)
	if name == "" {
		return nil, nil
	}
	f, ok := findFixture(name)
	if !ok {
		return nil, fmt.Errorf("%w %s=%q; known: %s", ErrUnknownPMU, EnvSimulatedPMU, name, strings.Join(SimulatedPMUNames(), ", "))
	}
	return &f, nil
}

// LiveCPU is the running host's CPU, or the simulated PMU's CPU when
// CACHEHEAT_SIMULATED_PMU is set (CPUInfo.Simulated then names it). The
// topology is always the real one.
func LiveCPU() (host.CPUInfo, error) {
	f, err := simulatedFixture()
	if err != nil {
		return host.CPUInfo{}, err
	}
	if f == nil {
		return host.ReadCPUInfo("/")
	}
	cpu := f.cpu
	cpu.Simulated = f.name
	return cpu, nil
}

// SimulatedPMU returns the header's PMU description of a recording made
// with cpu: nil on a real PMU.
func SimulatedPMU(cpu host.CPUInfo) *profile.PMU {
	f, ok := findFixture(cpu.Simulated)
	if !ok {
		return nil
	}
	return &profile.PMU{Simulated: f.name, Counters: f.counters, Fixed: f.fixed, MuxIntervalNS: int64(muxInterval)}
}

// standIns is the substitution table: the software counter opened for a
// hardware event of each role (docs/EVENTS.md explains the choice). They
// are real kernel counts of something else; nothing is made up, and every
// event opened this way is marked simulated.
var standIns = map[string]string{
	roleCycles:       "cpu-clock",
	roleInstructions: "task-clock",
	roleAccess:       "minor-faults",
	roleMiss:         "page-faults",
	roleCacheToCache: "context-switches",
	roleRemote:       "cpu-migrations",
	roleOther:        "major-faults",
}

// standInEvents are the software events the table names that the
// catalogue does not list (perf knows them by these names).
var standInEvents = []Event{
	{Name: "task-clock", Kind: KindSoftware, Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_TASK_CLOCK, Desc: "task clock (ns); CPU-wide it counts like cpu-clock"},
	{Name: "minor-faults", Kind: KindSoftware, Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_PAGE_FAULTS_MIN, Desc: "page faults served without I/O"},
}

func standInFor(role string) Event {
	name := standIns[role]
	if name == "" {
		name = standIns[roleOther]
	}
	for _, e := range standInEvents {
		if e.Name == name {
			return e
		}
	}
	e, _ := lookupCatalogue(name, host.CPUInfo{})
	return e
}

// simulate turns the catalogue of a simulated CPU into stand-ins: each
// hardware event the fixture has opens its role's software counter, the
// others are unsupported, as the real model's kernel would say.
func simulate(evs []Event, cpu host.CPUInfo) []Event {
	f, ok := findFixture(cpu.Simulated)
	if !ok {
		return evs
	}
	for i, e := range evs {
		if !e.IsHardware() || e.Missing != "" {
			continue
		}
		if e.Kind != KindRaw || strings.HasPrefix(e.Name, "l2-") {
			if !KernelMapsGeneric(cpu, e.Name) {
				evs[i].Missing = fmt.Sprintf("%s (simulated %s: the kernel maps no such generic event on this model)", ReasonNoSuchEvent, f.name)
				continue
			}
		}
		si := standInFor(e.Role)
		evs[i].StandIn = &si
	}
	return evs
}

// muxInterval is how often the simulated PMU rotates its stand-ins when
// more events are asked for than it has counters. The kernel rotates a
// hardware PMU every 4 ms by default (perf_event_mux_interval_ms); the
// simulation rotates from user space, so at a quarter of that rate to
// keep its ioctls cheap.
const muxInterval = 16 * time.Millisecond

// muxPlan decides, for the counted events of a simulated PMU, which slots
// rotate over its general counters (each with the counters it may use,
// from the vendor's table) and which slot's enabled time stands for
// theirs. rotated is empty when every event gets a counter at once, its
// constraints honoured: 8 counters cannot hold five events that count on
// counters 0-3 only.
func muxPlan(counted []Event, cpu host.CPUInfo) (rotated []int, masks []uint64, counters, ref int) {
	ref = -1
	f, ok := findFixture(cpu.Simulated)
	if !ok {
		return nil, nil, 0, -1
	}
	var fixedOrSoftware []int
	for i, e := range counted {
		if e.StandIn != nil && !slices.Contains(f.fixed, e.Name) {
			rotated = append(rotated, i)
			masks = append(masks, f.countersOf(e))
		} else {
			fixedOrSoftware = append(fixedOrSoftware, i)
		}
	}
	if _, ok := assignCounters(masks, f.counters); ok {
		return nil, nil, f.counters, -1
	}
	if len(fixedOrSoftware) > 0 {
		ref = fixedOrSoftware[0]
	}
	return rotated, masks, f.counters, ref
}

// assignCounters gives each event a general counter its mask allows (0:
// any of them), each counter to one event, as the kernel's event
// scheduler must (perf_assign_events); ok is false when no assignment
// exists. A bipartite matching by augmenting paths: the sets are a
// handful of events.
func assignCounters(masks []uint64, counters int) (assigned []int, ok bool) {
	owner := make([]int, counters) // counter -> event, -1 free
	for c := range owner {
		owner[c] = -1
	}
	allows := func(ev, c int) bool { return masks[ev] == 0 || masks[ev]&(1<<c) != 0 }
	var try func(ev int, seen []bool) bool
	try = func(ev int, seen []bool) bool {
		for c := range counters {
			if !allows(ev, c) || seen[c] {
				continue
			}
			seen[c] = true
			if owner[c] < 0 || try(owner[c], seen) {
				owner[c] = ev
				return true
			}
		}
		return false
	}
	for ev := range masks {
		if !try(ev, make([]bool, counters)) {
			return nil, false
		}
	}
	assigned = make([]int, len(masks))
	for c, ev := range owner {
		if ev >= 0 {
			assigned[ev] = c
		}
	}
	return assigned, true
}

// countersOf are the counters e may use on f's PMU.
func (f pmuFixture) countersOf(e Event) uint64 {
	if f.htOff && e.CountersHTOff != 0 {
		return e.CountersHTOff
	}
	return e.Counters
}

// muxText says how a simulated PMU schedules events: all at once, or how
// many rotate over how many counters and which are constrained.
func muxText(evs []Event, cpu host.CPUInfo) string {
	var counted []Event
	for _, e := range evs {
		if e.Missing == "" {
			counted = append(counted, e)
		}
	}
	rotated, masks, counters, _ := muxPlan(counted, cpu)
	if len(rotated) == 0 {
		return fmt.Sprintf("the default events fit the %d general counters at once, their counter masks honoured", counters)
	}
	return fmt.Sprintf("%d default events rotate over %d counters%s: their counts are scaled by enabled/running time", len(rotated), counters, constrainedText(masks, counters))
}

// constrainedText says how many rotated events may use only some of the
// counters, for the rotation's warning ("" when none is constrained).
func constrainedText(masks []uint64, counters int) string {
	all := uint64(1)<<counters - 1
	by := map[uint64]int{}
	var keys []uint64
	for _, m := range masks {
		if m == 0 || m&all == all {
			continue
		}
		if by[m&all] == 0 {
			keys = append(keys, m&all)
		}
		by[m&all]++
	}
	var parts []string
	for _, m := range keys {
		var cs []string
		for c := range counters {
			if m&(1<<c) != 0 {
				cs = append(cs, strconv.Itoa(c))
			}
		}
		parts = append(parts, fmt.Sprintf("%d on counters %s only", by[m], strings.Join(cs, ",")))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}
