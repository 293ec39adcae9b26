package workloads

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// rcu is a read-mostly shared configuration with one writer. Behind a
// sync.RWMutex every read still writes the lock's reader count, so that
// one cache line bounces between all reading cores; with an atomic pointer
// to an immutable copy (RCU style) a read only loads shared lines, which
// every core keeps. Both writers fetch each version (rcuFetch) and
// publish it as a fresh copy, so they do the same work and allocate the
// same; behind the lock the writer fetches holding it, so readers also
// block, which an atomically swapped copy never makes them do.
var rcu = &Workload{
	Name:    "rcu",
	Summary: "read-mostly config behind sync.RWMutex vs an atomically swapped copy",
	Variants: map[string]string{
		Bad:  "read-mostly shared config behind a sync.RWMutex; every millisecond a writer fetches the next version (a 1 ms wait) and swaps it in, holding the write lock throughout",
		Good: "RCU-style: readers load an atomic pointer; every millisecond the writer fetches the next version (the same wait), then swaps it in",
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

// fill sets c to version v, one value at a time: a reader that saw c
// while it ran would see a torn config, which the invariant catches.
func (c *rcuConfig) fill(v uint64) {
	c.Version, c.Sum = v, 0
	for i := range c.Vals {
		c.Vals[i] = v * uint64(i+1)
		c.Sum += c.Vals[i]
	}
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
	// rcuFetch stands for getting each new version (reading a file,
	// asking a config service): a wait, not work. The bad writer waits
	// holding the write lock, as a reload that fetches under the lock
	// does, so every reader that comes meanwhile blocks: a third of their
	// time on the development host, on any host far over what scheduling
	// alone would make them block. The good writer waits before it
	// publishes its copy, and its readers never block. A wait costs no
	// CPU, so the good variant's threads still fit their CPUs.
	rcuFetch = time.Millisecond
)

func runRCU(e *env) (Result, error) {
	var (
		mu     sync.RWMutex
		shared = &rcuConfig{}
		ptr    atomic.Pointer[rcuConfig]
	)
	ptr.Store(shared)
	bad := e.cfg.Variant == Bad
	readers := e.cfg.Threads
	ops := make([]uint64, readers)
	torn := make([]uint64, readers)
	maxSeen := make([]uint64, readers)
	blocked := make([]float64, readers)
	clockErr := make([]error, readers)
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
				if bad {
					mu.Lock()
					time.Sleep(rcuFetch)
					next := new(rcuConfig)
					next.fill(v)
					shared = next
					mu.Unlock()
				} else {
					time.Sleep(rcuFetch)
					next := new(rcuConfig)
					next.fill(v)
					ptr.Store(next)
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
		start, err := readThreadClock()
		for !e.done() {
			for i := 0; i < rcuBatch; i++ {
				var c rcuConfig
				if bad {
					mu.RLock()
					c = *shared
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
		end, err2 := readThreadClock()
		blocked[id], clockErr[id] = end.blockedShare(start), errors.Join(err, err2)
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
	res := Result{
		Ops:          total,
		BytesTouched: total * uint64(unsafe.Sizeof(rcuConfig{})),
		Check:        checkf(ok, "torn_reads=%d writes=%d newest_version_seen=%d", tornTotal, w, newest),
	}
	// Without schedstat (a kernel without CONFIG_SCHED_INFO) the run
	// still counts; only its ground truth is absent.
	if errors.Join(clockErr...) == nil {
		var share float64
		for _, b := range blocked {
			share += b / float64(readers)
		}
		res.BlockedShare = &share
	}
	return res, nil
}
