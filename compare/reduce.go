package compare

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/profile"
)

// Reducer reduces one recording to what a comparison needs, a window at a
// time in file order, as a profile.Stream yields them: each metric's
// per-window values and the facts its Side and the warnings report. It
// keeps no window. Per usable window it keeps one value per metric, and
// each process name's per-event counts until the end, when the busiest
// names (topComms) are known; the per-operation metrics wait for the end
// too, as they need every event the recording has.
type Reducer struct {
	header  profile.Header
	warmup  int
	x       *extractor
	windows int
	usable  int // usable windows so far, the warm-up ones included
	// firstNS and lastNS are the first window's start and the last one's
	// end: the recorded time.
	firstNS, lastNS int64
	stretch         profile.Stretch
	// prevApp is the previous window's app metrics, whose counters the
	// next window's work is measured from (appWork).
	prevApp map[string]float64
	// runs are the run totals the windows carried.
	runs []profile.RunTotal
}

// Reduced is one recording reduced for a comparison.
type Reduced struct {
	// Series holds every metric, sorted by name (Extract).
	Series    []Series
	Side      Side
	Truncated bool
	Warning   string
	Stretch   profile.Stretch
	DurationS float64 // first window's start to last window's end
	// Runs are the recording's run totals (record -r), warm-up included.
	Runs []profile.RunTotal
	// EventsPerWindow is each event's median count in a usable window
	// (the target's total): how rare it is (rareEvents).
	EventsPerWindow map[string]float64
}

// NewReducer starts the reduction of a recording with header h, leaving
// out the first warmup usable windows (Options.Warmup).
func NewReducer(h profile.Header, warmup int) *Reducer {
	return &Reducer{header: h, warmup: warmup, x: newExtractor(h)}
}

// Add reduces the recording's next window. Windows that cover less than
// half an interval or were stretched are not usable: the first and last
// windows of a recording can be cut short (the target started late or
// exited), and a rate over a few milliseconds is noise. The first warmup
// usable windows are left out too: a starting program (page faults, cold
// caches, threads not yet running) is not its steady state. A stretched
// window (profile.IsStretched: the recorder was starved and drained late)
// averages its counts over seconds while a gauge the command reports is
// its last rate, so its per-operation values are not comparable with the
// others'. A quiet window (profile.Window.Quiet) is a target that did not
// run: no rate of its work.
func (r *Reducer) Add(w *profile.Window) {
	d, interval := w.EndNS-w.StartNS, r.header.Settings.IntervalNS
	if r.windows == 0 {
		r.firstNS = w.StartNS
	}
	r.windows++
	r.lastNS = w.EndNS
	r.stretch.Add(w, interval)
	r.runs = append(r.runs, w.Runs...)
	work := appWork(r.prevApp, w.AppMetrics)
	r.prevApp = w.AppMetrics
	if d <= 0 || (interval > 0 && 2*d < interval) || w.Quiet || profile.IsStretched(d, interval) {
		return
	}
	r.usable++
	if r.usable > r.warmup {
		r.x.window(w, work)
	}
}

// Reduced completes the reduction with how the recording ended.
func (r *Reducer) Reduced(t *profile.Trailer, truncated bool, warning string) *Reduced {
	out := &Reduced{Series: r.x.series(), Side: r.side(t), Truncated: truncated, Warning: warning, Stretch: r.stretch, Runs: r.runs,
		EventsPerWindow: r.x.eventsPerWindow()}
	if r.windows > 0 {
		out.DurationS = float64(r.lastNS-r.firstNS) / 1e9
	}
	return out
}

func (r *Reducer) side(t *profile.Trailer) Side {
	h := &r.header
	s := Side{
		Hostname: h.Host.Hostname, CPUModel: h.Host.CPUModel, Mode: h.Host.Mode,
		Command: h.Target.Command, Windows: r.windows, Used: r.x.used,
		IntervalS: float64(h.Settings.IntervalNS) / 1e9, Events: []string{},
	}
	for _, e := range h.Events {
		if e.Status == profile.StatusMeasured {
			s.Events = append(s.Events, e.Name)
		}
	}
	sort.Strings(s.Events)
	if t != nil {
		s.AppMetrics = t.AppMetrics
	}
	return s
}

