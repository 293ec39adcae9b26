package heatmap

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
)

// The heatmaps' data: time bins, the per-core and per-node grids, and
// the latency histograms over time.

// Bin is one heatmap column: one or more consecutive windows.
type Bin struct {
	StartNS int64 `json:"start_ns"`
	EndNS   int64 `json:"end_ns"`
	// DurNS is the summed length of the bin's windows; rates divide by it.
	DurNS   int64 `json:"dur_ns"`
	Windows int   `json:"windows"`
}

// Row is one heatmap row: a CPU (or, for very wide hosts, a run of
// adjacent CPUs), or a NUMA node.
type Row struct {
	Label string `json:"label"`
	CPUs  []int  `json:"cpus"`
	Node  int    `json:"node"`
	L3    int    `json:"l3"`
	Core  int    `json:"core"`
}

// Metric is one selectable heatmap colour. Events and sample counts carry
// their per-cell sums (row-major, len(Rows)*len(Bins)); the page shows
// them per second, times Scale when it is set (cpu-clock: ns of CPU time
// per second becomes % busy). Derived metrics carry no values: the page
// computes Scale*Num/Den from their inputs' sums, cell by cell. Unit is
// what the colour bar and the selector say; Max, when set, is the
// metric's natural top (100 for % busy) and fixes the colour scale.
type Metric struct {
	Name  string  `json:"name"`
	Kind  string  `json:"kind"` // "event", "samples", "derived"
	Unit  string  `json:"unit"`
	Num   string  `json:"num,omitempty"`
	Den   string  `json:"den,omitempty"`
	Scale float64 `json:"scale,omitempty"`
	Max   float64 `json:"max,omitempty"`
	// PerCPU divides a cell by its row's CPUs: a node's % busy is the
	// average of its CPUs, not their sum.
	PerCPU bool     `json:"per_cpu,omitempty"`
	Values []uint64 `json:"values,omitempty"`
}

// eventMetric is an event's heatmap colour: its rate per second, except
// for the CPU-time events, whose ns per second read better as % busy.
func eventMetric(e string, vals []uint64) Metric {
	if e == "cpu-clock" || e == "task-clock" {
		return Metric{Name: e, Kind: "event", Unit: "% busy", Scale: 100 / 1e9, Max: 100, PerCPU: true, Values: vals}
	}
	return Metric{Name: e, Kind: "event", Unit: e + "/s", Values: vals}
}

// Grid is the data of one heatmap with a metric selector.
type Grid struct {
	Bins []Bin `json:"bins"`
	Rows []Row `json:"rows"`
	// BinWindows and BinRows say how much was merged per cell (1: none);
	// the page says so on the chart.
	BinWindows int      `json:"bin_windows"`
	BinRows    int      `json:"bin_rows"`
	Metrics    []Metric `json:"metrics"`
}

// sortedCPUs orders a topology's CPUs as host.TopologyOrder does (the
// order of the probe's matrix), or, for the CPUs in order, in that order
// first.
func sortedCPUs(t profile.Topology, order []int) []profile.CPU {
	ids := make([]int, len(t.CPUs))
	byID := map[int]profile.CPU{}
	for i, c := range t.CPUs {
		ids[i] = c.ID
		byID[c.ID] = c
	}
	ids = host.TopologyOrder(t, ids)
	if len(order) > 0 {
		first := make([]int, 0, len(ids))
		for _, c := range order {
			if _, ok := byID[c]; ok && !slices.Contains(first, c) {
				first = append(first, c)
			}
		}
		for _, c := range ids {
			if !slices.Contains(first, c) {
				first = append(first, c)
			}
		}
		ids = first
	}
	out := make([]profile.CPU, len(ids))
	for i, id := range ids {
		out[i] = byID[id]
	}
	return out
}

// timeBins groups windows into at most maxCols columns of equal window
// counts, returning the columns and each window's column.
func timeBins(ws []profile.Window, maxCols int) ([]Bin, []int, int) {
	if maxCols < 1 {
		maxCols = 1
	}
	per := (len(ws) + maxCols - 1) / maxCols
	if per < 1 {
		per = 1
	}
	var bins []Bin
	col := make([]int, len(ws))
	for i, w := range ws {
		c := i / per
		col[i] = c
		if c == len(bins) {
			bins = append(bins, Bin{StartNS: w.StartNS})
		}
		b := &bins[c]
		b.EndNS = w.EndNS
		b.DurNS += w.EndNS - w.StartNS
		b.Windows++
	}
	if bins == nil {
		bins = []Bin{}
	}
	return bins, col, per
}

