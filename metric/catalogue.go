package metric

import "strings"

// Event names the formulas read: perf's names, as in flags, recordings
// and reports (collector/events.go opens them).
const (
	CPUClock        = "cpu-clock"
	PageFaults      = "page-faults"
	MajorFaults     = "major-faults"
	ContextSwitches = "context-switches"
	CPUMigrations   = "cpu-migrations"
	Cycles          = "cycles"
	Instructions    = "instructions"
	CacheReferences = "cache-references"
	CacheMisses     = "cache-misses"
	L1DLoads        = "L1-dcache-loads"
	L1DLoadMisses   = "L1-dcache-load-misses"
	LLCLoads        = "LLC-loads"
	LLCLoadMisses   = "LLC-load-misses"
	LLCStores       = "LLC-stores"
	LLCStoreMisses  = "LLC-store-misses"
	DTLBLoadMisses  = "dTLB-load-misses"
	NodeLoads       = "node-loads"
	NodeLoadMisses  = "node-load-misses"
	BranchMisses    = "branch-misses"
	L2Misses        = "l2-misses"
	L2References    = "l2-references"
)

// SoftwareEvents are the kernel's software events: every host counts
// them, with or without a PMU.
var SoftwareEvents = []string{CPUClock, PageFaults, MajorFaults, ContextSwitches, CPUMigrations}

// HITMEvents are the vendor events that count loads served by another
// core's modified line (a cache-to-cache transfer), by perf's names from
// the kernel's pmu-events tables: Intel Skylake..Ice Lake call it
// xsnp_hitm, Sapphire Rapids and later xsnp_fwd; AMD counts demand fills
// from another CCX's cache on this node and on another (Zen 4 near_cache
// and far_cache, Zen 3 ext_cache_local and ext_cache_remote; Zen 2 only
// the remote one is a pure cache-to-cache count). The collector's vendor
// table has the encodings.
var HITMEvents = []string{
	"mem_load_l3_hit_retired.xsnp_hitm",
	"mem_load_l3_hit_retired.xsnp_fwd",
	"ls_dmnd_fills_from_sys.near_cache",
	"ls_dmnd_fills_from_sys.far_cache",
	"ls_dmnd_fills_from_sys.ext_cache_local",
	"ls_dmnd_fills_from_sys.ext_cache_remote",
	"ls_refills_from_sys.ls_mabresp_rmt_cache",
}

// ID is a metric's one name: the Go constant's value is what the rules'
// evidence, the report's heatmap selector, the diff's series and the
// JSON outputs all call it.
type ID string

// The derived metrics.
const (
	CacheMissRatio    ID = "cache-miss-ratio"
	L1DLoadMissRatio  ID = "L1-dcache-load-miss-ratio"
	L2MissRatio       ID = "l2-miss-ratio"
	LLCLoadMissRatio  ID = "LLC-load-miss-ratio"
	LLCStoreMissRatio ID = "LLC-store-miss-ratio"
	NodeLoadMissRatio ID = "node-load-miss-ratio"
	IPC               ID = "IPC"
	CacheMPKI         ID = "cache-MPKI"
	L1DLoadMPKI       ID = "L1-dcache-load-MPKI"
	L2MPKI            ID = "l2-MPKI"
	LLCLoadMPKI       ID = "LLC-load-MPKI"
	LLCStoreMPKI      ID = "LLC-store-MPKI"
	DTLBLoadMPKI      ID = "dTLB-load-MPKI"
	NodeLoadMPKI      ID = "node-load-MPKI"
	BranchMPKI        ID = "branch-MPKI"
	// HITMPKI sums a model's HITM events (HITMEvents), so it is no
	// ratio of two events and only the false-sharing rule computes it.
	HITMPKI ID = "HITM-PKI"
)

// Units of metric values.
const (
	UnitRatio        = "ratio" // a fraction in [0, 1], printed as a percentage
	UnitNS           = "ns"
	UnitTimes        = "x" // a multiple of a baseline
	UnitPerSecond    = "/s"
	UnitPerThread    = "/s per thread"
	UnitPerKiloInstr = "per 1000 instructions"
	UnitPerCycle     = "per cycle"
	UnitSamples      = "samples"
	UnitEvents       = "events"
)

