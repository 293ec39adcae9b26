package compare

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/profile"
)

// Verdicts.
const (
	VerdictRegression  = "regression"
	VerdictImprovement = "improvement"
	// VerdictChanged is a significant change beyond the threshold of a
	// neutral metric: reported, never a regression.
	VerdictChanged  = "changed"
	VerdictNoChange = "no change"
	// VerdictTooFew marks a metric with fewer than MinWindows values on a
	// side: not tested, and not counted in the Holm correction.
	VerdictTooFew = "too few windows"
	// VerdictUndecided marks a tested metric whose sides have too few
	// windows for any result to be significant after Holm's correction:
	// even completely separated sides would not reach alpha. It is never
	// "no change": nothing was shown either way.
	VerdictUndecided = "undecided"
)

// Options tune Compare. The zero value is not useful; start from
// DefaultOptions.
type Options struct {
	// Alpha is the family-wise error rate: a metric is significant when
	// its Holm-adjusted p-value is below it.
	Alpha float64
	// Threshold is the smallest effect that counts, as a fraction: 0.05
	// means the ratio of medians NEW/BASE must leave [0.95, 1.05].
	Threshold float64
	// Confidence is the level of the bootstrap interval of the ratio.
	Confidence float64
	// BootstrapIters is the number of bootstrap rounds per metric.
	BootstrapIters int
	// MinWindows is the fewest values a side needs for a metric to be
	// tested.
	MinWindows int
	// Warmup is the number of windows left out at the start of each
	// recording (after short windows are dropped).
	Warmup int
	// Metrics restricts the comparison to metrics whose name matches one
	// of these patterns ('*' matches any run of characters); empty: all.
	Metrics []string
	// HigherIsBetter and LowerIsBetter declare directions by name pattern,
	// overriding the built-in tables (for app metrics whose names do not
	// follow the convention).
	HigherIsBetter []string
	LowerIsBetter  []string
	// WindowFloor is the smallest change a comparison of windows calls
	// (WindowFloor by default): see EvidenceWindows.
	WindowFloor float64
	// RunAlpha and RunThreshold are Alpha and Threshold for a comparison
	// of runs: runs are independent, so a smaller change can be called
	// (a 5% slower program is the case CI wants caught), and at
	// benchstat's level, 0.05, five runs a side can decide two gate
	// metrics (the smallest p-value of 5 against 5 is 0.0079). The
	// threshold is 3%, not less: two recordings of one program, one after
	// the other, differed by 2-3% in CPU time with every run of one below
	// every run of the other (2 of 20 pairs at 1%, bench/gate.sh).
	RunAlpha, RunThreshold float64
	// rare are the events with fewer than rareEvents in the median window
	// of either recording (CompareReduced sets them): their rates are not
	// sized by a comparison of windows (unsized).
	rare map[string]bool
}

// rareEvents is the median count a window needs for an event's change to
// be sized from one run a side. The Go runtime threads of falseshare good,
// pinned workers beside them, migrated 2 and 88 times a second in two
// runs beside stress-ng --cpu 2 (0.5 and 22 in a 250 ms window), and a
// diff of the two called it a x43 regression: how often a rare event
// happens differs between runs far more than one run's windows vary.
const rareEvents = 5

// DefaultOptions are the command's defaults.
func DefaultOptions() Options {
	return Options{Alpha: 0.01, Threshold: 0.05, Confidence: 0.95, BootstrapIters: 2000, MinWindows: 3, Warmup: 1, WindowFloor: WindowFloor,
		RunAlpha: 0.05, RunThreshold: 0.03}
}

// MetricResult is one metric's comparison.
type MetricResult struct {
	Name       string    `json:"name"`
	Group      string    `json:"group"`
	Unit       string    `json:"unit"`
	Direction  Direction `json:"direction"`
	BaseN      int       `json:"base_windows"`
	NewN       int       `json:"new_windows"`
	BaseMedian float64   `json:"base_median"`
	NewMedian  float64   `json:"new_median"`
	// Ratio is NewMedian/BaseMedian (0/0 = 1, x/0 = +Inf); CILow and
	// CIHigh bound it at Options.Confidence.
	Ratio  float64 `json:"ratio"`
	CILow  float64 `json:"ci_low"`
	CIHigh float64 `json:"ci_high"`
	// U is the Mann-Whitney statistic of NEW against BASE; P its two-sided
	// p-value and PAdj the Holm-adjusted one.
	U           float64 `json:"u"`
	P           float64 `json:"p"`
	PAdj        float64 `json:"p_adj"`
	Exact       bool    `json:"exact"`
	Significant bool    `json:"significant"`
	Verdict     string  `json:"verdict"`
	// Gate marks a metric that decides the exit code in a comparison of
	// runs (the others are reported); in a comparison of windows every
	// metric does.
	Gate bool `json:"gate,omitempty"`
	// Base and New are the per-window values, for the report's plots.
	Base []float64 `json:"-"`
	New  []float64 `json:"-"`
}

