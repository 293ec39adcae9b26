package attribution

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/profile"
)

// ruleCase builds a recording at a multiple x of one threshold: the rule
// must fire at x = 1.05 and stay quiet at x = 0.95.
type ruleCase struct {
	rule   string
	metric metric.ID // the threshold that x scales
	build  func(t *testing.T, x float64) *profile.Recording
}

func u(v float64) uint64 { return uint64(math.Round(v)) }

var ruleCases = []ruleCase{
	{"l1-bandwidth-contention", metric.L1DLoadMissRatio, func(t *testing.T, x float64) *profile.Recording {
		return newRec(t, 2, 3, append(swEvents, hwEvents...)...).
			samples(0, 95, "main.hot").samples(1, 5, "main.cold").
			counter(metric.L1DLoads, []uint64{1e9, 1e7}).
			counter(metric.L1DLoadMisses, []uint64{u(0.75 * x * 1e9), 1e5}).
			counter(metric.LLCLoads, []uint64{1e8, 1e5}).
			counter(metric.LLCStores, []uint64{2e7, 1e4}).done()
	}},
	{"l1-bandwidth-contention", "top core share of samples", func(t *testing.T, x float64) *profile.Recording {
		hot := u(1000 * 0.90 * x)
		return newRec(t, 2, 3, append(swEvents, hwEvents...)...).
			samples(0, hot, "main.hot").samples(1, 1000-hot, "main.cold").
			counter(metric.L1DLoads, []uint64{1e9, 1e7}).
			counter(metric.L1DLoadMisses, []uint64{8e8, 1e5}).
			counter(metric.LLCLoads, []uint64{1e8, 1e5}).
			counter(metric.LLCStores, []uint64{2e7, 1e4}).done()
	}},
	{"l3-writeback-congestion", "write-back/load", func(t *testing.T, x float64) *profile.Recording {
		return newRec(t, 2, 3, append(swEvents, hwEvents...)...).
			counter(metric.LLCLoads, []uint64{4e6, 4e6}).
			counter(metric.LLCLoadMisses, []uint64{2e6, 2e6}).
			counter(metric.LLCStores, []uint64{u(4e6 * 1.8 * x), u(4e6 * 1.8 * x)}).done()
	}},
	{"llc-thrashing", metric.LLCLoadMPKI, func(t *testing.T, x float64) *profile.Recording {
		miss := 5e6 * x
		return newRec(t, 2, 3, append(swEvents, hwEvents...)...).
			counter(metric.Instructions, []uint64{5e8, 5e8}).
			counter(metric.LLCLoadMisses, []uint64{u(miss / 2), u(miss / 2)}).
			counter(metric.LLCLoads, []uint64{u(miss / 2 / 0.8), u(miss / 2 / 0.8)}).done()
	}},
	{"remote-numa", metric.NodeLoadMissRatio, func(t *testing.T, x float64) *profile.Recording {
		return newRec(t, 2, 3, append(swEvents, hwEvents...)...).
			counter(metric.NodeLoads, []uint64{1e7, 1e7}).
			counter(metric.NodeLoadMisses, []uint64{u(0.2 * x * 1e7), u(0.2 * x * 1e7)}).done()
	}},
	{"dtlb-pressure", metric.DTLBLoadMPKI, func(t *testing.T, x float64) *profile.Recording {
		return newRec(t, 2, 3, append(swEvents, hwEvents...)...).
			counter(metric.Instructions, []uint64{1e9, 0}).
			counter(metric.DTLBLoadMisses, []uint64{u(1e6 * x), 0}).done()
	}},
	{"false-sharing", metric.HITMPKI, func(t *testing.T, x float64) *profile.Recording {
		return newRec(t, 2, 3, append(swEvents, hwEvents...)...).
			counter(metric.Instructions, []uint64{5e8, 5e8}).
			counter(metric.HITMEvents[0], []uint64{u(0.125e6 * x), u(0.125e6 * x)}).done()
	}},
	{"core-hotspot", "top core share of samples", func(t *testing.T, x float64) *profile.Recording {
		hot := u(100 * 0.90 * x)
		return newRec(t, 2, 4, swEvents...).software().
			threads(2, map[string]uint64{metric.CPUClock: 4e8}).
			samples(1, hot, "main.spin").samples(0, 100-hot, "main.other").
			counter(metric.CPUClock, []uint64{(100 - hot) * 1e7, hot * 1e7}).done()
	}},
	{"core-hotspot", "top core demand", func(t *testing.T, x float64) *profile.Recording {
		// All samples on one core, which the target keeps x * 50% busy.
		busy := u(50 * x)
		return newRec(t, 2, 4, swEvents...).software().
			threads(2, map[string]uint64{metric.CPUClock: busy * 5e6}).
			samples(1, 100, "main.spin").
			counter(metric.CPUClock, []uint64{0, busy * 1e7}).done()
	}},
	{"core-hotspot", "top core demand", func(t *testing.T, x float64) *profile.Recording {
		// A shared host: the pinned thread runs 30% of the time and waits
		// in the run queue for (50x - 30)% of it.
		wait := (0.5*x - 0.3) * 1e9 // ns per one-second window
		n := u(wait / (1.5 * (1 << 20)))
		return newRec(t, 2, 4, swEvents...).software().
			threads(2, map[string]uint64{metric.CPUClock: 1.5e8}).
			samples(1, 100, "main.spin").
			counter(metric.CPUClock, []uint64{0, 3e8}).
			hist(profile.HistRunqLatency, 1, 20, n).done()
	}},
	{"core-hotspot", "least busy other core", func(t *testing.T, x float64) *profile.Recording {
		// A "<" threshold: CPU 0 is busy 0.5*(2-x) of the time with other
		// processes' work, so x = 1.05 is just under it.
		busy := 0.5 * (2 - x)
		return newRec(t, 2, 4, swEvents...).software().
			threads(2, map[string]uint64{metric.CPUClock: 4.5e8}).
			samples(1, 100, "main.spin").
			counter(metric.CPUClock, []uint64{0, 9e8}).
			idle([]uint64{u((1 - busy) * 1e9), 1e8}).done()
	}},
	{"core-hotspot", "working threads", func(t *testing.T, x float64) *profile.Recording {
		// Two busy threads pinned to one core could use two; one thread
		// runs on one core whatever is done.
		n := 1
		if x > 1 {
			n = 2
		}
		return newRec(t, 2, 4, swEvents...).software().
			threads(n, map[string]uint64{metric.CPUClock: 9e8 / uint64(n)}).
			samples(1, 100, "main.spin").
			counter(metric.CPUClock, []uint64{0, 9e8}).done()
	}},
	{"cpu-saturation", "share of windows saturated", func(t *testing.T, x float64) *profile.Recording {
		// Ten windows; x*5 of them (rounded) have a 1.2 ms p99. Every
		// window has 0.63 s of short run-queue waits, which with 1.9 CPUs
		// of on-CPU time are 2.5 runnable threads on two CPUs.
		b := newRec(t, 2, 10, swEvents...).software().
			threads(3, map[string]uint64{metric.CPUClock: 6e8}).
			counter(metric.CPUClock, []uint64{9.5e8, 9.5e8})
		n := int(math.Round(5 * x))
		if x < 1 {
			n = 4
		}
		for i := 0; i < 10; i++ {
			b.hist(profile.HistRunqLatency, i%2, 10, 98, i)
			b.hist(profile.HistRunqLatency, i%2, 17, 3200, i)
			bucket := 12
			if i < n {
				bucket = 20 // [1.05 ms, 2.1 ms): p99 = 1.2 ms
			}
			b.hist(profile.HistRunqLatency, i%2, bucket, 40, i)
		}
		return b.done()
	}},
	{"cpu-saturation", "runq-latency p99", func(t *testing.T, x float64) *profile.Recording {
		// Log2 buckets: just above, the top 1.2% of the waits are in
		// bucket 20 (p99 1.2 ms), just below in bucket 19 (p99 0.61 ms);
		// either way 0.63 s of waits in bucket 17 make 2.5 runnable
		// threads on two CPUs.
		bucket := 20
		if x < 1 {
			bucket = 19
		}
		return newRec(t, 2, 4, swEvents...).software().
			threads(3, map[string]uint64{metric.CPUClock: 6e8}).
			counter(metric.CPUClock, []uint64{9.5e8, 9.5e8}).
			hist(profile.HistRunqLatency, 0, 10, 98).
			hist(profile.HistRunqLatency, 0, 17, 3200).
			hist(profile.HistRunqLatency, 1, bucket, 40).done()
	}},
	{"cpu-saturation", "runnable threads per allowed CPU", func(t *testing.T, x float64) *profile.Recording {
		// Two CPUs, 1.6 CPUs of on-CPU time and run-queue wait W, so that
		// (1.6e9 + W) / 1e9 / 2 = 1.25x: W in bucket 20 (midpoint 1.57
		// ms). Ten idle runtime threads that run 1% of the time change
		// nothing.
		n := u((2.5e9*x - 1.6e9) / (1.5 * (1 << 20)))
		b := newRec(t, 2, 4, swEvents...).software().
			threads(2, map[string]uint64{metric.CPUClock: 8e8}).
			counter(metric.CPUClock, []uint64{8e8, 8e8}).
			hist(profile.HistRunqLatency, 0, 10, 98).
			hist(profile.HistRunqLatency, 1, 20, n)
		for i := range b.rec.Windows {
			p := &b.rec.Windows[i].Processes[0]
			for k := 0; k < 10; k++ {
				p.Threads = append(p.Threads, profile.Thread{TID: 200 + k, Comm: "idle", Counts: map[string]uint64{metric.CPUClock: 1e7}})
			}
		}
		return b.done()
	}},
	{"cpu-saturation", "target on-CPU share of the allowed CPUs", func(t *testing.T, x float64) *profile.Recording {
		// The target runs 0.5x of two CPUs and its threads wait 2 s a
		// second in the run queue (bucket 20): over 1.25 runnable per CPU
		// either way, its own work filling half the CPUs or not.
		on := u(0.5 * x * 1e9)
		return newRec(t, 2, 4, swEvents...).software().
			threads(4, map[string]uint64{metric.CPUClock: on / 2}).
			counter(metric.CPUClock, []uint64{on, on}).
			hist(profile.HistRunqLatency, 0, 10, 98).
			hist(profile.HistRunqLatency, 1, 20, 1272).done()
	}},
	{"noisy-neighbour", "other processes' share of the allowed CPUs", func(t *testing.T, x float64) *profile.Recording {
		// Two working threads on two CPUs, each running 40% of the time;
		// other processes run x*10% of the time, the rest is idle.
		other := 0.1 * x * 1e9
		return newRec(t, 2, 4, swEvents...).software().
			threads(2, map[string]uint64{metric.CPUClock: 4e8}).
			counter(metric.CPUClock, []uint64{4e8, 4e8}).
			idle([]uint64{u(6e8 - other), u(6e8 - other)}).
			others(300, "stress-ng", 40).others(301, "make", 1).
			hist(profile.HistRunqLatency, 0, 10, 98).
			hist(profile.HistRunqLatency, 1, 20, 2).done()
	}},
	{"lock-contention", "lock wait share", func(t *testing.T, x float64) *profile.Recording {
		// Two working threads on CPU 1 s per window; one waits for a
		// lock so that wait / (wait + on-CPU) = 0.02*x.
		share := 0.02 * x
		return newRec(t, 2, 4, swEvents...).software().
			threads(2, map[string]uint64{metric.CPUClock: 5e8}).
			counter(metric.CPUClock, []uint64{5e8, 5e8}).
			offcpu(100, profile.OffCPULock, u(share/(1-share)*1e9), "sync.(*Mutex).Lock").done()
	}},
	{"lock-contention", "lock wait per second", func(t *testing.T, x float64) *profile.Recording {
		return newRec(t, 2, 4, swEvents...).software().
			threads(1, map[string]uint64{metric.CPUClock: 2e8}).
			counter(metric.CPUClock, []uint64{2e8, 0}).
			offcpu(100, profile.OffCPULock, u(10e6*x), "pthread_mutex_lock").done()
	}},
	{"io-wait", "I/O wait share", func(t *testing.T, x float64) *profile.Recording {
		share := 0.1 * x
		ns := u(share / (1 - share) * 1e9)
		return newRec(t, 2, 4, swEvents...).software().
			threads(2, map[string]uint64{metric.CPUClock: 5e8}).
			counter(metric.CPUClock, []uint64{5e8, 5e8}).
			wait(profile.OffCPUDiskIO, "pread64", "file", ns).
			offcpu(101, profile.OffCPUDiskIO, ns, "os.(*File).ReadAt").done()
	}},
	{"io-wait", "I/O wait per second", func(t *testing.T, x float64) *profile.Recording {
		return newRec(t, 2, 4, swEvents...).software().
			threads(1, map[string]uint64{metric.CPUClock: 2e8}).
			counter(metric.CPUClock, []uint64{2e8, 0}).
			wait(profile.OffCPUDiskIO, "read", "file", u(50e6*x)).done()
	}},
	{"startup-io", "start-up disk I/O per second of its windows", func(t *testing.T, x float64) *profile.Recording {
		// Eight windows; 50x ms of disk I/O a second in the first two.
		return newRec(t, 2, 8, swEvents...).software().
			threads(1, map[string]uint64{metric.CPUClock: 1e8}).
			counter(metric.CPUClock, []uint64{1e8, 0}).
			wait(profile.OffCPUDiskIO, "read", "file", u(50e6*x), 0, 1).
			wait(profile.OffCPUSleep, "clock_nanosleep", "", 9e8, 2, 3, 4, 5, 6, 7).done()
	}},
	{"peer-wait", "share waiting on other processes or the network", func(t *testing.T, x float64) *profile.Recording {
		// Waiting on a pipe peer a quarter(x) of the time, running the rest.
		share := 0.25 * x
		return newRec(t, 2, 4, swEvents...).software().
			threads(1, map[string]uint64{metric.CPUClock: u((1 - share) * 1e9)}).
			counter(metric.CPUClock, []uint64{u((1 - share) * 1e9), 0}).
			wait(profile.OffCPUIPC, "read", "pipe", u(share*1e9)).
			peer(profile.Peer{PID: 100, WakerPID: 200, WakerComm: "producer", Reason: profile.OffCPUIPC, Call: "read", NS: u(share * 1e9), Count: 1000}).done()
	}},
	{"page-fault-storm", "page-faults/s", func(t *testing.T, x float64) *profile.Recording {
		return newRec(t, 2, 4, swEvents...).software().
			counter(metric.PageFaults, []uint64{u(10000 * x), 0}).done()
	}},
	{"migration-churn", "cpu-migrations per thread", func(t *testing.T, x float64) *profile.Recording {
		m := u(50 * x)
		return newRec(t, 2, 4, swEvents...).software().
			threads(4, map[string]uint64{metric.CPUMigrations: m}).
			counter(metric.CPUMigrations, []uint64{2 * m, 2 * m}).done()
	}},
	{"latency-tail", "cause rate over median window", func(t *testing.T, x float64) *profile.Recording {
		// Ten windows; windows 4 and 8 have a runq p99 of 3.1 ms against
		// a 6 us median, and a page-fault rate x*2 the median window's.
		steady := []int{0, 1, 2, 3, 5, 6, 7, 9}
		b := newRec(t, 2, 10, swEvents...).software().
			hist(profile.HistRunqLatency, 0, 10, 98).
			hist(profile.HistRunqLatency, 0, 12, 2, steady...).
			hist(profile.HistRunqLatency, 0, 21, 2, 4, 8).
			counter(metric.PageFaults, []uint64{1000, 0}, steady...).
			counter(metric.PageFaults, []uint64{u(2000 * x), 0}, 4, 8)
		return b.done()
	}},
	{"latency-tail", "tail windows", func(t *testing.T, x float64) *profile.Recording {
		// Ten windows; one (x < 1) or two tail windows with a burst of
		// faults: one window is noise, two a tail.
		tails := []int{4}
		if x > 1 {
			tails = []int{4, 8}
		}
		b := newRec(t, 2, 10, swEvents...).software().
			hist(profile.HistRunqLatency, 0, 10, 98).
			counter(metric.PageFaults, []uint64{1000, 0})
		for i := range 10 {
			if slices.Contains(tails, i) {
				b.hist(profile.HistRunqLatency, 0, 21, 2, i).counter(metric.PageFaults, []uint64{5000, 0}, i)
			} else {
				b.hist(profile.HistRunqLatency, 0, 12, 2, i)
			}
		}
		return b.done()
	}},
	{"function-tail", "tail mean over median mean", func(t *testing.T, x float64) *profile.Recording {
		// 1000 calls of 20 us, 20 of 80x us: the tail is 4x the median.
		return newRec(t, 2, 3, swEvents...).function(map[int]fb{
			14: {calls: 1000, lat: 20e3},
			16: {calls: 20, lat: 4 * x * 20e3, sums: map[string]float64{profile.FuncMinFlt: 1024}},
		}).done()
	}},
	{"function-tail", "calls", func(t *testing.T, x float64) *profile.Recording {
		n := u(100 * x)
		return newRec(t, 2, 3, swEvents...).function(map[int]fb{
			14: {calls: n - 2, lat: 20e3},
			20: {calls: 2, lat: 1.5e6, sums: map[string]float64{profile.FuncMinFlt: 1024}},
		}).done()
	}},
}

