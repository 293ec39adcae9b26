package attribution

import (
	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/profile"
)

// Builder reduces a recording to its Metrics one window at a time, as a
// stream reads them: it keeps what the rules read (sums, per-CPU and
// per-window reductions, each window's samples by CPU and function),
// never the windows, so a long recording costs a few kilobytes a window
// instead of all it holds. Analyze and NewMetrics run it over a
// recording in memory; both paths give the same Result.
type Builder struct {
	m      *Metrics
	stacks map[uint64]profile.Stack
	ncpu   int
	tids   map[int]bool // threads seen; -PID for a process without thread detail
	funcs  *profile.FunctionTotaler
	// samples counts each event's samples (for PrimarySampleEvent);
	// perCPU and cpuTotal count those on a recorded CPU id.
	samples  map[string]uint64
	perCPU   map[string][]uint64
	cpuTotal map[string]uint64
	// selfIDs caches the interned selfName of a (user, kernel) stack
	// pair, blamed the blamed function of an off-CPU stack pair.
	selfIDs map[[2]uint64]uint32
	nameIDs map[string]uint32
	blamed  map[blameKey]string
	offIdx  map[offKey]int
	// rows indexes scratch, one window's share rows, by key.
	rows    map[shareKey]int
	scratch []shareKeyed
}

// shareRow is one window's samples of an event on a CPU whose self
// function (selfName, interned in Metrics.names) is name.
type shareRow struct {
	name  uint32
	cpu   int32
	count uint64
}

type shareKey struct {
	event string
	cpu   int32
	name  uint32
}

type shareKeyed struct {
	shareKey
	count uint64
}

// shareStore keeps one event's share rows window by window, each
// window's slice sized to its rows.
type shareStore struct {
	windows [][]shareRow
}

// blameKey is an off-CPU stack pair with its wait reason.
type blameKey struct {
	wait         string
	user, kernel uint64
}

// offKey is what off-CPU time is summed by: the reason, the thread (the
// rule keeps working threads only) and the function to blame.
type offKey struct {
	reason string
	wait   profile.WaitKey // the stratum of its scale
	tid    int
	fn     string
}

// offPart is one window's weighted time of an off-CPU row.
type offPart struct {
	row int
	ns  uint64
}

type offRow struct {
	offKey
	ns uint64 // weighted, before the recording's scale
}

// otherKey is a process that is not a target, by pid and comm.
type otherKey struct {
	pid  int
	comm string
}

// NewBuilder starts the metrics of a recording with header h. stacks is
// the map the recording's stacks are (or, for a stream, will be) defined
// in; a window's stacks must be in it when the window is added.
func NewBuilder(h profile.Header, stacks map[uint64]profile.Stack) *Builder {
	ncpu := h.Host.Topology.MaxCPU() + 1
	m := &Metrics{
		header:     &h,
		status:     map[string]profile.EventStatus{},
		Totals:     map[string][]uint64{},
		HostTotals: map[string][]uint64{},
		hists:      map[string]bool{},
		pids:       map[int]bool{},
		nodeOf:     h.Host.Topology.NodeOf(),
		CPUs:       recordedCPUs(&h),

		RunqNSPerCPU: make([]float64, ncpu),
		threadNS:     map[int]float64{},
		idleAll:      true,
		idleNS:       make([]float64, ncpu),
		othersNS:     make([]float64, ncpu),
		others:       map[otherKey]uint64{},
		peers:        map[peerKey]float64{},
		scaling:      map[string][2]uint64{},
		shares:       map[string]*shareStore{},
	}
	for _, e := range h.Events {
		m.status[e.Name] = e
	}
	for _, r := range table {
		if ev := r.shareEvent(); ev != "" {
			m.shares[ev] = &shareStore{}
		}
	}
	return &Builder{
		m: m, stacks: stacks, ncpu: ncpu, tids: map[int]bool{},
		funcs:   profile.NewFunctionTotaler(h.Functions),
		samples: map[string]uint64{}, perCPU: map[string][]uint64{}, cpuTotal: map[string]uint64{},
		selfIDs: map[[2]uint64]uint32{}, nameIDs: map[string]uint32{}, blamed: map[blameKey]string{},
		offIdx: map[offKey]int{}, rows: map[shareKey]int{},
	}
}

