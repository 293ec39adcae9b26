package collector

import (
	"time"

	"golang.org/x/sys/unix"
)

// monoNow is CLOCK_MONOTONIC in ns, the clock of bpf_ktime_get_ns.
func monoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// pairSlack is how far apart clockPair's two readings may be.
const pairSlack = 20 * time.Microsecond

// clockPair reads the wall clock (with Go's monotonic reading, from which
// the windows' bounds are taken) and CLOCK_MONOTONIC (the kernel's
// timestamps, e.g. a function call's) at one instant. Go's monotonic
// reading is CLOCK_MONOTONIC less a constant, so one pair relates every
// later kernel timestamp to the recording's start. A recorder preempted
// between the two readings would shift every function call against the
// windows by as long as it waited (seen beside stress-ng: 20 ms, calls
// placed in a window that starts after they returned), so the readings
// are taken again until they are close, keeping the closest pair.
func clockPair() (time.Time, int64) {
	var best time.Time
	var bestMono int64
	gap := int64(-1)
	for try := 0; try < 10; try++ {
		m0 := monoNow()
		now := time.Now()
		m1 := monoNow()
		if gap < 0 || m1-m0 < gap {
			best, bestMono, gap = now, m0+(m1-m0)/2, m1-m0
		}
		if gap <= int64(pairSlack) {
			break
		}
	}
	return best, bestMono
}
