package promexporter

import (
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/cacheheat/cacheheat/collector"
	"github.com/cacheheat/cacheheat/profile"
)

func header() *profile.Header {
	h := &profile.Header{}
	h.Host.Topology.CPUs = []profile.CPU{{ID: 0, Node: 0}, {ID: 1, Node: 1}}
	h.Events = []profile.EventStatus{
		{Name: "cpu-clock", Status: profile.StatusMeasured},
		{Name: "page-faults", Status: profile.StatusMeasured},
		{Name: "LLC-load-misses", Status: profile.StatusUnsupported, Reason: "no hardware PMU"},
	}
	return h
}

// feed gives e one window with these cgroups beside it, as the recorder
// does.
func feed(e *Exporter, cgs ...collector.CgroupWindow) {
	e.Window(&profile.Window{Counters: []profile.Counter{
		{Event: "cpu-clock", HostPerCPU: []uint64{1e9, 2e9}},
		{Event: "page-faults", HostPerCPU: []uint64{10, 20}},
	}}, &collector.WindowExtras{Cgroups: cgs}, collector.Status{})
}

// cg is a cgroup's window with n page faults and n seconds of cpu-clock.
func cg(id uint64, path string, n uint64) collector.CgroupWindow {
	return collector.CgroupWindow{ID: id, Path: path, Counts: map[string]uint64{"page-faults": n, "cpu-clock": n * 1e9}}
}

// gather returns the exporter's metrics as families by name.
func gather(t *testing.T, e *Exporter) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

func cgroupsIn(f *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		var cg string
		for _, l := range m.GetLabel() {
			if l.GetName() == "cgroup" {
				cg = l.GetValue()
			}
		}
		out[cg] += m.GetCounter().GetValue()
	}
	return out
}

