package profile

import (
	"sort"
	"strconv"
)

// Per-call counters of a --func function, in the order of
// FunctionBucket.Sums and FunctionCall.Deltas. Each is the delta of the
// calling thread's own kernel counter over the call (docs/FUNCTIONS.md).
const (
	FuncOnCPU      = "on-cpu-ns"            // time on a CPU
	FuncRunq       = "runq-ns"              // time runnable, waiting for a CPU
	FuncBlocked    = "blocked-ns"           // time off-CPU and not runnable (I/O, locks, sleep)
	FuncMinFlt     = "minor-faults"         // page faults served without I/O
	FuncMajFlt     = "major-faults"         // page faults that read from storage
	FuncVolCS      = "voluntary-switches"   // context switches the thread asked for (blocking)
	FuncInvolCS    = "involuntary-switches" // preemptions
	FuncMigrations = "cpu-migrations"       // moves to another CPU
)

// FunctionCounters lists the per-call counters in their fixed order.
var FunctionCounters = []string{FuncOnCPU, FuncRunq, FuncBlocked, FuncMinFlt, FuncMajFlt, FuncVolCS, FuncInvolCS, FuncMigrations}

// Function languages: how the function's returns are probed.
const (
	LangC  = "c"  // uretprobe, calls keyed by thread
	LangGo = "go" // uprobes on the RET instructions, calls keyed by goroutine
)

// FunctionSpec is one --func function, in the header.
type FunctionSpec struct {
	ID     int    `json:"id"`     // index used by FunctionWindow.ID
	Name   string `json:"name"`   // symbol as given, e.g. "main.handle"
	Binary string `json:"binary"` // absolute path of the executable or library
	Lang   string `json:"lang"`   // LangC or LangGo
	// ReturnProbes is the number of return probes: 1 uretprobe, or one
	// per RET instruction of a Go function.
	ReturnProbes int `json:"return_probes"`
	// Counters names the per-call counters (FunctionCounters at record
	// time).
	Counters []string `json:"counters"`
	// HardwareEvents says why no hardware event is counted per call
	// (empty when some are).
	HardwareEvents string `json:"hardware_events,omitempty"`
}

// FunctionWindow is one function's calls that returned in a window.
type FunctionWindow struct {
	ID int `json:"id"`
	// Buckets are the non-empty log2 latency buckets (ns), in bucket order.
	Buckets []FunctionBucket `json:"buckets,omitempty"`
	// Entries counts calls entered in the window.
	Entries uint64 `json:"entries"`
	// Unmatched counts returns whose entry was not found: evicted from the
	// bounded in-flight map or entered before recording started.
	Unmatched uint64 `json:"unmatched"`
	// Abandoned counts entries replaced by a later call at the same stack
	// depth of the same thread or goroutine: calls that never returned
	// (panic, longjmp).
	Abandoned uint64 `json:"abandoned"`
	// Moved counts Go calls whose goroutine returned on another thread:
	// their latency is in the buckets, their per-thread deltas are not.
	Moved uint64 `json:"moved"`
	// InflightFull counts entries that could not be stored.
	InflightFull uint64 `json:"inflight_full"`
	// EventsDropped counts per-call events lost (ring buffer full or over
	// the per-window cap).
	EventsDropped uint64 `json:"events_dropped"`
	// Calls are per-call events (--func-events), at most the cap a window.
	Calls []FunctionCall `json:"calls,omitempty"`
}

// FunctionBucket is one latency bucket of a function in a window.
type FunctionBucket struct {
	Bucket int    `json:"bucket"` // log2 bucket, as in Histogram
	Calls  uint64 `json:"calls"`
	// Counted is how many of Calls have their deltas in Sums (Go calls
	// that changed threads do not).
	Counted   uint64   `json:"counted"`
	LatencyNS uint64   `json:"latency_ns"` // summed latency of Calls
	Sums      []uint64 `json:"sums"`       // per counter, FunctionSpec.Counters order
}

// FunctionCall is one call of a function (--func-events).
type FunctionCall struct {
	PID       int      `json:"pid"`
	TID       int      `json:"tid"`
	StartNS   int64    `json:"start_ns"` // since Header.StartTime
	LatencyNS uint64   `json:"latency_ns"`
	Moved     bool     `json:"moved,omitempty"`
	Deltas    []uint64 `json:"deltas,omitempty"` // FunctionSpec.Counters order; empty when Moved
}

// FunctionAgg is one function over a whole recording (or a window range).
type FunctionAgg struct {
	Spec FunctionSpec
	// Hist counts calls per log2 bucket (HistBuckets long).
	Hist []uint64
	// ByBucket sums each bucket over windows.
	ByBucket                                                          map[int]*FunctionBucket
	Entries, Unmatched, Abandoned, Moved, InflightFull, EventsDropped uint64
	Calls                                                             uint64
}

// FunctionTotals aggregates each function over windows [from, to).
func (r *Recording) FunctionTotals(from, to int) []*FunctionAgg {
	t := NewFunctionTotaler(r.Header.Functions)
	to = min(to, len(r.Windows))
	for wi := max(from, 0); wi < to; wi++ {
		t.Add(r.Windows[wi].Functions)
	}
	return t.Totals()
}

