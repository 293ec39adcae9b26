package compare

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/profile"
)

// Direction says which way a metric gets worse.
type Direction int

const (
	// Neutral metrics are tested two-sided: a significant change is
	// reported as "changed", never as a regression.
	Neutral Direction = iota
	// LowerIsBetter metrics regress when they grow (misses, faults,
	// context switches, latency).
	LowerIsBetter
	// HigherIsBetter metrics regress when they shrink (throughput, IPC).
	HigherIsBetter
)

func (d Direction) String() string {
	switch d {
	case LowerIsBetter:
		return "lower-is-better"
	case HigherIsBetter:
		return "higher-is-better"
	}
	return "neutral"
}

// MarshalText writes the direction's name, so JSON says "lower-is-better".
func (d Direction) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Metric groups.
const (
	GroupRate    = "rate"    // event count per second
	GroupRatio   = "ratio"   // miss ratio, MPKI, IPC
	GroupLatency = "latency" // latency histogram percentile
	GroupApp     = "app"     // reported by the recorded command
	GroupPerOp   = "per-op"  // event count per unit of the command's work
)

// workUnit returns the unit of work of an app metric that is a rate of
// work, "NAME_per_sec": "op" for ops_per_sec, else NAME ("requests").
func workUnit(app string) (string, bool) {
	unit, ok := strings.CutSuffix(app, "_per_sec")
	if !ok || unit == "" {
		return "", false
	}
	if unit == "ops" {
		unit = "op"
	}
	return unit, true
}

// Series is one metric's per-window values in one recording.
type Series struct {
	// Name identifies the metric across recordings, for example
	// "context-switches/s", "context-switches/s{cpu=1}",
	// `cpu-clock/s{comm="o3-rcu"}`, "LLC-load-miss-ratio" (package metric),
	// "offcpu.p99", "app.ops_per_sec" or "context-switches/op" (per unit
	// of the work an app metric NAME_per_sec counts).
	Name      string    `json:"name"`
	Group     string    `json:"group"`
	Unit      string    `json:"unit"`
	Direction Direction `json:"direction"`
	// Values holds one value per window that has the metric (a latency
	// percentile needs at least one event in the window, a ratio a
	// non-zero denominator, an app metric a reported value).
	Values []float64 `json:"values"`
}

// MaxComms caps the per-process metrics to the busiest comms (among those
// present in at least half the windows), so that a
// target with many short-lived processes does not dilute the test's power
// with hundreds of near-empty metrics (each one tightens Holm's correction).
const MaxComms = 10

// eventDirection is the table of how perf events get worse; events not
// matched are neutral (cycles, instructions, cpu-clock, loads, references:
// more of them is neither good nor bad by itself).
var eventDirection = []struct {
	contains string
	dir      Direction
}{
	{"miss", LowerIsBetter},  // cache-misses, LLC-load-misses, dTLB-load-misses, branch-misses, l2-misses
	{"fault", LowerIsBetter}, // page-faults, major-faults, minor-faults
	{"context-switches", LowerIsBetter},
	{"cpu-migrations", LowerIsBetter},
}

// EventDirection returns how a perf event's rate gets worse.
func EventDirection(event string) Direction {
	for _, r := range eventDirection {
		if strings.Contains(event, r.contains) {
			return r.dir
		}
	}
	return Neutral
}

// histDirection overrides the direction of latency histograms' percentiles
// (lower is better otherwise). The kernel's scheduler histograms time each
// episode (one wait for a CPU, one stretch off it), and their percentiles
// move against the program's cost: a program that starts blocking on a
// lock adds many short off-CPU episodes (its offcpu p50 falls) and leaves
// the CPUs to the others (its runq-latency falls) while it gets slower. So
// they are reported as "changed", never as a regression or an
// improvement; context-switches per op carries the cost. --lower-is-better
// 'runq-latency.*' restores the usual reading where the work is fixed.
var histDirection = map[string]Direction{
	profile.HistRunqLatency: Neutral,
	profile.HistOffCPU:      Neutral,
}

// HistogramDirection returns how a latency histogram's percentiles get
// worse.
func HistogramDirection(name string) Direction {
	if d, ok := histDirection[name]; ok {
		return d
	}
	return LowerIsBetter
}

