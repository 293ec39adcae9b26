package workloads

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// setProcessName names the thread group leader, so the process comm is
// o3-NAME. Writing /proc/self/comm renames the leader from any thread,
// which a goroutine cannot otherwise reach.
func setProcessName(name string) {
	// Best effort: a profile is still readable by pid if this fails.
	_ = os.WriteFile("/proc/self/comm", []byte(truncComm(name)), 0)
}

// truncComm cuts a name to the kernel's 15-byte comm limit.
func truncComm(name string) string {
	if len(name) > 15 {
		return name[:15]
	}
	return name
}

// nameThread names the calling OS thread; the caller must have locked it.
func nameThread(name string) error {
	b := append([]byte(truncComm(name)), 0)
	if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafePointer(&b[0])), 0, 0, 0); err != nil {
		return fmt.Errorf("naming thread %s: %w", name, err)
	}
	return nil
}

// allowedCPUs lists the CPUs this process may run on.
func allowedCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		cpus := make([]int, runtime.NumCPU())
		for i := range cpus {
			cpus[i] = i
		}
		return cpus
	}
	var cpus []int
	for i := 0; i < len(set)*64; i++ {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus
}

// pinThread binds the calling (locked) OS thread to one CPU.
func pinThread(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pinning thread to cpu %d: %w", cpu, err)
	}
	return nil
}

// workerOpts says how workers are placed.
type workerOpts struct {
	name string
	// cpus, when set, pins worker i to cpus[i%len(cpus)]: with more
	// workers than CPUs they spread round-robin.
	cpus []int
}

// runWorkers starts n workers, each on its own locked, named OS thread,
// and waits for them. A worker that returns an error stops nothing else;
// the first error is returned.
func runWorkers(n int, o workerOpts, fn func(id int) error) error {
	// Go runs at most GOMAXPROCS threads at once; extra locked threads
	// would wait on a futex in the Go scheduler, invisible to the kernel's.
	// Raising it makes -t 8 on 2 CPUs what it says: 8 runnable threads
	// competing in the kernel's run queue, as C threads would.
	if runtime.GOMAXPROCS(0) < n+1 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n + 1))
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			// The goroutine exits while still locked, so Go ends the
			// thread instead of returning a renamed, pinned thread to
			// the pool.
			runtime.LockOSThread()
			if err := nameThread(o.name); err != nil {
				errs[id] = err
				return
			}
			if len(o.cpus) > 0 {
				if err := pinThread(o.cpus[id%len(o.cpus)]); err != nil {
					errs[id] = err
					return
				}
			}
			errs[id] = fn(id)
		}(i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// split returns worker id's half-open share [lo, hi) of n items.
func split(n, workers, id int) (lo, hi int) {
	return n * id / workers, n * (id + 1) / workers
}

// threadClock is what the kernel has accounted to the calling (locked)
// thread, from /proc/thread-self/schedstat: time on a CPU and time
// runnable but waiting for one, with when it was read.
type threadClock struct {
	at        time.Time
	run, wait time.Duration
}

func readThreadClock() (threadClock, error) {
	c := threadClock{at: time.Now()}
	b, err := os.ReadFile("/proc/thread-self/schedstat")
	if err != nil {
		return c, err
	}
	var slices uint64
	if _, err := fmt.Sscan(string(b), &c.run, &c.wait, &slices); err != nil {
		return c, fmt.Errorf("/proc/thread-self/schedstat: %w", err)
	}
	return c, nil
}

// blockedShare is the share of the time from start to c that the thread
// was blocked: neither running nor waiting to run. It is the kernel's own
// account, the ground truth an off-CPU estimate is checked against.
func (c threadClock) blockedShare(start threadClock) float64 {
	wall := c.at.Sub(start.at)
	if wall <= 0 {
		return 0
	}
	blocked := wall - (c.run - start.run) - (c.wait - start.wait)
	return max(0, float64(blocked)/float64(wall))
}
