package collector

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// A recorder's timed wake-ups need not be exact: a window closes when its
// snapshot reads the CPUs' busy time (window bounds are measured, not
// assumed), so a tick a millisecond late changes nothing in the file.
// Most of its timed wake-ups are the Go runtime's sysmon thread, which
// polls every 20 us while the program's P is busy or held by a blocked
// system call (the sample reader's epoll wait), and at the kernel's
// default timer slack of 50 us each poll is a wake-up of its own: under
// rcu bad on the 2-CPU VM, sysmon was 18% of the recorder's time, and a
// timer slack of a thousandth of the window took the recorder's context
// switches from 325 to 145 in 15 s and its time down a fifth
// (BENCHMARKS.md, thirteenth session).

// slackPerWindow is the share of a window by which a timed wake-up may
// be late.
const slackPerWindow = 1000

// defaultSlack is the kernel's default timer slack; a thread's is never
// set below it.
const defaultSlack = 50 * time.Microsecond

// windowSlack is the timer slack for windows of length interval.
func windowSlack(interval time.Duration) time.Duration {
	return max(interval/slackPerWindow, defaultSlack)
}

// setTimerSlack sets the timer slack of every thread of this process to
// slack. A thread created later inherits its creator's, so setting every
// thread there is once covers the ones to come; a thread created while
// the threads are listed may have been missed, so the list is walked again
// until a walk finds every thread already set. Setting another thread's
// slack needs CAP_SYS_NICE; without it, the error is returned and the
// threads keep what they had (a cost, never a result, depends on it).
func setTimerSlack(slack time.Duration) error {
	want := strconv.FormatInt(int64(slack), 10)
	for range 5 {
		tids, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("listing threads: %w", err)
		}
		changed := false
		for _, t := range tids {
			// The file is only under /proc/TID, not /proc/self/task/TID.
			path := "/proc/" + t.Name() + "/timerslack_ns"
			b, err := os.ReadFile(path)
			if errors.Is(err, os.ErrNotExist) {
				continue // the thread exited
			}
			if err != nil {
				return fmt.Errorf("thread %s: %w", t.Name(), err)
			}
			if strings.TrimSpace(string(b)) == want {
				continue
			}
			if err := os.WriteFile(path, []byte(want), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("thread %s: %w", t.Name(), err)
			}
			changed = true
		}
		if !changed {
			return nil
		}
	}
	return errors.New("threads were still being created after 5 walks")
}
