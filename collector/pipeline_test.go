package collector

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/profile"
)

// fakeSource stands in for the kernel under closeWindow: it hands out one
// fixed snapshot and set of samples, so that the stages above the kernel
// (build, extras, write, sinks) are tested alone. Collection itself is
// tested against the kernel in record_test.go.
type fakeSource struct {
	cur     *snapshot
	samples []rawSample
	lost    uint64
}

func (f *fakeSource) snapshot(bool) (*snapshot, error)           { return f.cur, nil }
func (f *fakeSource) drainSamples() ([]rawSample, uint64, error) { return f.samples, f.lost, nil }

// closeWindow turns what was drained into a window with the deltas since
// the previous snapshot, hands it and its extras to the sinks with the
// progress, and makes the snapshot the next window's start.
func TestCloseWindowFeedsSinks(t *testing.T) {
	prev := &snapshot{
		tasks:  map[taskKey]taskVal{{10, 10}: {counts: []uint64{100}, comm: "app"}},
		target: [][]uint64{{100}},
		host:   [][]counterValue{{{Value: 1000}}},
	}
	cur := &snapshot{
		tasks:  map[taskKey]taskVal{{10, 10}: {counts: []uint64{160}, comm: "app"}},
		target: [][]uint64{{160}},
		host:   [][]counterValue{{{Value: 1500}}},
	}
	src := &fakeSource{cur: cur, lost: 2, samples: []rawSample{
		{pid: 10, tid: 10, cpu: 0, slot: slotClock, user: []uint64{0x10, 0x20}, count: 3},
	}}
	sink := &testSink{}
	r, err := NewRecorder(Options{Sinks: []Sink{sink}})
	if err != nil {
		t.Fatal(err)
	}
	rc := &run{k: src, prev: prev, start: time.Now(), meta: windowMeta{
		events: []string{"cpu-clock"}, sampleEvs: [2]string{"cpu-clock", ""},
		ncpu: 1, sampled: 1, stackTable: newStackTable(rawSymbolizer{}),
	}}
	if err := r.closeWindow(rc, false); err != nil {
		t.Fatal(err)
	}
	if len(sink.windows) != 1 || len(sink.extras) != 1 {
		t.Fatalf("sink got %d windows and %d extras, want 1 and 1", len(sink.windows), len(sink.extras))
	}
	w := sink.windows[0]
	if c := w.Counters[0]; c.PerCPU[0] != 60 || c.HostPerCPU[0] != 500 {
		t.Errorf("cpu-clock = %d (host %d), want 60 (host 500)", c.PerCPU[0], c.HostPerCPU[0])
	}
	if len(w.Processes) != 1 || w.Processes[0].Comm != "app" || w.Processes[0].Counts["cpu-clock"] != 60 {
		t.Errorf("processes = %+v, want app with 60", w.Processes)
	}
	if len(w.Samples) != 1 || w.Samples[0].Count != 3 || w.Samples[0].UserStack == 0 || len(w.NewStacks) != 1 {
		t.Errorf("samples = %+v with %d new stacks, want one of 3 with its stack", w.Samples, len(w.NewStacks))
	}
	if w.Drops.MapErrors != 2 {
		t.Errorf("map errors = %d, want the 2 unreadable sample records", w.Drops.MapErrors)
	}
	x := sink.extras[0]
	if x.MapEntries["tasks"] != 1 || x.MapEntries["samples"] != 1 {
		t.Errorf("extras map entries = %v, want 1 task and 1 sample", x.MapEntries)
	}
	if rc.windows != 1 || rc.samples != 3 || rc.drops.MapErrors != 2 || rc.prev != cur || rc.lastNS != w.EndNS {
		t.Errorf("run state after the window: %d windows, %d samples, %d map errors, prev moved %v, last %d (window end %d)",
			rc.windows, rc.samples, rc.drops.MapErrors, rc.prev == cur, rc.lastNS, w.EndNS)
	}
}

