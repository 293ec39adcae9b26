package attribution

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
)

// Result is what Analyze finds in a recording: the findings of the rules
// that could be evaluated, most severe first, and every rule that could not
// be evaluated with the reason.
type Result struct {
	// Warning is profile.SimulatedWarning when the recording's hardware
	// counts are a simulated PMU's stand-ins.
	Warning      string         `json:"warning,omitempty"`
	Findings     []Finding      `json:"findings"`
	NotEvaluated []NotEvaluated `json:"not_evaluated"`
	// Note says what the result cannot show and how to see it instead:
	// on a host without hardware cache events, cache effects are
	// measured by their effect, with diff against a good build.
	Note string `json:"note,omitempty"`
}

// softwareNote is Result.Note when the rules that name cache effects
// could not be evaluated on this host.
const softwareNote = "This host exposes no hardware cache events, so no rule here can name a cache effect (false sharing, cache or TLB misses, split loads): the findings are about scheduling, faults and blocking only. " +
	"To see a cache effect on this host, record a good build the same way and compare: cacheheat diff GOOD.rec THIS.rec (exit 1 when this one is significantly slower)."

// Finding is one rule that fired, with the numbers behind it.
type Finding struct {
	Rule     string `json:"rule"`
	Title    string `json:"title"`
	Severity string `json:"severity"` // SeverityHigh, SeverityMedium, SeverityInfo
	// Confidence in [0, 1]: the rule's base confidence, lowered for short
	// recordings, approximated formulas and multiplexed counters.
	Confidence float64    `json:"confidence"`
	Scope      Scope      `json:"scope"`
	Evidence   []Evidence `json:"evidence"`
	Advice     string     `json:"advice"`
	// Shares are the finding's functions (Scope.Functions) with their
	// share of the samples of the event the finding is about; functions
	// under 5% are not named.
	Shares []FunctionShare `json:"function_shares,omitempty"`
	// Approximation says how a metric was approximated from generic events
	// when no exact formula was available; empty when exact.
	Approximation string `json:"approximation,omitempty"`
	// Warning is profile.SimulatedWarning on a hardware finding of a
	// recording made on a simulated PMU: its counts are software
	// stand-ins, the finding shows the pipeline, not the program.
	Warning string `json:"warning,omitempty"`
	// Metric is the per-core heatmap metric the finding is about, by the
	// name the report's heatmap gives it (an event, a derived metric of
	// package metric, or an event's samples); empty when no heatmap
	// shows it.
	Metric string `json:"metric,omitempty"`
	// Machine says what a cache line bounce between the finding's CPUs
	// costs on the recording's host, from its probe (cacheheat probe);
	// set by the report for contention findings, empty without a probe.
	Machine string `json:"machine,omitempty"`
}

// Severity values.
const (
	SeverityHigh   = "high"   // the primary metric is at least twice its threshold
	SeverityMedium = "medium" // the primary metric is over its threshold
	// SeverityInfo is a fact to know rather than the program's problem:
	// what it depends on (waits on another process), or start-up work.
	SeverityInfo = "info"
)

// severityRank orders severities, most severe first.
var severityRank = map[string]int{SeverityHigh: 0, SeverityMedium: 1, SeverityInfo: 2}

// Scope is what a finding is about: the heatmap region (CPUs, nodes) and
// time range (nanoseconds since the recording's start time) to look at.
type Scope struct {
	CPUs      []int    `json:"cpus"`
	Nodes     []int    `json:"nodes"`
	PIDs      []int    `json:"pids"`
	Functions []string `json:"functions"`
	StartNS   int64    `json:"start_ns"`
	EndNS     int64    `json:"end_ns"`
}

// Evidence is one metric's value next to the threshold it was held to.
type Evidence struct {
	Metric    metric.ID `json:"metric"`
	Value     float64   `json:"value"`
	Threshold float64   `json:"threshold"`
	Op        string    `json:"op"` // ">", ">=", "<", "<="
	Unit      string    `json:"unit"`
	// Events lists the events a metric that sums several added up (the
	// HITM events this CPU model has); empty otherwise.
	Events []string `json:"events,omitempty"`
}

