package heatmap

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"
	"github.com/go-echarts/go-echarts/v2/render"
)

// Skeletons are the static ECharts options of the report's chart kinds,
// built with go-echarts. They hold no recording data: the page's script
// fills in axes, series data, colour range and tooltips from the data
// block, so nothing untrusted passes through go-echarts' unescaped JSON.
type Skeletons struct {
	Heat    json.RawMessage `json:"heat"`
	Latency json.RawMessage `json:"latency"`
}

// BuildSkeletons renders the chart skeletons.
func BuildSkeletons() (Skeletons, error) {
	var s Skeletons
	var err error
	if s.Heat, err = option(heatSkeleton(false)); err != nil {
		return s, fmt.Errorf("building heatmap skeleton: %w", err)
	}
	if s.Latency, err = option(heatSkeleton(true)); err != nil {
		return s, fmt.Errorf("building latency skeleton: %w", err)
	}
	return s, nil
}

func heatSkeleton(latency bool) *charts.HeatMap {
	hm := charts.NewHeatMap()
	hm.SetGlobalOptions(
		charts.WithAnimation(false),
		charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: "item"}),
		charts.WithLegendOpts(opts.Legend{Show: opts.Bool(latency)}),
		charts.WithGridOpts(opts.Grid{Left: "150", Right: "110", Top: "30", Bottom: "70"}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", SplitArea: &opts.SplitArea{Show: opts.Bool(false)}}),
		charts.WithYAxisOpts(opts.YAxis{Type: "category"}),
		charts.WithVisualMapOpts(opts.VisualMap{
			Type: "continuous", Calculable: opts.Bool(true), Min: 0, Max: 1,
			Orient: "vertical", Right: "16", Top: "center",
			InRange: &opts.VisualMapInRange{Color: []string{"#f7fbff", "#fdd49e", "#fc8d59", "#d7301f", "#7f0000"}},
		}),
		charts.WithDataZoomOpts(
			opts.DataZoom{Type: "slider", XAxisIndex: []int{0}},
			opts.DataZoom{Type: "inside", XAxisIndex: []int{0}},
		),
	)
	hm.AddSeries("cells", []opts.HeatMapData{}, charts.WithSeriesAnimation(false))
	return hm
}

// option renders a chart with go-echarts' RenderSnippet (its full Render
// would add a <script src> to a CDN) and keeps only the option, checked to
// be JSON so it can travel in the page's data block.
func option(c render.Renderer) (json.RawMessage, error) {
	snip := c.RenderSnippet()
	raw := json.RawMessage(strings.TrimSpace(snip.Option))
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("decoding go-echarts option: %w", err)
	}
	// The skeleton's series carries go-echarts' empty data; the page
	// sets its own.
	return json.Marshal(v)
}
