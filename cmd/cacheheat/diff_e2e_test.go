package main

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDiffEndToEnd records the rcu workload's good and bad variants with
// the real recorder and checks diff's verdicts both ways, and on two
// recordings of the same variant. It takes about 40 s.
//
// Windows are 250 ms (not the CLI's 1 s default) so that each 8 s run
// gives about 30 windows per side: the per-window test needs that many to
// separate a 1.5x effect from the noise of a busy 2-CPU host.
func TestDiffEndToEnd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: cacheheat record loads BPF programs")
	}
	if testing.Short() {
		t.Skip("records for ~30 s; skipped with -short")
	}
	dir := t.TempDir()
	bin := cacheheatBinary(t)
	record := func(name, variant string) string {
		rec := filepath.Join(dir, name+".rec")
		args := []string{"record", "-q", "-d", "12s", "-i", "250ms", "-o", rec, "--",
			bin, "workload", "run", "rcu", "--variant", variant, "-t", "4", "-d", "8s"}
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("cacheheat %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return rec
	}
	good, bad, good2 := record("good", "good"), record("bad", "bad"), record("good2", "good")

	// What diff said about one metric, and its exit code.
	type metric struct {
		Name, Verdict string
		Ratio         float64
	}
	type result struct {
		code   int
		table  string
		byName map[string]metric
		regr   int
	}
	// The threshold docs/CI.md advises for a shared VM.
	const threshold = "15%"
	diff := func(base, new string) result {
		cmd := exec.Command(bin, "diff", "--json", "--threshold", threshold, base, new)
		out, err := cmd.Output()
		r := result{byName: map[string]metric{}}
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			r.code = ee.ExitCode()
		default:
			t.Fatalf("diff: %v", err)
		}
		var doc struct {
			Metrics []metric `json:"metrics"`
		}
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatalf("diff --json: %v\n%s", err, out)
		}
		for _, m := range doc.Metrics {
			r.byName[m.Name] = m
			if m.Verdict == "regression" {
				r.regr++
			}
		}
		table, _ := exec.Command(bin, "diff", "--threshold", threshold, base, new).Output()
		r.table = string(table)
		// The exit code follows the verdicts: 1 exactly when one is a
		// regression (the rule itself is tested on constructed
		// recordings in TestDiffExitCodes).
		if (r.code == exitRegression) != (r.regr > 0) || (r.code != exitRegression && r.code != exitOK) {
			t.Errorf("diff %s %s: exit %d with %d regressions", filepath.Base(base), filepath.Base(new), r.code, r.regr)
		}
		return r
	}

	// What is asserted, and why it holds on a loaded host. The variants
	// differ in what each operation costs: behind the RWMutex every read
	// bounces the lock's cache line, so the CPU time per operation
	// (cpu-clock/op) is higher whatever share of the CPUs a run gets.
	// Throughput (ops/s) and scheduling metrics follow how much CPU the
	// host gave each run as well. Under 'stress-ng --cpu 2' the
	// per-window values are so noisy that Holm-corrected significance at
	// alpha 0.01 comes and goes (seen: cpu-clock/op x1.94, p 0.022, "no
	// change"; ops/s of two runs of the same variant x1.46, p 0.0003,
	// "improvement"). So the test asserts the statistic's direction and
	// size on real recordings, and that the exit code follows the
	// verdicts; the decision rule from statistic to verdict to exit code
	// is tested on constructed recordings (TestDiffExitCodes and compare's
	// tests). Gating CI on throughput needs a quieter runner (docs/CI.md).
	//
	// Proof of robustness, 2026-12-03: run 10 times in a row
	// (/tmp/cmd.test -test.run '^TestDiffEndToEnd$' -test.count=10) while
	// 'stress-ng --cpu 2' loaded both CPUs of the 2-CPU VM and other
	// builds ran beside it (load average 27): 10 of 10 passed, 25-39 s
	// each. cpu-clock/op good -> bad x1.57 to x4.46, bad -> good x0.22
	// to x0.64, good -> good2 x0.95 to x1.10.
	const cost, ops = "cpu-clock/op", "app.ops_per_sec"
	const factor = 1.15 // the threshold, as a ratio
	fwd := diff(good, bad)
	t.Logf("diff good bad: exit %d\n%s", fwd.code, fwd.table)
	if m := fwd.byName[cost]; !(m.Ratio > factor) {
		t.Errorf("good -> bad: %s %+v; want it above x%g", cost, m, factor)
	}
	if m := fwd.byName[ops]; !(m.Ratio < 1) {
		t.Errorf("good -> bad: %s %+v; want it lower", ops, m)
	}
	rev := diff(bad, good)
	t.Logf("diff bad good: exit %d\n%s", rev.code, rev.table)
	if m := rev.byName[cost]; !(m.Ratio < 1/factor) {
		t.Errorf("bad -> good: %s %+v; want it below x%.3g", cost, m, 1/factor)
	}
	if m := rev.byName[ops]; !(m.Ratio > 1) {
		t.Errorf("bad -> good: %s %+v; want it higher", ops, m)
	}

	if t.Failed() {
		for _, rec := range []string{good, bad} {
			out, _ := exec.Command(bin, "inspect", rec).Output()
			t.Logf("inspect %s:\n%s", filepath.Base(rec), out)
		}
	}

	// Same variant twice: the two runs are closer in cost per operation
	// than the two variants (a paired comparison: both pairs ran on the
	// same loaded host). A fixed bound is not: under stress-ng two good
	// runs differed x0.81 (16 and 13 ns of CPU per op).
	same := diff(good, good2)
	t.Logf("diff good good2: exit %d\n%s", same.code, same.table)
	dist := func(r float64) float64 { return math.Abs(math.Log(r)) }
	if m, ok := same.byName[cost]; !ok || !(dist(m.Ratio) < dist(fwd.byName[cost].Ratio)) {
		t.Errorf("good -> good: %s %+v; want it closer to x1 than good -> bad (x%.3g)", cost, m, fwd.byName[cost].Ratio)
		out, _ := exec.Command(bin, "inspect", good2).Output()
		t.Logf("inspect good2:\n%s", out)
	}
}
