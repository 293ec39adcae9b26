package compare

import (
	"math/rand/v2"
	"testing"

	"github.com/cacheheat/cacheheat/profile"
)

// withFunction gives every window of r a --func function "work": calls
// per window, most in bucket 14 (16-32 us), one in 50 in tailBucket.
func withFunction(r *profile.Recording, calls uint64, tailBucket int) *profile.Recording {
	r.Header.Functions = []profile.FunctionSpec{{ID: 0, Name: "work", Counters: profile.FunctionCounters}}
	for i := range r.Windows {
		tail := calls / 50
		r.Windows[i].Functions = []profile.FunctionWindow{{ID: 0, Buckets: []profile.FunctionBucket{
			{Bucket: 14, Calls: calls - tail},
			{Bucket: tailBucket, Calls: tail},
		}}}
	}
	return r
}

// TestFunctionMetrics: diff compares a function's p50, p99 and call rate;
// a slower tail is a regression of p99 alone.
func TestFunctionMetrics(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	base := withFunction(synthRecording(rng, baseLoad, 10), 1000, 20)
	slow := withFunction(synthRecording(rng, baseLoad, 10), 1000, 24)
	got := map[string]Series{}
	for _, s := range Extract(base, 0) {
		got[s.Name] = s
	}
	for name, dir := range map[string]Direction{
		`function.p50{func="work"}`:     LowerIsBetter,
		`function.p99{func="work"}`:     LowerIsBetter,
		`function.calls/s{func="work"}`: Neutral,
	} {
		s, ok := got[name]
		if !ok || s.Direction != dir || len(s.Values) != 10 {
			t.Errorf("%s: %+v, want %v with 10 values", name, s, dir)
		}
	}
	res := Compare(base, slow, DefaultOptions())
	verdicts := map[string]string{}
	for _, m := range res.Metrics {
		verdicts[m.Name] = m.Verdict
	}
	if v := verdicts[`function.p99{func="work"}`]; v != VerdictRegression {
		t.Errorf("p99 from 1 ms to 16 ms: verdict %q, want regression", v)
	}
	if v := verdicts[`function.p50{func="work"}`]; v == VerdictRegression {
		t.Errorf("p50 unchanged: verdict %q", v)
	}
}
