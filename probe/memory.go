package probe

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/profile"
	"github.com/cacheheat/cacheheat/workloads"
)

// Staircase is the load latency of each working-set size, measured by
// one thread on a CPU of a NUMA node with its memory on that node: a
// pointer chase over a random cycle, one line per step, so no load can
// start before the last ends and no prefetcher can guess the next (the
// chase workload's method).
type Staircase struct {
	Node  int    `json:"node"`
	CPU   int    `json:"cpu"`
	Steps []Step `json:"steps"`
	// Levels are the caches the CPU sees (caps' topology) and where the
	// latency stepped up near each.
	Levels []LevelStep `json:"levels"`
}

// Step is one working-set size.
type Step struct {
	SizeBytes int64   `json:"size_bytes"`
	NS        float64 `json:"ns_per_load"`
}

// LevelStep compares a cache's size with the staircase: StepBytes is
// the first size past a latency jump (a rise of jumpRatio or more from
// the size before) nearest to the cache's size, 0 when none; Within says
// it is within one size step (a factor of two either way) of the cache
// size.
type LevelStep struct {
	Level     int   `json:"level"`
	SizeBytes int64 `json:"size_bytes"`
	StepBytes int64 `json:"step_bytes"`
	Within    bool  `json:"within_one_step"`
}

// jumpRatio is the rise in latency from one size to the next (twice as
// large) that counts as a step.
const jumpRatio = 1.25

// Bandwidth is one level's read and copy bandwidth, for one thread and
// for every measured CPU at once.
type Bandwidth struct {
	// Level is "L1", "L2", "L3" or "DRAM"; SizeBytes the working set per
	// thread (half the cache, shared caches split among the threads that
	// share them).
	Level      string  `json:"level"`
	SizeBytes  int64   `json:"size_bytes"`
	Threads    int     `json:"threads"`
	ReadGBps   float64 `json:"read_gbps"`
	CopyGBps   float64 `json:"copy_gbps"`
	AllSizeB   int64   `json:"all_size_bytes_per_thread"`
	AllReadGB  float64 `json:"all_read_gbps"`
	AllCopyGB  float64 `json:"all_copy_gbps"`
	AllThreads int     `json:"all_threads"`
}

// cachesOf lists the data and unified caches cpu sees, by level.
func cachesOf(topo profile.Topology, cpu int) map[int]profile.Cache {
	out := map[int]profile.Cache{}
	for _, c := range topo.Caches {
		if c.Type != "Instruction" && slices.Contains(c.SharedCPUs, cpu) {
			out[c.Level] = c
		}
	}
	return out
}

func largestCache(topo profile.Topology, cpu int) int64 {
	var n int64
	for _, c := range cachesOf(topo, cpu) {
		n = max(n, c.SizeBytes)
	}
	return n
}

// mapTouched maps n bytes of anonymous memory and touches every page
// from the calling (pinned) thread, so they are placed on its node. It
// asks for huge pages (where transparent huge pages are enabled or
// "madvise"): with 4 KiB pages a working set past the TLB's reach (a few
// MiB) adds a page walk to every load, a step of its own that is not a
// cache's.
func mapTouched(n int64) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mapping %d bytes: %w", n, err)
	}
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // a hint: refused where THP is off
	for i := 0; i < len(b); i += 4096 {
		b[i] = 0
	}
	return b, nil
}

func u32s(b []byte) []uint32 { return unsafeSlice[uint32](b) }

// unsafeSlice views mapped memory as a slice of T.
func unsafeSlice[T any](b []byte) []T {
	var t T
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/int(unsafe.Sizeof(t)))
}

func measureStaircases(ctx context.Context, order []int, topo profile.Topology, quick bool) []Staircase {
	// One CPU per node, the first of it in topology order.
	var cpus []int
	nodes := map[int]bool{}
	nodeOf := map[int]int{}
	for _, c := range topo.CPUs {
		nodeOf[c.ID] = c.Node
	}
	for _, c := range order {
		if !nodes[nodeOf[c]] {
			nodes[nodeOf[c]] = true
			cpus = append(cpus, c)
		}
	}
	var out []Staircase
	for _, cpu := range cpus {
		if ctx.Err() != nil {
			break
		}
		s := Staircase{Node: nodeOf[cpu], CPU: cpu}
		maxSize := max(4*largestCache(topo, cpu), 64<<20)
		perSize := 60 * time.Millisecond
		if quick {
			maxSize, perSize = max(2*largestCache(topo, cpu), 32<<20), 15*time.Millisecond
		}
		maxSize = min(maxSize, 1<<30)
		_ = workloads.RunPinned("cacheheat-probe", []int{cpu}, func(int) error {
			mem, err := mapTouched(maxSize)
			if err != nil {
				return err
			}
			defer unix.Munmap(mem)
			arr := u32s(mem)
			stop := func() bool { return ctx.Err() != nil }
			for size := int64(4 << 10); size <= maxSize && !stop(); size *= 2 {
				lines := int(size / 64)
				workloads.LinkCycle(arr, lines, uint64(size), stop)
				s.Steps = append(s.Steps, Step{SizeBytes: size, NS: chase(arr, lines, perSize)})
			}
			return nil
		})
		s.Levels = levelSteps(s.Steps, cachesOf(topo, cpu))
		out = append(out, s)
	}
	return out
}

