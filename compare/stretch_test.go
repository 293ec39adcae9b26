package compare

import (
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
	wins := usableWindows(rec, 0)
	if len(wins) != 4 {
		t.Fatalf("%d usable windows, want 4 (the 3-interval one left out)", len(wins))
	}
	for _, i := range wins {
		if w := rec.Windows[i]; w.EndNS-w.StartNS != iv {
			t.Errorf("kept a window of %d ns", rec.Windows[i].EndNS-rec.Windows[i].StartNS)
		}
	}
	w := recordingWarnings(rec, rec, Side{}, Side{})
	if len(w) != 2 || !strings.Contains(w[0], "1 of 5 windows were stretched") {
		t.Errorf("warnings %q, want one per side about the stretched window", w)
	}
}
