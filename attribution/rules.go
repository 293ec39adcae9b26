package attribution

import (
	"fmt"
	"math"
	"strings"

	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/profile"
)

// Need kinds.
const (
	NeedEvent     = "event"
	NeedHistogram = "histogram"
	NeedSamples   = "samples"
)

// Need is one input of a rule. For events and histograms, AnyOf lists
// alternatives of which one suffices (a vendor's name for the same
// thing, or any histogram at all).
type Need struct {
	Kind  string   `json:"kind"`
	AnyOf []string `json:"any_of,omitempty"`
	// Label names a need with many alternatives in short.
	Label string `json:"label,omitempty"`
}

// Rule ids: stable, scripts and CI depend on them.
const (
	RuleL1Contention   = "l1-bandwidth-contention"
	RuleL3Writeback    = "l3-writeback-congestion"
	RuleLLCThrashing   = "llc-thrashing"
	RuleRemoteNUMA     = "remote-numa"
	RuleDTLB           = "dtlb-pressure"
	RuleFalseSharing   = "false-sharing"
	RuleCoreHotspot    = "core-hotspot"
	RuleCPUSaturation  = "cpu-saturation"
	RuleNoisyNeighbour = "noisy-neighbour"
	RuleLockContention = "lock-contention"
	RuleIOWait         = "io-wait"
	RuleStartupIO      = "startup-io"
	RulePeerWait       = "peer-wait"
	RulePageFaults     = "page-fault-storm"
	RuleMigrations     = "migration-churn"
	RuleLatencyTail    = "latency-tail"
	RuleFunctionTail   = "function-tail"
)

// ShowsSamples as a rule's Shows points its findings at the heatmap of
// the recording's primary sample event (metric.Samples).
const ShowsSamples = "samples"

// Sources of a finding's functions besides a sample event.
const (
	FuncsOffCPU = "off-CPU stacks"
	FuncsNone   = "none"
)

// NeedOffCPU is off-CPU stacks; NeedIdle is the CPUs' idle time. Both are
// recorded by every recorder that has them; older recordings lack them.
const (
	NeedOffCPU = "offcpu-stacks"
	NeedIdle   = "cpu-idle"
)

var (
	offCPUStacks = Need{Kind: NeedOffCPU}
	cpuIdle      = Need{Kind: NeedIdle}
)

func event(names ...string) Need { return Need{Kind: NeedEvent, AnyOf: names} }
func hist(names ...string) Need  { return Need{Kind: NeedHistogram, AnyOf: names} }

var samples = Need{Kind: NeedSamples}

// String names the need as the report shows it.
func (n Need) String() string {
	if n.Label != "" {
		return n.Label
	}
	switch n.Kind {
	case NeedSamples:
		return "stack samples"
	case NeedOffCPU:
		return "off-CPU stacks"
	case NeedIdle:
		return "CPU idle time"
	case NeedWaits:
		return "the kernel's wait reasons"
	case NeedFunctions:
		return "--func functions"
	case NeedHistogram:
		return strings.Join(n.AnyOf, " or ") + " histogram"
	}
	return strings.Join(n.AnyOf, " or ")
}

// Threshold is one limit a rule holds a metric to.
type Threshold struct {
	Metric metric.ID `json:"metric"`
	Op     string    `json:"op"` // ">", ">=", "<", "<="
	Value  float64   `json:"value"`
	Unit   string    `json:"unit"`
	// Why says where the number comes from.
	Why string `json:"why"`
}

// pass reports whether v meets the threshold; NaN (a ratio of nothing)
// never does.
func (t Threshold) pass(v float64) bool {
	if math.IsNaN(v) {
		return false
	}
	switch t.Op {
	case ">":
		return v > t.Value
	case ">=":
		return v >= t.Value
	case "<":
		return v < t.Value
	case "<=":
		return v <= t.Value
	}
	return false
}

func (t Threshold) evidence(v float64) Evidence {
	return Evidence{Metric: t.Metric, Value: v, Threshold: t.Value, Op: t.Op, Unit: t.Unit}
}

