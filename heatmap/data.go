package heatmap

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
)

// DefaultMaxCells is the most cells one heatmap carries. ECharts slows
// down above about 20,000 heatmap cells per chart, so longer or wider
// recordings are downsampled to fit.
const DefaultMaxCells = 20000

// maxRows is the most rows (CPUs) a heatmap shows before adjacent CPUs
// are merged into one row: more would not be readable on a screen.
const maxRows = 256

// Report is everything the HTML report shows, computed from a recording.
// Its JSON form is the page's data block.
type Report struct {
	Summary   Summary             `json:"summary"`
	CPU       Grid                `json:"cpu"`
	Node      Grid                `json:"node"`
	Latency   []Latency           `json:"latency"`
	Processes ProcessTable        `json:"processes"`
	Samples   []SampleView        `json:"samples"`
	OffCPU    *OffCPUView         `json:"offcpu,omitempty"`
	Host      HostView            `json:"host"`
	Quality   Quality             `json:"quality"`
	Findings  *attribution.Result `json:"findings,omitempty"`
	// Banner is the simulated or synthetic warning (simulated.go).
	Banner string `json:"banner,omitempty"`
	// Functions are the --func functions (heatmap/functions.go).
	Functions []FunctionView `json:"functions,omitempty"`
	// HotLines is the hot-lines section (heatmap/lines.go), nil without
	// a line resolver or lines.
	HotLines *HotLinesView `json:"hot_lines,omitempty"`
	// Machine says which probe of the host the report reads against
	// (heatmap/machine.go), nil without one.
	Machine *MachineView `json:"machine,omitempty"`
}

// Build computes the whole report's data. maxCells <= 0 means
// DefaultMaxCells. cpuOrder, when set, is the order of the per-core
// rows (a probe's, so the report reads like the machine page); nil:
// host.TopologyOrder.
func Build(m *model.Model, maxCells int, cpuOrder []int) Report {
	c := BuildCharts(m, maxCells, cpuOrder)
	r := Report{
		Banner:    Banner(&m.Header),
		Summary:   BuildSummary(m),
		CPU:       c.CPU,
		Node:      c.Node,
		Latency:   c.Latency,
		Processes: Processes(m, 300),
		Samples:   SampleViews(m),
		OffCPU:    OffCPU(m),
		Host:      BuildHost(m.Header.Host.Topology),
		Quality:   BuildQuality(m),
	}
	r.Functions = FunctionViews(m, maxCells, len(r.Latency))
	return r
}

// Charts is the data of the report's heatmaps: the part of the report the
// live view redraws as windows arrive, with the same code.
type Charts struct {
	CPU     Grid      `json:"cpu"`
	Node    Grid      `json:"node"`
	Latency []Latency `json:"latency"`
}

// BuildCharts computes the heatmaps' data. maxCells <= 0 means
// DefaultMaxCells; cpuOrder is Build's.
func BuildCharts(m *model.Model, maxCells int, cpuOrder []int) Charts {
	if maxCells <= 0 {
		maxCells = DefaultMaxCells
	}
	return Charts{CPU: CPUGrid(m, maxCells, cpuOrder), Node: NodeGrid(m, maxCells), Latency: LatencyMaps(m, maxCells)}
}

// Summary is the report's first section.
type Summary struct {
	Title      string             `json:"title"`
	Target     string             `json:"target"`
	Hostname   string             `json:"hostname"`
	Kernel     string             `json:"kernel"`
	CPUModel   string             `json:"cpu_model"`
	CPUs       int                `json:"cpus"`
	Nodes      int                `json:"nodes"`
	Mode       string             `json:"mode"`
	Start      string             `json:"start"`
	DurationS  float64            `json:"duration_s"`
	IntervalS  float64            `json:"interval_s"`
	Windows    int                `json:"windows"`
	EndReason  string             `json:"end_reason"`
	ExitStatus *int               `json:"exit_status,omitempty"`
	Warning    string             `json:"warning,omitempty"`
	Headline   []Headline         `json:"headline"`
	Latency    []LatencyHeadline  `json:"latency"`
	AppMetrics map[string]float64 `json:"app_metrics,omitempty"`
}

