package collector

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cacheheat/cacheheat/bpf"
	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
)

func simCPU(t *testing.T, name string) host.CPUInfo {
	t.Helper()
	t.Setenv(EnvSimulatedPMU, name)
	cpu, err := LiveCPU()
	if err != nil {
		t.Fatal(err)
	}
	if cpu.Simulated != name {
		t.Fatalf("LiveCPU with %s=%s: %+v", EnvSimulatedPMU, name, cpu)
	}
	return cpu
}

// TestSimulatedCatalogue: each fixture resolves its model's vendor events,
// opens every hardware event it has through a software stand-in, and
// leaves what the model lacks unsupported, as its kernel would.
func TestSimulatedCatalogue(t *testing.T) {
	for _, tc := range []struct {
		pmu      string
		c2c      []string // cache-to-cache events the default must include
		lacks    []string // generic events the model's kernel does not map
		uarch    string
		l2Config uint64
	}{
		{"intel-skx", []string{"mem_load_l3_hit_retired.xsnp_hitm"}, nil, "skylakex", 0x3f24},
		// Ice Lake-SP: xsnp_fwd (xsnp_hitm is its deprecated alias), and
		// perfmon has no L2_RQSTS.MISS there: demand misses (umask 0x27).
		{"intel-icx", []string{"mem_load_l3_hit_retired.xsnp_fwd"}, nil, "icelakex", 0x2724},
		{"intel-spr", []string{"mem_load_l3_hit_retired.xsnp_fwd"}, nil, "sapphirerapids", 0x3f24},
		{"amd-zen2", []string{"ls_refills_from_sys.ls_mabresp_rmt_cache"}, []string{"LLC-loads", "node-loads"}, "amdzen2", 0x0964},
		{"amd-zen3", []string{"ls_dmnd_fills_from_sys.ext_cache_local", "ls_dmnd_fills_from_sys.ext_cache_remote"}, []string{"LLC-load-misses"}, "amdzen3", 0x0964},
		{"amd-zen4", []string{"ls_dmnd_fills_from_sys.near_cache", "ls_dmnd_fills_from_sys.far_cache"}, []string{"LLC-loads", "node-load-misses"}, "amdzen4", 0x0964},
	} {
		cpu := simCPU(t, tc.pmu)
		if got := uarchOf(cpu); got != tc.uarch {
			t.Errorf("%s: microarchitecture %q, want %q", tc.pmu, got, tc.uarch)
		}
		def := DefaultEvents(cpu)
		var hw []string
		for _, e := range def {
			if !e.IsHardware() {
				if e.StandIn != nil {
					t.Errorf("%s: software event %s has a stand-in", tc.pmu, e.Name)
				}
				continue
			}
			if e.Missing == "" {
				hw = append(hw, e.Name)
				if e.StandIn == nil || e.StandIn.Type != unix.PERF_TYPE_SOFTWARE || e.Attr().Type != unix.PERF_TYPE_SOFTWARE {
					t.Errorf("%s: %s opens %+v, want a software stand-in", tc.pmu, e.Name, e.Attr())
				}
			}
		}
		if len(hw) < 9 {
			t.Errorf("%s: default has %d hardware events %v, want at least 9", tc.pmu, len(hw), hw)
		}
		for _, name := range tc.c2c {
			if !slices.Contains(hw, name) {
				t.Errorf("%s: default %v lacks the cache-to-cache event %s", tc.pmu, hw, name)
			}
			e, err := LookupEvent(name, cpu)
			if err != nil || e.Missing != "" || e.Type != unix.PERF_TYPE_RAW || !strings.Contains(e.Source, tc.uarch) {
				t.Errorf("%s: LookupEvent(%s) = %+v, %v", tc.pmu, name, e, err)
			}
		}
		for _, name := range tc.lacks {
			e, _ := LookupEvent(name, cpu)
			if e.Missing == "" || ProbeEvent(e).Status != profile.StatusUnsupported {
				t.Errorf("%s: %s should be unsupported on this model, got %+v", tc.pmu, name, e)
			}
		}
		if e, _ := LookupEvent("l2-misses", cpu); e.Config != tc.l2Config {
			t.Errorf("%s: l2-misses config %#x, want %#x", tc.pmu, e.Config, tc.l2Config)
		}
	}
}

