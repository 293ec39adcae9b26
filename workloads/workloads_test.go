package workloads

import (
	"bufio"
	"context"
	"errors"
	"github.com/cacheheat/cacheheat/profile"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// smallSize keeps each workload's data tiny so the suite stays fast under
// -race; kvcache gets 260 tokens so a partial 256-token block is covered.
var smallSize = map[string]int64{
	"align":   64 << 10,
	"ffn":     16 << 10, // d_model 32
	"kvcache": 260 * 2 * kvHeads * kvDim * 4,
	"chase":   64 << 10,
	"stream":  64 << 10,
	"numa":    1 << 20,
}

func TestTableHasAllEight(t *testing.T) {
	want := []string{"falseshare", "align", "ffn", "kvcache", "rcu", "chase", "stream", "numa"}
	if got := strings.Join(Names(), ","); got != strings.Join(want, ",") {
		t.Fatalf("names = %s, want %s", got, strings.Join(want, ","))
	}
	for _, w := range All() {
		if w.Summary == "" || w.Op == "" || w.run == nil || len(w.Variants) == 0 {
			t.Errorf("%s: incomplete table row", w.Name)
		}
		_, pair := w.Variants[Bad]
		if _, ok := w.Variants[Good]; ok != pair {
			t.Errorf("%s: has one of bad/good without the other", w.Name)
		}
	}
}

// TestWorkloadsCorrect runs every variant briefly and requires its own
// check of the computed result (reference product, reference attention,
// expected sums, whole reads, single cycles) to pass.
func TestWorkloadsCorrect(t *testing.T) {
	for _, w := range All() {
		for _, v := range w.VariantNames() {
			t.Run(w.Name+"/"+v, func(t *testing.T) {
				res, err := w.Run(context.Background(), Config{Variant: v, Threads: 2, Duration: 150 * time.Millisecond, Size: smallSize[w.Name]})
				if w.Name == "numa" && errors.Is(err, ErrNeedsNUMA) {
					t.Skipf("needs two NUMA nodes: %v", err)
				}
				if err != nil {
					t.Fatal(err)
				}
				if !res.OK {
					t.Fatalf("check failed: %s", res.Check)
				}
				if res.Ops == 0 || res.BytesTouched == 0 || res.DurationS <= 0 || res.OpsPerSec <= 0 || res.NsPerOp <= 0 {
					t.Errorf("empty result: %+v", res)
				}
				if res.Workload != w.Name || res.Variant != v {
					t.Errorf("result names %s %s", res.Workload, res.Variant)
				}
				t.Log(res.Line())
			})
		}
	}
}

func TestChaseStaircaseCoversSizes(t *testing.T) {
	res, err := chase.Run(context.Background(), Config{Duration: 100 * time.Millisecond, Size: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10}
	if len(res.Steps) != len(want) {
		t.Fatalf("steps = %+v, want sizes %v", res.Steps, want)
	}
	for i, s := range res.Steps {
		if s.SizeBytes != want[i] || s.Accesses == 0 || s.NsPerAccess <= 0 {
			t.Errorf("step %d = %+v", i, s)
		}
	}
	if res.Threads != 1 {
		t.Errorf("chase threads = %d, want 1", res.Threads)
	}
}

func TestBuildCycleIsOneCycle(t *testing.T) {
	for _, m := range []int{1, 2, 3, 64, 1000} {
		arr := make([]uint32, m*chaseStride)
		buildCycle(arr, m, uint64(m), func() bool { return false })
		if got := cycleLength(arr, m); got != m {
			t.Errorf("m=%d: cycle length %d", m, got)
		}
	}
	// A broken chain (two cycles) must be caught.
	arr := make([]uint32, 4*chaseStride)
	arr[0], arr[chaseStride] = chaseStride, 0
	arr[2*chaseStride], arr[3*chaseStride] = 3*chaseStride, 2*chaseStride
	if got := cycleLength(arr, 4); got == 4 {
		t.Error("two 2-cycles passed as one 4-cycle")
	}
}

func TestFFNCheckCatchesWrongProduct(t *testing.T) {
	d, n, T := 16, 64, ffnTokens
	X, W, C := make([]float32, T*d), make([]float32, d*n), make([]float32, T*n)
	for i := range X {
		X[i] = genValue(1, uint64(i))
	}
	for i := range W {
		W[i] = genValue(2, uint64(i))
	}
	ffnNaive(X, W, C, d, n, 0, T)
	if e, ok := ffnCheck(X, W, C, d, n, T); !ok {
		t.Fatalf("naive product rejected, err %g", e)
	}
	C2 := make([]float32, T*n)
	ffnTiled(X, W, C2, d, n, 0, T, 8, 16)
	if e, ok := ffnCheck(X, W, C2, d, n, T); !ok {
		t.Fatalf("tiled product rejected, err %g", e)
	}
	C[5*n+7] += 0.01
	if _, ok := ffnCheck(X, W, C, d, n, T); ok {
		t.Error("a wrong element passed the check")
	}
}

func TestKVBlockedLayoutIsDense(t *testing.T) {
	seq := 300
	l := kvBlocked(seq)
	seen := make([]bool, seq*kvHeads)
	for tok := 0; tok < seq; tok++ {
		for h := 0; h < kvHeads; h++ {
			off := l(tok, h)
			if off%kvDim != 0 || off < 0 || off/kvDim >= len(seen) || seen[off/kvDim] {
				t.Fatalf("token %d head %d: offset %d reused or out of range", tok, h, off)
			}
			seen[off/kvDim] = true
		}
	}
	out := make([]float32, kvHeads*kvDim)
	for i := range out {
		out[i] = 0.5
	}
	if _, ok := kvCheck(out, 8); ok {
		t.Error("a wrong attention output passed the check")
	}
}

func TestRCUConsistency(t *testing.T) {
	var c rcuConfig
	c.fill(7)
	if !c.consistent() {
		t.Fatal("fresh config inconsistent")
	}
	c.Vals[3]++ // what a torn read of two versions looks like
	if c.consistent() {
		t.Error("torn config passed")
	}
}

func TestNUMAOneNode(t *testing.T) {
	nodes, err := numaNodes()
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) > 1 {
		t.Skipf("host has %d NUMA nodes; the one-node refusal cannot be seen here", len(nodes))
	}
	_, err = numa.Run(context.Background(), Config{Variant: Good, Threads: 1, Duration: 50 * time.Millisecond, Size: 1 << 20})
	if !errors.Is(err, ErrNeedsNUMA) {
		t.Fatalf("err = %v, want ErrNeedsNUMA", err)
	}
	if want := "numa needs at least two NUMA nodes; this host has 1"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

func TestResolveRejectsBadInput(t *testing.T) {
	cases := []struct {
		w   *Workload
		cfg Config
		msg string
	}{
		{falseshare, Config{Variant: "fast"}, "valid: bad, good"},
		{chase, Config{Variant: Bad}, "valid: only"},
		{falseshare, Config{Threads: -1}, "threads"},
		{falseshare, Config{Size: 4096}, "takes no --size"},
		{align, Config{Size: 100}, "at least 4KiB"},
		{align, Config{Size: 1 << 50}, "half of the available"},
		{align, Config{Duration: -time.Second}, "duration"},
	}
	for _, c := range cases {
		_, err := c.w.Resolve(c.cfg)
		if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s %+v: err = %v, want ErrBadInput mentioning %q", c.w.Name, c.cfg, err, c.msg)
		}
	}
	if _, err := Lookup("nope"); !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "falseshare") {
		t.Errorf("Lookup(nope) = %v", err)
	}
}