// Headline is one measured event's totals.
type Headline struct {
	Event     string  `json:"event"`
	Total     uint64  `json:"total"`
	HostTotal uint64  `json:"host_total"`
	PerSec    float64 `json:"per_sec"`
	// Share is Total/HostTotal: how much of what the CPUs counted came
	// from the target; -1 when the host total is unknown.
	Share float64 `json:"share"`
}

// LatencyHeadline is one histogram's percentiles over the recording.
type LatencyHeadline struct {
	Name  string  `json:"name"`
	Count uint64  `json:"count"`
	P50   float64 `json:"p50_ns"`
	P99   float64 `json:"p99_ns"`
}

// BuildSummary computes the summary section.
func BuildSummary(m *model.Model) Summary {
	h := m.Header
	out := Summary{
		Title:     "cacheheat report: " + h.Target.String(),
		Target:    h.Target.String(),
		Hostname:  h.Host.Hostname,
		Kernel:    h.Host.Kernel,
		CPUModel:  h.Host.CPUModel,
		CPUs:      len(h.Host.Topology.CPUs),
		Nodes:     len(h.Host.Topology.Nodes),
		Mode:      h.Host.Mode,
		IntervalS: float64(h.Settings.IntervalNS) / 1e9,
		Windows:   m.Windows(),
		Warning:   m.Warning,
		Headline:  []Headline{},
		Latency:   []LatencyHeadline{},
	}
	dur := m.DurationS()
	out.DurationS = round(dur, 3)
	if !h.StartTime.IsZero() {
		out.Start = h.StartTime.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	if m.Trailer != nil {
		out.EndReason = m.Trailer.EndReason
		out.ExitStatus = m.Trailer.ExitStatus
		if len(m.Trailer.AppMetrics) > 0 {
			out.AppMetrics = m.Trailer.AppMetrics
		}
	} else {
		out.EndReason = "truncated"
		out.AppMetrics = m.LastAppMetrics
	}
	for _, e := range m.Events {
		t, ok := m.Totals[e]
		if !ok {
			continue
		}
		hl := Headline{Event: e, Total: sum(t), Share: -1}
		if dur > 0 {
			hl.PerSec = round(float64(hl.Total)/dur, 4)
		}
		if ht, ok := m.HostTotals[e]; ok {
			hl.HostTotal = sum(ht)
			if hl.HostTotal > 0 {
				hl.Share = round(float64(hl.Total)/float64(hl.HostTotal), 4)
			}
		}
		out.Headline = append(out.Headline, hl)
	}
	for _, hg := range m.Histograms {
		out.Latency = append(out.Latency, LatencyHeadline{Name: hg.Name, Count: hg.Count(),
			P50: round(hg.P(0.5), 4), P99: round(hg.P(0.99), 4)})
	}
	return out
}

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

// ProcessTable lists the target's processes and threads with their totals.
type ProcessTable struct {
	Events []string     `json:"events"`
	Rows   []ProcessRow `json:"rows"`
	// Omitted counts processes left out to keep the page small.
	Omitted int `json:"omitted"`
}

// ProcessRow is a process (TID 0) or one of its threads.
type ProcessRow struct {
	PID     int      `json:"pid"`
	TID     int      `json:"tid,omitempty"`
	Comm    string   `json:"comm"`
	Cmdline string   `json:"cmdline,omitempty"`
	Totals  []uint64 `json:"totals"` // in Events order

	// Container is the process's container id as `docker ps` shows it (12
	// hex digits) or its pod uid, when it had one.
	Container string `json:"container,omitempty"`
}

// Processes builds the process table, keeping the limit processes with
// the most counts of the first event.
func Processes(m *model.Model, limit int) ProcessTable {
	ps := append([]profile.ProcessSummary(nil), m.Processes...)
	evSet := map[string]bool{}
	for _, p := range ps {
		for k := range p.Totals {
			evSet[k] = true
		}
	}
	var events []string
	for _, e := range m.Events {
		if evSet[e] {
			events = append(events, e)
			delete(evSet, e)
		}
	}
	var rest []string
	for e := range evSet {
		rest = append(rest, e)
	}
	sort.Strings(rest)
	events = append(events, rest...)
	if events == nil {
		events = []string{}
	}
	if len(events) > 0 {
		first := events[0]
		sort.SliceStable(ps, func(i, j int) bool { return ps[i].Totals[first] > ps[j].Totals[first] })
	}
	t := ProcessTable{Events: events, Rows: []ProcessRow{}}
	if len(ps) > limit {
		t.Omitted = len(ps) - limit
		ps = ps[:limit]
	}
	vec := func(m map[string]uint64) []uint64 {
		v := make([]uint64, len(events))
		for i, e := range events {
			v[i] = m[e]
		}
		return v
	}
	for _, p := range ps {
		t.Rows = append(t.Rows, ProcessRow{PID: p.PID, Comm: p.Comm, Container: shortContainer(p.Container), Cmdline: strings.Join(p.Cmdline, " "), Totals: vec(p.Totals)})
		for _, th := range p.Threads {
			t.Rows = append(t.Rows, ProcessRow{PID: p.PID, TID: th.TID, Comm: th.Comm, Totals: vec(th.Totals)})
		}
	}
	return t
}

// SampleView is the stack data of one sample event.
type SampleView struct {
	Event     string                 `json:"event"`
	Total     uint64                 `json:"total"`
	Self      []profile.FunctionStat `json:"self"`
	Inclusive []profile.FunctionStat `json:"inclusive"`
	Stacks    []StackStat            `json:"stacks"`
	Flame     FlameNode              `json:"flame"`
	// Unnamed is what of the samples names no function, and why.
	Unnamed profile.UnnamedSummary `json:"unnamed"`
}

// StackStat is one distinct stack (innermost frame first) and its count.
type StackStat struct {
	Frames []string `json:"frames"`
	Count  uint64   `json:"count"`
}

// FlameNode is a node of the flame graph: a function on a call path from
// the root, with the samples whose stack passes through it.
type FlameNode struct {
	Name     string      `json:"n"`
	Value    uint64      `json:"v"`
	Children []FlameNode `json:"c,omitempty"`
	// Delta is, in a differential flame graph, the change of the node's
	// share of all samples, NEW minus BASE (0.02: two points more).
	Delta float64 `json:"d,omitempty"`
}

const (
	topFunctions = 25
	// topStacks are kept in the page; it shows 20 and expands to all.
	topStacks = 100
	// flameMinShare drops flame-graph nodes below this share of all
	// samples: too narrow to see, and they would bloat the page.
	flameMinShare = 0.001
	flameMaxDepth = 128
)

// SampleViews builds the function tables, top stacks and flame graph of
// every sample event that has samples.
func SampleViews(m *model.Model) []SampleView {
	out := []SampleView{}
	for _, ev := range m.SampleEvents {
		if v := sampleView(m, ev, m.Samples[ev]); v.Total > 0 {
			out = append(out, v)
		}
	}
	return out
}

type flameBuild struct {
	value    uint64
	children map[string]*flameBuild
}

func sampleView(m *model.Model, ev string, smp *model.Samples) SampleView {
	v := SampleView{Event: ev, Stacks: []StackStat{}, Total: smp.Total, Unnamed: smp.UnnamedSummary(0)}
	root := &flameBuild{children: map[string]*flameBuild{}}
	stacks := smp.ByStack
	keys := make([]model.StackPair, 0, len(stacks))
	for k := range stacks {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if stacks[a] != stacks[b] {
			return stacks[a] > stacks[b]
		}
		if a.User != b.User {
			return a.User < b.User
		}
		return a.Kernel < b.Kernel
	})
	// Stacks that differ only where a frame's name does not show (the
	// address inside a function) are one row of "Top stacks".
	byName := map[string]int{}
	for _, k := range keys {
		names := m.FrameNames(k)
		id := strings.Join(names, "\x00")
		if at, ok := byName[id]; ok {
			v.Stacks[at].Count += stacks[k]
		} else {
			byName[id] = len(v.Stacks)
			v.Stacks = append(v.Stacks, StackStat{Frames: names, Count: stacks[k]})
		}
		// The flame graph grows from the outermost frame.
		n := root
		n.value += stacks[k]
		for j := len(names) - 1; j >= 0 && len(names)-1-j < flameMaxDepth; j-- {
			c, ok := n.children[names[j]]
			if !ok {
				c = &flameBuild{children: map[string]*flameBuild{}}
				n.children[names[j]] = c
			}
			c.value += stacks[k]
			n = c
		}
	}
	sort.SliceStable(v.Stacks, func(i, j int) bool { return v.Stacks[i].Count > v.Stacks[j].Count })
	if len(v.Stacks) > topStacks {
		v.Stacks = v.Stacks[:topStacks]
	}
	self, total := m.FunctionCounts(smp)
	v.Self = profile.TopN(self, topFunctions)
	v.Inclusive = profile.TopN(total, topFunctions)
	minV := uint64(math.Ceil(float64(v.Total) * flameMinShare))
	v.Flame = flameTree("all", root, minV)
	return v
}

