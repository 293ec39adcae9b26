package attribution

import (
	"math"

	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/profile"
)

// The evaluators of the hardware and latency rules of the table
// (sched.go and waits.go hold the scheduling and waiting ones).

// topCPU returns the recorded CPU with the most of v and its share.
func (m *Metrics) topCPU(v func(cpu int) float64, cpus []int) (top int, share, total float64) {
	top = -1
	var best float64
	for _, c := range cpus {
		x := v(c)
		total += x
		if top < 0 || x > best {
			top, best = c, x
		}
	}
	return top, ratio(best, total), total
}

func (m *Metrics) samplesOn(cpu int) float64 {
	if cpu < 0 || cpu >= len(m.SamplesPerCPU) {
		return 0
	}
	return float64(m.SamplesPerCPU[cpu])
}

func evalL1Contention(m *Metrics, r *Rule) []Finding {
	top, share, total := m.topCPU(m.samplesOn, m.CPUs)
	if top < 0 {
		return nil
	}
	ev, ok := allPass(
		r.T(mSamples), total,
		r.T(mTopCoreSampleShare), share,
		r.T(metric.L1DLoadMissRatio), ratio(m.PerCPU(metric.L1DLoadMisses, top), m.PerCPU(metric.L1DLoads, top)),
		r.T(mWritebackPerLoad), ratio(m.PerCPU(metric.LLCStores, top), m.PerCPU(metric.LLCLoads, top)),
	)
	if !ok {
		return nil
	}
	return []Finding{{Severity: severity(r.T(metric.L1DLoadMissRatio), ev[2].Value), Scope: Scope{CPUs: []int{top}}, Evidence: ev}}
}

func evalL3Writeback(m *Metrics, r *Rule) []Finding {
	var out []Finding
	for _, node := range m.Nodes() {
		cpus := m.NodeCPUs(node)
		if len(cpus) < 2 {
			continue // one core cannot show a spread
		}
		_, share, misses := m.topCPU(func(c int) float64 { return m.PerCPU(metric.LLCLoadMisses, c) }, cpus)
		loads := m.NodeTotal(metric.LLCLoads, node)
		mr := ratio(misses, loads)
		ev, ok := allPass(
			r.T(mNodeLLCMissRate), misses/m.DurationS,
			r.T(mTopCoreNodeMissShare), share,
			r.bound(metric.LLCLoadMissRatio, ">="), mr,
			r.bound(metric.LLCLoadMissRatio, "<="), mr,
			r.T(mWritebackPerLoad), ratio(m.NodeTotal(metric.LLCStores, node), loads),
		)
		if ok {
			out = append(out, Finding{Severity: severity(r.T(mWritebackPerLoad), ev[4].Value), Scope: Scope{CPUs: cpus}, Evidence: ev})
		}
	}
	return out
}

// mpkiCPUs lists the CPUs whose own MPKI of event passes t: the heatmap
// region a whole-target finding points at.
func (m *Metrics) mpkiCPUs(event string, t Threshold) []int {
	var out []int
	for _, c := range m.CPUs {
		if t.pass(1000 * ratio(m.PerCPU(event, c), m.PerCPU(metric.Instructions, c))) {
			out = append(out, c)
		}
	}
	return out
}

func evalLLCThrashing(m *Metrics, r *Rule) []Finding {
	mpki := 1000 * ratio(m.Total(metric.LLCLoadMisses), m.Total(metric.Instructions))
	ev, ok := allPass(
		r.T(rateInstructions), m.Rate(metric.Instructions),
		r.T(metric.LLCLoadMPKI), mpki,
		r.T(metric.LLCLoadMissRatio), ratio(m.Total(metric.LLCLoadMisses), m.Total(metric.LLCLoads)),
	)
	if !ok {
		return nil
	}
	return []Finding{{Severity: severity(r.T(metric.LLCLoadMPKI), mpki), Scope: Scope{CPUs: m.mpkiCPUs(metric.LLCLoadMisses, r.T(metric.LLCLoadMPKI))}, Evidence: ev}}
}

func evalRemoteNUMA(m *Metrics, r *Rule) []Finding {
	share := ratio(m.Total(metric.NodeLoadMisses), m.Total(metric.NodeLoads))
	ev, ok := allPass(
		r.T(rateNodeLoads), m.Rate(metric.NodeLoads),
		r.T(metric.NodeLoadMissRatio), share,
	)
	if !ok {
		return nil
	}
	var cpus []int
	for _, c := range m.CPUs {
		if r.T(metric.NodeLoadMissRatio).pass(ratio(m.PerCPU(metric.NodeLoadMisses, c), m.PerCPU(metric.NodeLoads, c))) {
			cpus = append(cpus, c)
		}
	}
	return []Finding{{Severity: severity(r.T(metric.NodeLoadMissRatio), share), Scope: Scope{CPUs: cpus}, Evidence: ev}}
}

