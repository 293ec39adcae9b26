package probe

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/profile"
	"github.com/cacheheat/cacheheat/workloads"
)

// The core-to-core matrix: for each ordered pair of CPUs (from, to), two
// threads pinned there pass one cache line back and forth with
// compare-and-swap, as nviennot/core-to-core-latency does: from swaps
// 2k to 2k+1, to swaps 2k+1 to 2k+2. A round of n exchanges takes 2n
// line transfers; a cell is one transfer's time, the median over the
// rounds (the first, warming, round dropped), with the rounds' min and
// max as its spread. The line sits in a page of its own that the from
// thread touches first, so the kernel places it on from's NUMA node
// (the default first-touch policy): where the line's memory sits changes
// the cost of a bounce (that benchmark's issue 97), and each cell says
// where it was.

// Matrix is the core-to-core latency matrix.
type Matrix struct {
	// CPUs are the measured CPUs in topology order (Result.Order).
	CPUs []int `json:"cpus"`
	// Cells are the ordered pairs measured; a pair not in it was not
	// measured (sampled out, or interrupted).
	Cells      []Cell `json:"cells"`
	Rounds     int    `json:"rounds"`
	Exchanges  int    `json:"exchanges_per_round"`
	Pairs      int    `json:"pairs"` // ordered pairs of CPUs
	Sampled    bool   `json:"sampled,omitempty"`
	SampleNote string `json:"sample_note,omitempty"`
	// LineNode says where the bounced line's memory is.
	LineNode string `json:"line_node"`
}

// Cell is one ordered pair: From starts each exchange, To answers.
type Cell struct {
	From int `json:"from"`
	To   int `json:"to"`
	// MedianNS is one line transfer's time, the median over the rounds;
	// MinNS and MaxNS are the fastest and slowest round.
	MedianNS float64 `json:"median_ns"`
	MinNS    float64 `json:"min_ns"`
	MaxNS    float64 `json:"max_ns"`
	// Relation is what the two CPUs share (Relation).
	Relation string `json:"relation"`
	// Error says why the pair has no numbers (it timed out).
	Error string `json:"error,omitempty"`
}

// Cell returns the cell of from→to, if measured.
func (m *Matrix) Cell(from, to int) (Cell, bool) {
	for _, c := range m.Cells {
		if c.From == from && c.To == to {
			return c, c.Error == ""
		}
	}
	return Cell{}, false
}

func (m *Matrix) notes() []string {
	var out []string
	if m.SampleNote != "" {
		out = append(out, m.SampleNote)
	}
	failed := 0
	for _, c := range m.Cells {
		if c.Error != "" {
			failed++
		}
	}
	if failed > 0 {
		out = append(out, fmt.Sprintf("%d of %d measured pairs gave no number (they did not finish: a CPU was busy with other work, or a virtual CPU was descheduled)", failed, len(m.Cells)))
	}
	return out
}

// matrixPlan is how many rounds and exchanges each pair gets.
func matrixPlan(quick bool) (rounds, exchanges int, timeout time.Duration) {
	if quick {
		return 7, 2000, time.Second
	}
	return 11, 10000, 3 * time.Second
}

func measureMatrix(ctx context.Context, order []int, topo profile.Topology, o Options, progress func(string, ...any)) *Matrix {
	rounds, exchanges, timeout := matrixPlan(o.Quick)
	m := &Matrix{CPUs: order, Rounds: rounds, Exchanges: exchanges, Pairs: len(order) * (len(order) - 1),
		LineNode: "the from CPU's node (its page is first touched there)"}
	pairs := allPairs(order)
	if len(order) > o.MaxFullCPUs {
		pairs = samplePairs(topo, order, o.MaxFullCPUs)
		m.Sampled = true
		m.SampleNote = fmt.Sprintf("%d CPUs: %d of the %d ordered pairs measured (each CPU against the nearest CPU it shares a core, an L3, a node or a package with, one on another package, and others at random; both directions); the rest are blank",
			len(order), len(pairs), m.Pairs)
	}
	p, err := startPool(order)
	if err != nil {
		m.SampleNote = "core-to-core matrix not measured: " + err.Error()
		return m
	}
	defer p.close()
	idx := map[int]int{}
	for i, c := range order {
		idx[c] = i
	}
	for n, pr := range pairs {
		if ctx.Err() != nil {
			break
		}
		if n%64 == 0 {
			progress("core-to-core: pair %d of %d", n+1, len(pairs))
		}
		c := Cell{From: pr[0], To: pr[1], Relation: Relation(topo, pr[0], pr[1])}
		ns, err := p.bounce(ctx, idx[pr[0]], idx[pr[1]], rounds, exchanges, timeout)
		if err != nil {
			c.Error = err.Error()
		} else {
			c.MedianNS, c.MinNS, c.MaxNS = metric.Median(ns), slices.Min(ns), slices.Max(ns)
		}
		m.Cells = append(m.Cells, c)
	}
	return m
}

func allPairs(order []int) [][2]int {
	var out [][2]int
	for _, a := range order {
		for _, b := range order {
			if a != b {
				out = append(out, [2]int{a, b})
			}
		}
	}
	return out
}

