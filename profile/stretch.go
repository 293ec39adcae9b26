package profile

import "fmt"

// StretchFactor is how much longer than the interval a window may last
// before it counts as stretched: the recorder was starved of CPU (or
// stopped) and drained the kernel late, so that window's rates average over
// a longer time than the others.
const StretchFactor = 1.5

// IsStretched says whether a window of lengthNS, in a recording with
// windows of intervalNS, was stretched.
func IsStretched(lengthNS, intervalNS int64) bool {
	return intervalNS > 0 && float64(lengthNS) > StretchFactor*float64(intervalNS)
}

// Stretch counts a recording's stretched windows, and its quiet ones
// (Window.Quiet), which are long by design and so neither stretched nor
// counted in LongestNS.
type Stretch struct {
	Windows   int   // windows looked at
	Stretched int   // of which stretched
	LongestNS int64 // the longest window that was not quiet
	Quiet     int   // windows the recorder slept through
	QuietNS   int64 // their length, summed
}

// Stretched counts the stretched and quiet windows of rec.
func Stretched(rec *Recording) Stretch {
	var s Stretch
	for i := range rec.Windows {
		s.Add(&rec.Windows[i], rec.Header.Settings.IntervalNS)
	}
	return s
}

// Add counts one more window w in a recording with windows of
// intervalNS: what a reader that streams windows counts them with.
func (s *Stretch) Add(w *Window, intervalNS int64) {
	s.Windows++
	lengthNS := w.EndNS - w.StartNS
	if w.Quiet {
		s.Quiet++
		s.QuietNS += lengthNS
		return
	}
	s.LongestNS = max(s.LongestNS, lengthNS)
	if IsStretched(lengthNS, intervalNS) {
		s.Stretched++
	}
}

// String is the warning shown by the recorder, inspect and the report, or
// "" when no window was stretched.
func (s Stretch) String() string {
	if s.Stretched == 0 {
		return ""
	}
	return fmt.Sprintf("%d of %d windows were stretched (longer than %gx the interval: the recorder was starved of CPU), longest %.1f s", s.Stretched, s.Windows, StretchFactor, float64(s.LongestNS)/1e9)
}
