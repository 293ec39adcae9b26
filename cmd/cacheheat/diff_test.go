package main

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/profile"
)

// writeSynth writes a 2-CPU recording of 12 windows of 500 ms in which
// the command reports ops and context switches around the given means.
func writeSynth(t *testing.T, path string, seed uint64, ops, ctxsw float64, comm string) {
	writeSynthN(t, path, seed, ops, ctxsw, comm, 12)
}

// writeSynthN is writeSynth with n windows.
func writeSynthN(t *testing.T, path string, seed uint64, ops, ctxsw float64, comm string, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	const interval = int64(500e6)
	h := profile.Header{
		Host: profile.Host{Hostname: "host", CPUModel: "cpu", Mode: "software", Topology: profile.Topology{
			CPUs:  []profile.CPU{{ID: 0, Node: 0, L3: -1, Siblings: []int{0}}, {ID: 1, Node: 0, L3: -1, Siblings: []int{1}}},
			Nodes: []profile.Node{{ID: 0, CPUs: []int{0, 1}}},
		}},
		Target:   profile.Target{Kind: profile.TargetCommand, Command: []string{comm}},
		Settings: profile.Settings{IntervalNS: interval, SampleHz: 99},
		Events:   []profile.EventStatus{{Name: "context-switches", Kind: "software", Status: profile.StatusMeasured}},
	}
	w, err := profile.Create(path, h)
	if err != nil {
		t.Fatal(err)
	}
	noisy := func(m float64) float64 { return math.Max(0, m*(1+0.05*rng.NormFloat64())) }
	for i := 0; i < n; i++ {
		cs := []uint64{uint64(noisy(ctxsw / 4)), uint64(noisy(ctxsw / 4))}
		hist := make([]uint64, profile.HistBuckets)
		hist[12] = uint64(noisy(100))
		win := profile.Window{
			StartNS: int64(i) * interval, EndNS: int64(i+1) * interval,
			Counters:   []profile.Counter{{Event: "context-switches", PerCPU: cs}},
			Processes:  []profile.Process{{PID: 10, Comm: comm, Counts: map[string]uint64{"context-switches": cs[0] + cs[1]}}},
			Histograms: []profile.Histogram{{Name: profile.HistOffCPU, Unit: "ns", PerCPU: []profile.Counts{hist}}},
			AppMetrics: map[string]float64{"ops_per_sec": noisy(ops)},
		}
		if err := w.WriteWindow(&win); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(profile.Trailer{EndReason: profile.EndDuration, AppMetrics: map[string]float64{"ops_per_sec": ops}}); err != nil {
		t.Fatal(err)
	}
}

func runCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestDiffExitCodes(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.rec")
	good2 := filepath.Join(dir, "good2.rec")
	bad := filepath.Join(dir, "bad.rec")
	writeSynth(t, good, 1, 1e6, 4000, "bench")
	writeSynth(t, good2, 2, 1e6, 4000, "bench")
	writeSynth(t, bad, 3, 4e5, 9000, "bench")

	if code, out, errs := runCmd("diff", good, good2); code != exitOK {
		t.Errorf("same distribution: exit %d, want 0\n%s%s", code, out, errs)
	}

	html, md := filepath.Join(dir, "diff.html"), filepath.Join(dir, "pr.md")
	code, out, errs := runCmd("diff", good, bad, "-o", html, "--markdown", md)
	if code != exitRegression {
		t.Fatalf("good -> bad: exit %d, want 1\n%s%s", code, out, errs)
	}
	for _, want := range []string{"regression", "app.ops_per_sec", "context-switches/s", "REGRESSION:"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// Outputs are written even though the exit code is 1.
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatalf("no HTML report: %v", err)
	}
	for _, want := range []string{"Content-Security-Policy", "app.ops_per_sec", "cacheheat diff"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if bytes.Contains(page, []byte("<script src")) {
		t.Error("HTML loads a script from elsewhere")
	}
	summary, err := os.ReadFile(md)
	if err != nil || !bytes.Contains(summary, []byte("| regression |")) {
		t.Errorf("markdown summary missing or without regressions (%v):\n%s", err, summary)
	}

	code, out, _ = runCmd("diff", bad, good)
	if code != exitOK || !strings.Contains(out, "improvement") {
		t.Errorf("bad -> good: exit %d, want 0 with improvements\n%s", code, out)
	}

	code, out, _ = runCmd("diff", "--json", good, bad)
	var doc struct {
		Counts  map[string]int `json:"counts"`
		Metrics []struct {
			Name    string `json:"name"`
			Verdict string `json:"verdict"`
		} `json:"metrics"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitRegression || doc.Counts["regression"] == 0 {
		t.Errorf("--json: exit %d, err %v, counts %v\n%s", code, err, doc.Counts, out)
	}

	// Selecting only the off-CPU metrics: nothing moved there.
	if code, out, _ := runCmd("diff", "--metric", "offcpu.*", good, bad); code != exitOK {
		t.Errorf("--metric offcpu.*: exit %d, want 0\n%s", code, out)
	}
	// A threshold larger than the effect: no regression.
	if code, out, _ := runCmd("diff", "--threshold", "600%", good, bad); code != exitOK {
		t.Errorf("--threshold 600%%: exit %d, want 0\n%s", code, out)
	}

	for _, args := range [][]string{
		{"diff", good},
		{"diff", good, bad, "extra"},
		{"diff", "--threshold", "lots", good, bad},
		{"diff", "--alpha", "2", good, bad},
		{"diff", "--no-such-flag", good, bad},
		{"diff", good, filepath.Join(dir, "missing.rec")},
	} {
		if code, _, errs := runCmd(args...); code != exitUsage || errs == "" {
			t.Errorf("%v: exit %d, want 2 with a message (%q)", args[1:], code, errs)
		}
	}

	junk := filepath.Join(dir, "junk.rec")
	if err := os.WriteFile(junk, []byte("not a recording at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCmd("diff", good, junk); code != exitFormat {
		t.Errorf("unreadable NEW: exit %d, want 4 (%s)", code, errs)
	}
}

func TestParseThreshold(t *testing.T) {
	for in, want := range map[string]float64{"5%": 0.05, "0.05": 0.05, " 12.5 %": 0.125, "0": 0} {
		if got, err := parseThreshold(in); err != nil || math.Abs(got-want) > 1e-12 {
			t.Errorf("parseThreshold(%q) = %g, %v; want %g", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-5%", "NaN"} {
		if _, err := parseThreshold(in); err == nil {
			t.Errorf("parseThreshold(%q) accepted", in)
		}
	}
}

// TestDiffUndecided: two 3-window recordings cannot show anything at
// alpha 0.01, however different: exit 2, naming what could not be decided
// and how many windows would, never "OK".
func TestDiffUndecided(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.rec"), filepath.Join(dir, "b.rec")
	writeSynthN(t, a, 1, 1e6, 4000, "bench", 3)
	writeSynthN(t, b, 2, 4e5, 9000, "bench", 3)
	code, out, errs := runCmd("diff", a, b)
	if code != exitUsage {
		t.Fatalf("exit %d, want 2\n%s%s", code, out, errs)
	}
	for _, want := range []string{"cannot decide", "app.ops_per_sec", "Record at least", "-i ", "UNDECIDED"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "OK:") {
		t.Errorf("undecided diff says OK:\n%s", out)
	}
	if !strings.Contains(errs, "record at least") {
		t.Errorf("stderr %q does not say what to do", errs)
	}
}
