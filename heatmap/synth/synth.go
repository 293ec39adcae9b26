// Package synth generates deterministic synthetic recordings for the
// report's tests and benchmarks. Its numbers are made up on purpose and
// are never shown as measurements: it exists so that report rendering
// (golden tests, the hostile-names test, bench/report.sh) can be exercised
// at any size without a kernel.
package synth

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cacheheat/cacheheat/profile"
)

// Options shape a synthetic recording.
type Options struct {
	CPUs     int           // logical CPUs, split evenly over Nodes
	Nodes    int           // NUMA nodes
	Windows  int           // number of windows
	Interval time.Duration // window length
	// Events are the measured counter events; Unsupported are listed as
	// unsupported (no PMU).
	Events      []string
	Unsupported []string
	Processes   int // target processes, two threads each
	// Names overrides process, thread and function names, used in turn:
	// the hostile-names test puts its payloads here.
	Names []string
	Seed  uint64
	// Format is the file format major version Write uses; 0 is the
	// current one. Benchmarks write version 1 to compare.
	Format int
}

// Default is a small recording: 4 CPUs on 2 nodes, 6 windows.
func Default() Options {
	return Options{
		CPUs: 4, Nodes: 2, Windows: 6, Interval: time.Second,
		Events:      []string{"cpu-clock", "page-faults", "context-switches", "cpu-migrations"},
		Unsupported: []string{"LLC-load-misses", "instructions"},
		Processes:   2, Seed: 1,
	}
}

// Big is the benchmark's recording: 1 h of 1 s windows on 128 CPUs with
// ten events.
func Big() Options {
	return Options{
		CPUs: 128, Nodes: 2, Windows: 3600, Interval: time.Second,
		Events: []string{"cpu-clock", "page-faults", "context-switches", "cpu-migrations", "cycles",
			"instructions", "cache-references", "cache-misses", "LLC-loads", "LLC-load-misses"},
		Processes: 8, Seed: 1,
	}
}

// Header builds the recording's header.
func Header(o Options) profile.Header {
	nodes := max(1, o.Nodes)
	var t profile.Topology
	for n := 0; n < nodes; n++ {
		t.Nodes = append(t.Nodes, profile.Node{ID: n})
	}
	// Two cores share an L3 domain of eight CPUs; SMT siblings are cpu
	// and cpu+CPUs/2, as on common x86 hosts.
	half := max(1, o.CPUs/2)
	coresPerNode := max(1, (half+nodes-1)/nodes)
	coresPerL3 := min(8, coresPerNode)
	for id := 0; id < o.CPUs; id++ {
		core := id % half
		node := min(core/coresPerNode, nodes-1)
		l3 := core / coresPerL3
		sib := []int{id}
		if o.CPUs > 1 {
			sib = []int{core, core + half}
		}
		t.CPUs = append(t.CPUs, profile.CPU{ID: id, Node: node, Package: node, Core: core, L3: l3, Siblings: sib})
		t.Nodes[node].CPUs = append(t.Nodes[node].CPUs, id)
	}
	l3s := map[int][]int{}
	for _, c := range t.CPUs {
		l3s[c.L3] = append(l3s[c.L3], c.ID)
		t.Caches = append(t.Caches, profile.Cache{Level: 1, Type: "Data", ID: c.Core, SizeBytes: 48 << 10, LineSize: 64, Ways: 12, SharedCPUs: c.Siblings})
	}
	for id := 0; id < len(l3s); id++ {
		t.Caches = append(t.Caches, profile.Cache{Level: 3, Type: "Unified", ID: id, SizeBytes: 32 << 20, LineSize: 64, Ways: 16, SharedCPUs: l3s[id]})
	}
	// L1 caches are per core: keep one entry per core.
	seen := map[int]bool{}
	caches := t.Caches[:0]
	for _, c := range t.Caches {
		if c.Level == 1 {
			if seen[c.ID] {
				continue
			}
			seen[c.ID] = true
		}
		caches = append(caches, c)
	}
	t.Caches = caches
	h := profile.Header{
		Tool:      "cacheheat synth",
		StartTime: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Host: profile.Host{Hostname: "synth-host", Kernel: "6.18.0-synth", CPUModel: "Synthetic CPU @ 3.0GHz",
			Vendor: "GenuineIntel", Family: 6, Model: 143, Mode: "software", Topology: t},
		Target:   profile.Target{Kind: profile.TargetCommand, PIDs: []int{1000}, Command: []string{"o3-synth", "--threads", "2"}},
		Settings: profile.Settings{IntervalNS: int64(o.Interval), SampleHz: 99, SampleEvents: []string{"cpu-clock"}},
	}
	for _, e := range o.Events {
		kind := "hardware"
		switch e {
		case "cpu-clock", "page-faults", "context-switches", "cpu-migrations", "major-faults":
			kind = "software"
		}
		h.Events = append(h.Events, profile.EventStatus{Name: e, Kind: kind, Status: profile.StatusMeasured})
	}
	for _, e := range o.Unsupported {
		h.Events = append(h.Events, profile.EventStatus{Name: e, Kind: "hardware", Status: profile.StatusUnsupported,
			Errno: "ENOENT", Reason: "no hardware PMU exposed by this host"})
	}
	if len(o.Names) > 0 {
		h.Target.Command = append([]string{o.Names[0]}, o.Names...)
	}
	return h
}