// FunctionTotaler sums functions window by window: the one place that says
// how a function's totals are kept, for a recording in memory
// (FunctionTotals) and for a stream (attribution).
type FunctionTotaler struct {
	out  []*FunctionAgg
	byID map[int]*FunctionAgg
}

// NewFunctionTotaler starts the totals of the header's functions.
func NewFunctionTotaler(specs []FunctionSpec) *FunctionTotaler {
	t := &FunctionTotaler{byID: map[int]*FunctionAgg{}}
	for _, sp := range specs {
		a := &FunctionAgg{Spec: sp, Hist: make([]uint64, HistBuckets), ByBucket: map[int]*FunctionBucket{}}
		t.byID[sp.ID] = a
		t.out = append(t.out, a)
	}
	return t
}

// Add adds one window's functions; a function the header does not list is
// left out.
func (t *FunctionTotaler) Add(fws []FunctionWindow) {
	for _, fw := range fws {
		a := t.byID[fw.ID]
		if a == nil {
			continue
		}
		a.Entries += fw.Entries
		a.Unmatched += fw.Unmatched
		a.Abandoned += fw.Abandoned
		a.Moved += fw.Moved
		a.InflightFull += fw.InflightFull
		a.EventsDropped += fw.EventsDropped
		for _, b := range fw.Buckets {
			a.addBucket(b)
		}
	}
}

// addBucket adds one window's latency bucket; one out of range is left
// out.
func (a *FunctionAgg) addBucket(b FunctionBucket) {
	if b.Bucket < 0 || b.Bucket >= HistBuckets {
		return
	}
	a.Hist[b.Bucket] += b.Calls
	a.Calls += b.Calls
	t := a.ByBucket[b.Bucket]
	if t == nil {
		t = &FunctionBucket{Bucket: b.Bucket, Sums: make([]uint64, len(a.Spec.Counters))}
		a.ByBucket[b.Bucket] = t
	}
	t.Add(b)
}

// Add sums o's calls, counted calls, latency and per-counter sums into b;
// sums past b's counters are left out.
func (b *FunctionBucket) Add(o FunctionBucket) {
	b.Calls += o.Calls
	b.Counted += o.Counted
	b.LatencyNS += o.LatencyNS
	for i, v := range o.Sums {
		if i < len(b.Sums) {
			b.Sums[i] += v
		}
	}
}

// Totals returns the functions in the header's order.
func (t *FunctionTotaler) Totals() []*FunctionAgg { return t.out }

// FunctionSummary is one function in the inspect summary.
type FunctionSummary struct {
	Name   string  `json:"name"`
	Binary string  `json:"binary"`
	Lang   string  `json:"lang"`
	Calls  uint64  `json:"calls"`
	P50    float64 `json:"p50"` // ns
	P90    float64 `json:"p90"`
	P99    float64 `json:"p99"`
	Max    float64 `json:"max"` // upper bound of the highest non-empty bucket
	// Buckets counts calls per log2 latency bucket (ns), trailing empty
	// buckets left out.
	Buckets []uint64 `json:"buckets"`
	// ByBucket maps a bucket index to its call count, the calls with
	// counters ("counted"), the summed latency ("latency-ns") and the sum
	// of each per-call counter over those calls.
	ByBucket map[string]map[string]uint64 `json:"by_bucket"`
	// Entries, Unmatched, Abandoned, Moved, InflightFull and
	// EventsDropped are FunctionWindow's counts over the recording.
	Entries        uint64 `json:"entries"`
	Unmatched      uint64 `json:"unmatched"`
	Abandoned      uint64 `json:"abandoned"`
	Moved          uint64 `json:"moved"`
	InflightFull   uint64 `json:"inflight_full"`
	EventsDropped  uint64 `json:"events_dropped"`
	HardwareEvents string `json:"hardware_events,omitempty"`
}

// Summarize gives the function's inspect summary.
func (a *FunctionAgg) Summarize() FunctionSummary {
	fs := FunctionSummary{
		Name: a.Spec.Name, Binary: a.Spec.Binary, Lang: a.Spec.Lang, Calls: a.Calls,
		P50: Percentile(a.Hist, 0.5), P90: Percentile(a.Hist, 0.9), P99: Percentile(a.Hist, 0.99),
		ByBucket: map[string]map[string]uint64{},
		Entries:  a.Entries, Unmatched: a.Unmatched, Abandoned: a.Abandoned, Moved: a.Moved,
		InflightFull: a.InflightFull, EventsDropped: a.EventsDropped, HardwareEvents: a.Spec.HardwareEvents,
	}
	last := -1
	for i, c := range a.Hist {
		if c > 0 {
			last = i
		}
	}
	fs.Buckets = append([]uint64{}, a.Hist[:last+1]...)
	if last >= 0 {
		fs.Max = BucketUpper(last)
	}
	keys := make([]int, 0, len(a.ByBucket))
	for k := range a.ByBucket {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	for _, k := range keys {
		b := a.ByBucket[k]
		m := map[string]uint64{"calls": b.Calls, "counted": b.Counted, "latency-ns": b.LatencyNS}
		for i, name := range a.Spec.Counters {
			if i < len(b.Sums) {
				m[name] = b.Sums[i]
			}
		}
		fs.ByBucket[strconv.Itoa(k)] = m
	}
	return fs
}
