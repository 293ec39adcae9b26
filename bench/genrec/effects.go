package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cacheheat/cacheheat/profile"
)

// The synthetic host of the effects: a two-socket Ice Lake-SP server cut
// down to 8 CPUs (4 per socket, one NUMA node and one L3 per socket), with
// every event the hardware rules read. Rates are per CPU per second.
const (
	effectCPUs    = 8
	effectNodes   = 2
	effectWindows = 6
	effectHz      = 99
	effectPID     = 1000
)

var effectEvents = []struct{ name, kind string }{
	{"instructions", "hardware"}, {"cycles", "hardware"},
	{"L1-dcache-loads", "cache"}, {"L1-dcache-load-misses", "cache"},
	{"LLC-loads", "cache"}, {"LLC-load-misses", "cache"}, {"LLC-stores", "cache"},
	{"dTLB-load-misses", "cache"}, {"node-loads", "cache"}, {"node-load-misses", "cache"},
	{"mem_load_l3_hit_retired.xsnp_hitm", "raw"},
	{"cpu-clock", "software"}, {"page-faults", "software"}, {"context-switches", "software"}, {"cpu-migrations", "software"},
}

// baseline is a healthy program: IPC ~1 at 2 GHz, an L1 miss ratio under
// 2%, 0.25 LLC misses per 1000 instructions, 5% remote loads, almost no
// HITM, few faults, switches and migrations.
var baseline = map[string]float64{
	"instructions": 2e9, "cycles": 2e9,
	"L1-dcache-loads": 6e8, "L1-dcache-load-misses": 1e7,
	"LLC-loads": 5e6, "LLC-load-misses": 5e5, "LLC-stores": 1e6,
	"dTLB-load-misses": 2e5,
	"node-loads":       5e5, "node-load-misses": 2.5e4,
	"mem_load_l3_hit_retired.xsnp_hitm": 1e4,
	"cpu-clock":                         1e9, "page-faults": 100, "context-switches": 10, "cpu-migrations": 1,
}

// effect changes the baseline so that one rule's condition holds, clearly
// past each threshold (docs/ATTRIBUTION.md) and inside the others'.
type effect struct {
	name string
	desc string
	// rates overrides the baseline for some CPUs (nil: all CPUs).
	cpus  []int
	rates map[string]float64
	// hotCPU, when >= 0, takes nearly all stack samples.
	hotCPU int
}

var effects = []effect{
	{name: "none", desc: "a healthy program: no rule's condition holds", hotCPU: -1},
	{name: "l1-bandwidth-contention", desc: "one core takes 93% of the samples and misses L1 on 83% of its loads while writing little back",
		cpus: []int{0}, rates: map[string]float64{"L1-dcache-load-misses": 5e8}, hotCPU: 0},
	{name: "l3-writeback-congestion", desc: "the four cores of node 0 miss the LLC on half their loads and write back twice what they load",
		cpus: []int{0, 1, 2, 3}, rates: map[string]float64{"LLC-load-misses": 2.5e6, "LLC-stores": 1e7}, hotCPU: -1},
	{name: "llc-thrashing", desc: "every core misses the LLC on 70% of its loads, 7 misses per 1000 instructions",
		rates: map[string]float64{"LLC-loads": 2e7, "LLC-load-misses": 1.4e7}, hotCPU: -1},
	{name: "remote-numa", desc: "half of all loads from memory are served by the other node",
		rates: map[string]float64{"node-loads": 2e6, "node-load-misses": 1e6}, hotCPU: -1},
	{name: "dtlb-pressure", desc: "2.5 dTLB misses per 1000 instructions on every core",
		rates: map[string]float64{"dTLB-load-misses": 5e6}, hotCPU: -1},
	{name: "false-sharing", desc: "two threads on two cores of different sockets load lines the other modified, 2.5 HITM per 1000 instructions each",
		cpus: []int{1, 5}, rates: map[string]float64{"mem_load_l3_hit_retired.xsnp_hitm": 5e6}, hotCPU: -1},
}

func effectNames() []string {
	var out []string
	for _, e := range effects {
		out = append(out, e.name)
	}
	return out
}

func findEffect(name string) (effect, error) {
	for _, e := range effects {
		if e.name == name {
			return e, nil
		}
	}
	return effect{}, fmt.Errorf("unknown effect %q; known: %s", name, strings.Join(effectNames(), ", "))
}

