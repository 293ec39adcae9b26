package promexporter

import (
	"math"
	"sort"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cacheheat/cacheheat/collector"
	"github.com/cacheheat/cacheheat/profile"
)

// DefaultMaxCgroups bounds the cgroups that get their own series.
const DefaultMaxCgroups = 500

// OtherCgroup is the cgroup label of everything beyond MaxCgroups, and of
// cgroups removed before they could be named.
const OtherCgroup = "other"

// Options configure an Exporter.
type Options struct {
	// MaxCgroups is the most cgroups with their own series; the rest are
	// summed into cgroup="other". 0 means DefaultMaxCgroups.
	MaxCgroups int
	Version    string // cacheheat_build_info's version label
}

// Bucket bounds of the latency histograms. The kernel counts log2
// nanosecond buckets: bucket i holds [2^i, 2^(i+1)) ns. A classic bucket
// here is the cumulative count below one of those boundaries (le = 2^e ns,
// an exclusive bound, since the kernel's values are whole nanoseconds), so
// no count moves across a boundary and nothing is interpolated. To bound
// the series per cgroup (one histogram for the run queue and up to five
// for off-CPU reasons), every second boundary is kept, from 2^10 ns
// (1.02 µs; everything faster is counted there) to 2^34 ns (17.2 s; beyond
// it only +Inf): 13 buckets, factors of 4 apart.
const (
	firstBound = 10
	lastBound  = 34
	boundStep  = 2
)

// Exporter is a collector.Sink that keeps cumulative counts from the
// recorder's windows and a prometheus.Collector that serves them. Counters
// start at zero when the exporter starts.
type Exporter struct {
	opts Options

	mu          sync.Mutex
	events      []string    // measured, by slot
	unsupported [][2]string // event, reason
	simulated   [][2]string // event, fixture: counted by a software stand-in
	cpuNode     map[int]int // online CPU -> NUMA node
	cpus        []int       // online CPUs, sorted
	perCPU      [][]uint64  // [slot][cpu] cumulative, all tasks
	cgroups     map[string]*cgroupState
	owner       map[uint64]string // cgroup id -> its own label, while it has one
	own         int               // labels other than "other"
	programs    []collector.ProgramStats
	dropped     map[string]uint64
	mapEntries  map[string]int
	started     bool
}

// cgroupState is one cgroup label's cumulative values.
type cgroupState struct {
	container string
	ids       map[uint64]bool // cgroups counted under this label now
	counts    map[string]uint64
	runq      hist
	offcpu    [collector.OffCPUReasons]hist
}

// hist is a cumulative log2 nanosecond histogram.
type hist struct {
	buckets [profile.HistBuckets]uint64
	sumNS   uint64
}

func (h *hist) add(b []uint64, sumNS uint64) {
	for i, n := range b {
		h.buckets[min(i, len(h.buckets)-1)] += n
	}
	h.sumNS += sumNS
}

func (h *hist) count() uint64 {
	var n uint64
	for _, b := range h.buckets {
		n += b
	}
	return n
}

// New returns an Exporter; register it with a prometheus.Registry and give
// it to the recorder as a sink.
func New(opts Options) *Exporter {
	if opts.MaxCgroups <= 0 {
		opts.MaxCgroups = DefaultMaxCgroups
	}
	return &Exporter{
		opts:       opts,
		cgroups:    map[string]*cgroupState{},
		owner:      map[uint64]string{},
		dropped:    map[string]uint64{},
		mapEntries: map[string]int{},
	}
}

// Drop reasons of cacheheat_dropped_total: every one is always exported,
// so an alert on any of them can rely on the series.
var dropReasons = []string{"stack_errors", "sample_map_full", "task_map_full", "map_errors", "cgroup_map_full"}