// TestSaturationOrNeighbour: queueing behind the target's own working
// threads is cpu-saturation; queueing behind other processes while the
// target's threads fit its CPUs is noisy-neighbour, naming who.
func TestSaturationOrNeighbour(t *testing.T) {
	// Waits of 100 ms (bucket 26) in the run queue: n per CPU. A thread
	// runs or waits at most the whole window, so the waits fit the
	// threads: 3 threads run 1.8 s and wait 1 s; 1 thread runs 0.6 s and
	// waits 0.3 s.
	build := func(working int, onCPU, idle, n uint64) *profile.Recording {
		return newRec(t, 2, 4, swEvents...).software().
			threads(working, map[string]uint64{metric.CPUClock: 2 * onCPU / uint64(working)}).
			counter(metric.CPUClock, []uint64{onCPU, onCPU}).
			idle([]uint64{idle, idle}).
			others(300, "stress-ng", 90).others(301, "sshd", 2).
			hist(profile.HistRunqLatency, 0, 10, 98).
			hist(profile.HistRunqLatency, 0, 26, (n+1)/2).
			hist(profile.HistRunqLatency, 1, 10, 98).
			hist(profile.HistRunqLatency, 1, 26, n/2).done()
	}
	// Three working threads on two CPUs, nobody else.
	res := analyzeRec(build(3, 9e8, 1e8, 10))
	if _, ok := findRule(res, "cpu-saturation"); !ok {
		t.Errorf("3 working threads on 2 CPUs: no cpu-saturation: %s", dump(res))
	}
	if f, ok := findRule(res, "noisy-neighbour"); ok {
		t.Errorf("3 working threads on 2 CPUs and no other load: noisy-neighbour %s", dump(f))
	}
	// One working thread; other processes run 50% of the CPUs.
	res = analyzeRec(build(1, 3e8, 2e8, 3))
	if f, ok := findRule(res, "cpu-saturation"); ok {
		t.Errorf("1 working thread on 2 CPUs: cpu-saturation %s", dump(f))
	}
	f, ok := findRule(res, "noisy-neighbour")
	if !ok {
		t.Fatalf("other load took half the CPUs: no noisy-neighbour: %s", dump(res))
	}
	if !strings.Contains(f.Advice, "stress-ng (pid 300)") || strings.Contains(f.Advice, "sshd") {
		t.Errorf("advice %q: want stress-ng named and sshd (2%% of the samples) not", f.Advice)
	}
	if len(f.Scope.PIDs) != 1 || f.Scope.PIDs[0] != 300 {
		t.Errorf("scope pids %v, want the neighbour's [300]", f.Scope.PIDs)
	}
}

