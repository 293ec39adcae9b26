package attribution

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
)

// The recordings of TestStreamMatchesAnalyze, real runs on a 2-CPU VM
// without a PMU:
//
//	funclat-fault.rec  cacheheat record -i 200ms --func work -- cwork 20000 fault
//	                   (cmd/cacheheat/testdata/funclat/work.c): --func latency
//	                   and off-CPU stacks
//	rcu-bad-4t.rec     cacheheat record -- cacheheat workload run rcu -t 4 -d 3s:
//	                   lock waits in off-CPU stacks, 4 threads on 2 CPUs
var streamFixtures = []struct {
	path string
	// rules are the findings the recording must give (so that the
	// comparison covers the reductions they read).
	rules []string
}{
	{"testdata/funclat-fault.rec", []string{RulePageFaults, RuleNoisyNeighbour, RuleFunctionTail}},
	{"testdata/rcu-bad-4t.rec", []string{RuleCPUSaturation, RuleLockContention}},
	{"../profile/testdata/v2.0/falseshare-3s.rec", nil},
	{"../profile/testdata/v1/ffn-real.rec", nil},
	{"../profile/testdata/v1/killed.rec", nil},
}

// TestStreamMatchesAnalyze: the model built from a file's windows as a
// stream reads them gives the same Result, and the same metrics, as the
// model of the whole recording in memory, even when what the model does
// not keep of each window is overwritten once added.
func TestStreamMatchesAnalyze(t *testing.T) {
	for _, fx := range streamFixtures {
		t.Run(fx.path, func(t *testing.T) {
			rec, err := profile.ReadFile(fx.path)
			if err != nil {
				t.Fatal(err)
			}
			want := analyzeRec(rec)
			s, err := profile.OpenFile(fx.path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			b := model.NewBuilder(s.Header, s.Stacks)
			n := 0
			for w := range s.Windows() {
				b.Add(w)
				scrub(w)
				n++
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			if n != len(rec.Windows) || n == 0 {
				t.Fatalf("streamed %d windows, the recording has %d", n, len(rec.Windows))
			}
			md := b.Model(s.Trailer, s.Truncated, s.Warning)
			got := Analyze(md)
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(want)
			if string(gj) != string(wj) {
				t.Errorf("streamed result differs from the in-memory one:\n got %s\nwant %s", gj, wj)
			}
			if g, w := NewMetrics(md).Dump(), NewMetrics(model.FromRecording(rec)).Dump(); g != w {
				t.Errorf("streamed metrics differ:\n got %s\nwant %s", g, w)
			}
			var fired []string
			for _, f := range got.Findings {
				fired = append(fired, f.Rule)
			}
			for _, r := range fx.rules {
				if !slices.Contains(fired, r) {
					t.Errorf("findings %v, want %s among them", fired, r)
				}
			}
		})
	}
}

// analyzeRec is Analyze of a recording in memory.
func analyzeRec(rec *profile.Recording) Result { return Analyze(model.FromRecording(rec)) }

// scrub zeroes what a window holds that the model does not keep, arrays
// included, as a reader that reused those buffers would. The model keeps
// the counters' per-CPU arrays, the off-CPU stacks, the waits and the
// --func calls (model.Builder.Add), which a stream never reuses.
func scrub(w *profile.Window) {
	for _, h := range w.Histograms {
		for _, c := range h.PerCPU {
			clear(c)
		}
	}
	for _, p := range w.Processes {
		clear(p.Counts)
		for _, t := range p.Threads {
			clear(t.Counts)
		}
	}
	clear(w.Samples)
	clear(w.IdleNS)
	clear(w.Others)
	*w = profile.Window{}
}
