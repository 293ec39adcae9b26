package collector

import (
	"encoding/binary"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cacheheat/cacheheat/profile"
	"github.com/cacheheat/cacheheat/symbolize"
)

// taskKey names one thread of a process.
type taskKey struct{ tgid, tid int }

// taskVal is a thread's cumulative counts, slot-indexed.
type taskVal struct {
	counts []uint64 // by slot
	comm   string
}

type statsVal struct {
	fires, samples                                     [2]uint64
	stackErrors, sampleMapFull, procMapFull, mapErrors uint64
}

// snapshot is every cumulative value at one instant. Windows are the
// differences of two snapshots, so nothing in the kernel is ever reset.
type snapshot struct {
	tasks    map[taskKey]taskVal
	target   [][]uint64       // [slot][cpu] the target's counts
	host     [][]counterValue // [slot][cpu] every task's counts
	runq     [][]uint64       // [cpu][bucket]
	offcpu   [][]uint64
	stats    []statsVal  // [cpu]
	offStats []offcpuVal // [cpu]
	// The writes the BPF side counts (stats), summed over CPUs, each
	// counted after its write: to task records (task_writes), to the
	// others map (other_writes) and to the target set at a target's fork
	// or exec (target_changes). A map whose count stands is not read.
	taskWrites, otherWrites, targetChanges uint64
	// unseenIn and unseenLost: targets' switch-ins the switch tracepoint
	// did not show, replayed from the kernel's account and not
	// (replay_in in bpf/cacheheat.c), summed over CPUs.
	unseenIn, unseenLost uint64
	// busyNS is each CPU's cumulative time running any task but its idle
	// task (busy_ns in bpf/cacheheat.c); nil: not read. monoNS is the
	// monotonic clock (the BPF side's) when it was read, from the
	// recorder's start.
	busyNS []uint64
	monoNS uint64
	// busyAt is when busyNS was read: a window ends there (run.drain),
	// so that the span its busy and idle times were counted over lies
	// inside the window. Zero: not read.
	busyAt time.Time
	// sw is, per CPU, what the BPF side counted of its software events.
	sw []cpuSW
	// cgroups and cgroupFull: by-cgroup mode only (cgroups.go).
	cgroups    map[uint64]*cgroupVal
	cgroupFull uint64
	// waits is the target's cumulative off-CPU time by wait code, summed
	// over CPUs (the waits map of bpf/cacheheat.c).
	waits map[uint32]waitVal
}

// waitVal is one wait code's cumulative time, count and log2 histogram.
type waitVal struct {
	ns, count uint64
	hist      []uint64
}

// offcpuVal is one CPU's cumulative off-CPU totals (offcpu_stat in
// bpf/cacheheat.c).
type offcpuVal struct {
	blockedNS, sampledNS, stackErrors, mapErrors uint64
}

// rawSample is one drained sample count with its stack addresses.
type rawSample struct {
	pid, tid, cpu, slot int
	user, kernel        []uint64
	count               uint64
	wait                uint32 // off-CPU samples: the switch-out's wait code
}

// source is the seam over the kernel: the window arithmetic above it is
// tested with fabricated snapshots, the kernel below it for real.
type source interface {
	snapshot(every bool) (*snapshot, error)     // every: no CPU's counters kept (kernel_maps.go)
	drainSamples() ([]rawSample, uint64, error) // and the unreadable records
}

// symbolizer turns addresses into frames (package symbolize).
type symbolizer interface {
	UserStack(pid int, addrs []uint64) []profile.Frame
	Kernel(addrs []uint64) []profile.Frame
	// Generation names pid's snapshot of mappings: user frames resolved
	// under one generation hold until it changes.
	Generation(pid int) uint64
}

// windowMeta is what buildWindow needs besides the two snapshots.
type windowMeta struct {
	events    []string // measured events by slot
	sampleEvs [2]string
	sampleHz  int
	ncpu      int // per-CPU arrays' length: MaxCPU()+1
	sampled   int // CPUs sampled on
	allTasks  bool
	// noProcesses: windows carry no processes (counting by cgroup).
	noProcesses bool
	startNS     int64
	endNS       int64
	procComm    func(pid int) string
	// procCmd is pid's command line; comm is its name now, so that a
	// cache can tell an exec.
	procCmd    func(pid int, comm string) []string
	stackTable *stackTable

	// procContainer names a process's container ("" for none).
	procContainer func(pid int) string
}

// delta is cur-prev, treating a counter that went backwards (a reused key)
// as starting from zero.
func delta(cur, prev uint64) uint64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

func at[T any](s []T, i int) T {
	var zero T
	if i < 0 || i >= len(s) {
		return zero
	}
	return s[i]
}

