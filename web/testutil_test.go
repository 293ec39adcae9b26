package web

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/cacheheat/cacheheat/profile"
)

// evil is a process name and command line that would run script if any
// page inserted it unescaped.
const evil = `</script><script>alert(1)</script><img src=x onerror=alert(2)>"'&`

// testHeader is a two-CPU, one-node host recording a command whose name is
// hostile HTML.
func testHeader() profile.Header {
	return profile.Header{
		Tool:      "cacheheat test",
		StartTime: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC),
		Host: profile.Host{
			Hostname: "h1", Kernel: "6.18.0", CPUModel: "Test CPU", Vendor: "GenuineIntel", Mode: "software",
			Topology: profile.Topology{
				CPUs:  []profile.CPU{{ID: 0, Node: 0, L3: 0, Siblings: []int{0}}, {ID: 1, Node: 0, Core: 1, L3: 0, Siblings: []int{1}}},
				Nodes: []profile.Node{{ID: 0, CPUs: []int{0, 1}}},
			},
		},
		Target:   profile.Target{Kind: profile.TargetCommand, PIDs: []int{42}, Command: []string{evil, "run"}},
		Settings: profile.Settings{IntervalNS: 1e9, SampleHz: 99, SampleEvents: []string{"cpu-clock"}},
		Events: []profile.EventStatus{
			{Name: "cpu-clock", Kind: "software", Status: profile.StatusMeasured},
			{Name: "page-faults", Kind: "software", Status: profile.StatusMeasured},
		},
	}
}

func testWindow(i int) profile.Window {
	return profile.Window{
		StartNS: int64(i) * 1e9,
		EndNS:   int64(i+1) * 1e9,
		Counters: []profile.Counter{
			{Event: "cpu-clock", PerCPU: []uint64{uint64(900e6 + i), 100e6}, HostPerCPU: []uint64{1e9, 1e9}, Enabled: 2e9, Running: 2e9},
			{Event: "page-faults", PerCPU: []uint64{uint64(10 * i), 3}, HostPerCPU: []uint64{100, 50}, Enabled: 2e9, Running: 2e9},
		},
		Processes:  []profile.Process{{PID: 42, Comm: evil, Counts: map[string]uint64{"page-faults": uint64(10*i + 3)}}},
		Histograms: []profile.Histogram{{Name: profile.HistRunqLatency, Unit: "ns", PerCPU: []profile.Counts{{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 3}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}}}},
		Samples:    []profile.Sample{{Event: "cpu-clock", PID: 42, TID: 42, CPU: 0, UserStack: 1, Count: 90}},
		NewStacks:  []profile.Stack{{ID: 1, Frames: []profile.Frame{{Function: evil, Module: "/bin/o3"}}}},
	}
}

// writeRecording writes a finished recording of n windows to dir/name.
func writeRecording(t *testing.T, dir, name string, n int) string {
	t.Helper()
	path := filepath.Join(dir, name)
	w, err := profile.Create(path, testHeader())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		win := testWindow(i)
		if err := w.WriteWindow(&win); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(profile.Trailer{EndReason: profile.EndDuration, EndTime: time.Date(2026, 12, 2, 10, 0, n, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	return path
}
