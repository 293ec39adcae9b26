package compare

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"golang.org/x/perf/benchmath"

	"github.com/cacheheat/cacheheat/profile"
)

// Evidence says what a comparison's tests were run on.
const (
	// EvidenceRuns: per-run totals of repeated runs (record -r), one
	// value per run, as benchstat compares benchmark runs. Runs are
	// independent repetitions of the whole program.
	EvidenceRuns = "runs"
	// EvidenceWindows: per-window rates of one recording a side, for a
	// long-running service. The windows of one run are not independent of
	// each other, nor of the run: two runs of one program differ by more
	// than one run's windows vary, so window tests call a change only
	// beyond WindowFloor.
	EvidenceWindows = "windows"
)

// WindowFloor is the smallest change window tests call, whatever the
// threshold: the variance between two runs of one program, which one run
// a side cannot measure (rcu good against itself: context-switches/s
// x1.17 with p = 0.0034 over 4 windows a side).
const WindowFloor = 0.2

// Run metric names; the gate, unless --metric names others, is wall and
// CPU time.
const (
	RunWall          = "wall time"
	RunCPU           = "cpu time"
	RunUser          = "user time"
	RunSys           = "system time"
	RunRSS           = "peak RSS"
	RunSamplesPrefix = "share of samples: "
)

// DefaultGate are the run metrics that decide the exit code by default:
// what a CI job waits for and what it pays.
var DefaultGate = []string{RunWall, RunCPU}

// usedRuns are the runs a comparison uses: not the warm-up ones, and not
// a failed one.
func usedRuns(runs []profile.RunTotal) []profile.RunTotal {
	var out []profile.RunTotal
	for _, r := range runs {
		if !r.Warmup && r.ExitStatus == 0 {
			out = append(out, r)
		}
	}
	return out
}

// runSeries are the metrics of per-run totals, one value per run: wall,
// CPU, user and system time (s), peak RSS (kB), each event's total per
// run, and the share of the run's samples of each function that holds at
// least 1% of them on either side (topFuncs names them).
func runSeries(runs []profile.RunTotal, funcs []string) []Series {
	var out []Series
	add := func(name, group, unit string, dir Direction, v func(profile.RunTotal) float64) {
		s := Series{Name: name, Group: group, Unit: unit, Direction: dir}
		for _, r := range runs {
			s.Values = append(s.Values, v(r))
		}
		out = append(out, s)
	}
	add(RunWall, "run", "s", LowerIsBetter, func(r profile.RunTotal) float64 { return float64(r.WallNS) / 1e9 })
	add(RunCPU, "run", "s", LowerIsBetter, func(r profile.RunTotal) float64 { return float64(r.CPUNS()) / 1e9 })
	add(RunUser, "run", "s", LowerIsBetter, func(r profile.RunTotal) float64 { return float64(r.UserNS) / 1e9 })
	add(RunSys, "run", "s", LowerIsBetter, func(r profile.RunTotal) float64 { return float64(r.SysNS) / 1e9 })
	add(RunRSS, "run", "kB", LowerIsBetter, func(r profile.RunTotal) float64 { return float64(r.MaxRSSKB) })
	events := map[string]bool{}
	for _, r := range runs {
		for e := range r.Counts {
			events[e] = true
		}
	}
	names := make([]string, 0, len(events))
	for e := range events {
		names = append(names, e)
	}
	sort.Strings(names)
	for _, e := range names {
		// The same work each run: more of any event per run is worse.
		add(e+"/run", "counters per run", "", LowerIsBetter, func(r profile.RunTotal) float64 { return float64(r.Counts[e]) })
	}
	for _, f := range funcs {
		add(RunSamplesPrefix+f, "functions", "", Neutral, func(r profile.RunTotal) float64 {
			if r.Samples == 0 {
				return 0
			}
			return float64(r.Functions[f]) / float64(r.Samples)
		})
	}
	return out
}

// topFuncs names the functions with at least 1% of either side's samples,
// at most 20, most sampled first.
func topFuncs(base, new []profile.RunTotal) []string {
	share := map[string]float64{}
	for _, side := range [][]profile.RunTotal{base, new} {
		var total float64
		by := map[string]float64{}
		for _, r := range side {
			total += float64(r.Samples)
			for f, n := range r.Functions {
				by[f] += float64(n)
			}
		}
		for f, n := range by {
			if total > 0 {
				share[f] = math.Max(share[f], n/total)
			}
		}
	}
	var out []string
	for f, s := range share {
		if s >= 0.01 {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if share[out[i]] != share[out[j]] {
			return share[out[i]] > share[out[j]]
		}
		return out[i] < out[j]
	})
	if len(out) > 20 {
		out = out[:20]
	}
	return out
}

