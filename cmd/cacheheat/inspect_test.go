package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/profile"
)

// TestInspectText checks the human summary: processes by cpu-clock, cut at
// --top with the rest counted, plurals, and none of Go's %v/%+v syntax.
func TestInspectText(t *testing.T) {
	s := profile.Summary{
		Host:      profile.SummaryHost{Hostname: "h", CPUs: 1, NUMANodes: 1},
		Target:    profile.Target{Kind: "all"},
		Windows:   1,
		IntervalS: 1,
		Events: []profile.EventSummary{
			{EventStatus: profile.EventStatus{Name: "cpu-clock", Status: profile.StatusMeasured}},
			{EventStatus: profile.EventStatus{Name: "cycles", Status: profile.StatusUnsupported, Reason: "no hardware PMU exposed"}},
			{EventStatus: profile.EventStatus{Name: "instructions", Status: profile.StatusUnsupported, Reason: "no hardware PMU exposed"}},
		},
		Totals: map[string]profile.Total{"cpu-clock": {Total: 3e9}},
		Processes: []profile.ProcessSummary{
			{PID: 1, Comm: "idle", Totals: map[string]uint64{"cpu-clock": 10}},
			{PID: 2, Comm: "busy", Totals: map[string]uint64{"cpu-clock": 2e9}},
			{PID: 3, Comm: "mid\x1b[2J", Totals: map[string]uint64{"cpu-clock": 1e9}},
		},
		Drops:       profile.Drops{StackErrors: 2},
		DropWindows: []profile.WindowDrops{{Window: 0, Drops: profile.Drops{StackErrors: 2}}},
		AppMetrics:  map[string]float64{"ops_per_sec": 12.5},
	}
	var b bytes.Buffer
	printSummary(&b, s, 2)
	out := b.String()
	t.Log(out)
	busy, mid := strings.Index(out, "busy"), strings.Index(out, "mid")
	if busy < 0 || mid < 0 || busy > mid {
		t.Errorf("processes not by cpu-clock, busiest first")
	}
	if strings.Contains(out, "idle") || !strings.Contains(out, "1 process not shown") {
		t.Errorf("--top 2 should list 2 processes and count the third")
	}
	for _, want := range []string{"1 CPU, 1 NUMA node", "1 window of", "2 events unsupported", "2 stack errors", "data lost in 1 window of 1 (window 0: 2)", "ops_per_sec 12.5", `mid\x1b[2J`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if regexp.MustCompile(`map\[|\{[A-Z][A-Za-z]+:|\b1 (window|event|sample|CPU|NUMA node)s\b`).MatchString(out) || strings.Contains(out, "\x1b") {
		t.Errorf("output has Go syntax, a wrong plural or a raw escape:\n%s", out)
	}
	b.Reset()
	printSummary(&b, s, 0)
	if !strings.Contains(b.String(), "idle") {
		t.Errorf("--top 0 should list every process")
	}
}

func TestPlural(t *testing.T) {
	for _, c := range []struct {
		n    int
		noun string
		want string
	}{{1, "window", "1 window"}, {0, "window", "0 windows"}, {3, "process", "3 processes"}, {1, "process", "1 process"}} {
		if got := plural(c.n, c.noun); got != c.want {
			t.Errorf("plural(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}