// TestVendorEventsOnRealModels: LookupEvent accepts a model's vendor
// events by their perf names without any simulation, and names the models
// of an event that this CPU does not have.
func TestVendorEventsOnRealModels(t *testing.T) {
	t.Setenv(EnvSimulatedPMU, "")
	icx := host.CPUInfo{Vendor: "GenuineIntel", Family: 6, Model: 0x6a}
	e, err := LookupEvent("mem_load_l3_hit_retired.xsnp_fwd", icx)
	if err != nil || e.Config != 0x04d2 || e.StandIn != nil || e.Missing != "" {
		t.Errorf("xsnp_fwd on Ice Lake-SP: %+v, %v; want config 0x04d2", e, err)
	}
	// perfmon's deprecated name: accepted, and says what replaced it.
	e, err = LookupEvent("mem_load_l3_hit_retired.xsnp_hitm", icx)
	if err != nil || e.Config != 0x04d2 || e.Missing != "" || !strings.Contains(e.Desc, "deprecated name of mem_load_l3_hit_retired.xsnp_fwd") {
		t.Errorf("xsnp_hitm on Ice Lake-SP: %+v, %v; want config 0x04d2, named deprecated", e, err)
	}
	zen4 := host.CPUInfo{Vendor: "AuthenticAMD", Family: 0x19, Model: 0x11}
	e, err = LookupEvent("ls_dmnd_fills_from_sys.far_cache", zen4)
	if err != nil || e.Config != 0x1043 || e.Missing != "" {
		t.Errorf("far_cache on Zen 4: %+v, %v; want config 0x1043", e, err)
	}
	e, err = LookupEvent("ls_dmnd_fills_from_sys.far_cache", icx)
	if err != nil || !strings.Contains(e.Missing, "amdzen4") {
		t.Errorf("a Zen 4 event on Ice Lake: %+v, %v; want it listed with the models that have it", e, err)
	}
	if _, err := LookupEvent("no_such.event", icx); err == nil {
		t.Error("an unknown name was accepted")
	}
	// Sapphire Rapids moved the dTLB walk event.
	spr := host.CPUInfo{Vendor: "GenuineIntel", Family: 6, Model: 0x8f}
	if e, _ := LookupEvent("dtlb_load_misses.walk_completed", spr); e.Config != 0x0e12 {
		t.Errorf("dtlb walk on Sapphire Rapids: config %#x, want 0x0e12", e.Config)
	}
}

// TestSlotsFitEveryCatalogue: the BPF object's counter slots hold the
// whole catalogue of every model cacheheat knows (plus cpu-clock, which a
// simulated rotation may add), so the slot count never decides what a
// recording may ask for.
func TestSlotsFitEveryCatalogue(t *testing.T) {
	spec, err := bpf.LoadCacheheat()
	if err != nil {
		t.Fatal(err)
	}
	slots := counterSlots(spec)
	if got := len(counterMapsOf(&bpf.CacheheatMaps{})); got != slots {
		t.Fatalf("the generated bindings have %d counter maps, the object %d", got, slots)
	}
	var cpus []host.CPUInfo
	for _, f := range simulatedPMUs {
		cpus = append(cpus, f.cpu)
	}
	for _, r := range l2Table {
		cpus = append(cpus, host.CPUInfo{Vendor: r.vendor, Family: r.family, Model: r.models[0].lo})
	}
	for _, m := range perfmonModels {
		cpus = append(cpus, cpuOfPattern(t, m.pattern))
	}
	for _, cpu := range cpus {
		if n := len(ModelCatalogue(cpu)) + 1; n > slots {
			t.Errorf("%s family %d model %#x: %d events, %d slots", cpu.Vendor, cpu.Family, cpu.Model, n, slots)
		}
	}
}