// gen holds the generator's state between windows.
type gen struct {
	o      Options
	r      *rand.Rand
	stacks []profile.Stack
	pids   []int
}

func newGen(o Options) *gen {
	g := &gen{o: o, r: rand.New(rand.NewPCG(o.Seed, 0x5eed))}
	name := func(i int, def string) string {
		if len(o.Names) > 0 {
			return o.Names[i%len(o.Names)]
		}
		return def
	}
	// A pool of user stacks over a small call tree, and one kernel stack.
	funcs := []string{"main.main", "main.run", "main.worker", "main.hot", "runtime.memmove", "main.cold", "main.lookup", "main.hash"}
	id := uint64(1)
	for a := 2; a < len(funcs); a++ {
		for b := 2; b < len(funcs); b++ {
			fr := []profile.Frame{
				{Function: name(a*8+b, funcs[b]), Module: "/usr/bin/o3-synth"},
				{Function: funcs[a], Module: "/usr/bin/o3-synth"},
				{Function: funcs[1], Module: "/usr/bin/o3-synth"},
				{Function: funcs[0], Module: "/usr/bin/o3-synth"},
			}
			if b == a {
				fr[0] = profile.Frame{Module: "/usr/lib/libc.so.6", Offset: 0x9a000 + uint64(b)}
			}
			g.stacks = append(g.stacks, profile.Stack{ID: id, Frames: fr})
			id++
		}
	}
	g.stacks = append(g.stacks, profile.Stack{ID: id, Kernel: true, Frames: []profile.Frame{
		{Function: "clear_page_erms", Module: "[kernel]"}, {Function: "do_anonymous_page", Module: "[kernel]"}}})
	for p := 0; p < max(1, o.Processes); p++ {
		g.pids = append(g.pids, 1000+p*10)
	}
	return g
}

