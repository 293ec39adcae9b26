package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/profile"
)

// TestRecordQuiet: an empty cgroup recorded for 3 s in 200-ms windows is
// one window and one quiet window (record --quiet-max's default), which
// inspect counts apart from stretched ones and the report notes; with
// --quiet-max 0 the same recording has a window every interval. A
// --quiet-max that is negative or shorter than the interval is a usage
// error.
func TestRecordQuiet(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	cg, err := os.MkdirTemp(cgroup2MountFromMountinfo(t), "cacheheat-test-")
	if err != nil {
		t.Skipf("needs a writable cgroup v2 hierarchy: %v", err)
	}
	t.Cleanup(func() { os.Remove(cg) })
	var out, errb bytes.Buffer
	for _, bad := range [][]string{{"--quiet-max", "-1s"}, {"--quiet-max", "10ms"}, {"-i", "2s", "--quiet-max", "1s"}} {
		errb.Reset()
		args := append([]string{"record", "-G", cg, "-o", filepath.Join(dir, "x.rec")}, bad...)
		if code := run(args, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "--quiet-max") {
			t.Errorf("record %v: exit %d, want %d and a message about --quiet-max (%s)", bad, code, exitUsage, errb.String())
		}
	}
	for _, tc := range []struct {
		quietMax                string
		windows, quiet, stretch int
	}{{"", 2, 1, 0}, {"0", 15, 0, 0}} {
		rec := filepath.Join(dir, "q"+tc.quietMax+".rec")
		args := []string{"record", "-q", "-G", cg, "-d", "3s", "-i", "200ms", "-o", rec}
		if tc.quietMax != "" {
			args = append(args, "--quiet-max", tc.quietMax)
		}
		out.Reset()
		errb.Reset()
		if code := run(args, &out, &errb); code != 0 {
			t.Fatalf("record %v: exit %d: %s", args, code, errb.String())
		}
		out.Reset()
		if code := run([]string{"inspect", "--json", rec}, &out, &errb); code != 0 {
			t.Fatalf("inspect: exit %d: %s", code, errb.String())
		}
		var s profile.Summary
		if err := json.Unmarshal(out.Bytes(), &s); err != nil {
			t.Fatal(err)
		}
		// Without quiet windows a window may be lost to a late tick on a
		// busy host; never gained.
		if s.QuietWindows != tc.quiet || s.StretchedWindows != tc.stretch || s.Windows > tc.windows || (tc.quiet > 0 && s.Windows != tc.windows) || s.Windows < tc.windows-2 {
			t.Errorf("--quiet-max %q: %d windows, %d quiet (%.1f s), %d stretched; want %d, %d, %d", tc.quietMax, s.Windows, s.QuietWindows, s.QuietS, s.StretchedWindows, tc.windows, tc.quiet, tc.stretch)
		}
		if tc.quiet > 0 && (s.QuietS < 2 || s.LongestWindowS > 0.5) {
			t.Errorf("quiet windows last %.1f s, the longest other %.1f s: want the 3 s less one window quiet", s.QuietS, s.LongestWindowS)
		}
		html := filepath.Join(dir, "q"+tc.quietMax+".html")
		if code := run([]string{"report", "-o", html, rec}, &out, &errb); code != 0 {
			t.Fatalf("report: exit %d: %s", code, errb.String())
		}
		b, err := os.ReadFile(html)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(b), "windows were quiet"); got != (tc.quiet > 0) {
			t.Errorf("--quiet-max %q: the report notes quiet windows: %v", tc.quietMax, got)
		}
	}
}
