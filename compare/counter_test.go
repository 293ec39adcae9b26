package compare

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/profile"
)

// TestCounterRate: an app counter NAME_total becomes the rate of the work
// done in each window (its last value less the previous window's), which
// replaces a gauge NAME_per_sec and divides the window's events per unit
// of work. Windows whose share of the work is unknown (no value, or none
// in the window before, or the counter went down) get no value.
func TestCounterRate(t *testing.T) {
	const iv = int64(250e6)
	rec := &profile.Recording{Header: profile.Header{Settings: profile.Settings{IntervalNS: iv}}}
	// The running total at the end of each window; -1: no line written.
	totals := []float64{100, 600, 1100, -1, 2100, 2600, 50, 550}
	for i, v := range totals {
		w := profile.Window{Index: i, StartNS: int64(i) * iv, EndNS: int64(i+1) * iv,
			Counters:   []profile.Counter{{Event: "cpu-clock", PerCPU: []uint64{250e6}}},
			AppMetrics: map[string]float64{"ops_per_sec": 1}} // a stale gauge the counter overrides
		if v >= 0 {
			w.AppMetrics["ops_total"] = v
		}
		rec.Windows = append(rec.Windows, w)
	}
	got := map[string][]float64{}
	for _, s := range Extract(rec, 0) {
		got[s.Name] = s.Values
	}
	if _, ok := got["app.ops_total"]; ok {
		t.Error("the running total is compared; it grows whatever the program does")
	}
	// Windows 1, 2, 5 and 7: 500 ops in 0.25 s. Window 0 has no window
	// before it, 3 no value, 4 no value before it, 6 a reset; those
	// windows keep only the gauge.
	want := []float64{1, 2000, 2000, 1, 1, 2000, 1, 2000}
	if !equalFloats(got["app.ops_per_sec"], want) {
		t.Errorf("app.ops_per_sec %v, want %v", got["app.ops_per_sec"], want)
	}
	// 250e6 ns of CPU over 500 ops where the counter counted.
	perOp := got["cpu-clock/op"]
	if len(perOp) != 8 || perOp[1] != 5e5 || perOp[2] != 5e5 {
		t.Errorf("cpu-clock/op %v, want 5e5 in the windows the counter counted", perOp)
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9*math.Abs(b[i]) {
			return false
		}
	}
	return true
}

// TestNoWindowsNeverOK: when one side has no usable window at all (the
// recorder was starved through the whole run), no metric is tested; that
// is undecided, never "OK: 0 regressions". Two ordinary recordings are
// decided.
func TestNoWindowsNeverOK(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	starved := synthRecording(rng, baseLoad, 12)
	for i := range starved.Windows {
		starved.Windows[i].EndNS = starved.Windows[i].StartNS + 1 // all too short
	}
	res := Compare(synthRecording(rng, baseLoad, 12), starved, testOptions())
	if !res.Undecided() || res.Tested != 0 || res.Headline()[:2] == "OK" {
		t.Errorf("no usable windows in NEW: undecided %v, %d tested, %q", res.Undecided(), res.Tested, res.Headline())
	}
	if res.Need != nil && (len(res.Need.Metrics) == 0 || res.Need.MinWindows < 3) {
		t.Errorf("need %+v: want the metrics and a number of windows", res.Need)
	}
	if both := Compare(starved, starved, testOptions()); !both.Undecided() || !strings.Contains(both.Need.Explain(), "no usable window") {
		t.Errorf("no usable windows on either side: undecided %v, %+v", both.Undecided(), both.Need)
	}
	res = Compare(synthRecording(rng, baseLoad, 12), synthRecording(rng, baseLoad, 12), testOptions())
	if res.Undecided() || res.Tested == 0 {
		t.Errorf("12 windows a side: undecided %v with %d tested", res.Undecided(), res.Tested)
	}
}

// TestSparseMetricSkipped: a metric in one window of sides that have
// twelve (the run's ns_per_op, written once at its end) is left out with
// the reason, and the comparison is decided; in 3-window recordings the
// same metric leaves it undecided with the rest (TestUndecidedNeverOK).
func TestSparseMetricSkipped(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	base, new := synthRecording(rng, baseLoad, 12), synthRecording(rng, baseLoad, 12)
	for _, r := range []*profile.Recording{base, new} {
		r.Windows[10].AppMetrics["ns_per_op"] = 5
	}
	res := Compare(base, new, testOptions())
	if res.Undecided() {
		t.Errorf("undecided because of one sparse metric: %+v", res.Need)
	}
	var why string
	for _, s := range res.Skipped {
		if s.Name == "app.ns_per_op" {
			why = s.Reason
		}
	}
	if why == "" {
		t.Errorf("app.ns_per_op not among the skipped metrics %+v", res.Skipped)
	}
	short := Compare(synthRecording(rng, baseLoad, 3), synthRecording(rng, baseLoad, 3), testOptions())
	if !short.Undecided() {
		t.Error("3-window recordings decided")
	}
}
