package profile

import (
	"sort"
	"strings"
)

// Off-CPU reasons: why a thread was off the CPU. The recorder names them
// from what the kernel knew at the switch-out (its wait code: the system
// call it blocked in and what its file descriptor is, in_iowait, its
// state; collector/wait.go), then refines lock, poll, sleep and other by
// the thread's user frames where its stacks were taken (a futex wait of a
// pthread condition variable is an idle pool thread, not a lock).
const (
	OffCPUDiskIO    = "disk-io"    // block I/O: in_iowait (io_schedule), file reads and syncs
	OffCPUNetwork   = "network"    // an IPv4/IPv6 socket: waiting for the network or a peer over it
	OffCPUIPC       = "ipc"        // another process: a pipe, a Unix socket, System V IPC
	OffCPULock      = "lock"       // futex, flock/fcntl locks; mutexes, semaphores, Go's sync
	OffCPUSleep     = "sleep"      // sleeping on purpose: nanosleep, time.Sleep, a futex wait that timed out
	OffCPUPoll      = "poll"       // waiting for events by choice: poll, select, epoll, a terminal
	OffCPUPageFault = "page-fault" // blocked inside a page fault
	OffCPURunq      = "runq"       // preempted: runnable, waiting for a CPU
	OffCPUIdle      = "idle"       // an idle runtime or pool thread, or kernel worker, waiting for work; a parent waiting for its children (wait4), a thread joining others
	OffCPUOther     = "other"
	// OffCPUIO is the reason of recordings made before wait codes, when
	// disk, pipe and socket waits were one reason: read, never written.
	OffCPUIO = "io"
)

// Waiting reports whether a reason is a wait the program chose (an idle
// thread waiting for work, a deliberate sleep, an event loop's poll)
// rather than one it suffers: rules never count these, and the views
// list them apart.
func Waiting(reason string) bool {
	return reason == OffCPUIdle || reason == OffCPUSleep || reason == OffCPUPoll
}

// OffCPUReasons lists the reasons in the order reports show them.
var OffCPUReasons = []string{OffCPULock, OffCPUDiskIO, OffCPUNetwork, OffCPUIPC, OffCPUPageFault, OffCPURunq, OffCPUSleep, OffCPUPoll, OffCPUIdle, OffCPUOther, OffCPUIO}

// ReasonTitle is a reason in words, for reports.
var ReasonTitle = map[string]string{
	OffCPULock:      "lock (futex, mutex, file lock)",
	OffCPUDiskIO:    "disk I/O",
	OffCPUNetwork:   "network",
	OffCPUIPC:       "another process (pipe, Unix socket, child)",
	OffCPUPageFault: "page fault",
	OffCPURunq:      "run queue (preempted)",
	OffCPUSleep:     "sleep",
	OffCPUPoll:      "poll/epoll wait",
	OffCPUIdle:      "idle thread",
	OffCPUOther:     "other",
	OffCPUIO:        "I/O of any kind (recorded before wait codes)",
}

// fromKernel are the reasons the kernel's account decides alone: a
// thread's frames cannot make a pipe read anything but a wait on its peer.
// An idle Go thread (no goroutine locked to it, parked in the scheduler)
// is the runtime idling whatever its frames say (a usleep while stealing
// work is no sleep of the program's).
var fromKernel = map[string]bool{
	OffCPUDiskIO: true, OffCPUNetwork: true, OffCPUIPC: true, OffCPUPageFault: true, OffCPURunq: true, OffCPUIdle: true,
}

