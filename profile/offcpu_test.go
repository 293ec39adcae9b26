package profile

import (
	"math"
	"testing"
)

func frames(names ...string) []Frame {
	out := make([]Frame, len(names))
	for i, n := range names {
		out[i] = Frame{Function: n}
	}
	return out
}

// TestClassifyOffCPU: real stacks from recordings of the O3 workloads and
// the Go runtime, each with the reason and the function to blame: as
// recordings without wait codes read them (kernel reason ""), and with the
// kernel's reason, which decides alone for disk, network, peers, faults
// and the run queue, and which user frames refine otherwise.
func TestClassifyOffCPU(t *testing.T) {
	futexK := frames("__schedule", "schedule", "futex_do_wait", "__futex_wait", "futex_wait", "do_futex", "__x64_sys_futex", "do_syscall_64")
	for _, c := range []struct {
		name         string
		wait         string
		user, kernel []Frame
		reason       string
		blamed       string
	}{
		{"rcu reader on a locked thread", "", frames("runtime.futex", "runtime.notesleep", "runtime.stoplockedm", "runtime.schedule", "runtime.park_m", "runtime.mcall", "runtime.gopark", "runtime.semacquire1", "sync.runtime_SemacquireRWMutexR", "main.read", "runtime.goexit"), futexK, OffCPULock, "sync.runtime_SemacquireRWMutexR"},
		{"rcu writer", "", frames("runtime.futex", "runtime.park_m", "runtime.mcall", "runtime.gopark", "runtime.semacquire1", "sync.runtime_SemacquireRWMutex", "sync.(*RWMutex).Lock", "main.write"), futexK, OffCPULock, "sync.(*RWMutex).Lock"},
		{"locked goroutine in time.Sleep", "", frames("runtime.futex", "runtime.notesleep", "runtime.stoplockedm", "runtime.park_m", "runtime.mcall", "runtime.gopark", "time.Sleep", "main.write"), futexK, OffCPUSleep, "time.Sleep"},
		{"idle M", "", frames("runtime.futex", "runtime.notesleep", "runtime.stopm", "runtime.findRunnable", "runtime.schedule"), futexK, OffCPUIdle, "runtime.findRunnable"},
		{"sysmon", "", frames("runtime.usleep", "runtime.sysmon", "runtime.mstart1"), frames("schedule", "do_nanosleep", "hrtimer_nanosleep"), OffCPUIdle, "runtime.sysmon"},
		{"signal receiver", "", frames("runtime.futex", "runtime.notetsleep_internal", "runtime.notetsleepg", "os/signal.signal_recv", "os/signal.loop"), futexK, OffCPUIdle, "os/signal.signal_recv"},
		{"GC stop-the-world", "", frames("runtime.futex", "runtime.notetsleep", "runtime.stopTheWorldWithSema", "runtime.gcStart", "runtime.mallocgc", "main.alloc"), futexK, OffCPUOther, "runtime.gcStart"},
		{"pthread mutex", "", frames("__lll_lock_wait", "pthread_mutex_lock", "worker"), futexK, OffCPULock, "pthread_mutex_lock"},
		{"bare futex", "", frames("syscall", "my_lock", "worker"), futexK, OffCPULock, "syscall"},
		{"Go runtime futex, stack cut short", "", frames("runtime.futex"), futexK, OffCPUOther, "runtime.futex"},
		{"Go runtime note", "", frames("runtime.futex", "runtime.notetsleep_internal", "internal/runtime/x.f"), futexK, OffCPUOther, "runtime.futex"},
		{"fault", "", frames("memcpy"), frames("schedule", "io_schedule", "folio_wait_bit", "filemap_fault", "handle_mm_fault", "exc_page_fault"), OffCPUPageFault, "memcpy"},
		{"read from a pipe", "", frames("read", "main"), frames("schedule", "pipe_read", "vfs_read", "ksys_read"), OffCPUIPC, "read"},
		{"read from a TCP socket", "", frames("recv", "main"), frames("schedule", "schedule_timeout", "sk_wait_data", "tcp_recvmsg_locked", "tcp_recvmsg"), OffCPUNetwork, "recv"},
		{"epoll loop", "", frames("epoll_wait", "loop"), frames("schedule", "schedule_hrtimeout_range", "ep_poll", "do_epoll_wait"), OffCPUPoll, "epoll_wait"},
		{"nanosleep", "", frames("clock_nanosleep", "main"), frames("schedule", "do_nanosleep"), OffCPUSleep, "clock_nanosleep"},
		{"waitpid", "", frames("wait4", "main"), frames("schedule", "do_wait", "kernel_wait4"), OffCPUIdle, "wait4"},
		{"disk read", "", frames("read", "main"), frames("schedule", "io_schedule", "folio_wait_bit_common", "filemap_read"), OffCPUDiskIO, "read"},

		// With the kernel's reason.
		{"pipe, kernel says ipc", OffCPUIPC, frames("read", "main"), nil, OffCPUIPC, "read"},
		{"pipe from Go, idle frames below", OffCPUIPC, frames("syscall.read", "os.(*File).Read", "main.loop"), nil, OffCPUIPC, "syscall.read"},
		{"direct disk I/O", OffCPUDiskIO, frames("pread64", "main"), nil, OffCPUDiskIO, "pread64"},
		{"socket", OffCPUNetwork, frames("recv", "main"), nil, OffCPUNetwork, "recv"},
		{"fault, no stacks", OffCPUPageFault, nil, nil, OffCPUPageFault, "[unknown]"},
		{"futex of a condition variable: a pool thread waiting for work", OffCPULock, frames("futex_wait", "__pthread_cond_wait_common", "pthread_cond_wait", "pool_worker"), futexK, OffCPUIdle, "pthread_cond_wait"},
		{"futex of a mutex", OffCPULock, frames("__lll_lock_wait", "pthread_mutex_lock", "worker"), futexK, OffCPULock, "pthread_mutex_lock"},
		{"pthread_join", OffCPULock, frames("__futex_abstimed_wait_common", "__pthread_clockjoin_ex", "main"), futexK, OffCPUIdle, "__pthread_clockjoin_ex"},
		{"WaitGroup", OffCPULock, frames("runtime.gopark", "runtime.semacquire1", "sync.runtime_SemacquireWaitGroup", "sync.(*WaitGroup).Wait", "main.main"), futexK, OffCPUIdle, "sync.(*WaitGroup).Wait"},
		{"bare futex, kernel says lock", OffCPULock, frames("syscall", "my_lock", "worker"), futexK, OffCPULock, "syscall"},
		{"Go runtime futex, kernel says lock", OffCPULock, frames("runtime.futex", "runtime.notetsleep_internal"), futexK, OffCPUOther, "runtime.futex"},
		{"sysmon, kernel says sleep", OffCPUSleep, frames("runtime.usleep", "runtime.sysmon"), nil, OffCPUIdle, "runtime.sysmon"},
		{"epoll, kernel says poll", OffCPUPoll, frames("epoll_wait", "loop"), nil, OffCPUPoll, "epoll_wait"},
		{"the kernel's lock, no stacks", OffCPULock, nil, nil, OffCPULock, "[unknown]"},
		{"preempted", OffCPURunq, frames("main.spin"), nil, OffCPURunq, "main.spin"},
	} {
		reason, blamed := ExplainOffCPU(c.wait, c.user, c.kernel)
		if reason != c.reason || blamed != c.blamed {
			t.Errorf("%s: %s in %s, want %s in %s", c.name, reason, blamed, c.reason, c.blamed)
		}
	}
}