// TestSleepAndIdleNeverBlock: a working thread's purposeful sleeps and an
// idle runtime thread's waits, however long, are not lock contention or
// I/O wait; an idle thread's futex wait is not a working thread's either.
func TestSleepAndIdleNeverBlock(t *testing.T) {
	rec := newRec(t, 2, 4, swEvents...).software().
		threads(1, map[string]uint64{metric.CPUClock: 5e8}).
		counter(metric.CPUClock, []uint64{5e8, 0}).
		offcpu(100, profile.OffCPUSleep, 5e8, "time.Sleep").
		offcpu(100, profile.OffCPUIdle, 5e8, "runtime.stopm").
		offcpu(999, profile.OffCPULock, 9e8, "runtime.semacquire1").done()
	res := analyzeRec(rec)
	for _, id := range []string{"lock-contention", "io-wait"} {
		if f, ok := findRule(res, id); ok {
			t.Errorf("%s fired on sleeps and idle threads: %s", id, dump(f))
		}
	}
}

// TestLockNamesFunctions: lock-contention names the functions of the lock
// stacks with their share of the wait, and leaves out those under 5%.
func TestLockNamesFunctions(t *testing.T) {
	rec := newRec(t, 2, 4, swEvents...).software().
		threads(2, map[string]uint64{metric.CPUClock: 5e8}).
		counter(metric.CPUClock, []uint64{5e8, 5e8}).
		offcpu(100, profile.OffCPULock, 3e8, "sync.(*RWMutex).RLock").
		offcpu(101, profile.OffCPULock, 1e8, "sync.(*Mutex).Lock").
		offcpu(101, profile.OffCPULock, 1e7, "pthread_mutex_lock").done()
	f, ok := findRule(analyzeRec(rec), "lock-contention")
	if !ok {
		t.Fatal("lock-contention did not fire")
	}
	want := []string{"sync.(*RWMutex).RLock", "sync.(*Mutex).Lock"}
	if strings.Join(f.Scope.Functions, ",") != strings.Join(want, ",") {
		t.Errorf("functions %v, want %v (pthread_mutex_lock is 2.4%%)", f.Scope.Functions, want)
	}
	if len(f.Shares) != 2 || math.Abs(f.Shares[0].Share-3.0/4.1) > 0.01 || f.Shares[0].Source != "offcpu" {
		t.Errorf("shares %s, want RLock at 73%% of the off-CPU wait", dump(f.Shares))
	}
}