// offCPUPattern is one classification rule: a frame whose function
// contains any of the substrings gives the reason. Rules are tried in
// order; the first that matches any frame wins. The order matters:
//
//   - page faults first: a fault may wait for I/O, but the fault is what
//     the code did;
//   - then joins: a thread that waits for its workers to finish is idle,
//     though it waits on a futex (pthread_join, Go's WaitGroup, whose
//     semaphore is sync's);
//   - then the user side's locks: a Go goroutine blocked on a sync.RWMutex
//     on a locked thread parks its thread through the runtime's scheduler
//     (park_m, stoplockedm, notesleep), so the lock frames must win over
//     the scheduler's idle frames below them;
//   - then the Go runtime's background threads (sysmon, the signal
//     receiver, GC workers): idle whatever they wait in;
//   - then purposeful sleeps, then the runtimes' idle paths (an idle Go M in
//     findRunnable/stopm, the netpoller, JVM and pthread pools parked on a
//     condition), then the kernel's view, for recordings without wait
//     codes: futex is a lock, poll/epoll an event loop, block waits disk
//     I/O, pipes and Unix sockets another process, TCP the network;
//     a Go stop-the-world waits on a futex too, but it is the collector's
//     pause, other.
type offCPUPattern struct {
	reason string
	user   bool // match user frames (else kernel frames)
	// only: the rule matches when every user frame starts with one of
	// subs (and there is at least one), not when one frame contains one.
	only bool
	subs []string
}

var offCPUPatterns = []offCPUPattern{
	{OffCPUPageFault, false, false, []string{"exc_page_fault", "do_user_addr_fault", "handle_mm_fault", "asm_exc_page_fault"}},
	// A thread waiting for others to finish (a join, a WaitGroup) waits on
	// a futex too, but idles until its workers are done: no lock.
	{OffCPUIdle, true, false, []string{"pthread_join", "pthread_clockjoin", "pthread_timedjoin", "sync.(*WaitGroup).Wait", "sync.runtime_SemacquireWaitGroup"}},
	{OffCPULock, true, false, []string{
		"sync.(*Mutex)", "sync.(*RWMutex)", "sync.runtime_Semacquire", "sync.runtime_SemacquireMutex",
		"sync.runtime_SemacquireRWMutex", "runtime.semacquire", "internal/sync.(*Mutex)",
		"pthread_mutex_lock", "pthread_rwlock_rdlock", "pthread_rwlock_wrlock", "__lll_lock_wait",
		"sem_wait", "sem_timedwait",
	}},
	// The Go runtime's own background threads and goroutines: their
	// sleeps and waits are the runtime idling, not the program's.
	{OffCPUIdle, true, false, []string{
		"runtime.sysmon", "runtime.templateThread", "os/signal.signal_recv", "runtime.bgsweep",
		"runtime.bgscavenge", "runtime.gcBgMarkWorker", "runtime.forcegchelper", "runtime.runfinq",
	}},
	{OffCPUSleep, true, false, []string{"runtime.timeSleep", "time.Sleep", "usleep", "nanosleep", "clock_nanosleep"}},
	{OffCPUIdle, true, false, []string{
		"runtime.findRunnable", "runtime.findrunnable", "runtime.stopm", "runtime.netpoll",
		"runtime.stoplockedm", "runtime.park_m", "runtime.notesleep",
		"runtime.mPark", "runtime.futexsleep",
		"Parker::park", "Unsafe_Park", "pthread_cond_wait", "pthread_cond_timedwait",
	}},
	{OffCPUSleep, false, false, []string{"do_nanosleep", "hrtimer_nanosleep", "common_nsleep"}},
	// The Go runtime stopping the world for the GC waits on a futex for
	// the other threads: a pause of the collector, not a lock of the
	// program.
	{OffCPUOther, true, false, []string{"runtime.stopTheWorldWithSema", "runtime.forEachP", "runtime.gcStart", "runtime.gcMarkDone", "runtime.gcMarkTermination"}},
	// A futex wait whose user stack is all Go runtime (its notes and
	// internal locks, or a stack cut short in its assembly) is the
	// runtime's own business: the program's locks go through sync, which
	// the user rules above name.
	{reason: OffCPUOther, user: true, only: true, subs: []string{"runtime.", "internal/runtime/"}},
	{OffCPULock, false, false, []string{"futex_wait", "futex_do_wait", "__futex_wait", "rwsem_down", "mutex_lock", "__mutex_lock", "locks_lock_inode_wait"}},
	{OffCPUPoll, false, false, []string{"ep_poll", "do_epoll_wait", "do_sys_poll", "do_select", "core_sys_select"}},
	{OffCPUIdle, false, false, []string{"worker_thread", "kthread", "smpboot_thread_fn", "rcu_gp_kthread", "do_wait", "kernel_wait4"}},
	{OffCPUDiskIO, false, false, []string{"io_schedule", "blk_", "folio_wait", "wait_on_page", "__wait_on_buffer", "jbd2", "do_fsync"}},
	{OffCPUIPC, false, false, []string{"pipe_read", "pipe_write", "unix_stream_read", "unix_dgram_recvmsg"}},
	{OffCPUNetwork, false, false, []string{"sk_wait_data", "tcp_recvmsg", "inet_csk_accept", "sk_stream_wait_memory", "udp_recvmsg"}},
}

