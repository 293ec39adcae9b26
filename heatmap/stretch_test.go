package heatmap

import (
	"strconv"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/heatmap/synth"
)

// TestStretchedWindowsShown: a recording whose recorder was starved (some
// windows much longer than the interval) says so in the report's
// warnings, counted from the windows; one without them does not.
func TestStretchedWindowsShown(t *testing.T) {
	rec := synth.Recording(synth.Default())
	if page := renderPage(t, rec, Options{}); strings.Contains(page, "windows were stretched") {
		t.Error("a recording with regular windows is reported as stretched")
	}
	iv := rec.Header.Settings.IntervalNS
	shift := int64(0)
	for i := range rec.Windows {
		w := &rec.Windows[i]
		w.StartNS += shift
		if i == 2 || i == 5 {
			shift += 2 * iv // the window lasted 3 intervals
		}
		w.EndNS += shift
	}
	page := renderPage(t, rec, Options{})
	if !strings.Contains(page, "2 of "+strconv.Itoa(len(rec.Windows))+" windows were stretched") {
		t.Error("the report does not say that 2 windows were stretched")
	}
}

// TestDropWindowsShown: a recording whose kernel side dropped samples
// (the sample ring was full) says in the report's warnings which windows
// lost what; one without drops does not.
func TestDropWindowsShown(t *testing.T) {
	rec := synth.Recording(synth.Default())
	if page := renderPage(t, rec, Options{}); strings.Contains(page, "data lost in") {
		t.Error("a recording without drops is reported as having lost data")
	}
	rec.Windows[3].Drops.SampleMapFull = 42
	page := renderPage(t, rec, Options{})
	want := "data lost in 1 window of " + strconv.Itoa(len(rec.Windows)) + " (window " + strconv.Itoa(rec.Windows[3].Index) + ": 42): 42 samples lost (sample ring full)"
	if !strings.Contains(page, want) {
		t.Errorf("the report does not say %q", want)
	}
}