// Add reduces the next window. Nothing of the window is kept.
func (b *Builder) Add(w *profile.Window) {
	m := b.m
	wm := WindowMetrics{
		StartNS: w.StartNS, EndNS: w.EndNS,
		DurationS: float64(w.EndNS-w.StartNS) / 1e9,
		Counts:    map[string]uint64{},
		Hist:      map[string][]uint64{},
	}
	target := b.counters(&wm, w.Counters)
	for _, h := range w.Histograms {
		m.hists[h.Name] = true
		b.histogram(&wm, h)
	}
	b.samplesOf(w.Samples)
	wm.working = b.processes(w.Processes, wm.DurationS)
	b.cpuTime(w, wm.DurationS*1e9, target)
	for _, o := range w.Others {
		m.others[otherKey{o.PID, o.Comm}] += o.Samples
		m.othersTotal += o.Samples
	}
	m.offScaler.Add(w)
	b.offCPU(w.OffCPU)
	b.waits(&wm, w)
	b.funcs.Add(w.Functions)
	m.Windows = append(m.Windows, wm)
}

// counters sums the window's counters into its counts and the
// recording's totals, and returns the target's cpu-clock per CPU (the
// last such counter, nil when none).
func (b *Builder) counters(wm *WindowMetrics, cs []profile.Counter) (target profile.Counts) {
	m := b.m
	for _, c := range cs {
		for _, v := range c.PerCPU {
			wm.Counts[c.Event] += v
		}
		profile.AddCounts(m.Totals, c.Event, c.PerCPU, b.ncpu)
		if c.HostPerCPU != nil {
			profile.AddCounts(m.HostTotals, c.Event, c.HostPerCPU, b.ncpu)
		}
		s := m.scaling[c.Event]
		m.scaling[c.Event] = [2]uint64{s[0] + c.Enabled, s[1] + c.Running}
		if c.Event == metric.CPUClock {
			target = c.PerCPU
		}
	}
	return target
}

// histogram adds one of the window's histograms to its sums and the
// run-queue wait per CPU.
func (b *Builder) histogram(wm *WindowMetrics, h profile.Histogram) {
	sum, ok := wm.Hist[h.Name]
	if !ok {
		sum = make([]uint64, profile.HistBuckets)
		wm.Hist[h.Name] = sum
	}
	h.AddTo(sum)
	if h.Name != profile.HistRunqLatency {
		return
	}
	// Bucket midpoints are integers, so HistogramSum is exact and the
	// per-CPU sums do not depend on the order they are added in.
	for cpu, c := range h.PerCPU {
		if cpu < b.ncpu {
			b.m.RunqNSPerCPU[cpu] += HistogramSum(c)
		}
	}
}

// samplesOf counts the window's samples per event and CPU, and keeps the
// share rows of the events rules name functions by.
func (b *Builder) samplesOf(ss []profile.Sample) {
	clear(b.rows)
	b.scratch = b.scratch[:0]
	for _, s := range ss {
		b.samples[s.Event] += s.Count
		if s.CPU >= 0 && s.CPU < b.ncpu {
			per := b.perCPU[s.Event]
			if per == nil {
				per = make([]uint64, b.ncpu)
				b.perCPU[s.Event] = per
			}
			per[s.CPU] += s.Count
			b.cpuTotal[s.Event] += s.Count
		}
		if b.m.shares[s.Event] == nil {
			continue
		}
		k := shareKey{s.Event, int32(s.CPU), b.selfID(s)}
		if i, ok := b.rows[k]; ok {
			b.scratch[i].count += s.Count
			continue
		}
		b.rows[k] = len(b.scratch)
		b.scratch = append(b.scratch, shareKeyed{k, s.Count})
	}
	for ev, st := range b.m.shares {
		st.windows = append(st.windows, b.windowRows(ev))
	}
}