// cpuOfPattern is a CPU a mapfile pattern matches: its family and model,
// and the first stepping of a [..] list.
func cpuOfPattern(t *testing.T, pattern string) host.CPUInfo {
	t.Helper()
	var cpu host.CPUInfo
	parts := strings.Split(pattern, "-")
	cpu.Vendor = parts[0]
	if _, err := fmt.Sscanf(parts[1]+" "+parts[2], "%d %x", &cpu.Family, &cpu.Model); err != nil {
		t.Fatalf("%s: %v", pattern, err)
	}
	if len(parts) == 4 {
		fmt.Sscanf(strings.TrimPrefix(parts[3], "["), "%1x", &cpu.Stepping)
	}
	if !matchesCPUID(pattern, cpuidString(cpu)) {
		t.Fatalf("%s does not match the CPU made from it, %s", pattern, cpuidString(cpu))
	}
	return cpu
}

// TestMuxPlanByConstraints: a simulated PMU rotates when the events do
// not fit its counters with their masks, even when there are no more of
// them than counters.
func TestMuxPlanByConstraints(t *testing.T) {
	cpu := simCPU(t, "intel-icx") // 8 general counters
	clock, _ := LookupEvent("cpu-clock", cpu)
	stand := &clock
	evs := []Event{clock}
	for i := range 6 {
		evs = append(evs, Event{Name: fmt.Sprintf("e%d", i), Kind: KindRaw, StandIn: stand, Counters: 0xf})
	}
	rotated, masks, counters, ref := muxPlan(evs, cpu)
	if len(rotated) != 6 || counters != 8 || ref != 0 || len(masks) != 6 {
		t.Errorf("six events on counters 0-3 only: rotated %v over %d, ref %d; want all six rotating, cpu-clock the reference", rotated, counters, ref)
	}
	if got := constrainedText(masks, counters); got != " (6 on counters 0,1,2,3 only)" {
		t.Errorf("warning text %q", got)
	}
	for i := 1; i < len(evs); i++ {
		evs[i].Counters = 0
	}
	if rotated, _, _, _ := muxPlan(evs, cpu); len(rotated) != 0 {
		t.Errorf("six unconstrained events on 8 counters rotate: %v", rotated)
	}
}

// TestMuxPlanHyperThreading: Skylake-SP's table lists L2 and LLC events
// on counters 0-3 with Hyper-Threading on and 0-7 with it off; the same
// part's fixtures schedule by the list that applies, so the same five
// constrained events rotate on one and fit at once on the other.
func TestMuxPlanHyperThreading(t *testing.T) {
	var evs []Event
	for _, f := range []string{"intel-skx", "intel-skx-htoff"} {
		cpu := simCPU(t, f)
		evs = evs[:0]
		for _, name := range []string{"cpu-clock", "l2-misses", "l2-references", "dtlb_load_misses.walk_completed", "longest_lat_cache.miss", "longest_lat_cache.reference"} {
			e, err := LookupEvent(name, cpu)
			if err != nil {
				t.Fatal(err)
			}
			if e.Kind == KindRaw && (e.Counters != 0xf || e.CountersHTOff != 0xff) {
				t.Fatalf("%s on %s: counters %#x, with HT off %#x; Skylake-SP's table says 0-3 and 0-7", name, f, e.Counters, e.CountersHTOff)
			}
			evs = append(evs, e)
		}
		rotated, _, counters, _ := muxPlan(simulate(evs, cpu), cpu)
		switch {
		case f == "intel-skx" && (counters != 4 || len(rotated) != 5):
			t.Errorf("%s (HT on, 4 counters): %d of 5 rotate over %d counters, want all 5 over 4", f, len(rotated), counters)
		case f == "intel-skx-htoff" && (counters != 8 || len(rotated) != 0):
			t.Errorf("%s (HT off, 8 counters, CounterHTOff 0-7): %d rotate over %d, want none", f, len(rotated), counters)
		}
	}
}

