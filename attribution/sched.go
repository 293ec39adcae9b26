package attribution

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
)

// The metrics of the scheduling rules: who runs, who waits, who blocks and
// where. Computed on first use.

// FunctionShare is one function named by a finding with its share of the
// finding's own samples (cpu-clock samples, page-fault samples or off-CPU
// time, as the finding says).
type FunctionShare struct {
	Function string  `json:"function"`
	Share    float64 `json:"share"`
	// Source is what the share is of: a sample event's name or "offcpu".
	Source string `json:"source"`
}

// minFunctionShare: a function under 5% of a finding's samples is noise,
// not a culprit (at 99 Hz over 4 s, one sample in 400 is 0.25%).
const minFunctionShare = 0.05

// maxFunctions is how many functions a finding names.
const maxFunctions = 3

// threadCPU is each target thread's cpu-clock (ns) over the recording.
func (m *Metrics) threadCPU() map[int]float64 { return m.threadNS }

// workingThreads is, per window, the number of target threads that did
// work in it (model.Model.Working).
func (m *Metrics) workingThreads() []float64 {
	out := make([]float64, len(m.Windows))
	for i, w := range m.Windows {
		out[i] = float64(w.working)
	}
	return out
}

// steadyWorking is workingThreads without the warm-up window.
func (m *Metrics) steadyWorking() []float64 {
	var out []float64
	for i, n := range m.workingThreads() {
		if !m.warmup(i) {
			out = append(out, n)
		}
	}
	return out
}

// steadyRunnable is, per window without the warm-up, how many target
// threads were running or waiting to run on average: (on-CPU time +
// run-queue wait) / window length, the wait from the runq-latency
// histogram's bucket midpoints.
func (m *Metrics) steadyRunnable() []float64 {
	var out []float64
	for i, w := range m.Windows {
		if !m.steadyWindow(i) || w.DurationS <= 0 {
			continue
		}
		ns := float64(w.Counts[metric.CPUClock]) + profile.HistogramSum(w.Hist[profile.HistRunqLatency])
		out = append(out, ns/(w.DurationS*1e9))
	}
	return out
}

// ownBusy is the target's on-CPU time over the steady windows as a share
// of the allowed CPUs' time.
func (m *Metrics) ownBusy(allowed []int) float64 {
	on, secs := m.steadyTime()
	return ratio(on, secs*1e9*float64(len(allowed)))
}

// AllowedCPUs are the recorded CPUs the target may run on: its affinity
// when the recording has it, else every recorded CPU.
func (m *Metrics) AllowedCPUs() []int {
	allowed := m.header.Target.AllowedCPUs
	if len(allowed) == 0 {
		return m.CPUs
	}
	var out []int
	for _, c := range m.CPUs {
		for _, a := range allowed {
			if a == c {
				out = append(out, c)
			}
		}
	}
	if len(out) == 0 {
		return m.CPUs
	}
	return out
}

// HasIdle reports whether every window has the CPUs' idle time.
func (m *Metrics) HasIdle() bool { return len(m.Windows) > 0 && m.idleAll }

// CPUBusy is the share of a CPU's time that any task (target or not) ran,
// from its idle time.
func (m *Metrics) CPUBusy(cpu int) float64 {
	if m.spanNS == 0 {
		return math.NaN()
	}
	var idle float64
	if cpu >= 0 && cpu < len(m.idleNS) {
		idle = m.idleNS[cpu]
	}
	return math.Max(0, 1-idle/m.spanNS)
}

// OthersShare is the share of the given CPUs' time that tasks other than
// the target ran: time not idle and not the target's.
func (m *Metrics) OthersShare(cpus []int) float64 {
	var others, total float64
	for _, cpu := range cpus {
		total += m.spanNS
		if cpu >= 0 && cpu < len(m.othersNS) {
			others += m.othersNS[cpu]
		} else {
			others += m.spanNS
		}
	}
	return ratio(others, total)
}

// topOthers names the other processes with the most cpu-clock samples,
// each with its share of those samples, and their pids.
func (m *Metrics) topOthers() ([]FunctionShare, []int) {
	counts, total := m.others, m.othersTotal
	keys := make([]model.Other, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i].PID < keys[j].PID
	})
	var out []FunctionShare
	var pids []int
	for _, k := range keys {
		share := float64(counts[k]) / float64(total)
		if share < minFunctionShare || len(out) == maxFunctions {
			break
		}
		out = append(out, FunctionShare{Function: fmt.Sprintf("%s (pid %d)", k.Comm, k.PID), Share: share, Source: metric.CPUClock})
		pids = append(pids, k.PID)
	}
	return out, pids
}

// HasOffCPU reports whether the recording has off-CPU stacks.
func (m *Metrics) HasOffCPU() bool { return m.hasOffCPU }