// MarshalJSON writes non-finite numbers (a ratio over a zero median) as
// null, which JSON can carry and encoding/json otherwise refuses.
func (m MetricResult) MarshalJSON() ([]byte, error) {
	type plain MetricResult
	return json.Marshal(struct {
		plain
		Ratio  *float64 `json:"ratio"`
		CILow  *float64 `json:"ci_low"`
		CIHigh *float64 `json:"ci_high"`
	}{plain(m), finite(m.Ratio), finite(m.CILow), finite(m.CIHigh)})
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// Skipped is a metric left out of the comparison, with why.
type Skipped struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Side describes one recording of the comparison.
type Side struct {
	Hostname  string   `json:"hostname"`
	CPUModel  string   `json:"cpu_model"`
	Mode      string   `json:"mode"`
	Command   []string `json:"command,omitempty"`
	Windows   int      `json:"windows"`
	Used      int      `json:"windows_used"`
	IntervalS float64  `json:"interval_s"`
	Events    []string `json:"events"` // measured events
	// Runs is the number of runs compared (record -r, warm-up and failed
	// runs left out); 0 for a recording of one run.
	Runs int `json:"runs,omitempty"`
	// AppMetrics are the command's final reported values (trailer).
	AppMetrics map[string]float64 `json:"app_metrics,omitempty"`
}

// Result is a whole comparison.
type Result struct {
	Base       Side           `json:"base"`
	New        Side           `json:"new"`
	Alpha      float64        `json:"alpha"`
	Threshold  float64        `json:"threshold"`
	Confidence float64        `json:"confidence"`
	Tested     int            `json:"tested"` // size of the Holm family
	Metrics    []MetricResult `json:"metrics"`
	Skipped    []Skipped      `json:"skipped"`
	Warnings   []string       `json:"warnings"`
	Counts     map[string]int `json:"counts"` // verdict -> metrics
	// Evidence says what was compared: EvidenceRuns or EvidenceWindows,
	// and Floor the smallest change window tests call (WindowFloor).
	Evidence string  `json:"evidence"`
	Floor    float64 `json:"floor,omitempty"`
	// Need, when the comparison could not decide some metrics, says how
	// many windows a side needs; nil when every metric was decidable.
	Need *WindowsNeeded `json:"windows_needed,omitempty"`
}

// WindowsNeeded says how much data a comparison that could not decide
// needs: MinWindows usable windows on each side (Record windows recorded,
// with the warm-up), and the interval that gives that many in each side's
// recorded time.
type WindowsNeeded struct {
	Metrics    []string `json:"metrics"` // the metrics not decided
	MinWindows int      `json:"min_windows"`
	Record     int      `json:"record_windows"`
	// MaxIntervalS is the longest -i that gives Record windows in the
	// shorter recording's duration; 0 when unknown.
	MaxIntervalS float64 `json:"max_interval_s,omitempty"`
	// SmallestP is the smallest two-sided Mann-Whitney p-value the sides
	// as recorded can give, and Family the number of metrics it is
	// corrected for.
	SmallestP float64 `json:"smallest_p"`
	Family    int     `json:"family"`
	// Unit is what MinWindows and Record count: EvidenceWindows (the
	// default) or EvidenceRuns (runs a side, record -r).
	Unit string `json:"unit,omitempty"`
}

// Regressed reports whether any metric regressed.
func (r *Result) Regressed() bool { return r.Counts[VerdictRegression] > 0 }

// Undecided reports whether some metric could not be decided (too few
// windows to test, or to reach alpha after correction): then the result
// is no evidence of "no regression".
func (r *Result) Undecided() bool { return r.Need != nil }

// ByVerdict returns the metrics with one verdict, in table order.
func (r *Result) ByVerdict(v string) []MetricResult {
	var out []MetricResult
	for _, m := range r.Metrics {
		if m.Verdict == v {
			out = append(out, m)
		}
	}
	return out
}

// Compare derives the metrics of both recordings and tests each one both
// have. Differences between the recordings that make the comparison
// suspect (hosts, CPU models, event sets, intervals, truncation) become
// warnings; only what both have is compared.
func Compare(base, new *profile.Recording, opts Options) Result {
	return CompareReduced(Reduce(base, opts.Warmup), Reduce(new, opts.Warmup), opts)
}

// CompareReduced is Compare of two recordings already reduced (Reducer),
// for a reader that streams them.
func CompareReduced(base, new *Reduced, opts Options) Result {
	var res Result
	if len(usedRuns(base.Runs)) >= 2 && len(usedRuns(new.Runs)) >= 2 {
		res = CompareRuns(base.Runs, new.Runs, opts)
	} else {
		opts.rare = rareIn(base, new)
		res = CompareSeries(base.Series, new.Series, opts)
		if len(usedRuns(base.Runs))+len(usedRuns(new.Runs)) > 0 {
			res.Warnings = append(res.Warnings, fmt.Sprintf("only one side has two or more runs (%d, %d): compared window by window; record both with -r N to compare runs", len(usedRuns(base.Runs)), len(usedRuns(new.Runs))))
		}
	}
	res.Base, res.New = base.Side, new.Side
	res.Base.Runs, res.New.Runs = len(usedRuns(base.Runs)), len(usedRuns(new.Runs))
	res.Warnings = append(recordingWarnings(base, new), res.Warnings...)
	if res.Need != nil && res.Need.Unit != EvidenceRuns {
		if d := min(base.DurationS, new.DurationS); d > 0 {
			res.Need.MaxIntervalS = d / float64(res.Need.Record)
		}
	}
	if c := commandsDiffer(base.Side.Command, new.Side.Command); c != "" {
		res.Warnings = append(res.Warnings, c)
	}
	return res
}

// commandsDiffer warns when the sides ran different commands: compared
// anyway (a new build at another path is the usual case), but a run total
// of another program says nothing about this one.
func commandsDiffer(a, b []string) string {
	if len(a) == 0 || len(b) == 0 || strings.Join(a, "\x00") == strings.Join(b, "\x00") {
		return ""
	}
	return fmt.Sprintf("the recordings ran different commands (%q, %q): compared as given", strings.Join(a, " "), strings.Join(b, " "))
}

func recordingWarnings(base, new *Reduced) []string {
	var w []string
	b, n := base.Side, new.Side
	if b.Hostname != n.Hostname {
		w = append(w, fmt.Sprintf("recordings come from different hosts (%q, %q)", b.Hostname, n.Hostname))
	}
	if b.CPUModel != n.CPUModel {
		w = append(w, fmt.Sprintf("recordings come from different CPU models (%q, %q)", b.CPUModel, n.CPUModel))
	}
	if only := minus(b.Events, n.Events); len(only) > 0 {
		w = append(w, fmt.Sprintf("events measured only in BASE, not compared: %s", strings.Join(only, ", ")))
	}
	if only := minus(n.Events, b.Events); len(only) > 0 {
		w = append(w, fmt.Sprintf("events measured only in NEW, not compared: %s", strings.Join(only, ", ")))
	}
	if b.IntervalS != n.IntervalS {
		w = append(w, fmt.Sprintf("window intervals differ (%gs, %gs): per-window spread is not comparable", b.IntervalS, n.IntervalS))
	}
	for _, x := range []struct {
		name string
		r    *Reduced
	}{{"BASE", base}, {"NEW", new}} {
		if x.r.Truncated {
			w = append(w, fmt.Sprintf("%s is truncated: %s", x.name, x.r.Warning))
		}
		if st := x.r.Stretch; st.Stretched > 0 {
			w = append(w, fmt.Sprintf("%s: %s; those windows are left out", x.name, st))
		}
	}
	return w
}

func minus(a, b []string) []string {
	in := map[string]bool{}
	for _, x := range b {
		in[x] = true
	}
	var out []string
	for _, x := range a {
		if !in[x] {
			out = append(out, x)
		}
	}
	return out
}

// CompareSeries tests metrics already extracted from two recordings:
// every name in both lists that opts.Metrics selects.
func CompareSeries(base, new []Series, opts Options) Result {
	res := Result{
		Alpha: opts.Alpha, Threshold: opts.Threshold, Confidence: opts.Confidence,
		Metrics: []MetricResult{}, Skipped: []Skipped{}, Warnings: []string{},
		Counts: map[string]int{}, Evidence: EvidenceWindows, Floor: opts.WindowFloor,
	}
	selected := compilePatterns(opts.Metrics)
	dirs := directionOverrides{higher: compilePatterns(opts.HigherIsBetter), lower: compilePatterns(opts.LowerIsBetter)}
	baseByName, newByName := byName(base), byName(new)
	all := sides{baseByName, newByName, mostValues(base), mostValues(new), opts.MinWindows}
	var pairs [][2]Series
	for _, b := range base {
		if len(selected) > 0 && !matchName(selected, b.Name) {
			continue
		}
		n, ok := newByName[b.Name]
		if !ok {
			res.Skipped = append(res.Skipped, Skipped{b.Name, "only in BASE"})
			continue
		}
		if why := all.uninformative(b, n); why != "" {
			res.Skipped = append(res.Skipped, Skipped{b.Name, why})
			continue
		}
		pairs = append(pairs, [2]Series{b, n})
	}
	// Each metric's test is its own (the bootstrap is seeded by its
	// name), so they run on every CPU: two hour-long 128-CPU recordings
	// have about 1,400 metrics of 3,600 windows.
	res.Metrics = make([]MetricResult, len(pairs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(pairs)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(pairs); i = int(next.Add(1) - 1) {
				b, n := pairs[i][0], pairs[i][1]
				res.Metrics[i] = testMetric(b, n, dirs.of(b), opts)
			}
		})
	}
	wg.Wait()
	var tested []int
	for i, m := range res.Metrics {
		if m.Verdict != VerdictTooFew {
			tested = append(tested, i)
		}
	}
	for _, n := range new {
		if _, inBase := baseByName[n.Name]; !inBase && (len(selected) == 0 || matchName(selected, n.Name)) {
			res.Skipped = append(res.Skipped, Skipped{n.Name, "only in NEW"})
		}
	}
	if len(opts.Metrics) > 0 && len(res.Metrics) == 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("no metric both recordings have matches %s", strings.Join(opts.Metrics, ", ")))
	}
	correct(&res, tested, opts)
	unsized(&res, opts.rare)
	markUndecided(&res, opts)
	explainByCPUShare(&res)
	explainByWork(&res)
	for _, m := range res.Metrics {
		res.Counts[m.Verdict]++
	}
	sortByVerdict(res.Metrics)
	return res
}