// effectRecording builds the recording of an effect.
func effectRecording(name string) (profile.Header, []*profile.Window, error) {
	e, err := findEffect(name)
	if err != nil {
		return profile.Header{}, nil, err
	}
	h := effectHeader(e)
	rate := func(ev string, cpu int) float64 {
		if v, ok := e.rates[ev]; ok && (e.cpus == nil || slices.Contains(e.cpus, cpu)) {
			return v
		}
		return baseline[ev]
	}
	stack := profile.Stack{ID: 1, Frames: []profile.Frame{{Function: "effect_loop", Module: "o3-effect"}, {Function: "main", Module: "o3-effect"}}}
	var wins []*profile.Window
	for i := range effectWindows {
		w := &profile.Window{Index: i, StartNS: int64(i) * 1e9, EndNS: int64(i+1) * 1e9}
		if i == 0 {
			w.NewStacks = []profile.Stack{stack}
		}
		p := profile.Process{PID: effectPID, Comm: "o3-effect", Counts: map[string]uint64{}}
		threads := make([]profile.Thread, effectCPUs)
		for cpu := range effectCPUs {
			threads[cpu] = profile.Thread{TID: effectPID + cpu, Comm: "o3-effect", Counts: map[string]uint64{}}
		}
		for _, ev := range effectEvents {
			c := profile.Counter{Event: ev.name, PerCPU: make(profile.Counts, effectCPUs), HostPerCPU: make(profile.Counts, effectCPUs),
				Enabled: effectCPUs * 1e9, Running: effectCPUs * 1e9}
			for cpu := range effectCPUs {
				v := uint64(rate(ev.name, cpu))
				c.PerCPU[cpu], c.HostPerCPU[cpu] = v, v
				p.Counts[ev.name] += v
				threads[cpu].Counts[ev.name] = v
			}
			w.Counters = append(w.Counters, c)
		}
		p.Threads = threads
		w.Processes = []profile.Process{p}
		// Short run-queue waits (4-8 us) and sleeps of 1-2 ms, five
		// of each per CPU and window: no saturation, no blocking.
		for _, hname := range []string{profile.HistRunqLatency, profile.HistOffCPU} {
			bucket := 12
			if hname == profile.HistOffCPU {
				bucket = 20
			}
			hist := profile.Histogram{Name: hname, Unit: "ns", PerCPU: make([]profile.Counts, effectCPUs)}
			for cpu := range effectCPUs {
				b := make(profile.Counts, bucket+1)
				b[bucket] = 5
				hist.PerCPU[cpu] = b
			}
			w.Histograms = append(w.Histograms, hist)
		}
		var fires float64
		for cpu := range effectCPUs {
			n := uint64(effectHz)
			if e.hotCPU >= 0 && cpu != e.hotCPU {
				n = 1
			}
			fires += float64(n)
			w.Samples = append(w.Samples, profile.Sample{Event: "cpu-clock", PID: effectPID, TID: effectPID + cpu, CPU: cpu, UserStack: stack.ID, Count: n})
		}
		sort.Slice(w.Samples, func(a, b int) bool { return w.Samples[a].Count > w.Samples[b].Count })
		w.SampleRate = []profile.SampleRate{{Event: "cpu-clock", Requested: effectHz, Achieved: fires / effectCPUs, Samples: uint64(fires)}}
		wins = append(wins, w)
	}
	return h, wins, nil
}

func effectHeader(e effect) profile.Header {
	var t profile.Topology
	per := effectCPUs / effectNodes
	for n := range effectNodes {
		node := profile.Node{ID: n}
		var shared []int
		for c := n * per; c < (n+1)*per; c++ {
			node.CPUs = append(node.CPUs, c)
			shared = append(shared, c)
			t.CPUs = append(t.CPUs, profile.CPU{ID: c, Node: n, Package: n, Core: c - n*per, L3: n, Siblings: []int{c}})
			t.Caches = append(t.Caches, profile.Cache{Level: 2, Type: "Unified", ID: c, SizeBytes: 1280 << 10, LineSize: 64, Ways: 20, SharedCPUs: []int{c}})
		}
		t.Nodes = append(t.Nodes, node)
		t.Caches = append(t.Caches, profile.Cache{Level: 3, Type: "Unified", ID: n, SizeBytes: 54 << 20, LineSize: 64, Ways: 12, SharedCPUs: shared})
	}
	h := profile.Header{
		Tool:      "cacheheat genrec",
		StartTime: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Host: profile.Host{Hostname: "genrec", Kernel: "synthetic", CPUModel: "Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz (synthetic)",
			Vendor: "GenuineIntel", Family: 6, Model: 0x6a, Stepping: 6, Mode: "hardware", Topology: t},
		Target:    profile.Target{Kind: profile.TargetCommand, PIDs: []int{effectPID}, Command: []string{"o3-effect", e.name}},
		Settings:  profile.Settings{IntervalNS: int64(time.Second), SampleHz: effectHz, SampleEvents: []string{"cpu-clock"}},
		Synthetic: fmt.Sprintf("bench/genrec --effect %s: invented counts that show %s; not a measurement", e.name, e.desc),
	}
	for _, ev := range effectEvents {
		h.Events = append(h.Events, profile.EventStatus{Name: ev.name, Kind: ev.kind, Status: profile.StatusMeasured})
	}
	return h
}

// writeEffect writes an effect's recording to path.
func writeEffect(path, name string) error {
	h, wins, err := effectRecording(name)
	if err != nil {
		return err
	}
	w, err := profile.Create(path, h)
	if err != nil {
		return err
	}
	for _, win := range wins {
		if err := w.WriteWindow(win); err != nil {
			w.Abort()
			return err
		}
	}
	return w.Close(profile.Trailer{EndReason: profile.EndDuration, EndTime: h.StartTime.Add(effectWindows * time.Second), Windows: effectWindows})
}