// CompareRuns compares two sides' per-run totals, as benchstat compares
// benchmark results: for each metric, the median of each side with its
// order-statistics confidence interval and a Mann-Whitney U test
// (golang.org/x/perf/benchmath's AssumeNothing). The gate metrics (opts.
// Metrics, else DefaultGate) are one Holm family and decide a regression;
// every other metric is reported, corrected with the gate over everything
// tested. A gate metric whose runs could not reach alpha even if every
// run of one side beat every run of the other is undecided, and Need says
// how many runs a side would decide it.
func CompareRuns(base, new []profile.RunTotal, opts Options) Result {
	opts.Alpha, opts.Threshold = opts.RunAlpha, opts.RunThreshold
	b, n := usedRuns(base), usedRuns(new)
	funcs := topFuncs(b, n)
	bs, ns := runSeries(b, funcs), runSeries(n, funcs)
	gatePats := compilePatterns(opts.Metrics)
	if len(gatePats) == 0 {
		gatePats = compilePatterns(DefaultGate)
	}
	dirs := directionOverrides{higher: compilePatterns(opts.HigherIsBetter), lower: compilePatterns(opts.LowerIsBetter)}
	res := Result{
		Alpha: opts.Alpha, Threshold: opts.Threshold, Confidence: opts.Confidence, Evidence: EvidenceRuns,
		Metrics: []MetricResult{}, Skipped: []Skipped{}, Warnings: []string{}, Counts: map[string]int{},
	}
	newByName := byName(ns)
	var gate, all []int
	for _, s := range bs {
		ns, ok := newByName[s.Name]
		if !ok {
			continue
		}
		if Median(s.Values) == 0 && Median(ns.Values) == 0 {
			res.Skipped = append(res.Skipped, Skipped{s.Name, "zero in most runs of both"})
			continue
		}
		m := testRuns(s, ns, dirs.of(s), opts)
		m.Gate = matchName(gatePats, s.Name)
		if m.Gate {
			gate = append(gate, len(res.Metrics))
		}
		all = append(all, len(res.Metrics))
		res.Metrics = append(res.Metrics, m)
	}
	if len(gate) == 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("no run metric matches %s: nothing gates", strings.Join(opts.Metrics, ", ")))
	}
	// Every metric's p-value corrected over everything tested; the gate's
	// verdicts come from the gate's own family.
	applyHolm(&res, all, opts)
	applyHolm(&res, gate, opts)
	res.Tested = len(gate)
	markUndecidedRuns(&res, gate, opts)
	for _, m := range res.Metrics {
		res.Counts[m.Verdict]++
	}
	sortByVerdict(res.Metrics)
	return res
}

// testRuns compares one metric's runs with benchmath.
func testRuns(b, n Series, dir Direction, opts Options) MetricResult {
	th := &benchmath.Thresholds{CompareAlpha: opts.Alpha}
	bsmp := benchmath.NewSample(append([]float64(nil), b.Values...), th)
	nsmp := benchmath.NewSample(append([]float64(nil), n.Values...), th)
	bsum := benchmath.AssumeNothing.Summary(bsmp, opts.Confidence)
	nsum := benchmath.AssumeNothing.Summary(nsmp, opts.Confidence)
	cmp := benchmath.AssumeNothing.Compare(bsmp, nsmp)
	m := MetricResult{
		Name: b.Name, Group: b.Group, Unit: b.Unit, Direction: dir,
		BaseN: len(b.Values), NewN: len(n.Values),
		BaseMedian: bsum.Center, NewMedian: nsum.Center,
		Base: b.Values, New: n.Values, P: cmp.P, PAdj: 1, Exact: true,
	}
	m.Ratio = Ratio(m.NewMedian, m.BaseMedian)
	// The ratio's interval is the one the rank test gives (benchmath
	// bounds each median alone, which needs 6 runs a side at 95%).
	m.CILow, m.CIHigh = RankRatioCI(b.Values, n.Values, opts.Confidence)
	if m.BaseN < 2 || m.NewN < 2 {
		m.Verdict = VerdictTooFew
	}
	return m
}

// applyHolm corrects the metrics at idx as one family and gives each its
// verdict.
func applyHolm(res *Result, idx []int, opts Options) {
	var tested []int
	for _, i := range idx {
		if res.Metrics[i].Verdict != VerdictTooFew {
			tested = append(tested, i)
		}
	}
	ps := make([]float64, len(tested))
	for k, i := range tested {
		ps[k] = res.Metrics[i].P
	}
	for k, adj := range Holm(ps) {
		m := &res.Metrics[tested[k]]
		m.PAdj = adj
		m.Significant = adj < opts.Alpha
		m.Verdict = verdict(m.Significant, m.Ratio, m.Direction, opts.Threshold)
		if !m.Gate && m.Verdict == VerdictRegression {
			// Reported, not gating: a regression of a metric that is not
			// the gate reads "changed" in the exit code's terms.
			m.Verdict = VerdictChanged
		}
	}
}

// markUndecidedRuns turns the gate metrics that could not be decided
// into VerdictUndecided and says how many runs would decide them.
func markUndecidedRuns(res *Result, gate []int, opts Options) {
	family := max(len(gate), 1)
	var undecided []string
	smallest := 1.0
	for _, i := range gate {
		m := &res.Metrics[i]
		p := minP(m.BaseN, m.NewN)
		if m.Verdict == VerdictTooFew || (!m.Significant && float64(family)*p >= opts.Alpha) {
			m.Verdict = VerdictUndecided
			undecided = append(undecided, m.Name)
			smallest = math.Min(smallest, p)
		}
	}
	if len(undecided) == 0 {
		return
	}
	n := 2
	for float64(family)*minP(n, n) >= opts.Alpha && n < 1000 {
		n++
	}
	res.Need = &WindowsNeeded{Metrics: undecided, MinWindows: n, Record: n, SmallestP: smallest, Family: family, Unit: EvidenceRuns}
}
