package workloads

import (
	"time"
)

// chase follows a random cyclic chain of pointers, one per cache line, so
// every load depends on the previous one and no prefetcher can guess the
// next: the time per load is the latency of the level the working set
// fits in. Sweeping the working set gives the L1/L2/L3/DRAM staircase.
var chase = &Workload{
	Name:    "chase",
	Summary: "pointer chase over a random cycle, 4 KiB..size: ns per access per working set",
	Variants: map[string]string{
		Only: "pointer chase over a random cycle, working set swept from 4 KiB to --size by powers of two; reports ns per access for each size (the L1/L2/L3/DRAM staircase)",
	},
	Size: &SizeParam{
		Meaning: "largest working set swept (from 4KiB up by powers of two)",
		Default: 256 << 20,
		Min:     4 << 10,
		Memory:  func(s int64) int64 { return s + s/16 },
	},
	Op:      "one dependent load",
	Threads: false,
	run:     runChase,
}

const (
	chaseMinSize = 4 << 10
	chaseLine    = 64
	chaseStride  = chaseLine / 4 // uint32 slots per line
	chaseBatch   = 1 << 12
	// chaseVerifyMax is the largest working set whose cycle is walked
	// once more to prove it is a single cycle; larger ones would cost
	// seconds of DRAM misses.
	chaseVerifyMax = 16 << 20
)

// chaseSizes returns 4KiB, 8KiB, ... up to max.
func chaseSizes(maxSize int64) []int64 {
	var s []int64
	for n := int64(chaseMinSize); n <= maxSize; n *= 2 {
		s = append(s, n)
	}
	return s
}

// buildCycle links lines [0, m) of arr into one random cycle (Sattolo's
// algorithm): arr[line*chaseStride] holds the next line's slot index. It
// gives up, leaving arr incomplete, when stop returns true (checked every
// 64K lines: a 256 MB working set takes a while to link).
func buildCycle(arr []uint32, m int, seed uint64, stop func() bool) {
	perm := make([]uint32, m)
	for i := range perm {
		perm[i] = uint32(i)
	}
	x := seed | 1
	for i := m - 1; i > 0; i-- {
		if i&0xffff == 0 && stop() {
			return
		}
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		j := int(x % uint64(i)) // j < i: Sattolo, a single cycle
		perm[i], perm[j] = perm[j], perm[i]
	}
	for i := 0; i < m; i++ {
		if i&0xffff == 0 && stop() {
			return
		}
		arr[int(perm[i])*chaseStride] = perm[(i+1)%m] * chaseStride
	}
}

// cycleLength walks from slot 0 until it returns, up to limit steps.
func cycleLength(arr []uint32, limit int) int {
	p := arr[0]
	for n := 1; n <= limit; n++ {
		if p == 0 {
			return n
		}
		p = arr[p]
	}
	return -1
}

func runChase(e *env) (Result, error) {
	sizes := chaseSizes(e.cfg.Size)
	arr := make([]uint32, sizes[len(sizes)-1]/4)
	var res Result
	var sink uint32
	verified, broken := 0, 0
	clear(arr) // touch every page before timing
	e.begin()
	err := runWorkers(1, workerOpts{name: e.threadName()}, func(int) error {
		deadline, _ := e.timed.Deadline()
		for i, size := range sizes {
			// A signal ends the staircase where it is; the sizes done
			// are reported.
			if e.interrupted() {
				break
			}
			m := int(size / chaseLine)
			buildCycle(arr, m, uint64(size), e.interrupted)
			if e.interrupted() {
				break
			}
			// Warm the level up before timing it.
			p := uint32(0)
			for j := 0; j < min(m, 1<<16); j++ {
				p = arr[p]
			}
			// Each size gets an equal share of the time left, so
			// building the large cycles does not starve the last.
			slice := time.Until(deadline) / time.Duration(len(sizes)-i)
			slice = max(slice, time.Millisecond)
			start := time.Now()
			end := start.Add(slice)
			var n uint64
			for {
				for j := 0; j < chaseBatch; j += 4 {
					p = arr[p]
					p = arr[p]
					p = arr[p]
					p = arr[p]
				}
				n += chaseBatch
				e.progress.add(0, chaseBatch)
				if time.Now().After(end) || e.interrupted() {
					break
				}
			}
			el := time.Since(start)
			sink ^= p
			res.Steps = append(res.Steps, Step{SizeBytes: size, NsPerAccess: float64(el.Nanoseconds()) / float64(n), Accesses: n})
			res.Ops += n
			if size <= chaseVerifyMax {
				if cycleLength(arr, m) == m {
					verified++
				} else {
					broken++
				}
			}
		}
		return nil
	})
	e.ended()
	if err != nil {
		return Result{}, err
	}
	c := HostCaches()
	res.Caches = &c
	res.BytesTouched = res.Ops * chaseLine
	res.Check = checkf(broken == 0, "single_cycles_verified=%d broken=%d sink=%#x", verified, broken, sink)
	return res, nil
}
