package attribution

import (
	"github.com/cacheheat/cacheheat/metric"

	"fmt"
	"strings"
)

// Markers around the generated part of docs/ATTRIBUTION.md.
const (
	DocBegin = "<!-- rules:begin (generated from attribution.Rules by 'go test ./attribution -update'; do not edit) -->"
	DocEnd   = "<!-- rules:end -->"
)

// RulesMarkdown renders the rule table as Markdown: one section per rule
// with its formula, thresholds (and why), source and what it needs.
func RulesMarkdown() string {
	var b strings.Builder
	b.WriteString("| id | title | needs |\n|---|---|---|\n")
	for _, r := range Rules() {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s | %s |\n", r.ID, r.ID, r.Title, needsList(r.Needs))
	}
	for _, r := range Rules() {
		fmt.Fprintf(&b, "\n### %s\n\n%s.\n\n", r.ID, upperFirst(r.Title))
		fmt.Fprintf(&b, "- **Needs:** %s\n", needsList(r.Needs))
		fmt.Fprintf(&b, "- **Formula:** %s\n", r.Formula)
		if r.Approximation != "" {
			fmt.Fprintf(&b, "- **Approximation:** %s\n", r.Approximation)
		}
		fmt.Fprintf(&b, "- **Functions:** %s\n", functionsSource(r.Functions))
		fmt.Fprintf(&b, "- **Source:** %s\n", r.Source)
		fmt.Fprintf(&b, "- **Base confidence:** %.2f\n", r.Confidence)
		fmt.Fprintf(&b, "- **Advice:** %s\n\n", r.Advice)
		b.WriteString("| metric | fires when | why |\n|---|---|---|\n")
		for _, t := range r.Thresholds {
			fmt.Fprintf(&b, "| %s | %s %s | %s |\n", t.Metric, t.Op, metric.FormatValue(t.Value, t.Unit), t.Why)
		}
	}
	return b.String()
}

func needsList(needs []Need) string {
	s := make([]string, len(needs))
	for i, n := range needs {
		s[i] = n.String()
	}
	return strings.Join(s, ", ")
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// functionsSource says where a rule's findings get their functions.
func functionsSource(f string) string {
	switch f {
	case FuncsNone:
		return "none (the finding is about other processes, named in its advice and scope)"
	case FuncsOffCPU:
		return "the blamed function of each off-CPU stack (the lock's API, or where the code called into the kernel), with its share of the wait; under 5% not listed"
	case "":
		f = metric.CPUClock
	}
	return "self functions of the " + f + " samples in the finding's CPUs and time range, with their share; under 5% not listed"
}