// mostValues is the largest number of values a series has: the usable
// windows of its recording, since every event's rate has a value in each.
func mostValues(series []Series) int {
	n := 0
	for _, s := range series {
		n = max(n, len(s.Values))
	}
	return n
}

func byName(series []Series) map[string]Series {
	out := make(map[string]Series, len(series))
	for _, s := range series {
		out[s.Name] = s
	}
	return out
}

// sides is what the filters of CompareSeries look at besides the metric:
// both sides' series by name and their usable windows (mostValues).
type sides struct {
	base, new               map[string]Series
	baseWindows, newWindows int
	minWindows              int
}

// uninformative says why a metric both sides have cannot carry
// information, or "" when it can. Such metrics are left out of the
// family, so they do not weaken Holm's correction for the rest. The
// filters look at the pooled data only, never at the difference between
// the sides.
func (s sides) uninformative(b, n Series) string {
	if Median(b.Values) == 0 && Median(n.Values) == 0 {
		return "zero in most windows of both"
	}
	if total, ok := scopeTotal(b.Name); ok && sameValues(b.Values, s.base[total].Values) && sameValues(n.Values, s.new[total].Values) {
		return "same as " + total + " in both"
	}
	// Not a side short of windows but a metric reported in few of them
	// (a summary the command wrote at its end, a latency with events in
	// two windows): more windows would not decide it, so it is no reason
	// to call the whole comparison undecided.
	if (len(b.Values) < s.minWindows && s.baseWindows >= s.minWindows) || (len(n.Values) < s.minWindows && s.newWindows >= s.minWindows) {
		return fmt.Sprintf("in fewer than %d windows of a side that has more", s.minWindows)
	}
	return ""
}

