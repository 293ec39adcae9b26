package compare

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/profile"
)

// load describes a synthetic workload: the mean of each quantity per
// second; every window draws around them.
type load struct {
	ctxsw, clock, ops, offcpuBucket float64
	hostname                        string
	comm                            string
}

var baseLoad = load{ctxsw: 2000, clock: 9e8, ops: 1e6, offcpuBucket: 14, hostname: "h1", comm: "bench"}

// synthRecording builds a 2-CPU recording of n 500 ms windows, with a
// short last window (the target exited) that Extract must ignore.
func synthRecording(rng *rand.Rand, l load, n int) *profile.Recording {
	const interval = int64(500e6)
	r := &profile.Recording{
		Header: profile.Header{
			Host: profile.Host{Hostname: l.hostname, CPUModel: "test cpu", Mode: "software", Topology: profile.Topology{
				CPUs:  []profile.CPU{{ID: 0, Node: 0, L3: -1, Siblings: []int{0}}, {ID: 1, Node: 0, L3: -1, Siblings: []int{1}}},
				Nodes: []profile.Node{{ID: 0, CPUs: []int{0, 1}}},
			}},
			Target:   profile.Target{Kind: profile.TargetCommand, Command: []string{"bench"}},
			Settings: profile.Settings{IntervalNS: interval, SampleHz: 99},
			Events: []profile.EventStatus{
				{Name: "context-switches", Kind: "software", Status: profile.StatusMeasured},
				{Name: "cpu-clock", Kind: "software", Status: profile.StatusMeasured},
			},
		},
		Stacks: map[uint64]profile.Stack{},
	}
	noisy := func(mean float64) uint64 { return uint64(math.Max(0, mean*(1+0.05*rng.NormFloat64()))) }
	for i := 0; i <= n; i++ {
		dur := interval
		if i == n {
			dur = interval / 10
		}
		sec := float64(dur) / 1e9
		cs := []uint64{noisy(l.ctxsw * sec / 2), noisy(l.ctxsw * sec / 2)}
		clk := []uint64{noisy(l.clock * sec / 2), noisy(l.clock * sec / 2)}
		hist := make([]uint64, profile.HistBuckets)
		for k := 0; k < 200; k++ {
			b := int(l.offcpuBucket + rng.NormFloat64())
			hist[max(0, min(b, profile.HistBuckets-1))]++
		}
		w := profile.Window{
			Index: i, StartNS: int64(i) * interval, EndNS: int64(i)*interval + dur,
			Counters: []profile.Counter{
				{Event: "context-switches", PerCPU: cs},
				{Event: "cpu-clock", PerCPU: clk},
			},
			Processes: []profile.Process{{PID: 100 + i%2, Comm: l.comm, Counts: map[string]uint64{
				"context-switches": cs[0] + cs[1], "cpu-clock": clk[0] + clk[1],
			}}},
			Histograms: []profile.Histogram{{Name: profile.HistOffCPU, Unit: "ns", PerCPU: []profile.Counts{hist}}},
			AppMetrics: map[string]float64{"ops_per_sec": l.ops * (1 + 0.05*rng.NormFloat64())},
		}
		r.Windows = append(r.Windows, w)
	}
	r.Trailer = &profile.Trailer{EndReason: profile.EndTargetExit, Windows: len(r.Windows), AppMetrics: map[string]float64{"ops_per_sec": l.ops}}
	return r
}

