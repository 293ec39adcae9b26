package collector

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestWindowSlack(t *testing.T) {
	for _, c := range []struct{ interval, want time.Duration }{
		{time.Second, time.Millisecond},
		{10 * time.Second, 10 * time.Millisecond},
		{100 * time.Millisecond, 100 * time.Microsecond},
		{MinInterval, defaultSlack}, // never below the kernel's default
	} {
		if got := windowSlack(c.interval); got != c.want {
			t.Errorf("windowSlack(%v) = %v, want %v", c.interval, got, c.want)
		}
	}
}

// threadSlacks reads every thread's timer slack from /proc.
func threadSlacks(t *testing.T) map[string]int64 {
	t.Helper()
	tids, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int64{}
	for _, d := range tids {
		b, err := os.ReadFile("/proc/" + d.Name() + "/timerslack_ns")
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		m[d.Name()] = v
	}
	return m
}

// TestSetTimerSlack: every thread there is gets the slack, and threads
// the runtime starts afterwards have it from their creators.
func TestSetTimerSlack(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_SYS_NICE) to set other threads' timer slack")
	}
	const slack = 777 * time.Microsecond
	before := threadSlacks(t)
	t.Cleanup(func() {
		if err := setTimerSlack(defaultSlack); err != nil {
			t.Error(err)
		}
	})
	if err := setTimerSlack(slack); err != nil {
		t.Fatal(err)
	}
	for tid, v := range threadSlacks(t) {
		if v != int64(slack) {
			t.Errorf("thread %s: timer slack %d ns after setTimerSlack(%v)", tid, v, slack)
		}
	}

	// Each goroutine keeps its thread to itself until release, so the
	// runtime must start threads beyond the ones listed before.
	const n = 16
	type seen struct {
		tid   int
		slack uintptr
		err   error
	}
	got := make(chan seen, n)
	release := make(chan struct{})
	for range n {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			s, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
			got <- seen{unix.Gettid(), uintptr(s), err}
			<-release
		}()
	}
	fresh := 0
	for range n {
		s := <-got
		if s.err != nil {
			t.Fatal(s.err)
		}
		if _, ok := before[strconv.Itoa(s.tid)]; !ok {
			fresh++
		}
		if s.slack != uintptr(slack) {
			t.Errorf("thread %d: timer slack %d ns, want %d", s.tid, s.slack, int64(slack))
		}
	}
	close(release)
	if fresh == 0 {
		t.Fatalf("none of %d locked goroutines ran on a thread started after setTimerSlack: inheritance not tested", n)
	}
	t.Logf("%d threads before, %d of %d locked goroutines on threads started after", len(before), fresh, n)
}