func flameTree(name string, b *flameBuild, minV uint64) FlameNode {
	n := FlameNode{Name: name, Value: b.value}
	for _, k := range b.shown(minV) {
		n.Children = append(n.Children, flameTree(k, b.children[k], minV))
	}
	return n
}

// shown are the names of b's children of at least minV samples, largest
// first (ties by name): the frames a flame graph draws.
func (b *flameBuild) shown(minV uint64) []string {
	names := make([]string, 0, len(b.children))
	for k, c := range b.children {
		if c.value >= minV {
			names = append(names, k)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		ci, cj := b.children[names[i]], b.children[names[j]]
		if ci.value != cj.value {
			return ci.value > cj.value
		}
		return names[i] < names[j]
	})
	return names
}

// HostView is the topology section: nodes, L3 domains, cores and caches.
type HostView struct {
	Nodes       []HostNode  `json:"nodes"`
	Caches      []HostCache `json:"caches"`
	OfflineCPUs []int       `json:"offline_cpus,omitempty"`
}

// HostNode is a NUMA node and its L3 domains.
type HostNode struct {
	ID  int      `json:"id"`
	L3s []HostL3 `json:"l3s"`
}

// HostL3 is one L3 domain (ID -1: the host reports no L3) and its cores.
type HostL3 struct {
	ID        int        `json:"id"`
	SizeBytes int64      `json:"size_bytes"`
	Cores     []HostCore `json:"cores"`
}

