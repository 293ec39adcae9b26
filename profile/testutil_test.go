package profile

import (
	"fmt"
	"time"
)

// testHeader is a small two-CPU, one-node host.
func testHeader() Header {
	return Header{
		Tool:      "cacheheat test",
		StartTime: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC),
		Host: Host{
			Hostname: "h1", Kernel: "6.18.0", CPUModel: "Test CPU", Vendor: "GenuineIntel",
			Family: 6, Model: 85, Mode: "software",
			Topology: Topology{
				CPUs:   []CPU{{ID: 0, Node: 0, Core: 0, L3: 0, Siblings: []int{0}}, {ID: 1, Node: 0, Core: 1, L3: 0, Siblings: []int{1}}},
				Nodes:  []Node{{ID: 0, CPUs: []int{0, 1}}},
				Caches: []Cache{{Level: 3, Type: "Unified", ID: 0, SizeBytes: 32 << 20, LineSize: 64, SharedCPUs: []int{0, 1}}},
			},
		},
		Target:   Target{Kind: TargetCommand, PIDs: []int{42}, Command: []string{"o3", "run"}},
		Settings: Settings{IntervalNS: 1e9, SampleHz: 99, SampleEvents: []string{"cpu-clock"}},
		Events: []EventStatus{
			{Name: "cpu-clock", Kind: "software", Status: StatusMeasured},
			{Name: "page-faults", Kind: "software", Status: StatusMeasured},
			{Name: "LLC-load-misses", Kind: "cache", Status: StatusUnsupported, Errno: "ENOENT", Reason: "no hardware PMU exposed"},
		},
	}
}

// testWindow is window i with one stack per window and the first stack
// shared by all windows (so later windows must not redefine it).
func testWindow(i int) Window {
	return Window{
		StartNS: int64(i) * 1e9,
		EndNS:   int64(i+1) * 1e9,
		Counters: []Counter{
			{Event: "cpu-clock", PerCPU: []uint64{uint64(900e6 + i), 100e6}, HostPerCPU: []uint64{1e9, 1e9}, Enabled: 2e9, Running: 2e9},
			{Event: "page-faults", PerCPU: []uint64{uint64(10 * i), 3}, HostPerCPU: []uint64{100, 50}, Enabled: 2e9, Running: 2e9},
		},
		Processes: []Process{{PID: 42, Comm: "o3-test", Counts: map[string]uint64{"page-faults": uint64(10*i + 3)},
			Threads: []Thread{{TID: 42, Comm: "o3-test", Counts: map[string]uint64{"page-faults": uint64(10*i + 3)}}}}},
		Histograms: []Histogram{{Name: HistRunqLatency, Unit: "ns", PerCPU: []Counts{{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 3}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}}}},
		Samples: []Sample{
			{Event: "cpu-clock", PID: 42, TID: 42, CPU: 0, UserStack: 1, Count: 90},
			{Event: "cpu-clock", PID: 42, TID: 42, CPU: 1, UserStack: uint64(100 + i), KernelStack: 2, Count: 9},
		},
		NewStacks: []Stack{
			{ID: 1, Frames: []Frame{{Function: "main.work", Module: "/bin/o3"}, {Function: "main.main", Module: "/bin/o3"}}},
			{ID: 2, Kernel: true, Frames: []Frame{{Function: "clear_page_erms", Module: "[kernel]"}}},
			{ID: uint64(100 + i), Frames: []Frame{{Module: "/lib/libc.so.6", Offset: uint64(0x1000 + i)}, {Function: fmt.Sprintf("main.f%d", i), Module: "/bin/o3"}}},
		},
		SampleRate: []SampleRate{{Event: "cpu-clock", Requested: 99, Achieved: 49.5, Samples: 99}},
		Drops:      Drops{StackErrors: uint64(i)},
		AppMetrics: map[string]float64{"ops_per_sec": 1000 + float64(i)},
	}
}
