package collector

import (
	"slices"
	"strconv"

	"github.com/cacheheat/cacheheat/bpf"
	"github.com/cacheheat/cacheheat/profile"
)

// A wait code is what bpf/cacheheat.c records of a target thread leaving
// the CPU (enum wait_bits in bpf/cacheheat.h): the system call it blocked
// in, what that call's file descriptor is, in_iowait and its state. This
// file names the off-CPU reason from it: the classification is data here,
// not branches in the BPF program, so it is tested without a kernel.
const (
	waitNRMask    = uint32(bpf.CacheheatWaitBitsWAIT_NR_MASK)
	waitNRNone    = uint32(bpf.CacheheatWaitBitsWAIT_NR_NONE)
	waitFDShift   = uint32(bpf.CacheheatWaitBitsWAIT_FD_SHIFT)
	waitFDMask    = uint32(bpf.CacheheatWaitBitsWAIT_FD_MASK)
	waitIOWait    = uint32(bpf.CacheheatWaitBitsWAIT_IOWAIT)
	waitUninter   = uint32(bpf.CacheheatWaitBitsWAIT_UNINTERRUPTIBLE)
	waitNoLoad    = uint32(bpf.CacheheatWaitBitsWAIT_NOLOAD)
	waitGoIdle    = uint32(bpf.CacheheatWaitBitsWAIT_GO_IDLE)
	waitKthread   = uint32(bpf.CacheheatWaitBitsWAIT_KTHREAD)
	waitPreempted = uint32(bpf.CacheheatWaitBitsWAIT_PREEMPTED)
	waitJoin      = uint32(bpf.CacheheatWaitBitsWAIT_JOIN)
	waitNoWaker   = uint32(bpf.CacheheatWaitBitsWAIT_NO_WAKER)
	// An off-CPU sample's key carries its wait's log2 length bucket too.
	waitBucketShift = uint32(bpf.CacheheatWaitBitsWAIT_BUCKET_SHIFT)
	waitBucketMask  = uint32(bpf.CacheheatWaitBitsWAIT_BUCKET_MASK)
)

// fdKinds names enum fd_kind.
var fdKinds = map[bpf.CacheheatFdKind]string{
	bpf.CacheheatFdKindFD_REG:        "file",
	bpf.CacheheatFdKindFD_DIR:        "directory",
	bpf.CacheheatFdKindFD_CHR:        "char-device",
	bpf.CacheheatFdKindFD_BLK:        "block-device",
	bpf.CacheheatFdKindFD_FIFO:       "pipe",
	bpf.CacheheatFdKindFD_SOCK_INET:  "socket",
	bpf.CacheheatFdKindFD_SOCK_UNIX:  "unix-socket",
	bpf.CacheheatFdKindFD_SOCK_OTHER: "other-socket",
	bpf.CacheheatFdKindFD_ANON:       "anon",
	bpf.CacheheatFdKindFD_BAD:        "closed",
}

// fdReasons: a call on a descriptor waits for what the descriptor is.
// A terminal or an eventfd/timerfd is an event the program waits for
// by choice.
var fdReasons = map[string]string{
	"file": profile.OffCPUDiskIO, "block-device": profile.OffCPUDiskIO, "directory": profile.OffCPUDiskIO,
	"pipe": profile.OffCPUIPC, "unix-socket": profile.OffCPUIPC,
	"socket":      profile.OffCPUNetwork,
	"char-device": profile.OffCPUPoll, "anon": profile.OffCPUPoll,
}

// blockingCall is one x86-64 system call a thread blocks in: its name, and
// the reason it gives when its descriptor (if it takes one) says nothing
// more.
type blockingCall struct {
	name   string
	reason string
}

// syscalls are the x86-64 system calls that block, by number
// (arch/x86/entry/syscalls/syscall_64.tbl). A call not listed is named by
// its number and gives "other".
var syscalls = map[uint32]blockingCall{
	0: {"read", ""}, 1: {"write", ""}, 17: {"pread64", ""}, 18: {"pwrite64", ""},
	19: {"readv", ""}, 20: {"writev", ""}, 295: {"preadv", ""}, 296: {"pwritev", ""},
	327: {"preadv2", ""}, 328: {"pwritev2", ""}, 40: {"sendfile", ""}, 275: {"splice", ""},
	276: {"tee", ""}, 278: {"vmsplice", ""}, 16: {"ioctl", ""},
	42: {"connect", profile.OffCPUNetwork}, 43: {"accept", profile.OffCPUNetwork}, 288: {"accept4", profile.OffCPUNetwork},
	44: {"sendto", profile.OffCPUNetwork}, 45: {"recvfrom", profile.OffCPUNetwork}, 46: {"sendmsg", profile.OffCPUNetwork},
	47: {"recvmsg", profile.OffCPUNetwork}, 299: {"recvmmsg", profile.OffCPUNetwork}, 307: {"sendmmsg", profile.OffCPUNetwork},
	7: {"poll", profile.OffCPUPoll}, 23: {"select", profile.OffCPUPoll}, 270: {"pselect6", profile.OffCPUPoll},
	271: {"ppoll", profile.OffCPUPoll}, 232: {"epoll_wait", profile.OffCPUPoll}, 281: {"epoll_pwait", profile.OffCPUPoll},
	441: {"epoll_pwait2", profile.OffCPUPoll}, 34: {"pause", profile.OffCPUPoll}, 130: {"rt_sigsuspend", profile.OffCPUPoll},
	128: {"rt_sigtimedwait", profile.OffCPUPoll},
	35:  {"nanosleep", profile.OffCPUSleep}, 230: {"clock_nanosleep", profile.OffCPUSleep},
	202: {"futex", profile.OffCPULock}, 449: {"futex_waitv", profile.OffCPULock}, 455: {"futex_wait", profile.OffCPULock},
	72: {"fcntl", profile.OffCPULock}, 73: {"flock", profile.OffCPULock},
	// A parent waiting for its children to exit (a shell, make, a
	// supervisor) is a join: idle while they work, not a dependency.
	61: {"wait4", profile.OffCPUIdle}, 247: {"waitid", profile.OffCPUIdle},
	65: {"semop", profile.OffCPUIPC}, 220: {"semtimedop", profile.OffCPUIPC}, 69: {"msgsnd", profile.OffCPUIPC},
	70: {"msgrcv", profile.OffCPUIPC}, 242: {"mq_timedsend", profile.OffCPUIPC}, 243: {"mq_timedreceive", profile.OffCPUIPC},
	74: {"fsync", profile.OffCPUDiskIO}, 75: {"fdatasync", profile.OffCPUDiskIO}, 162: {"sync", profile.OffCPUDiskIO},
	306: {"syncfs", profile.OffCPUDiskIO}, 277: {"sync_file_range", profile.OffCPUDiskIO},
	208: {"io_getevents", profile.OffCPUDiskIO}, 333: {"io_pgetevents", profile.OffCPUDiskIO},
	426: {"io_uring_enter", ""},
	// mmap_lock: a thread that maps or unmaps memory waits for the
	// process's other threads' faults and maps.
	9: {"mmap", profile.OffCPULock}, 11: {"munmap", profile.OffCPULock}, 10: {"mprotect", profile.OffCPULock},
	25: {"mremap", profile.OffCPULock}, 28: {"madvise", profile.OffCPULock}, 12: {"brk", profile.OffCPULock},
}

