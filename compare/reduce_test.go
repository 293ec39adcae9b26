package compare

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cacheheat/cacheheat/profile"
)

// fixtures are real recordings of the repository's tests: v1 and v2
// files, a recording cut short, --func calls, per-process counts and app
// metrics.
var fixtures = []string{
	"../profile/testdata/v1/ffn-real.rec",
	"../profile/testdata/v1/complete.rec",
	"../profile/testdata/v1/killed.rec",
	"../profile/testdata/v2.0/falseshare-3s.rec",
	"../attribution/testdata/funclat-fault.rec",
	"../attribution/testdata/rcu-bad-4t.rec",
}

// reduceFile reduces the recording at path as diff does, streaming it.
func reduceFile(t *testing.T, path string, warmup int) *Reduced {
	t.Helper()
	s, err := profile.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := NewReducer(s.Header, warmup)
	for w := range s.Windows() {
		r.Add(w)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return r.Reduced(s.Trailer, s.Truncated, s.Warning)
}

// TestStreamedSameAsInMemory: comparing two recordings streamed from
// their files gives the Result of comparing them read whole into memory,
// for every pair of fixtures (each with itself too): the same JSON, and
// the same per-window values of every metric.
func TestStreamedSameAsInMemory(t *testing.T) {
	opts := DefaultOptions()
	opts.BootstrapIters = 200
	recs := map[string]*profile.Recording{}
	reduced := map[string]*Reduced{}
	for _, f := range fixtures {
		rec, err := profile.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		recs[f], reduced[f] = rec, reduceFile(t, f, opts.Warmup)
	}
	compared := 0
	for _, b := range fixtures {
		for _, n := range fixtures {
			mem := Compare(recs[b], recs[n], opts)
			streamed := CompareReduced(reduced[b], reduced[n], opts)
			name := filepath.Base(b) + " vs " + filepath.Base(n)
			if len(mem.Metrics) == 0 {
				t.Errorf("%s: no metric compared; the pair shows nothing", name)
			}
			compared += len(mem.Metrics)
			sameResult(t, name, &mem, &streamed)
		}
	}
	t.Logf("%d metrics compared over %d pairs", compared, len(fixtures)*len(fixtures))
}

func sameResult(t *testing.T, name string, mem, streamed *Result) {
	t.Helper()
	mj, sj := marshal(t, mem), marshal(t, streamed)
	if !bytes.Equal(mj, sj) {
		t.Errorf("%s: streamed result differs:\nin memory %s\nstreamed  %s", name, mj, sj)
		return
	}
	for i := range mem.Metrics {
		m, s := mem.Metrics[i], streamed.Metrics[i]
		if !slices.Equal(m.Base, s.Base) || !slices.Equal(m.New, s.New) {
			t.Errorf("%s: %s: streamed values differ", name, m.Name)
		}
	}
}

// TestLateEventsAndCPUs: an event, a CPU and a process that first count
// in a later window had zero in the windows before: their series start
// with zeros, one value per usable window like the others.
func TestLateEventsAndCPUs(t *testing.T) {
	topo := profile.Topology{
		CPUs:  []profile.CPU{{ID: 0, Node: 0}, {ID: 1, Node: 1}},
		Nodes: []profile.Node{{ID: 0, CPUs: []int{0}}, {ID: 1, CPUs: []int{1}}},
	}
	rec := &profile.Recording{Header: profile.Header{Host: profile.Host{Topology: topo}, Settings: profile.Settings{IntervalNS: 1e9}}}
	win := func(i int, cs []profile.Counter, ps []profile.Process) {
		rec.Windows = append(rec.Windows, profile.Window{StartNS: int64(i) * 1e9, EndNS: int64(i+1) * 1e9, Counters: cs, Processes: ps})
	}
	late := profile.Process{PID: 2, Comm: "late", Counts: map[string]uint64{"cpu-clock": 7}}
	win(0, []profile.Counter{{Event: "cpu-clock", PerCPU: []uint64{10}}}, nil)
	win(1, []profile.Counter{{Event: "cpu-clock", PerCPU: []uint64{10, 0}}}, []profile.Process{late})
	win(2, []profile.Counter{{Event: "cpu-clock", PerCPU: []uint64{10, 20}}, {Event: "page-faults", PerCPU: []uint64{0, 3}}}, []profile.Process{late})
	got := map[string][]float64{}
	for _, s := range Extract(rec, 0) {
		got[s.Name] = s.Values
	}
	for name, want := range map[string][]float64{
		"cpu-clock/s":              {10, 10, 30},
		"cpu-clock/s{cpu=0}":       {10, 10, 10},
		"cpu-clock/s{cpu=1}":       {0, 0, 20},
		"cpu-clock/s{node=1}":      {0, 0, 20},
		"page-faults/s":            {0, 0, 3},
		"page-faults/s{cpu=0}":     {0, 0, 0},
		"page-faults/s{cpu=1}":     {0, 0, 3},
		"page-faults/s{node=0}":    {0, 0, 0},
		`cpu-clock/s{comm="late"}`: {0, 7, 7},
	} {
		if !slices.Equal(got[name], want) {
			t.Errorf("%s: %v, want %v", name, got[name], want)
		}
	}
}

func marshal(t *testing.T, r *Result) []byte {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
