package collector

import (
	"math/bits"
	"testing"

	"github.com/cacheheat/cacheheat/bpf"
	"github.com/cacheheat/cacheheat/profile"
)

func fdCode(k bpf.CacheheatFdKind) uint32 { return uint32(k) << waitFDShift }

// TestWaitOf: the reason each wait code gives, for the waits of the
// programs the grading runs (a pipe ping-pong, TCP over loopback, direct
// disk I/O, futexes, sleeps) and the kernel's own threads.
func TestWaitOf(t *testing.T) {
	for _, c := range []struct {
		name   string
		code   uint32
		reason string
		call   string
		fd     string
	}{
		{"read of a pipe", 0 | fdCode(bpf.CacheheatFdKindFD_FIFO), profile.OffCPUIPC, "read", "pipe"},
		{"write to a full pipe", 1 | fdCode(bpf.CacheheatFdKindFD_FIFO), profile.OffCPUIPC, "write", "pipe"},
		{"recvfrom a TCP socket", 45 | fdCode(bpf.CacheheatFdKindFD_SOCK_INET), profile.OffCPUNetwork, "recvfrom", "socket"},
		{"read of a TCP socket", 0 | fdCode(bpf.CacheheatFdKindFD_SOCK_INET), profile.OffCPUNetwork, "read", "socket"},
		{"recvmsg of a Unix socket", 47 | fdCode(bpf.CacheheatFdKindFD_SOCK_UNIX), profile.OffCPUIPC, "recvmsg", "unix-socket"},
		{"accept", 43 | fdCode(bpf.CacheheatFdKindFD_SOCK_INET), profile.OffCPUNetwork, "accept", "socket"},
		{"O_DIRECT pread, in io_schedule", 17 | fdCode(bpf.CacheheatFdKindFD_REG) | waitIOWait | waitUninter, profile.OffCPUDiskIO, "pread64", "file"},
		{"file write waiting on the journal", 1 | fdCode(bpf.CacheheatFdKindFD_REG) | waitUninter, profile.OffCPUDiskIO, "write", "file"},
		{"fsync", 74 | fdCode(bpf.CacheheatFdKindFD_REG) | waitIOWait, profile.OffCPUDiskIO, "fsync", "file"},
		{"futex", 202, profile.OffCPULock, "futex", ""},
		{"futex that timed out (no task woke it)", 202 | waitNoWaker, profile.OffCPUSleep, "futex", ""},
		{"pipe read ended by no task (a signal)", 0 | fdCode(bpf.CacheheatFdKindFD_FIFO) | waitNoWaker, profile.OffCPUIPC, "read", "pipe"},
		{"flock", 73 | fdCode(bpf.CacheheatFdKindFD_REG), profile.OffCPULock, "flock", "file"},
		{"futex of an idle Go M", 202 | waitGoIdle, profile.OffCPUIdle, "futex", ""},
		{"futex of a pthread_join", 202 | waitJoin, profile.OffCPUIdle, "futex", ""},
		{"epoll of the Go netpoller", 281 | waitGoIdle, profile.OffCPUIdle, "epoll_pwait", ""},
		{"epoll_wait", 232, profile.OffCPUPoll, "epoll_wait", ""},
		{"read of a terminal", 0 | fdCode(bpf.CacheheatFdKindFD_CHR), profile.OffCPUPoll, "read", "char-device"},
		{"read of an eventfd", 0 | fdCode(bpf.CacheheatFdKindFD_ANON), profile.OffCPUPoll, "read", "anon"},
		{"clock_nanosleep", 230, profile.OffCPUSleep, "clock_nanosleep", ""},
		{"wait4", 61, profile.OffCPUIdle, "wait4", ""},
		{"msgrcv", 70, profile.OffCPUIPC, "msgrcv", ""},
		{"mmap waiting on mmap_lock", 9 | waitUninter, profile.OffCPULock, "mmap", ""},
		{"major fault", waitNRNone | waitIOWait | waitUninter, profile.OffCPUPageFault, "", ""},
		{"fault waiting on a page lock", waitNRNone | waitUninter, profile.OffCPUPageFault, "", ""},
		{"stopped by SIGSTOP", waitNRNone, profile.OffCPUOther, "", ""},
		{"preempted", waitPreempted, profile.OffCPURunq, "", ""},
		{"idle kernel worker", waitKthread | waitNRNone | waitNoLoad | waitUninter, profile.OffCPUIdle, "", ""},
		{"kernel thread waiting for work", waitKthread | waitNRNone, profile.OffCPUIdle, "", ""},
		{"kernel thread in block I/O", waitKthread | waitNRNone | waitIOWait | waitUninter, profile.OffCPUDiskIO, "", ""},
		{"an unknown call", 500, profile.OffCPUOther, "syscall 500", ""},
		{"io_uring_enter: disk or network", 426 | fdCode(bpf.CacheheatFdKindFD_ANON), profile.OffCPUPoll, "io_uring_enter", "anon"},
		{"read of a closed descriptor", 0 | fdCode(bpf.CacheheatFdKindFD_BAD), profile.OffCPUOther, "read", "closed"},
	} {
		reason, call, fd := waitOf(c.code)
		if reason != c.reason || call != c.call || fd != c.fd {
			t.Errorf("%s (0x%x): %q %q %q, want %q %q %q", c.name, c.code, reason, call, fd, c.reason, c.call, c.fd)
		}
	}
}

