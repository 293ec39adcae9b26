package collector

import (
	"testing"

	"github.com/cacheheat/cacheheat/bpf"
	"github.com/cacheheat/cacheheat/profile"
)

// TestFuncLayoutMatchesBPF checks what collector/funclat.go relies on
// against the object: map sizes, the counter list and the bucket layout.
func TestFuncLayoutMatchesBPF(t *testing.T) {
	spec, err := bpf.LoadFunclat()
	if err != nil {
		t.Fatal(err)
	}
	if got := spec.Maps["func_hist"].MaxEntries; got != uint32(funcMax*funcBuckets) {
		t.Errorf("func_hist has %d entries, want FUNC_MAX*FUNC_BUCKETS = %d", got, funcMax*funcBuckets)
	}
	if got := spec.Maps["func_stat_map"].MaxEntries; got != uint32(funcMax) {
		t.Errorf("func_stat_map has %d entries, want %d", got, funcMax)
	}
	var b bpf.FunclatFuncBucket
	var e bpf.FunclatFuncEvent
	if len(b.Sum) != len(profile.FunctionCounters) {
		t.Errorf("BPF buckets have %d counters per call, profile.FunctionCounters %d", len(b.Sum), len(profile.FunctionCounters))
	}
	if len(e.Delta) != len(profile.FunctionCounters) {
		t.Errorf("BPF events have %d counters per call, profile.FunctionCounters %d", len(e.Delta), len(profile.FunctionCounters))
	}
	if funcBuckets != profile.HistBuckets {
		t.Errorf("function histograms have %d buckets, recordings %d", funcBuckets, profile.HistBuckets)
	}
}