// CPUGrid builds the per-core heatmap data: one row per CPU in topology
// order (sortedCPUs), one column per (binned) window.
func CPUGrid(m *model.Model, maxCells int, order []int) Grid {
	cpus := sortedCPUs(m.Header.Host.Topology, order)
	perRow := max(1, (len(cpus)+maxRows-1)/maxRows)
	var rows []Row
	rowOf := map[int]int{} // CPU id -> row
	for i := 0; i < len(cpus); i += perRow {
		grp := cpus[i:min(i+perRow, len(cpus))]
		r := Row{Node: grp[0].Node, L3: grp[0].L3, Core: grp[0].Core}
		for _, c := range grp {
			r.CPUs = append(r.CPUs, c.ID)
			rowOf[c.ID] = len(rows)
		}
		r.Label = cpuLabel(grp[0])
		if len(grp) > 1 {
			r.Label = fmt.Sprintf("N%d %s cpu%d-%d", r.Node, l3Label(r.L3), grp[0].ID, grp[len(grp)-1].ID)
		}
		rows = append(rows, r)
	}
	if rows == nil {
		rows = []Row{}
	}
	return buildGrid(m, rows, rowOf, perRow, maxCells)
}

// cpuLabel names a CPU's heatmap row: its node, L3 domain, core and id.
func cpuLabel(c profile.CPU) string {
	return fmt.Sprintf("N%d %s c%d cpu%d", c.Node, l3Label(c.L3), c.Core, c.ID)
}

func l3Label(id int) string {
	if id < 0 {
		return "no L3"
	}
	return fmt.Sprintf("L3:%d", id)
}

// NodeGrid builds the NUMA-node heatmap data: one row per node.
func NodeGrid(m *model.Model, maxCells int) Grid {
	t := m.Header.Host.Topology
	rows := []Row{}
	rowOf := map[int]int{}
	nodeRow := map[int]int{}
	for _, n := range t.Nodes {
		nodeRow[n.ID] = len(rows)
		rows = append(rows, Row{Label: fmt.Sprintf("node %d", n.ID), Node: n.ID, L3: -1, Core: -1})
	}
	for _, c := range t.CPUs {
		r, ok := nodeRow[c.Node]
		if !ok {
			continue
		}
		rowOf[c.ID] = r
		rows[r].CPUs = append(rows[r].CPUs, c.ID)
	}
	for i := range rows {
		sort.Ints(rows[i].CPUs)
	}
	return buildGrid(m, rows, rowOf, 1, maxCells)
}

func buildGrid(m *model.Model, rows []Row, rowOf map[int]int, perRow, maxCells int) Grid {
	maxCols := maxCells / max(1, len(rows))
	bins, col, perCol := timeBins(m.Light.Windows, maxCols)
	g := Grid{Bins: bins, Rows: rows, BinWindows: perCol, BinRows: perRow, Metrics: []Metric{}}
	ncell := len(rows) * len(bins)
	// rowIdx maps CPU id to row, -1 for CPUs outside the topology.
	maxID := m.Header.Host.Topology.MaxCPU()
	rowIdx := make([]int, maxID+1)
	for i := range rowIdx {
		rowIdx[i] = -1
	}
	for id, r := range rowOf {
		rowIdx[id] = r
	}
	nb := len(bins)
	// cells sums a per-window series into the grid's cells; seen says
	// whether any count fell on a row.
	cells := func(series []profile.Counts) (vals []uint64, seen bool) {
		vals = make([]uint64, ncell)
		for wi, per := range series {
			for cpu, v := range per {
				if cpu < len(rowIdx) && rowIdx[cpu] >= 0 {
					vals[rowIdx[cpu]*nb+col[wi]] += v
					seen = seen || v > 0
				}
			}
		}
		return vals, seen
	}
	have := map[string]bool{}
	for _, e := range m.Events {
		series, ok := m.Series[e]
		if !ok {
			continue
		}
		vals, _ := cells(series)
		have[e] = true
		g.Metrics = append(g.Metrics, eventMetric(e, vals))
	}
	// Samples per second per CPU: where the on-CPU time went, as the
	// sampler saw it.
	for _, ev := range m.Header.Settings.SampleEvents {
		if s := m.Samples[ev]; s != nil {
			if vals, seen := cells(s.PerCPU); seen {
				g.Metrics = append(g.Metrics, Metric{Name: string(metric.Samples(ev)), Kind: "samples", Unit: "samples/s", Values: vals})
			}
		}
	}
	// The derived metrics of the catalogue whose two events were
	// measured, computed per cell from the cell's sums.
	for _, d := range metric.Ratios() {
		if have[d.Num] && have[d.Den] {
			g.Metrics = append(g.Metrics, Metric{Name: string(d.ID), Kind: "derived", Unit: d.Unit, Num: d.Num, Den: d.Den, Scale: d.Scale})
		}
	}
	return g
}

