package heatmap

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/profile"
)

//go:embed report.tmpl
var reportTmplText string

//go:embed report.js
var reportJS string

//go:embed common.js
var commonJS string

// Options tune a report.
type Options struct {
	// MaxCells caps the cells of each heatmap; 0 means DefaultMaxCells.
	MaxCells int
	// Findings fills the findings section; nil means attribution.Analyze
	// of the recording. NoFindings leaves the section out.
	Findings   *Findings
	NoFindings bool
}

// TemplateFuncs are the formatting helpers of the report's templates,
// exported so the diff report formats numbers the same way.
var TemplateFuncs = template.FuncMap{
	"num":   fmtCount,
	"numf":  fmtFloat,
	"pct":   func(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" },
	"ns":    profile.FormatNS,
	"bytes": fmtBytes,
	"join":  strings.Join,
	"float": func(v int64) float64 { return float64(v) },
}

var reportTmpl = template.Must(template.New("report").Funcs(TemplateFuncs).Parse(reportTmplText))

// pageData is what the report's script reads from the data block: only
// what it draws. Tables are rendered by html/template on the server side.
type pageData struct {
	Skeletons Skeletons   `json:"skeletons"`
	CPU       Grid        `json:"cpu"`
	Node      Grid        `json:"node"`
	Latency   []Latency   `json:"latency"`
	Flames    []FlameNode `json:"flames"`
	Findings  *Findings   `json:"findings,omitempty"`
}

// Render writes rec's HTML report to w.
func Render(w io.Writer, rec *profile.Recording, opts Options) error {
	r := Build(rec, opts.MaxCells)
	switch {
	case opts.NoFindings:
	case opts.Findings != nil:
		r.Findings = opts.Findings
	default:
		r.Findings = FindingsFrom(attribution.Analyze(rec), r.CPU)
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
	view := struct {
		Report
		CPUHeight, NodeHeight int
	}{r, chartHeight(len(r.CPU.Rows)), chartHeight(len(r.Node.Rows))}
	if err := reportTmpl.ExecuteTemplate(&body, "report", view); err != nil {
		return fmt.Errorf("rendering report body: %w", err)
	}
	data := pageData{Skeletons: sk, CPU: r.CPU, Node: r.Node, Latency: r.Latency, Flames: []FlameNode{}, Findings: r.Findings}
	for _, s := range r.Samples {
		data.Flames = append(data.Flames, s.Flame)
	}
	return WritePage(w, Page{
		Banner: r.Banner,
		Title:  r.Summary.Title,
		Body:   template.HTML(body.String()),
		Data:   data,
		Script: template.JS(commonJS + reportJS),
	})
}

// chartHeight gives a heatmap enough height for its rows, within reason.
func chartHeight(rows int) int {
	return min(900, max(260, 120+rows*14))
}

// fmtCount writes a count with thin grouping: 12 345 678.
func fmtCount(v uint64) string {
	s := strconv.FormatUint(v, 10)
	if len(s) <= 4 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteString("\u202f")
		}
		b.WriteRune(c)
	}
	return b.String()
}

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
