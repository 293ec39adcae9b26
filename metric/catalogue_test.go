package metric_test

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/collector"
	"github.com/cacheheat/cacheheat/metric"
)

var update = flag.Bool("update", false, "rewrite the generated section of docs/METRICS.md")

// TestEventsAreTheCollectors checks that every event a formula reads is
// one the collector's catalogue can open, by the same name: the two
// tables are kept apart (see doc.go) and must not drift.
func TestEventsAreTheCollectors(t *testing.T) {
	known := collector.EventNames()
	events := slices.Clone(metric.SoftwareEvents)
	for _, d := range metric.Ratios() {
		events = append(events, d.Num, d.Den)
	}
	for _, e := range events {
		if !slices.Contains(known, e) {
			t.Errorf("event %q is not in the collector's catalogue", e)
		}
	}
}

// TestCatalogue checks the table's invariants: one definition per name,
// a unit and a formula each, and a ratio only of two distinct events.
func TestCatalogue(t *testing.T) {
	seen := map[metric.ID]bool{}
	for _, d := range metric.Catalogue() {
		if d.ID == "" || seen[d.ID] {
			t.Errorf("empty or repeated id %q", d.ID)
		}
		seen[d.ID] = true
		if d.Unit == "" || d.Formula == "" || d.Source == "" {
			t.Errorf("%s: unit %q, formula %q, source %q: none may be empty", d.ID, d.Unit, d.Formula, d.Source)
		}
		if (d.Num == "") != (d.Den == "") || (d.Num != "" && (d.Num == d.Den || d.Scale <= 0)) {
			t.Errorf("%s: ratio %q / %q scale %g", d.ID, d.Num, d.Den, d.Scale)
		}
		if got, ok := metric.Lookup(d.ID); !ok || got.ID != d.ID {
			t.Errorf("Lookup(%s) = %v, %v", d.ID, got, ok)
		}
		if strings.ContainsAny(string(d.ID), " \t{}") {
			t.Errorf("%s: a metric name has no spaces or braces (the diff adds {cpu=N} labels to it)", d.ID)
		}
	}
	if _, ok := metric.Lookup("LLC miss ratio"); ok {
		t.Error("Lookup found a name that is not in the catalogue")
	}
	if !seen[metric.HITMPKI] || slices.ContainsFunc(metric.Ratios(), func(d metric.Def) bool { return d.ID == metric.HITMPKI }) {
		t.Error("HITM-PKI must be in the catalogue and, a sum, not among the ratios")
	}
}

// TestDocsMatchCatalogue keeps docs/METRICS.md's table equal to the
// catalogue. Refresh it with 'go test ./metric -update'.
func TestDocsMatchCatalogue(t *testing.T) {
	const path = "../docs/METRICS.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the metric documentation: %v", err)
	}
	doc := string(b)
	i, j := strings.Index(doc, metric.DocBegin), strings.Index(doc, metric.DocEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the generated-section markers", path)
	}
	want := metric.DocBegin + "\n" + metric.Markdown() + metric.DocEnd
	if doc[i:j+len(metric.DocEnd)] == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(doc[:i]+want+doc[j+len(metric.DocEnd):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s is out of date with the catalogue: run 'go test ./metric -update'", path)
}
