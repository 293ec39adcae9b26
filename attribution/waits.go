package attribution

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/profile"
)

// The rules on what the kernel said the target waited in (profile.Wait:
// every switch-out to its switch-in, exact, by the system call it blocked
// in and what its descriptor was): disk I/O, and waits on other processes
// or the network, which are a dependency to know about rather than the
// program's own problem.

// NeedWaits is the kernel's account of off-CPU time by wait (recorded by
// cacheheat versions with wait codes).
const NeedWaits = "waits"

var waitsNeed = Need{Kind: NeedWaits}

// peerKey is who a target process waited on: the waker, and the wait.
type peerKey struct {
	pid       int
	wakerPID  int
	wakerComm string
	reason    string
	call      string
}

// waits reduces a window's waits: its time by reason, and who woke the
// target out of a wait on another process.
func (m *Metrics) waits(wm *WindowMetrics, w *profile.Window) {
	if w.Waits != nil {
		m.hasWaits = true
	}
	for _, wt := range w.Waits {
		if wm.Waits == nil {
			wm.Waits = map[string]float64{}
		}
		wm.Waits[wt.Reason] += float64(wt.NS)
	}
	for _, p := range w.Peers {
		m.peers[peerKey{p.PID, p.WakerPID, p.WakerComm, p.Reason, p.Call}] += float64(p.NS)
	}
}

// HasWaits reports whether the recording has the kernel's wait account.
func (m *Metrics) HasWaits() bool { return m.hasWaits }

// waitNS sums one wait reason's time over the steady windows, and says in
// which windows it was.
func (m *Metrics) waitNS(reason string) (total float64, per []float64) {
	per = make([]float64, len(m.Windows))
	for i, w := range m.Windows {
		per[i] = w.Waits[reason]
		total += per[i]
	}
	return total, per
}

// startupShare: disk I/O whose first windows hold this share of it...
const startupShare = 0.9

// startupTime: ...within this share of the recording's time, the rest
// nearly without it, is the program starting (loading its binary,
// libraries and data), not its steady state. Half, not less: on a busy
// host the same start-up reads take three windows of ten where they took
// one (seen beside a 2-thread load). Time, not windows: a recorder sleeps
// through a target that does nothing in one quiet window however long
// (profile.Window.Quiet), so a program that loads and then waits has few
// windows after its start-up, and long ones.
const startupTime = 0.5

// startupMinIntervals: a recording of no more than this many intervals
// (three full windows, or four with the last cut short) has no steady
// state to set a start-up apart from.
const startupMinIntervals = 3

// ioSpan finds where disk I/O happened: the windows holding startupShare
// of it, from the first; startup is set when they end within the first
// startupTime of the recording (of more than startupMinIntervals
// intervals).
func ioSpan(ws []WindowMetrics, intervalNS int64, per []float64, total float64) (first, last int, startup bool) {
	first, last = -1, -1
	var sum float64
	for i, v := range per {
		if v <= 0 {
			continue
		}
		if first < 0 {
			first = i
		}
		if sum < startupShare*total {
			last = i
		}
		sum += v
	}
	if first < 0 {
		return first, last, false
	}
	start, span := ws[0].StartNS, ws[len(ws)-1].EndNS-ws[0].StartNS
	return first, last, span > startupMinIntervals*intervalNS && float64(ws[last].EndNS-start) <= startupTime*float64(span)
}

