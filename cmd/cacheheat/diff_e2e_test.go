package main

import (
	"encoding/json"
	"errors"
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
		code  int
		table string
		ops   metric
		all   []metric
	}
	// The threshold docs/CI.md advises for a shared VM: two recordings of
	// the same variant here differ by up to ~8% in ops/s from drift
	// between runs (seen: x0.923, Holm p 1e-6), beyond the 5% default
	// meant for a quiet runner; the variants differ by about 6x.
	const threshold = "15%"
	diff := func(base, new string) result {
		cmd := exec.Command(bin, "diff", "--json", "--threshold", threshold, base, new)
		out, err := cmd.Output()
		var r result
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
		r.all = doc.Metrics
		for _, m := range doc.Metrics {
			if m.Name == "app.ops_per_sec" {
				r.ops = m
			}
		}
		table, _ := exec.Command(bin, "diff", "--threshold", threshold, base, new).Output()
		r.table = string(table)
		return r
	}

	// The verdicts asserted are those on the effect the variants are
	// built to have, the workload's own throughput (about 6x between
	// them; it is what a CI job gates on), together with its direction.
	// Other metrics (scheduling, migrations, run-queue latency) also move
	// with whatever else runs on the host, so a verdict on them is not a
	// property of the change; their decision rules (the CPU-share and
	// work explanations) are tested on constructed series in compare/.
	// Robustness: run 10 times in a row while 'stress-ng --cpu 2' loaded
	// both CPUs of the 2-CPU test VM, it passed 10 of 10 (see the record
	// in the commit that introduced this comment).
	fwd := diff(good, bad)
	t.Logf("diff good bad: exit %d\n%s", fwd.code, fwd.table)
	if fwd.code != exitRegression || fwd.ops.Verdict != "regression" || !(fwd.ops.Ratio < 0.5) {
		t.Errorf("good -> bad: exit %d, app.ops_per_sec %+v; want exit 1 and ops/s regressed below x0.5", fwd.code, fwd.ops)
	}
	rev := diff(bad, good)
	t.Logf("diff bad good: exit %d\n%s", rev.code, rev.table)
	if rev.ops.Verdict != "improvement" || !(rev.ops.Ratio > 2) {
		t.Errorf("bad -> good: app.ops_per_sec %+v; want improved above x2", rev.ops)
	}
	if rev.code == exitRegression {
		// Reported, not failed: a loaded host can move a scheduling metric
		// beyond the threshold between two runs.
		t.Logf("bad -> good also flagged a regression in a metric other than the throughput")
	}

	if t.Failed() {
		for _, rec := range []string{good, bad} {
			out, _ := exec.Command(bin, "inspect", rec).Output()
			t.Logf("inspect %s:\n%s", filepath.Base(rec), out)
		}
	}

	// Same variant twice: the throughput must not be called a regression.
	// When the host gave the second run less CPU, diff says "changed"
	// with the reason (explainByCPUShare), which is the right answer.
	same := diff(good, good2)
	t.Logf("diff good good2: exit %d\n%s", same.code, same.table)
	if same.ops.Name == "" || same.ops.Verdict == "regression" {
		t.Errorf("good -> good: exit %d, app.ops_per_sec %+v; want the throughput not called a regression", same.code, same.ops)
		out, _ := exec.Command(bin, "inspect", good2).Output()
		t.Logf("inspect good2:\n%s", out)
	}
}