// TestRotatorTurns: the rotation visits every slot equally often, never
// more than counters at a time.
func TestRotatorTurns(t *testing.T) {
	r := newRotator([]int{2, 3, 4, 5, 6}, nil, 2, nil)
	seen := map[int]int{}
	for turn := range 10 {
		due := r.next()
		if len(due) != 2 {
			t.Fatalf("turn %d: %v counting, want 2", turn, due)
		}
		for s := range due {
			seen[s]++
		}
	}
	for _, s := range []int{2, 3, 4, 5, 6} {
		if seen[s] != 4 {
			t.Errorf("slot %d counted in %d of 10 turns, want 4: %v", s, seen[s], seen)
		}
	}
}

// TestRotatorHonoursCounterMasks: events that may count on counters 0-3
// only never take counters 4-7, never more than four of them count at
// once, and every event still gets its turns.
func TestRotatorHonoursCounterMasks(t *testing.T) {
	// Ice Lake-SP's shape: 8 counters, the retired-load data sources on
	// 0-3 (perfmon's Counter "0,1,2,3"), the rest anywhere.
	slots := []int{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}
	masks := []uint64{0xf, 0xf, 0xf, 0xf, 0xf, 0xf, 0, 0, 0xff, 0}
	r := newRotator(slots, masks, 8, nil)
	seen := map[int]int{}
	for turn := range 50 {
		due := r.next()
		low := 0
		for s := range due {
			seen[s]++
			c := r.placed[s]
			m := masks[s-10]
			if m != 0 && m&(1<<c) == 0 {
				t.Fatalf("turn %d: slot %d on counter %d, outside its mask %#x", turn, s, c, m)
			}
			if m == 0xf {
				low++
			}
		}
		if low > 4 || len(due) > 8 {
			t.Fatalf("turn %d: %d events counting, %d of them on counters 0-3 only: %v", turn, len(due), low, r.placed)
		}
		used := map[int]bool{}
		for _, c := range r.placed {
			if used[c] {
				t.Fatalf("turn %d: counter %d given twice: %v", turn, c, r.placed)
			}
			used[c] = true
		}
	}
	for _, s := range slots {
		if seen[s] < 10 {
			t.Errorf("slot %d counted in %d of 50 turns: %v", s, seen[s], seen)
		}
	}
	// Six 0-3 events do not fit 8 counters at once; the same six without
	// a mask do.
	if _, ok := assignCounters(masks[:6], 8); ok {
		t.Error("six events on counters 0-3 only were given 8 counters at once")
	}
	if _, ok := assignCounters(make([]uint64, 6), 8); !ok {
		t.Error("six unconstrained events did not fit 8 counters")
	}
}

// simulatedRecording records the helper on a simulated PMU.
func simulatedRecording(t *testing.T, pmu string, evs []Event) *profile.Recording {
	t.Helper()
	cpu := simCPU(t, pmu)
	if evs == nil {
		evs = DefaultEvents(cpu)
	}
	return record(t, context.Background(), Options{
		Target: Target{Kind: profile.TargetCommand, Command: helperCommand(t, "faults 30000")},
		Events: evs, Interval: 100 * time.Millisecond,
	})
}