// chase walks the cycle for about d and returns the time per load.
func chase(arr []uint32, lines int, d time.Duration) float64 {
	p := uint32(0)
	for i := 0; i < min(lines, 1<<16); i++ { // warm the level up
		p = arr[p]
	}
	var n int
	start := time.Now()
	for time.Since(start) < d {
		for i := 0; i < 1024; i += 4 {
			p = arr[p]
			p = arr[p]
			p = arr[p]
			p = arr[p]
		}
		n += 1024
	}
	el := time.Since(start)
	runtime.KeepAlive(p) // the chase's result is used
	return float64(el.Nanoseconds()) / float64(n)
}

// levelSteps finds, for each cache, the latency jump nearest its size.
func levelSteps(steps []Step, caches map[int]profile.Cache) []LevelStep {
	var jumps []int64
	for i := 1; i < len(steps); i++ {
		if steps[i-1].NS > 0 && steps[i].NS/steps[i-1].NS >= jumpRatio {
			jumps = append(jumps, steps[i].SizeBytes)
		}
	}
	var out []LevelStep
	for lvl := 1; lvl <= 4; lvl++ {
		c, ok := caches[lvl]
		if !ok || c.SizeBytes <= 0 {
			continue
		}
		ls := LevelStep{Level: lvl, SizeBytes: c.SizeBytes}
		for _, j := range jumps {
			if ls.StepBytes == 0 || ratioDist(j, c.SizeBytes) < ratioDist(ls.StepBytes, c.SizeBytes) {
				ls.StepBytes = j
			}
		}
		// The working set outgrows the cache between its size and twice
		// it; a shared or busy cache (another VM, other cores) holds less
		// and steps up a size earlier.
		ls.Within = ls.StepBytes > 0 && ratioDist(ls.StepBytes, c.SizeBytes) <= 2
		out = append(out, ls)
	}
	return out
}

// staircaseNotes says where a cache's size and the staircase disagree:
// a VM may be given a share of a cache (the host's cache allocation), or
// report a size that is not its own; the heatmaps are then read against
// what was measured.
func staircaseNotes(st []Staircase) []string {
	var out []string
	for _, s := range st {
		for _, l := range s.Levels {
			if l.Within || !s.complete() {
				continue
			}
			msg := fmt.Sprintf("node %d (CPU %d): the host reports a %s L%d, but the load latency shows no step within a factor of two of it", s.Node, s.CPU, metric.FormatBytes(l.SizeBytes), l.Level)
			if l.StepBytes > 0 {
				msg += fmt.Sprintf(" (the nearest is at %s)", metric.FormatBytes(l.StepBytes))
			}
			out = append(out, msg+": this CPU may get only a share of that cache (a VM, or cache allocation on the host), or the size reported is not what it can use")
		}
	}
	return out
}

// complete says the staircase went past its largest cache: an
// interrupted one has no say on the larger levels.
func (s Staircase) complete() bool {
	var largest int64
	for _, l := range s.Levels {
		largest = max(largest, l.SizeBytes)
	}
	return len(s.Steps) > 0 && s.Steps[len(s.Steps)-1].SizeBytes > largest
}

// ratioDist is how many times larger the larger of a and b is.
func ratioDist(a, b int64) float64 {
	if a < b {
		a, b = b, a
	}
	return float64(a) / float64(b)
}