// Reduce reduces a recording already in memory, as a stream of its
// windows would be.
func Reduce(rec *profile.Recording, warmup int) *Reduced {
	r := NewReducer(rec.Header, warmup)
	for i := range rec.Windows {
		r.Add(&rec.Windows[i])
	}
	return r.Reduced(rec.Trailer, rec.Truncated, rec.Warning)
}

// Extract derives every metric of a recording, one value per usable window
// (Reducer.Add says which), sorted by name.
func Extract(r *profile.Recording, warmup int) []Series {
	return Reduce(r, warmup).Series
}

// appWork returns the work each app counter (NAME_total) counted in a
// window: its last value in the window, cur, less its last value in the
// window before, prev. A window without a value of its own, or whose
// previous window has none, gets nothing (its share of the work is
// unknown), and neither does a counter that went down (the command
// restarted it). The first window has no previous one: what the counter
// held when it started is not known to be zero.
func appWork(prev, cur map[string]float64) map[string]float64 {
	var out map[string]float64
	for name, v := range cur {
		p, ok := prev[name]
		if _, isCounter := counterRate(name); !isCounter || !ok || v < p {
			continue
		}
		if out == nil {
			out = map[string]float64{}
		}
		out[name] = v - p
	}
	return out
}

// extractor derives the metrics of one recording's usable windows, one at
// a time, into series by name. A metric whose event or CPU first shows in
// a later window had zero in the windows before: its series starts with
// that many zeros (backfilled).
type extractor struct {
	byName map[string]*Series
	used   int       // usable windows added so far
	secs   []float64 // each one's length in seconds
	// events are the events of the per-CPU counters, with their rate
	// series; cpus the CPUs that counted anything.
	events    map[string]*eventSeries
	cpus      map[int]bool
	nodeOf    []int
	nodes     []int // NUMA node ids, when the host has more than one
	funcNames map[int]string
	comms     commCounts
	// ratio holds the catalogue's derived metrics until the end, when it
	// is known whether both their events were measured.
	ratio map[string]*Series
	// perOp is each usable window's rates of work (app.NAME_per_sec): the
	// events per unit of work, made at the end from every event's rate.
	perOp []workRate
}

// eventSeries are one event's rate series: the target's total, per CPU
// and per NUMA node (extractor.nodes' order).
type eventSeries struct {
	rate *Series
	cpu  map[int]*Series
	node []*Series
}

// workRate is one app metric's rate of work in the usable window at
// position window.
type workRate struct {
	window int
	unit   string
	rate   float64
}

func newExtractor(h profile.Header) *extractor {
	topo := h.Host.Topology
	x := &extractor{
		byName: map[string]*Series{}, events: map[string]*eventSeries{}, cpus: map[int]bool{},
		nodeOf: topo.NodeOf(), funcNames: map[int]string{}, comms: newCommCounts(), ratio: map[string]*Series{},
	}
	for _, f := range h.Functions {
		x.funcNames[f.ID] = f.Name
	}
	if len(topo.Nodes) > 1 {
		for _, n := range topo.Nodes {
			x.nodes = append(x.nodes, n.ID)
		}
	}
	return x
}

func (x *extractor) add(name, group, unit string, dir Direction, v float64) {
	addTo(x.byName, name, group, unit, dir, v)
}

func addTo(byName map[string]*Series, name, group, unit string, dir Direction, v float64) {
	// An app metric can carry anything the command wrote; a value that is
	// not a number cannot be ranked.
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	s, ok := byName[name]
	if !ok {
		s = &Series{Name: name, Group: group, Unit: unit, Direction: dir}
		byName[name] = s
	}
	s.Values = append(s.Values, v)
}

// backfilled returns the series name, new ones with a zero for each
// usable window before this one.
func (x *extractor) backfilled(name, group, unit string, dir Direction) *Series {
	if s, ok := x.byName[name]; ok {
		return s
	}
	s := &Series{Name: name, Group: group, Unit: unit, Direction: dir, Values: make([]float64, x.used)}
	x.byName[name] = s
	return s
}