// Def is one derived metric. A metric with Num and Den is Scale * Num /
// Den over any span (a window, a CPU, a heatmap cell, a whole recording),
// computed wherever both events were measured.
type Def struct {
	ID       ID
	Num, Den string
	Scale    float64
	Unit     string
	// HigherIsBetter is true for a metric that gets worse when it falls
	// (IPC); a miss metric gets worse when it rises.
	HigherIsBetter bool
	// Formula says how it is computed, in words where it is no ratio.
	Formula string
	// Source says where the definition comes from.
	Source string
}

const (
	srcPerf   = "misses over accesses of the same cache, as perf stat's \"of all ... accesses\" beside its generic events"
	srcLikwid = "likwid performance groups (miss rate = misses / instructions)"
)

func ratio(id ID, num, den string) Def {
	return Def{ID: id, Num: num, Den: den, Scale: 1, Unit: UnitRatio, Source: srcPerf}
}

func mpki(id ID, misses string) Def {
	return Def{ID: id, Num: misses, Den: Instructions, Scale: 1000, Unit: UnitPerKiloInstr, Source: srcLikwid}
}

// catalogue is every derived metric, in the order reports list them.
var catalogue = []Def{
	ratio(CacheMissRatio, CacheMisses, CacheReferences),
	ratio(L1DLoadMissRatio, L1DLoadMisses, L1DLoads),
	ratio(L2MissRatio, L2Misses, L2References),
	ratio(LLCLoadMissRatio, LLCLoadMisses, LLCLoads),
	ratio(LLCStoreMissRatio, LLCStoreMisses, LLCStores),
	ratio(NodeLoadMissRatio, NodeLoadMisses, NodeLoads),
	{ID: IPC, Num: Instructions, Den: Cycles, Scale: 1, Unit: UnitPerCycle, HigherIsBetter: true, Source: "perf stat's insn per cycle"},
	mpki(CacheMPKI, CacheMisses),
	mpki(L1DLoadMPKI, L1DLoadMisses),
	mpki(L2MPKI, L2Misses),
	mpki(LLCLoadMPKI, LLCLoadMisses),
	mpki(LLCStoreMPKI, LLCStoreMisses),
	mpki(DTLBLoadMPKI, DTLBLoadMisses),
	mpki(NodeLoadMPKI, NodeLoadMisses),
	mpki(BranchMPKI, BranchMisses),
	{ID: HITMPKI, Unit: UnitPerKiloInstr,
		Formula: "1000 * (the sum of the model's HITM events: " + strings.Join(HITMEvents, ", ") + ") / instructions",
		Source:  "Intel TMA (toplev) Contested_Accesses and perf c2c count the same loads; event names from the kernel's tools/perf/pmu-events"},
}

func init() {
	for i := range catalogue {
		if d := &catalogue[i]; d.Formula == "" {
			d.Formula = d.Num + " / " + d.Den
			if d.Scale != 1 {
				d.Formula = "1000 * " + d.Formula
			}
		}
	}
}

// Catalogue returns every derived metric, in order.
func Catalogue() []Def { return append([]Def(nil), catalogue...) }

// Ratios returns the derived metrics that are a ratio of two events, in
// order: what the report's heatmaps and the diff compute wherever both
// events were measured.
func Ratios() []Def {
	var out []Def
	for _, d := range catalogue {
		if d.Num != "" && d.Den != "" {
			out = append(out, d)
		}
	}
	return out
}

// Lookup returns a derived metric's definition.
func Lookup(id ID) (Def, bool) {
	for _, d := range catalogue {
		if d.ID == id {
			return d, true
		}
	}
	return Def{}, false
}

// Rate names an event's per-second rate ("page-faults/s").
func Rate(event string) ID { return ID(event + "/s") }

// Samples names the per-CPU rate of an event's stack samples, as the
// report's heatmap shows it ("cpu-clock samples").
func Samples(event string) ID { return ID(event + " samples") }

// Software reports whether an event is one of the kernel's software
// events.
func Software(event string) bool {
	for _, e := range SoftwareEvents {
		if e == event {
			return true
		}
	}
	return false
}