// ClassifyOffCPU names why a thread was blocked from the kernel's reason
// (its wait code's, "" when unknown) and its user and kernel frames
// (innermost first).
func ClassifyOffCPU(kernelReason string, user, kernel []Frame) string {
	reason, _ := ExplainOffCPU(kernelReason, user, kernel)
	return reason
}

// ExplainOffCPU is ClassifyOffCPU that also names the function to blame.
// The kernel's reason decides alone for disk I/O, network, another
// process, page faults and the run queue; otherwise the first rule of
// offCPUPatterns on the user frames that matches decides (a lock API, a
// runtime's idle path, a sleep), then the kernel's reason, then, for a
// recording without wait codes, the rules on kernel frames. The function
// blamed: for a rule on user frames, the outermost frame it matched (the
// lock's own API, say sync.(*RWMutex).Lock, not the futex under it);
// otherwise the innermost user frame, where the program called into the
// kernel (or the kernel frame when there is no user stack).
func ExplainOffCPU(kernelReason string, user, kernel []Frame) (reason, blamed string) {
	where := func() string {
		switch {
		case len(user) > 0:
			return user[0].String()
		case len(kernel) > 0:
			return kernel[0].String()
		}
		return "[unknown]"
	}
	if fromKernel[kernelReason] {
		return kernelReason, where()
	}
	for _, p := range offCPUPatterns {
		if kernelReason != "" && !p.user {
			continue // the kernel's reason stands for its frames
		}
		frames := kernel
		if p.user {
			frames = user
		}
		if p.only {
			if len(frames) > 0 && allPrefixed(frames, p.subs) {
				return p.reason, frames[0].String()
			}
			continue
		}
		hit := -1
		for i, f := range frames {
			if matchesAny(f.Function, p.subs) {
				hit = i
				if !p.user {
					break
				}
			}
		}
		if hit < 0 {
			continue
		}
		if p.user || len(user) == 0 {
			return p.reason, frames[hit].String()
		}
		return p.reason, user[0].String()
	}
	if kernelReason != "" {
		return kernelReason, where()
	}
	return OffCPUOther, where()
}

func matchesAny(fn string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(fn, sub) {
			return true
		}
	}
	return false
}

// OffCPUSummary is the off-CPU block of inspect --json: the target's
// blocked time by reason and its top stacks, scaled to all blocked time.
type OffCPUSummary struct {
	BlockedNS uint64             `json:"blocked_ns"`
	SampledNS uint64             `json:"sampled_ns"`
	ByReason  map[string]float64 `json:"by_reason_ns"`
	// Top are the largest stacks that are neither idle nor sleep.
	Top []OffCPUStackStat `json:"top_stacks"`
	// Waits is the kernel's account by wait (WaitTotals), absent in
	// recordings made before wait codes.
	Waits []WaitTotal `json:"waits,omitempty"`
}

// WaitTotal is one kind of wait (reason, system call, descriptor) over a
// recording, exact, with its latencies from the log2 histogram.
type WaitTotal struct {
	Reason string  `json:"reason"`
	Call   string  `json:"call,omitempty"`
	FD     string  `json:"fd,omitempty"`
	NS     float64 `json:"ns"`
	Count  uint64  `json:"count"`
	P50    float64 `json:"p50_ns"`
	P99    float64 `json:"p99_ns"`
}

