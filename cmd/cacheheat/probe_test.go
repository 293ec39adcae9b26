package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/probe"
)

// TestProbeCLI: probe --quick --json on this host gives a result with
// the CPUs it may run on, in topology order, a measured matrix (with two
// CPUs or more), a staircase and bandwidth, and saves it for reports;
// CPUs that are absent or outside the affinity mask exit 2 naming them.
func TestProbeCLI(t *testing.T) {
	bin := cacheheatBinary(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "probe", "--quick", "--json", "-o", "-")
	cmd.Env = append(os.Environ(), "CACHEHEAT_PROBE_DIR="+dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	var r probe.Result
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("probe --json: %v\n%.500s", err, out)
	}
	if len(r.Order) == 0 || len(r.Staircase) == 0 || len(r.Bandwidth) == 0 {
		t.Fatalf("probe: order %v, %d staircases, %d bandwidth rows", r.Order, len(r.Staircase), len(r.Bandwidth))
	}
	if len(r.Order) >= 2 && (r.C2C == nil || len(r.C2C.Cells) != len(r.Order)*(len(r.Order)-1)) {
		t.Errorf("probe of %d CPUs: matrix %+v", len(r.Order), r.C2C)
	}
	saved, _ := filepath.Glob(filepath.Join(dir, "probe-*.json"))
	if len(saved) != 1 {
		t.Errorf("saved probes in CACHEHEAT_PROBE_DIR: %v", saved)
	}

	for _, c := range []struct{ cpus, want string }{
		{"4095", "offline or absent"},
		{"0,4095", "4095"},
	} {
		cmd := exec.Command(bin, "probe", "--quick", "--cpus", c.cpus)
		cmd.Env = append(os.Environ(), "CACHEHEAT_PROBE_DIR="+dir)
		out, err := cmd.CombinedOutput()
		if code := exitCodeOf(err); code != 2 || !strings.Contains(string(out), c.want) {
			t.Errorf("probe --cpus %s: exit %d, %q; want 2 and %q", c.cpus, code, out, c.want)
		}
	}
}

// TestReportReadsProbe: a report of a recording made on this host reads
// the probe saved for it: its per-core rows in the probe's order, the
// Machine line, and the lock-contention finding of rcu bad with what a
// line bounce between its CPUs costs; --probe with a file that is not a
// probe exits 2; without a saved probe, nothing of it appears.
func TestReportReadsProbe(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: cacheheat record loads BPF programs")
	}
	bin := cacheheatBinary(t)
	dir := t.TempDir()
	env := append(os.Environ(), "CACHEHEAT_PROBE_DIR="+filepath.Join(dir, "probes"))
	rec := filepath.Join(dir, "rcu.rec")
	if out, err := exec.Command(bin, "record", "-q", "-o", rec, "--", bin, "workload", "run", "rcu", "--variant", "bad", "-t", "4", "-d", "3s").CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	report := func(args ...string) string {
		t.Helper()
		html := filepath.Join(dir, "r.html")
		cmd := exec.Command(bin, append([]string{"report", rec, "-o", html}, args...)...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("report %v: %v\n%s", args, err, out)
		}
		b, _ := os.ReadFile(html)
		return string(b)
	}
	if page := report(); strings.Contains(page, "<th>Machine</th>") {
		t.Errorf("no probe saved, yet the report has a Machine line")
	}
	cmd := exec.Command(bin, "probe", "--quick", "--json", "-o", "-")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("probe: %v\n%.500s", err, out)
	}
	page := report()
	if !strings.Contains(page, "<th>Machine</th>") {
		t.Errorf("a probe of this host is saved, yet the report has no Machine line")
	}
	if !strings.Contains(page, `"rule":"lock-contention"`) {
		t.Fatalf("rcu bad gave no lock-contention finding: the citation cannot be checked")
	}
	if !strings.Contains(page, `class="machine">On this machine a cache line moves between`) {
		t.Errorf("the lock-contention finding does not cite the probe's line bounce cost")
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{not json"), 0o644)
	cmd = exec.Command(bin, "report", rec, "-o", filepath.Join(dir, "x.html"), "--probe", bad)
	if out, err := cmd.CombinedOutput(); exitCodeOf(err) != 2 || !strings.Contains(string(out), "not a 'cacheheat probe --json' result") {
		t.Errorf("--probe with a broken file: exit %d, %s", exitCodeOf(err), out)
	}
}
