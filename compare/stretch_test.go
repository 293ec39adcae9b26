package compare

import (
	"slices"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/profile"
)

// TestStretchedWindowsLeftOut: a window that lasted 3 intervals (the
// recorder was starved) is not one of the values compared, and diff warns
// about it; a regular window is kept.
func TestStretchedWindowsLeftOut(t *testing.T) {
	const iv = int64(250e6)
	rec := &profile.Recording{Header: profile.Header{Settings: profile.Settings{IntervalNS: iv}}}
	ends := []int64{iv, 2 * iv, 5 * iv, 6 * iv, 7 * iv}
	start := int64(0)
	for _, e := range ends {
		rec.Windows = append(rec.Windows, profile.Window{StartNS: start, EndNS: e})
		start = e
	}
	for i := range rec.Windows {
		rec.Windows[i].Counters = []profile.Counter{{Event: "cpu-clock", PerCPU: []uint64{250}}}
	}
	rec.Windows[2].Counters[0].PerCPU[0] = 1e9 // the stretched window's
	red := Reduce(rec, 0)
	if red.Side.Used != 4 {
		t.Fatalf("%d usable windows, want 4 (the 3-interval one left out)", red.Side.Used)
	}
	var rate []float64
	for _, s := range red.Series {
		if s.Name == "cpu-clock/s" {
			rate = s.Values
		}
	}
	if len(rate) != 4 || slices.Max(rate) != 1000 || slices.Min(rate) != 1000 {
		t.Errorf("cpu-clock/s values %v, want the 4 regular windows' 1000/s", rate)
	}
	w := recordingWarnings(red, red)
	if len(w) != 2 || !strings.Contains(w[0], "1 of 5 windows were stretched") {
		t.Errorf("warnings %q, want one per side about the stretched window", w)
	}
}