// String writes the evidence on one line for people: "NAME = VALUE
// (threshold OP THRESHOLD)", NAME followed by the events it sums, if
// any. The CLI, the report and the live view all print it so.
func (e Evidence) String() string {
	name := string(e.Metric)
	if len(e.Events) > 0 {
		name += " (" + strings.Join(e.Events, " + ") + ")"
	}
	return fmt.Sprintf("%s = %s (threshold %s %s)", name, metric.FormatValue(e.Value, e.Unit), e.Op, metric.FormatValue(e.Threshold, e.Unit))
}

// NotEvaluated is a rule whose inputs the recording does not have.
type NotEvaluated struct {
	Rule  string   `json:"rule"`
	Title string   `json:"title"`
	Needs []string `json:"needs"` // the missing inputs
	// Reason says why each is missing, from the recording's event status
	// ("unsupported on this host: ...") or "not recorded (add -e NAME)".
	Reason string `json:"reason"`
}

// Analyze evaluates every rule against a model: a recording's way to its
// findings is model.Read (or model.Builder over a stream, or
// model.FromRecording in memory), then Analyze.
func Analyze(md *model.Model) Result { return NewMetrics(md).analyze() }

// analyze evaluates every rule.
func (m *Metrics) analyze() Result {
	res := Result{Findings: []Finding{}, NotEvaluated: []NotEvaluated{}}
	if m.header.Simulated() {
		res.Warning = profile.SimulatedWarning
	}
	for i := range table {
		r := &table[i]
		if ne, ok := r.notEvaluated(m); ok {
			res.NotEvaluated = append(res.NotEvaluated, ne)
			continue
		}
		for _, f := range r.eval(m, r) {
			res.Findings = append(res.Findings, r.complete(m, f))
		}
	}
	for _, ne := range res.NotEvaluated {
		if ne.Rule == RuleFalseSharing && strings.Contains(ne.Reason, "unsupported on this host") {
			res.Note = softwareNote
		}
	}
	sort.SliceStable(res.Findings, func(i, j int) bool {
		a, b := res.Findings[i], res.Findings[j]
		if a.Severity != b.Severity {
			return severityRank[a.Severity] < severityRank[b.Severity]
		}
		return a.Confidence > b.Confidence
	})
	return res
}

// shareEvent is the sample event whose functions the rule's findings
// name, "" when the rule names them itself (off-CPU stacks) or names none.
func (r *Rule) shareEvent() string {
	switch r.Functions {
	case FuncsNone, FuncsOffCPU:
		return ""
	case "":
		return metric.CPUClock
	}
	return r.Functions
}

// complete fills what every finding of a rule shares.
func (r *Rule) complete(m *Metrics, f Finding) Finding {
	f.Rule, f.Title, f.Approximation = r.ID, r.Title, r.Approximation
	if r.Hardware() && m.header.Simulated() {
		f.Warning = profile.SimulatedWarning
	}
	if f.Advice == "" {
		f.Advice = r.Advice
	}
	if f.Metric == "" {
		f.Metric = r.Shows
		if r.Shows == ShowsSamples {
			f.Metric = string(metric.Samples(m.SampleEvent))
		}
	}
	conf := r.Confidence
	// Fewer than three windows leave no way to tell a steady state from
	// a blip.
	if len(m.Windows) < 3 {
		conf *= 0.8
	}
	// A multiplexed hardware counter was scaled from a fraction of the
	// time; trust the finding as much as the least-observed input.
	conf *= m.observedFraction(r.events())
	f.Confidence = math.Round(conf*100) / 100
	// JSON has no NaN or infinity; a rule never fires on one, but an
	// evidence line beside the deciding one may carry it.
	for i := range f.Evidence {
		f.Evidence[i].Value = finite(f.Evidence[i].Value)
	}
	if f.Scope.PIDs == nil {
		f.Scope.PIDs = m.PIDs()
	}
	if f.Scope.StartNS == 0 && f.Scope.EndNS == 0 && len(m.Windows) > 0 {
		f.Scope.StartNS, f.Scope.EndNS = m.Windows[0].StartNS, m.Windows[len(m.Windows)-1].EndNS
	}
	if f.Scope.CPUs == nil {
		f.Scope.CPUs = []int{}
	}
	f.Scope.Nodes = m.NodesOf(f.Scope.CPUs)
	if f.Scope.Nodes == nil {
		f.Scope.Nodes = []int{}
	}
	if f.Scope.PIDs == nil {
		f.Scope.PIDs = []int{}
	}
	if f.Scope.Functions == nil {
		// A rule without a share event names its functions itself, or
		// there are none.
		if ev := r.shareEvent(); ev != "" {
			f.Shares = m.functionShares(ev, f.Scope.CPUs, f.Scope.StartNS, f.Scope.EndNS)
			f.Scope.Functions = shareNames(f.Shares)
		}
		if f.Scope.Functions == nil {
			f.Scope.Functions = []string{}
		}
	}
	return f
}

