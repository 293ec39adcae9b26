package model

import (
	"reflect"
	"testing"

	"github.com/cacheheat/cacheheat/profile"
)

func testHeader() profile.Header {
	return profile.Header{
		Host: profile.Host{Topology: profile.Topology{
			CPUs:  []profile.CPU{{ID: 0, Node: 0}, {ID: 1, Node: 0}},
			Nodes: []profile.Node{{ID: 0, CPUs: []int{0, 1}}},
		}},
		Settings: profile.Settings{IntervalNS: 1e9, SampleEvents: []string{"cpu-clock"}},
		Events:   []profile.EventStatus{{Name: "page-faults", Status: profile.StatusMeasured}},
	}
}

func testWindow(i int) profile.Window {
	return profile.Window{
		Index: i, StartNS: int64(i) * 1e9, EndNS: int64(i+1) * 1e9,
		Counters: []profile.Counter{
			{Event: "page-faults", PerCPU: profile.Counts{1, 2}, HostPerCPU: profile.Counts{10, 20}, Enabled: 5, Running: 4},
		},
		Processes: []profile.Process{{PID: 7, Comm: "w", Counts: map[string]uint64{"page-faults": 3},
			Threads: []profile.Thread{{TID: 7, Comm: "w", Counts: map[string]uint64{"page-faults": 3}}}}},
		Histograms: []profile.Histogram{{Name: profile.HistRunqLatency, PerCPU: []profile.Counts{{0, 1}, {0, 0, 2}}}},
		Samples:    []profile.Sample{{Event: "cpu-clock", PID: 7, TID: 7, CPU: 1, Count: 5}},
	}
}

// TestBuilder: the model sums what each window says and keeps the
// per-window series aligned with the windows, including windows that lack
// an event, a histogram or samples.
func TestBuilder(t *testing.T) {
	b := NewBuilder(testHeader(), map[uint64]profile.Stack{})
	w0, w1, w2 := testWindow(0), testWindow(1), testWindow(2)
	w1.Counters, w1.Histograms, w1.Samples = nil, nil, nil
	for _, w := range []*profile.Window{&w0, &w1, &w2} {
		b.Add(w)
	}
	m := b.Model(nil, true, "cut short")
	if m.Windows() != 3 || m.DurationS() != 3 || !m.Truncated {
		t.Fatalf("%d windows over %g s, truncated %v", m.Windows(), m.DurationS(), m.Truncated)
	}
	if got := m.Totals["page-faults"]; !reflect.DeepEqual(got, []uint64{2, 4}) {
		t.Errorf("totals %v, want [2 4]", got)
	}
	if got := m.HostTotals["page-faults"]; !reflect.DeepEqual(got, []uint64{20, 40}) {
		t.Errorf("host totals %v, want [20 40]", got)
	}
	if s := m.Series["page-faults"]; len(s) != 3 || s[1] != nil || s[2][1] != 2 {
		t.Errorf("series %v: want 3 windows, none in the second", s)
	}
	h := m.Histogram(profile.HistRunqLatency)
	if h == nil || len(h.PerWindow) != 3 || h.PerWindow[1] != nil || h.Total[1] != 2 || h.Total[2] != 4 || h.Count() != 6 {
		t.Fatalf("histogram %+v", h)
	}
	smp := m.Samples["cpu-clock"]
	if m.PrimarySample != "cpu-clock" || smp.Total != 10 || len(smp.PerCPU) != 3 || smp.PerCPU[1] != nil || smp.PerCPU[2][1] != 5 {
		t.Errorf("samples %+v", smp)
	}
	if m.Scaling["page-faults"] != [2]uint64{10, 8} {
		t.Errorf("scaling %v", m.Scaling["page-faults"])
	}
	if len(m.Processes) != 1 || m.Processes[0].Totals["page-faults"] != 9 || m.Processes[0].Samples != 10 {
		t.Errorf("processes %+v", m.Processes)
	}
	if m.Threads != 1 || m.ThreadSeconds != 3 {
		t.Errorf("%d threads, %g thread-seconds; want 1 over 3 s", m.Threads, m.ThreadSeconds)
	}
}

// TestBuilderRepeated: the live view asks for the model after every
// window; asking twice must not count anything twice.
func TestBuilderRepeated(t *testing.T) {
	b := NewBuilder(testHeader(), map[uint64]profile.Stack{})
	w0 := testWindow(0)
	b.Add(&w0)
	b.Model(nil, false, "")
	w1 := testWindow(1)
	b.Add(&w1)
	m := b.Model(nil, false, "")
	b.Model(nil, false, "")
	if len(m.Processes) != 1 || len(m.Processes[0].Threads) != 1 || m.Processes[0].Threads[0].Totals["page-faults"] != 6 {
		t.Errorf("processes after three snapshots: %+v", m.Processes)
	}
	if m.Windows() != 2 || m.Samples["cpu-clock"].Total != 10 {
		t.Errorf("%d windows, %d samples", m.Windows(), m.Samples["cpu-clock"].Total)
	}
}

// TestBuilderKeepsWindows: an event counted twice in a window is summed
// into a copy; the window's own arrays, which the model references, are
// never written.
func TestBuilderKeepsWindows(t *testing.T) {
	w := testWindow(0)
	w.Counters = append(w.Counters, profile.Counter{Event: "page-faults", PerCPU: profile.Counts{100, 200}})
	b := NewBuilder(testHeader(), map[uint64]profile.Stack{})
	b.Add(&w)
	m := b.Model(nil, false, "")
	if got := m.Series["page-faults"][0]; !reflect.DeepEqual(got, profile.Counts{101, 202}) {
		t.Errorf("series %v, want [101 202]", got)
	}
	if !reflect.DeepEqual(w.Counters[0].PerCPU, profile.Counts{1, 2}) {
		t.Errorf("the window's array was written: %v", w.Counters[0].PerCPU)
	}
}

// TestDropWindows: the model says which windows lost data, and the
// summary (inspect) and its words name them.
func TestDropWindows(t *testing.T) {
	b := NewBuilder(testHeader(), map[uint64]profile.Stack{})
	w0, w1, w2 := testWindow(0), testWindow(1), testWindow(2)
	w1.Drops = profile.Drops{SampleMapFull: 7}
	for _, w := range []*profile.Window{&w0, &w1, &w2} {
		b.Add(w)
	}
	m := b.Model(nil, false, "")
	want := []profile.WindowDrops{{Window: 1, Drops: profile.Drops{SampleMapFull: 7}}}
	if !reflect.DeepEqual(m.DropWindows, want) || !reflect.DeepEqual(m.Summary().DropWindows, want) {
		t.Errorf("drop windows %+v (summary %+v), want %+v", m.DropWindows, m.Summary().DropWindows, want)
	}
	if got, want := profile.DropWindowsString(m.DropWindows, m.Windows()), "data lost in 1 window of 3 (window 1: 7)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if got, want := m.Drops.String(), "7 samples lost (sample ring full)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	b = NewBuilder(testHeader(), map[uint64]profile.Stack{})
	b.Add(&w0)
	if m := b.Model(nil, false, ""); m.Summary().DropWindows == nil || len(m.DropWindows) != 0 || profile.DropWindowsString(m.DropWindows, 1) != "" {
		t.Errorf("a window without drops: %+v", m.DropWindows)
	}
}