// TestFunctionsFromTheEvent: a page-fault finding names the functions of
// the page-fault samples, not the busiest cpu-clock functions.
func TestFunctionsFromTheEvent(t *testing.T) {
	b := newRec(t, 2, 4, swEvents...).software().
		counter(metric.PageFaults, []uint64{0, 90000}).
		samples(1, 300, "main.compute")
	id := b.stack(profile.Stack{Frames: []profile.Frame{{Function: "main.alloc", Module: "/bin/target"}}})
	for i := range b.rec.Windows {
		b.rec.Windows[i].Samples = append(b.rec.Windows[i].Samples, profile.Sample{Event: metric.PageFaults, PID: 100, TID: 100, CPU: 1, UserStack: id, Count: 90})
	}
	f, ok := findRule(analyzeRec(b.done()), "page-fault-storm")
	if !ok {
		t.Fatal("page-fault-storm did not fire")
	}
	if len(f.Scope.Functions) != 1 || f.Scope.Functions[0] != "main.alloc" || f.Shares[0].Source != metric.PageFaults {
		t.Errorf("functions %v (%s), want main.alloc from the page-faults samples", f.Scope.Functions, dump(f.Shares))
	}
}

// TestWarmupIsNotAStorm: a command's first window of allocation faults is
// setup; the same faults in every window are a storm.
func TestWarmupIsNotAStorm(t *testing.T) {
	build := func(windows ...int) *profile.Recording {
		b := newRec(t, 2, 4, swEvents...).software().counter(metric.PageFaults, []uint64{0, 10}).
			counter(metric.PageFaults, []uint64{0, 90000}, windows...)
		b.rec.Header.Target = profile.Target{Kind: profile.TargetCommand, PIDs: []int{100}, Command: []string{"/bin/target"}}
		return b.done()
	}
	if f, ok := findRule(analyzeRec(build(0)), "page-fault-storm"); ok {
		t.Errorf("faults in the first window only: %s", dump(f))
	}
	if _, ok := findRule(analyzeRec(build(0, 1, 2, 3)), "page-fault-storm"); !ok {
		t.Error("faults in every window: no page-fault-storm")
	}
}

