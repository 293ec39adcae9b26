package heatmap

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/compare"
	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
)

//go:embed diff.tmpl
var diffTmplText string

//go:embed diff.js
var diffJS string

var diffTmpl = template.Must(template.New("diff").Funcs(TemplateFuncs).Funcs(template.FuncMap{
	"val":   metric.FormatValue,
	"ratio": compare.FormatRatio,
	"ci":    compare.FormatCI,
	"p":     compare.FormatP,
	"vclass": func(v string) string {
		return strings.ReplaceAll(v, " ", "-")
	},
	"delta": func(a, b float64) float64 { return a - b },
}).Parse(diffTmplText))

// DiffHeat is one event's per-core heatmaps of a diff: BASE, NEW and
// NEW-BASE rates per second, row-major (len(Rows)*Cols), null where a side
// has no window in that column.
type DiffHeat struct {
	Event string     `json:"event"`
	Unit  string     `json:"unit"`
	Base  []*float64 `json:"base"`
	New   []*float64 `json:"new"`
	Delta []*float64 `json:"delta"`
}

// DiffLatency is one latency histogram of both recordings, as the share of
// events per log2 bucket, for an overlaid plot.
type DiffLatency struct {
	Name   string    `json:"name"`
	Labels []string  `json:"labels"` // lower bound of each shown bucket
	Base   []float64 `json:"base"`   // fraction of BASE's events
	New    []float64 `json:"new"`
	BaseN  uint64    `json:"base_count"`
	NewN   uint64    `json:"new_count"`
}

// DiffSeries is one compared metric's per-window values, for the plot a
// click on its table row shows.
type DiffSeries struct {
	Name string    `json:"name"`
	Unit string    `json:"unit"`
	Base []float64 `json:"base"`
	New  []float64 `json:"new"`
}

// DiffData is the diff page's data block.
type DiffData struct {
	Skeletons  Skeletons     `json:"skeletons"`
	Rows       []string      `json:"rows"` // CPU labels
	Cols       int           `json:"cols"` // time columns
	BinWindows int           `json:"bin_windows"`
	Heat       []DiffHeat    `json:"heat"`
	Latency    []DiffLatency `json:"latency"`
	Series     []DiffSeries  `json:"series"`
	// Flame is the differential flame graph of FlameEvent's samples
	// (diffflame.go); FlameEvent is "" when the sides share no samples.
	Flame      FlameNode `json:"flame"`
	FlameEvent string    `json:"flame_event"`
}

// WriteDiff writes the diff report of a comparison: the metric table,
// the differential flame graph, the functions and findings that changed,
// BASE/NEW/delta per-core heatmaps and overlaid latency histograms, as
// one self-contained page.
func WriteDiff(w io.Writer, base, new *profile.Recording, res *compare.Result) error {
	bm, nm := model.FromRecording(base), model.FromRecording(new)
	bf, nf := attribution.Analyze(bm), attribution.Analyze(nm)
	return WriteDiffModels(w, bm, nm, res, &bf, &nf)
}

// WriteDiffModels is WriteDiff of the recordings' models (model.Read) and
// findings (nil: the findings section is left out), for a reader that
// streams them.
func WriteDiffModels(w io.Writer, base, new *model.Model, res *compare.Result, baseFindings, newFindings *attribution.Result) error {
	sk, err := BuildSkeletons()
	if err != nil {
		return err
	}
	data := BuildDiff(base, new, res, DefaultMaxCells)
	data.Skeletons = sk
	var body bytes.Buffer
	view := struct {
		R          *compare.Result
		Headline   string
		HasHeat    bool
		HasLatency bool
		Percent    float64
		FlameEvent string
		Functions  []FuncChange
		Findings   []FindingChange
		HasFinds   bool
	}{res, res.Headline(), len(data.Heat) > 0, len(data.Latency) > 0, res.Confidence * 100,
		data.FlameEvent, funcChanges(base, new, data.FlameEvent), findingChanges(baseFindings, newFindings), baseFindings != nil && newFindings != nil}
	if err := diffTmpl.ExecuteTemplate(&body, "diff", view); err != nil {
		return fmt.Errorf("rendering diff body: %w", err)
	}
	return WritePage(w, Page{
		Banner: Banner(&base.Header, &new.Header),
		Title:  "cacheheat diff: " + res.Headline(),
		Body:   template.HTML(body.String()),
		Data:   data,
		Script: template.JS(commonJS + flameJS + diffJS),
		Style:  diffCSS,
	})
}

// diffCSS colours the verdicts; it is static.
const diffCSS template.CSS = `
h2.vd-regression { color: #b2182b; }
h2.vd-ok { color: #1a7f37; }
td.cmd { word-break: normal; overflow-wrap: anywhere; }
td.up { color: #b2182b; }
td.down { color: #2166ac; }
tr.vd-regression td:first-child { color: #b2182b; font-weight: bold; }
tr.vd-improvement td:first-child { color: #1a7f37; font-weight: bold; }
tr.vd-changed td:first-child { color: #8a6d00; }
tr.metric-row { cursor: pointer; }
tr.metric-row:hover { background: #f0f4ff; }
`