func evalDTLB(m *Metrics, r *Rule) []Finding {
	mpki := 1000 * ratio(m.Total(metric.DTLBLoadMisses), m.Total(metric.Instructions))
	ev, ok := allPass(
		r.T(rateInstructions), m.Rate(metric.Instructions),
		r.T(metric.DTLBLoadMPKI), mpki,
	)
	if !ok {
		return nil
	}
	return []Finding{{Severity: severity(r.T(metric.DTLBLoadMPKI), mpki), Scope: Scope{CPUs: m.mpkiCPUs(metric.DTLBLoadMisses, r.T(metric.DTLBLoadMPKI))}, Evidence: ev}}
}

func evalFalseSharing(m *Metrics, r *Rule) []Finding {
	// A model's cache-to-cache events count disjoint sources (same node,
	// other node): their sum is every such load.
	var names []string
	var hitm float64
	perCPU := map[int]float64{}
	for _, e := range metric.HITMEvents {
		if !m.Measured(e) {
			continue
		}
		names = append(names, e)
		hitm += m.Total(e)
		for _, c := range m.CPUs {
			perCPU[c] += m.PerCPU(e, c)
		}
	}
	hpki := 1000 * ratio(hitm, m.Total(metric.Instructions))
	ev, ok := allPass(
		r.T(rateInstructions), m.Rate(metric.Instructions),
		r.T(metric.HITMPKI), hpki,
	)
	if !ok {
		return nil
	}
	ev[1].Events = names
	var cpus []int
	for _, c := range m.CPUs {
		if r.T(metric.HITMPKI).pass(1000 * ratio(perCPU[c], m.PerCPU(metric.Instructions, c))) {
			cpus = append(cpus, c)
		}
	}
	// The heatmap shows each event, not their sum: point at the first.
	return []Finding{{Severity: severity(r.T(metric.HITMPKI), hpki), Scope: Scope{CPUs: cpus}, Evidence: ev, Metric: names[0]}}
}

func evalCoreHotspot(m *Metrics, r *Rule) []Finding {
	if len(m.CPUs) < 2 {
		return nil // nowhere else to run
	}
	top, share, total := m.topCPU(m.samplesOn, m.CPUs)
	if top < 0 {
		return nil
	}
	least := math.Inf(1)
	for _, c := range m.CPUs {
		if c != top {
			least = min(least, m.CPUBusy(c))
		}
	}
	ev, ok := allPass(
		r.T(mSamples), total,
		r.T(mWorkingThreads), metric.Median(m.steadyWorking()),
		r.T(mTopCoreSampleShare), share,
		r.T(mTopCoreDemand), m.Demand(top),
		r.T(mLeastBusyOther), least,
	)
	if !ok {
		return nil
	}
	return []Finding{{Severity: severity(r.T(mTopCoreDemand), ev[3].Value), Scope: Scope{CPUs: []int{top}}, Evidence: ev}}
}

// busyCPUs lists the CPUs on which the target counted at least a tenth of
// its share of an event: where to look on the heatmap.
func (m *Metrics) busyCPUs(event string) []int {
	var out []int
	total := m.Total(event)
	for _, c := range m.CPUs {
		if total > 0 && m.PerCPU(event, c) >= 0.1*total/float64(len(m.CPUs)) {
			out = append(out, c)
		}
	}
	return out
}

func evalPageFaults(m *Metrics, r *Rule) []Finding {
	t := r.T(ratePageFaults)
	var faults, secs float64
	for i, w := range m.Windows {
		if !m.warmup(i) {
			faults += float64(w.Counts[metric.PageFaults])
			secs += w.DurationS
		}
	}
	rate := ratio(faults, secs)
	if !t.pass(rate) {
		return nil
	}
	// The time range is the windows that are themselves over the floor.
	var start, end int64 = -1, 0
	for i, w := range m.Windows {
		if !m.warmup(i) && t.pass(w.Rate(metric.PageFaults)) {
			if start < 0 {
				start = w.StartNS
			}
			end = w.EndNS
		}
	}
	sc := Scope{CPUs: m.busyCPUs(metric.PageFaults)}
	if start >= 0 {
		sc.StartNS, sc.EndNS = start, end
	}
	return []Finding{{Severity: severity(t, rate), Scope: sc, Evidence: []Evidence{t.evidence(rate)}}}
}

func evalMigrations(m *Metrics, r *Rule) []Finding {
	if len(m.CPUs) < 2 {
		return nil
	}
	t := r.T(mMigrationsPerThread)
	v := ratio(m.Total(metric.CPUMigrations), m.ThreadSeconds)
	if !t.pass(v) {
		return nil
	}
	return []Finding{{Severity: severity(t, v), Scope: Scope{CPUs: m.busyCPUs(metric.CPUMigrations)}, Evidence: []Evidence{t.evidence(v)}}}
}