func TestRuleThresholds(t *testing.T) {
	for _, c := range ruleCases {
		t.Run(c.rule+"/"+string(c.metric), func(t *testing.T) {
			r := ruleByID(t, c.rule)
			r.T(c.metric) // the case names a real threshold
			above := analyzeRec(c.build(t, 1.05))
			f, ok := findRule(above, c.rule)
			if !ok {
				t.Fatalf("rule did not fire just above its %q threshold; result: %s", c.metric, dump(above))
			}
			checkFinding(t, f)
			below := analyzeRec(c.build(t, 0.95))
			if f, ok := findRule(below, c.rule); ok {
				t.Fatalf("rule fired just below its %q threshold: %s", c.metric, dump(f))
			}
			for _, ne := range below.NotEvaluated {
				if ne.Rule == c.rule {
					t.Fatalf("rule not evaluated on a recording built for it: %s", dump(ne))
				}
			}
		})
	}
}

// TestEveryRuleHasACase keeps the table and the tests together: a new
// rule needs a recording that makes it fire.
func TestEveryRuleHasACase(t *testing.T) {
	has := map[string]bool{}
	for _, c := range ruleCases {
		has[c.rule] = true
	}
	ids := map[string]bool{}
	for _, r := range Rules() {
		if ids[r.ID] {
			t.Errorf("rule id %s listed twice", r.ID)
		}
		ids[r.ID] = true
		if !has[r.ID] {
			t.Errorf("rule %s has no test case", r.ID)
		}
		if r.Title == "" || r.Formula == "" || r.Source == "" || r.Advice == "" || len(r.Needs) == 0 || len(r.Thresholds) == 0 || r.Confidence <= 0 || r.Confidence > 1 {
			t.Errorf("rule %s lacks a title, formula, source, advice, needs, thresholds or confidence", r.ID)
		}
		for _, th := range r.Thresholds {
			if th.Why == "" {
				t.Errorf("rule %s threshold %q does not say why", r.ID, th.Metric)
			}
		}
	}
	// Issue 6 fixes these ids; scripts and CI depend on them.
	for _, id := range []string{"l1-bandwidth-contention", "l3-writeback-congestion", "llc-thrashing", "remote-numa",
		"dtlb-pressure", "false-sharing", "core-hotspot", "cpu-saturation", "noisy-neighbour", "lock-contention",
		"io-wait", "page-fault-storm", "migration-churn", "latency-tail", "function-tail"} {
		if !ids[id] {
			t.Errorf("rule %s is missing from the table", id)
		}
	}
}