// Latency is one latency histogram as a heatmap over time: rows are log2
// buckets, colour is the count, with the p50 and p99 per column on top.
type Latency struct {
	Name string `json:"name"`
	Unit string `json:"unit"`
	Bins []Bin  `json:"bins"`
	// Lo and Hi are the first and last bucket shown (the non-empty range).
	Lo         int      `json:"lo"`
	Hi         int      `json:"hi"`
	Labels     []string `json:"labels"` // per shown bucket: its lower bound
	BinWindows int      `json:"bin_windows"`
	// Counts is row-major: (bucket-Lo)*len(Bins)+column.
	Counts []uint64 `json:"counts"`
	// P50 and P99 per column in ns (-1: no events), and their positions
	// on the bucket axis (row index plus the fraction inside the bucket).
	P50    []float64 `json:"p50_ns"`
	P99    []float64 `json:"p99_ns"`
	P50Pos []float64 `json:"p50_pos"`
	P99Pos []float64 `json:"p99_pos"`
}

// LatencyMaps builds one latency heatmap per histogram in the recording.
func LatencyMaps(m *model.Model, maxCells int) []Latency {
	out := []Latency{}
	for _, hg := range m.Histograms {
		out = append(out, latencyMap(m, hg.Name, hg.Total, maxCells, func(wi int, dst []uint64) {
			for i, c := range hg.PerWindow[wi] {
				dst[i] += c
			}
		}))
	}
	return out
}

// latencyMap builds a time x latency heatmap of log2 buckets; tot is the
// whole recording's buckets and add adds window wi's to dst.
func latencyMap(m *model.Model, name string, tot []uint64, maxCells int, add func(wi int, dst []uint64)) Latency {
	{
		lo, hi := -1, -1
		for i, c := range tot {
			if c > 0 {
				if lo < 0 {
					lo = i
				}
				hi = i
			}
		}
		if lo < 0 {
			lo, hi = 0, 0
		}
		nrow := hi - lo + 1
		bins, col, per := timeBins(m.Light.Windows, maxCells/nrow)
		l := Latency{Name: name, Unit: "ns", Bins: bins, Lo: lo, Hi: hi, BinWindows: per}
		for i := lo; i <= hi; i++ {
			l.Labels = append(l.Labels, metric.FormatNS(profile.BucketLower(i)))
		}
		nb := len(bins)
		perCol := make([][]uint64, nb)
		for c := range perCol {
			perCol[c] = make([]uint64, profile.HistBuckets)
		}
		for wi := range m.Windows() {
			add(wi, perCol[col[wi]])
		}
		l.Counts = make([]uint64, nrow*nb)
		for c, b := range perCol {
			for i := lo; i <= hi; i++ {
				l.Counts[(i-lo)*nb+c] = b[i]
			}
			p50, p99 := -1.0, -1.0
			pos50, pos99 := -1.0, -1.0
			if sum(b) > 0 {
				p50 = profile.Percentile(b, 0.5)
				p99 = profile.Percentile(b, 0.99)
				pos50 = bucketPos(p50) - float64(lo)
				pos99 = bucketPos(p99) - float64(lo)
			}
			l.P50 = append(l.P50, round(p50, 4))
			l.P99 = append(l.P99, round(p99, 4))
			l.P50Pos = append(l.P50Pos, round(pos50, 3))
			l.P99Pos = append(l.P99Pos, round(pos99, 3))
		}
		return l
	}
}

// bucketPos places a value on the bucket axis: bucket i spans positions
// [i-0.5, i+0.5), linear inside the bucket as Percentile interpolates.
func bucketPos(v float64) float64 {
	i := 0
	if v >= 2 {
		i = min(int(math.Floor(math.Log2(v))), profile.HistBuckets-1)
	}
	lo, hi := profile.BucketLower(i), profile.BucketUpper(i)
	f := (v - lo) / (hi - lo)
	return float64(i) - 0.5 + math.Max(0, math.Min(1, f))
}

func sum(b []uint64) uint64 {
	var s uint64
	for _, v := range b {
		s += v
	}
	return s
}
