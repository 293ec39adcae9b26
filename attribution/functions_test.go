package attribution

import (
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/profile"
)

// fb is one latency bucket of a test function: its calls, each call's
// latency (ns, all on-CPU unless sums say otherwise) and per-call counter
// values.
type fb struct {
	calls uint64
	lat   float64
	sums  map[string]float64
}

// function adds a --func function named "work" whose calls are spread
// evenly over the recording's windows.
func (b *builder) function(buckets map[int]fb) *builder {
	b.rec.Header.Functions = []profile.FunctionSpec{{ID: 0, Name: "work", Binary: "/bin/work", Lang: profile.LangC, ReturnProbes: 1, Counters: profile.FunctionCounters}}
	n := uint64(len(b.rec.Windows))
	for i := range b.rec.Windows {
		fw := profile.FunctionWindow{ID: 0}
		for bucket, v := range buckets {
			calls := v.calls / n
			if uint64(i) < v.calls%n {
				calls++
			}
			if calls == 0 {
				continue
			}
			per := map[string]float64{profile.FuncOnCPU: v.lat}
			for k, x := range v.sums {
				per[k] = x
			}
			if per[profile.FuncRunq] > 0 || per[profile.FuncBlocked] > 0 {
				per[profile.FuncOnCPU] = v.lat - per[profile.FuncRunq] - per[profile.FuncBlocked]
			}
			bk := profile.FunctionBucket{Bucket: bucket, Calls: calls, Counted: calls, LatencyNS: u(v.lat * float64(calls))}
			for _, c := range profile.FunctionCounters {
				bk.Sums = append(bk.Sums, u(per[c]*float64(calls)))
			}
			fw.Buckets = append(fw.Buckets, bk)
			fw.Entries += calls
		}
		b.rec.Windows[i].Functions = append(b.rec.Windows[i].Functions, fw)
	}
	return b
}

// TestFunctionTailCause: the verdict names the counter that rose with the
// tail, or where the time went when no counter did.
func TestFunctionTailCause(t *testing.T) {
	for _, c := range []struct {
		name    string
		tail    fb
		counter string // evidence the finding must carry
		verdict string
	}{
		{"faults", fb{calls: 20, lat: 1.2e6, sums: map[string]float64{profile.FuncMinFlt: 1024}}, profile.FuncMinFlt, "the tail's cause is page faults"},
		{"blocking", fb{calls: 20, lat: 1.2e6, sums: map[string]float64{profile.FuncBlocked: 1.1e6, profile.FuncVolCS: 3}}, profile.FuncVolCS, "the tail's cause is blocking"},
		{"run queue", fb{calls: 20, lat: 1.2e6, sums: map[string]float64{profile.FuncRunq: 1.1e6}}, profile.FuncRunq, "waiting for a CPU"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := newRec(t, 2, 3, swEvents...).function(map[int]fb{14: {calls: 1000, lat: 20e3}, 20: c.tail}).done()
			f, ok := findRule(analyzeRec(rec), "function-tail")
			if !ok {
				t.Fatalf("function-tail did not fire: %s", dump(analyzeRec(rec)))
			}
			checkFinding(t, f)
			if !strings.Contains(f.Advice, c.verdict) {
				t.Errorf("verdict %q does not say %q", f.Advice, c.verdict)
			}
			found := false
			for _, e := range f.Evidence {
				found = found || strings.HasPrefix(string(e.Metric), c.counter+" ")
			}
			if !found {
				t.Errorf("no evidence on %s: %s", c.counter, dump(f.Evidence))
			}
			if len(f.Scope.Functions) != 1 || f.Scope.Functions[0] != "work" {
				t.Errorf("scope functions %v, want [work]", f.Scope.Functions)
			}
		})
	}
}

// TestFunctionTailSplit: the tail starts at p99's bucket, the median is
// p50's bucket and its neighbours, and the two never overlap.
func TestFunctionTailSplit(t *testing.T) {
	rec := newRec(t, 2, 1, swEvents...).function(map[int]fb{
		13: {calls: 100, lat: 10e3}, 14: {calls: 800, lat: 20e3}, 15: {calls: 80, lat: 40e3},
		16: {calls: 10, lat: 80e3}, 20: {calls: 10, lat: 1.5e6, sums: map[string]float64{profile.FuncMinFlt: 500}},
	}).done()
	tc, ok := CompareTail(rec.FunctionTotals(0, 1)[0])
	if !ok {
		t.Fatal("no comparison")
	}
	if tc.TailFrom != 16 || tc.MedianFrom != 13 || tc.MedianTo != 15 || tc.TailCalls != 20 || tc.MedianCalls != 980 {
		t.Errorf("split: tail from %d (%d calls), median %d..%d (%d calls); want 16 (20), 13..15 (980)", tc.TailFrom, tc.TailCalls, tc.MedianFrom, tc.MedianTo, tc.MedianCalls)
	}
	r, _ := tc.row(profile.FuncMinFlt)
	if r.Tail != 250 || r.Median != 0 || r.Ratio != 250/perCallFloor {
		t.Errorf("minor faults per call: %+v, want tail 250, median 0", r)
	}
	// Neighbouring buckets only: nothing to compare.
	rec = newRec(t, 2, 1, swEvents...).function(map[int]fb{14: {calls: 980, lat: 20e3}, 15: {calls: 20, lat: 40e3}}).done()
	if tc, ok := CompareTail(rec.FunctionTotals(0, 1)[0]); ok && tc.MedianTo >= tc.TailFrom {
		t.Errorf("median %d..%d overlaps the tail from %d", tc.MedianFrom, tc.MedianTo, tc.TailFrom)
	}
}

// TestFunctionTailNotEvaluated: without --func the rule says how to get
// its input.
func TestFunctionTailNotEvaluated(t *testing.T) {
	res := analyzeRec(newRec(t, 2, 3, swEvents...).done())
	for _, ne := range res.NotEvaluated {
		if ne.Rule == "function-tail" {
			if !strings.Contains(ne.Reason, "--func") {
				t.Errorf("reason %q does not say --func", ne.Reason)
			}
			return
		}
	}
	t.Errorf("function-tail not listed as not evaluated: %s", dump(res.NotEvaluated))
}

// TestTailVerdictCounts: the verdict's tail is the whole bucket holding the
// p99, and it says how many calls that is (12% here, not "1%"), with the
// counts adding up.
func TestTailVerdictCounts(t *testing.T) {
	rec := newRec(t, 2, 3, swEvents...).function(map[int]fb{
		14: {calls: 2629, lat: 20e3},
		21: {calls: 371, lat: 3e6, sums: map[string]float64{profile.FuncMinFlt: 100}},
	}).done()
	f, ok := findRule(analyzeRec(rec), "function-tail")
	if !ok {
		t.Fatal("function-tail did not fire")
	}
	want := "the slowest 371 of 3000 calls (12%, every call of 2.1ms or more"
	if !strings.Contains(f.Advice, want) {
		t.Errorf("verdict %q lacks %q", f.Advice, want)
	}
}