// windowRows copies the window's share rows of one event into a slice of
// their size (the store holds a window's rows for the whole analysis).
func (b *Builder) windowRows(event string) []shareRow {
	n := 0
	for _, r := range b.scratch {
		if r.event == event {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	rows := make([]shareRow, 0, n)
	for _, r := range b.scratch {
		if r.event == event {
			rows = append(rows, shareRow{name: r.name, cpu: r.cpu, count: r.count})
		}
	}
	return rows
}

// processes totals the window's processes and their threads' cpu-clock,
// adds its thread-seconds and returns its number of working threads
// (workingShare of its busiest, at least workingFloorNS).
func (b *Builder) processes(ps []profile.Process, seconds float64) int {
	m := b.m
	var present int
	var busiest float64
	for _, p := range ps {
		m.pids[p.PID] = true
		if len(p.Threads) == 0 {
			present++
			b.tids[-p.PID] = true
			continue
		}
		for _, t := range p.Threads {
			present++
			b.tids[t.TID] = true
			ns := float64(t.Counts[metric.CPUClock])
			m.threadNS[t.TID] += ns
			busiest = max(busiest, ns)
		}
	}
	m.ThreadSeconds += float64(present) * seconds
	floor := max(workingShare*busiest, workingFloorNS)
	working := 0
	for _, p := range ps {
		for _, t := range p.Threads {
			if float64(t.Counts[metric.CPUClock]) >= floor {
				working++
			}
		}
	}
	return working
}

// cpuTime adds each CPU's idle time and the time neither idle nor the
// target's (others) over a window of span ns.
func (b *Builder) cpuTime(w *profile.Window, span float64, target profile.Counts) {
	m := b.m
	m.spanNS += span
	if w.IdleNS == nil {
		m.idleAll = false
	}
	for cpu := range b.ncpu {
		var idle, tgt float64
		if cpu < len(w.IdleNS) {
			idle = float64(w.IdleNS[cpu])
			m.idleNS[cpu] += idle
		}
		if cpu < len(target) {
			tgt = float64(target[cpu])
		}
		m.othersNS[cpu] += max(0, span-idle-tgt)
	}
}

// offCPU sums the window's off-CPU time: blocked and sampled for the
// recording's scale, and each stack's by reason, thread and the function
// to blame.
func (b *Builder) offCPU(o *profile.OffCPU) {
	if o == nil {
		return
	}
	m := b.m
	m.hasOffCPU = true
	var parts []offPart
	for _, s := range o.Stacks {
		k := offKey{s.Reason, s.Key(), s.TID, b.blame(s.Wait, s.UserStack, s.KernelStack)}
		i, ok := b.offIdx[k]
		if !ok {
			i = len(m.off)
			b.offIdx[k] = i
			m.off = append(m.off, offRow{offKey: k})
		}
		m.off[i].ns += s.NS
		parts = append(parts, offPart{row: i, ns: s.NS})
	}
	for len(m.offWin) < len(m.Windows) {
		m.offWin = append(m.offWin, nil)
	}
	m.offWin = append(m.offWin, parts)
}

// blame is the function profile.ExplainOffCPU blames for an off-CPU stack
// pair with its wait reason.
func (b *Builder) blame(wait string, user, kernel uint64) string {
	key := blameKey{wait, user, kernel}
	if fn, ok := b.blamed[key]; ok {
		return fn
	}
	_, fn := profile.ExplainOffCPU(wait, b.frames(user), b.frames(kernel))
	b.blamed[key] = fn
	return fn
}

func (b *Builder) frames(id uint64) []profile.Frame {
	if id == 0 {
		return nil
	}
	return b.stacks[id].Frames
}

// selfID interns a sample's selfName.
func (b *Builder) selfID(s profile.Sample) uint32 {
	key := [2]uint64{s.UserStack, s.KernelStack}
	if id, ok := b.selfIDs[key]; ok {
		return id
	}
	name := selfName(b.frames(s.UserStack), b.frames(s.KernelStack))
	id, ok := b.nameIDs[name]
	if !ok {
		id = uint32(len(b.m.names))
		b.nameIDs[name] = id
		b.m.names = append(b.m.names, name)
	}
	b.selfIDs[key] = id
	return id
}

// Metrics completes the metrics of the windows added so far. It may be
// called again after more windows.
func (b *Builder) Metrics() *Metrics {
	m := b.m
	m.medianSpan = 0 // the windows' median length, again over every window
	if n := len(m.Windows); n > 0 {
		m.DurationS = float64(m.Windows[n-1].EndNS-m.Windows[0].StartNS) / 1e9
	}
	m.Threads = len(b.tids)
	m.functions = b.funcs.Totals()
	m.SampleEvent = b.primarySampleEvent()
	m.SamplesPerCPU = b.perCPU[m.SampleEvent]
	if m.SamplesPerCPU == nil {
		m.SamplesPerCPU = make([]uint64, b.ncpu)
	}
	m.SampleTotal = b.cpuTotal[m.SampleEvent]
	return m
}

// primarySampleEvent is profile.Recording.PrimarySampleEvent over the
// windows added: the first of the header's sample events with samples,
// else the first of them.
func (b *Builder) primarySampleEvent() string {
	return profile.PrimaryOf(b.m.header.Settings.SampleEvents, func(e string) uint64 { return b.samples[e] })
}

// Result evaluates every rule against the windows added so far.
func (b *Builder) Result() Result { return b.Metrics().analyze() }