// appDirection is the naming convention for app metrics (docs/CI.md):
// checked in order on the lower-cased name; the first match wins. A time
// unit suffix beats a throughput word ("ops_latency_ns" is a latency).
var appDirection = []struct {
	prefix, suffix, contains string
	dir                      Direction
}{
	{suffix: "_ns", dir: LowerIsBetter},
	{prefix: "ns_", dir: LowerIsBetter}, // ns_per_op
	{prefix: "us_", dir: LowerIsBetter},
	{prefix: "ms_", dir: LowerIsBetter},
	{suffix: "_us", dir: LowerIsBetter},
	{suffix: "_ms", dir: LowerIsBetter},
	{contains: "latency", dir: LowerIsBetter},
	{contains: "per_sec", dir: HigherIsBetter},
	{contains: "ops", dir: HigherIsBetter},
	{contains: "throughput", dir: HigherIsBetter},
	{contains: "qps", dir: HigherIsBetter},
	{contains: "rps", dir: HigherIsBetter},
}

// AppDirection returns the direction the naming convention gives an app
// metric name (without the "app." prefix): lower is better for names
// ending _ns, _us or _ms, starting ns_, us_ or ms_ (ns_per_op) or
// containing "latency"; higher is better for
// names containing per_sec, ops, throughput, qps or rps; neutral otherwise.
func AppDirection(name string) Direction {
	n := strings.ToLower(name)
	for _, r := range appDirection {
		if (r.prefix != "" && strings.HasPrefix(n, r.prefix)) || (r.suffix != "" && strings.HasSuffix(n, r.suffix)) ||
			(r.contains != "" && strings.Contains(n, r.contains)) {
			return r.dir
		}
	}
	return Neutral
}

// usableWindows returns the positions in r.Windows of the windows that
// cover at least half an interval and were not stretched, less the first
// warmup of them: the first and last windows of a recording can be cut
// short (the target started late or exited), a rate over a few
// milliseconds is noise, and a starting program (page faults, cold caches,
// threads not yet running) is not its steady state. A stretched window
// (profile.IsStretched: the recorder was starved and drained late) averages
// its counts over seconds while a gauge the command reports is its last
// rate, so its per-operation values are not comparable with the others'.
func usableWindows(r *profile.Recording, warmup int) []int {
	interval := r.Header.Settings.IntervalNS
	var out []int
	for i, w := range r.Windows {
		d := w.EndNS - w.StartNS
		if d <= 0 || (interval > 0 && 2*d < interval) || profile.IsStretched(d, interval) {
			continue
		}
		out = append(out, i)
	}
	if warmup >= len(out) {
		return nil
	}
	return out[max(0, warmup):]
}

// extractor derives the metrics of one recording, window by window, into
// series by name. What it needs across windows (which events, CPUs, comms
// and functions the recording has) is found before the first window.
type extractor struct {
	byName     map[string]*Series
	events     map[string]bool // events of the per-CPU counters
	commEvents map[string]bool // events of the per-process counts
	cpus       map[int]bool    // CPUs that counted anything
	comms      []string        // the comms given their own metrics
	nodeOf     []int
	nodes      []int // NUMA node ids, when the host has more than one
	funcNames  map[int]string
	// work is each window's app counters (NAME_total) as work done in the
	// window, by position in the recording (appWork).
	work []map[string]float64
}