// directionOverrides are the directions declared by name pattern
// (Options.HigherIsBetter, LowerIsBetter).
type directionOverrides struct{ higher, lower []*regexp.Regexp }

// of returns a series' direction, a declared one first.
func (d directionOverrides) of(s Series) Direction {
	switch {
	case matchName(d.higher, s.Name):
		return HigherIsBetter
	case matchName(d.lower, s.Name):
		return LowerIsBetter
	}
	return s.Direction
}

// testMetric compares one metric's windows: medians, their ratio with its
// bootstrap interval and, when both sides have opts.MinWindows values, the
// Mann-Whitney test (verdict set later, after Holm's correction);
// otherwise the verdict is VerdictTooFew.
func testMetric(b, n Series, dir Direction, opts Options) MetricResult {
	m := MetricResult{
		Name: b.Name, Group: b.Group, Unit: b.Unit, Direction: dir,
		BaseN: len(b.Values), NewN: len(n.Values),
		BaseMedian: Median(b.Values), NewMedian: Median(n.Values),
		Base: b.Values, New: n.Values, P: 1, PAdj: 1,
	}
	m.Ratio = Ratio(m.NewMedian, m.BaseMedian)
	m.CILow, m.CIHigh = BootstrapRatioCI(b.Values, n.Values, opts.BootstrapIters, opts.Confidence, seedOf(b.Name))
	if m.BaseN < opts.MinWindows || m.NewN < opts.MinWindows {
		m.Verdict = VerdictTooFew
		return m
	}
	mw := MannWhitney(n.Values, b.Values)
	m.U, m.P, m.Exact = mw.U, mw.P, mw.Exact
	return m
}

