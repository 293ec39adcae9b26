package heatmap

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/compare"
	"github.com/cacheheat/cacheheat/heatmap/synth"
	"github.com/cacheheat/cacheheat/model"
)

// The diff page must carry hostile process names only escaped, load
// nothing from elsewhere, and hold the charts' data in its data block.
func TestWriteDiffHostileNames(t *testing.T) {
	payloads := []string{`</script><script>alert(1)</script>`, `<img src=x onerror=alert(2)>`, "a\u2028b'\"&"}
	o := synth.Default()
	o.Names = payloads
	base := synth.Recording(o)
	o.Seed = 2
	newRec := synth.Recording(o)
	opts := compare.DefaultOptions()
	opts.BootstrapIters = 100
	res := compare.Compare(base, newRec, opts)
	if len(res.Metrics) == 0 {
		t.Fatal("no metrics compared")
	}

	var buf bytes.Buffer
	if err := WriteDiff(&buf, base, newRec, &res); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	var shell bytes.Buffer
	if err := WritePage(&shell, Page{Data: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	if n, want := strings.Count(page, "<script"), strings.Count(shell.String(), "<script"); n != want {
		t.Errorf("page has %d <script tags, want the shell's %d", n, want)
	}
	for _, p := range payloads[:2] {
		if strings.Contains(page, p) {
			t.Errorf("page carries %q raw", p)
		}
	}
	if !strings.Contains(page, "Content-Security-Policy") || strings.Contains(page, `src="http`) || strings.Contains(page, `href="http`) {
		t.Error("page lacks the CSP or loads something from elsewhere")
	}

	// The data block parses and holds every compared metric's windows.
	start := strings.Index(page, `id="`+DataElementID+`">`)
	end := strings.Index(page[start:], "</script>")
	var d DiffData
	if err := json.Unmarshal([]byte(page[start+len(`id="`+DataElementID+`">`):start+end]), &d); err != nil {
		t.Fatalf("data block: %v", err)
	}
	if len(d.Series) != len(res.Metrics) || len(d.Heat) == 0 || len(d.Rows) != 4 || d.Cols != 6 {
		t.Errorf("data block: %d series (want %d), %d heatmaps, %d rows, %d cols", len(d.Series), len(res.Metrics), len(d.Heat), len(d.Rows), d.Cols)
	}
	for _, h := range d.Heat {
		if len(h.Base) != len(d.Rows)*d.Cols || len(h.Delta) != len(h.Base) {
			t.Errorf("%s: %d cells, want %d", h.Event, len(h.Base), len(d.Rows)*d.Cols)
		}
	}
}

// The diff page draws in a real browser: every chart has pixels, no script
// error was logged and no hostile name ran as script.
func TestDiffInBrowser(t *testing.T) {
	o := synth.Default()
	o.Names = []string{`<img src=x onerror="window.__pwned=1">`, `</script><script>window.__pwned=2</script>`}
	base := synth.Recording(o)
	o.Seed = 3
	newRec := synth.Recording(o)
	opts := compare.DefaultOptions()
	opts.BootstrapIters = 100
	res := compare.Compare(base, newRec, opts)
	var buf bytes.Buffer
	if err := WriteDiff(&buf, base, newRec, &res); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(t.TempDir(), "diff.html")
	if err := os.WriteFile(page, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	st, _ := runSelftest(t, page)
	if len(st.Errors) > 0 || st.Pwned != "undefined" {
		t.Errorf("errors %q, window.__pwned %s", st.Errors, st.Pwned)
	}
	// The per-window plot, BASE, NEW and delta heatmaps, and one chart per
	// latency histogram.
	if want := 4 + len(BuildDiff(model.FromRecording(base), model.FromRecording(newRec), &res, DefaultMaxCells).Latency); len(st.Charts) != want {
		t.Errorf("%d charts drawn, want %d", len(st.Charts), want)
	}
	for _, c := range st.Charts {
		if c.NonBlank < 1000 {
			t.Errorf("chart %s has %d non-blank pixels", c.ID, c.NonBlank)
		}
	}
	t.Logf("self-test: %+v", st.Charts)
}

// TestDiffWhere: the differential flame graph colours a frame by its
// share's change, the function table lists the function that gained, and
// the findings diff says what appeared and what went away.
func TestDiffWhere(t *testing.T) {
	o := synth.Default()
	base := model.FromRecording(synth.Recording(o))
	o.Seed = 7
	newM := model.FromRecording(synth.Recording(o))
	root, ev := diffFlame(base, newM)
	if ev == "" || root.Value == 0 {
		t.Fatalf("no differential flame graph: %q %+v", ev, root)
	}
	// Shares of the children of any node sum to the node's own share;
	// so the deltas of the root's children sum to the root's (0: all
	// samples are all samples on both sides) within rounding, unless a
	// child under the minimum width was left out.
	if root.Delta != 0 {
		t.Errorf("root delta %v, want 0 (all of NEW against all of BASE)", root.Delta)
	}
	// A node only NEW has carries its whole share as the change.
	nt := sampleTree(newM, newM.Samples[ev])
	bt := &flameBuild{children: map[string]*flameBuild{}, value: 1}
	d := diffTree("all", nt, bt, float64(newM.Samples[ev].Total), 1, 0)
	for _, c := range d.Children {
		if want := round(float64(c.Value)/float64(newM.Samples[ev].Total), 5); c.Delta != want {
			t.Errorf("%s: delta %v against an empty BASE, want its share %v", c.Name, c.Delta, want)
		}
	}

	bf := &attribution.Result{Findings: []attribution.Finding{{Rule: "lock-contention", Severity: "high"}, {Rule: "io-wait", Severity: "medium"}}}
	nf := &attribution.Result{Findings: []attribution.Finding{{Rule: "lock-contention", Severity: "medium"}, {Rule: "page-fault-storm", Severity: "high"}}}
	got := map[string]string{}
	for _, c := range findingChanges(bf, nf) {
		got[c.Rule] = c.Change
	}
	if got["page-fault-storm"] != "appeared (high)" || got["io-wait"] != "went away (was medium)" || got["lock-contention"] != "severity high → medium" {
		t.Errorf("finding changes %v", got)
	}
}