// Extract derives every metric of a recording, one value per usable window
// (windows shorter than half the interval, stretched windows and the first
// warmup windows are left out), sorted by name.
func Extract(r *profile.Recording, warmup int) []Series {
	idx := usableWindows(r, warmup)
	x := newExtractor(r, idx)
	for _, i := range idx {
		x.window(&r.Windows[i], x.work[i])
	}
	out := make([]Series, 0, len(x.byName))
	for _, s := range x.byName {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func newExtractor(r *profile.Recording, idx []int) *extractor {
	topo := r.Header.Host.Topology
	x := &extractor{
		byName: map[string]*Series{}, events: map[string]bool{}, cpus: map[int]bool{},
		nodeOf: topo.NodeOf(), funcNames: map[int]string{}, work: appWork(r.Windows),
	}
	// Events and comms present anywhere: a window without an entry for
	// them counted zero.
	commTotal := map[string]uint64{}
	commWindows := map[string]int{}
	for _, i := range idx {
		w := &r.Windows[i]
		for _, c := range w.Counters {
			x.events[c.Event] = true
			for cpu, v := range c.PerCPU {
				if v > 0 {
					x.cpus[cpu] = true
				}
			}
		}
		seen := map[string]bool{}
		for _, p := range w.Processes {
			for _, v := range p.Counts {
				commTotal[p.Comm] += v
			}
			if !seen[p.Comm] {
				seen[p.Comm] = true
				commWindows[p.Comm]++
			}
		}
	}
	// A comm seen in fewer than half the windows is a short-lived helper
	// or a name the process had only briefly (it renamed itself): its
	// per-window rate is mostly zeros, which compares nothing.
	for c := range commTotal {
		if 2*commWindows[c] < len(idx) {
			delete(commTotal, c)
		}
	}
	x.comms = topComms(commTotal, MaxComms)
	x.commEvents = perCommEvents(r.Windows, idx)
	for _, f := range r.Header.Functions {
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
	// An app metric can carry anything the command wrote; a value that is
	// not a number cannot be ranked.
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	s, ok := x.byName[name]
	if !ok {
		s = &Series{Name: name, Group: group, Unit: unit, Direction: dir}
		x.byName[name] = s
	}
	s.Values = append(s.Values, v)
}

// window adds one window's value of every metric it has; work is its app
// counters' work (appWork).
func (x *extractor) window(w *profile.Window, work map[string]float64) {
	sec := float64(w.EndNS-w.StartNS) / 1e9
	total := map[string]float64{}
	perCPU := map[string]map[int]float64{}
	for _, c := range w.Counters {
		if perCPU[c.Event] == nil {
			perCPU[c.Event] = map[int]float64{}
		}
		for cpu, v := range c.PerCPU {
			total[c.Event] += float64(v)
			perCPU[c.Event][cpu] += float64(v)
		}
	}
	x.eventRates(total, perCPU, sec)
	x.commRates(w, sec)
	x.ratios(total)
	x.histograms(w)
	x.functions(w, sec)
	x.app(w, work, total, sec)
}

// eventRates adds each event's rate: the target's total, per CPU and per
// NUMA node.
func (x *extractor) eventRates(total map[string]float64, perCPU map[string]map[int]float64, sec float64) {
	for ev := range x.events {
		x.add(ev+"/s", GroupRate, "/s", EventDirection(ev), total[ev]/sec)
		// Per-CPU and per-node rates are neutral: which CPU a thread runs
		// on differs from run to run, and so does the other load on each
		// CPU, so a shift between CPUs is where, not whether. The
		// target's totals carry the verdict.
		for cpu := range x.cpus {
			x.add(fmt.Sprintf("%s/s{cpu=%d}", ev, cpu), GroupRate, "/s", Neutral, perCPU[ev][cpu]/sec)
		}
		for _, n := range x.nodes {
			var sum float64
			for cpu, v := range perCPU[ev] {
				if cpu < len(x.nodeOf) && x.nodeOf[cpu] == n {
					sum += v
				}
			}
			x.add(fmt.Sprintf("%s/s{node=%d}", ev, n), GroupRate, "/s", Neutral, sum/sec)
		}
	}
}

// commRates adds the busiest comms' event rates. Per-process counts may
// name events the per-CPU counters do not (the recorder counts some per
// task only), so they have their own event set.
func (x *extractor) commRates(w *profile.Window, sec float64) {
	perComm := map[string]map[string]float64{}
	for _, p := range w.Processes {
		for ev, v := range p.Counts {
			if perComm[ev] == nil {
				perComm[ev] = map[string]float64{}
			}
			perComm[ev][p.Comm] += float64(v)
		}
	}
	for ev := range x.commEvents {
		dir := EventDirection(ev)
		for _, comm := range x.comms {
			x.add(fmt.Sprintf("%s/s{comm=%s}", ev, strconv.Quote(comm)), GroupRate, "/s", dir, perComm[ev][comm]/sec)
		}
	}
}

// ratios adds the catalogue's derived metrics (miss ratios, MPKI, IPC)
// whose two events were measured, by their one name (package metric).
func (x *extractor) ratios(total map[string]float64) {
	for _, d := range metric.Ratios() {
		if !x.events[d.Num] || !x.events[d.Den] || total[d.Den] == 0 {
			continue
		}
		dir := LowerIsBetter
		if d.HigherIsBetter {
			dir = HigherIsBetter
		}
		x.add(string(d.ID), GroupRatio, d.Unit, dir, d.Scale*total[d.Num]/total[d.Den])
	}
}

// histograms adds the p50 and p99 of each latency histogram with events in
// the window.
func (x *extractor) histograms(w *profile.Window) {
	hist := map[string][]uint64{}
	var order []string
	for i := range w.Histograms {
		h := &w.Histograms[i]
		b, ok := hist[h.Name]
		if !ok {
			b = make([]uint64, profile.HistBuckets)
			hist[h.Name] = b
			order = append(order, h.Name)
		}
		h.AddTo(b)
	}
	for _, name := range order {
		b := hist[name]
		var n uint64
		for _, c := range b {
			n += c
		}
		if n == 0 {
			continue
		}
		dir := HistogramDirection(name)
		x.add(name+".p50", GroupLatency, "ns", dir, profile.Percentile(b, 0.5))
		x.add(name+".p99", GroupLatency, "ns", dir, profile.Percentile(b, 0.99))
	}
}

// functions adds the --func functions' metrics, matched across recordings
// by name: latency percentiles of the calls that returned in the window,
// and the call rate (neutral: more calls is more work done, or more work
// asked for).
func (x *extractor) functions(w *profile.Window, sec float64) {
	for _, fw := range w.Functions {
		name, ok := x.funcNames[fw.ID]
		if !ok {
			continue
		}
		b := make([]uint64, profile.HistBuckets)
		var n uint64
		for _, fb := range fw.Buckets {
			if fb.Bucket >= 0 && fb.Bucket < len(b) {
				b[fb.Bucket] += fb.Calls
				n += fb.Calls
			}
		}
		label := "{func=" + strconv.Quote(name) + "}"
		x.add("function.calls/s"+label, GroupRate, "/s", Neutral, float64(n)/sec)
		if n > 0 {
			x.add("function.p50"+label, GroupLatency, "ns", LowerIsBetter, profile.Percentile(b, 0.5))
			x.add("function.p99"+label, GroupLatency, "ns", LowerIsBetter, profile.Percentile(b, 0.99))
		}
	}
}

// app adds the command's metrics of the window. A counter NAME_total
// becomes its rate over the window, app.NAME_per_sec, in place of a
// gauge of that name the command may also write (the counter's rate is the
// window's own; a gauge's is whatever span the command measured). A
// counter's running total is not compared: it grows with time whatever
// the program does.
func (x *extractor) app(w *profile.Window, work map[string]float64, total map[string]float64, sec float64) {
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
		// Events per unit of work: a change that makes the program slower
		// also changes its event rates, and rates against a busy host's
		// background hide it; per operation they do not.
		if unit, ok := workUnit(name); ok && v > 0 {
			for ev := range x.events {
				x.add(ev+"/"+unit, GroupPerOp, "/"+unit, EventDirection(ev), total[ev]/sec/v)
			}
		}
	}
}

// counterRate returns the name of the rate of an app counter, NAME_per_sec
// for NAME_total (Prometheus's naming of counters), and whether name is a
// counter.
func counterRate(name string) (string, bool) {
	base, ok := strings.CutSuffix(name, "_total")
	if !ok || base == "" {
		return "", false
	}
	return base + "_per_sec", true
}

// appWork returns, for each window, the work each app counter (NAME_total)
// counted in it: its last value in the window less its last value in the
// window before. A window without a value of its own, or whose previous
// window has none, gets nothing (its share of the work is unknown), and
// neither does a counter that went down (the command restarted it). The
// first window has no previous one: what the counter held when it started
// is not known to be zero.
func appWork(wins []profile.Window) []map[string]float64 {
	out := make([]map[string]float64, len(wins))
	for i := 1; i < len(wins); i++ {
		for name, v := range wins[i].AppMetrics {
			prev, ok := wins[i-1].AppMetrics[name]
			if _, isCounter := counterRate(name); !isCounter || !ok || v < prev {
				continue
			}
			if out[i] == nil {
				out[i] = map[string]float64{}
			}
			out[i][name] = v - prev
		}
	}
	return out
}

// perCommEvents lists the events the per-process counts of the windows at
// positions idx name.
func perCommEvents(wins []profile.Window, idx []int) map[string]bool {
	out := map[string]bool{}
	for _, i := range idx {
		for _, p := range wins[i].Processes {
			for ev := range p.Counts {
				out[ev] = true
			}
		}
	}
	return out
}

// topComms returns the n comms with the largest summed counts, ties by
// name.
func topComms(total map[string]uint64, n int) []string {
	var out []string
	for c, v := range total {
		if v > 0 {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if total[out[i]] != total[out[j]] {
			return total[out[i]] > total[out[j]]
		}
		return out[i] < out[j]
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}
