package compare

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

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
	// `cpu-clock/s{comm="o3-rcu"}`, "LLC-load-misses/LLC-loads",
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

// ratioTable lists the derived ratios computed when both inputs were
// measured: miss ratios (lower is better) and IPC (higher is better).
var ratioTable = []struct {
	num, den string
	dir      Direction
}{
	{"cache-misses", "cache-references", LowerIsBetter},
	{"L1-dcache-load-misses", "L1-dcache-loads", LowerIsBetter},
	{"LLC-load-misses", "LLC-loads", LowerIsBetter},
	{"LLC-store-misses", "LLC-stores", LowerIsBetter},
	{"node-load-misses", "node-loads", LowerIsBetter},
	{"l2-misses", "l2-references", LowerIsBetter},
	{"instructions", "cycles", HigherIsBetter},
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

// usableWindows returns the windows that cover at least half an interval,
// less the first warmup of them: the first and last windows of a recording
// can be cut short (the target started late or exited), a rate over a few
// milliseconds is noise, and a starting program (page faults, cold caches,
// threads not yet running) is not its steady state.
func usableWindows(r *profile.Recording, warmup int) []profile.Window {
	interval := r.Header.Settings.IntervalNS
	var out []profile.Window
	for _, w := range r.Windows {
		d := w.EndNS - w.StartNS
		if d <= 0 || (interval > 0 && 2*d < interval) {
			continue
		}
		out = append(out, w)
	}
	if warmup >= len(out) {
		return nil
	}
	return out[max(0, warmup):]
}

// Extract derives every metric of a recording, one value per usable window
// (windows shorter than half the interval and the first warmup windows are
// left out), sorted by name.
func Extract(r *profile.Recording, warmup int) []Series {
	wins := usableWindows(r, warmup)
	topo := r.Header.Host.Topology
	nodeOf := topo.NodeOf()
	multiNode := len(topo.Nodes) > 1
	byName := map[string]*Series{}
	add := func(name, group, unit string, dir Direction, v float64) {
		// An app metric can carry anything the command wrote; a value
		// that is not a number cannot be ranked.
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

	// Events and comms present anywhere: a window without an entry for
	// them counted zero.
	events := map[string]bool{}
	commTotal := map[string]uint64{}
	commWindows := map[string]int{}
	cpus := map[int]bool{}
	for _, w := range wins {
		for _, c := range w.Counters {
			events[c.Event] = true
			for cpu, v := range c.PerCPU {
				if v > 0 {
					cpus[cpu] = true
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
		if 2*commWindows[c] < len(wins) {
			delete(commTotal, c)
		}
	}
	comms := topComms(commTotal, MaxComms)
	commEvents := perCommEvents(wins)
	funcNames := map[int]string{}
	for _, f := range r.Header.Functions {
		funcNames[f.ID] = f.Name
	}
	var nodes []int
	for _, n := range topo.Nodes {
		nodes = append(nodes, n.ID)
	}

	for _, w := range wins {
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
		perComm := map[string]map[string]float64{}
		for _, p := range w.Processes {
			for ev, v := range p.Counts {
				if perComm[ev] == nil {
					perComm[ev] = map[string]float64{}
				}
				perComm[ev][p.Comm] += float64(v)
			}
		}
		for ev := range events {
			dir := EventDirection(ev)
			add(ev+"/s", GroupRate, "/s", dir, total[ev]/sec)
			// Per-CPU and per-node rates are neutral: which CPU a thread
			// runs on differs from run to run, and so does the other
			// load on each CPU, so a shift between CPUs is where, not
			// whether. The target's totals carry the verdict.
			for cpu := range cpus {
				add(fmt.Sprintf("%s/s{cpu=%d}", ev, cpu), GroupRate, "/s", Neutral, perCPU[ev][cpu]/sec)
			}
			if multiNode {
				for _, n := range nodes {
					var sum float64
					for cpu, v := range perCPU[ev] {
						if cpu < len(nodeOf) && nodeOf[cpu] == n {
							sum += v
						}
					}
					add(fmt.Sprintf("%s/s{node=%d}", ev, n), GroupRate, "/s", Neutral, sum/sec)
				}
			}
		}
		// Per-process counts may name events the per-CPU counters do not
		// (the recorder counts some per task only), so they have their
		// own event set.
		for ev := range commEvents {
			dir := EventDirection(ev)
			for _, comm := range comms {
				add(fmt.Sprintf("%s/s{comm=%s}", ev, strconv.Quote(comm)), GroupRate, "/s", dir, perComm[ev][comm]/sec)
			}
		}
		for _, rt := range ratioTable {
			if !events[rt.num] || !events[rt.den] || total[rt.den] == 0 {
				continue
			}
			add(rt.num+"/"+rt.den, GroupRatio, "ratio", rt.dir, total[rt.num]/total[rt.den])
		}
		if events["instructions"] && total["instructions"] > 0 {
			for ev := range events {
				if strings.Contains(ev, "misses") {
					add(ev+"/kinstr", GroupRatio, "MPKI", LowerIsBetter, 1000*total[ev]/total["instructions"])
				}
			}
		}
		hist := map[string][]uint64{}
		var histOrder []string
		for i := range w.Histograms {
			h := &w.Histograms[i]
			b, ok := hist[h.Name]
			if !ok {
				b = make([]uint64, profile.HistBuckets)
				hist[h.Name] = b
				histOrder = append(histOrder, h.Name)
			}
			h.AddTo(b)
		}
		for _, name := range histOrder {
			b := hist[name]
			var n uint64
			for _, c := range b {
				n += c
			}
			if n == 0 {
				continue
			}
			dir := HistogramDirection(name)
			add(name+".p50", GroupLatency, "ns", dir, profile.Percentile(b, 0.5))
			add(name+".p99", GroupLatency, "ns", dir, profile.Percentile(b, 0.99))
		}
		// --func functions, matched across recordings by name: latency
		// percentiles of the calls that returned in the window, and the
		// call rate (neutral: more calls is more work done, or more
		// work asked for).
		for _, fw := range w.Functions {
			name, ok := funcNames[fw.ID]
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
			add("function.calls/s"+label, GroupRate, "/s", Neutral, float64(n)/sec)
			if n > 0 {
				add("function.p50"+label, GroupLatency, "ns", LowerIsBetter, profile.Percentile(b, 0.5))
				add("function.p99"+label, GroupLatency, "ns", LowerIsBetter, profile.Percentile(b, 0.99))
			}
		}
		for name, v := range w.AppMetrics {
			add("app."+name, GroupApp, "", AppDirection(name), v)
			// Events per unit of work: a change that makes the program
			// slower also changes its event rates, and rates against a
			// busy host's background hide it; per operation they do not.
			if unit, ok := workUnit(name); ok && v > 0 {
				for ev := range events {
					add(ev+"/"+unit, GroupPerOp, "/"+unit, EventDirection(ev), total[ev]/sec/v)
				}
			}
		}
	}
	out := make([]Series, 0, len(byName))
	for _, s := range byName {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// perCommEvents lists the events per-process counts name.
func perCommEvents(wins []profile.Window) map[string]bool {
	out := map[string]bool{}
	for _, w := range wins {
		for _, p := range w.Processes {
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
