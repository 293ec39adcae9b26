package web

import (
	"fmt"
	"sort"

	"github.com/cacheheat/cacheheat/profile"
)

// LiveGrids is the live page's heatmap data: what the windows so far
// counted per core, per NUMA node, and in each latency histogram.
type LiveGrids struct {
	// Cols is the number of columns; each is BinWindows consecutive
	// windows (more than one when the recording outgrew MaxCells).
	Cols       int       `json:"cols"`
	BinWindows int       `json:"bin_windows"`
	ColStartS  []float64 `json:"col_start_s"` // seconds since the start
	CPU        Heat      `json:"cpu"`
	Node       Heat      `json:"node"`
	Latency    []Heat    `json:"latency"`
}

// Heat is one heatmap: rows by columns, one value set per metric.
type Heat struct {
	Rows    []string     `json:"rows"`
	Metrics []HeatMetric `json:"metrics"`
}

// HeatMetric is one selectable colour of a heatmap. Values are row-major
// (row*Cols + col): per second for events, counts for latency buckets.
type HeatMetric struct {
	Name   string    `json:"name"`
	Unit   string    `json:"unit"`
	Values []float64 `json:"values"`
}

// defaultGrids builds the live heatmaps from the windows so far. Columns
// merge consecutive windows so that the widest chart stays under maxCells.
func defaultGrids(rec *profile.Recording, maxCells int) any {
	topo := rec.Header.Host.Topology
	cpus := append([]profile.CPU(nil), topo.CPUs...)
	sort.Slice(cpus, func(i, j int) bool { return cpus[i].ID < cpus[j].ID })
	nodes := append([]profile.Node(nil), topo.Nodes...)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	nodeRow := map[int]int{}
	for i, n := range nodes {
		nodeRow[n.ID] = i
	}
	tallest := max(len(cpus), profile.HistBuckets, 1)
	bin := 1
	for tallest*((len(rec.Windows)+bin-1)/bin) > maxCells {
		bin *= 2
	}
	cols := (len(rec.Windows) + bin - 1) / bin
	g := LiveGrids{Cols: cols, BinWindows: bin, ColStartS: make([]float64, cols), Latency: []Heat{}}
	durS := make([]float64, cols)
	for i, w := range rec.Windows {
		c := i / bin
		if i%bin == 0 {
			g.ColStartS[c] = float64(w.StartNS) / 1e9
		}
		durS[c] += float64(w.EndNS-w.StartNS) / 1e9
	}
	for _, c := range cpus {
		g.CPU.Rows = append(g.CPU.Rows, fmt.Sprintf("cpu%d", c.ID))
	}
	for _, n := range nodes {
		g.Node.Rows = append(g.Node.Rows, fmt.Sprintf("node%d", n.ID))
	}
	cpuRow := map[int]int{}
	for i, c := range cpus {
		cpuRow[c.ID] = i
	}
	// Events in the header's order, so that the selector is stable.
	var events []string
	for _, e := range rec.Header.Events {
		if e.Status == profile.StatusMeasured {
			events = append(events, e.Name)
		}
	}
	for _, ev := range events {
		cm := HeatMetric{Name: ev, Unit: "/s", Values: make([]float64, len(cpus)*cols)}
		nm := HeatMetric{Name: ev, Unit: "/s", Values: make([]float64, len(nodes)*cols)}
		for i, w := range rec.Windows {
			col := i / bin
			for _, ctr := range w.Counters {
				if ctr.Event != ev {
					continue
				}
				for cpu, v := range ctr.PerCPU {
					r, ok := cpuRow[cpu]
					if !ok {
						continue
					}
					cm.Values[r*cols+col] += float64(v)
					if nr, ok := nodeRow[cpus[r].Node]; ok {
						nm.Values[nr*cols+col] += float64(v)
					}
				}
			}
		}
		perSecond(cm.Values, durS)
		perSecond(nm.Values, durS)
		g.CPU.Metrics = append(g.CPU.Metrics, cm)
		g.Node.Metrics = append(g.Node.Metrics, nm)
	}
	for _, name := range rec.HistogramNames() {
		h := Heat{Rows: make([]string, profile.HistBuckets)}
		for b := range h.Rows {
			h.Rows[b] = profile.FormatNS(profile.BucketLower(b))
		}
		m := HeatMetric{Name: name, Unit: "count", Values: make([]float64, profile.HistBuckets*cols)}
		for i, w := range rec.Windows {
			col := i / bin
			for _, hist := range w.Histograms {
				if hist.Name != name {
					continue
				}
				for _, per := range hist.PerCPU {
					for b, v := range per {
						if b < profile.HistBuckets {
							m.Values[b*cols+col] += float64(v)
						}
					}
				}
			}
		}
		h.Metrics = []HeatMetric{m}
		g.Latency = append(g.Latency, h)
	}
	return g
}

func perSecond(vals, durS []float64) {
	cols := len(durS)
	for i := range vals {
		if d := durS[i%cols]; d > 0 {
			vals[i] /= d
		}
	}
}