// correct applies Holm's correction to the tested metrics (positions in
// res.Metrics) and gives each its verdict.
func correct(res *Result, tested []int, opts Options) {
	ps := make([]float64, len(tested))
	for i, idx := range tested {
		ps[i] = res.Metrics[idx].P
	}
	for i, adj := range Holm(ps) {
		m := &res.Metrics[tested[i]]
		m.PAdj = adj
		m.Significant = adj < opts.Alpha
		m.Gate = true
		// Windows of one run cannot show run-to-run variance: a change
		// is called only beyond the floor.
		m.Verdict = verdict(m.Significant, m.Ratio, m.Direction, math.Max(opts.Threshold, opts.WindowFloor))
	}
	res.Tested = len(tested)
}

// unsized keeps a change of a rare event from deciding a comparison of
// windows: one from or to nothing (a ratio to a zero median is no size),
// or of an event with fewer than rareEvents in the median window of either
// side (rare). How often a rare event happens differs between two runs of
// one program by far more than one run's windows vary (the runtime threads
// of one Go workload migrated 11, 74 and 145 times in three 3 s runs; a
// diff of two runs of falseshare good exited 1 on cpu-migrations/s 0/s ->
// 54/s, and another on 2/s -> 88/s). One run a side cannot measure that;
// repeated runs (record -r N) can. Such a metric is reported as changed,
// with a warning naming it.
func unsized(res *Result, rare map[string]bool) {
	var names []string
	for i := range res.Metrics {
		m := &res.Metrics[i]
		if m.Verdict != VerdictRegression && m.Verdict != VerdictImprovement {
			continue
		}
		if (m.BaseMedian == 0) == (m.NewMedian == 0) && !rareMetric(m.Name, rare) {
			continue
		}
		m.Verdict = VerdictChanged
		names = append(names, fmt.Sprintf("%s (%s -> %s)", m.Name, metric.FormatValue(m.BaseMedian, m.Unit), metric.FormatValue(m.NewMedian, m.Unit)))
	}
	if len(names) > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf(
			"%s changed from or to none or to a few events a window: one run a side cannot show how much two runs differ in so rare an event; reported as changed, not as a regression or improvement (record both with -r N to test it)",
			strings.Join(names, ", ")))
	}
}

// rareMetric says whether name is the target's rate or per-op count of
// one of the rare events ("cpu-migrations/s", "cpu-migrations/op"; not a
// per-CPU, per-node or per-process rate, which is neutral anyway).
func rareMetric(name string, rare map[string]bool) bool {
	for ev := range rare {
		if rest, ok := strings.CutPrefix(name, ev+"/"); ok && !strings.Contains(rest, "{") {
			return true
		}
	}
	return false
}

// rareIn are the events rare in either recording (rareEvents).
func rareIn(base, new *Reduced) map[string]bool {
	rare := map[string]bool{}
	for _, r := range []*Reduced{base, new} {
		for ev, n := range r.EventsPerWindow {
			if n < rareEvents {
				rare[ev] = true
			}
		}
	}
	return rare
}