// buildWindow computes one window from the snapshots at its start and end
// and the samples drained at its end (badRecords: sample records that
// could not be read).
func buildWindow(prev, cur *snapshot, samples []rawSample, badRecords uint64, m windowMeta) *profile.Window {
	w := &profile.Window{StartNS: m.startNS, EndNS: m.endNS}
	w.Counters = windowCounters(prev, cur, m)
	if !m.noProcesses {
		w.Processes = buildProcesses(prev, cur, m)
	}
	w.Histograms = windowHistograms(prev, cur, m.ncpu)
	d, fires, tsamples := windowStats(prev, cur)
	w.IdleNS = windowIdle(prev, cur, m.ncpu)
	var off profile.OffCPU
	for cpu := range cur.offStats {
		c, p := cur.offStats[cpu], at(prev.offStats, cpu)
		off.BlockedNS += delta(c.blockedNS, p.blockedNS)
		off.SampledNS += delta(c.sampledNS, p.sampledNS)
		d.StackErrors += delta(c.stackErrors, p.stackErrors)
		d.MapErrors += delta(c.mapErrors, p.mapErrors)
	}
	d.MapErrors += badRecords
	w.Drops = d
	w.SampleRate = sampleRates(fires, tsamples, m)
	w.Samples, off.Stacks = windowSamples(samples, w, m)
	if cur.offStats != nil {
		w.OffCPU = &off
	}
	if cur.waits != nil {
		w.Waits = windowWaits(prev.waits, cur.waits)
	}
	return w
}

// windowWaits is the target's off-CPU time by wait over the window, one
// entry per reason, call and descriptor kind, longest first.
func windowWaits(prev, cur map[uint32]waitVal) []profile.Wait {
	type key struct{ reason, call, fd string }
	by := map[key]*profile.Wait{}
	for code, c := range cur {
		p := prev[code]
		if c.count == p.count && c.ns == p.ns {
			continue
		}
		reason, call, fd := waitOf(code)
		k := key{reason, call, fd}
		w := by[k]
		if w == nil {
			w = &profile.Wait{Reason: reason, Call: call, FD: fd}
			by[k] = w
		}
		w.NS += delta(c.ns, p.ns)
		w.Count += delta(c.count, p.count)
		for i := range min(len(c.hist), profile.HistBuckets) {
			d := delta(c.hist[i], at(p.hist, i))
			if d == 0 {
				continue
			}
			for len(w.Hist) <= i {
				w.Hist = append(w.Hist, 0)
			}
			w.Hist[i] += d
		}
	}
	out := make([]profile.Wait, 0, len(by))
	for _, w := range by {
		out = append(out, *w)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.NS != b.NS {
			return a.NS > b.NS
		}
		if a.Reason != b.Reason {
			return a.Reason < b.Reason
		}
		if a.Call != b.Call {
			return a.Call < b.Call
		}
		return a.FD < b.FD
	})
	return out
}

// windowIdle is each CPU's idle time over the window: the time between
// the two reads of busy time that the CPU did not spend running a task,
// its idle task's time (the idle and iowait of /proc/stat, in one clock
// with cpu-clock's per-CPU busy time, so that the two add up to the
// window). A CPU's running slice is added to its busy time at its next
// switch or cpu-clock sample, so a window's split is up to one sample
// period (10 ms at 99 Hz) off, and the next window's by as much the other
// way. nil when busy time was not read.
func windowIdle(prev, cur *snapshot, ncpu int) profile.Counts {
	if cur.busyNS == nil || prev.busyNS == nil || cur.monoNS < prev.monoNS {
		return nil
	}
	span := cur.monoNS - prev.monoNS
	idle := make(profile.Counts, ncpu)
	for cpu := range idle {
		idle[cpu] = span - min(span, delta(at(cur.busyNS, cpu), at(prev.busyNS, cpu)))
	}
	return idle
}

