package workloads

// What `cacheheat probe` (package probe) shares with the workloads: the
// pinned, named threads and the pointer-chase cycle.

// AllowedCPUs lists the CPUs this process may run on (its affinity mask:
// taskset and cpusets narrow it).
func AllowedCPUs() []int { return allowedCPUs() }

// RunPinned runs fn(i) on len(cpus) locked OS threads named name, thread
// i pinned to cpus[i], and waits for them. The threads end with fn: no
// pinned thread goes back to Go's pool.
func RunPinned(name string, cpus []int, fn func(i int) error) error {
	return runWorkers(len(cpus), workerOpts{name: name, cpus: cpus}, fn)
}

// ChaseStride is the uint32 slots per cache line of a chase cycle.
const ChaseStride = chaseStride

// LinkCycle links the first lines cache lines of arr into one random
// cycle, as the chase workload does: arr[i*ChaseStride] holds the next
// line's slot index. It stops early when stop returns true.
func LinkCycle(arr []uint32, lines int, seed uint64, stop func() bool) {
	buildCycle(arr, lines, seed, stop)
}