// observedFraction is the smallest running/enabled time ratio among the
// measured events, 1 when none was multiplexed.
func (m *Metrics) observedFraction(events []string) float64 {
	frac := 1.0
	want := map[string]bool{}
	for _, e := range events {
		want[e] = true
	}
	for e, s := range m.scaling {
		if en, run := s[0], s[1]; want[e] && en > 0 && run < en {
			frac = min(frac, float64(run)/float64(en))
		}
	}
	return frac
}

// WriteText prints a result for a terminal: findings first, then the
// rules that were not evaluated.
func (res Result) WriteText(w io.Writer) error {
	var b strings.Builder
	if res.Warning != "" {
		fmt.Fprintf(&b, "%s\n\n", res.Warning)
	}
	if len(res.Findings) == 0 {
		b.WriteString("findings: none\n")
	} else {
		fmt.Fprintf(&b, "findings (%d)\n", len(res.Findings))
	}
	for _, f := range res.Findings {
		warn := ""
		if f.Warning != "" {
			warn = f.Warning + ": "
		}
		fmt.Fprintf(&b, "\n  [%s] %s%s: %s (confidence %.2f)\n", f.Severity, warn, f.Rule, f.Title, f.Confidence)
		fmt.Fprintf(&b, "    scope     %s\n", f.Scope)
		for i, e := range f.Evidence {
			label := ""
			if i == 0 {
				label = "evidence"
			}
			fmt.Fprintf(&b, "    %-9s %s\n", label, e)
		}
		if len(f.Shares) > 0 {
			var parts []string
			for _, fs := range f.Shares {
				parts = append(parts, fmt.Sprintf("%s %.0f%%", fs.Function, 100*fs.Share))
			}
			fmt.Fprintf(&b, "    %-9s %s (share of %s)\n", "functions", strings.Join(parts, ", "), f.Shares[0].Source)
		}
		fmt.Fprintf(&b, "    advice    %s\n", f.Advice)
		if f.Approximation != "" {
			fmt.Fprintf(&b, "    note      %s\n", f.Approximation)
		}
	}
	if len(res.NotEvaluated) > 0 {
		fmt.Fprintf(&b, "\nnot evaluated (%d)\n", len(res.NotEvaluated))
		for _, n := range res.NotEvaluated {
			fmt.Fprintf(&b, "  %-24s needs %s (%s)\n", n.Rule, strings.Join(n.Needs, ", "), n.Reason)
		}
	}
	if res.Note != "" {
		fmt.Fprintf(&b, "\nnote: %s\n", res.Note)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// String renders a scope on one line.
func (s Scope) String() string {
	var parts []string
	if len(s.CPUs) > 0 {
		parts = append(parts, "cpus "+joinInts(s.CPUs))
	}
	if len(s.Nodes) > 0 {
		parts = append(parts, "nodes "+joinInts(s.Nodes))
	}
	if len(s.PIDs) > 0 {
		parts = append(parts, "pids "+joinInts(s.PIDs))
	}
	parts = append(parts, fmt.Sprintf("time %.1fs-%.1fs", float64(s.StartNS)/1e9, float64(s.EndNS)/1e9))
	if len(s.Functions) > 0 {
		q := make([]string, len(s.Functions))
		for i, f := range s.Functions {
			q[i] = fmt.Sprintf("%q", f)
		}
		parts = append(parts, "functions "+strings.Join(q, " "))
	}
	return strings.Join(parts, "  ")
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

func finite(v float64) float64 {
	switch {
	case math.IsNaN(v):
		return 0
	case math.IsInf(v, 1):
		return math.MaxFloat64
	case math.IsInf(v, -1):
		return -math.MaxFloat64
	}
	return v
}
