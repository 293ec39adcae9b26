package workloads

import "sync/atomic"

// falseshare is gradient aggregation: each thread adds its gradients into
// its own counter. Packed, the counters share one cache line and every add
// bounces it between cores; padded, each thread owns a line.
var falseshare = &Workload{
	Name:    "falseshare",
	Summary: "per-thread counters packed in one cache line vs padded to a line each",
	Variants: map[string]string{
		Bad:  "gradient aggregation: each thread atomically adds into its own counter, counters packed in one cache line",
		Good: "the same counters padded to 64 bytes (a cache line each)",
	},
	Op:      "one atomic add of a gradient into the thread's counter",
	Threads: true,
	run:     runFalseshare,
}

const falseshareBatch = 1 << 12

func runFalseshare(e *env) (Result, error) {
	n := e.cfg.Threads
	stride := 1 // packed: counter i at word i
	if e.cfg.Variant == Good {
		stride = 8 // 8 words = 64 bytes
	}
	counters := alignedUint64s(n*stride, 64)
	ops := make([]uint64, n)
	e.begin()
	// Threads on different CPUs is the point: two threads time-sharing
	// one CPU never contend for the line.
	err := runWorkers(n, workerOpts{name: e.threadName(), cpus: allowedCPUs()}, func(id int) error {
		c := &counters[id*stride]
		grad := uint64(id + 1)
		var done uint64
		for !e.done() {
			for i := 0; i < falseshareBatch; i++ {
				atomic.AddUint64(c, grad)
			}
			done += falseshareBatch
			e.progress.add(id, falseshareBatch)
		}
		ops[id] = done
		return nil
	})
	e.ended()
	if err != nil {
		return Result{}, err
	}
	var total, sum, want uint64
	for id := 0; id < n; id++ {
		total += ops[id]
		want += ops[id] * uint64(id+1)
		sum += atomic.LoadUint64(&counters[id*stride])
	}
	return Result{
		Ops:          total,
		BytesTouched: total * 8,
		Check:        checkf(sum == want, "sum=%d want=%d", sum, want),
	}, nil
}