// Rule is one row of the rule table. Everything but eval is data that
// docs/ATTRIBUTION.md is generated from.
type Rule struct {
	ID    string `json:"id"` // stable: scripts and CI depend on it
	Title string `json:"title"`
	Needs []Need `json:"needs"`
	// Formula says how the metrics are computed from the inputs.
	Formula    string      `json:"formula"`
	Thresholds []Threshold `json:"thresholds"`
	// Source cites where the pattern and its numbers come from.
	Source string `json:"source"`
	Advice string `json:"advice"`
	// Approximation is set when a metric is approximated from generic
	// events; every finding of the rule carries it.
	Approximation string `json:"approximation,omitempty"`
	// Confidence is the base confidence of a finding.
	Confidence float64 `json:"confidence"`
	// Functions says where a finding's functions come from: the samples
	// of the event it is about. "" is cpu-clock samples; FuncsOffCPU and
	// FuncsNone are set by the rule itself.
	Functions string `json:"functions,omitempty"`
	// Shows is the per-core heatmap metric a finding points at (an
	// event, a derived metric, or ShowsSamples); "" when no heatmap
	// shows what the rule measures, or when eval names it per finding.
	Shows string `json:"shows,omitempty"`

	eval func(m *Metrics, r *Rule) []Finding
}

// T returns the first threshold on a metric. A missing name is a bug in
// the table, caught by the tests.
func (r *Rule) T(id metric.ID) Threshold { return r.bound(id, "") }

// bound returns the threshold on a metric with operator op ("" for any):
// a metric held within a range has two.
func (r *Rule) bound(id metric.ID, op string) Threshold {
	for _, t := range r.Thresholds {
		if t.Metric == id && (op == "" || t.Op == op) {
			return t
		}
	}
	panic(fmt.Sprintf("attribution: rule %s has no threshold %q %s", r.ID, id, op))
}

// runnableOver is where a target's own threads oversubscribe its CPUs:
// cpu-saturation's, and where noisy-neighbour leaves the finding to it.
var runnableOver = Threshold{Metric: mRunnablePerCPU, Op: ">", Value: 1.25, Unit: metric.UnitTimes, Why: "only more runnable threads than CPUs make the target queue behind itself (3 busy threads on 2 CPUs are 1.5 per CPU); as many busy threads as CPUs, with helper threads waking behind them, measured 1.05-1.1 here, and fewer threads would not help; threads that sleep and wake briefly add little, and queueing behind other processes is noisy-neighbour"}

// ownBusy: the target itself keeps its CPUs busy. Without it, many
// threads that wake briefly and wait behind other processes' work look
// runnable in numbers (512 sleeping threads beside a 2-thread load
// measured 2.9 runnable per CPU, using 3% of the CPUs themselves).
var ownBusy = Threshold{Metric: mTargetBusy, Op: ">=", Value: 0.5, Unit: metric.UnitRatio, Why: "the target's own on-CPU time fills at least half of the CPUs it may use: its threads queue behind its own work, not as a few wake-ups behind other processes (noisy-neighbour's case)"}

// Rules returns the rule table, for docs and tests.
func Rules() []Rule {
	out := make([]Rule, len(table))
	copy(out, table)
	return out
}

// Hardware says whether the rule needs a hardware event: one of its event
// needs has no software alternative. Its findings come from PMU counts
// (or a simulated PMU's stand-ins).
func (r *Rule) Hardware() bool {
	for _, n := range r.Needs {
		if n.Kind != NeedEvent {
			continue
		}
		hw := true
		for _, e := range n.AnyOf {
			if metric.Software(e) {
				hw = false
			}
		}
		if hw {
			return true
		}
	}
	return false
}

func (r *Rule) events() []string {
	var out []string
	for _, n := range r.Needs {
		if n.Kind == NeedEvent {
			out = append(out, n.AnyOf...)
		}
	}
	return out
}

// notEvaluated reports the needs a recording does not satisfy, with the
// reason for each, grouped so that "A, B (unsupported on this host: no
// PMU)" is said once.
func (r *Rule) notEvaluated(m *Metrics) (NotEvaluated, bool) {
	var needs []string
	var reasons []string
	byReason := map[string][]string{}
	for _, n := range r.Needs {
		name, reason, ok := m.satisfies(n)
		if ok {
			continue
		}
		needs = append(needs, name)
		if _, seen := byReason[reason]; !seen {
			reasons = append(reasons, reason)
		}
		byReason[reason] = append(byReason[reason], name)
	}
	if len(needs) == 0 {
		return NotEvaluated{}, false
	}
	var parts []string
	for _, reason := range reasons {
		if len(reasons) == 1 {
			parts = append(parts, reason)
		} else {
			parts = append(parts, strings.Join(byReason[reason], ", ")+": "+reason)
		}
	}
	return NotEvaluated{Rule: r.ID, Title: r.Title, Needs: needs, Reason: strings.Join(parts, "; ")}, true
}

