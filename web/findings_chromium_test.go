package web

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/heatmap"
	"github.com/cacheheat/cacheheat/profile"
)

// TestFindingLinkInChromium clicks a finding's "Show on the per-core
// heatmap" link in a report: the per-core map must switch to the metric
// the finding names (attribution.Finding.Metric) and mark the finding's
// CPU.
func TestFindingLinkInChromium(t *testing.T) {
	needChromium(t)
	rec := &profile.Recording{Header: testHeader(), Stacks: map[uint64]profile.Stack{}}
	for i := 0; i < 4; i++ {
		w := testWindow(i)
		w.Index = i
		rec.Windows = append(rec.Windows, w)
	}
	ev := attribution.Evidence{Metric: "page-faults/s", Value: 2e4, Op: ">", Threshold: 1e4, Unit: "/s"}
	res := &attribution.Result{Findings: []attribution.Finding{{Rule: attribution.RulePageFaults, Title: "page-fault storm", Severity: "high",
		Scope: attribution.Scope{CPUs: []int{1}}, Evidence: []attribution.Evidence{ev}, Metric: "page-faults"}}}
	path := writePage(t, t.TempDir(), "report.html", func(w io.Writer) error {
		return heatmap.Render(w, rec, heatmap.Options{Findings: res})
	})
	page := startChromium(t, "file://"+path)
	waitFor(t, "the report's charts", func() bool {
		return string(page.eval(t, `typeof cacheheatReport === "object" && document.readyState === "complete"`)) == "true"
	})
	selected := func() string {
		var s string
		json.Unmarshal(page.eval(t, `(function (s) { return s.options[s.selectedIndex].textContent; })(document.getElementById("cpu-metric"))`), &s)
		return s
	}
	if got := selected(); strings.HasPrefix(got, "page-faults") {
		t.Fatalf("the per-core map starts on %q: the click would show nothing", got)
	}
	page.eval(t, `document.querySelector(".show-finding").click(), true`)
	waitFor(t, "the finding to be marked", func() bool {
		return strings.Contains(string(page.eval(t, `document.getElementById("cpu-mark").textContent`)), "page-fault storm")
	})
	if got := selected(); !strings.HasPrefix(got, "page-faults") {
		t.Errorf("the link selected %q, want page-faults", got)
	}
	var marked int
	json.Unmarshal(page.eval(t, `((echarts.getInstanceByDom(document.getElementById("chart-cpu")).getOption().series[0].markArea || {}).data || []).length`), &marked)
	if marked != 1 {
		t.Errorf("%d rows marked, want 1 (CPU 1)", marked)
	}
}