// window adds one usable window's value of every metric it has; work is
// its app counters' work (appWork).
func (x *extractor) window(w *profile.Window, work map[string]float64) {
	sec := float64(w.EndNS-w.StartNS) / 1e9
	total := map[string]float64{}
	perCPU := map[string]map[int]float64{}
	for _, c := range w.Counters {
		x.learn(c)
		if perCPU[c.Event] == nil {
			perCPU[c.Event] = map[int]float64{}
		}
		for cpu, v := range c.PerCPU {
			total[c.Event] += float64(v)
			perCPU[c.Event][cpu] += float64(v)
		}
	}
	x.eventRates(total, perCPU, sec)
	x.comms.add(w, x.used)
	x.ratios(total)
	x.histograms(w)
	x.functions(w, sec)
	x.app(w, work, sec)
	x.secs = append(x.secs, sec)
	x.used++
}

// learn starts the series of a counter's event and of the CPUs it counted
// on, when they are new.
func (x *extractor) learn(c profile.Counter) {
	if x.events[c.Event] == nil {
		ev := c.Event
		es := &eventSeries{rate: x.backfilled(ev+"/s", GroupRate, "/s", EventDirection(ev)), cpu: map[int]*Series{}}
		for cpu := range x.cpus {
			es.cpu[cpu] = x.backfilled(cpuRateName(ev, cpu), GroupRate, "/s", Neutral)
		}
		for _, n := range x.nodes {
			es.node = append(es.node, x.backfilled(fmt.Sprintf("%s/s{node=%d}", ev, n), GroupRate, "/s", Neutral))
		}
		x.events[ev] = es
	}
	for cpu, v := range c.PerCPU {
		if v == 0 || x.cpus[cpu] {
			continue
		}
		x.cpus[cpu] = true
		for ev, es := range x.events {
			es.cpu[cpu] = x.backfilled(cpuRateName(ev, cpu), GroupRate, "/s", Neutral)
		}
	}
}

func cpuRateName(ev string, cpu int) string { return fmt.Sprintf("%s/s{cpu=%d}", ev, cpu) }

// eventRates adds each event's rate: the target's total, per CPU and per
// NUMA node. Per-CPU and per-node rates are neutral: which CPU a thread
// runs on differs from run to run, and so does the other load on each
// CPU, so a shift between CPUs is where, not whether. The target's totals
// carry the verdict.
func (x *extractor) eventRates(total map[string]float64, perCPU map[string]map[int]float64, sec float64) {
	for ev, es := range x.events {
		es.rate.Values = append(es.rate.Values, total[ev]/sec)
		for cpu, s := range es.cpu {
			s.Values = append(s.Values, perCPU[ev][cpu]/sec)
		}
		for i, n := range x.nodes {
			var sum float64
			for cpu, v := range perCPU[ev] {
				if cpu < len(x.nodeOf) && x.nodeOf[cpu] == n {
					sum += v
				}
			}
			es.node[i].Values = append(es.node[i].Values, sum/sec)
		}
	}
}

// ratios keeps the catalogue's derived metrics (miss ratios, MPKI, IPC)
// of a window whose denominator counted anything, by their one name
// (package metric); series adds those whose two events were measured.
func (x *extractor) ratios(total map[string]float64) {
	for _, d := range metric.Ratios() {
		if total[d.Den] == 0 {
			continue
		}
		dir := LowerIsBetter
		if d.HigherIsBetter {
			dir = HigherIsBetter
		}
		addTo(x.ratio, string(d.ID), GroupRatio, d.Unit, dir, d.Scale*total[d.Num]/total[d.Den])
	}
}

// app adds the command's metrics of the window. A counter NAME_total
// becomes its rate over the window, app.NAME_per_sec, in place of a
// gauge of that name the command may also write (the counter's rate is the
// window's own; a gauge's is whatever span the command measured). A
// counter's running total is not compared: it grows with time whatever
// the program does.
func (x *extractor) app(w *profile.Window, work map[string]float64, sec float64) {
	values := map[string]float64{}
	for name, v := range w.AppMetrics {
		if _, isCounter := counterRate(name); !isCounter {
			values[name] = v
		}
	}
	for name, done := range work {
		rate, _ := counterRate(name)
		values[rate] = done / sec
	}
	for name, v := range values {
		x.add("app."+name, GroupApp, "", AppDirection(name), v)
		if unit, ok := workUnit(name); ok && v > 0 {
			x.perOp = append(x.perOp, workRate{x.used, unit, v})
		}
	}
}

