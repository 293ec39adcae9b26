package workloads

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// rcu is a read-mostly shared configuration with one writer. Behind a
// sync.RWMutex every read still writes the lock's reader count, so that
// one cache line bounces between all reading cores; with an atomic pointer
// to an immutable copy (RCU style) a read only loads shared lines, which
// every core keeps.
var rcu = &Workload{
	Name:    "rcu",
	Summary: "read-mostly config behind sync.RWMutex vs an atomically swapped copy",
	Variants: map[string]string{
		Bad:  "read-mostly shared config behind a sync.RWMutex, with a writer updating it in place every millisecond",
		Good: "RCU-style: readers load an atomic pointer, the writer swaps in an updated copy every millisecond",
	},
	Op:      "one read of the whole shared config by a reader thread",
	Threads: true,
	run:     runRCU,
}

// rcuConfig's invariant: Vals[i] == Version*(i+1) and Sum == sum of Vals.
// A reader that sees it broken saw a torn (unsynchronized) config.
type rcuConfig struct {
	Version uint64
	Vals    [14]uint64
	Sum     uint64
}

func makeRCUConfig(v uint64) rcuConfig {
	c := rcuConfig{Version: v}
	for i := range c.Vals {
		c.Vals[i] = v * uint64(i+1)
		c.Sum += c.Vals[i]
	}
	return c
}

// consistent checks the invariant and returns the version.
func (c *rcuConfig) consistent() bool {
	var s uint64
	for i, v := range c.Vals {
		if v != c.Version*uint64(i+1) {
			return false
		}
		s += v
	}
	return s == c.Sum
}

const (
	rcuBatch         = 1 << 10
	rcuWriterPeriod  = time.Millisecond
	rcuWriterThreads = 1
)

func runRCU(e *env) (Result, error) {
	var (
		mu     sync.RWMutex
		shared = makeRCUConfig(0)
		ptr    atomic.Pointer[rcuConfig]
	)
	first := makeRCUConfig(0)
	ptr.Store(&first)
	bad := e.cfg.Variant == Bad
	readers := e.cfg.Threads
	ops := make([]uint64, readers)
	torn := make([]uint64, readers)
	maxSeen := make([]uint64, readers)
	var writes atomic.Uint64
	var stopWriter atomic.Bool
	e.begin()
	var wg sync.WaitGroup
	wg.Add(1)
	var writerErr error
	go func() {
		defer wg.Done()
		writerErr = runWorkers(rcuWriterThreads, workerOpts{name: e.threadName()}, func(int) error {
			for v := uint64(1); !stopWriter.Load(); v++ {
				next := makeRCUConfig(v)
				if bad {
					mu.Lock()
					shared = next
					mu.Unlock()
				} else {
					ptr.Store(&next)
				}
				writes.Add(1)
				time.Sleep(rcuWriterPeriod)
			}
			return nil
		})
	}()
	// Readers on different CPUs: the contention is between cores.
	err := runWorkers(readers, workerOpts{name: e.threadName(), cpus: allowedCPUs()}, func(id int) error {
		var done, bads, seen uint64
		for !e.done() {
			for i := 0; i < rcuBatch; i++ {
				var c rcuConfig
				if bad {
					mu.RLock()
					c = shared
					mu.RUnlock()
				} else {
					c = *ptr.Load()
				}
				if !c.consistent() {
					bads++
				}
				seen = max(seen, c.Version)
			}
			done += rcuBatch
			e.progress.add(id, rcuBatch)
		}
		ops[id], torn[id], maxSeen[id] = done, bads, seen
		return nil
	})
	e.ended()
	stopWriter.Store(true)
	wg.Wait()
	if err != nil {
		return Result{}, err
	}
	if writerErr != nil {
		return Result{}, writerErr
	}
	var total, tornTotal, newest uint64
	for id := range ops {
		total += ops[id]
		tornTotal += torn[id]
		newest = max(newest, maxSeen[id])
	}
	w := writes.Load()
	// Every read must be whole, and readers must have seen updates, or
	// the writer was locked out and the comparison is meaningless.
	ok := tornTotal == 0 && newest <= w && (w < 2 || newest > 0)
	return Result{
		Ops:          total,
		BytesTouched: total * uint64(unsafe.Sizeof(rcuConfig{})),
		Check:        checkf(ok, "torn_reads=%d writes=%d newest_version_seen=%d", tornTotal, w, newest),
	}, nil
}
