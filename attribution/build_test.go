package attribution

import (
	"testing"

	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/profile"
)

// Recordings for the rule tests are built in code: each states the exact
// counts a rule's threshold is about, which a real run cannot pin down.

const second = int64(1e9)

// hwEvents are the hardware events a PMU host would measure.
var hwEvents = []string{
	metric.Instructions, metric.L1DLoads, metric.L1DLoadMisses, metric.LLCLoads, metric.LLCLoadMisses, metric.LLCStores,
	metric.NodeLoads, metric.NodeLoadMisses, metric.DTLBLoadMisses, metric.HITMEvents[0],
}

// swEvents are the software events every host measures.
var swEvents = []string{metric.CPUClock, metric.PageFaults, metric.ContextSwitches, metric.CPUMigrations}

type builder struct {
	t   *testing.T
	rec *profile.Recording
}

// newRec builds a recording of n one-second windows on ncpu CPUs of one
// node, with the given events measured (hardware ones as on a PMU host).
func newRec(t *testing.T, ncpu, n int, measured ...string) *builder {
	t.Helper()
	h := profile.Header{
		FormatVersion: "1.0",
		Host:          profile.Host{Hostname: "test", Mode: "hardware"},
		Target:        profile.Target{Kind: profile.TargetPID, PIDs: []int{100}},
		Settings:      profile.Settings{IntervalNS: second, SampleHz: 100, SampleEvents: []string{metric.CPUClock}},
	}
	node := profile.Node{ID: 0}
	for c := 0; c < ncpu; c++ {
		h.Host.Topology.CPUs = append(h.Host.Topology.CPUs, profile.CPU{ID: c, Node: 0, Core: c, L3: 0, Siblings: []int{c}})
		node.CPUs = append(node.CPUs, c)
	}
	h.Host.Topology.Nodes = []profile.Node{node}
	for _, e := range measured {
		h.Events = append(h.Events, profile.EventStatus{Name: e, Kind: "hardware", Status: profile.StatusMeasured})
	}
	rec := &profile.Recording{Header: h, Stacks: map[uint64]profile.Stack{}}
	for i := 0; i < n; i++ {
		rec.Windows = append(rec.Windows, profile.Window{Index: i, StartNS: int64(i) * second, EndNS: int64(i+1) * second})
	}
	rec.Trailer = &profile.Trailer{EndReason: profile.EndDuration, Windows: n}
	return &builder{t: t, rec: rec}
}

// software marks the recording as made on a host without a PMU: every
// hardware event unsupported with the kernel's reason.
func (b *builder) software() *builder {
	b.rec.Header.Host.Mode = "software"
	for _, e := range hwEvents {
		b.rec.Header.Events = append(b.rec.Header.Events, profile.EventStatus{
			Name: e, Kind: "hardware", Status: profile.StatusUnsupported, Errno: "ENOENT",
			Reason: "no hardware PMU (perf_event_open: ENOENT)",
		})
	}
	return b
}

// counter sets an event's per-CPU counts in every window (or only the
// listed ones).
func (b *builder) counter(event string, perCPU []uint64, windows ...int) *builder {
	for _, i := range b.windows(windows) {
		w := &b.rec.Windows[i]
		found := false
		for j := range w.Counters {
			if w.Counters[j].Event == event {
				w.Counters[j].PerCPU = perCPU
				found = true
			}
		}
		if !found {
			w.Counters = append(w.Counters, profile.Counter{Event: event, PerCPU: perCPU})
		}
	}
	return b
}

// samples adds n cpu-clock samples on a CPU in every window (or the listed
// ones), in function fn.
func (b *builder) samples(cpu int, n uint64, fn string, windows ...int) *builder {
	id := uint64(len(b.rec.Stacks) + 1)
	for sid, s := range b.rec.Stacks {
		if s.Frames[0].Function == fn {
			id = sid
		}
	}
	b.rec.Stacks[id] = profile.Stack{ID: id, Frames: []profile.Frame{{Function: fn, Module: "/bin/target"}}}
	for _, i := range b.windows(windows) {
		w := &b.rec.Windows[i]
		w.Samples = append(w.Samples, profile.Sample{Event: metric.CPUClock, PID: 100, TID: 100, CPU: cpu, UserStack: id, Count: n})
	}
	return b
}

// hist adds count values in a log2 bucket on a CPU to a histogram in
// every window (or the listed ones).
func (b *builder) hist(name string, cpu, bucket int, count uint64, windows ...int) *builder {
	for _, i := range b.windows(windows) {
		w := &b.rec.Windows[i]
		var h *profile.Histogram
		for j := range w.Histograms {
			if w.Histograms[j].Name == name {
				h = &w.Histograms[j]
			}
		}
		if h == nil {
			w.Histograms = append(w.Histograms, profile.Histogram{Name: name, Unit: "ns"})
			h = &w.Histograms[len(w.Histograms)-1]
		}
		for len(h.PerCPU) <= cpu {
			h.PerCPU = append(h.PerCPU, make([]uint64, profile.HistBuckets))
		}
		h.PerCPU[cpu][bucket] += count
	}
	return b
}

