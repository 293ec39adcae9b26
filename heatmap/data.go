package heatmap

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/cacheheat/cacheheat/attribution"
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
	// Notes say how to read the data where nothing was lost: quiet
	// windows.
	Notes []string `json:"notes,omitempty"`
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
			// Likewise the data lost, said below with its windows.
			if !strings.Contains(w, "windows were stretched") && !strings.HasPrefix(w, "data lost: ") {
				q.Warnings = append(q.Warnings, w)
			}
		}
	}
	if s := m.Stretch.String(); s != "" {
		q.Warnings = append(q.Warnings, s)
	}
	if st := m.Stretch; st.Quiet > 0 {
		q.Notes = append(q.Notes, fmt.Sprintf("%d of %d windows were quiet, %.1f s in all: the target did nothing, and the recorder slept until it ran again (record --quiet-max). A quiet window is one column of the heatmaps however long it lasted; its counts are complete.", st.Quiet, st.Windows, float64(st.QuietNS)/1e9))
	}
	if s := profile.DropWindowsString(m.DropWindows, m.Windows()); s != "" {
		q.Warnings = append(q.Warnings, s+": "+m.Drops.String())
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
