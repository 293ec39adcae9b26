package compare

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/cacheheat/cacheheat/metric"
)

// WriteJSON writes the result as indented JSON (the `diff --json`
// document).
func WriteJSON(w io.Writer, r *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Headline is the one-line outcome, for example "REGRESSION: 2
// regressions, 1 improvement in 34 tested metrics (alpha 0.01, threshold
// 5%)".
func (r *Result) Headline() string {
	word := "OK"
	switch {
	case r.Regressed():
		word = "REGRESSION"
	case r.Undecided():
		word = "UNDECIDED"
	}
	return fmt.Sprintf("%s: %s, %s, %s in %d %s (alpha %g, threshold %g%%); %s", word,
		plural(r.Counts[VerdictRegression], "regression"), plural(r.Counts[VerdictImprovement], "improvement"),
		plural(r.Counts[VerdictChanged], "neutral change"), r.Tested, gateWord(r), r.Alpha, r.Threshold*100, r.EvidenceText())
}

func gateWord(r *Result) string {
	if r.Evidence == EvidenceRuns {
		return "gating metrics"
	}
	return "tested metrics"
}

// EvidenceText says in words what the comparison tested.
func (r *Result) EvidenceText() string {
	if r.Evidence == EvidenceRuns {
		return fmt.Sprintf("evidence: per-run totals of %d and %d runs (Mann-Whitney U; the ratio of medians with the interval that inverts it); the gate is %s, the rest reported", r.Base.Runs, r.New.Runs, gateNames(r))
	}
	return fmt.Sprintf("evidence: per-window rates of one run a side; the difference between two runs cannot be measured from one, so changes under %g%% are not called, and a program doing more work at the same rates is not seen: record both with -r N to compare runs", math.Max(r.Threshold, r.Floor)*100)
}

func gateNames(r *Result) string {
	var names []string
	for _, m := range r.Metrics {
		if m.Gate {
			names = append(names, m.Name)
		}
	}
	if len(names) == 0 {
		return "empty"
	}
	return strings.Join(names, " and ")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// WriteText writes the metric table for a terminal: every compared metric,
// regressions first. Metric names quote the comms they hold
// (strconv.Quote), so control characters in process names never reach the
// terminal raw.
func WriteText(w io.Writer, r *Result) error {
	for _, s := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "VERDICT\tMETRIC\tBASE\tNEW\tRATIO\t%g%% CI\tP(HOLM)\n", r.Confidence*100)
	for _, m := range r.Metrics {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Verdict, m.Name, metric.FormatValue(m.BaseMedian, m.Unit),
			metric.FormatValue(m.NewMedian, m.Unit), FormatRatio(m.Ratio), FormatCI(m.CILow, m.CIHigh), FormatP(m))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintf(w, "%d metrics not compared (only in one recording, zero in both, or in too few of the windows); --json lists them\n", len(r.Skipped))
	}
	if r.Need != nil {
		fmt.Fprintln(w, r.Need.Explain())
	}
	_, err := fmt.Fprintln(w, r.Headline())
	return err
}

// Explain says what could not be decided and what would decide it.
func (n *WindowsNeeded) Explain() string {
	names := n.Metrics
	more := ""
	if len(names) > 8 {
		more = fmt.Sprintf(" and %d more", len(names)-8)
		names = names[:8]
	}
	what := fmt.Sprintf("%d metrics (%s%s)", len(n.Metrics), strings.Join(names, ", "), more)
	if len(n.Metrics) == 0 {
		what = "anything (no usable window)"
	}
	if n.Unit == EvidenceRuns {
		return fmt.Sprintf("cannot decide %s: with these runs the smallest p-value the test can give is %.3g, over the %d-metric gate that cannot reach alpha, so no result would be evidence either way. Record at least %d runs a side (record -r %d).",
			what, n.SmallestP, n.Family, n.Record, n.Record)
	}
	s := fmt.Sprintf("cannot decide %s: with these windows the smallest p-value the test can give is %.3g, over the %d-metric family that cannot reach alpha, so no result would be evidence either way. "+
		"Record at least %d windows a side (%d used after the warm-up)", what, n.SmallestP, n.Family, n.Record, n.MinWindows)
	if n.MaxIntervalS > 0 {
		s += fmt.Sprintf(": a longer -d, or -i %s or shorter for recordings this long", formatInterval(n.MaxIntervalS))
	}
	return s + "."
}

