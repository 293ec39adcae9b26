package collector

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cacheheat/cacheheat/profile"
)

func TestBuildWindowDeltas(t *testing.T) {
	prev := &snapshot{
		tasks: map[taskKey]taskVal{
			{10, 10}: {counts: []uint64{100, 5}, comm: "app"},
			{10, 11}: {counts: []uint64{50, 1}, comm: "worker"},
		},
		target: [][]uint64{{100, 50}, {5, 1}},
		host:   [][]counterValue{{{Value: 1000, Enabled: 10, Running: 10}, {Value: 2000, Enabled: 10, Running: 10}}, {{}, {}}},
		runq:   [][]uint64{{1, 2}, {0, 0}},
		offcpu: [][]uint64{{0}, {0}},
		stats:  []statsVal{{fires: [2]uint64{10, 0}, samples: [2]uint64{4, 0}}, {fires: [2]uint64{10, 0}}},
	}
	cur := &snapshot{
		tasks: map[taskKey]taskVal{
			{10, 10}: {counts: []uint64{160, 5}, comm: "app"},
			{10, 11}: {counts: []uint64{50, 1}, comm: "worker"}, // idle: left out
			{10, 12}: {counts: []uint64{7, 2}, comm: "new"},     // new thread
		},
		target: [][]uint64{{160, 57}, {5, 3}},
		// CPU 1's counter was multiplexed: it ran half of the enabled time.
		host:   [][]counterValue{{{Value: 1500, Enabled: 20, Running: 20}, {Value: 2100, Enabled: 30, Running: 20}}, {{}, {}}},
		runq:   [][]uint64{{1, 5, 3}, {0, 0, 0}},
		offcpu: [][]uint64{{0}, {0}},
		stats:  []statsVal{{fires: [2]uint64{109, 0}, samples: [2]uint64{50, 0}, stackErrors: 2}, {fires: [2]uint64{109, 0}, sampleMapFull: 1}},
	}
	m := windowMeta{events: []string{"cpu-clock", "page-faults"}, sampleEvs: [2]string{"cpu-clock", ""}, sampleHz: 99, ncpu: 2, sampled: 2, startNS: 0, endNS: 1e9}
	w := buildWindow(prev, cur, nil, 3, m)

	if got, want := w.Counters[0].PerCPU, (profile.Counts{60, 7}); !reflect.DeepEqual(got, want) {
		t.Errorf("target per-cpu = %v, want %v", got, want)
	}
	// Host CPU 1: scaled 2100*30/20=3150 minus 2000 = 1150.
	if got, want := w.Counters[0].HostPerCPU, (profile.Counts{500, 1150}); !reflect.DeepEqual(got, want) {
		t.Errorf("host per-cpu = %v, want %v", got, want)
	}
	if c := w.Counters[0]; c.Enabled != 30 || c.Running != 20 {
		t.Errorf("enabled/running = %d/%d, want 30/20", c.Enabled, c.Running)
	}
	if len(w.Processes) != 1 {
		t.Fatalf("processes = %+v, want one", w.Processes)
	}
	p := w.Processes[0]
	if p.PID != 10 || p.Comm != "app" || p.Counts["cpu-clock"] != 67 || p.Counts["page-faults"] != 2 {
		t.Errorf("process = %+v", p)
	}
	if len(p.Threads) != 2 || p.Threads[0].TID != 10 || p.Threads[1].TID != 12 {
		t.Errorf("threads = %+v, want tids 10 and 12", p.Threads)
	}
	if got := w.Histograms[0].PerCPU; !reflect.DeepEqual(got, []profile.Counts{{0, 3, 3}, {}}) {
		t.Errorf("runq histogram = %v", got)
	}
	if w.Drops.StackErrors != 2 || w.Drops.SampleMapFull != 1 || w.Drops.MapErrors != 3 {
		t.Errorf("drops = %+v, want 2 stack errors, 1 sample lost to a full ring and 3 unreadable records", w.Drops)
	}
	sr := w.SampleRate[0]
	if sr.Requested != 99 || sr.Achieved != 99 || sr.Samples != 46 {
		t.Errorf("sample rate = %+v, want requested 99, achieved 99, 46 samples", sr)
	}
}

func TestBuildWindowAllTasksUsesHostCounts(t *testing.T) {
	prev := &snapshot{host: [][]counterValue{{{Value: 10}}}}
	cur := &snapshot{host: [][]counterValue{{{Value: 25}}}}
	w := buildWindow(prev, cur, nil, 0, windowMeta{events: []string{"page-faults"}, ncpu: 1, allTasks: true, endNS: 1})
	if got := w.Counters[0].PerCPU[0]; got != 15 {
		t.Errorf("-a per-cpu = %d, want the host's 15", got)
	}
}