// WaitTotals sums the recording's waits by reason, call and descriptor,
// longest first, at most max of them (0: all).
func (r *Recording) WaitTotals(max int) []WaitTotal {
	type key struct{ reason, call, fd string }
	by := map[key]*WaitTotal{}
	hists := map[key][]uint64{}
	for _, w := range r.Windows {
		for _, wt := range w.Waits {
			k := key{wt.Reason, wt.Call, wt.FD}
			t := by[k]
			if t == nil {
				t = &WaitTotal{Reason: wt.Reason, Call: wt.Call, FD: wt.FD}
				by[k] = t
				hists[k] = make([]uint64, HistBuckets)
			}
			t.NS += float64(wt.NS)
			t.Count += wt.Count
			for i, c := range wt.Hist {
				if i < HistBuckets {
					hists[k][i] += c
				}
			}
		}
	}
	out := make([]WaitTotal, 0, len(by))
	for k, t := range by {
		t.P50, t.P99 = Percentile(hists[k], 0.5), Percentile(hists[k], 0.99)
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].NS != out[j].NS {
			return out[i].NS > out[j].NS
		}
		return out[i].Reason+out[i].Call+out[i].FD < out[j].Reason+out[j].Call+out[j].FD
	})
	if max > 0 && len(out) > max {
		out = out[:max]
	}
	return out
}

// OffCPUStackStat is one stack pair's blocked time over the recording.
type OffCPUStackStat struct {
	NS     float64 `json:"ns"`
	Reason string  `json:"reason"`
	// Frames are the function names, innermost first: kernel, then user
	// (a locked goroutine's frames continue its thread's).
	Frames []string `json:"frames"`
}

// OffCPUStacks aggregates the recording's off-CPU time by stack pair
// (any thread), scaled by OffCPUScale, largest first.
func (r *Recording) OffCPUStacks() []OffCPUStackStat {
	type key struct {
		user, kernel uint64
		reason       string
	}
	by := map[key]*OffCPUStackStat{}
	var keys []key
	scaler := r.OffCPUScaler()
	for _, w := range r.Windows {
		if w.OffCPU == nil {
			continue
		}
		for _, s := range w.OffCPU.Stacks {
			k := key{s.UserStack, s.KernelStack, s.Reason}
			st := by[k]
			if st == nil {
				st = &OffCPUStackStat{Reason: s.Reason, Frames: []string{}}
				for _, id := range []uint64{s.KernelStack, s.UserStack} {
					if id != 0 {
						for _, f := range r.Stacks[id].Frames {
							st.Frames = append(st.Frames, f.String())
						}
					}
				}
				by[k] = st
				keys = append(keys, k)
			}
			st.NS += float64(s.NS) * scaler.Scale(s.Key())
		}
	}
	out := make([]OffCPUStackStat, 0, len(keys))
	for _, k := range keys {
		out = append(out, *by[k])
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].NS > out[j].NS })
	return out
}

// OffCPUSummary sums the off-CPU time of the windows that have it, by
// reason, with the top stacks; nil when no window has off-CPU stacks.
func (r *Recording) OffCPUSummary(top int) *OffCPUSummary {
	var s *OffCPUSummary
	for _, w := range r.Windows {
		if w.OffCPU == nil {
			continue
		}
		if s == nil {
			s = &OffCPUSummary{ByReason: map[string]float64{}, Top: []OffCPUStackStat{}}
		}
		s.BlockedNS += w.OffCPU.BlockedNS
		s.SampledNS += w.OffCPU.SampledNS
	}
	if s == nil {
		return nil
	}
	s.Waits = r.WaitTotals(top)
	for reason, ns := range r.OffCPUScaler().Unsampled() {
		s.ByReason[reason] += ns
	}
	for _, st := range r.OffCPUStacks() {
		s.ByReason[st.Reason] += st.NS
		// Idle threads waiting for work and deliberate sleeps are in
		// ByReason, not in the top: they would fill it, and they are not
		// waits the program suffers.
		if !Waiting(st.Reason) && len(s.Top) < top {
			s.Top = append(s.Top, st)
		}
	}
	return s
}

func allPrefixed(frames []Frame, prefixes []string) bool {
	for _, f := range frames {
		ok := false
		for _, p := range prefixes {
			ok = ok || strings.HasPrefix(f.Function, p)
		}
		if !ok {
			return false
		}
	}
	return true
}
