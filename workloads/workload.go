package workloads

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Variant names.
const (
	Bad  = "bad"
	Good = "good"
	// Only is the variant of workloads that have one (chase, stream).
	Only = "only"
)

// ErrBadInput marks a Config the workload cannot run with (unknown name or
// variant, zero threads, a size out of range or too large for memory).
var ErrBadInput = errors.New("bad workload input")

// ErrNeedsNUMA marks a workload that needs more NUMA nodes than the host has.
var ErrNeedsNUMA = errors.New("workload needs a multi-node NUMA host")

// Workload is one row of the table.
type Workload struct {
	Name    string
	Summary string
	// Variants maps a variant name to what it does. Chase and stream have
	// one variant, Only.
	Variants map[string]string
	// Size describes --size, or is nil when the workload takes no size.
	Size *SizeParam
	// Op says what one op is.
	Op string
	// Threads reports whether -t changes the work; chase runs one thread.
	Threads bool
	run     func(e *env) (Result, error)
}

// SizeParam describes a workload's --size.
type SizeParam struct {
	Meaning string
	Default int64
	Min     int64
	// Memory returns the bytes the workload allocates for a size.
	Memory func(size int64) int64
}

// VariantNames returns the variant names, bad before good.
func (w *Workload) VariantNames() []string {
	names := make([]string, 0, len(w.Variants))
	for n := range w.Variants {
		names = append(names, n)
	}
	sort.Strings(names) // "bad" < "good"
	return names
}

// DefaultVariant is bad for pairs and Only otherwise.
func (w *Workload) DefaultVariant() string {
	if _, ok := w.Variants[Bad]; ok {
		return Bad
	}
	return Only
}

// Config is what a run is asked to do. Zero values mean defaults.
type Config struct {
	Variant  string
	Threads  int
	Duration time.Duration
	Size     int64
	// Metrics, when set, receives "ops_total N" lines every 25 ms and
	// the totals at the end (see metrics.go).
	MetricsPath string
}

// Result is one run's outcome.
type Result struct {
	Workload     string  `json:"workload"`
	Variant      string  `json:"variant"`
	Threads      int     `json:"threads"`
	DurationS    float64 `json:"duration_s"`
	Ops          uint64  `json:"ops"`
	OpsPerSec    float64 `json:"ops_per_sec"`
	NsPerOp      float64 `json:"ns_per_op"`
	BytesTouched uint64  `json:"bytes_touched"`
	SizeBytes    int64   `json:"size_bytes,omitempty"`
	// BlockedShare is the share of the worker threads' time they were
	// blocked (neither running nor waiting to run), by the kernel's
	// per-thread account (/proc/thread-self/schedstat), averaged over the
	// workers; rcu's readers only, for the off-CPU findings to be graded
	// against. Absent where it was not measured.
	BlockedShare *float64 `json:"blocked_share,omitempty"`
	// Check is "ok(...)" when the computed result was validated, or
	// "FAILED(...)" with what was wrong.
	Check string `json:"check"`
	OK    bool   `json:"ok"`
	// Steps is chase's staircase: ns per access for each working set.
	Steps []Step `json:"steps,omitempty"`
	// Kernels is stream's bandwidth per kernel.
	Kernels []Kernel `json:"kernels,omitempty"`
	// Caches are the host cache sizes the run used (ffn tiles, chase).
	Caches *Caches `json:"caches,omitempty"`
	// Interrupted is set when a signal stopped the run before its work
	// could be checked (Check then says so).
	Interrupted bool `json:"interrupted,omitempty"`
}

// Step is one working-set size of the chase staircase.
type Step struct {
	SizeBytes   int64   `json:"size_bytes"`
	NsPerAccess float64 `json:"ns_per_access"`
	Accesses    uint64  `json:"accesses"`
}

// Kernel is one STREAM kernel's bandwidth.
type Kernel struct {
	Name    string  `json:"name"`
	GBPerS  float64 `json:"gb_per_s"`
	Bytes   uint64  `json:"bytes"`
	Seconds float64 `json:"seconds"`
}