func evalLatencyTail(m *Metrics, r *Rule) []Finding {
	var out []Finding
	for _, h := range []string{profile.HistRunqLatency, profile.HistOffCPU} {
		if f, ok := m.latencyTail(r, h); ok {
			out = append(out, f)
		}
	}
	return out
}

// latencyTail is latency-tail on one histogram: the tail windows of its
// p99 and the counter that rises most in them.
func (m *Metrics) latencyTail(r *Rule, h string) (Finding, bool) {
	nwin, floor, factor := r.T(mEnoughWindows), r.T(mTailP99), r.T(mTailOverMedian)
	causeT, excessT, ntail := r.T(mCauseOverMedian), r.T(mCauseExcess), r.T(mTailWindows)
	idx, p99 := m.steadyP99s(h, r.T(mEventsPerWindow))
	if !nwin.pass(float64(len(idx))) {
		return Finding{}, false
	}
	med := metric.Median(p99)
	// The run's own spread of p99s, in log2 buckets: a window is a tail
	// only well outside it.
	logs := make([]float64, len(p99))
	for k, v := range p99 {
		logs[k] = math.Log2(math.Max(v, 1))
	}
	center := metric.Median(logs)
	dev := make([]float64, len(logs))
	for k, v := range logs {
		dev[k] = math.Abs(v - center)
	}
	spread := math.Max(metric.Median(dev), 0.5)
	var tail []int
	var tailP99 []float64
	for k, i := range idx {
		if floor.pass(p99[k]) && factor.pass(ratio(p99[k], med)) && logs[k]-center > 3*spread {
			tail = append(tail, i)
			tailP99 = append(tailP99, p99[k])
		}
	}
	if !ntail.pass(float64(len(tail))) {
		return Finding{}, false
	}
	c, ok := m.tailCause(idx, tail, causeT, excessT)
	if !ok {
		return Finding{}, false
	}
	tp := metric.Median(tailP99)
	first, last := m.Windows[tail[0]], m.Windows[tail[len(tail)-1]]
	ev := []Evidence{
		{Metric: metric.ID(h + " p99 in tail windows (median)"), Value: tp, Threshold: floor.Value, Op: floor.Op, Unit: metric.UnitNS},
		ntail.evidence(float64(len(tail))),
		factor.evidence(ratio(tp, med)),
		{Metric: metric.ID(c.event + "/s in tail windows over median window"), Value: c.times, Threshold: causeT.Value, Op: causeT.Op, Unit: metric.UnitTimes},
		{Metric: metric.ID(c.event + "/s in tail windows minus median window"), Value: c.tail - c.median, Threshold: excessT.Value, Op: excessT.Op, Unit: metric.UnitPerSecond},
	}
	return Finding{
		Severity: severity(factor, ratio(tp, med)),
		Scope:    Scope{CPUs: m.busyCPUs(c.event), StartNS: first.StartNS, EndNS: last.EndNS},
		Evidence: ev,
		Metric:   c.event,
	}, true
}

// steadyP99s returns the windows of the steady state that hold at least
// minEvents of histogram h, with h's p99 in each.
func (m *Metrics) steadyP99s(h string, minEvents Threshold) (idx []int, p99 []float64) {
	for i, w := range m.Windows {
		if !m.steadyWindow(i) {
			continue
		}
		if b := w.Hist[h]; minEvents.pass(float64(HistogramCount(b))) {
			idx = append(idx, i)
			p99 = append(p99, profile.Percentile(b, 0.99))
		}
	}
	return idx, p99
}

// tailCause is a counter's rate in the tail windows against the median
// window's.
type tailCause struct {
	event        string
	times        float64 // tail / max(median, 1)
	tail, median float64 // per second
}

// tailCause picks, of the measured tailCauses, the one whose tail-window
// rate is the largest multiple of its median-window rate among those
// that pass both thresholds.
func (m *Metrics) tailCause(idx, tail []int, causeT, excessT Threshold) (tailCause, bool) {
	var best tailCause
	for _, e := range tailCauses {
		if !m.Measured(e) {
			continue
		}
		var rates []float64
		for _, i := range idx {
			rates = append(rates, m.Windows[i].Rate(e))
		}
		medR := metric.Median(rates)
		var tailR float64
		for _, i := range tail {
			tailR += m.Windows[i].Rate(e)
		}
		tailR /= float64(len(tail))
		x := tailR / max(medR, 1) // a cause absent from the median window counts as 1/s
		if causeT.pass(x) && excessT.pass(tailR-medR) && x > best.times {
			best = tailCause{event: e, times: x, tail: tailR, median: medR}
		}
	}
	return best, best.event != ""
}
