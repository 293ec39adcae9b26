package dashboard

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

const committed = "../../deploy/grafana/cacheheat.json"

// The committed dashboard is what this package generates.
func TestCommittedDashboardIsGenerated(t *testing.T) {
	want, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(committed)
	if err != nil {
		t.Fatalf("reading the committed dashboard: %v (run: go generate ./promexporter/...)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what promexporter/dashboard generates: run go generate ./promexporter/... and commit", committed)
	}
}

// Every panel queries only the exporter's metrics (or the process metrics
// of the exporter itself), and every metric the exporter serves has a panel.
func TestPanelsUseExporterMetrics(t *testing.T) {
	b, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	exprs := Exprs(b)
	if len(exprs) < 12 {
		t.Fatalf("only %d panel queries", len(exprs))
	}
	all := strings.Join(exprs, "\n")
	for _, m := range []string{"cacheheat_cpu_events_total", "cacheheat_cpu_seconds_total", "cacheheat_cgroup_events_total", "cacheheat_cgroup_cpu_seconds_total", "cacheheat_runqueue_latency_seconds_bucket",
		"cacheheat_offcpu_seconds_bucket", "cacheheat_bpf_run_seconds_total", "cacheheat_dropped_total", "cacheheat_map_entries",
		"cacheheat_event_unsupported", "process_cpu_seconds_total"} {
		if !strings.Contains(all, m) {
			t.Errorf("no panel uses %s", m)
		}
	}
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d["uid"] != UID {
		t.Errorf("uid %v, want %s", d["uid"], UID)
	}
}
