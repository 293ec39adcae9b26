package heatmap

import (
	"bytes"
	"encoding/json"
	"flag"
	"github.com/cacheheat/cacheheat/model"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/heatmap/synth"
	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/profile"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json from the current transforms")

// golden compares v's indented JSON with testdata/name.golden.json.
func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", name+".golden.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run 'go test ./heatmap -update' to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) && i < len(wl); i++ {
			if gl[i] != wl[i] {
				t.Fatalf("%s differs from %s at line %d:\n got: %s\nwant: %s\n(run 'go test ./heatmap -update' if the change is intended)", name, path, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("%s differs from %s in length: %d vs %d lines", name, path, len(gl), len(wl))
	}
}

func TestGoldenReport(t *testing.T) {
	golden(t, "small", build(synth.Recording(synth.Default()), 0))
}

func TestGoldenDownsampled(t *testing.T) {
	o := synth.Default()
	o.Windows = 50
	rec := synth.Recording(o)
	r := build(rec, 40)
	golden(t, "downsampled", struct {
		CPU     Grid      `json:"cpu"`
		Node    Grid      `json:"node"`
		Latency []Latency `json:"latency"`
	}{r.CPU, r.Node, r.Latency})
	if r.CPU.BinWindows != 5 || len(r.CPU.Bins) != 10 {
		t.Errorf("cpu grid: %d bins of %d windows, want 10 of 5 (4 rows, 40 cells)", len(r.CPU.Bins), r.CPU.BinWindows)
	}
}

// TestDownsampleKeepsTotals checks a long, wide recording stays within the
// cell budget without losing counts.
func TestDownsampleKeepsTotals(t *testing.T) {
	o := synth.Big()
	o.Windows = 300
	rec := synth.Recording(o)
	r := build(rec, 0)
	for _, g := range []Grid{r.CPU, r.Node} {
		if n := len(g.Rows) * len(g.Bins); n > DefaultMaxCells {
			t.Errorf("grid has %d cells, more than %d", n, DefaultMaxCells)
		}
	}
	if r.CPU.BinWindows < 2 {
		t.Errorf("128 CPUs x 300 windows not downsampled: %d windows per column", r.CPU.BinWindows)
	}
	totals := rec.CounterTotals(false)
	for _, m := range r.CPU.Metrics {
		if m.Kind != "event" {
			continue
		}
		var got, want uint64
		for _, v := range m.Values {
			got += v
		}
		for _, v := range totals[m.Name] {
			want += v
		}
		if got != want {
			t.Errorf("%s: heatmap cells sum to %d, recording to %d", m.Name, got, want)
		}
	}
	for _, l := range r.Latency {
		if n := len(l.Counts); n > DefaultMaxCells {
			t.Errorf("latency %s has %d cells", l.Name, n)
		}
		var got, want uint64
		for _, v := range l.Counts {
			got += v
		}
		for _, v := range rec.HistogramTotal(l.Name) {
			want += v
		}
		if got != want {
			t.Errorf("latency %s: cells sum to %d, recording to %d", l.Name, got, want)
		}
	}
}

func TestScriptJSON(t *testing.T) {
	in := map[string]string{"a": "</script><!--<script>\u2028\u2029&'\"", "b": "bad\xff\xfe"}
	b, err := ScriptJSON(in)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsAny(b, "<>&") || bytes.Contains(b, []byte("\u2028")) || bytes.Contains(b, []byte("\u2029")) || !utf8.Valid(b) {
		t.Fatalf("unsafe JSON for a script element: %s", b)
	}
	var back map[string]string
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back["a"] != in["a"] || back["b"] != "bad\uFFFD\uFFFD" {
		t.Fatalf("round trip: %q", back)
	}
}

// TestFindingLink: a finding keeps its heatmap link only where the
// per-core heatmap has that metric.
func TestFindingLink(t *testing.T) {
	g := Grid{Metrics: []Metric{{Name: "cpu-clock"}, {Name: "page-faults"}, {Name: "cpu-clock samples"},
		{Name: string(metric.LLCLoadMPKI)}, {Name: string(metric.LLCLoadMissRatio)}}}
	for in, want := range map[string]string{
		"page-faults":                       "page-faults",
		"cpu-clock samples":                 "cpu-clock samples",
		string(metric.LLCLoadMPKI):          string(metric.LLCLoadMPKI),
		string(metric.DTLBLoadMPKI):         "",
		"":                                  "",
		"mem_load_l3_hit_retired.xsnp_hitm": "",
	} {
		res := FindingsFrom(attribution.Result{Findings: []attribution.Finding{{Rule: "r", Metric: in}}}, g)
		if got := res.Findings[0].Metric; got != want {
			t.Errorf("link %q became %q, want %q", in, got, want)
		}
	}
}

func renderPage(t *testing.T, rec *profile.Recording, opts Options) string {
	t.Helper()
	var buf bytes.Buffer
	if err := Render(&buf, rec, opts); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestPageIsOffline checks the page loads nothing: a CSP that forbids
// external loads, no src/href to anything, ECharts inline.
func TestPageIsOffline(t *testing.T) {
	page := renderPage(t, synth.Recording(synth.Default()), Options{})
	if !strings.Contains(page, echartsJS[:200]) {
		t.Error("ECharts is not inlined")
	}
	// ECharts' own code has markup in strings ("<img" for its image
	// export); look at the rest of the page.
	page = strings.Replace(page, echartsJS, "", 1)
	if !strings.Contains(page, `<meta http-equiv="Content-Security-Policy" content="`+html.EscapeString(CSP)+`">`) {
		t.Error("no CSP meta tag")
	}
	for _, bad := range []string{"<script src", "<link", "<img", "<iframe", "@import", "url(http"} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	if n := strings.Count(page, "<script"); n != 4 {
		t.Errorf("page has %d <script elements, want 4 (error capture, data, ECharts, report)", n)
	}
}

// hostileNames are the payloads of the hostile-names tests. The scripts
// set window.__pwned, which the browser test asserts stays undefined.
var hostileNames = []string{
	`</script><script>window.__pwned=1;alert(1)</script>`,
	`<img src=x onerror="window.__pwned=1;alert(1)">`,
	`"quoted" 'single' name`,
	"line\u2028sep\u2029para",
	"bad\xff\xfeutf8",
	`<!--<script>window.__pwned=2</script>`,
	`{{.Title}}%MY_ECHARTS%__f__`,
}

func hostileRecording() *profile.Recording {
	o := synth.Default()
	o.Names = hostileNames
	o.Unsupported = append(o.Unsupported, hostileNames[0])
	rec := synth.Recording(o)
	rec.Header.Host.Hostname = hostileNames[1]
	rec.Header.Host.CPUModel = hostileNames[3]
	rec.Header.Events[len(rec.Header.Events)-1].Reason = hostileNames[1]
	return rec
}

// dataBlock extracts the page's JSON data block.
var dataBlockRE = regexp.MustCompile(`(?s)<script type="application/json" id="` + DataElementID + `">(.*?)</script>`)

func TestHostileNamesEscaped(t *testing.T) {
	page := strings.Replace(renderPage(t, hostileRecording(), Options{}), echartsJS, "", 1)
	if !utf8.ValidString(page) {
		t.Error("page is not valid UTF-8")
	}
	if n := strings.Count(page, "<script"); n != 4 {
		t.Errorf("page has %d <script elements, want 4: a name broke out", n)
	}
	for _, bad := range []string{"<img", "<!--", "__pwned=1;alert(1)</script>"} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains unescaped %q", bad)
		}
	}
	m := dataBlockRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no data block")
	}
	if strings.ContainsAny(m[1], "<>&\u2028\u2029") {
		t.Error("data block contains a raw '<', '>', '&', U+2028 or U+2029")
	}
	var d map[string]any
	if err := json.Unmarshal([]byte(m[1]), &d); err != nil {
		t.Fatalf("data block is not JSON: %v", err)
	}
	// The names are shown, as text.
	for _, want := range []string{"&lt;/script&gt;&lt;script&gt;window.__pwned=1;alert(1)&lt;/script&gt;", "&lt;img src=x onerror=&#34;window.__pwned=1;alert(1)&#34;&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("page does not show %q as text", want)
		}
	}
	// A recording read from a file carries the same names (the codec
	// turns invalid UTF-8 into U+FFFD): render that too.
	path := filepath.Join(t.TempDir(), "hostile.rec")
	o := synth.Default()
	o.Names = hostileNames
	if err := synth.Write(path, o); err != nil {
		t.Fatal(err)
	}
	rec, err := profile.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if p := strings.Replace(renderPage(t, rec, Options{}), echartsJS, "", 1); strings.Count(p, "<script") != 4 || strings.Contains(p, "<img") {
		t.Error("report of the hostile recording file lets a name out")
	}
}

