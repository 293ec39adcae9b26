package heatmap

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/probe"
	"github.com/cacheheat/cacheheat/profile"
	"github.com/cacheheat/cacheheat/symbolize"
)

//go:embed report.tmpl
var reportTmplText string

//go:embed functions.tmpl
var functionsTmplText string

//go:embed report.js
var reportJS string

//go:embed common.js
var commonJS string

//go:embed flame.js
var flameJS string

//go:embed live.js
var liveJS string

//go:embed live.tmpl
var liveTmplText string

// Options tune a report.
type Options struct {
	// MaxCells caps the cells of each heatmap; 0 means DefaultMaxCells.
	MaxCells int
	// Findings fills the findings section; nil means attribution.Analyze
	// of the recording. NoFindings leaves the section out.
	Findings   *attribution.Result
	NoFindings bool
	// Probe is the recording host's probe (cacheheat probe): the
	// per-core rows follow its order, and contention findings cite what
	// a line bounce costs between their CPUs.
	Probe *probe.Result
	// Lines resolves frames to source lines for the hot-lines section,
	// from the binaries on this host; nil leaves the section out.
	Lines *symbolize.Lines
}

// TemplateFuncs are the formatting helpers of the report's templates,
// exported so the diff report formats numbers the same way.
var TemplateFuncs = template.FuncMap{
	"num":   fmtCount,
	"numf":  fmtFloat,
	"pct":   func(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" },
	"ns":    metric.FormatNS,
	"bytes": fmtBytes,
	"join":  strings.Join,
	"float": func(v int64) float64 { return float64(v) },
	"sub":   func(a, b int) int { return a - b },
	"base":  filepath.Base,
	// plural writes "1 window", "2 windows", "3 processes".
	"plural": profile.Plural,
	// cpus writes ids as ranges: "0-3,8".
	"cpus": cpuList,
	"pids": pidList,
	// measure writes an evidence value as the CLI does: ns as a
	// duration, ratios as percentages.
	"measure": metric.FormatValue,
	// flame is the data of the "flame" template: which flame graph of
	// the page's data block, and what its widths count.
	"flame": func(i int, unit string) flameRef { return flameRef{i, unit} },
}

// flameRef places flame graph Index of the page's data (the flames list)
// with its controls; Unit says what the widths count ("samples").
type flameRef struct {
	Index int
	Unit  string
}

var reportTmpl = template.Must(template.Must(template.Must(template.New("report").Funcs(TemplateFuncs).Parse(reportTmplText)).Parse(liveTmplText)).Parse(functionsTmplText))

// pageData is what the report's script reads from the data block: only
// what it draws. Tables are rendered by html/template on the server side.
// The live page has the same block with Live set and empty charts, which
// its stream then fills.
type pageData struct {
	Skeletons Skeletons `json:"skeletons"`
	Charts
	Flames []FlameNode `json:"flames"`
	// OffCPUFlame is the off-CPU flame graph (microseconds).
	OffCPUFlame *FlameNode          `json:"offcpu_flame,omitempty"`
	Findings    *attribution.Result `json:"findings,omitempty"`
	Live        bool                `json:"live,omitempty"`
}

// Render writes the HTML report of a recording in memory to w, with its
// findings (attribution.Analyze of its model) unless opts say otherwise:
// RenderModel for tests and tools that hold a whole recording.
func Render(w io.Writer, rec *profile.Recording, opts Options) error {
	m := model.FromRecording(rec)
	var res *attribution.Result
	if !opts.NoFindings && opts.Findings == nil {
		r := attribution.Analyze(m)
		res = &r
	}
	return RenderModel(w, m, res, opts)
}

// RenderModel writes the HTML report of a recording's model to w. Its
// findings are res, attribution.Analyze of the same model, which the
// caller runs: the page draws what it is given and analyzes nothing.
// opts.Findings, when set, is shown as it is instead; nil for both
// leaves no findings.
func RenderModel(w io.Writer, m *model.Model, res *attribution.Result, opts Options) error {
	var order []int
	if opts.Probe != nil {
		order = opts.Probe.Order
	}
	r := Build(m, opts.MaxCells, order)
	r.HotLines = HotLines(m, opts.Lines)
	switch {
	case opts.NoFindings:
	case opts.Findings != nil:
		r.Findings = opts.Findings
	case res != nil:
		r.Findings = FindingsFrom(*res, r.CPU)
	}
	if opts.Probe != nil {
		r.Machine = MachineFrom(opts.Probe, m.Header.Host.Hostname, r.Findings)
	}
	return RenderReport(w, r)
}

// RenderReport writes an already built report to w.
func RenderReport(w io.Writer, r Report) error {
	sk, err := BuildSkeletons()
	if err != nil {
		return err
	}
	var body bytes.Buffer
	if err := reportTmpl.ExecuteTemplate(&body, "report", r); err != nil {
		return fmt.Errorf("rendering report body: %w", err)
	}
	data := pageData{Skeletons: sk, Charts: Charts{CPU: r.CPU, Node: r.Node, Latency: r.Latency}, Flames: []FlameNode{}, Findings: r.Findings}
	// Function heatmaps are drawn like the histograms', after them
	// (FunctionView.Chart counts on it); their elements are in the
	// functions section.
	for _, f := range r.Functions {
		data.Latency = append(data.Latency, f.Latency)
	}
	for _, s := range r.Samples {
		data.Flames = append(data.Flames, s.Flame)
	}
	if r.OffCPU != nil {
		data.OffCPUFlame = &r.OffCPU.Flame
	}
	return WritePage(w, Page{
		Banner: r.Banner,
		Title:  r.Summary.Title,
		Body:   template.HTML(body.String()),
		Data:   data,
		Script: template.JS(commonJS + flameJS + reportJS),
	})
}

// WriteLivePage writes the live view's page: the report's heatmap
// sections and script, empty until the page's event stream (GET /events
// beside it) sends the charts of the windows so far, each update one
// Charts value as BuildCharts makes it.
func WriteLivePage(w io.Writer) error {
	sk, err := BuildSkeletons()
	if err != nil {
		return err
	}
	var body bytes.Buffer
	if err := reportTmpl.ExecuteTemplate(&body, "live", nil); err != nil {
		return fmt.Errorf("rendering live page: %w", err)
	}
	return WritePage(w, Page{
		Title:  "cacheheat live",
		Body:   template.HTML(body.String()),
		Data:   pageData{Skeletons: sk, Charts: Charts{Latency: []Latency{}}, Flames: []FlameNode{}, Live: true},
		Script: template.JS(commonJS + flameJS + reportJS + liveJS),
		Stream: true,
	})
}

// pidList names a finding's processes: every PID up to ten, else the
// first ten and how many more.
func pidList(pids []int) string {
	const most = 10
	parts := make([]string, 0, most)
	for i, p := range pids {
		if i == most {
			break
		}
		parts = append(parts, strconv.Itoa(p))
	}
	s := "PID"
	if len(pids) > 1 {
		s = "PIDs"
	}
	s += " " + strings.Join(parts, ", ")
	if n := len(pids) - most; n > 0 {
		s += " and " + profile.Plural(n, "more process")
	}
	return s
}

// fmtCount writes a count with thin grouping: 12 345 678.
func fmtCount(v uint64) string { return profile.GroupDigits(v, "\u202f") }

// fmtFloat writes a float with about four significant digits.
func fmtFloat(v float64) string {
	if math.Abs(v) >= 1e4 && math.Abs(v) < 1e15 {
		return fmtCount(uint64(math.Round(math.Abs(v))))
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// fmtBytes writes a size in binary units: 32 KiB, 1.5 MiB.
func fmtBytes(b int64) string {
	switch {
	case b >= 1<<30:
		return strconv.FormatFloat(float64(b)/(1<<30), 'g', 3, 64) + " GiB"
	case b >= 1<<20:
		return strconv.FormatFloat(float64(b)/(1<<20), 'g', 3, 64) + " MiB"
	case b >= 1<<10:
		return strconv.FormatFloat(float64(b)/(1<<10), 'g', 3, 64) + " KiB"
	}
	return strconv.FormatInt(b, 10) + " B"
}