// Line formats the one-line result.
func (r Result) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s threads=%d duration_s=%.2f ops=%d ops_per_sec=%.4g ns_per_op=%.3f bytes_touched=%d check=%s",
		r.Workload, r.Variant, r.Threads, r.DurationS, r.Ops, r.OpsPerSec, r.NsPerOp, r.BytesTouched, r.Check)
	if r.BlockedShare != nil {
		fmt.Fprintf(&b, " blocked_share=%.4f", *r.BlockedShare)
	}
	// Chase's staircase and stream's kernels stay on the one line, so
	// every run is one line for scripts that read text.
	for i, st := range r.Steps {
		sep := ","
		if i == 0 {
			sep = " ns_per_access="
		}
		fmt.Fprintf(&b, "%s%s:%.2f", sep, FormatSize(st.SizeBytes), st.NsPerAccess)
	}
	for _, k := range r.Kernels {
		fmt.Fprintf(&b, " %s_gb_per_s=%.2f", k.Name, k.GBPerS)
	}
	if r.Caches != nil && len(r.Steps) > 0 {
		fmt.Fprintf(&b, " caches=L1d:%s,L2:%s,L3:%s", FormatSize(r.Caches.L1d), FormatSize(r.Caches.L2), FormatSize(r.Caches.L3))
	}
	return b.String()
}

var table = []*Workload{falseshare, align, ffn, kvcache, rcu, chase, stream, numa}

// All returns the workloads in table order.
func All() []*Workload { return table }

// Names returns the workload names in table order.
func Names() []string {
	n := make([]string, len(table))
	for i, w := range table {
		n[i] = w.Name
	}
	return n
}

// Lookup finds a workload by name.
func Lookup(name string) (*Workload, error) {
	for _, w := range table {
		if w.Name == name {
			return w, nil
		}
	}
	return nil, fmt.Errorf("%w: unknown workload %q; valid: %s", ErrBadInput, name, strings.Join(Names(), ", "))
}

// DefaultDuration is how long a run lasts without -d.
const DefaultDuration = 5 * time.Second

// Resolve fills a Config's defaults and checks it against the workload and
// this host's memory.
func (w *Workload) Resolve(cfg Config) (Config, error) {
	if cfg.Variant == "" {
		cfg.Variant = w.DefaultVariant()
	}
	if _, ok := w.Variants[cfg.Variant]; !ok {
		return cfg, fmt.Errorf("%w: %s has no variant %q; valid: %s", ErrBadInput, w.Name, cfg.Variant, strings.Join(w.VariantNames(), ", "))
	}
	if cfg.Threads < 0 {
		return cfg, fmt.Errorf("%w: threads must be at least 1, got %d", ErrBadInput, cfg.Threads)
	}
	if cfg.Threads == 0 {
		cfg.Threads = runtime.NumCPU()
	}
	if cfg.Threads > 1024 {
		return cfg, fmt.Errorf("%w: threads must be at most 1024, got %d", ErrBadInput, cfg.Threads)
	}
	if !w.Threads {
		cfg.Threads = 1
	}
	if cfg.Duration == 0 {
		cfg.Duration = DefaultDuration
	}
	if cfg.Duration < 0 {
		return cfg, fmt.Errorf("%w: duration must be positive, got %v", ErrBadInput, cfg.Duration)
	}
	if w.Size == nil {
		if cfg.Size != 0 {
			return cfg, fmt.Errorf("%w: %s takes no --size", ErrBadInput, w.Name)
		}
		return cfg, nil
	}
	if cfg.Size == 0 {
		cfg.Size = w.Size.Default
	}
	if cfg.Size < w.Size.Min {
		return cfg, fmt.Errorf("%w: %s --size must be at least %s (%s), got %s", ErrBadInput, w.Name, FormatSize(w.Size.Min), w.Size.Meaning, FormatSize(cfg.Size))
	}
	need := w.Size.Memory(cfg.Size)
	avail, err := memAvailable()
	if err != nil {
		return cfg, fmt.Errorf("reading available memory: %w", err)
	}
	if need < 0 || need > avail/2 {
		return cfg, fmt.Errorf("%w: %s --size %s needs %s of memory; at most half of the available %s may be used",
			ErrBadInput, w.Name, FormatSize(cfg.Size), FormatSize(need), FormatSize(avail))
	}
	return cfg, nil
}