// A last window is left out only when it says nothing: shorter than a
// millisecond, without samples and without function calls.
func TestDrainedEmpty(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, tc := range []struct {
		name string
		d    drained
		span int64
		want bool
	}{
		{"sliver", drained{}, ms - 1, true},
		{"a millisecond", drained{}, ms, false},
		{"sliver with a sample", drained{samples: []rawSample{{count: 1}}}, 0, false},
		{"sliver with calls", drained{calls: true}, 0, false},
	} {
		if got := tc.d.empty(tc.span); got != tc.want {
			t.Errorf("%s: empty = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Counting by cgroup, a window carries no processes even where threads
// counted.
func TestBuildWindowNoProcesses(t *testing.T) {
	prev := &snapshot{tasks: map[taskKey]taskVal{{10, 10}: {counts: []uint64{1}}}}
	cur := &snapshot{tasks: map[taskKey]taskVal{{10, 10}: {counts: []uint64{5}}}}
	m := windowMeta{events: []string{"cpu-clock"}, ncpu: 1, endNS: 1}
	if w := buildWindow(prev, cur, nil, 0, m); len(w.Processes) != 1 {
		t.Fatalf("by thread: %d processes, want 1", len(w.Processes))
	}
	m.noProcesses = true
	if w := buildWindow(prev, cur, nil, 0, m); w.Processes != nil {
		t.Errorf("by cgroup: processes %+v, want none", w.Processes)
	}
}

// NewRecorder is where the options are checked: each bad one is refused,
// and zero values take their defaults.
func TestNewRecorderChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"short interval", Options{Output: "x", Interval: MinInterval - 1}, "-i"},
		{"negative duration", Options{Output: "x", Duration: -time.Second}, "-d"},
		{"negative rate", Options{Output: "x", SampleHz: -1}, "-F"},
		{"no output", Options{}, "no output"},
	} {
		if _, err := NewRecorder(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one naming %q", tc.name, err, tc.want)
		}
	}
	r, err := NewRecorder(Options{Output: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if o := r.opts; o.Interval != DefaultInterval || o.SampleHz != DefaultSampleHz || o.SamplePeriod != DefaultMissPeriod || o.Tool != "cacheheat" || o.Warn == nil {
		t.Errorf("defaults not filled in: %+v", o)
	}
}

// The sampled slot takes the first miss event the host measures, with -c
// as its period, and page faults every FaultPeriod only when it measures
// none.
func TestPickMissEvent(t *testing.T) {
	const period = 12345
	measuredOnly := func(names ...string) func(Event) bool {
		return func(ev Event) bool {
			for _, n := range names {
				if ev.Name == n {
					return true
				}
			}
			return false
		}
	}
	for _, tc := range []struct {
		name     string
		measured func(Event) bool
		want     string
		every    uint64
	}{
		{"all", measuredOnly("LLC-load-misses", "cache-misses", "page-faults"), "LLC-load-misses", period},
		{"no LLC event", measuredOnly("cache-misses", "page-faults"), "cache-misses", period},
		{"software only", measuredOnly("page-faults"), "page-faults", FaultPeriod},
		{"nothing", measuredOnly(), "", 0},
	} {
		ev, every, ok := pickMissEvent(host.CPUInfo{}, period, tc.measured)
		if ev.Name != tc.want || every != tc.every || ok != (tc.want != "") {
			t.Errorf("%s: %q every %d (ok %v), want %q every %d", tc.name, ev.Name, every, ok, tc.want, tc.every)
		}
	}
}

// The plan keeps what the host measures and refuses a selection of which
// it measures nothing, saying why.
func TestPickCounted(t *testing.T) {
	evs := []Event{{Name: "cycles"}, {Name: "cpu-clock"}}
	probe := func(ev Event) profile.EventStatus {
		if ev.Name == "cycles" {
			return profile.EventStatus{Name: ev.Name, Status: profile.StatusUnsupported, Reason: "no PMU"}
		}
		return profile.EventStatus{Name: ev.Name, Status: profile.StatusMeasured}
	}
	var notes []string
	p := &plan{}
	if err := p.pickCounted(evs, probe, func(s string) { notes = append(notes, s) }); err != nil {
		t.Fatal(err)
	}
	if len(p.kc.counted) != 1 || p.kc.counted[0].Name != "cpu-clock" || len(p.statuses) != 2 {
		t.Errorf("counted %v of statuses %v, want cpu-clock of 2", p.kc.counted, p.statuses)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "1 of 2 events not measured: no PMU") {
		t.Errorf("notes = %q", notes)
	}
	p = &plan{}
	err := p.pickCounted(evs[:1], probe, nil)
	if !errors.Is(err, ErrHost) || !strings.Contains(err.Error(), "no PMU") {
		t.Errorf("nothing measurable: err %v, want ErrHost with the reason", err)
	}
}

// The target decides the BPF side's mode; a PID that names no process
// and an unknown kind are refused before anything is loaded.
func TestResolveTarget(t *testing.T) {
	var kc kernelConfig
	if _, err := resolveTarget(Target{Kind: profile.TargetAll}, &kc); err != nil || kc.mode != modeAll {
		t.Errorf("-a: mode %d, err %v", kc.mode, err)
	}
	kc = kernelConfig{}
	self := []int{os.Getpid()}
	if _, err := resolveTarget(Target{Kind: profile.TargetPID, PIDs: self}, &kc); err != nil || kc.mode != modePIDs || len(kc.pids) != 1 || kc.pids[0] != self[0] {
		t.Errorf("-p self: mode %d, pids %v, err %v", kc.mode, kc.pids, err)
	}
	if _, err := resolveTarget(Target{Kind: profile.TargetPID, PIDs: []int{-1}}, &kernelConfig{}); !errors.Is(err, ErrNoTarget) {
		t.Errorf("-p -1: err %v, want ErrNoTarget", err)
	}
	if _, err := resolveTarget(Target{Kind: "bogus"}, &kernelConfig{}); err == nil {
		t.Error("unknown target kind accepted")
	}
}

// TestCmdlinesKeepsEmpty: a kernel thread's empty command line is cached
// like any other, so an idle host's kernel threads are not read from /proc
// every window; a process that cannot be read is not cached.
func TestCmdlinesKeepsEmpty(t *testing.T) {
	c := newCmdlines()
	// pid 2 is kthreadd, a kernel thread, in every pid namespace's root.
	comm, err := os.ReadFile("/proc/2/comm")
	if err != nil {
		t.Skipf("no /proc/2 to read (not the host's pid namespace?): %v", err)
	}
	name := strings.TrimSpace(string(comm))
	if argv := c.get(2, name); argv != nil {
		t.Fatalf("kernel thread's command line %q, want none", argv)
	}
	if e, ok := c.m[2]; !ok || e.comm != name {
		t.Errorf("kernel thread's empty command line not cached: %+v", c.m)
	}
	gone := 1 << 30 // above pid_max: no such process
	if argv := c.get(gone, "x"); argv != nil {
		t.Errorf("a missing process's command line %q, want none", argv)
	}
	if _, ok := c.m[gone]; ok {
		t.Error("a process that could not be read was cached")
	}
	self := c.get(os.Getpid(), "collector.test")
	if len(self) == 0 {
		t.Error("this process's own command line was not read")
	}
}