// Header takes the events and the topology from the recording's header.
func (e *Exporter) Header(h profile.Header) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cpuNode = map[int]int{}
	e.cpus = nil
	for _, c := range h.Host.Topology.CPUs {
		e.cpuNode[c.ID] = c.Node
		e.cpus = append(e.cpus, c.ID)
	}
	sort.Ints(e.cpus)
	e.events, e.unsupported, e.simulated = nil, nil, nil
	for _, ev := range h.Events {
		if ev.Status == profile.StatusMeasured {
			e.events = append(e.events, ev.Name)
			if ev.Simulated && h.Simulated() {
				e.simulated = append(e.simulated, [2]string{ev.Name, h.PMU.Simulated})
			}
		} else {
			e.unsupported = append(e.unsupported, [2]string{ev.Name, ev.Reason})
		}
	}
	// The host's other events it cannot count are listed too, so that a
	// dashboard panel on one of them says why it is empty: on Zen, for
	// one, LLC-loads has no mapping even with a PMU.
	for _, ev := range h.HostEvents {
		if ev.Status != profile.StatusMeasured {
			e.unsupported = append(e.unsupported, [2]string{ev.Name, ev.Reason})
		}
	}
	e.perCPU = make([][]uint64, len(e.events))
	for _, r := range dropReasons {
		e.dropped[r] += 0
	}
	e.started = true
	return nil
}

// Window adds a window's deltas and what the recorder has beside it:
// the per-cgroup deltas, BPF program run times and map sizes.
func (e *Exporter) Window(w *profile.Window, x *collector.WindowExtras, _ collector.Status) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x == nil {
		x = &collector.WindowExtras{}
	}
	for _, c := range w.Counters {
		slot := indexOf(e.events, c.Event)
		if slot < 0 {
			continue
		}
		if len(e.perCPU[slot]) < len(c.HostPerCPU) {
			e.perCPU[slot] = append(e.perCPU[slot], make([]uint64, len(c.HostPerCPU)-len(e.perCPU[slot]))...)
		}
		for cpu, d := range c.HostPerCPU {
			e.perCPU[slot][cpu] += d
		}
	}
	for _, c := range x.Cgroups {
		e.addCgroup(c)
	}
	d := w.Drops
	e.dropped["stack_errors"] += d.StackErrors
	e.dropped["sample_map_full"] += d.SampleMapFull
	e.dropped["task_map_full"] += d.ProcMapFull
	e.dropped["map_errors"] += d.MapErrors
	e.dropped["cgroup_map_full"] += x.CgroupMapFull
	if x.Programs != nil {
		e.programs = append(e.programs[:0], x.Programs...)
	}
	e.mapEntries = map[string]int{}
	for k, v := range x.MapEntries {
		e.mapEntries[k] = v
	}
	return nil
}

// Close ends nothing: the counters stay as they were, served until the
// exporter stops.
func (e *Exporter) Close(*profile.Trailer) error { return nil }