// sortByVerdict orders metrics regressions first, then by adjusted
// p-value and name.
func sortByVerdict(ms []MetricResult) {
	sort.SliceStable(ms, func(i, j int) bool {
		a, b := ms[i], ms[j]
		if verdictRank[a.Verdict] != verdictRank[b.Verdict] {
			return verdictRank[a.Verdict] < verdictRank[b.Verdict]
		}
		if a.PAdj != b.PAdj {
			return a.PAdj < b.PAdj
		}
		return a.Name < b.Name
	})
}

var verdictRank = map[string]int{VerdictRegression: 0, VerdictImprovement: 1, VerdictChanged: 2, VerdictUndecided: 3, VerdictNoChange: 4, VerdictTooFew: 5}

// verdict needs both significance and an effect beyond the threshold; the
// direction then names it.
func verdict(significant bool, ratio float64, dir Direction, threshold float64) string {
	if !significant || math.Abs(ratio-1) <= threshold || math.IsNaN(ratio) {
		return VerdictNoChange
	}
	up := ratio > 1
	switch {
	case dir == Neutral:
		return VerdictChanged
	case up == (dir == LowerIsBetter):
		return VerdictRegression
	}
	return VerdictImprovement
}

// scopeTotal returns the target-total metric a scoped one ("X{cpu=1}")
// breaks down.
func scopeTotal(name string) (string, bool) {
	i := strings.IndexByte(name, '{')
	if i <= 0 {
		return "", false
	}
	return name[:i], true
}