// TestRecordSimulated runs the hardware path with the fixtures' default
// events: every hardware event is measured by its stand-in, the header and
// each event say simulated, the stand-ins counted real kernel events for
// the target, and the events beyond the fixture's counters were rotated
// and scaled (running < enabled, per event).
func TestRecordSimulated(t *testing.T) {
	needBPF(t)
	for _, tc := range []struct{ pmu, c2c string }{
		{"intel-icx", "mem_load_l3_hit_retired.xsnp_fwd"},
		{"amd-zen4", "ls_dmnd_fills_from_sys.near_cache"},
	} {
		t.Run(tc.pmu, func(t *testing.T) {
			rec := simulatedRecording(t, tc.pmu, nil)
			if !rec.Header.Simulated() || rec.Header.PMU.Simulated != tc.pmu {
				t.Fatalf("header pmu %+v, want simulated %s", rec.Header.PMU, tc.pmu)
			}
			if rec.Header.Host.Mode != ModeHardware {
				t.Errorf("mode %q, want hardware (simulated)", rec.Header.Host.Mode)
			}
			sum := model.FromRecording(rec).Summary()
			var hw []string
			for _, e := range sum.Events {
				if e.Kind == KindSoftware {
					if e.Simulated {
						t.Errorf("software event %s marked simulated", e.Name)
					}
					continue
				}
				if e.Status == profile.StatusMeasured {
					if !e.Simulated || e.StandIn == "" {
						t.Errorf("%s measured but not marked simulated: %+v", e.Name, e)
					}
					hw = append(hw, e.Name)
				}
			}
			if len(hw) < 10 || !slices.Contains(hw, tc.c2c) {
				t.Errorf("measured hardware events %v: want at least 10 including %s", hw, tc.c2c)
			}
			// The stand-ins count real kernel events of the target.
			// instructions stands on task-clock, the target's own CPU
			// time, which cpu-clock (never rotated) also measures: once
			// scaled, the two agree within the error of extrapolating
			// from a share of the time (amd-zen4 rotates instructions,
			// intel-icx keeps it on a fixed counter).
			ins, clock := float64(sum.Totals["instructions"].Total), float64(sum.Totals["cpu-clock"].Total)
			if clock == 0 || ins < clock/4 || ins > clock*4 {
				t.Errorf("instructions (task-clock stand-in, scaled) %.0f against cpu-clock %.0f: want the same CPU time within 4x", ins, clock)
			}
			if sum.Totals["page-faults"].Total < 20000 {
				t.Errorf("page-faults counted %d for the target, want the helper's ~30000", sum.Totals["page-faults"].Total)
			}
			scaled := 0
			for _, e := range sum.Events {
				if e.Status != profile.StatusMeasured {
					continue
				}
				if e.Scaling < 1 {
					t.Errorf("%s: scaling %v, want >= 1", e.Name, e.Scaling)
				}
				if e.Scaling > 1.01 {
					scaled++
				}
			}
			if scaled == 0 {
				t.Errorf("no event was multiplexed; the fixture has %d counters for %d hardware events", rec.Header.PMU.Counters, len(hw))
			}
		})
	}
}

// TestRecordSimulated24Events: 24 events on Ice Lake-SP's 8 counters are
// all recorded, each with its scaling factor.
func TestRecordSimulated24Events(t *testing.T) {
	needBPF(t)
	cpu := simCPU(t, "intel-icx")
	var evs []Event
	for _, e := range ModelCatalogue(cpu) {
		if e.IsHardware() && e.Missing == "" && len(evs) < 24 {
			evs = append(evs, e)
		}
	}
	if len(evs) != 24 {
		t.Fatalf("intel-icx has %d hardware events, want 24", len(evs))
	}
	rec := simulatedRecording(t, "intel-icx", evs)
	sum := model.FromRecording(rec).Summary()
	// Fixed-counter and software events are never scaled. Of the 22
	// rotated ones, 8 count at any moment, so whatever the scheduling of
	// the rotation, at least 8 ran, and those that ran after a rotation
	// were scaled up.
	measured, ran, scaled := 0, 0, 0
	for _, e := range sum.Events {
		if e.Status != profile.StatusMeasured {
			t.Errorf("%s: %s (%s)", e.Name, e.Status, e.Reason)
			continue
		}
		measured++
		fixed := e.Name == "instructions" || e.Name == "cycles" || e.Kind == KindSoftware
		switch {
		case fixed && (e.Scaling < 0.99 || e.Scaling > 1.01):
			t.Errorf("%s is on a fixed counter or software, scaling %v, want 1", e.Name, e.Scaling)
		case fixed:
		case e.RunningNS > 0:
			ran++
			if e.Scaling < 1 {
				t.Errorf("%s: scaling %v, want >= 1", e.Name, e.Scaling)
			}
			if e.Scaling > 1.01 {
				scaled++
			}
		}
	}
	if ran < 8 || scaled == 0 {
		t.Errorf("%d rotated events ran and %d were scaled; want at least 8 and 1", ran, scaled)
	}
	// instructions and cycles sit on fixed counters and are the
	// rotation's time reference, so nothing is added.
	if measured != 24 || len(sum.Events) != 24 {
		t.Errorf("%d of %d events measured, want all 24", measured, len(sum.Events))
	}
}

