package profile

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkWriteWindow is the recorder's cost of writing one window of a
// 128-CPU host (five events, both histograms, 400 sample rows over the
// same 40 stacks) in each format:
//
//	go test ./profile -run '^$' -bench WriteWindow -benchmem
func BenchmarkWriteWindow(b *testing.B) {
	const cpus = 128
	win := Window{EndNS: 1e9}
	for e := range 5 {
		pc, hc := make(Counts, cpus), make(Counts, cpus)
		for c := range pc {
			pc[c] = uint64(1e6*(e+1) + c*7919)
			hc[c] = pc[c] + 1000
		}
		win.Counters = append(win.Counters, Counter{Event: fmt.Sprint("event-", e), PerCPU: pc, HostPerCPU: hc, Enabled: 1e9, Running: 1e9})
	}
	for _, name := range []string{HistRunqLatency, HistOffCPU} {
		h := Histogram{Name: name, Unit: "ns", PerCPU: make([]Counts, cpus)}
		for c := range h.PerCPU {
			h.PerCPU[c] = Counts{0, 0, 0, 0, 0, 0, 0, 0, 3, 9, 27, uint64(c), 4, 1}
		}
		win.Histograms = append(win.Histograms, h)
	}
	for i := range 400 {
		win.Samples = append(win.Samples, Sample{Event: "cpu-clock", PID: 1000 + i%8, TID: 1000 + i%16, CPU: i % cpus, UserStack: uint64(1 + i%40), Count: uint64(1 + i%5)})
	}
	for id := range 40 {
		win.NewStacks = append(win.NewStacks, Stack{ID: uint64(1 + id), Frames: []Frame{
			{Function: fmt.Sprint("main.f", id), Module: "/usr/bin/app", Offset: uint64(0x1000 + id)},
			{Function: "main.run", Module: "/usr/bin/app", Offset: 0x900},
			{Function: "main.main", Module: "/usr/bin/app", Offset: 0x800},
		}})
	}
	for _, major := range []int{1, 2} {
		b.Run(fmt.Sprint("v", major), func(b *testing.B) {
			w, err := CreateVersion(filepath.Join(b.TempDir(), "b.rec"), testHeader(), major)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Abort()
			for b.Loop() {
				c := win
				if err := w.WriteWindow(&c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