// evalDiskIO is io-wait and startup-io: the target's disk I/O time (the
// kernel's account: in_iowait, file reads and syncs) against its on-CPU
// time. When it sits in the first windows and stops, it is start-up work,
// said as such with its window range; otherwise it is io-wait, scoped to
// the windows it happened in.
func evalDiskIO(startup bool) func(m *Metrics, r *Rule) []Finding {
	return func(m *Metrics, r *Rule) []Finding {
		shareT, rateT := r.Thresholds[0], r.Thresholds[1]
		ns, per := m.waitNS(profile.OffCPUDiskIO)
		if ns == 0 {
			return nil
		}
		first, last, atStart := ioSpan(m.Windows, m.header.Settings.IntervalNS, per, ns)
		if atStart != startup {
			return nil
		}
		secs := m.DurationS
		if startup {
			secs = 0
			for i := first; i <= last; i++ {
				secs += m.Windows[i].DurationS
			}
		}
		on := m.OnCPUSeconds() * 1e9
		share := ratio(ns, ns+on)
		ev, ok := allPass(shareT, share, rateT, ratio(ns, secs))
		if !ok {
			return nil
		}
		_, by := m.offCPUOf(profile.OffCPUDiskIO)
		fs := shares(by, "offcpu")
		f := Finding{
			Severity: severity(shareT, share),
			Scope:    Scope{CPUs: m.busyCPUs(metric.CPUClock), Functions: shareNames(fs), StartNS: m.Windows[first].StartNS, EndNS: m.Windows[max(last, first)].EndNS},
			Evidence: ev,
			Shares:   fs,
		}
		if startup {
			f.Severity = SeverityInfo
			f.Advice = fmt.Sprintf("Disk I/O in the first %d of %d windows (%.1f-%.1f s), %s of it, then almost none: the program loading its binary, libraries or data. Record again with a warm page cache to see the steady state, or start the recording later (-p PID).",
				last+1, len(m.Windows), float64(m.Windows[first].StartNS)/1e9, float64(m.Windows[last].EndNS)/1e9, metric.FormatValue(ns, metric.UnitNS))
		}
		return []Finding{f}
	}
}

// peerReasons are the waits whose time is a dependency on someone else.
var peerReasons = []string{profile.OffCPUIPC, profile.OffCPUNetwork}

func evalPeerWait(m *Metrics, r *Rule) []Finding {
	shareT, rateT := r.Thresholds[0], r.Thresholds[1]
	var ns float64
	for _, reason := range peerReasons {
		v, _ := m.waitNS(reason)
		ns += v
	}
	on := m.OnCPUSeconds() * 1e9
	share := ratio(ns, ns+on)
	ev, ok := allPass(shareT, share, rateT, ratio(ns, m.DurationS))
	if !ok {
		return nil
	}
	who, pids := m.topPeers()
	whoText := "the network (the recorder does not name network peers)"
	if len(who) > 0 {
		whoText = strings.Join(who, ", ")
	}
	if pids == nil {
		pids = []int{}
	}
	return []Finding{{
		Severity: SeverityInfo,
		Scope:    Scope{CPUs: m.busyCPUs(metric.CPUClock), PIDs: pids, Functions: []string{}},
		Evidence: ev,
		Advice:   fmt.Sprintf("The target spends %.0f%% of its time waiting on other processes or the network: %s. Its speed is theirs: profile the peer, or overlap the waits (more requests in flight, larger messages).", 100*share, whoText),
	}}
}

// topPeers names who woke the target out of waits on other processes,
// longest first, with the wait and its share of that time.
func (m *Metrics) topPeers() (names []string, pids []int) {
	keys := make([]peerKey, 0, len(m.peers))
	var total float64
	for k, v := range m.peers {
		// A lock's releaser is lock-contention's business; a child a
		// parent waits for (wait4) is its work, not a dependency.
		if !slices.Contains(peerReasons, k.reason) {
			continue
		}
		keys = append(keys, k)
		total += v
	}
	sort.Slice(keys, func(i, j int) bool {
		if m.peers[keys[i]] != m.peers[keys[j]] {
			return m.peers[keys[i]] > m.peers[keys[j]]
		}
		return keys[i].wakerPID < keys[j].wakerPID
	})
	seen := map[int]bool{}
	for _, k := range keys {
		share := m.peers[k] / total
		if share < minFunctionShare || len(names) == maxFunctions {
			break
		}
		how := k.call
		if how == "" {
			how = k.reason
		}
		who := fmt.Sprintf("%s (pid %d)", k.wakerComm, k.wakerPID)
		switch {
		case k.wakerPID == k.pid:
			who = fmt.Sprintf("its own threads (%s, pid %d)", k.wakerComm, k.wakerPID)
		case m.pids[k.wakerPID]:
			who = fmt.Sprintf("%s (pid %d, a target process)", k.wakerComm, k.wakerPID)
		}
		names = append(names, fmt.Sprintf("%s woke it from %s, %s", who, how, metric.FormatValue(m.peers[k], metric.UnitNS)))
		if !seen[k.wakerPID] {
			seen[k.wakerPID] = true
			pids = append(pids, k.wakerPID)
		}
	}
	return names, pids
}