// threads lists n threads of process 100 in every window with the given
// per-thread counts.
func (b *builder) threads(n int, counts map[string]uint64) *builder {
	for i := range b.rec.Windows {
		p := profile.Process{PID: 100, Comm: "target", Counts: map[string]uint64{}}
		for t := 0; t < n; t++ {
			p.Threads = append(p.Threads, profile.Thread{TID: 100 + t, Comm: "target", Counts: counts})
			for k, v := range counts {
				p.Counts[k] += v
			}
		}
		b.rec.Windows[i].Processes = []profile.Process{p}
	}
	return b
}

func (b *builder) windows(list []int) []int {
	if len(list) > 0 {
		return list
	}
	all := make([]int, len(b.rec.Windows))
	for i := range all {
		all[i] = i
	}
	return all
}

// idle sets the CPUs' idle time (ns) in every window (or the listed
// ones). Windows without it get, in done, what the target left idle.
func (b *builder) idle(perCPU []uint64, windows ...int) *builder {
	for _, i := range b.windows(windows) {
		b.rec.Windows[i].IdleNS = perCPU
	}
	return b
}

// others adds n cpu-clock samples of a process that is not a target in
// every window.
func (b *builder) others(pid int, comm string, n uint64) *builder {
	for i := range b.rec.Windows {
		b.rec.Windows[i].Others = append(b.rec.Windows[i].Others, profile.OtherProcess{PID: pid, Comm: comm, Samples: n})
	}
	return b
}

// offcpu adds ns of blocked time of thread tid, in function fn (a user
// frame above a futex kernel frame), classified as reason, to every
// window (or the listed ones). All blocked time has stacks (scale 1).
func (b *builder) offcpu(tid int, reason string, ns uint64, fn string, windows ...int) *builder {
	uid := b.stack(profile.Stack{Frames: []profile.Frame{{Function: fn, Module: "/bin/target"}}})
	kid := b.stack(profile.Stack{Kernel: true, Frames: []profile.Frame{{Function: "schedule"}, {Function: "futex_wait"}}})
	for _, i := range b.windows(windows) {
		w := &b.rec.Windows[i]
		if w.OffCPU == nil {
			w.OffCPU = &profile.OffCPU{}
		}
		w.OffCPU.BlockedNS += ns
		w.OffCPU.SampledNS += ns
		w.OffCPU.Stacks = append(w.OffCPU.Stacks, profile.OffCPUStack{PID: 100, TID: tid, UserStack: uid, KernelStack: kid, NS: ns, Reason: reason})
	}
	return b
}

// wait adds ns of the kernel's account of a wait (profile.Wait) to every
// window (or the listed ones).
func (b *builder) wait(reason, call, fd string, ns uint64, windows ...int) *builder {
	for _, i := range b.windows(windows) {
		w := &b.rec.Windows[i]
		w.Waits = append(w.Waits, profile.Wait{Reason: reason, Call: call, FD: fd, NS: ns, Count: 1})
	}
	return b
}

// peer adds who woke the target to every window.
func (b *builder) peer(p profile.Peer) *builder {
	for i := range b.rec.Windows {
		b.rec.Windows[i].Peers = append(b.rec.Windows[i].Peers, p)
	}
	return b
}

// stack adds a stack (or finds the same one) and returns its id.
func (b *builder) stack(st profile.Stack) uint64 {
	for id, s := range b.rec.Stacks {
		if s.Kernel == st.Kernel && len(s.Frames) == len(st.Frames) && s.Frames[0] == st.Frames[0] {
			return id
		}
	}
	st.ID = uint64(len(b.rec.Stacks) + 1)
	b.rec.Stacks[st.ID] = st
	return st.ID
}

// done checks the recording's invariants, as the reader would.
func (b *builder) done() *profile.Recording {
	b.t.Helper()
	ncpu := len(b.rec.Header.Host.Topology.CPUs)
	for i := range b.rec.Windows {
		w := &b.rec.Windows[i]
		if w.IdleNS != nil {
			continue
		}
		w.IdleNS = make(profile.Counts, ncpu)
		span := uint64(w.EndNS - w.StartNS)
		for cpu := range w.IdleNS {
			w.IdleNS[cpu] = span
			for _, c := range w.Counters {
				if c.Event == metric.CPUClock && cpu < len(c.PerCPU) {
					w.IdleNS[cpu] = span - min(span, c.PerCPU[cpu])
				}
			}
		}
	}
	if err := b.rec.CheckValid(); err != nil {
		b.t.Fatalf("test recording is invalid: %v", err)
	}
	return b.rec
}