// blockingShare: a thread whose on-CPU time is at least this share of
// the whole target's did work; idle runtime threads run far less. Relative
// to the target, not to the clock, so that a target starved by other load
// still has working threads.
const blockingShare = 0.01

// offCPUOf sums the target's scaled off-CPU time of one reason in the
// steady windows (steadyWindow: a command's start-up and the exit of all
// its threads at once are not its steady state), over the threads that
// did work (blockingShare), and splits it by the function to blame.
func (m *Metrics) offCPUOf(reason string) (ns float64, by map[string]float64) {
	cpu := m.threadCPU()
	var all float64
	for _, v := range cpu {
		all += v
	}
	floor := blockingShare * all
	by = map[string]float64{}
	for i, parts := range m.offWin {
		if i >= len(m.Windows) || !m.steadyWindow(i) {
			continue
		}
		for _, p := range parts {
			r := m.off[p.row]
			if r.reason != reason || cpu[r.tid] < floor {
				continue
			}
			v := float64(p.ns) * m.offScaler.Scale(r.wait)
			ns += v
			by[r.fn] += v
		}
	}
	return ns, by
}

// steadyTime is the target's on-CPU time (ns) and the length (s) of the
// steady windows.
func (m *Metrics) steadyTime() (onNS, secs float64) {
	for i, w := range m.Windows {
		if m.steadyWindow(i) {
			onNS += float64(w.Counts[metric.CPUClock])
			secs += w.DurationS
		}
	}
	return onNS, secs
}

// shares turns per-function amounts into the functions a finding names:
// the largest, at least minFunctionShare each, at most maxFunctions.
func shares(by map[string]float64, source string) []FunctionShare {
	var total float64
	names := make([]string, 0, len(by))
	for n, v := range by {
		total += v
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if by[names[i]] != by[names[j]] {
			return by[names[i]] > by[names[j]]
		}
		return names[i] < names[j]
	})
	var out []FunctionShare
	for _, n := range names {
		s := by[n] / total
		if s < minFunctionShare || len(out) == maxFunctions {
			break
		}
		out = append(out, FunctionShare{Function: n, Share: s, Source: source})
	}
	return out
}

func shareNames(fs []FunctionShare) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, f.Function)
	}
	return out
}

// saturatedWindows finds the steady windows (steadyWindow) whose
// run-queue p99 is over the threshold, with enough events to have a p99.
func saturatedWindows(m *Metrics, floor, p99t Threshold) (idx []int, p99s []float64) {
	for i, w := range m.Windows {
		if !m.steadyWindow(i) {
			continue
		}
		b := w.Hist[profile.HistRunqLatency]
		if !floor.pass(float64(HistogramCount(b))) {
			continue
		}
		if p := profile.Percentile(b, 0.99); p99t.pass(p) {
			idx = append(idx, i)
			p99s = append(p99s, p)
		}
	}
	return idx, p99s
}

// steadyWindows is the number of steady windows (steadyWindow).
func (m *Metrics) steadyWindows() int {
	n := 0
	for i := range m.Windows {
		if m.steadyWindow(i) {
			n++
		}
	}
	return n
}

// steadyWindow says whether window i samples the steady state: not the
// warm-up of a command the recorder started, and at least half the
// median window's length. A partial window (the last one, cut short by
// the target's exit) holds the exit of every thread and a rate over a
// fraction of a window. A quiet window (the recorder slept while the
// target did nothing) is steady whatever its length, and left out of the
// median: it holds the waits that ended at the target's wake-up, and a
// few long ones would otherwise make every other window look partial.
func (m *Metrics) steadyWindow(i int) bool {
	if m.warmup(i) {
		return false
	}
	if m.Windows[i].Quiet {
		return true
	}
	if m.medianSpan == 0 {
		var lens []float64
		for _, w := range m.Windows {
			if !w.Quiet {
				lens = append(lens, w.DurationS)
			}
		}
		m.medianSpan = metric.Median(lens)
	}
	return m.Windows[i].DurationS >= m.medianSpan/2
}

// warmup reports whether window i is the start of a command the recorder
// launched: its faults and latency spikes are the program setting up
// (mapping its binary, allocating its buffers, starting threads), not its
// steady state. Rules leave it out; what persists shows in later windows.
// A recording of one window has nothing else and keeps it.
func (m *Metrics) warmup(i int) bool {
	return i == 0 && len(m.Windows) > 1 && m.header.Target.Kind == profile.TargetCommand
}