// HostCore is one physical core and its logical CPUs.
type HostCore struct {
	Package int   `json:"package"`
	Core    int   `json:"core"`
	CPUs    []int `json:"cpus"`
}

// HostCache is one cache instance.
type HostCache struct {
	Level     int    `json:"level"`
	Type      string `json:"type"`
	ID        int    `json:"id"`
	SizeBytes int64  `json:"size_bytes"`
	LineSize  int    `json:"line_size"`
	Ways      int    `json:"ways,omitempty"`
	CPUs      string `json:"cpus"` // "0-3,8"
}

// BuildHost computes the topology section.
func BuildHost(t profile.Topology) HostView {
	l3Size := map[int]int64{}
	h := HostView{Nodes: []HostNode{}, Caches: []HostCache{}, OfflineCPUs: t.OfflineCPUs}
	for _, c := range t.Caches {
		if c.Level == 3 {
			l3Size[c.ID] = c.SizeBytes
		}
		h.Caches = append(h.Caches, HostCache{Level: c.Level, Type: c.Type, ID: c.ID, SizeBytes: c.SizeBytes,
			LineSize: c.LineSize, Ways: c.Ways, CPUs: cpuList(c.SharedCPUs)})
	}
	sort.SliceStable(h.Caches, func(i, j int) bool {
		a, b := h.Caches[i], h.Caches[j]
		if a.Level != b.Level {
			return a.Level < b.Level
		}
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		return a.ID < b.ID
	})
	for _, c := range sortedCPUs(t, nil) {
		if len(h.Nodes) == 0 || h.Nodes[len(h.Nodes)-1].ID != c.Node {
			h.Nodes = append(h.Nodes, HostNode{ID: c.Node})
		}
		n := &h.Nodes[len(h.Nodes)-1]
		if len(n.L3s) == 0 || n.L3s[len(n.L3s)-1].ID != c.L3 {
			n.L3s = append(n.L3s, HostL3{ID: c.L3, SizeBytes: l3Size[c.L3]})
		}
		l3 := &n.L3s[len(n.L3s)-1]
		if len(l3.Cores) == 0 || l3.Cores[len(l3.Cores)-1].Core != c.Core || l3.Cores[len(l3.Cores)-1].Package != c.Package {
			l3.Cores = append(l3.Cores, HostCore{Package: c.Package, Core: c.Core})
		}
		core := &l3.Cores[len(l3.Cores)-1]
		core.CPUs = append(core.CPUs, c.ID)
	}
	return h
}