// TestAdviceNamesCountableEvents: a rule advises adding an event only
// when the recording host said it can count it (Header.HostEvents); an
// event the host cannot count gets the host's reason instead.
func TestAdviceNamesCountableEvents(t *testing.T) {
	for _, c := range []struct {
		name   string
		host   profile.EventStatus
		want   string
		refuse string
	}{
		{"countable", profile.EventStatus{Name: metric.LLCStores, Kind: "cache", Status: profile.StatusMeasured}, "LLC-stores: not recorded (add -e LLC-stores)", ""},
		{"no such event", profile.EventStatus{Name: metric.LLCStores, Kind: "cache", Status: profile.StatusUnsupported, Reason: "this CPU has no such event", Errno: "ENOENT"}, "LLC-stores: unsupported on this host: this CPU has no such event", "add -e LLC-stores"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := newRec(t, 2, 3, swEvents...).done()
			var evs []profile.EventStatus
			for _, e := range rec.Header.Events {
				if e.Name != metric.LLCStores {
					evs = append(evs, e)
				}
			}
			rec.Header.Events = evs
			rec.Header.HostEvents = []profile.EventStatus{c.host}
			res := analyzeRec(rec)
			for _, ne := range res.NotEvaluated {
				if ne.Rule != "l3-writeback-congestion" {
					continue
				}
				if !strings.Contains(ne.Reason, c.want) || (c.refuse != "" && strings.Contains(ne.Reason, c.refuse)) {
					t.Errorf("reason %q, want %q", ne.Reason, c.want)
				}
				return
			}
			t.Errorf("l3-writeback-congestion evaluated: %s", dump(res))
		})
	}
}

// TestSoftwareModeNotEvaluated: on a host without a PMU every rule that
// needs a hardware event is listed with the kernel's reason, and an event
// that was not requested says how to request it.
func TestSoftwareModeNotEvaluated(t *testing.T) {
	rec := newRec(t, 2, 3, swEvents...).software().done()
	// Drop LLC-stores from the request list to see "not recorded".
	var evs []profile.EventStatus
	for _, e := range rec.Header.Events {
		if e.Name != metric.LLCStores {
			evs = append(evs, e)
		}
	}
	rec.Header.Events = evs
	res := analyzeRec(rec)
	got := map[string]NotEvaluated{}
	for _, ne := range res.NotEvaluated {
		got[ne.Rule] = ne
	}
	for _, id := range []string{"l1-bandwidth-contention", "l3-writeback-congestion", "llc-thrashing", "remote-numa", "dtlb-pressure", "false-sharing"} {
		ne, ok := got[id]
		if !ok {
			t.Errorf("%s: not listed as not evaluated: %s", id, dump(res))
			continue
		}
		if !strings.Contains(ne.Reason, "unsupported on this host: no hardware PMU (perf_event_open: ENOENT)") {
			t.Errorf("%s: reason %q does not carry the host's reason", id, ne.Reason)
		}
		if len(ne.Needs) == 0 || ne.Title == "" {
			t.Errorf("%s: not-evaluated entry lacks needs or title: %s", id, dump(ne))
		}
	}
	// LLC-stores was not asked for, and this host can count no hardware
	// event: the reason is the host's, never "add -e LLC-stores".
	if ne := got["l3-writeback-congestion"]; strings.Contains(ne.Reason, "add -e") {
		t.Errorf("l3-writeback-congestion: reason %q advises an event this host cannot count", ne.Reason)
	}
	// No histograms were recorded: the histogram rules say so.
	for _, id := range []string{"cpu-saturation", "noisy-neighbour", "latency-tail", "lock-contention", "io-wait"} {
		if ne, ok := got[id]; !ok || !strings.Contains(ne.Reason, "not ") {
			t.Errorf("%s: want not evaluated (histogram not recorded), got %s", id, dump(ne))
		}
	}
	// The software rules were evaluated and found nothing on an empty
	// recording.
	for _, id := range []string{"core-hotspot", "page-fault-storm", "migration-churn"} {
		if _, ok := got[id]; ok {
			t.Errorf("%s: not evaluated although its inputs were measured", id)
		}
	}
	if len(res.Findings) != 0 {
		t.Errorf("empty recording gave findings: %s", dump(res.Findings))
	}
}

// TestIdleSleep: a recording shaped like 'sleep 5' (one thread, one
// wakeup, a few startup faults, the samples of its start) finds nothing.
func TestIdleSleep(t *testing.T) {
	rec := newRec(t, 2, 5, swEvents...).software().
		threads(1, map[string]uint64{metric.ContextSwitches: 1}).
		counter(metric.CPUClock, []uint64{0, 900000}, 0).
		counter(metric.PageFaults, []uint64{0, 120}, 0).
		counter(metric.ContextSwitches, []uint64{0, 1}).
		samples(1, 1, "_dl_start", 0).
		hist(profile.HistRunqLatency, 1, 13, 1).
		hist(profile.HistOffCPU, 1, 29, 1).done()
	res := analyzeRec(rec)
	if len(res.Findings) != 0 {
		t.Fatalf("idle recording gave findings: %s", dump(res.Findings))
	}
}