func find(t *testing.T, res Result, name string) MetricResult {
	t.Helper()
	for _, m := range res.Metrics {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("metric %q not in result; have %v", name, names(res))
	return MetricResult{}
}

func names(res Result) []string {
	var out []string
	for _, m := range res.Metrics {
		out = append(out, m.Name)
	}
	return out
}

func TestExtract(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := Extract(synthRecording(rng, baseLoad, 10), 0)
	byName := map[string]Series{}
	for _, x := range s {
		byName[x.Name] = x
	}
	for name, dir := range map[string]Direction{
		"context-switches/s":               LowerIsBetter,
		"context-switches/s{cpu=0}":        Neutral,
		"context-switches/s{cpu=1}":        Neutral,
		`context-switches/s{comm="bench"}`: LowerIsBetter,
		"cpu-clock/s":                      Neutral,
		"offcpu.p50":                       Neutral,
		"offcpu.p99":                       Neutral,
		"app.ops_per_sec":                  HigherIsBetter,
		"context-switches/op":              LowerIsBetter,
		"cpu-clock/op":                     Neutral,
	} {
		x, ok := byName[name]
		if !ok {
			t.Errorf("no metric %q; have %d metrics", name, len(s))
			continue
		}
		if x.Direction != dir {
			t.Errorf("%s: direction %v, want %v", name, x.Direction, dir)
		}
		// The 50 ms last window is left out.
		if len(x.Values) != 10 {
			t.Errorf("%s: %d values, want 10", name, len(x.Values))
		}
	}
	if _, ok := byName["context-switches/s{node=0}"]; ok {
		t.Error("per-node metric on a one-node host duplicates the total")
	}
	if m := Median(byName["context-switches/s"].Values); math.Abs(m-2000) > 200 {
		t.Errorf("context-switches/s median %g, want about 2000", m)
	}
	if m := Median(byName["context-switches/op"].Values); math.Abs(m-2e-3) > 3e-4 {
		t.Errorf("context-switches/op median %g, want about 2000/1e6", m)
	}
}

func TestExtractRatios(t *testing.T) {
	r := &profile.Recording{Header: profile.Header{
		Host:     profile.Host{Topology: profile.Topology{CPUs: []profile.CPU{{ID: 0}}, Nodes: []profile.Node{{ID: 0, CPUs: []int{0}}}}},
		Settings: profile.Settings{IntervalNS: 1e9},
	}}
	for i := 0; i < 3; i++ {
		r.Windows = append(r.Windows, profile.Window{StartNS: int64(i) * 1e9, EndNS: int64(i+1) * 1e9, Counters: []profile.Counter{
			{Event: "LLC-load-misses", PerCPU: []uint64{50}},
			{Event: "LLC-loads", PerCPU: []uint64{200}},
			{Event: "instructions", PerCPU: []uint64{10000}},
			{Event: "cycles", PerCPU: []uint64{20000}},
			{Event: "dtlb_load_misses.walk_completed", PerCPU: []uint64{7}},
		}})
	}
	got := map[string]Series{}
	for _, s := range Extract(r, 0) {
		got[s.Name] = s
		// MPKI is the catalogue's, for its miss events: a vendor event
		// whose name says "misses" gets none.
		if s.Group == GroupRatio && strings.Contains(s.Name, "dtlb_load_misses") {
			t.Errorf("derived metric %s of a vendor event outside the catalogue", s.Name)
		}
	}
	for name, want := range map[string]struct {
		v   float64
		dir Direction
	}{
		string(metric.LLCLoadMissRatio): {0.25, LowerIsBetter},
		string(metric.LLCLoadMPKI):      {5, LowerIsBetter},
		string(metric.IPC):              {0.5, HigherIsBetter},
	} {
		s, ok := got[name]
		if !ok || len(s.Values) != 3 || s.Values[0] != want.v || s.Direction != want.dir {
			t.Errorf("%s: got %+v, want value %g direction %v", name, s, want.v, want.dir)
		}
	}
}

func TestAppDirection(t *testing.T) {
	for name, want := range map[string]Direction{
		"ops_per_sec": HigherIsBetter, "throughput": HigherIsBetter, "QPS": HigherIsBetter,
		"p99_latency_us": LowerIsBetter, "ops_latency_ns": LowerIsBetter, "request_ms": LowerIsBetter,
		"queue_depth": Neutral, "score": Neutral,
	} {
		if got := AppDirection(name); got != want {
			t.Errorf("AppDirection(%q) = %v, want %v", name, got, want)
		}
	}
}

func testOptions() Options {
	o := DefaultOptions()
	o.BootstrapIters = 200
	return o
}

func TestCompareSameDistribution(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	res := Compare(synthRecording(rng, baseLoad, 12), synthRecording(rng, baseLoad, 12), testOptions())
	if res.Regressed() || res.Counts[VerdictImprovement] > 0 {
		t.Fatalf("same distribution: %s", res.Headline())
	}
	if len(res.Warnings) != 0 {
		t.Errorf("unexpected warnings %v", res.Warnings)
	}
	if res.Tested < 8 {
		t.Errorf("only %d metrics tested", res.Tested)
	}
	// The only comm's counts are the target's: its metrics duplicate the
	// totals and stay out of the family.
	skipped := map[string]string{}
	for _, s := range res.Skipped {
		skipped[s.Name] = s.Reason
	}
	if r := skipped[`context-switches/s{comm="bench"}`]; r != "same as context-switches/s in both" {
		t.Errorf("per-comm duplicate of the total: skip reason %q", r)
	}
	// Warmup: the first window is left out, the short last one too.
	if m := find(t, res, "context-switches/s"); m.BaseN != 11 || res.Base.Used != 11 {
		t.Errorf("windows used %d/%d, want 11 of 13", m.BaseN, res.Base.Used)
	}
}

// A shifted pair: NEW has 40% fewer ops/s, 60% more context switches and
// four times the off-CPU time per event. Those regress; the reverse order
// shows them as improvements; cpu-clock (neutral) never regresses.
func TestCompareShifted(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	bad := baseLoad
	bad.ops *= 0.6
	bad.ctxsw *= 1.6
	bad.offcpuBucket += 2
	bad.clock *= 0.5
	good, worse := synthRecording(rng, baseLoad, 12), synthRecording(rng, bad, 12)

	res := Compare(good, worse, testOptions())
	if !res.Regressed() {
		t.Fatalf("shifted pair not flagged: %s", res.Headline())
	}
	for _, name := range []string{"app.ops_per_sec", "context-switches/s", "context-switches/op"} {
		if m := find(t, res, name); m.Verdict != VerdictRegression {
			t.Errorf("%s: verdict %q (ratio %g, p_adj %g), want regression", name, m.Verdict, m.Ratio, m.PAdj)
		}
	}
	for _, name := range []string{"cpu-clock/s", "offcpu.p50"} {
		if m := find(t, res, name); m.Verdict != VerdictChanged {
			t.Errorf("%s: verdict %q, want changed (neutral)", name, m.Verdict)
		}
	}
	o := testOptions()
	o.LowerIsBetter = []string{"offcpu.*"}
	if m := find(t, Compare(good, worse, o), "offcpu.p50"); m.Verdict != VerdictRegression {
		t.Errorf("declared lower-is-better offcpu.p50: %q, want regression", m.Verdict)
	}
	if m := find(t, res, "app.ops_per_sec"); !(m.CILow < 0.65 && m.CIHigh > 0.55 && m.CILow <= m.Ratio && m.Ratio <= m.CIHigh) {
		t.Errorf("ops ratio %g CI [%g, %g], want around 0.6", m.Ratio, m.CILow, m.CIHigh)
	}

	rev := Compare(worse, good, testOptions())
	if rev.Regressed() {
		t.Fatalf("reverse order regressed: %s", rev.Headline())
	}
	if m := find(t, rev, "app.ops_per_sec"); m.Verdict != VerdictImprovement {
		t.Errorf("reverse ops_per_sec: %q, want improvement", m.Verdict)
	}

	// A declared direction overrides the table; a threshold above the
	// effect turns the verdict into "no change".
	o = testOptions()
	o.LowerIsBetter = []string{"ops_per_sec"}
	if m := find(t, Compare(good, worse, o), "app.ops_per_sec"); m.Verdict != VerdictImprovement {
		t.Errorf("declared lower-is-better: %q, want improvement", m.Verdict)
	}
	o = testOptions()
	o.Threshold = 0.5
	if m := find(t, Compare(good, worse, o), "app.ops_per_sec"); m.Verdict != VerdictNoChange || !m.Significant {
		t.Errorf("threshold 50%%: %q significant=%v, want significant no change", m.Verdict, m.Significant)
	}
	o = testOptions()
	o.Metrics = []string{"app.*", "offcpu*"}
	sel := Compare(good, worse, o)
	for _, m := range sel.Metrics {
		if !strings.HasPrefix(m.Name, "app.") && !strings.HasPrefix(m.Name, "offcpu") {
			t.Errorf("--metric selected %q", m.Name)
		}
	}
	if sel.Tested != 3 { // app.ops_per_sec, offcpu.p50, offcpu.p99
		t.Errorf("selected %d metrics, want 3 (%v)", sel.Tested, names(sel))
	}
}

// False alarms: 500 pairs drawn from one distribution, each with 20
// metrics (some discrete, so tied), must flag a regression in at most
// alpha of the pairs, with or without the effect threshold.
func TestFalseAlarmRate(t *testing.T) {
	const pairs, metrics, windows = 500, 20, 12
	rng := rand.New(rand.NewPCG(11, 12))
	draw := func(k int) []float64 {
		v := make([]float64, windows)
		for i := range v {
			switch k % 3 {
			case 0: // continuous, no ties
				v[i] = 100 + 10*rng.NormFloat64()
			case 1: // small counts: many ties
				v[i] = float64(rng.IntN(5))
			default: // skewed
				v[i] = math.Exp(rng.NormFloat64())
			}
		}
		return v
	}
	for _, c := range []struct{ alpha, threshold float64 }{{0.05, 0}, {0.01, 0}, {0.01, 0.05}} {
		o := testOptions()
		o.Alpha, o.Threshold, o.BootstrapIters = c.alpha, c.threshold, 1
		flagged := 0
		for p := 0; p < pairs; p++ {
			var base, new []Series
			for k := 0; k < metrics; k++ {
				name := fmt.Sprintf("m%d", k)
				base = append(base, Series{Name: name, Direction: LowerIsBetter, Values: draw(k)})
				new = append(new, Series{Name: name, Direction: LowerIsBetter, Values: draw(k)})
			}
			if res := CompareSeries(base, new, o); res.Regressed() {
				flagged++
			}
		}
		rate := float64(flagged) / pairs
		t.Logf("alpha %g threshold %g: %d of %d same-distribution pairs flagged (%.3f)", c.alpha, c.threshold, flagged, pairs, rate)
		if rate > c.alpha {
			t.Errorf("alpha %g threshold %g: false-alarm rate %.3f > alpha", c.alpha, c.threshold, rate)
		}
	}
}

func TestWarnings(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	other := baseLoad
	other.hostname = "h2"
	b, n := synthRecording(rng, baseLoad, 6), synthRecording(rng, other, 6)
	n.Header.Host.CPUModel = "other cpu"
	n.Header.Events = append(n.Header.Events, profile.EventStatus{Name: "page-faults", Status: profile.StatusMeasured})
	res := Compare(b, n, testOptions())
	all := strings.Join(res.Warnings, "\n")
	for _, want := range []string{"different hosts", "different CPU models", "only in NEW, not compared: page-faults"} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings %q lack %q", all, want)
		}
	}
}