// ownPathCalls are the system calls whose kernel side of an
// interruptible wait is the call's own wait, always the same frames
// (futex_wait_queue, ep_poll, do_sys_poll, do_nanosleep, do_wait,
// sigsuspend): the BPF side takes no kernel stack for such a wait, since
// the wait code names the call and an unwind of the kernel stack costs
// four times the user stack's (docs/ATTRIBUTION.md, "Kernel stacks where
// they add something").
// Calls whose kernel side varies with what they wait for (reads, writes,
// sockets, maps, I/O) keep theirs, as does any wait that is not
// interruptible (a fault or a lock inside the call).
var ownPathCalls = []string{
	"futex", "futex_waitv", "futex_wait",
	"poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait", "epoll_pwait2",
	"nanosleep", "clock_nanosleep",
	"pause", "rt_sigsuspend", "rt_sigtimedwait",
	"wait4", "waitid",
}

// ownPathBits is own_path_calls of the BPF side: ownPathCalls' numbers
// as a bit set.
func ownPathBits() []uint64 {
	bits := make([]uint64, (waitNRMask+1)/64)
	for nr, c := range syscalls {
		if slices.Contains(ownPathCalls, c.name) {
			bits[nr/64] |= 1 << (nr % 64)
		}
	}
	return bits
}

// waitOf names a wait code: the reason the kernel's account gives, the
// system call ("" outside one) and what its descriptor was. The BPF side's
// idle_wait (bpf/cacheheat.c) follows its idle cases, but wait4 and
// waitid, to take no stacks in those waits: a change here is one there.
func waitOf(code uint32) (reason, call, fd string) {
	switch {
	case code&waitPreempted != 0:
		return profile.OffCPURunq, "", ""
	case code&waitKthread != 0:
		switch {
		case code&waitIOWait != 0:
			return profile.OffCPUDiskIO, "", ""
		case code&waitUninter != 0 && code&waitNoLoad == 0:
			return profile.OffCPUOther, "", ""
		}
		return profile.OffCPUIdle, "", "" // a kernel worker waiting for work
	case code&waitNoLoad != 0:
		return profile.OffCPUIdle, "", ""
	}
	nr := code & waitNRMask
	if nr == waitNRNone {
		// Off the CPU outside a system call, uninterruptibly: in an
		// exception, which for a user thread is a page fault.
		if code&(waitUninter|waitIOWait) != 0 {
			return profile.OffCPUPageFault, "", ""
		}
		return profile.OffCPUOther, "", "" // stopped or traced
	}
	sc, ok := syscalls[nr]
	call = sc.name
	if !ok {
		call = "syscall " + strconv.FormatUint(uint64(nr), 10)
	}
	fd = fdKinds[bpf.CacheheatFdKind((code&waitFDMask)>>waitFDShift)]
	switch {
	case code&waitIOWait != 0:
		// io_schedule: block I/O, whatever the call (a read of a file,
		// a fault taken inside it, an fsync).
		reason = profile.OffCPUDiskIO
	case code&waitGoIdle != 0:
		// A Go thread parked in the scheduler with no goroutine locked
		// to it: the runtime idling, whatever the futex or epoll says.
		reason = profile.OffCPUIdle
	case code&waitJoin != 0:
		// pthread_join: a futex, but the thread idles until the one it
		// joins exits (profile.OffCPUIdle's joins).
		reason = profile.OffCPUIdle
	case sc.reason == profile.OffCPULock && code&waitNoWaker != 0:
		// No task ended the wait: the timer's interrupt did (a futex
		// with a timeout that expired, pthread_cond_timedwait with
		// nothing signalled), or a signal. A sleep until a deadline, not
		// a lock's wait: the lock's holder wakes its waiters.
		reason = profile.OffCPUSleep
	case sc.reason == profile.OffCPULock || sc.reason == profile.OffCPUIdle || sc.reason == profile.OffCPUIPC && fd == "":
		reason = sc.reason
	case fdReasons[fd] != "":
		reason = fdReasons[fd]
	case sc.reason != "":
		reason = sc.reason
	default:
		reason = profile.OffCPUOther
	}
	return reason, call, fd
}