// TestFindingScope: a finding points at the heatmap region and the time
// range it is about.
func TestFindingScope(t *testing.T) {
	rec := newRec(t, 2, 4, swEvents...).software().
		threads(1, nil).
		counter(metric.PageFaults, []uint64{0, 10}, 0, 1).
		counter(metric.PageFaults, []uint64{0, 90000}, 2, 3).
		samples(1, 50, "main.touch", 2, 3).done()
	for i := range rec.Windows {
		for j := range rec.Windows[i].Samples {
			rec.Windows[i].Samples[j].Event = metric.PageFaults // the faults' own samples
		}
	}
	res := analyzeRec(rec)
	f, ok := findRule(res, "page-fault-storm")
	if !ok {
		t.Fatalf("page-fault-storm did not fire: %s", dump(res))
	}
	if f.Scope.StartNS != 2*second || f.Scope.EndNS != 4*second {
		t.Errorf("time range = [%d, %d], want the two faulting windows [2s, 4s]", f.Scope.StartNS, f.Scope.EndNS)
	}
	if len(f.Scope.CPUs) != 1 || f.Scope.CPUs[0] != 1 || len(f.Scope.Nodes) != 1 || f.Scope.Nodes[0] != 0 {
		t.Errorf("cpus %v nodes %v, want cpu 1 on node 0", f.Scope.CPUs, f.Scope.Nodes)
	}
	if len(f.Scope.PIDs) != 1 || f.Scope.PIDs[0] != 100 {
		t.Errorf("pids %v, want [100]", f.Scope.PIDs)
	}
	if len(f.Scope.Functions) == 0 || f.Scope.Functions[0] != "main.touch" {
		t.Errorf("functions %v, want main.touch first", f.Scope.Functions)
	}
	if f.Severity != SeverityHigh {
		t.Errorf("severity %s at 4.5x the threshold, want high", f.Severity)
	}
}

// TestApproximationSaid: a rule built on an approximation says so in its
// findings.
func TestApproximationSaid(t *testing.T) {
	c := ruleCases[0]
	f, ok := findRule(analyzeRec(c.build(t, 1.2)), c.rule)
	if !ok || !strings.Contains(f.Approximation, "LLC-stores / LLC-loads") {
		t.Fatalf("finding does not state its approximation: %s", dump(f))
	}
	if f.Confidence != 0.6 {
		t.Errorf("confidence %v: want the approximated rule's base 0.6", f.Confidence)
	}
}

// TestMultiplexedLowersConfidence: a counter that ran half the time it was
// enabled halves the finding's confidence.
func TestMultiplexedLowersConfidence(t *testing.T) {
	c := ruleCases[3] // llc-thrashing
	rec := c.build(t, 1.5)
	base, _ := findRule(analyzeRec(rec), c.rule)
	for i := range rec.Windows {
		for j := range rec.Windows[i].Counters {
			rec.Windows[i].Counters[j].Enabled, rec.Windows[i].Counters[j].Running = 2e9, 1e9
		}
	}
	f, ok := findRule(analyzeRec(rec), c.rule)
	if !ok || math.Abs(f.Confidence-base.Confidence/2) > 0.011 {
		t.Fatalf("confidence %v with counters running half the time, want half of %v", f.Confidence, base.Confidence)
	}
}