func TestFindingsSection(t *testing.T) {
	rec := synth.Recording(synth.Default())
	page := renderPage(t, rec, Options{NoFindings: true})
	if strings.Contains(page, `id="findings"`) {
		t.Error("findings section present with NoFindings")
	}
	f := FindingsFrom(attribution.Result{
		Findings: []attribution.Finding{{Rule: "r1", Title: "<b>hot</b> core", Severity: "high", Confidence: 0.8,
			Scope:    attribution.Scope{CPUs: []int{1}, StartNS: 1e9, EndNS: 3e9},
			Evidence: []attribution.Evidence{{Metric: "page-faults/s", Value: 2e4, Op: ">", Threshold: 1e4, Unit: "/s"}}, Metric: "page-faults"}},
		NotEvaluated: []attribution.NotEvaluated{{Rule: "r2", Title: "LLC", Needs: []string{"LLC-loads"}, Reason: "unsupported"}},
	}, build(rec, 0).CPU)
	if f.Findings[0].Metric != "page-faults" {
		t.Errorf("finding linked to metric %q, want page-faults", f.Findings[0].Metric)
	}
	page = renderPage(t, rec, Options{Findings: f})
	for _, want := range []string{`id="findings"`, `id="finding-0"`, "&lt;b&gt;hot&lt;/b&gt; core", `data-finding="0"`, "Not evaluated", "LLC-loads", "(page-faults)", "CPUs 1;"} {
		if !strings.Contains(page, want) {
			t.Errorf("findings section lacks %q", want)
		}
	}
	if i, j := strings.Index(page, `id="findings"`), strings.Index(page, `id="cpu"`); i > j {
		t.Error("findings come after the heatmaps")
	}
}

// build is Build of a recording's model.
func build(rec *profile.Recording, maxCells int) Report {
	return Build(model.FromRecording(rec), maxCells, nil)
}