// satisfies checks one need. When it is not met it returns the need's
// name and why, from the recording's event status.
func (m *Metrics) satisfies(n Need) (name, reason string, ok bool) {
	switch n.Kind {
	case NeedFunctions:
		if len(m.header.Functions) > 0 {
			return "", "", true
		}
		return n.String(), "not recorded (add --func SYMBOL)", false
	case NeedSamples:
		if m.HasSamples() {
			return "", "", true
		}
		return n.String(), "not recorded (add -F HZ)", false
	case NeedOffCPU:
		if m.HasOffCPU() {
			return "", "", true
		}
		return n.String(), "not in this recording (recorded by cacheheat versions with off-CPU stacks)", false
	case NeedIdle:
		if m.HasIdle() {
			return "", "", true
		}
		return n.String(), "not in this recording (recorded by cacheheat versions that record the CPUs' idle time)", false
	case NeedWaits:
		if m.HasWaits() {
			return "", "", true
		}
		return n.String(), "not in this recording (recorded by cacheheat versions that read the kernel's wait reasons; older ones could not tell disk from pipe or socket waits)", false
	case NeedHistogram:
		for _, h := range n.AnyOf {
			if m.HasHistogram(h) {
				return "", "", true
			}
		}
		return n.String(), "not recorded by this recording", false
	}
	for _, e := range n.AnyOf {
		if m.Measured(e) {
			return "", "", true
		}
	}
	// Say why for the alternative the recorder tried; when it tried none,
	// suggest one the host can count (the host's own word on each event,
	// profile.Header.HostStatus): never an event it cannot.
	for _, e := range n.AnyOf {
		if st, tried := m.status[e]; tried {
			return e, whyNot(st), false
		}
	}
	var cannot []profile.EventStatus
	for _, e := range n.AnyOf {
		st, known := m.header.HostStatus(e, !metric.Software(e))
		switch {
		case !known:
			continue
		case st.Status == profile.StatusMeasured:
			return e, "not recorded (add -e " + e + ")", false
		}
		cannot = append(cannot, st)
	}
	if len(cannot) > 0 {
		return cannot[0].Name, whyNot(cannot[0]), false
	}
	if len(n.AnyOf) > 1 {
		return n.String(), "not recorded (the recorder knows no encoding of it for this CPU model)", false
	}
	return n.String(), "not recorded (add -e " + n.AnyOf[0] + " if this host can count it: cacheheat caps)", false
}

// whyNot says why an event the host was asked about was not measured.
func whyNot(st profile.EventStatus) string {
	switch st.Status {
	case profile.StatusUnsupported:
		return "unsupported on this host: " + orUnknown(st.Reason)
	case profile.StatusDenied:
		return "denied: " + orUnknown(st.Reason)
	}
	return st.Status + ": " + orUnknown(st.Reason)
}

func orUnknown(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

// severity grades a finding by its primary metric's margin over the
// threshold.
func severity(t Threshold, v float64) string {
	switch t.Op {
	case ">", ">=":
		if t.Value > 0 && v >= 2*t.Value {
			return SeverityHigh
		}
	case "<", "<=":
		if v <= t.Value/2 {
			return SeverityHigh
		}
	}
	return SeverityMedium
}

// allPass evaluates thresholds in order and returns the evidence; ok is
// false when any fails.
func allPass(pairs ...any) (ev []Evidence, ok bool) {
	ok = true
	for i := 0; i+1 < len(pairs); i += 2 {
		t := pairs[i].(Threshold)
		v := pairs[i+1].(float64)
		ev = append(ev, t.evidence(v))
		if !t.pass(v) {
			ok = false
		}
	}
	return ev, ok
}

// Shared threshold rationales.
const (
	whyInstrFloor = "floor: below 10^8 instructions/s (a twentieth of one 2 GHz core at IPC 1) ratios are noise and the cost is small"
	whyMemFloor   = "floor: 10^6 misses/s at 80 ns each (a local DRAM access on a two-socket server takes 70-90 ns) is 8% of one core's time"
	whySampleMin  = "floor: 50 samples is half a CPU-second at the default 99 Hz; the standard error of a 90% share is then 4 points, and all 50 on one core would be a 1-in-190 chance at a true share of 90%"
)