func TestParseSize(t *testing.T) {
	good := map[string]int64{"4096": 4096, "4KiB": 4096, "64MiB": 64 << 20, "1GiB": 1 << 30, "2k": 2048, "1MB": 1e6, "8 KiB": 8192}
	for in, want := range good {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-4KiB", "4XB", "KiB", "99999999999GiB"} {
		if _, err := ParseSize(in); !errors.Is(err, ErrBadInput) {
			t.Errorf("ParseSize(%q) err = %v, want ErrBadInput", in, err)
		}
	}
	if s := FormatSize(64 << 20); s != "64MiB" {
		t.Errorf("FormatSize = %s", s)
	}
}

func TestMetricsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics")
	res, err := falseshare.Run(context.Background(), Config{Variant: Good, Threads: 1, Duration: 700 * time.Millisecond, MetricsPath: path})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	var names []string
	last := map[string]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		v, err := strconv.ParseFloat(val, 64)
		if !ok || err != nil || (name != "ops_total" && name != "ops_per_sec" && name != "ns_per_op") {
			t.Fatalf("bad line %q", sc.Text())
		}
		// ops_total is a counter: it never goes down.
		if name == "ops_total" && v < last[name] {
			t.Errorf("ops_total went down from %g to %g", last[name], v)
		}
		names = append(names, name)
		last[name] = v
	}
	// Running totals (700 ms at 25 ms: many), then the run's own.
	n := len(names)
	if n < 10 || names[n-3] != "ops_total" || names[n-2] != "ops_per_sec" || names[n-1] != "ns_per_op" {
		t.Fatalf("lines %v", names)
	}
	if last["ops_total"] != float64(res.Ops) {
		t.Errorf("final ops_total %g, result %d ops", last["ops_total"], res.Ops)
	}
	if last["ops_per_sec"] != res.OpsPerSec && math.Abs(last["ops_per_sec"]-res.OpsPerSec) > 1e-6*res.OpsPerSec {
		t.Errorf("final ops_per_sec %g, result %g", last["ops_per_sec"], res.OpsPerSec)
	}
}