func TestStackTableHashesContent(t *testing.T) {
	st := newStackTable(rawSymbolizer{})
	var w1, w2 profile.Window
	a := st.user(1, []uint64{0x10, 0x20}, &w1)
	b := st.user(2, []uint64{0x10, 0x20}, &w2)
	c := st.kernel([]uint64{0x10, 0x20}, &w2)
	if a != b || a == c || a == 0 {
		t.Errorf("ids %x %x %x: same frames must share an id, kernel stacks differ", a, b, c)
	}
	if len(w1.NewStacks) != 1 || len(w2.NewStacks) != 1 {
		t.Errorf("new stacks: %d then %d, want 1 then 1 (only the kernel stack)", len(w1.NewStacks), len(w2.NewStacks))
	}
	if st.user(1, nil, &w1) != 0 {
		t.Error("an empty stack must have id 0")
	}
}

func TestAppMetricsTail(t *testing.T) {
	dir := t.TempDir()
	a, err := newAppMetrics(filepath.Join(dir, "r.rec"), -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.close)
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString("ops_per_sec 10\nops_per_sec 12\ngarbage line here\nlat")
	if got := a.poll(false); !reflect.DeepEqual(got, map[string]float64{"ops_per_sec": 12}) {
		t.Errorf("first poll = %v", got)
	}
	f.WriteString("ency_ns 3.5\nops_per_sec NaN\n")
	if got := a.poll(false); !reflect.DeepEqual(got, map[string]float64{"latency_ns": 3.5}) {
		t.Errorf("second poll = %v (a line split across polls must be joined)", got)
	}
	f.WriteString("ops_per_sec 20")
	if got := a.poll(true); got["ops_per_sec"] != 20 {
		t.Errorf("final poll = %v, want the unterminated last line", got)
	}
	if a.malformed != 2 || a.warning() == "" {
		t.Errorf("malformed = %d, warning %q: want 2 counted", a.malformed, a.warning())
	}
	if !reflect.DeepEqual(a.final, map[string]float64{"ops_per_sec": 20, "latency_ns": 3.5}) {
		t.Errorf("final = %v", a.final)
	}
	a.close()
	if _, err := os.Stat(a.path); !os.IsNotExist(err) {
		t.Errorf("metrics file left behind: %v", err)
	}
}

// TestCPUClockExcludesIdle: a CPU's cpu-clock, for every task and for the
// target under -a, is the time it ran tasks (busy_ns), not the wall time
// perf's per-CPU counter counts, idle task included.
func TestCPUClockExcludesIdle(t *testing.T) {
	prev := &snapshot{
		host:   [][]counterValue{{{Value: 0, Enabled: 1, Running: 1}, {Value: 0, Enabled: 1, Running: 1}}},
		busyNS: []uint64{0, 0},
		monoNS: 5e9,
	}
	cur := &snapshot{
		// Both CPUs' counters ran the whole second; CPU 0 was busy
		// 250 ms of it, CPU 1 idle throughout.
		host:   [][]counterValue{{{Value: 1e9, Enabled: 2, Running: 2}, {Value: 1e9, Enabled: 2, Running: 2}}},
		busyNS: []uint64{250e6, 0},
		monoNS: 6e9,
	}
	m := windowMeta{events: []string{"cpu-clock"}, ncpu: 2, allTasks: true, startNS: 0, endNS: 1e9}
	w := buildWindow(prev, cur, nil, 0, m)
	want := profile.Counts{250e6, 0}
	if got := w.Counters[0].HostPerCPU; !reflect.DeepEqual(got, want) {
		t.Errorf("host per-cpu cpu-clock = %v, want busy time %v", got, want)
	}
	if got := w.Counters[0].PerCPU; !reflect.DeepEqual(got, want) {
		t.Errorf("-a target per-cpu cpu-clock = %v, want busy time %v", got, want)
	}
	// Idle is the rest of the second, in the same clock.
	if got, want := w.IdleNS, (profile.Counts{750e6, 1e9}); !reflect.DeepEqual(got, want) {
		t.Errorf("idle = %v, want %v", got, want)
	}
	// Another event keeps the counter's value.
	m.events = []string{"page-faults"}
	if got := buildWindow(prev, cur, nil, 0, m).Counters[0].HostPerCPU; got[1] != 1e9 {
		t.Errorf("page-faults host per-cpu = %v, want the counter's", got)
	}
}

// TestWindowIdle: a CPU's idle time is the time between the two reads of
// busy time that it did not run a task; a slice added late (busy time
// past the span, at the switch or sample that closed it) leaves it no
// idle time, never a wrapped count; without busy time it is unknown.
func TestWindowIdle(t *testing.T) {
	prev := &snapshot{busyNS: []uint64{100, 100, 100}, monoNS: 1000}
	cur := &snapshot{busyNS: []uint64{100, 600, 1300}, monoNS: 2000}
	if got, want := windowIdle(prev, cur, 4), (profile.Counts{1000, 500, 0, 1000}); !reflect.DeepEqual(got, want) {
		t.Errorf("windowIdle = %v, want %v", got, want)
	}
	if got := windowIdle(&snapshot{}, cur, 3); got != nil {
		t.Errorf("windowIdle without busy time = %v, want nil", got)
	}
}
