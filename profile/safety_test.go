package profile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDataAfterTrailer: bytes after the trailer are reported in Warning,
// not silently ignored; a file that ends at its trailer has no warning.
func TestDataAfterTrailer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.rec")
	writeTestRecording(t, path, 2, true)
	rec, err := ReadFile(path)
	if err != nil || rec.Warning != "" {
		t.Fatalf("clean file: %v, warning %q", err, rec.Warning)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Two recordings concatenated.
	if err := os.WriteFile(path, append(b, b...), 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err = ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Trailer == nil || len(rec.Windows) != 2 || !strings.Contains(rec.Warning, "after the trailer") {
		t.Errorf("concatenated: %d windows, trailer %v, warning %q; want 2, the trailer, and a warning", len(rec.Windows), rec.Trailer != nil, rec.Warning)
	}
}

// TestStretched: a window longer than StretchFactor times the interval is
// counted, one within it is not.
func TestStretched(t *testing.T) {
	const iv = int64(1e9)
	rec := &Recording{Header: Header{Settings: Settings{IntervalNS: iv}}}
	for _, n := range []int64{iv, iv + iv/10, 2900e6, iv, 1600e6, iv / 2} {
		start := int64(0)
		if k := len(rec.Windows); k > 0 {
			start = rec.Windows[k-1].EndNS
		}
		rec.Windows = append(rec.Windows, Window{StartNS: start, EndNS: start + n})
	}
	s := Stretched(rec)
	if s.Stretched != 2 || s.LongestNS != 2900e6 || s.Windows != 6 {
		t.Errorf("Stretched = %+v, want 2 of 6, longest 2.9 s", s)
	}
	if got := s.String(); !strings.HasPrefix(got, "2 of 6 windows were stretched") || !strings.Contains(got, "longest 2.9 s") {
		t.Errorf("String() = %q", got)
	}
	sum := summarize(rec)
	if sum.StretchedWindows != 2 || sum.LongestWindowS != 2.9 {
		t.Errorf("summary: %d stretched, longest %g s", sum.StretchedWindows, sum.LongestWindowS)
	}
	if (Stretch{Windows: 3}).String() != "" {
		t.Error("no stretched window must give no warning")
	}
}