func measureBandwidth(ctx context.Context, order []int, topo profile.Topology, quick bool) []Bandwidth {
	first := order[0]
	caches := cachesOf(topo, first)
	per := 100 * time.Millisecond
	if quick {
		per = 25 * time.Millisecond
	}
	dram := max(8*largestCache(topo, first), 256<<20)
	if quick {
		dram = max(4*largestCache(topo, first), 64<<20)
	}
	dram = min(dram, 1<<30)
	type level struct {
		name  string
		size  int64 // one thread's working set
		share int   // measured CPUs sharing one instance
	}
	var levels []level
	for lvl := 1; lvl <= 3; lvl++ {
		if c, ok := caches[lvl]; ok && c.SizeBytes > 0 {
			n := 0
			for _, x := range c.SharedCPUs {
				if slices.Contains(order, x) {
					n++
				}
			}
			levels = append(levels, level{fmt.Sprintf("L%d", lvl), c.SizeBytes / 2, max(n, 1)})
		}
	}
	levels = append(levels, level{"DRAM", dram, 0})
	var out []Bandwidth
	for _, l := range levels {
		if ctx.Err() != nil {
			break
		}
		b := Bandwidth{Level: l.name, SizeBytes: l.size, Threads: 1, AllThreads: len(order)}
		b.ReadGBps, b.CopyGBps = bandwidth(ctx, []int{first}, l.size, per)
		b.AllSizeB = l.size / int64(max(l.share, 1))
		if l.share == 0 { // DRAM: the whole set split among the threads
			b.AllSizeB = l.size / int64(len(order))
		}
		b.AllSizeB = max(b.AllSizeB&^4095, 4096)
		if len(order) > 1 {
			b.AllReadGB, b.AllCopyGB = bandwidth(ctx, order, b.AllSizeB, per)
		} else {
			b.AllReadGB, b.AllCopyGB = b.ReadGBps, b.CopyGBps
		}
		out = append(out, b)
	}
	return out
}

// bandwidth runs the read and copy kernels on a buffer of size bytes per
// thread, one thread pinned on each of cpus, all starting together; the
// best of three timed runs of about d each. GB/s counts the bytes read
// and written (STREAM's convention: a copy moves each byte twice).
func bandwidth(ctx context.Context, cpus []int, size int64, d time.Duration) (read, cp float64) {
	n := len(cpus)
	readyc, startc, done := make(chan struct{}, n), make(chan struct{}), make(chan struct{})
	var abort atomic.Bool
	bytesRead := make([]float64, n)
	bytesCopy := make([]float64, n)
	elapsedR := make([]time.Duration, n)
	elapsedC := make([]time.Duration, n)
	go func() {
		defer close(done)
		_ = workloads.RunPinned("cacheheat-probe", cpus, func(i int) error {
			mem, err := mapTouched(size)
			if err != nil {
				readyc <- struct{}{}
				return err
			}
			defer unix.Munmap(mem)
			half := len(mem) / 2
			// Calibrate: passes of the read kernel that take about d.
			passes := 1
			for {
				t := time.Now()
				readPasses(mem, passes)
				el := time.Since(t)
				if el >= d/4 || passes > 1<<24 {
					passes = max(1, int(float64(passes)*float64(d)/float64(max(el, time.Microsecond))))
					break
				}
				passes *= 2
			}
			readyc <- struct{}{}
			<-startc
			for rep := 0; rep < 3 && ctx.Err() == nil && !abort.Load(); rep++ {
				t := time.Now()
				readPasses(mem, passes)
				if el := time.Since(t); elapsedR[i] == 0 || el < elapsedR[i] {
					elapsedR[i] = el
				}
				t = time.Now()
				for p := 0; p < passes; p++ {
					copy(mem[half:], mem[:half])
				}
				if el := time.Since(t); elapsedC[i] == 0 || el < elapsedC[i] {
					elapsedC[i] = el
				}
			}
			bytesRead[i] = float64(passes) * float64(len(mem))
			bytesCopy[i] = float64(passes) * float64(half*2)
			return nil
		})
	}()
	// Every thread calibrated, then all start at once. A thread that
	// could not be pinned never reports: after 10 s the others are let
	// go without timing anything.
	timeout := time.After(10 * time.Second)
wait:
	for range n {
		select {
		case <-readyc:
		case <-done:
			break wait
		case <-timeout:
			abort.Store(true)
			break wait
		}
	}
	close(startc)
	<-done
	if abort.Load() {
		return 0, 0
	}
	// Each thread's own rate, summed: the threads run at once.
	for i := range cpus {
		if elapsedR[i] > 0 {
			read += bytesRead[i] / elapsedR[i].Seconds() / 1e9
		}
		if elapsedC[i] > 0 {
			cp += bytesCopy[i] / elapsedC[i].Seconds() / 1e9
		}
	}
	return read, cp
}

// readPasses reads buf passes times with the widest loads this CPU has:
// bytes.IndexByte is the runtime's vectorized scan (AVX2 on x86-64), and
// buf is all zeros (mapped, then only copied onto itself), so it reads
// every byte looking for a 0xff it never finds.
func readPasses(buf []byte, passes int) {
	for p := 0; p < passes; p++ {
		if bytes.IndexByte(buf, 0xff) >= 0 {
			panic("probe: the read buffer is not zero")
		}
	}
}