// TestRecordNotSimulated: without the variable nothing is simulated and
// this host stays in software mode.
func TestRecordNotSimulated(t *testing.T) {
	needBPF(t)
	t.Setenv(EnvSimulatedPMU, "")
	cpu, err := LiveCPU()
	if err != nil || cpu.Simulated != "" {
		t.Fatalf("LiveCPU without the variable: %+v, %v", cpu, err)
	}
	rec := record(t, context.Background(), Options{
		Target: Target{Kind: profile.TargetCommand, Command: helperCommand(t, "faults 1000")},
		Events: DefaultEvents(cpu), Interval: 100 * time.Millisecond,
	})
	if rec.Header.PMU != nil || rec.Header.Simulated() {
		t.Errorf("header pmu %+v, want none", rec.Header.PMU)
	}
	for _, e := range rec.Header.Events {
		if e.Simulated || e.StandIn != "" {
			t.Errorf("%s marked simulated", e.Name)
		}
	}
	if !HasCorePMU() && rec.Header.Host.Mode != ModeSoftware {
		t.Errorf("mode %q on a host without a PMU, want software", rec.Header.Host.Mode)
	}
	if rec.Header.Host.CPUModel == "" || strings.Contains(rec.Header.Host.CPUModel, "Xeon(R) Platinum 8380") {
		t.Errorf("cpu model %q is not this host's", rec.Header.Host.CPUModel)
	}
}

func TestUnknownSimulatedPMU(t *testing.T) {
	t.Setenv(EnvSimulatedPMU, "intel-nope")
	if _, err := LiveCPU(); err == nil || !strings.Contains(err.Error(), "intel-icx") {
		t.Errorf("unknown fixture: %v, want an error listing the fixtures", err)
	}
}

// TestPruneExitedTasks: the task records of threads that exited are
// deleted once a snapshot has their last counts, so a long recording
// keeps only live threads in the map.
func TestPruneExitedTasks(t *testing.T) {
	needBPF(t)
	t.Setenv(EnvSimulatedPMU, "")
	cpus, err := host.OnlineCPUs("/")
	if err != nil {
		t.Fatal(err)
	}
	k, err := openKernel(kernelConfig{mode: modeAll, cpus: cpus, sampleHz: 19, counted: events(t, "cpu-clock"), refSlot: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.close() })
	// Threads that run and exit: the helper's locked goroutines.
	cmd := helperCommand(t, "faults 100")
	for range 3 {
		if out, err := exec.Command(cmd[0]).CombinedOutput(); err != nil {
			t.Fatalf("helper: %v %s", err, out)
		}
	}
	s1, err := k.snapshot(false)
	if err != nil {
		t.Fatal(err)
	}
	marked := append([]bpf.CacheheatTaskKey(nil), k.exited...)
	if len(marked) == 0 {
		t.Fatalf("no exited task marked among %d records", len(s1.tasks))
	}
	time.Sleep(50 * time.Millisecond)
	// This snapshot takes their last counts, then deletes them.
	if _, err := k.snapshot(false); err != nil {
		t.Fatal(err)
	}
	if k.pruned < uint64(len(marked)) {
		t.Errorf("pruned %d of %d exited task records", k.pruned, len(marked))
	}
	s3, err := k.snapshot(false)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range marked {
		if _, still := s3.tasks[taskKey{tgid: int(key.Tgid), tid: int(key.Pid)}]; still {
			t.Errorf("task %+v was marked exited two snapshots ago and is still in the map", key)
		}
	}
	t.Logf("pruned %d exited task records", k.pruned)
}

// TestLoadBPFObject: caps loads cacheheat's own object (and attaches
// nothing); as root on this kernel it must load.
func TestLoadBPFObject(t *testing.T) {
	needBPF(t)
	before := kernelFDs(t)
	if r := LoadBPFObject(); !r.OK {
		t.Fatalf("cacheheat's BPF object did not load: %s", r.Error)
	}
	// Only this process's fds are looked at: other BPF users may load and
	// unload programs on the host meanwhile.
	if after := kernelFDs(t); len(after) > len(before) {
		t.Errorf("caps left BPF objects open: %v (before: %v)", after, before)
	}
}