func TestOutputs(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	bad := baseLoad
	bad.ops *= 0.5
	bad.comm = "evil|`<script>`\n"
	res := Compare(synthRecording(rng, baseLoad, 12), synthRecording(rng, bad, 12), testOptions())

	var js bytes.Buffer
	if err := WriteJSON(&js, &res); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Alpha     float64 `json:"alpha"`
		Threshold float64 `json:"threshold"`
		Tested    int     `json:"tested"`
		Metrics   []struct {
			Name      string   `json:"name"`
			Direction string   `json:"direction"`
			Ratio     *float64 `json:"ratio"`
			CILow     *float64 `json:"ci_low"`
			PAdj      float64  `json:"p_adj"`
			Verdict   string   `json:"verdict"`
		} `json:"metrics"`
		Counts  map[string]int `json:"counts"`
		Skipped []Skipped      `json:"skipped"`
		Base    Side           `json:"base"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatalf("JSON does not parse: %v\n%s", err, js.String())
	}
	if doc.Alpha != 0.01 || doc.Tested == 0 || doc.Counts["regression"] == 0 || doc.Base.Hostname != "h1" {
		t.Errorf("JSON header fields wrong: %+v", doc)
	}
	if doc.Metrics[0].Verdict != "regression" || doc.Metrics[0].Direction == "" || doc.Metrics[0].Ratio == nil {
		t.Errorf("first JSON metric %+v, want a regression with ratio and direction", doc.Metrics[0])
	}
	// The comm differs, so its per-process metrics are only in one side.
	if len(doc.Skipped) == 0 {
		t.Error("no skipped metrics listed")
	}

	var md bytes.Buffer
	if err := WriteMarkdown(&md, &res); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	if !strings.Contains(out, "### :x: cacheheat diff") || !strings.Contains(out, "| regression | app.ops\\_per\\_sec |") {
		t.Errorf("markdown lacks headline or regression row:\n%s", out)
	}
	if strings.Contains(out, "<script>") {
		t.Errorf("markdown carries a raw comm:\n%s", out)
	}

	var txt bytes.Buffer
	if err := WriteText(&txt, &res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt.String(), "REGRESSION: ") || !strings.Contains(txt.String(), "app.ops_per_sec") {
		t.Errorf("text table:\n%s", txt.String())
	}
}

func TestInfiniteRatioJSON(t *testing.T) {
	res := CompareSeries(
		[]Series{{Name: "x", Direction: LowerIsBetter, Values: []float64{0, 0, 0, 0, 0, 0}}},
		[]Series{{Name: "x", Direction: LowerIsBetter, Values: []float64{5, 6, 7, 8, 9, 10}}}, testOptions())
	// Significant, but a ratio to zero has no size: changed, with a
	// warning, never a regression on one run a side (unsized).
	if m := res.Metrics[0]; !math.IsInf(m.Ratio, 1) || m.Verdict != VerdictChanged || m.PAdj >= 0.01 {
		t.Fatalf("0 -> positive: ratio %g verdict %q p %g, want inf, changed and significant", m.Ratio, m.Verdict, m.PAdj)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "x (0 -> ") {
		t.Errorf("warnings %q, want one naming x", res.Warnings)
	}
	// Both sides above zero: the ratio is a size, and a x2 rise regresses.
	res2 := CompareSeries(
		[]Series{{Name: "x", Direction: LowerIsBetter, Values: []float64{1, 2, 3, 4, 5, 6}}},
		[]Series{{Name: "x", Direction: LowerIsBetter, Values: []float64{7, 8, 9, 10, 11, 12}}}, testOptions())
	if m := res2.Metrics[0]; m.Verdict != VerdictRegression {
		t.Errorf("3.5 -> 9.5: verdict %q, want regression", m.Verdict)
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, &res); err != nil {
		t.Fatalf("JSON with an infinite ratio: %v", err)
	}
	if !strings.Contains(buf.String(), `"ratio": null`) {
		t.Errorf("infinite ratio not written as null:\n%s", buf.String())
	}
}

// A comm seen in only a few windows (a helper, or a name the process had
// before renaming itself) gets no per-comm metrics.
func TestExtractSkipsRareComms(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	r := synthRecording(rng, baseLoad, 10)
	for i := 0; i < 3; i++ {
		r.Windows[i].Processes = append(r.Windows[i].Processes, profile.Process{PID: 999, Comm: "helper", Counts: map[string]uint64{"context-switches": 5000}})
	}
	for _, s := range Extract(r, 0) {
		if strings.Contains(s.Name, `comm="helper"`) {
			t.Errorf("metric %s for a comm seen in 3 of 10 windows", s.Name)
		}
	}
}

// A throughput drop that the host's CPU share explains (less CPU, longer
// run-queue waits, same CPU per op) is not a regression; with a higher CPU
// cost per op it still is.
func TestThroughputExplainedByCPUShare(t *testing.T) {
	series := func(scale map[string]float64) []Series {
		names := []struct {
			name string
			dir  Direction
			v    float64
		}{
			{"app.ops_per_sec", HigherIsBetter, 1000},
			{"cpu-clock/s", Neutral, 2e9},
			{"cpu-clock/op", Neutral, 2e6},
			{"runq-latency.p99", Neutral, 1e5},
		}
		var out []Series
		for _, n := range names {
			s := Series{Name: n.name, Direction: n.dir}
			f := scale[n.name]
			if f == 0 {
				f = 1
			}
			for i := 0; i < 12; i++ {
				s.Values = append(s.Values, n.v*f*(1+float64(i%4)*0.01))
			}
			out = append(out, s)
		}
		return out
	}
	opts := DefaultOptions()
	base := series(nil)
	starved := CompareSeries(base, series(map[string]float64{"app.ops_per_sec": 0.5, "cpu-clock/s": 0.5, "runq-latency.p99": 3}), opts)
	if starved.Regressed() || len(starved.Warnings) == 0 || !strings.Contains(starved.Warnings[0], "less CPU") {
		t.Errorf("starved NEW: regressed=%v warnings=%v", starved.Regressed(), starved.Warnings)
	}
	costlier := CompareSeries(base, series(map[string]float64{"app.ops_per_sec": 0.5, "cpu-clock/s": 0.5, "runq-latency.p99": 3, "cpu-clock/op": 2}), opts)
	if !costlier.Regressed() {
		t.Error("NEW that costs twice the CPU per op was not a regression")
	}
	lessParallel := CompareSeries(base, series(map[string]float64{"app.ops_per_sec": 0.5, "cpu-clock/s": 0.5}), opts)
	if !lessParallel.Regressed() {
		t.Error("NEW that ran less without waiting for CPU (less parallel) was not a regression")
	}
}

// More work per second brings more events per second: with the events per
// op unchanged, the rate is not a regression; with them up, it still is.
func TestEventRateExplainedByWork(t *testing.T) {
	series := func(ops, cs, csPerOp float64) []Series {
		mk := func(name string, dir Direction, v float64) Series {
			s := Series{Name: name, Direction: dir}
			for i := 0; i < 12; i++ {
				s.Values = append(s.Values, v*(1+float64(i%4)*0.01))
			}
			return s
		}
		return []Series{
			mk("app.ops_per_sec", HigherIsBetter, ops),
			mk("context-switches/s", LowerIsBetter, cs),
			mk(`context-switches/s{comm="x"}`, LowerIsBetter, cs*0.9),
			mk("context-switches/op", LowerIsBetter, csPerOp),
		}
	}
	opts := DefaultOptions()
	more := CompareSeries(series(1000, 100, 0.1), series(3000, 300, 0.1), opts)
	if more.Regressed() || len(more.Warnings) == 0 || !strings.Contains(more.Warnings[0], "extra work") {
		t.Errorf("3x the work, same switches per op: regressed=%v warnings=%v", more.Regressed(), more.Warnings)
	}
	worse := CompareSeries(series(1000, 100, 0.1), series(3000, 900, 0.3), opts)
	if !worse.Regressed() {
		t.Error("3x the switches per op was not a regression")
	}
}

// TestUndecidedNeverOK: sides too short for any result to reach alpha
// after Holm's correction are undecided, never "no change", and the
// result says how many windows would decide them; the same load shifted
// with enough windows is decided.
func TestUndecidedNeverOK(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	bad := baseLoad
	bad.ops *= 0.5
	for _, c := range []struct {
		windows  int
		verdict  string // of app.ops_per_sec
		undecide bool
	}{
		{3, VerdictTooFew, true},       // 2 used a side: below MinWindows
		{5, VerdictUndecided, true},    // 4 a side: min p 2/C(8,4) = 0.029, times the family > alpha
		{12, VerdictRegression, false}, // 11 a side: decided
	} {
		res := Compare(synthRecording(rng, baseLoad, c.windows), synthRecording(rng, bad, c.windows), testOptions())
		m := find(t, res, "app.ops_per_sec")
		if m.Verdict != c.verdict || res.Undecided() != c.undecide {
			t.Errorf("%d windows: ops verdict %q undecided %v, want %q %v", c.windows, m.Verdict, res.Undecided(), c.verdict, c.undecide)
			continue
		}
		if !c.undecide {
			continue
		}
		if strings.HasPrefix(res.Headline(), "OK") || res.Counts[VerdictNoChange] > 0 {
			t.Errorf("%d windows: %s with %d 'no change' verdicts", c.windows, res.Headline(), res.Counts[VerdictNoChange])
		}
		n := res.Need
		// The windows asked for must be enough: family * minP < alpha.
		if float64(max(len(res.Metrics), 1))*minP(n.MinWindows, n.MinWindows) >= 0.01 || n.Record != n.MinWindows+1 {
			t.Errorf("%d windows: need %+v does not reach alpha", c.windows, n)
		}
		if float64(len(res.Metrics))*minP(n.MinWindows-1, n.MinWindows-1) < 0.01 {
			t.Errorf("%d windows: need %d windows, one fewer would do", c.windows, n.MinWindows)
		}
		if n.MaxIntervalS <= 0 || !strings.Contains(n.Explain(), "-i ") {
			t.Errorf("%d windows: no interval suggested: %s", c.windows, n.Explain())
		}
	}
}

func TestMinP(t *testing.T) {
	for _, c := range []struct {
		n1, n2 int
		want   float64
	}{{2, 2, 2.0 / 6}, {3, 3, 0.1}, {4, 4, 2.0 / 70}, {1, 1, 1}, {0, 5, 1}} {
		if got := minP(c.n1, c.n2); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("minP(%d, %d) = %g, want %g", c.n1, c.n2, got, c.want)
		}
		// The exact test agrees: completely separated sides give minP.
		if c.n1 > 0 && c.n2 > 0 {
			x, y := make([]float64, c.n1), make([]float64, c.n2)
			for i := range x {
				x[i] = float64(i)
			}
			for i := range y {
				y[i] = float64(100 + i)
			}
			if p := MannWhitney(x, y).P; math.Abs(p-c.want) > 1e-9 {
				t.Errorf("separated %d vs %d: Mann-Whitney p %g, minP %g", c.n1, c.n2, p, c.want)
			}
		}
	}
}

// TestRareEventUnsized: an event with fewer than rareEvents in the median
// window of either side (cpu-migrations at 0 or 1 a window, then about
// 22) is reported as changed with a warning, never as a regression, by
// its rate or per op; an event counted in hundreds a window on both sides
// (context-switches, x3) still regresses.
func TestRareEventUnsized(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	withMigrations := func(r *profile.Recording, perWindow func(i int) uint64) *profile.Recording {
		r.Header.Events = append(r.Header.Events, profile.EventStatus{Name: "cpu-migrations", Kind: "software", Status: profile.StatusMeasured})
		for i := range r.Windows {
			w := &r.Windows[i]
			n := perWindow(i)
			w.Counters = append(w.Counters, profile.Counter{Event: "cpu-migrations", PerCPU: []uint64{n / 2, n - n/2}})
			w.Processes[0].Counts["cpu-migrations"] = n
		}
		return r
	}
	busier := baseLoad
	busier.ctxsw *= 3
	base := withMigrations(synthRecording(rng, baseLoad, 12), func(i int) uint64 { return uint64(i % 2) })
	new := withMigrations(synthRecording(rng, busier, 12), func(i int) uint64 { return 20 + uint64(rng.IntN(5)) })
	res := Compare(base, new, testOptions())
	verdicts := map[string]string{}
	for _, m := range res.Metrics {
		verdicts[m.Name] = m.Verdict
	}
	for _, name := range []string{"cpu-migrations/s", "cpu-migrations/op"} {
		if verdicts[name] != VerdictChanged {
			t.Errorf("%s: %q, want %q (a rare event: 0.5 a window on one side)", name, verdicts[name], VerdictChanged)
		}
	}
	if verdicts["context-switches/s"] != VerdictRegression {
		t.Errorf("context-switches/s x3: %q, want %q", verdicts["context-switches/s"], VerdictRegression)
	}
	if !slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.Contains(w, "cpu-migrations/s (") }) {
		t.Errorf("no warning names cpu-migrations/s: %q", res.Warnings)
	}
	// The same rise from 100 a window is sized: a regression.
	base2 := withMigrations(synthRecording(rng, baseLoad, 12), func(i int) uint64 { return 100 + uint64(rng.IntN(5)) })
	new2 := withMigrations(synthRecording(rng, baseLoad, 12), func(i int) uint64 { return 400 + uint64(rng.IntN(5)) })
	res2 := Compare(base2, new2, testOptions())
	for _, m := range res2.Metrics {
		if m.Name == "cpu-migrations/s" && m.Verdict != VerdictRegression {
			t.Errorf("cpu-migrations/s 100 -> 400 a window: %q, want %q", m.Verdict, VerdictRegression)
		}
	}
}