// addCgroup adds one cgroup's window under its label: its own path while
// fewer than MaxCgroups labels exist (or it has one already), else "other".
// A cgroup counted in "other" gets its own series (from zero) as soon as a
// slot is free. A removed cgroup's label goes away with its last cgroup,
// so its series are gone from the next scrape.
func (e *Exporter) addCgroup(c collector.CgroupWindow) {
	label, ok := e.owner[c.ID]
	if !ok {
		label = OtherCgroup
		if c.Path != "" && c.Path != OtherCgroup && (e.cgroups[c.Path] != nil || e.own < e.opts.MaxCgroups) {
			label = c.Path
			if !c.Removed {
				e.owner[c.ID] = label
			}
		}
	}
	st := e.cgroups[label]
	if st == nil {
		st = &cgroupState{ids: map[uint64]bool{}, counts: map[string]uint64{}}
		if label != OtherCgroup {
			st.container = collector.ContainerOf(label)
			e.own++
		}
		e.cgroups[label] = st
	}
	for ev, n := range c.Counts {
		st.counts[ev] += n
	}
	st.runq.add(c.Runq, c.RunqNS)
	for r := range st.offcpu {
		st.offcpu[r].add(c.OffCPU[r], c.OffCPUNS[r])
	}
	if label == OtherCgroup {
		return
	}
	if !c.Removed {
		st.ids[c.ID] = true
		return
	}
	delete(e.owner, c.ID)
	delete(st.ids, c.ID)
	if label != OtherCgroup && len(st.ids) == 0 {
		delete(e.cgroups, label)
		e.own--
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// cpuClock is the event whose counts are nanoseconds.
const cpuClock = "cpu-clock"

// Metric names: a contract with dashboards and alerts (docs/EXPORTER.md).
// The dashboard (package dashboard) builds its queries from these.
const (
	MetricCPUEvents        = "cacheheat_cpu_events_total"
	MetricCPUSeconds       = "cacheheat_cpu_seconds_total"
	MetricCgroupEvents     = "cacheheat_cgroup_events_total"
	MetricCgroupCPUSeconds = "cacheheat_cgroup_cpu_seconds_total"
	MetricRunqLatency      = "cacheheat_runqueue_latency_seconds"
	MetricOffCPU           = "cacheheat_offcpu_seconds"
	MetricBPFRun           = "cacheheat_bpf_run_seconds_total"
	MetricDropped          = "cacheheat_dropped_total"
	MetricMapEntries       = "cacheheat_map_entries"
	MetricBuildInfo        = "cacheheat_build_info"
	MetricEventUnsupported = "cacheheat_event_unsupported"
	MetricEventSimulated   = "cacheheat_event_simulated"
)

var (
	// cpu-clock counts nanoseconds, not events: it is published in
	// seconds under a name of its own (Prometheus's base unit and
	// naming), never summed with counts.
	descCPUEvents = prometheus.NewDesc(MetricCPUEvents,
		"Events counted on each CPU, all tasks (every event but cpu-clock, which is cacheheat_cpu_seconds_total).", []string{"cpu", "node", "event"}, nil)
	descCPUSeconds = prometheus.NewDesc(MetricCPUSeconds,
		"Time the tasks ran on each CPU (the cpu-clock event), all tasks.", []string{"cpu", "node"}, nil)
	descCgroupEvents = prometheus.NewDesc(MetricCgroupEvents,
		"Events counted for the tasks of each cgroup v2, not its descendants (every event but cpu-clock, which is cacheheat_cgroup_cpu_seconds_total).", []string{"cgroup", "container", "event"}, nil)
	descCgroupCPUSeconds = prometheus.NewDesc(MetricCgroupCPUSeconds,
		"Time the tasks of each cgroup v2 ran (the cpu-clock event), not its descendants'.", []string{"cgroup", "container"}, nil)
	descRunq = prometheus.NewDesc(MetricRunqLatency,
		"Time from wakeup (or preemption) to running, per cgroup v2 of the task.", []string{"cgroup"}, nil)
	descOffCPU = prometheus.NewDesc(MetricOffCPU,
		"Time off the CPU from a switch-out to the next switch-in, per cgroup v2 and the task's state at the switch-out.", []string{"cgroup", "reason"}, nil)
	descBPFRun = prometheus.NewDesc(MetricBPFRun,
		"CPU time spent in each of cacheheat's BPF programs, as the kernel accounts it.", []string{"program"}, nil)
	descDropped = prometheus.NewDesc(MetricDropped,
		"Counts or samples lost, by reason.", []string{"reason"}, nil)
	descMapEntries = prometheus.NewDesc(MetricMapEntries,
		"Entries in cacheheat's BPF maps that grow with the host.", []string{"map"}, nil)
	descBuildInfo = prometheus.NewDesc(MetricBuildInfo,
		"Always 1; the version of cacheheat.", []string{"version"}, nil)
	descSimulated = prometheus.NewDesc(MetricEventSimulated,
		"1 for each event counted by a software stand-in of a simulated PMU (CACHEHEAT_SIMULATED_PMU): its counts are not the hardware event's.", []string{"event", "pmu"}, nil)
	descUnsupported = prometheus.NewDesc(MetricEventUnsupported,
		"1 for each requested event this host cannot count, with the reason.", []string{"event", "reason"}, nil)
)

// Describe sends every metric's description.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCPUEvents, descCPUSeconds, descCgroupEvents, descCgroupCPUSeconds, descRunq, descOffCPU, descBPFRun, descDropped, descMapEntries, descBuildInfo, descUnsupported, descSimulated} {
		ch <- d
	}
}

