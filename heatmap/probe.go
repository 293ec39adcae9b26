package heatmap

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/probe"
	"github.com/cacheheat/cacheheat/profile"
)

// The machine page (cacheheat probe -o): the core-to-core matrix in
// topology order with its sharing groups outlined, the latency
// staircase with the cache sizes marked, the bandwidth table and the
// topology, in the report's shell. As in the report, go-echarts builds
// the charts' static skeletons and the page's script fills in the data.

//go:embed probe.js
var probeJS string

//go:embed probe.tmpl
var probeTmplText string

var probeTmpl = template.Must(template.New("probe").Funcs(template.FuncMap{
	"bytes":  metric.FormatBytes,
	"gbps":   func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"pct":    func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) },
	"cpus":   host.FormatCPUList,
	"plural": profile.Plural,
}).Parse(probeTmplText))

// probeData is the page's data block.
type probeData struct {
	Probe     *probe.Result `json:"probe"`
	Heat      any           `json:"heat"`
	Staircase any           `json:"staircase"`
}

// WriteProbe writes the machine page of r.
func WriteProbe(w io.Writer, r *probe.Result) error {
	heat, err := option(heatSkeleton(false))
	if err != nil {
		return fmt.Errorf("building the matrix skeleton: %w", err)
	}
	stair, err := option(staircaseSkeleton())
	if err != nil {
		return fmt.Errorf("building the staircase skeleton: %w", err)
	}
	var body bytes.Buffer
	if err := probeTmpl.Execute(&body, r); err != nil {
		return err
	}
	return WritePage(w, Page{
		Title:  "cacheheat probe: " + r.Host,
		Body:   template.HTML(body.String()),
		Data:   probeData{Probe: r, Heat: heat, Staircase: stair},
		Script: template.JS(commonJS + probeJS),
	})
}

func staircaseSkeleton() *charts.Line {
	l := charts.NewLine()
	l.SetGlobalOptions(
		charts.WithAnimation(false),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: "axis"}),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(true)}),
		charts.WithGridOpts(opts.Grid{Left: "70", Right: "40", Top: "40", Bottom: "60"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "working set"}),
		charts.WithYAxisOpts(opts.YAxis{Type: "log", Name: "ns per load"}),
	)
	return l
}