func TestResultJSONShape(t *testing.T) {
	res := analyzeRec(newRec(t, 2, 3, swEvents...).software().counter(metric.PageFaults, []uint64{50000, 0}).done())
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Findings     []map[string]any `json:"findings"`
		NotEvaluated []map[string]any `json:"not_evaluated"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("result is not {findings: [...], not_evaluated: [...]}: %v", err)
	}
	f := doc.Findings[0]
	for _, k := range []string{"rule", "title", "severity", "confidence", "scope", "evidence", "advice"} {
		if _, ok := f[k]; !ok {
			t.Errorf("finding lacks %q: %s", k, b)
		}
	}
	scope := f["scope"].(map[string]any)
	for _, k := range []string{"cpus", "nodes", "pids", "functions", "start_ns", "end_ns"} {
		if _, ok := scope[k]; !ok {
			t.Errorf("scope lacks %q", k)
		}
	}
	ev := f["evidence"].([]any)[0].(map[string]any)
	for _, k := range []string{"metric", "value", "threshold", "op", "unit"} {
		if _, ok := ev[k]; !ok {
			t.Errorf("evidence lacks %q", k)
		}
	}
	ne := doc.NotEvaluated[0]
	for _, k := range []string{"rule", "title", "needs", "reason"} {
		if _, ok := ne[k]; !ok {
			t.Errorf("not_evaluated lacks %q", k)
		}
	}
	// An empty result still has both arrays, never null.
	b, _ = json.Marshal(analyzeRec(newRec(t, 2, 1, hwEvents...).done()))
	if !strings.Contains(string(b), `"findings":[]`) {
		t.Errorf("empty findings not an empty array: %s", b)
	}
}

func ruleByID(t *testing.T, id string) *Rule {
	t.Helper()
	for _, r := range Rules() {
		if r.ID == id {
			return &r
		}
	}
	t.Fatalf("no rule %s", id)
	return nil
}

func findRule(res Result, id string) (Finding, bool) {
	for _, f := range res.Findings {
		if f.Rule == id {
			return f, true
		}
	}
	return Finding{}, false
}

// checkFinding checks what every finding must carry.
func checkFinding(t *testing.T, f Finding) {
	t.Helper()
	if f.Title == "" || f.Advice == "" || len(f.Evidence) == 0 || f.Confidence <= 0 || f.Confidence > 1 {
		t.Errorf("incomplete finding: %s", dump(f))
	}
	if _, ok := severityRank[f.Severity]; !ok {
		t.Errorf("severity %q", f.Severity)
	}
	if f.Scope.EndNS <= f.Scope.StartNS {
		t.Errorf("empty time range in %s", dump(f.Scope))
	}
	for _, e := range f.Evidence {
		if e.Metric == "" || e.Op == "" || math.IsNaN(e.Value) {
			t.Errorf("bad evidence %s", dump(e))
		}
	}
}

func dump(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// TestThresholdsUseTheCatalogue: a threshold on a catalogue metric has
// the catalogue's unit, and no threshold uses a name the catalogue
// gives another metric.
func TestThresholdsUseTheCatalogue(t *testing.T) {
	for _, r := range Rules() {
		for _, th := range r.Thresholds {
			if d, ok := metric.Lookup(th.Metric); ok && d.Unit != th.Unit {
				t.Errorf("rule %s: %s in %q, the catalogue says %q", r.ID, th.Metric, th.Unit, d.Unit)
			}
		}
	}
	r := ruleByID(t, RuleL3Writeback)
	if lo, hi := r.bound(metric.LLCLoadMissRatio, ">="), r.bound(metric.LLCLoadMissRatio, "<="); lo.Value != 0.40 || hi.Value != 0.60 {
		t.Errorf("LLC-load-miss-ratio bounds %v..%v, want 0.40..0.60", lo.Value, hi.Value)
	}
}

// TestWaitsByWhatTheKernelSaw: waits on a pipe peer are peer-wait (a
// dependency, severity info), never io-wait; disk I/O in the first
// windows only is startup-io with its window range, never io-wait; the
// same I/O all along is io-wait.
func TestWaitsByWhatTheKernelSaw(t *testing.T) {
	pipe := newRec(t, 2, 4, swEvents...).software().
		threads(1, map[string]uint64{metric.CPUClock: 1e8}).
		counter(metric.CPUClock, []uint64{1e8, 0}).
		wait(profile.OffCPUIPC, "read", "pipe", 9e8).
		peer(profile.Peer{PID: 100, WakerPID: 200, WakerComm: "pingpong", Reason: profile.OffCPUIPC, Call: "read", NS: 9e8, Count: 30000}).done()
	res := analyzeRec(pipe)
	if f, ok := findRule(res, "io-wait"); ok {
		t.Errorf("pipe waits: io-wait %s", dump(f))
	}
	f, ok := findRule(res, "peer-wait")
	if !ok {
		t.Fatalf("pipe waits: no peer-wait: %s", dump(res))
	}
	if f.Severity != SeverityInfo || !strings.Contains(f.Advice, "pingpong (pid 200) woke it from read") || len(f.Scope.PIDs) != 1 || f.Scope.PIDs[0] != 200 {
		t.Errorf("peer-wait %s: want severity info naming pingpong (pid 200)", dump(f))
	}

	build := func(windows ...int) *profile.Recording {
		return newRec(t, 2, 8, swEvents...).software().
			threads(1, map[string]uint64{metric.CPUClock: 1e8}).
			counter(metric.CPUClock, []uint64{1e8, 0}).
			wait(profile.OffCPUDiskIO, "read", "file", 4e8, windows...).done()
	}
	res = analyzeRec(build(0, 1))
	if f, ok := findRule(res, "io-wait"); ok {
		t.Errorf("I/O in windows 0-1 of 8: io-wait %s", dump(f))
	}
	f, ok = findRule(res, "startup-io")
	if !ok {
		t.Fatalf("I/O in windows 0-1 of 8: no startup-io: %s", dump(res))
	}
	if f.Severity != SeverityInfo || f.Scope.StartNS != 0 || f.Scope.EndNS != 2*second || !strings.Contains(f.Advice, "first 2 of 8 windows") {
		t.Errorf("startup-io %s: want info, windows 0-1 (0-2 s)", dump(f))
	}
	res = analyzeRec(build())
	if f, ok := findRule(res, "startup-io"); ok {
		t.Errorf("I/O in every window: startup-io %s", dump(f))
	}
	if _, ok := findRule(res, "io-wait"); !ok {
		t.Errorf("I/O in every window: no io-wait: %s", dump(res))
	}
}

// TestOneThreadIsNoHotspot: one busy thread on one core is no hotspot,
// pinned or not; two threads pinned to one core, with another idle, are.
func TestOneThreadIsNoHotspot(t *testing.T) {
	build := func(threads int) *profile.Recording {
		return newRec(t, 2, 4, swEvents...).software().
			threads(threads, map[string]uint64{metric.CPUClock: 1e9 / uint64(threads)}).
			samples(1, 100, "main.spin").
			counter(metric.CPUClock, []uint64{0, 1e9}).done()
	}
	if f, ok := findRule(analyzeRec(build(1)), "core-hotspot"); ok {
		t.Errorf("one thread: core-hotspot %s", dump(f))
	}
	if _, ok := findRule(analyzeRec(build(2)), "core-hotspot"); !ok {
		t.Error("two threads on one core, the other idle: no core-hotspot")
	}
}

// TestTailStandsOutOfTheSpread: windows whose p99s wander over eight
// buckets make no window a tail for being 4x the median: the run's own
// spread is that wide. The same two windows over a steady run are one.
func TestTailStandsOutOfTheSpread(t *testing.T) {
	build := func(wander bool) *profile.Recording {
		b := newRec(t, 2, 10, swEvents...).software().
			hist(profile.HistRunqLatency, 0, 10, 98).
			counter(metric.PageFaults, []uint64{1000, 0})
		for i := range 10 {
			switch {
			case i == 4 || i == 8:
				b.hist(profile.HistRunqLatency, 0, 21, 2, i).counter(metric.PageFaults, []uint64{5000, 0}, i)
			case wander:
				b.hist(profile.HistRunqLatency, 0, 12+i, 2, i)
			default:
				b.hist(profile.HistRunqLatency, 0, 12, 2, i)
			}
		}
		return b.done()
	}
	if f, ok := findRule(analyzeRec(build(true)), "latency-tail"); ok {
		t.Errorf("p99s wander over 8 buckets: latency-tail %s", dump(f))
	}
	if _, ok := findRule(analyzeRec(build(false)), "latency-tail"); !ok {
		t.Error("steady run with two spikes: no latency-tail")
	}
}