// Run resolves cfg and runs the workload until cfg.Duration has passed or
// ctx is done.
func (w *Workload) Run(ctx context.Context, cfg Config) (Result, error) {
	cfg, err := w.Resolve(cfg)
	if err != nil {
		return Result{}, err
	}
	setProcessName("o3-" + w.Name)
	e := &env{parent: ctx, w: w, cfg: cfg, progress: newProgress(cfg.Threads)}
	defer func() {
		if e.cancelTimed != nil {
			e.cancelTimed()
		}
	}()
	stopMetrics, err := startMetrics(cfg.MetricsPath, e.progress)
	if err != nil {
		return Result{}, err
	}
	res, err := w.run(e)
	if err != nil {
		stopMetrics(false, 0, 0)
		return Result{}, err
	}
	if e.interrupted() && !strings.HasPrefix(res.Check, "ok") {
		// (A check is skipped or fails when the work was cut short.)
		// Stopped before its work was complete: nothing to check, and
		// nothing found wrong either.
		res.Check = "interrupted(stopped before a complete pass: result not checked)"
		res.Interrupted = true
	}
	if e.start.IsZero() {
		panic("workloads: " + w.Name + " never called begin")
	}
	if e.stop.IsZero() {
		e.stop = time.Now()
	}
	res.Workload = w.Name
	res.Variant = cfg.Variant
	res.Threads = cfg.Threads
	if w.Size != nil {
		res.SizeBytes = cfg.Size
	}
	if res.DurationS == 0 {
		res.DurationS = e.stop.Sub(e.start).Seconds()
	}
	if res.DurationS > 0 {
		res.OpsPerSec = float64(res.Ops) / res.DurationS
	}
	if res.Ops > 0 {
		res.NsPerOp = res.DurationS * 1e9 * float64(res.Threads) / float64(res.Ops)
	}
	res.OK = strings.HasPrefix(res.Check, "ok") || res.Interrupted
	if err := stopMetrics(true, res.OpsPerSec, res.NsPerOp); err != nil {
		return res, err
	}
	return res, nil
}

// env is what a run function gets. A run sets its data up (touching every
// page, so first-touch faults are not timed), calls begin, runs its
// workers (runWorkers notes when the last one stopped) and checks.
type env struct {
	parent      context.Context
	timed       context.Context
	cancelTimed context.CancelFunc
	w           *Workload
	cfg         Config
	progress    *progress
	start, stop time.Time
	mu          sync.Mutex
}

func (e *env) threadName() string { return "o3-" + e.w.Name }

// begin starts the timed part of the run: cfg.Duration from now.
func (e *env) begin() {
	e.timed, e.cancelTimed = context.WithTimeout(e.parent, e.cfg.Duration)
	e.start = time.Now()
}

// ended records that the timed work stopped now.
func (e *env) ended() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if now := time.Now(); now.After(e.stop) {
		e.stop = now
	}
}

// done reports whether the run should stop. Hot loops call it once per
// batch, not per op.
func (e *env) done() bool { return e.timed.Err() != nil }

// interrupted reports whether the run was stopped from outside (Ctrl-C,
// SIGTERM: the parent context), not by its duration. A workload stops
// within a batch of that, even in its set-up or its first pass.
func (e *env) interrupted() bool { return e.parent.Err() != nil }

// stopBefore reports whether a workload whose passes must complete once for
// its check should stop before pass number pass: after the first pass
// once the time is up, at once when interrupted.
func (e *env) stopBefore(pass int) bool { return e.done() && (pass > 0 || e.interrupted()) }

// progress holds one padded counter per worker, so publishing progress
// never adds false sharing of its own.
type progress struct {
	c []paddedCounter
}

type paddedCounter struct {
	n atomic.Uint64
	_ [56]byte
}

func newProgress(n int) *progress { return &progress{c: make([]paddedCounter, n)} }

func (p *progress) add(worker int, n uint64) { p.c[worker%len(p.c)].n.Add(n) }

func (p *progress) total() uint64 {
	var t uint64
	for i := range p.c {
		t += p.c[i].n.Load()
	}
	return t
}

// checkf formats a Check string.
func checkf(ok bool, format string, args ...any) string {
	if ok {
		return "ok(" + fmt.Sprintf(format, args...) + ")"
	}
	return "FAILED(" + fmt.Sprintf(format, args...) + ")"
}

// relErr is |a-b| relative to the larger magnitude (absolute below 1).
func relErr(a, b float64) float64 {
	d := math.Abs(a - b)
	m := math.Max(math.Abs(a), math.Abs(b))
	if m < 1 {
		return d
	}
	return d / m
}