// windowCounters is each measured event's counts over the window, per CPU:
// the target's, and every task's (scaled when multiplexed).
func windowCounters(prev, cur *snapshot, m windowMeta) []profile.Counter {
	var out []profile.Counter
	for slot, name := range m.events {
		c := profile.Counter{Event: name, PerCPU: make([]uint64, m.ncpu), HostPerCPU: make([]uint64, m.ncpu)}
		// A CPU's cpu-clock is the time it ran tasks, not its idle task:
		// perf's per-CPU counter counts wall time, idle included, which
		// would show every CPU 100% busy.
		busy := name == "cpu-clock" && cur.busyNS != nil && prev.busyNS != nil
		for cpu := 0; cpu < m.ncpu; cpu++ {
			hc := at(at(cur.host, slot), cpu)
			hp := at(at(prev.host, slot), cpu)
			c.HostPerCPU[cpu] = delta(hc.scaled(), hp.scaled())
			if busy {
				// Not clipped to the counter's delta: both are read at
				// slightly different moments, and busy time is counted
				// at the same switches and samples as the target's time.
				c.HostPerCPU[cpu] = delta(at(cur.busyNS, cpu), at(prev.busyNS, cpu))
			}
			c.Enabled += delta(hc.Enabled, hp.Enabled)
			c.Running += delta(hc.Running, hp.Running)
			if m.allTasks {
				c.PerCPU[cpu] = c.HostPerCPU[cpu]
			} else {
				c.PerCPU[cpu] = delta(at(at(cur.target, slot), cpu), at(at(prev.target, slot), cpu))
			}
		}
		out = append(out, c)
	}
	return out
}

// windowHistograms is the run-queue latency and off-CPU histograms over
// the window, per CPU, trailing empty buckets left out.
func windowHistograms(prev, cur *snapshot, ncpu int) []profile.Histogram {
	var out []profile.Histogram
	for _, h := range []struct {
		name      string
		cur, prev [][]uint64
	}{{profile.HistRunqLatency, cur.runq, prev.runq}, {profile.HistOffCPU, cur.offcpu, prev.offcpu}} {
		hist := profile.Histogram{Name: h.name, Unit: "ns", PerCPU: make([]profile.Counts, ncpu)}
		for cpu := 0; cpu < ncpu; cpu++ {
			c, p := at(h.cur, cpu), at(h.prev, cpu)
			b := make([]uint64, min(len(c), profile.HistBuckets))
			last := 0
			for i := range b {
				b[i] = delta(c[i], at(p, i))
				if b[i] != 0 {
					last = i + 1
				}
			}
			hist.PerCPU[cpu] = b[:last]
		}
		out = append(out, hist)
	}
	return out
}

// windowStats sums the BPF side's per-CPU statistics over the window: what
// it dropped, and per sample slot how often the sampler fired and how many
// of those were the target's.
func windowStats(prev, cur *snapshot) (d profile.Drops, fires, samples [2]uint64) {
	for cpu := range cur.stats {
		c, p := cur.stats[cpu], at(prev.stats, cpu)
		for i := range 2 {
			fires[i] += delta(c.fires[i], p.fires[i])
			samples[i] += delta(c.samples[i], p.samples[i])
		}
		d.StackErrors += delta(c.stackErrors, p.stackErrors)
		d.SampleMapFull += delta(c.sampleMapFull, p.sampleMapFull)
		d.ProcMapFull += delta(c.procMapFull, p.procMapFull)
		d.MapErrors += delta(c.mapErrors, p.mapErrors)
	}
	return d, fires, samples
}

// sampleRates says, per sampled event, the rate asked for and the rate
// achieved per sampled CPU, which is lower when the kernel throttles.
func sampleRates(fires, samples [2]uint64, m windowMeta) []profile.SampleRate {
	var out []profile.SampleRate
	secs := float64(m.endNS-m.startNS) / 1e9
	for slot, ev := range m.sampleEvs {
		if ev == "" {
			continue
		}
		sr := profile.SampleRate{Event: ev, Samples: samples[slot]}
		if slot == slotClock {
			sr.Requested = float64(m.sampleHz)
		}
		if secs > 0 && m.sampled > 0 {
			sr.Achieved = float64(fires[slot]) / secs / float64(m.sampled)
		}
		out = append(out, sr)
	}
	return out
}

// windowSamples turns the drained samples into the window's samples, most
// first, and its off-CPU stacks, longest first; their stacks go into w.
func windowSamples(samples []rawSample, w *profile.Window, m windowMeta) ([]profile.Sample, []profile.OffCPUStack) {
	var out []profile.Sample
	var off []profile.OffCPUStack
	for _, s := range samples {
		if s.slot == slotOffCPU {
			off = append(off, offCPUStack(s, w, m))
			continue
		}
		if s.slot < 0 || s.slot > 1 || m.sampleEvs[s.slot] == "" || s.cpu >= m.ncpu {
			continue
		}
		ps := profile.Sample{Event: m.sampleEvs[s.slot], PID: s.pid, TID: s.tid, CPU: s.cpu, Count: s.count}
		if m.stackTable != nil {
			ps.UserStack = m.stackTable.user(s.pid, s.user, w)
			ps.KernelStack = m.stackTable.kernel(s.kernel, w)
		}
		out = append(out, ps)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		if a.PID != b.PID {
			return a.PID < b.PID
		}
		return a.TID < b.TID
	})
	sort.Slice(off, func(i, j int) bool {
		a, b := off[i], off[j]
		if a.NS != b.NS {
			return a.NS > b.NS
		}
		return a.TID < b.TID
	})
	return out, off
}

