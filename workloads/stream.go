package workloads

import (
	"math"
	"sync"
	"time"
)

// stream is McCalpin's STREAM: copy, scale, add and triad over three
// arrays much larger than the caches, giving sustainable memory bandwidth
// per kernel.
var stream = &Workload{
	Name:    "stream",
	Summary: "STREAM copy/scale/add/triad memory bandwidth, GB/s per kernel",
	Variants: map[string]string{
		Only: "copy/scale/add/triad over three float64 arrays, GB/s per kernel",
	},
	Size: &SizeParam{
		Meaning: "bytes of each of the three arrays",
		Default: 64 << 20,
		Min:     4 << 10,
		Memory:  func(s int64) int64 { return 3 * s },
	},
	Op:      "one array element of one kernel",
	Threads: true,
	run:     runStream,
}

// streamScalar keeps the values bounded for any number of iterations: one
// iteration maps a to (2s+s^2)a, which is a when s = sqrt(2)-1. (STREAM's
// 3.0 overflows after a few hundred iterations.)
var streamScalar = math.Sqrt2 - 1

var streamKernels = []struct {
	name         string
	bytesPerElem uint64
}{{"copy", 16}, {"scale", 16}, {"add", 24}, {"triad", 24}}

func runStream(e *env) (Result, error) {
	n := int(e.cfg.Size / 8)
	a, b, c := make([]float64, n), make([]float64, n), make([]float64, n)
	workers := min(e.cfg.Threads, n)
	s := streamScalar
	// Persistent workers, one per thread, each owning a fixed chunk (so
	// each touches its own pages first); the main goroutine times each
	// kernel across all of them.
	work := make([]chan int, workers)
	var kernelDone sync.WaitGroup
	for i := range work {
		work[i] = make(chan int)
	}
	errc := make(chan error, 1)
	go func() {
		errc <- runWorkers(workers, workerOpts{name: e.threadName()}, func(id int) error {
			lo, hi := split(n, workers, id)
			a, b, c := a[lo:hi], b[lo:hi], c[lo:hi]
			for k := range work[id] {
				switch k {
				case -1:
					for j := range a {
						a[j], b[j], c[j] = 1, 2, 0
					}
				case 0:
					copy(c, a)
				case 1:
					for j := range b {
						b[j] = s * c[j]
					}
				case 2:
					for j := range c {
						c[j] = a[j] + b[j]
					}
				case 3:
					for j := range a {
						a[j] = b[j] + s*c[j]
					}
				}
				e.progress.add(id, uint64(hi-lo))
				kernelDone.Done()
			}
			return nil
		})
	}()
	runKernel := func(k int) time.Duration {
		start := time.Now()
		kernelDone.Add(workers)
		for _, w := range work {
			w <- k
		}
		kernelDone.Wait()
		return time.Since(start)
	}
	runKernel(-1) // first touch by the thread that owns each chunk
	e.begin()
	times := make([]time.Duration, len(streamKernels))
	iters := 0
	// Whole iterations only, so the arrays match the scalar recurrence.
	for !e.stopBefore(iters) {
		for k := range streamKernels {
			times[k] += runKernel(k)
		}
		iters++
	}
	e.ended()
	for _, w := range work {
		close(w)
	}
	if err := <-errc; err != nil {
		return Result{}, err
	}
	var res Result
	for k, kn := range streamKernels {
		bytes := kn.bytesPerElem * uint64(n) * uint64(iters)
		res.Kernels = append(res.Kernels, Kernel{Name: kn.name, Bytes: bytes, Seconds: times[k].Seconds(), GBPerS: float64(bytes) / times[k].Seconds() / 1e9})
		res.BytesTouched += bytes
		res.Ops += uint64(n) * uint64(iters)
	}
	// STREAM's check: every element equals the scalar recurrence.
	ea, eb, ec := 1.0, 2.0, 0.0
	for i := 0; i < iters; i++ {
		ec = ea
		eb = s * ec
		ec = ea + eb
		ea = eb + s*ec
	}
	var worst float64
	for j := 0; j < n; j++ {
		worst = max(worst, relErr(a[j], ea), relErr(b[j], eb), relErr(c[j], ec))
	}
	res.Check = checkf(worst <= 1e-13, "iterations=%d max_rel_err=%.2g", iters, worst)
	return res, nil
}