// BuildDiff computes the diff page's chart data.
func BuildDiff(base, new *model.Model, res *compare.Result, maxCells int) DiffData {
	d := DiffData{Rows: []string{}, Heat: []DiffHeat{}, Latency: []DiffLatency{}, Series: []DiffSeries{}}
	d.Flame, d.FlameEvent = diffFlame(base, new)
	// The plot of a clicked row: the first maxDiffSeries rows of the table
	// (regressions, improvements and changes first), each downsampled to
	// at most maxSeriesPoints points (medians of consecutive windows): the
	// values of every window of 1,400 metrics of two hour-long
	// recordings made an 85 MB page.
	for i, m := range res.Metrics {
		if i == maxDiffSeries {
			break
		}
		d.Series = append(d.Series, DiffSeries{Name: m.Name, Unit: m.Unit, Base: downsample(m.Base), New: downsample(m.New)})
	}

	// Rows: the CPUs both hosts have, in NEW's per-core order and with
	// its labels, as in NEW's report.
	bcpu := map[int]bool{}
	for _, c := range base.Header.Host.Topology.CPUs {
		bcpu[c.ID] = true
	}
	var cpus []int
	for _, c := range sortedCPUs(new.Header.Host.Topology, nil) {
		if bcpu[c.ID] {
			cpus = append(cpus, c.ID)
			d.Rows = append(d.Rows, cpuLabel(c))
		}
	}
	// Columns: window i of BASE against window i of NEW, merged so that a
	// chart stays under maxCells.
	nw := max(base.Windows(), new.Windows())
	per := 1
	if len(cpus) > 0 && nw*len(cpus) > maxCells {
		per = (nw*len(cpus) + maxCells - 1) / maxCells
	}
	d.BinWindows = per
	d.Cols = (nw + per - 1) / per

	for _, ev := range sharedEvents(base, new) {
		m := eventMetric(ev, nil)
		h := DiffHeat{Event: ev, Unit: m.Unit}
		scale := 1.0
		if m.Scale != 0 {
			scale = m.Scale
		}
		b, n := rateGrid(base, ev, cpus, per, d.Cols, scale), rateGrid(new, ev, cpus, per, d.Cols, scale)
		h.Base, h.New = b, n
		h.Delta = make([]*float64, len(b))
		for i := range b {
			if b[i] != nil && n[i] != nil {
				v := *n[i] - *b[i]
				h.Delta[i] = &v
			}
		}
		d.Heat = append(d.Heat, h)
	}

	for _, bh := range base.Histograms {
		name, bt, nt := bh.Name, bh.Total, make([]uint64, profile.HistBuckets)
		if nh := new.Histogram(name); nh != nil {
			nt = nh.Total
		}
		bn, nn := sum(bt), sum(nt)
		if bn == 0 && nn == 0 {
			continue
		}
		lo, hi := profile.HistBuckets, -1
		for i := range bt {
			if bt[i] > 0 || nt[i] > 0 {
				lo, hi = min(lo, i), max(hi, i)
			}
		}
		l := DiffLatency{Name: name, BaseN: bn, NewN: nn}
		for i := lo; i <= hi; i++ {
			l.Labels = append(l.Labels, metric.FormatNS(profile.BucketLower(i)))
			l.Base = append(l.Base, share(bt[i], bn))
			l.New = append(l.New, share(nt[i], nn))
		}
		d.Latency = append(d.Latency, l)
	}
	return d
}

// Bounds of the diff page's per-row plots.
const (
	maxDiffSeries   = 200
	maxSeriesPoints = 300
)

// downsample keeps a series of at most maxSeriesPoints values: the medians
// of consecutive groups of values.
func downsample(v []float64) []float64 {
	if len(v) <= maxSeriesPoints {
		return nonNil(v)
	}
	per := (len(v) + maxSeriesPoints - 1) / maxSeriesPoints
	out := make([]float64, 0, maxSeriesPoints)
	for i := 0; i < len(v); i += per {
		out = append(out, round(compare.Median(v[i:min(i+per, len(v))]), 6))
	}
	return out
}

func nonNil(v []float64) []float64 {
	if v == nil {
		return []float64{}
	}
	return v
}

func share(c, total uint64) float64 {
	if total == 0 {
		return 0
	}
	return round(float64(c)/float64(total), 6)
}

// sharedEvents lists the events both recordings have counters for, in
// BASE's order.
func sharedEvents(base, new *model.Model) []string {
	inNew := map[string]bool{}
	for _, e := range new.Events {
		inNew[e] = true
	}
	var out []string
	for _, e := range base.Events {
		if inNew[e] {
			out = append(out, e)
		}
	}
	return out
}

// rateGrid is one event's per-CPU rate per second times scale, row per
// CPU, column per group of per windows.
func rateGrid(m *model.Model, ev string, cpus []int, per, cols int, scale float64) []*float64 {
	counts := make([]float64, len(cpus)*cols)
	dur := make([]int64, cols)
	series := m.Series[ev]
	for wi := range m.Windows() {
		c := wi / per
		if c >= cols {
			break
		}
		w := m.Window(wi)
		dur[c] += w.EndNS - w.StartNS
		if series == nil {
			continue
		}
		for r, cpu := range cpus {
			if cpu < len(series[wi]) {
				counts[r*cols+c] += float64(series[wi][cpu])
			}
		}
	}
	out := make([]*float64, len(counts))
	for i, v := range counts {
		if d := dur[i%cols]; d > 0 {
			r := round(scale*v/(float64(d)/1e9), 4)
			if !math.IsNaN(r) && !math.IsInf(r, 0) {
				out[i] = &r
			}
		}
	}
	return out
}