// TestOffCPUScaleOverTheRecording: a window whose few sampled switch-outs
// are short while unsampled ones blocked long must not blow its stacks up
// by its own ratio (1e6 here); the recording's ratio scales every stack,
// and the scaled stacks add up to all the blocked time.
func TestOffCPUScaleOverTheRecording(t *testing.T) {
	r := &Recording{
		Stacks: map[uint64]Stack{
			1: {ID: 1, Frames: frames("sync.runtime_SemacquireRWMutexR", "main.read")},
			2: {ID: 2, Frames: frames("runtime.futex", "runtime.notesleep", "runtime.stopm")},
		},
		Windows: []Window{
			{OffCPU: &OffCPU{BlockedNS: 1e9, SampledNS: 1e9, Stacks: []OffCPUStack{{PID: 1, TID: 1, UserStack: 1, NS: 1e9, Reason: OffCPULock}}}},
			{OffCPU: &OffCPU{BlockedNS: 1e9, SampledNS: 1e3, Stacks: []OffCPUStack{{PID: 1, TID: 2, UserStack: 2, NS: 1e3, Reason: OffCPUIdle}}}},
		},
	}
	scale := r.OffCPUScale()
	if want := 2e9 / (1e9 + 1e3); scale != want {
		t.Fatalf("scale %v, want %v (blocked over sampled, summed over windows)", scale, want)
	}
	var lock, idle float64
	for _, s := range r.OffCPUStacks() {
		switch s.Reason {
		case OffCPULock:
			lock += s.NS
		case OffCPUIdle:
			idle += s.NS
		}
	}
	if lock < 1.9e9 || idle > 1e4 {
		t.Errorf("lock %.3g ns, idle %.3g ns: want the lock wait to carry the time (per-window scaling would make idle 1e9)", lock, idle)
	}
	if total := lock + idle; total < 1.999e9 || total > 2.001e9 {
		t.Errorf("scaled stacks add up to %.4g ns, want all blocked time, 2e9", total)
	}
}

