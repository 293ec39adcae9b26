package model

import (
	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/profile"
)

// The reductions below are what the findings read beyond the views: each
// needs a window whole (its threads, idle times, other processes, samples
// by function), so the model takes it as the window streams by and keeps
// the result, never the window. Everything else attribution reads, it
// derives from the model's series, histograms and light windows.

// workingShare: a thread that ran at least this share of the window's
// busiest target thread did work in it. Idle runtime threads (a Go
// program's sysmon and spare Ms, a pool's parked workers) run far less.
// Relative to the busiest thread, not to the clock, so that threads
// starved by other load still count as the work they are.
const workingShare = 0.5

// workingFloorNS: a thread must also have run this long in the window
// (1 ms, a scheduler slice) to count as working at all.
const workingFloorNS = 1e6

// CPUTime is each CPU's time by who had it, summed over the windows (ns,
// indexed by CPU id).
type CPUTime struct {
	// Idle is the kernel's idle time; IdleAll says whether every window
	// had it (an older recording has none).
	Idle    []float64
	IdleAll bool
	// Others is the time neither idle nor the target's: other processes'.
	Others []float64
	// SpanNS sums the windows' lengths.
	SpanNS float64
}

// Other is a process that is not a target, by PID and comm.
type Other struct {
	PID  int
	Comm string
}

// SelfCount is one window's samples of an event on a CPU whose innermost
// function (SelfName, interned in Model.SelfNames) is Name.
type SelfCount struct {
	Name  uint32
	CPU   int32
	Count uint64
}

type selfKey struct {
	event string
	cpu   int32
	name  uint32
}

type selfKeyed struct {
	selfKey
	count uint64
}

// SelfName names the code a sample hit: the innermost user frame names
// the target's code; a kernel frame (a syscall or fault handler) says
// less about where to look, so the innermost kernel frame is used only
// when the sample has no user frame.
func SelfName(user, kernel []profile.Frame) string {
	for _, fr := range [][]profile.Frame{user, kernel} {
		if len(fr) > 0 {
			return fr[0].String()
		}
	}
	return "[unknown]"
}

// working counts the threads of a window's processes that did work
// (workingShare of the busiest, at least workingFloorNS).
func working(ps []profile.Process) int {
	var busiest float64
	for _, p := range ps {
		for _, t := range p.Threads {
			busiest = max(busiest, float64(t.Counts[metric.CPUClock]))
		}
	}
	floor := max(workingShare*busiest, workingFloorNS)
	n := 0
	for _, p := range ps {
		for _, t := range p.Threads {
			if float64(t.Counts[metric.CPUClock]) >= floor {
				n++
			}
		}
	}
	return n
}

// cpuTime adds each CPU's idle time and the time neither idle nor the
// target's over a window.
func (b *Builder) cpuTime(w *profile.Window) {
	ct := &b.m.CPUTime
	span := float64(w.EndNS - w.StartNS)
	ct.SpanNS += span
	if w.IdleNS == nil {
		ct.IdleAll = false
	}
	var target profile.Counts
	for _, c := range w.Counters {
		if c.Event == metric.CPUClock {
			target = c.PerCPU
		}
	}
	for cpu := range b.ncpu {
		var idle, tgt float64
		if cpu < len(w.IdleNS) {
			idle = float64(w.IdleNS[cpu])
			ct.Idle[cpu] += idle
		}
		if cpu < len(target) {
			tgt = float64(target[cpu])
		}
		ct.Others[cpu] += max(0, span-idle-tgt)
	}
}

// runq adds the run-queue wait per CPU a window's runq-latency histogram
// estimates. Bucket midpoints are integers, so the sums are exact and do
// not depend on the order they are added in.
func (b *Builder) runq(hs []profile.Histogram) {
	for _, h := range hs {
		if h.Name != profile.HistRunqLatency {
			continue
		}
		for cpu, c := range h.PerCPU {
			if cpu < b.ncpu {
				b.m.RunqNSPerCPU[cpu] += profile.HistogramSum(c)
			}
		}
	}
}

// selfCounts adds a window's samples by event, CPU and innermost function
// to each event's Self, rows in the order they first appear.
func (b *Builder) selfCounts(wi int, ss []profile.Sample) {
	clear(b.selfRows)
	b.selfScratch = b.selfScratch[:0]
	for _, s := range ss {
		k := selfKey{s.Event, int32(s.CPU), b.selfID(s)}
		if i, ok := b.selfRows[k]; ok {
			b.selfScratch[i].count += s.Count
			continue
		}
		b.selfRows[k] = len(b.selfScratch)
		b.selfScratch = append(b.selfScratch, selfKeyed{k, s.Count})
	}
	// Each event's rows go in a slice of their size: the model keeps them.
	n := map[string]int{}
	for _, r := range b.selfScratch {
		n[r.event]++
	}
	for ev, c := range n {
		a := b.m.Samples[ev]
		a.Self = pad(a.Self, wi+1)
		a.Self[wi] = make([]SelfCount, 0, c)
	}
	for _, r := range b.selfScratch {
		a := b.m.Samples[r.event]
		a.Self[wi] = append(a.Self[wi], SelfCount{Name: r.name, CPU: r.cpu, Count: r.count})
	}
}

// selfID interns a sample's SelfName.
func (b *Builder) selfID(s profile.Sample) uint32 {
	key := StackPair{s.UserStack, s.KernelStack}
	if id, ok := b.selfIDs[key]; ok {
		return id
	}
	name := SelfName(b.frames(key.User), b.frames(key.Kernel))
	id, ok := b.nameIDs[name]
	if !ok {
		id = uint32(len(b.m.SelfNames))
		b.nameIDs[name] = id
		b.m.SelfNames = append(b.m.SelfNames, name)
	}
	b.selfIDs[key] = id
	return id
}

func (b *Builder) frames(id uint64) []profile.Frame {
	if id == 0 {
		return nil
	}
	return b.m.Stacks[id].Frames
}