// Collect sends the current cumulative values.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descBuildInfo, prometheus.GaugeValue, 1, e.opts.Version)
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.started {
		return
	}
	for _, u := range e.unsupported {
		ch <- prometheus.MustNewConstMetric(descUnsupported, prometheus.GaugeValue, 1, u[0], u[1])
	}
	for _, s := range e.simulated {
		ch <- prometheus.MustNewConstMetric(descSimulated, prometheus.GaugeValue, 1, s[0], s[1])
	}
	for slot, ev := range e.events {
		for _, cpu := range e.cpus {
			v, c, n := float64(at(e.perCPU[slot], cpu)), strconv.Itoa(cpu), strconv.Itoa(e.cpuNode[cpu])
			if ev == cpuClock {
				ch <- prometheus.MustNewConstMetric(descCPUSeconds, prometheus.CounterValue, v/1e9, c, n)
			} else {
				ch <- prometheus.MustNewConstMetric(descCPUEvents, prometheus.CounterValue, v, c, n, ev)
			}
		}
	}
	for label, st := range e.cgroups {
		for ev, n := range st.counts {
			if ev == cpuClock {
				ch <- prometheus.MustNewConstMetric(descCgroupCPUSeconds, prometheus.CounterValue, float64(n)/1e9, label, st.container)
			} else {
				ch <- prometheus.MustNewConstMetric(descCgroupEvents, prometheus.CounterValue, float64(n), label, st.container, ev)
			}
		}
		ch <- constHistogram(descRunq, &st.runq, label)
		for r := range st.offcpu {
			if st.offcpu[r].count() > 0 {
				ch <- constHistogram(descOffCPU, &st.offcpu[r], label, collector.OffCPUReasonNames[r])
			}
		}
	}
	for _, p := range e.programs {
		ch <- prometheus.MustNewConstMetric(descBPFRun, prometheus.CounterValue, p.RunTime.Seconds(), p.Name)
	}
	for r, n := range e.dropped {
		ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(n), r)
	}
	for m, n := range e.mapEntries {
		ch <- prometheus.MustNewConstMetric(descMapEntries, prometheus.GaugeValue, float64(n), m)
	}
}

// bucketBounds are the classic buckets' upper bounds in seconds.
var bucketBounds = func() []float64 {
	var b []float64
	for e := firstBound; e <= lastBound; e += boundStep {
		b = append(b, math.Ldexp(1, e)/1e9)
	}
	return b
}()

// constHistogram turns a log2 nanosecond histogram into a classic one:
// the bucket le=2^e ns counts the kernel's buckets 0..e-1, whose values
// are all below 2^e.
func constHistogram(d *prometheus.Desc, h *hist, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(bucketBounds))
	var below uint64 // the count of kernel buckets < e
	e := 0
	for j, bound := range bucketBounds {
		for ; e < firstBound+j*boundStep && e < len(h.buckets); e++ {
			below += h.buckets[e]
		}
		buckets[bound] = below
	}
	return prometheus.MustNewConstHistogram(d, h.count(), float64(h.sumNS)/1e9, buckets, labels...)
}

func at(s []uint64, i int) uint64 {
	if i < 0 || i >= len(s) {
		return 0
	}
	return s[i]
}
