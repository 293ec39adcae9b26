package promexporter

import (
	"fmt"
	"io"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/cacheheat/cacheheat/collector"
	"github.com/cacheheat/cacheheat/profile"
)

// fleetExporter is an exporter that has seen windows of 500 cgroups on a
// 16-CPU, 2-node host with 5 software events, every cgroup with run-queue
// latencies and off-CPU time of every reason: the size the issue sets for
// a scrape (BENCHMARKS.md, "Exporter").
func fleetExporter(b testing.TB) *Exporter {
	e := New(Options{Version: "bench"})
	h := &profile.Header{}
	events := []string{"cpu-clock", "page-faults", "major-faults", "context-switches", "cpu-migrations"}
	for cpu := range 16 {
		h.Host.Topology.CPUs = append(h.Host.Topology.CPUs, profile.CPU{ID: cpu, Node: cpu / 8})
	}
	for _, ev := range events {
		h.Events = append(h.Events, profile.EventStatus{Name: ev, Status: profile.StatusMeasured})
	}
	for _, ev := range []string{"cycles", "instructions", "LLC-loads", "LLC-load-misses"} {
		h.Events = append(h.Events, profile.EventStatus{Name: ev, Status: profile.StatusUnsupported, Reason: "no hardware PMU"})
	}
	e.Header(*h)
	w := &profile.Window{}
	x := &collector.WindowExtras{}
	for _, ev := range events {
		c := profile.Counter{Event: ev, HostPerCPU: make([]uint64, 16)}
		for i := range c.HostPerCPU {
			c.HostPerCPU[i] = uint64(1000 + i)
		}
		w.Counters = append(w.Counters, c)
	}
	for i := range 500 {
		cw := collector.CgroupWindow{ID: uint64(1000 + i), Path: fmt.Sprintf("/kubepods.slice/pod%d.slice/cri-containerd-%064x.scope", i, i), Counts: map[string]uint64{}}
		for _, ev := range events {
			cw.Counts[ev] = uint64(i + 1)
		}
		cw.Runq = make([]uint64, 30)
		for j := range cw.Runq {
			cw.Runq[j] = uint64(j)
		}
		for r := range cw.OffCPU {
			cw.OffCPU[r] = cw.Runq
		}
		x.Cgroups = append(x.Cgroups, cw)
	}
	e.Window(w, x, collector.Status{})
	return e
}

// BenchmarkScrape500Cgroups16CPUs is one /metrics request as Prometheus
// sends it (text format, gzip accepted), and without compression.
func BenchmarkScrape500Cgroups16CPUs(b *testing.B) {
	h := fleetExporter(b).Handler()
	for _, enc := range []string{"gzip", "identity"} {
		b.Run(enc, func(b *testing.B) {
			var size int
			for b.Loop() {
				req := httptest.NewRequest("GET", "/metrics", nil)
				req.Header.Set("Accept", "text/plain;version=0.0.4")
				req.Header.Set("Accept-Encoding", enc)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatalf("status %d", rec.Code)
				}
				size = rec.Body.Len()
				io.Discard.Write(rec.Body.Bytes())
			}
			b.ReportMetric(float64(size), "bytes/scrape")
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heapMiB")
		})
	}
}