// offCPUStack turns a drained off-CPU sample (its count is nanoseconds)
// into a stack entry, classified by its wait code and frames.
func offCPUStack(s rawSample, w *profile.Window, m windowMeta) profile.OffCPUStack {
	// The key's wait code carries the sampled wait's log2 length too.
	wait, call, fd := waitOf(s.wait &^ waitBucketMask)
	os := profile.OffCPUStack{PID: s.pid, TID: s.tid, NS: s.count, Reason: wait, Wait: wait, WaitCall: call, WaitFD: fd,
		LengthBucket: int((s.wait&waitBucketMask)>>waitBucketShift) + 1}
	if m.stackTable == nil {
		return os
	}
	os.UserStack, os.KernelStack, os.Reason = m.stackTable.offCPU(s.pid, s.user, s.kernel, s.wait&^waitBucketMask, wait, w)
	return os
}

// tracingFrames prefix the kernel stack taken in the sched_switch program:
// the program itself and the tracepoint's plumbing, not the task's path.
var tracingFrames = []string{"bpf_prog_", "bpf_trace_run", "__traceiter_", "__bpf_trace_"}

// trimTracing drops the leading tracing frames of an off-CPU kernel stack.
func trimTracing(fs []profile.Frame) []profile.Frame {
	for len(fs) > 0 && slices.ContainsFunc(tracingFrames, func(p string) bool { return strings.HasPrefix(fs[0].Function, p) }) {
		fs = fs[1:]
	}
	return fs
}