// TestOffCPUScalerLengths: a futex wait of a thousand 1.5 ms waits (lock)
// and one 4 s wait (an idle thread), the one long wait sampled at a small
// chance so that its weighted time is 128 s. Stratified by length, the
// lock stacks get the short waits' time and the long stack the long
// wait's; by wait alone (a recording before lengths), the long stack took
// nearly all of it.
func TestOffCPUScalerLengths(t *testing.T) {
	hist := make([]uint64, 33)
	hist[20], hist[31] = 1000, 1 // 2^20 ns ~ 1 ms, 2^31 ns ~ 2 s
	exact := uint64(1000*1.5e6 + 4e9)
	w := Window{
		Waits: []Wait{{Reason: OffCPULock, Call: "futex", NS: exact, Count: 1001, Hist: hist}},
		OffCPU: &OffCPU{Stacks: []OffCPUStack{
			{TID: 1, NS: 1.4e9, Reason: OffCPULock, Wait: OffCPULock, WaitCall: "futex", LengthBucket: 21},
			{TID: 2, NS: 128e9, Reason: OffCPUIdle, Wait: OffCPULock, WaitCall: "futex", LengthBucket: 32},
		}},
	}
	time := func(w Window) (lock, idle float64) {
		var s OffCPUScaler
		s.Add(&w)
		for _, st := range w.OffCPU.Stacks {
			v := float64(st.NS) * s.Scale(st.Key())
			if st.Reason == OffCPULock {
				lock += v
			} else {
				idle += v
			}
		}
		return lock, idle
	}
	lock, idle := time(w)
	// The strata's shares come from the buckets' middles: 1000 x 1.5 x
	// 2^20 against 1.5 x 2^31, of the exact 5.5 s.
	wantLock := float64(exact) * 1000 * 1.5 * (1 << 20) / (1000*1.5*(1<<20) + 1.5*(1<<31))
	if math.Abs(lock-wantLock) > 1e6 || math.Abs(lock+idle-float64(exact)) > 1e6 {
		t.Errorf("by length: lock %.3f s, idle %.3f s; want lock %.3f s of %.3f s", lock/1e9, idle/1e9, wantLock/1e9, float64(exact)/1e9)
	}
	for i := range w.OffCPU.Stacks {
		w.OffCPU.Stacks[i].LengthBucket = 0
	}
	if lock, _ := time(w); lock > 0.1e9 {
		t.Errorf("without lengths: lock %.3f s; the heavy long stack should have taken nearly all (this is what lengths fix)", lock/1e9)
	}
}