// eventsPerWindow is each event's median count in a usable window.
func (x *extractor) eventsPerWindow() map[string]float64 {
	out := make(map[string]float64, len(x.events))
	for ev, es := range x.events {
		counts := make([]float64, 0, len(es.rate.Values))
		for i, v := range es.rate.Values {
			if i < len(x.secs) {
				counts = append(counts, v*x.secs[i])
			}
		}
		out[ev] = Median(counts)
	}
	return out
}

// series completes the metrics that needed every window (per process,
// per unit of work, derived ratios) and returns them all, sorted by name.
func (x *extractor) series() []Series {
	x.comms.rates(x)
	// Events per unit of work: a change that makes the program slower
	// also changes its event rates, and rates against a busy host's
	// background hide it; per operation they do not.
	for _, wr := range x.perOp {
		for ev, es := range x.events {
			x.add(ev+"/"+wr.unit, GroupPerOp, "/"+wr.unit, EventDirection(ev), es.rate.Values[wr.window]/wr.rate)
		}
	}
	for _, d := range metric.Ratios() {
		if s := x.ratio[string(d.ID)]; s != nil && x.events[d.Num] != nil && x.events[d.Den] != nil {
			x.byName[s.Name] = s
		}
	}
	out := make([]Series, 0, len(x.byName))
	for _, s := range x.byName {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// commCounts gathers the per-process counts by process name (comm) until
// the busiest names are known. Per-process counts may name events the
// per-CPU counters do not (the recorder counts some per task only), so
// they have their own event set.
type commCounts struct {
	events  map[string]bool
	total   map[string]uint64
	windows map[string]int                      // usable windows each comm is in
	values  map[string]map[string][]windowValue // comm -> event -> summed counts
}

// windowValue is a value in the usable window at position window.
type windowValue struct {
	window int
	v      float64
}

func newCommCounts() commCounts {
	return commCounts{events: map[string]bool{}, total: map[string]uint64{}, windows: map[string]int{},
		values: map[string]map[string][]windowValue{}}
}

// add sums a window's per-process counts by comm and event.
func (c *commCounts) add(w *profile.Window, window int) {
	perComm := map[string]map[string]float64{}
	seen := map[string]bool{}
	for _, p := range w.Processes {
		for ev, v := range p.Counts {
			c.events[ev] = true
			c.total[p.Comm] += v
			if perComm[ev] == nil {
				perComm[ev] = map[string]float64{}
			}
			perComm[ev][p.Comm] += float64(v)
		}
		if !seen[p.Comm] {
			seen[p.Comm] = true
			c.windows[p.Comm]++
		}
	}
	for ev, byComm := range perComm {
		for comm, v := range byComm {
			if c.values[comm] == nil {
				c.values[comm] = map[string][]windowValue{}
			}
			c.values[comm][ev] = append(c.values[comm][ev], windowValue{window, v})
		}
	}
}

// rates adds the busiest comms' event rates to x. A comm seen in fewer
// than half the windows is a short-lived helper or a name the process had
// only briefly (it renamed itself): its per-window rate is mostly zeros,
// which compares nothing.
func (c *commCounts) rates(x *extractor) {
	for comm := range c.total {
		if 2*c.windows[comm] < x.used {
			delete(c.total, comm)
		}
	}
	comms := topComms(c.total, MaxComms)
	for ev := range c.events {
		dir := EventDirection(ev)
		for _, comm := range comms {
			counts := make([]float64, x.used)
			for _, wv := range c.values[comm][ev] {
				counts[wv.window] = wv.v
			}
			name := fmt.Sprintf("%s/s{comm=%s}", ev, strconv.Quote(comm))
			for i, n := range counts {
				x.add(name, GroupRate, "/s", dir, n/x.secs[i])
			}
		}
	}
}
