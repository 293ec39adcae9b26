package heatmap

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/compare"
	"github.com/cacheheat/cacheheat/heatmap/synth"
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
