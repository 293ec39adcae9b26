package attribution

import (
	"testing"

	"github.com/cacheheat/cacheheat/profile"
)

// ioSpan judges start-up by time: a program that reads at start and then
// waits is start-up I/O whether the recorder took a window every interval
// or slept through the wait in one quiet window.
func TestIOSpanByTime(t *testing.T) {
	const iv = int64(500e6)
	// windows of the given lengths, in intervals, from 0.
	wins := func(lens ...float64) []WindowMetrics {
		var ws []WindowMetrics
		var at int64
		for _, l := range lens {
			end := at + int64(l*float64(iv))
			ws = append(ws, WindowMetrics{StartNS: at, EndNS: end})
			at = end
		}
		return ws
	}
	for _, tc := range []struct {
		name string
		ws   []WindowMetrics
		per  []float64
		want bool
	}{
		{"reads, then a wait in windows", wins(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1), []float64{5, 5, 3, 0, 0, 0, 0, 0, 0, 0, 0}, true},
		{"reads, then a wait in a quiet window", wins(1, 1, 1, 1, 7), []float64{5, 5, 3, 0, 0}, true},
		{"reads, then the wait's switch-in in the quiet window", wins(1, 1, 1, 1, 7), []float64{5, 5, 3, 0, 0.1}, true},
		{"reads throughout", wins(1, 1, 1, 1, 7), []float64{1, 1, 1, 1, 9}, false},
		{"reads past the first half", wins(1, 1, 1, 1, 1, 1), []float64{1, 1, 1, 1, 0, 0}, false},
		{"too short to have a steady state", wins(1, 1, 1), []float64{1, 0, 0}, false},
	} {
		var total float64
		for _, v := range tc.per {
			total += v
		}
		if _, _, got := ioSpan(tc.ws, iv, tc.per, total); got != tc.want {
			t.Errorf("%s: start-up %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Long quiet windows neither make the active ones look partial nor are
// left out themselves.
func TestSteadyWindowQuiet(t *testing.T) {
	m := &Metrics{header: &profile.Header{}, Windows: []WindowMetrics{{DurationS: 1}, {DurationS: 1}, {DurationS: 60, Quiet: true}, {DurationS: 0.05, Quiet: true}, {DurationS: 60, Quiet: true}, {DurationS: 0.2}}}
	for i, want := range []bool{true, true, true, true, true, false} {
		if got := m.steadyWindow(i); got != want {
			t.Errorf("window %d (%.2f s, quiet %v): steady %v, want %v", i, m.Windows[i].DurationS, m.Windows[i].Quiet, got, want)
		}
	}
}