// window builds window i. Each CPU's load follows a slow wave with noise
// so the heatmaps have structure to look at.
func (g *gen) window(i int) profile.Window {
	o := g.o
	iv := int64(o.Interval)
	w := profile.Window{StartNS: int64(i) * iv, EndNS: int64(i+1) * iv}
	load := make([]float64, o.CPUs)
	for c := range load {
		phase := float64((i/30+c)%16) / 16
		load[c] = 0.2 + 0.7*phase*phase + 0.1*g.r.Float64()
	}
	for ei, e := range o.Events {
		pc := make([]uint64, o.CPUs)
		hc := make([]uint64, o.CPUs)
		for c := range pc {
			base := float64(iv) // cpu-clock counts ns
			switch e {
			case "cpu-clock":
			case "page-faults":
				base = 2e4
			case "context-switches", "cpu-migrations":
				base = 5e3 / float64(ei+1)
			default:
				base = 1e9 / float64(ei+1)
			}
			pc[c] = uint64(base * load[c] * float64(o.Interval) / float64(time.Second))
			hc[c] = pc[c] + uint64(base*0.05)
		}
		w.Counters = append(w.Counters, profile.Counter{Event: e, PerCPU: pc, HostPerCPU: hc,
			Enabled: uint64(iv) * uint64(o.CPUs), Running: uint64(iv) * uint64(o.CPUs)})
	}
	name := func(k int, def string) string {
		if len(o.Names) > 0 {
			return o.Names[k%len(o.Names)]
		}
		return def
	}
	for k, pid := range g.pids {
		counts := map[string]uint64{}
		for _, e := range o.Events {
			counts[e] = uint64(1000 * (k + 1) * (i%7 + 1))
		}
		p := profile.Process{PID: pid, Comm: name(k, fmt.Sprintf("o3-synth-%d", k)), Counts: counts,
			Cmdline: []string{"/usr/bin/o3-synth", name(k+1, "--worker"), fmt.Sprint(k)}}
		for t := 0; t < 2; t++ {
			tc := map[string]uint64{}
			for e, v := range counts {
				tc[e] = v / 2
			}
			p.Threads = append(p.Threads, profile.Thread{TID: pid + t, Comm: name(k+t, fmt.Sprintf("worker-%d", t)), Counts: tc})
		}
		w.Processes = append(w.Processes, p)
	}
	for _, hn := range []string{profile.HistRunqLatency, profile.HistOffCPU} {
		h := profile.Histogram{Name: hn, Unit: "ns", PerCPU: make([]profile.Counts, o.CPUs)}
		centre := 11
		if hn == profile.HistOffCPU {
			centre = 18
		}
		centre += (i / 20) % 4
		for c := range h.PerCPU {
			b := make([]uint64, centre+5)
			for j := centre - 4; j < centre+5; j++ {
				d := j - centre
				b[j] = uint64(float64(int(200)>>uint(d*d/2)) * load[c])
			}
			h.PerCPU[c] = b
		}
		w.Histograms = append(w.Histograms, h)
	}
	defined := map[uint64]bool{}
	for c := 0; c < o.CPUs; c++ {
		n := int(99 * load[c] * float64(o.Interval) / float64(time.Second))
		for n > 0 {
			st := g.stacks[g.r.IntN(len(g.stacks)-1)]
			cnt := min(n, 1+g.r.IntN(40))
			n -= cnt
			s := profile.Sample{Event: "cpu-clock", PID: g.pids[c%len(g.pids)], TID: g.pids[c%len(g.pids)], CPU: c, UserStack: st.ID, Count: uint64(cnt)}
			if g.r.IntN(5) == 0 {
				s.KernelStack = g.stacks[len(g.stacks)-1].ID
			}
			w.Samples = append(w.Samples, s)
			for _, id := range []uint64{s.UserStack, s.KernelStack} {
				if id != 0 && !defined[id] {
					defined[id] = true
					w.NewStacks = append(w.NewStacks, g.stacks[id-1])
				}
			}
		}
	}
	w.SampleRate = []profile.SampleRate{{Event: "cpu-clock", Requested: 99, Achieved: 99 * 0.6, Samples: uint64(len(w.Samples))}}
	if i%10 == 9 {
		w.Drops.StackErrors = 1
	}
	return w
}

// Recording builds a synthetic recording in memory, as profile.Read would
// return it.
func Recording(o Options) *profile.Recording {
	g := newGen(o)
	rec := &profile.Recording{Header: Header(o), Stacks: map[uint64]profile.Stack{}}
	rec.Header.FormatVersion = fmt.Sprintf("%d.%d", profile.FormatMajor, profile.FormatMinor)
	for i := 0; i < o.Windows; i++ {
		w := g.window(i)
		w.Index = i
		for _, s := range w.NewStacks {
			rec.Stacks[s.ID] = s
		}
		rec.Windows = append(rec.Windows, w)
	}
	rec.Trailer = trailer(o)
	return rec
}

func trailer(o Options) *profile.Trailer {
	t := &profile.Trailer{EndReason: profile.EndDuration, EndTime: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(o.Windows) * o.Interval), Windows: o.Windows}
	for i := 9; i < o.Windows; i += 10 {
		t.Drops.StackErrors++
	}
	return t
}

// Write streams a synthetic recording to path with profile's writer, one
// window at a time, so very long recordings never sit in memory whole.
func Write(path string, o Options) error {
	format := o.Format
	if format == 0 {
		format = profile.FormatMajor
	}
	w, err := profile.CreateVersion(path, Header(o), format)
	if err != nil {
		return err
	}
	g := newGen(o)
	for i := 0; i < o.Windows; i++ {
		win := g.window(i)
		if err := w.WriteWindow(&win); err != nil {
			w.Abort()
			return err
		}
	}
	return w.Close(*trailer(o))
}