// formatInterval prints an interval as a -i flag value, rounded down to
// whole milliseconds.
func formatInterval(s float64) string {
	ms := int(math.Floor(s * 1000))
	if ms%1000 == 0 {
		return fmt.Sprintf("%ds", ms/1000)
	}
	return fmt.Sprintf("%dms", ms)
}

// MaxMarkdownRows bounds the markdown summary's table: a pull-request
// comment should stay short.
const MaxMarkdownRows = 15

// WriteMarkdown writes a short summary for a pull-request comment: the
// headline, the significant changes and the warnings.
func WriteMarkdown(w io.Writer, r *Result) error {
	icon := ":white_check_mark:"
	switch {
	case r.Regressed():
		icon = ":x:"
	case r.Undecided():
		icon = ":grey_question:"
	}
	fmt.Fprintf(w, "### %s cacheheat diff\n\n%s\n\n", icon, mdEscape(r.Headline()))
	var rows []MetricResult
	for _, m := range r.Metrics {
		if m.Verdict == VerdictRegression || m.Verdict == VerdictImprovement || m.Verdict == VerdictChanged {
			rows = append(rows, m)
		}
	}
	if len(rows) > 0 {
		fmt.Fprintf(w, "| verdict | metric | base | new | ratio (%g%% CI) | p (Holm) |\n|---|---|--:|--:|--:|--:|\n", r.Confidence*100)
		for i, m := range rows {
			if i == MaxMarkdownRows {
				fmt.Fprintf(w, "\n…and %d more significant changes (see the HTML or JSON report).\n", len(rows)-i)
				break
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s %s | %s |\n", m.Verdict, mdEscape(m.Name),
				metric.FormatValue(m.BaseMedian, m.Unit), metric.FormatValue(m.NewMedian, m.Unit),
				FormatRatio(m.Ratio), FormatCI(m.CILow, m.CIHigh), FormatP(m))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%d metrics with no significant change beyond %g%%; %d not tested (too few windows).\n",
		r.Counts[VerdictNoChange], r.Threshold*100, r.Counts[VerdictTooFew])
	if r.Need != nil {
		fmt.Fprintf(w, "\n> **undecided:** %s\n", mdEscape(r.Need.Explain()))
	}
	for _, s := range r.Warnings {
		fmt.Fprintf(w, "\n> **warning:** %s\n", mdEscape(s))
	}
	return nil
}

// mdEscape backslash-escapes the characters that would end a table cell or
// start markup, so process names cannot change the comment's structure.
func mdEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch c {
		case '\\', '`', '*', '_', '|', '<', '>', '[', ']', '~', '#', '!':
			b.WriteByte('\\')
		case '\n', '\r':
			c = ' '
		}
		b.WriteRune(c)
	}
	return b.String()
}

// FormatRatio prints a ratio of medians, "x0.25" or "inf".
func FormatRatio(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case math.IsInf(v, 1):
		return "inf"
	}
	return fmt.Sprintf("x%.3g", v)
}

// FormatCI prints a confidence interval of a ratio.
func FormatCI(lo, hi float64) string {
	if math.IsNaN(lo) || math.IsNaN(hi) {
		return "-"
	}
	f := func(v float64) string {
		if math.IsInf(v, 1) {
			return "inf"
		}
		return fmt.Sprintf("%.3g", v)
	}
	return "[" + f(lo) + ", " + f(hi) + "]"
}

// FormatP prints the Holm-adjusted p-value, or "-" when not tested.
func FormatP(m MetricResult) string {
	if m.Verdict == VerdictTooFew {
		return "-"
	}
	if m.PAdj < 1e-4 {
		return fmt.Sprintf("%.1e", m.PAdj)
	}
	return fmt.Sprintf("%.4f", m.PAdj)
}
