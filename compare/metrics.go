package compare

import (
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