func TestCountersAccumulate(t *testing.T) {
	e := New(Options{Version: "test"})
	e.Header(*header())
	feed(e, cg(7, "/a.slice/docker-"+strings.Repeat("ab", 32)+".scope", 100))
	feed(e, cg(7, "/a.slice/docker-"+strings.Repeat("ab", 32)+".scope", 50))
	f := gather(t, e)
	// cpu-clock's nanoseconds are seconds under a name of their own,
	// never an event count.
	want := `
# HELP cacheheat_cpu_events_total Events counted on each CPU, all tasks (every event but cpu-clock, which is cacheheat_cpu_seconds_total).
# TYPE cacheheat_cpu_events_total counter
cacheheat_cpu_events_total{cpu="0",event="page-faults",node="0"} 20
cacheheat_cpu_events_total{cpu="1",event="page-faults",node="1"} 40
# HELP cacheheat_cpu_seconds_total Time the tasks ran on each CPU (the cpu-clock event), all tasks.
# TYPE cacheheat_cpu_seconds_total counter
cacheheat_cpu_seconds_total{cpu="0",node="0"} 2
cacheheat_cpu_seconds_total{cpu="1",node="1"} 4
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(want), "cacheheat_cpu_events_total", "cacheheat_cpu_seconds_total"); err != nil {
		t.Error(err)
	}
	m := f["cacheheat_cgroup_events_total"].GetMetric()
	if len(m) != 1 || m[0].GetCounter().GetValue() != 150 {
		t.Fatalf("cgroup counter: %v", m)
	}
	if s := f["cacheheat_cgroup_cpu_seconds_total"].GetMetric(); len(s) != 1 || s[0].GetCounter().GetValue() != 150 {
		t.Fatalf("cgroup CPU seconds: %v, want 150", s)
	}
	for _, l := range m[0].GetLabel() {
		if l.GetName() == "container" && l.GetValue() != strings.Repeat("ab", 32) {
			t.Errorf("container label %q", l.GetValue())
		}
	}
	if u := f["cacheheat_event_unsupported"].GetMetric(); len(u) != 1 {
		t.Errorf("unsupported events: %v", u)
	}
	if d := f["cacheheat_dropped_total"].GetMetric(); len(d) != len(dropReasons) {
		t.Errorf("dropped_total has %d reasons, want every one of %v", len(d), dropReasons)
	}
}

// Beyond MaxCgroups, cgroups are summed into "other"; a removed cgroup's
// series go away and its slot is free for the next one.
func TestCardinalityAndRemoval(t *testing.T) {
	e := New(Options{MaxCgroups: 2})
	e.Header(*header())
	feed(e, cg(1, "/a", 1), cg(2, "/b", 2), cg(3, "/c", 4), cg(4, "/d", 8))
	got := cgroupsIn(gather(t, e)["cacheheat_cgroup_events_total"])
	if len(got) != 3 || got["/a"] != 1 || got["/b"] != 2 || got[OtherCgroup] != 12 {
		t.Fatalf("with 2 slots: %v, want /a, /b and other=12", got)
	}
	gone := cg(1, "/a", 16)
	gone.Removed = true
	feed(e, gone)
	got = cgroupsIn(gather(t, e)["cacheheat_cgroup_events_total"])
	if _, ok := got["/a"]; ok {
		t.Fatalf("removed cgroup /a still exported: %v", got)
	}
	// /c, summed into other so far, takes the free slot with its new
	// counts; /e, behind it in the window, finds none.
	feed(e, cg(3, "/c", 64), cg(5, "/e", 32))
	got = cgroupsIn(gather(t, e)["cacheheat_cgroup_events_total"])
	if got["/c"] != 64 || got[OtherCgroup] != 12+32 || len(got) != 3 {
		t.Fatalf("after /a left: %v, want /b=2, /c=64 and other=44", got)
	}
}

// The classic buckets are the kernel's log2 counts summed below each
// power-of-two bound: nothing moves across a boundary.
func TestHistogramBuckets(t *testing.T) {
	e := New(Options{})
	e.Header(*header())
	w := cg(1, "/a", 1)
	// 3 values in [0,2) ns, 5 in [2^10, 2^11), 7 in [2^20, 2^21), 11 in
	// the last bucket (>= 2^39 ns, beyond every finite bound).
	w.Runq = make([]uint64, profile.HistBuckets)
	w.Runq[0], w.Runq[10], w.Runq[20], w.Runq[39] = 3, 5, 7, 11
	w.RunqNS = 12345
	feed(e, w)
	h := gather(t, e)["cacheheat_runqueue_latency_seconds"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 26 || h.GetSampleSum() != 12345e-9 {
		t.Fatalf("count %d sum %g", h.GetSampleCount(), h.GetSampleSum())
	}
	want := map[float64]uint64{}
	for i := firstBound; i <= lastBound; i += boundStep {
		le := float64(uint64(1)<<i) / 1e9
		switch {
		case i <= 10:
			want[le] = 3 // bucket 10 ends at 2^11
		case i <= 20:
			want[le] = 8
		default:
			want[le] = 15
		}
	}
	for _, b := range h.GetBucket() {
		if want[b.GetUpperBound()] != b.GetCumulativeCount() {
			t.Errorf("le=%g: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want[b.GetUpperBound()])
		}
	}
	if len(h.GetBucket()) != 13 {
		t.Errorf("%d buckets, want 13 (2^10 to 2^34 ns, factors of 4)", len(h.GetBucket()))
	}
	if off := gather(t, e)["cacheheat_offcpu_seconds"]; off != nil {
		t.Errorf("off-CPU histograms without counts: %v", off)
	}
}

// Events counted by a simulated PMU's stand-ins say so; real ones do not.
func TestSimulatedEvents(t *testing.T) {
	e := New(Options{})
	h := header()
	h.PMU = &profile.PMU{Simulated: "intel-icx"}
	h.Events = append(h.Events, profile.EventStatus{Name: "LLC-loads", Status: profile.StatusMeasured, Simulated: true})
	e.Header(*h)
	got := gather(t, e)["cacheheat_event_simulated"].GetMetric()
	if len(got) != 1 {
		t.Fatalf("simulated events: %v, want LLC-loads only", got)
	}
	for _, l := range got[0].GetLabel() {
		if (l.GetName() == "event" && l.GetValue() != "LLC-loads") || (l.GetName() == "pmu" && l.GetValue() != "intel-icx") {
			t.Errorf("label %s=%s", l.GetName(), l.GetValue())
		}
	}
	e2 := New(Options{})
	e2.Header(*header())
	if f := gather(t, e2)["cacheheat_event_simulated"]; f != nil {
		t.Errorf("a real PMU's events marked simulated: %v", f)
	}
}

// TestConcurrentScrapes: MaxScrapesInFlight scrapes at once are all
// answered (the limit was 4, and 167 of 200 concurrent scrapes got 503).
func TestConcurrentScrapes(t *testing.T) {
	h := fleetExporter(t).Handler()
	var wg sync.WaitGroup
	start := make(chan struct{})
	codes := make([]int, MaxScrapesInFlight)
	for i := range codes {
		wg.Go(func() {
			<-start
			req := httptest.NewRequest("GET", "/metrics", nil)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			codes[i] = rec.Code
		})
	}
	close(start)
	wg.Wait()
	for i, code := range codes {
		if code != 200 {
			t.Errorf("scrape %d of %d at once: status %d", i, len(codes), code)
		}
	}
}

// TestSharedGather: Gathers that come while one runs, or within its ttl,
// get its result: one gathering for a burst.
func TestSharedGather(t *testing.T) {
	var calls atomic.Int64
	slow := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		calls.Add(1)
		time.Sleep(50 * time.Millisecond)
		return nil, nil
	})
	g := &sharedGather{g: slow, ttl: time.Hour}
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() { g.Gather() })
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("%d gatherings for 32 concurrent scrapes, want 1", n)
	}
	g.ttl = 0
	g.Gather()
	if n := calls.Load(); n != 2 {
		t.Errorf("past the ttl: %d gatherings in all, want 2", n)
	}
}