// samplePairs picks, for each CPU, the nearest CPU (in topology order)
// of each relation it has, and random others, so that about
// maxCPUs*(maxCPUs-1) ordered pairs are measured; both directions of each.
func samplePairs(topo profile.Topology, order []int, maxCPUs int) [][2]int {
	budget := maxCPUs * (maxCPUs - 1) / 2 // unordered
	seen := map[[2]int]bool{}
	var out [][2]int
	add := func(a, b int) {
		k := [2]int{min(a, b), max(a, b)}
		if a == b || seen[k] {
			return
		}
		seen[k] = true
		out = append(out, [2]int{a, b}, [2]int{b, a})
	}
	for i, a := range order {
		found := map[string]bool{}
		for d := 1; d < len(order) && len(found) < 5; d++ {
			for _, j := range []int{i + d, i - d} {
				if j < 0 || j >= len(order) {
					continue
				}
				rel := Relation(topo, a, order[j])
				if !found[rel] {
					found[rel] = true
					add(a, order[j])
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2)) // the same sample every run
	for tries := 0; len(seen) < budget && tries < 4*budget; tries++ {
		add(order[rng.IntN(len(order))], order[rng.IntN(len(order))])
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i][0] != out[j][0] {
			return out[i][0] < out[j][0]
		}
		return out[i][1] < out[j][1]
	})
	return out
}

// pool is one locked thread pinned to each measured CPU, waiting for
// work: threads are pinned once, not per pair.
type pool struct {
	jobs []chan func()
	done chan error
}

func startPool(cpus []int) (*pool, error) {
	p := &pool{jobs: make([]chan func(), len(cpus)), done: make(chan error, 1)}
	for i := range p.jobs {
		p.jobs[i] = make(chan func())
	}
	ready := make(chan struct{}, len(cpus))
	// The workers hold the channels, not p.jobs: close sets that to nil,
	// and a worker that has said it is ready may not have looked there yet
	// (a panic after the probe's tests passed, beside stress-ng).
	jobs := p.jobs
	go func() {
		p.done <- workloads.RunPinned("cacheheat-probe", cpus, func(i int) error {
			ready <- struct{}{}
			for f := range jobs[i] {
				f()
			}
			return nil
		})
	}()
	for range cpus {
		select {
		case <-ready:
		case err := <-p.done:
			// A thread could not be pinned: the others end too.
			p.close()
			return nil, err
		case <-time.After(10 * time.Second):
			p.close()
			return nil, fmt.Errorf("pinned threads did not start within 10 s on CPUs %s", host.FormatCPUList(cpus))
		}
	}
	return p, nil
}

func (p *pool) close() {
	for _, j := range p.jobs {
		if j != nil {
			close(j)
		}
	}
	p.jobs = nil
}

// bounce runs one pair: thread a starts each exchange, thread b answers.
// It returns one transfer's time per round, the warming round dropped.
func (p *pool) bounce(ctx context.Context, a, b, rounds, exchanges int, timeout time.Duration) ([]float64, error) {
	page, err := unix.Mmap(-1, 0, unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mapping the line's page: %w", err)
	}
	line := (*uint64)(unsafe.Pointer(&page[0]))
	var stop, bReady, aTouched atomic.Bool
	times := make([]float64, 0, rounds)
	var wg sync.WaitGroup
	wg.Add(2)
	total := uint64(rounds+1) * uint64(exchanges)
	// spin swaps want to want+1, giving up when stop is set.
	spin := func(want uint64) bool {
		for n := 0; !atomic.CompareAndSwapUint64(line, want, want+1); n++ {
			if n&1023 == 1023 && stop.Load() {
				return false
			}
		}
		return true
	}
	p.jobs[a] <- func() {
		defer wg.Done()
		atomic.StoreUint64(line, 0) // the first touch: the page is placed on this CPU's node
		aTouched.Store(true)
		for !bReady.Load() {
			if stop.Load() {
				return
			}
		}
		k := uint64(0)
		for r := 0; r <= rounds; r++ {
			start := time.Now()
			for i := 0; i < exchanges; i++ {
				if !spin(2 * k) {
					return
				}
				k++
			}
			if r > 0 {
				times = append(times, float64(time.Since(start).Nanoseconds())/float64(2*exchanges))
			}
		}
	}
	p.jobs[b] <- func() {
		defer wg.Done()
		for !aTouched.Load() {
			if stop.Load() {
				return
			}
		}
		bReady.Store(true)
		for k := uint64(0); k < total; k++ {
			if !spin(2*k + 1) {
				return
			}
		}
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	var why error
	select {
	case <-finished:
	case <-ctx.Done():
		why = ctx.Err()
	case <-time.After(timeout):
		why = fmt.Errorf("did not finish in %v", timeout)
	}
	if why != nil {
		stop.Store(true)
		<-finished
	}
	if err := unix.Munmap(page); err != nil && why == nil {
		why = err
	}
	if why == nil && len(times) != rounds {
		why = fmt.Errorf("%d of %d rounds", len(times), rounds)
	}
	return times, why
}

// RelationNames say in words what a pair of CPUs shares.
var RelationNames = map[string]string{
	"smt": "SMT siblings (one core)", "l3": "same L3", "node": "same node, other L3",
	"package": "same package, other node", "remote": "other package",
}

// Summary is a set of cells: the median of their medians, the fastest
// and the slowest.
type Summary struct {
	Pairs            int
	Median, Min, Max float64
}

// Summarize summarizes the measured cells keep accepts.
func Summarize(m *Matrix, keep func(Cell) bool) (Summary, bool) {
	var v []float64
	for _, c := range m.Cells {
		if c.Error == "" && keep(c) {
			v = append(v, c.MedianNS)
		}
	}
	if len(v) == 0 {
		return Summary{}, false
	}
	return Summary{Pairs: len(v), Median: metric.Median(v), Min: slices.Min(v), Max: slices.Max(v)}, true
}

// OfRelation keeps the cells of one relation, for Summarize.
func OfRelation(rel string) func(Cell) bool {
	return func(c Cell) bool { return c.Relation == rel }
}
