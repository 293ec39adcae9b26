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

	type verdicts struct {
		code  int
		table string
		byV   map[string][]string
	}
	// The threshold docs/CI.md advises for a shared VM: two recordings of
	// the same variant here differ by up to ~8% in ops/s from drift
	// between runs (seen: x0.923, Holm p 1e-6), beyond the 5% default
	// meant for a quiet runner; the variants differ by about 6x.
	const threshold = "15%"
	diff := func(base, new string) verdicts {
		cmd := exec.Command(bin, "diff", "--json", "--threshold", threshold, base, new)
		out, err := cmd.Output()
		v := verdicts{byV: map[string][]string{}}
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			v.code = ee.ExitCode()
		default:
			t.Fatalf("diff: %v", err)
		}
		var doc struct {
			Metrics []struct{ Name, Verdict string } `json:"metrics"`
		}
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatalf("diff --json: %v\n%s", err, out)
		}
		for _, m := range doc.Metrics {
			v.byV[m.Verdict] = append(v.byV[m.Verdict], m.Name)
		}
		table, _ := exec.Command(bin, "diff", "--threshold", threshold, base, new).Output()
		v.table = string(table)
		return v
	}
	has := func(names []string, pred func(string) bool) bool {
		for _, n := range names {
			if pred(n) {
				return true
			}
		}
		return false
	}
	isOps := func(n string) bool { return n == "app.ops_per_sec" }
	isSched := func(n string) bool {
		return strings.HasPrefix(n, "context-switches/") || strings.HasPrefix(n, "offcpu.")
	}

	fwd := diff(good, bad)
	t.Logf("diff good bad: exit %d\n%s", fwd.code, fwd.table)
	if fwd.code != exitRegression {
		t.Errorf("good -> bad: exit %d, want 1", fwd.code)
	}
	if !has(fwd.byV["regression"], isOps) || !has(fwd.byV["regression"], isSched) {
		t.Errorf("good -> bad: regressions %v, want app.ops_per_sec and a context-switch or off-CPU metric", fwd.byV["regression"])
	}

	rev := diff(bad, good)
	t.Logf("diff bad good: exit %d\n%s", rev.code, rev.table)
	if rev.code != exitOK || !has(rev.byV["improvement"], isOps) {
		t.Errorf("bad -> good: exit %d, improvements %v; want 0 with app.ops_per_sec improved", rev.code, rev.byV["improvement"])
	}

	if t.Failed() {
		for _, rec := range []string{good, bad} {
			out, _ := exec.Command(bin, "inspect", rec).Output()
			t.Logf("inspect %s:\n%s", filepath.Base(rec), out)
		}
	}

	same := diff(good, good2)
	t.Logf("diff good good2: exit %d\n%s", same.code, same.table)
	if same.code != exitOK {
		t.Errorf("good -> good: exit %d, want 0 (regressions %v)", same.code, same.byV["regression"])
		out, _ := exec.Command(bin, "inspect", good2).Output()
		t.Logf("inspect good2:\n%s", out)
	}
}