// buildProcesses groups the per-thread deltas by process; threads and
// processes with nothing counted in the window are left out.
func buildProcesses(prev, cur *snapshot, m windowMeta) []profile.Process {
	byPID := map[int]*profile.Process{}
	for k, v := range cur.tasks {
		pv := prev.tasks[k]
		if slices.Equal(v.counts, pv.counts) {
			continue // most threads of a host did nothing this window
		}
		counts := map[string]uint64{}
		for slot, name := range m.events {
			if d := delta(at(v.counts, slot), at(pv.counts, slot)); d != 0 {
				counts[name] = d
			}
		}
		if len(counts) == 0 {
			continue
		}
		p, ok := byPID[k.tgid]
		if !ok {
			p = &profile.Process{PID: k.tgid, Counts: map[string]uint64{}}
			byPID[k.tgid] = p
		}
		for name, d := range counts {
			p.Counts[name] += d
		}
		p.Threads = append(p.Threads, profile.Thread{TID: k.tid, Comm: v.comm, Counts: counts})
	}
	out := make([]profile.Process, 0, len(byPID))
	for pid, p := range byPID {
		// The process's name is its main thread's. BPF's copy is current:
		// it is taken at every rename, including a write to
		// /proc/PID/comm by another thread while the main thread sleeps.
		// A main thread not seen since the recording began is asked
		// for in /proc.
		if mt, ok := cur.tasks[taskKey{pid, pid}]; ok {
			p.Comm = mt.comm
		}
		if p.Comm == "" && m.procComm != nil {
			p.Comm = m.procComm(pid)
		}
		if p.Comm == "" && len(p.Threads) > 0 {
			p.Comm = p.Threads[0].Comm
		}
		if m.procCmd != nil {
			p.Cmdline = m.procCmd(pid, p.Comm)
		}
		if m.procContainer != nil {
			p.Container = m.procContainer(pid)
		}
		sort.Slice(p.Threads, func(i, j int) bool { return p.Threads[i].TID < p.Threads[j].TID })
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// stackTable symbolizes stacks and names each by a hash of its frames: the
// kernel reuses stack ids, so they cannot name a stack across windows. A
// stack sampled again (the same addresses, and for a user stack the same
// process and snapshot of its mappings) is not symbolized again.
type stackTable struct {
	sym  symbolizer
	seen map[uint64]bool
	ids  map[stackKey]uint64
	// off holds each off-CPU stack pair's ids and reason by its addresses
	// and wait code: a thread blocks at the same few places window after
	// window, and symbolizing and classifying them again was a fifth of
	// the recorder's time under rcu bad (BENCHMARKS.md, "Sixth session").
	off map[offCPUKey]offCPUVal
	// lines lists the file addresses of the user stacks written, for
	// their source lines when the recording ends; nil: none.
	lines *symbolize.LineRequests
}

// stackKey is a stack's raw addresses as bytes; pid and gen are 0 for a
// kernel stack.
type stackKey struct {
	pid   int
	gen   uint64
	addrs string
}

type offCPUKey struct {
	user, kernel stackKey
	code         uint32 // the wait code, without the length bucket
}

type offCPUVal struct {
	user, kernel uint64
	reason       string
}

// maxCachedStacks bounds the caches; past it, one starts over.
const maxCachedStacks = 1 << 17

func newStackTable(sym symbolizer) *stackTable {
	return &stackTable{sym: sym, seen: map[uint64]bool{}, ids: map[stackKey]uint64{}, off: map[offCPUKey]offCPUVal{}}
}

// offCPU returns an off-CPU stack pair's ids in the recording and its
// reason (profile.ClassifyOffCPU of wait, the reason of its wait code,
// and its frames), symbolizing and classifying a pair the first time it
// is seen with its process's current mappings only.
func (t *stackTable) offCPU(pid int, user, kernel []uint64, code uint32, wait string, w *profile.Window) (uint64, uint64, string) {
	k := offCPUKey{user: stackKey{pid: pid, gen: t.sym.Generation(pid), addrs: addrString(user)}, kernel: stackKey{addrs: addrString(kernel)}, code: code}
	if v, ok := t.off[k]; ok {
		return v.user, v.kernel, v.reason
	}
	var v offCPUVal
	var uf, kf []profile.Frame
	v.user, uf = t.userFrames(pid, user, w)
	if len(kernel) > 0 {
		kf = trimTracing(t.sym.Kernel(kernel))
		v.kernel = t.add(profile.Stack{Kernel: true, Frames: kf}, w)
	}
	v.reason = profile.ClassifyOffCPU(wait, uf, kf)
	if len(t.off) >= maxCachedStacks {
		clear(t.off)
	}
	t.off[k] = v
	return v.user, v.kernel, v.reason
}

func (t *stackTable) user(pid int, addrs []uint64, w *profile.Window) uint64 {
	if len(addrs) == 0 {
		return 0
	}
	k := stackKey{pid: pid, gen: t.sym.Generation(pid), addrs: addrString(addrs)}
	if id, ok := t.ids[k]; ok {
		return id
	}
	id := t.add(profile.Stack{Frames: t.sym.UserStack(pid, addrs)}, w)
	t.remember(k, id)
	return id
}

func (t *stackTable) kernel(addrs []uint64, w *profile.Window) uint64 {
	if len(addrs) == 0 {
		return 0
	}
	k := stackKey{addrs: addrString(addrs)}
	if id, ok := t.ids[k]; ok {
		return id
	}
	id := t.add(profile.Stack{Kernel: true, Frames: t.sym.Kernel(addrs)}, w)
	t.remember(k, id)
	return id
}

func (t *stackTable) remember(k stackKey, id uint64) {
	if len(t.ids) >= maxCachedStacks {
		clear(t.ids)
	}
	t.ids[k] = id
}

func addrString(addrs []uint64) string {
	b := make([]byte, 8*len(addrs))
	for i, a := range addrs {
		binary.LittleEndian.PutUint64(b[8*i:], a)
	}
	return string(b)
}

// userFrames is user, also returning the frames.
func (t *stackTable) userFrames(pid int, addrs []uint64, w *profile.Window) (uint64, []profile.Frame) {
	if len(addrs) == 0 {
		return 0, nil
	}
	f := t.sym.UserStack(pid, addrs)
	return t.add(profile.Stack{Frames: f}, w), f
}

func (t *stackTable) add(s profile.Stack, w *profile.Window) uint64 {
	// The recording format leaves out an ID that is this hash.
	s.ID = profile.HashStack(s.Kernel, s.Frames)
	if !t.seen[s.ID] {
		t.seen[s.ID] = true
		w.NewStacks = append(w.NewStacks, s)
		if t.lines != nil && !s.Kernel {
			t.lines.AddStack(s.Frames)
		}
	}
	return s.ID
}

// rawSymbolizer stores addresses unresolved (Module "" and Offset = the
// address), for when no symbolizer is available.
type rawSymbolizer struct{}

func (rawSymbolizer) UserStack(_ int, addrs []uint64) []profile.Frame { return rawFrames(addrs) }
func (rawSymbolizer) Kernel(addrs []uint64) []profile.Frame           { return rawFrames(addrs) }
func (rawSymbolizer) Generation(int) uint64                           { return 0 }

func rawFrames(addrs []uint64) []profile.Frame {
	out := make([]profile.Frame, len(addrs))
	for i, a := range addrs {
		out[i] = profile.Frame{Offset: a}
	}
	return out
}
