package heatmap

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/heatmap/synth"
	"github.com/cacheheat/cacheheat/profile"
)

// withFunction adds a --func function named name to rec: in each window
// 100 calls of ~20 us and 2 of ~1.5 ms with 1024 minor faults each.
func withFunction(rec *profile.Recording, name string) *profile.Recording {
	rec.Header.Functions = []profile.FunctionSpec{{ID: 0, Name: name, Binary: "/srv/" + name, Lang: profile.LangC, ReturnProbes: 1, Counters: profile.FunctionCounters}}
	sums := func(calls, lat, faults uint64) []uint64 {
		s := make([]uint64, len(profile.FunctionCounters))
		s[0], s[3] = calls*lat, calls*faults // on-cpu-ns, minor-faults
		return s
	}
	for i := range rec.Windows {
		rec.Windows[i].Functions = []profile.FunctionWindow{{ID: 0, Entries: 102, Buckets: []profile.FunctionBucket{
			{Bucket: 14, Calls: 100, Counted: 100, LatencyNS: 100 * 20000, Sums: sums(100, 20000, 0)},
			{Bucket: 20, Calls: 2, Counted: 2, LatencyNS: 2 * 1500000, Sums: sums(2, 1500000, 1024)},
		}}}
	}
	return rec
}

func TestFunctionSection(t *testing.T) {
	rec := withFunction(synth.Recording(synth.Default()), hostileNames[1])
	r := build(rec, 0)
	if len(r.Functions) != 1 {
		t.Fatalf("%d function views, want 1", len(r.Functions))
	}
	f := r.Functions[0]
	n := uint64(len(rec.Windows)) * 102
	if f.Calls != n || f.Chart != len(r.Latency) || !f.HasTail || f.Tail.Cause != profile.FuncMinFlt {
		t.Errorf("view: %d calls (want %d), chart %d (want %d), tail %v, cause %q", f.Calls, n, f.Chart, len(r.Latency), f.HasTail, f.Tail.Cause)
	}
	var heat uint64
	for _, c := range f.Latency.Counts {
		heat += c
	}
	if heat != n {
		t.Errorf("the function's heatmap holds %d calls, want %d", heat, n)
	}
	page := strings.Replace(renderPage(t, rec, Options{}), echartsJS, "", 1)
	for _, want := range []string{`id="functions"`, `id="chart-latency-` + itoa(f.Chart) + `"`, "the tail&#39;s cause is page faults", `<td class="name">minor-faults</td>`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Count(page, "<script") != 4 || strings.Contains(page, "<img") {
		t.Error("the function's name broke out of the page")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestBrowserFunctions draws the function heatmap in Chromium, with a
// hostile function name.
func TestBrowserFunctions(t *testing.T) {
	page := filepath.Join(t.TempDir(), "func.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := Render(f, withFunction(hostileRecording(), hostileNames[0]), Options{}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	dom := checkInBrowser(t, page, 5) // the hostile report's 4 and the function's
	if !strings.Contains(dom, "&lt;/script&gt;&lt;script&gt;window.__pwned=1;alert(1)&lt;/script&gt;") {
		t.Error("the function's name is not shown as text")
	}
}