// TestWindowWaits: window deltas of the cumulative wait map, summed by
// reason, call and descriptor, with their histograms.
func TestWindowWaits(t *testing.T) {
	pipe := uint32(0) | fdCode(bpf.CacheheatFdKindFD_FIFO)
	prev := map[uint32]waitVal{pipe: {ns: 100, count: 1, hist: []uint64{0, 1}}}
	cur := map[uint32]waitVal{
		pipe:             {ns: 1100, count: 3, hist: []uint64{0, 1, 2}},
		202:              {ns: 5000, count: 1, hist: []uint64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}},
		202 | waitNRNone: {ns: 0, count: 0},
	}
	got := windowWaits(prev, cur)
	if len(got) != 2 {
		t.Fatalf("waits %+v, want 2", got)
	}
	if got[0].Reason != profile.OffCPULock || got[0].NS != 5000 || got[0].Count != 1 || len(got[0].Hist) != 13 {
		t.Errorf("first %+v, want the futex's 5000 ns", got[0])
	}
	if w := got[1]; w.Reason != profile.OffCPUIPC || w.Call != "read" || w.FD != "pipe" || w.NS != 1000 || w.Count != 2 || len(w.Hist) != 3 || w.Hist[2] != 2 || w.Hist[1] != 0 {
		t.Errorf("second %+v, want the pipe's 1000 ns in 2 waits", w)
	}
}

// TestOwnPathBits: every call named in ownPathCalls is in the table (a
// misspelt one would silently keep its kernel stacks), and the bit set
// has exactly their numbers.
func TestOwnPathBits(t *testing.T) {
	own := ownPathBits()
	if len(own)*64 != int(waitNRMask)+1 {
		t.Fatalf("%d words, want %d bits", len(own), waitNRMask+1)
	}
	set := 0
	for _, w := range own {
		set += bits.OnesCount64(w)
	}
	if set != len(ownPathCalls) {
		t.Errorf("%d bits set for %d calls: a name in ownPathCalls is not in syscalls", set, len(ownPathCalls))
	}
	for nr, want := range map[uint32]bool{202: true, 232: true, 35: true, 230: true, 0: false, 9: false, 74: false} {
		if got := own[nr/64]>>(nr%64)&1 == 1; got != want {
			t.Errorf("call %d (%s): own path %v, want %v", nr, syscalls[nr].name, got, want)
		}
	}
}