// cpuList writes CPU ids as Linux cpulist ranges: "0-3,8".
func cpuList(ids []int) string {
	s := append([]int(nil), ids...)
	sort.Ints(s)
	var parts []string
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", s[i], s[j]))
		} else {
			parts = append(parts, strconv.Itoa(s[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// Quality is the data-quality section: what was measured, scaled,
// throttled or lost.
type Quality struct {
	Events      []EventQuality   `json:"events"`
	Drops       profile.Drops    `json:"drops"`
	DropsTotal  uint64           `json:"drops_total"`
	SampleRates []SampleRateView `json:"sample_rates"`
	Truncated   bool             `json:"truncated"`
	Warnings    []string         `json:"warnings"`
}

// EventQuality is one requested event's status and multiplexing.
type EventQuality struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	Errno  string `json:"errno,omitempty"`
	// Scale is enabled/running time summed over the recording: 1 means
	// the event was counted all the time; 2 means counts were scaled up
	// from half the time. 0 when unknown.
	Scale float64 `json:"scale"`
}

// SampleRateView compares requested and achieved sampling for an event.
type SampleRateView struct {
	Event       string  `json:"event"`
	RequestedHz float64 `json:"requested_hz"`
	AchievedHz  float64 `json:"achieved_hz"`
	Samples     uint64  `json:"samples"`
}

// BuildQuality computes the data-quality section.
func BuildQuality(m *model.Model) Quality {
	q := Quality{Events: []EventQuality{}, SampleRates: []SampleRateView{}, Truncated: m.Truncated, Warnings: []string{}}
	q.Drops = m.Drops
	q.DropsTotal = q.Drops.Total()
	for _, e := range m.Header.Events {
		eq := EventQuality{Name: e.Name, Kind: e.Kind, Status: e.Status, Reason: e.Reason, Errno: e.Errno}
		if e.Simulated && e.Status == profile.StatusMeasured {
			eq.Reason = "SIMULATED: counted by the software event " + e.StandIn
		}
		if t := m.Scaling[e.Name]; t[1] > 0 {
			eq.Scale = round(float64(t[0])/float64(t[1]), 4)
		}
		q.Events = append(q.Events, eq)
	}
	for _, r := range m.SampleRates {
		q.SampleRates = append(q.SampleRates, SampleRateView{Event: r.Event, RequestedHz: round(r.RequestedHz, 4),
			AchievedHz: round(r.Achieved, 4), Samples: r.Samples})
	}
	if m.Warning != "" {
		q.Warnings = append(q.Warnings, m.Warning)
	}
	if m.Trailer != nil {
		for _, w := range m.Trailer.Warnings {
			// Stretched windows are counted from the windows below, so a
			// recording without the recorder's warning shows them too.
			if !strings.Contains(w, "windows were stretched") {
				q.Warnings = append(q.Warnings, w)
			}
		}
	}
	if s := m.Stretch.String(); s != "" {
		q.Warnings = append(q.Warnings, s)
	}
	return q
}

// round keeps d significant digits: the page shows no more, and shorter
// numbers keep the report small.
func round(v float64, d int) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', d, 64), 64)
	return f
}

// shortContainer shortens a 64-digit container id to the 12 digits
// `docker ps` shows; anything else (a pod uid) is kept whole.
func shortContainer(id string) string {
	if len(id) == 64 {
		return id[:12]
	}
	return id
}