func sameValues(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// seedOf seeds a metric's bootstrap from its name, so its interval does not
// depend on which other metrics were compared.
func seedOf(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// compilePatterns turns name patterns with '*' wildcards into anchored
// regular expressions; every other character is literal.
func compilePatterns(pats []string) []*regexp.Regexp {
	var out []*regexp.Regexp
	for _, p := range pats {
		parts := strings.Split(p, "*")
		for i := range parts {
			parts[i] = regexp.QuoteMeta(parts[i])
		}
		out = append(out, regexp.MustCompile("^"+strings.Join(parts, ".*")+"$"))
	}
	return out
}

// matchName matches a metric's full name, or an app metric's name without
// its "app." prefix (the name the command wrote).
func matchName(res []*regexp.Regexp, name string) bool {
	bare, isApp := strings.CutPrefix(name, "app.")
	for _, re := range res {
		if re.MatchString(name) || (isApp && re.MatchString(bare)) {
			return true
		}
	}
	return false
}

// explainByCPUShare keeps a noisy host from failing a good change. When
// NEW's target ran significantly less (cpu-clock/s down) while it waited
// significantly longer to run (run-queue latency up), the host gave it less
// CPU: a throughput drop whose CPU cost per unit of work (cpu-clock/op)
// did not rise significantly is explained by that, not by the change. Such
// a throughput metric becomes "changed" with a warning that says why. A
// change that makes the program itself slower or less parallel does not
// meet the run-queue condition, and one that costs more CPU per operation
// keeps its regression.
func explainByCPUShare(res *Result) {
	byName := map[string]*MetricResult{}
	for i := range res.Metrics {
		byName[res.Metrics[i].Name] = &res.Metrics[i]
	}
	moved := func(name string, up bool) bool {
		m := byName[name]
		return m != nil && m.Significant && math.Abs(m.Ratio-1) > res.Threshold && (m.Ratio > 1) == up
	}
	cpu := byName["cpu-clock/s"]
	if cpu == nil || !moved("cpu-clock/s", false) || !(moved("runq-latency.p50", true) || moved("runq-latency.p99", true)) {
		return
	}
	for i := range res.Metrics {
		m := &res.Metrics[i]
		app, isApp := strings.CutPrefix(m.Name, "app.")
		unit, ok := workUnit(app)
		if !isApp || !ok || m.Verdict != VerdictRegression {
			continue
		}
		costName := "cpu-clock/" + unit
		if moved(costName, true) {
			continue
		}
		m.Verdict = VerdictChanged
		res.Warnings = append(res.Warnings, fmt.Sprintf(
			"%s fell x%.3g, but the host gave the target less CPU (cpu-clock/s x%.3g, run-queue latency up) and the CPU time per unit of work (%s) did not rise: not counted as a regression; re-run on a quieter host to compare throughput",
			m.Name, m.Ratio, cpu.Ratio, costName))
	}
}

// explainByWork keeps more work from reading as a regression. When the
// command's throughput (app.NAME_per_sec) rose significantly, its events
// per second rise with it: an event rate (EVENT/s) that regressed while
// the same event per unit of work (EVENT/NAME) did not is explained by the
// extra work, so it becomes "changed" with a warning. The per-unit metric
// keeps its own verdict and is the one that says whether each operation
// got worse.
func explainByWork(res *Result) {
	byName := map[string]*MetricResult{}
	for i := range res.Metrics {
		byName[res.Metrics[i].Name] = &res.Metrics[i]
	}
	for i := range res.Metrics {
		app := &res.Metrics[i]
		bare, isApp := strings.CutPrefix(app.Name, "app.")
		unit, ok := workUnit(bare)
		if !isApp || !ok || app.Verdict != VerdictImprovement || app.Ratio <= 1 {
			continue
		}
		for j := range res.Metrics {
			m := &res.Metrics[j]
			// A scoped rate (EVENT/s{comm="x"}) is judged by its event's
			// per-unit total as well.
			rate := m.Name
			if total, ok := scopeTotal(rate); ok {
				rate = total
			}
			ev, isRate := strings.CutSuffix(rate, "/s")
			if !isRate || m.Verdict != VerdictRegression {
				continue
			}
			if per := byName[ev+"/"+unit]; per == nil || per.Verdict == VerdictRegression {
				continue
			}
			m.Verdict = VerdictChanged
			res.Warnings = append(res.Warnings, fmt.Sprintf(
				"%s rose x%.3g while %s rose x%.3g and %s/%s did not regress: the extra events come with the extra work; not counted as a regression",
				m.Name, m.Ratio, app.Name, app.Ratio, ev, unit))
		}
	}
}

// minP is the smallest two-sided p-value an exact Mann-Whitney test of n1
// against n2 values can give: both tails' single most extreme
// arrangement, 2 / C(n1+n2, n1).
func minP(n1, n2 int) float64 {
	if n1 <= 0 || n2 <= 0 {
		return 1
	}
	// log C(n1+n2, n1), so large sides do not overflow.
	lc, _ := math.Lgamma(float64(n1 + n2 + 1))
	a, _ := math.Lgamma(float64(n1 + 1))
	b, _ := math.Lgamma(float64(n2 + 1))
	return math.Min(1, 2*math.Exp(-(lc-a-b)))
}

// markUndecided turns the metrics that could not be decided into
// VerdictUndecided and says how many windows would decide them. Holm's
// smallest adjusted p-value is the family size times the smallest p, so a
// metric whose sides cannot give family*minP < alpha could never be
// significant, whatever the data: calling it "no change" would be a claim
// without evidence.
func markUndecided(res *Result, opts Options) {
	// The family: the metrics tested, or those that would be tested
	// with enough windows when none could be.
	family := res.Tested
	if family == 0 {
		family = max(len(res.Metrics), 1)
	}
	var undecided []string
	smallest := 1.0
	for i := range res.Metrics {
		m := &res.Metrics[i]
		p := minP(m.BaseN, m.NewN)
		switch {
		case m.Verdict == VerdictTooFew:
		case !m.Significant && float64(family)*p >= opts.Alpha:
			m.Verdict = VerdictUndecided
		default:
			continue
		}
		smallest = math.Min(smallest, p)
		undecided = append(undecided, m.Name)
	}
	if res.Tested == 0 && len(undecided) == 0 {
		// Nothing was tested at all: no metric had values on both sides
		// (a side without usable windows has none). "No regression"
		// would be a claim without evidence.
		for _, s := range res.Skipped {
			undecided = append(undecided, s.Name)
		}
		family = max(len(undecided), 1)
	}
	if len(undecided) == 0 && res.Tested > 0 {
		return
	}
	// The windows that would let every metric of this comparison reach
	// alpha, the whole list being the family.
	all := max(len(res.Metrics), family)
	n := max(opts.MinWindows, 2)
	for float64(all)*minP(n, n) >= opts.Alpha && n < 1000 {
		n++
	}
	res.Need = &WindowsNeeded{Metrics: undecided, MinWindows: n, Record: n + opts.Warmup, SmallestP: smallest, Family: family}
}
