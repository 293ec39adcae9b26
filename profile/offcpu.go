package profile

import (
	"sort"
	"strings"
)

// Off-CPU reasons: why a thread was blocked, from its stacks at switch-out.
const (
	OffCPULock      = "lock"       // futex or lock wait: mutexes, semaphores, Go's sync
	OffCPUIO        = "io"         // waiting for a disk, pipe or socket read or write
	OffCPUSleep     = "sleep"      // sleeping on purpose: nanosleep, time.Sleep
	OffCPUPageFault = "page-fault" // blocked inside a page fault
	OffCPUIdle      = "idle"       // an idle runtime or pool thread waiting for work
	OffCPUOther     = "other"
)

// Waiting reports whether a reason is a wait the program chose (an idle
// thread waiting for work, a deliberate sleep) rather than one it suffers:
// rules never count these, and the views list them apart.
func Waiting(reason string) bool { return reason == OffCPUIdle || reason == OffCPUSleep }

// OffCPUReasons lists the reasons in the order reports show them.
var OffCPUReasons = []string{OffCPULock, OffCPUIO, OffCPUSleep, OffCPUPageFault, OffCPUIdle, OffCPUOther}

// offCPUPattern is one classification rule: a frame whose function
// contains any of the substrings gives the reason. Rules are tried in
// order; the first that matches any frame wins. The order matters:
//
//   - page faults first: a fault may wait for I/O, but the fault is what
//     the code did;
//   - then the user side's locks: a Go goroutine blocked on a sync.RWMutex
//     on a locked thread parks its thread through the runtime's scheduler
//     (park_m, stoplockedm, notesleep), so the lock frames must win over
//     the scheduler's idle frames below them;
//   - then the Go runtime's background threads (sysmon, the signal
//     receiver, GC workers): idle whatever they wait in;
//   - then purposeful sleeps, then the runtimes' idle paths (an idle Go M in
//     findRunnable/stopm, the netpoller, JVM and pthread pools parked on a
//     condition), then the kernel's view: futex is a lock, poll/epoll is an
//     event loop waiting for work, and block, pipe and socket waits are I/O;
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
	{OffCPULock, false, false, []string{"futex_wait", "futex_do_wait", "__futex_wait", "rwsem_down", "mutex_lock", "__mutex_lock"}},
	{OffCPUIdle, false, false, []string{"ep_poll", "do_epoll_wait", "do_sys_poll", "do_select", "core_sys_select", "worker_thread", "kthread", "smpboot_thread_fn", "rcu_gp_kthread"}},
	{OffCPUIO, false, false, []string{
		"io_schedule", "blk_", "folio_wait", "wait_on_page", "__wait_on_buffer", "jbd2",
		"pipe_read", "pipe_write", "wait_woken", "sk_wait_data", "unix_stream_read", "tcp_recvmsg",
		"vfs_read", "vfs_write", "do_fsync", "io_uring",
	}},
}

// ClassifyOffCPU names why a thread was blocked from its user and kernel
// frames (innermost first), as the first matching rule of offCPUPatterns.
func ClassifyOffCPU(user, kernel []Frame) string {
	reason, _ := ExplainOffCPU(user, kernel)
	return reason
}

// ExplainOffCPU is ClassifyOffCPU that also names the function to blame:
// for a rule on user frames, the outermost frame it matched (the lock's
// own API, say sync.(*RWMutex).Lock, not the futex under it); for a rule on
// kernel frames, the innermost user frame, where the program called into
// the kernel (or the kernel frame when there is no user stack).
func ExplainOffCPU(user, kernel []Frame) (reason, blamed string) {
	for _, p := range offCPUPatterns {
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
	if len(user) > 0 {
		return OffCPUOther, user[0].String()
	}
	if len(kernel) > 0 {
		return OffCPUOther, kernel[0].String()
	}
	return OffCPUOther, "[unknown]"
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
	type key struct{ user, kernel uint64 }
	by := map[key]*OffCPUStackStat{}
	var keys []key
	scale := r.OffCPUScale()
	for _, w := range r.Windows {
		if w.OffCPU == nil {
			continue
		}
		for _, s := range w.OffCPU.Stacks {
			k := key{s.UserStack, s.KernelStack}
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
			st.NS += float64(s.NS) * scale
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