// TestThreadsNamed looks for the workers' comm in /proc while a run is on.
func TestThreadsNamed(t *testing.T) {
	found := make(chan bool, 1)
	go func() {
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			tasks, _ := filepath.Glob("/proc/self/task/*/comm")
			n := 0
			for _, p := range tasks {
				if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == "o3-falseshare" {
					n++
				}
			}
			// Two workers plus the renamed main thread.
			if n >= 3 {
				found <- true
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		found <- false
	}()
	if _, err := falseshare.Run(context.Background(), Config{Variant: Bad, Threads: 2, Duration: time.Second}); err != nil {
		t.Fatal(err)
	}
	if !<-found {
		t.Error("no o3-falseshare worker threads and process comm seen in /proc/self/task")
	}
	if b, _ := os.ReadFile("/proc/self/comm"); strings.TrimSpace(string(b)) != "o3-falseshare" {
		t.Errorf("process comm %q", b)
	}
}

func TestHostCaches(t *testing.T) {
	c := HostCaches()
	if c.L1d <= 0 || c.L2 <= 0 || c.LineSize <= 0 || c.Source == "" {
		t.Fatalf("caches %+v", c)
	}
	t.Logf("%+v", c)
	// A host with a shared L3 and per-core L1/L2: the first CPU's data
	// caches, instruction caches left out, unknown levels filled in.
	cpus := []profile.CPU{{ID: 2}, {ID: 3}}
	got := fromTopology(cpus, []profile.Cache{
		{Level: 1, Type: "Instruction", SizeBytes: 32 << 10, LineSize: 64, SharedCPUs: []int{2}},
		{Level: 1, Type: "Data", SizeBytes: 48 << 10, LineSize: 64, SharedCPUs: []int{2}},
		{Level: 1, Type: "Data", SizeBytes: 99, LineSize: 64, SharedCPUs: []int{3}},
		{Level: 2, Type: "Unified", SizeBytes: 2 << 20, LineSize: 64, SharedCPUs: []int{2}, Source: "cpuid"},
	})
	want := Caches{L1d: 48 << 10, L2: 2 << 20, L3: fallbackL3, LineSize: 64, Source: "cpuid"}
	if got != want {
		t.Errorf("fromTopology = %+v, want %+v", got, want)
	}
}