func evalCPUSaturation(m *Metrics, r *Rule) []Finding {
	floor, p99t, sharet, overt := r.T(mRunqEvents), r.T(mRunqP99), r.T(mSaturatedShare), r.T(mRunnablePerCPU)
	steady := m.steadyWindows()
	sat, p99s := saturatedWindows(m, floor, p99t)
	if steady == 0 || len(sat) == 0 {
		return nil
	}
	share := float64(len(sat)) / float64(steady)
	allowed := m.AllowedCPUs()
	runnable := metric.Median(m.steadyRunnable())
	over := runnable / float64(len(allowed))
	med := metric.Median(p99s)
	ev, ok := allPass(p99t, med, sharet, share, overt, over, r.T(mTargetBusy), m.ownBusy(allowed))
	if !ok {
		return nil
	}
	ev[0].Metric = "runq-latency p99 (median of saturated windows)"
	first, last := m.Windows[sat[0]], m.Windows[sat[len(sat)-1]]
	return []Finding{{
		Advice:   fmt.Sprintf("The target keeps %.1f threads running or waiting to run, on average, on the %d CPUs it may use (%s), and itself uses %.0f%% of them, so its own threads queue behind each other. Use fewer threads (a pool sized to the CPUs) or give it more CPUs (affinity, cpuset).", runnable, len(allowed), joinInts(allowed), 100*m.ownBusy(allowed)),
		Severity: severity(p99t, med),
		Scope:    Scope{CPUs: allowed, StartNS: first.StartNS, EndNS: last.EndNS},
		Evidence: ev,
	}}
}

func evalNoisyNeighbour(m *Metrics, r *Rule) []Finding {
	floor, p99t, sharet, otherst := r.T(mRunqEvents), r.T(mRunqP99), r.T(mSaturatedShare), r.T(mOthersShare)
	steady := m.steadyWindows()
	sat, p99s := saturatedWindows(m, floor, p99t)
	if steady == 0 || len(sat) == 0 {
		return nil
	}
	allowed := m.AllowedCPUs()
	working := m.steadyWorking()
	// The target's own oversubscription is cpu-saturation's finding.
	if runnableOver.pass(metric.Median(m.steadyRunnable())/float64(len(allowed))) && ownBusy.pass(m.ownBusy(allowed)) {
		return nil
	}
	med := metric.Median(p99s)
	ev, ok := allPass(p99t, med, sharet, float64(len(sat))/float64(steady), otherst, m.OthersShare(allowed))
	if !ok {
		return nil
	}
	ev[0].Metric = "runq-latency p99 (median of saturated windows)"
	// Who: the other processes by their cpu-clock samples; they are
	// named in the advice and scope (pids), not as the target's functions.
	who, pids := m.topOthers()
	var names []string
	for _, w := range who {
		names = append(names, fmt.Sprintf("%s %.0f%%", w.Function, 100*w.Share))
	}
	whoText := "processes the recording does not name"
	if len(names) > 0 {
		whoText = strings.Join(names, ", ")
	}
	first, last := m.Windows[sat[0]], m.Windows[sat[len(sat)-1]]
	if pids == nil {
		pids = []int{}
	}
	return []Finding{{
		Advice:   fmt.Sprintf("The target's threads wait to run while other processes use the CPUs it may run on (%s): %s of the other processes' CPU samples. Its own working threads (%.0f) fit those CPUs, so fewer threads would not help: move that load away or reserve CPUs for the target (cpuset, isolcpus).", joinInts(allowed), whoText, metric.Median(working)),
		Severity: severity(p99t, med),
		Scope:    Scope{CPUs: allowed, PIDs: pids, Functions: []string{}, StartNS: first.StartNS, EndNS: last.EndNS},
		Evidence: ev,
	}}
}

// evalBlocked is lock-contention and io-wait: the working threads'
// off-CPU time for one reason against their on-CPU time.
func evalBlocked(reason string) func(m *Metrics, r *Rule) []Finding {
	return func(m *Metrics, r *Rule) []Finding {
		shareT, rateT := r.Thresholds[0], r.Thresholds[1]
		ns, by := m.offCPUOf(reason)
		on, secs := m.steadyTime()
		share := ratio(ns, ns+on)
		ev, ok := allPass(shareT, share, rateT, ratio(ns, secs))
		if !ok {
			return nil
		}
		fs := shares(by, "offcpu")
		return []Finding{{
			Severity: severity(shareT, share),
			Scope:    Scope{CPUs: m.busyCPUs(metric.CPUClock), Functions: shareNames(fs)},
			Evidence: ev,
			Shares:   fs,
		}}
	}
}

// functionShares names a finding's functions from the samples of the
// event it is about, on its CPUs and in its time range.
func (m *Metrics) functionShares(event string, cpus []int, startNS, endNS int64) []FunctionShare {
	want := map[int]bool{}
	for _, c := range cpus {
		want[c] = true
	}
	by := map[string]float64{}
	self := m.self[event]
	if self == nil {
		return nil
	}
	for i, w := range m.Windows {
		if w.EndNS <= startNS || (endNS > 0 && w.StartNS >= endNS) {
			continue
		}
		if i >= len(self) {
			break
		}
		for _, r := range self[i] {
			if len(want) > 0 && !want[int(r.CPU)] {
				continue
			}
			by[m.names[r.Name]] += float64(r.Count)
		}
	}
	return shares(by, event)
}
