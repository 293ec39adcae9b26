package profile

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
)

// TestFunctionsRoundTrip: functions in the header and windows survive the
// file, and the summary sums them over windows.
func TestFunctionsRoundTrip(t *testing.T) {
	h := testHeader()
	h.Functions = []FunctionSpec{{ID: 0, Name: "main.work", Binary: "/bin/w", Lang: LangGo, ReturnProbes: 3, Counters: FunctionCounters}}
	path := filepath.Join(t.TempDir(), "f.rec")
	w, err := Create(path, h)
	if err != nil {
		t.Fatal(err)
	}
	sums := func(v uint64) []uint64 {
		s := make([]uint64, len(FunctionCounters))
		for i := range s {
			s[i] = v * uint64(i+1)
		}
		return s
	}
	for i := 0; i < 2; i++ {
		win := testWindow(i)
		win.Functions = []FunctionWindow{{ID: 0, Entries: 11, Abandoned: 1, Moved: 1, Buckets: []FunctionBucket{
			{Bucket: 10, Calls: 9, Counted: 8, LatencyNS: 9000, Sums: sums(1)},
			{Bucket: 20, Calls: 1, Counted: 1, LatencyNS: 1 << 20, Sums: sums(100)},
		}, Calls: []FunctionCall{{PID: 1, TID: 2, StartNS: 5, LatencyNS: 1500, Deltas: sums(1)}}}}
		if err := w.WriteWindow(&win); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(Trailer{EndReason: EndTargetExit, Windows: 2}); err != nil {
		t.Fatal(err)
	}
	rec, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rec.Header.Functions, h.Functions) || len(rec.Windows[1].Functions[0].Calls) != 1 {
		t.Fatalf("functions did not survive the file: %+v", rec.Header.Functions)
	}
	s := summarize(rec)
	if len(s.Functions) != 1 {
		t.Fatalf("%d summarized functions", len(s.Functions))
	}
	f := s.Functions[0]
	if f.Calls != 20 || f.Entries != 22 || f.Abandoned != 2 || f.Moved != 2 || len(f.Buckets) != 21 || f.Buckets[10] != 18 || f.Buckets[20] != 2 {
		t.Errorf("summary %+v", f)
	}
	b := f.ByBucket["20"]
	if b["calls"] != 2 || b["counted"] != 2 || b[FuncOnCPU] != 200 || b[FuncMigrations] != 1600 || b["latency-ns"] != 2<<20 {
		t.Errorf("bucket 20: %v", b)
	}
	if f.P50 < BucketLower(10) || f.P50 >= BucketUpper(10) || f.P99 < BucketLower(20) {
		t.Errorf("p50 %v p99 %v", f.P50, f.P99)
	}
	// The JSON names scripts rely on.
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(s); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Functions []map[string]json.RawMessage `json:"functions"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "binary", "calls", "p50", "p99", "buckets", "by_bucket"} {
		if _, ok := doc.Functions[0][k]; !ok {
			t.Errorf("inspect JSON function lacks %q", k)
		}
	}
}

func TestFunctionsCheckValid(t *testing.T) {
	for name, mut := range map[string]func(r *Recording){
		"unknown id":   func(r *Recording) { r.Windows[0].Functions[0].ID = 7 },
		"bucket range": func(r *Recording) { r.Windows[0].Functions[0].Buckets[0].Bucket = HistBuckets },
		"sums":         func(r *Recording) { r.Windows[0].Functions[0].Buckets[0].Sums = make([]uint64, 99) },
		"duplicate id": func(r *Recording) { r.Header.Functions = append(r.Header.Functions, r.Header.Functions[0]) },
	} {
		r := &Recording{Header: testHeader(), Windows: []Window{testWindow(0)}}
		r.Header.Functions = []FunctionSpec{{ID: 0, Name: "f", Counters: FunctionCounters}}
		r.Windows[0].Functions = []FunctionWindow{{ID: 0, Buckets: []FunctionBucket{{Bucket: 3, Calls: 1, Sums: make([]uint64, len(FunctionCounters))}}}}
		r.Stacks = map[uint64]Stack{}
		for _, s := range r.Windows[0].NewStacks {
			r.Stacks[s.ID] = s
		}
		if err := r.CheckValid(); err != nil {
			t.Fatalf("%s: the valid recording fails: %v", name, err)
		}
		mut(r)
		if err := r.CheckValid(); err == nil {
			t.Errorf("%s: CheckValid accepts it", name)
		}
	}
}
