package collector

import (
	"testing"
	"time"
)

// TestClockPair: one pair maps Go's clock onto CLOCK_MONOTONIC (the
// kernel's timestamps): a time read between two CLOCK_MONOTONIC readings
// maps between them. An ordering, not a timing: the slack is the pair's
// own spread, far over pairSlack only if all its tries were preempted.
func TestClockPair(t *testing.T) {
	t0, m0 := clockPair()
	const slack = int64(time.Millisecond)
	for i := 0; i < 1000; i++ {
		a := monoNow()
		now := time.Now()
		b := monoNow()
		m := m0 + now.Sub(t0).Nanoseconds()
		if m < a-slack || m > b+slack {
			t.Fatalf("read %d: Go's clock maps to %d ns, CLOCK_MONOTONIC read %d and %d around it", i, m, a, b)
		}
	}
}
