package attribution

import (
	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
)

// blameKey is an off-CPU stack pair with its wait reason.
type blameKey struct {
	wait         string
	user, kernel uint64
}

// offKey is what off-CPU time is summed by: the reason, the thread (the
// rule keeps working threads only) and the function to blame.
type offKey struct {
	reason string
	wait   profile.WaitKey // the stratum of its scale
	tid    int
	fn     string
}

// offPart is one window's weighted time of an off-CPU row.
type offPart struct {
	row int
	ns  uint64
}

type offRow struct {
	offKey
	ns uint64 // weighted, before the recording's scale
}

// NewMetrics derives what the rules read from a model (complete: from
// model.Builder.Model or model.Read): the model's own sums where it has
// them, and the rest from its per-window series, histograms and light
// windows. Nothing here reads a recording's windows: a recording reaches
// the rules only through the model.
func NewMetrics(md *model.Model) *Metrics {
	h := &md.Header
	ncpu := h.Host.Topology.MaxCPU() + 1
	m := &Metrics{
		header:        h,
		status:        map[string]profile.EventStatus{},
		Totals:        md.Totals,
		HostTotals:    md.HostTotals,
		scaling:       md.Scaling,
		ThreadSeconds: md.ThreadSeconds,
		Threads:       md.Threads,
		hists:         map[string]bool{},
		pids:          map[int]bool{},
		nodeOf:        h.Host.Topology.NodeOf(),
		CPUs:          recordedCPUs(h),
		RunqNSPerCPU:  md.RunqNSPerCPU,
		threadNS:      map[int]float64{},
		spanNS:        md.CPUTime.SpanNS,
		idleNS:        md.CPUTime.Idle,
		idleAll:       md.CPUTime.IdleAll,
		othersNS:      md.CPUTime.Others,
		others:        md.Others,
		othersTotal:   md.OthersTotal,
		peers:         map[peerKey]float64{},
		self:          map[string][][]model.SelfCount{},
		names:         md.SelfNames,
		SampleEvent:   md.PrimarySample,
		SamplesPerCPU: make([]uint64, ncpu),
	}
	for _, e := range h.Events {
		m.status[e.Name] = e
	}
	for _, p := range md.Processes {
		m.pids[p.PID] = true
		for _, t := range p.Threads {
			m.threadNS[t.TID] += float64(t.Totals[metric.CPUClock])
		}
	}
	for _, hg := range md.Histograms {
		m.hists[hg.Name] = true
	}
	for ev, s := range md.Samples {
		m.self[ev] = s.Self
	}
	if s := md.Samples[md.PrimarySample]; s != nil {
		for _, per := range s.PerCPU {
			for cpu, v := range per {
				m.SamplesPerCPU[cpu] += v
				m.SampleTotal += v
			}
		}
	}
	d := deriver{m: m, stacks: md.Stacks, blamed: map[blameKey]string{}, offIdx: map[offKey]int{}}
	funcs := profile.NewFunctionTotaler(h.Functions)
	for wi := range md.Light.Windows {
		w := &md.Light.Windows[wi]
		wm := WindowMetrics{
			StartNS: w.StartNS, EndNS: w.EndNS,
			DurationS: float64(w.EndNS-w.StartNS) / 1e9,
			Quiet:     w.Quiet,
			Counts:    map[string]uint64{},
			Hist:      map[string][]uint64{},
		}
		if wi < len(md.Working) {
			wm.working = md.Working[wi]
		}
		for e, series := range md.Series {
			if wi < len(series) && series[wi] != nil {
				var t uint64
				for _, v := range series[wi] {
					t += v
				}
				wm.Counts[e] = t
			}
		}
		for _, hg := range md.Histograms {
			if wi < len(hg.PerWindow) && hg.PerWindow[wi] != nil {
				wm.Hist[hg.Name] = hg.PerWindow[wi]
			}
		}
		m.offScaler.Add(w)
		d.offCPU(w.OffCPU)
		m.waits(&wm, w)
		funcs.Add(w.Functions)
		m.Windows = append(m.Windows, wm)
	}
	if n := len(m.Windows); n > 0 {
		m.DurationS = float64(m.Windows[n-1].EndNS-m.Windows[0].StartNS) / 1e9
	}
	m.functions = funcs.Totals()
	return m
}

// deriver sums the light windows' off-CPU stacks into Metrics' rows.
type deriver struct {
	m      *Metrics
	stacks map[uint64]profile.Stack
	blamed map[blameKey]string
	offIdx map[offKey]int
}

// offCPU sums the window's off-CPU time: each stack's by reason, thread
// and the function to blame.
func (d *deriver) offCPU(o *profile.OffCPU) {
	if o == nil {
		return
	}
	m := d.m
	m.hasOffCPU = true
	var parts []offPart
	for _, s := range o.Stacks {
		k := offKey{s.Reason, s.Key(), s.TID, d.blame(s.Wait, s.UserStack, s.KernelStack)}
		i, ok := d.offIdx[k]
		if !ok {
			i = len(m.off)
			d.offIdx[k] = i
			m.off = append(m.off, offRow{offKey: k})
		}
		m.off[i].ns += s.NS
		parts = append(parts, offPart{row: i, ns: s.NS})
	}
	for len(m.offWin) < len(m.Windows) {
		m.offWin = append(m.offWin, nil)
	}
	m.offWin = append(m.offWin, parts)
}

// blame is the function profile.ExplainOffCPU blames for an off-CPU stack
// pair with its wait reason.
func (d *deriver) blame(wait string, user, kernel uint64) string {
	key := blameKey{wait, user, kernel}
	if fn, ok := d.blamed[key]; ok {
		return fn
	}
	_, fn := profile.ExplainOffCPU(wait, d.frames(user), d.frames(kernel))
	d.blamed[key] = fn
	return fn
}

func (d *deriver) frames(id uint64) []profile.Frame {
	if id == 0 {
		return nil
	}
	return d.stacks[id].Frames
}
