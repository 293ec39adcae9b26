package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// TestDiffFalseshare records the falseshare workload's variants the way
// docs/CI.md advises for short runs (-i 250ms, 4 s, two threads on the
// 2-CPU host) and checks diff's exit codes: good -> bad is a regression
// (exit 1), bad -> good is not (exit 0), and two runs of the good variant
// are never a regression (0, or 2 when undecided). It takes about 40 s.
//
// In software mode false sharing shows in throughput only: the packed
// counters make each add wait for the cache line whenever both threads run
// at once. The workload reports a running total of ops (ops_total), so each
// window has its own ops/s and CPU time per op. A busy neighbour lowers
// both variants' CPU share; diff's rule for that (a throughput drop while
// the host gave less CPU counts only when the CPU time per op rose too)
// is what keeps good -> good quiet and good -> bad caught.
//
// Three things can leave nothing to assert, and then all three are
// recorded again, at most twice more, before the test skips saying so
// (no fair measurement, no verdict either way). An undecided diff
// (exit 2) is no verdict: the recorder was starved and its stretched
// windows left too few to test. And the effect needs both threads on a CPU
// at once: the workload pins its two threads to CPUs 0 and 1, and a host
// so busy that either thread ran less than 40% of the time (the median
// of cpu-clock/s{cpu=N} under 0.4e9 in a recording; 'stress-ng --cpu 1'
// alone takes about half of one CPU) runs them mostly one at a time, when
// packed counters cost nothing. Seen with five other test suites beside
// it: one thread got no CPU at all for whole recordings, bad's CPU time
// per op was only x1.08-x1.19 good's, and bad -> good exited 1 once
// because good got a third of bad's CPU. And the host must give the
// three recordings about equal CPU: beside 'stress-ng --cpu 2', good2 got
// 13% less than good, with 11% more CPU per op, and its ops/s fell x0.77,
// which one run a side cannot tell from a regression. Those checks look
// at the CPU each recording was given, never at the verdicts.
func TestDiffFalseshare(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: cacheheat record loads BPF programs")
	}
	if testing.Short() {
		t.Skip("records for ~20 s; skipped with -short")
	}
	bin := cacheheatBinary(t)
	for attempt := 1; attempt <= 3; attempt++ {
		dir := t.TempDir()
		record := func(name, variant string) string {
			rec := filepath.Join(dir, name+".rec")
			args := []string{"record", "-q", "-i", "250ms", "-d", "4s", "-o", rec, "--",
				bin, "workload", "run", "falseshare", "--variant", variant, "-t", "2"}
			if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
				t.Fatalf("cacheheat %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return rec
		}
		good, bad, good2 := record("good", "good"), record("bad", "bad"), record("good2", "good")
		fwd, rev, same := diffRun(t, bin, good, bad), diffRun(t, bin, bad, good), diffRun(t, bin, good, good2)
		for _, d := range []diffOutcome{fwd, rev, same} {
			t.Logf("attempt %d: diff %s: exit %d\n%s", attempt, d.pair, d.code, d.table)
		}
		if fwd.code == exitUsage || rev.code == exitUsage || same.code == exitUsage {
			t.Logf("attempt %d: undecided (the tables say why)", attempt)
			continue
		}
		if starved := starvedThreads(fwd, same); starved != "" {
			t.Logf("attempt %d: %s: too busy a host for the threads to run at once", attempt, starved)
			continue
		}
		const ops = "app.ops_per_sec"
		if fwd.code != exitRegression || fwd.metrics[ops].Verdict != "regression" {
			t.Errorf("good -> bad: exit %d, %s %+v; want exit 1 with %s a regression", fwd.code, ops, fwd.metrics[ops], ops)
		}
		if rev.code != exitOK {
			t.Errorf("bad -> good: exit %d; want 0", rev.code)
		}
		if same.code == exitRegression {
			t.Errorf("good -> good: exit 1; two runs of one variant must not regress")
		}
		return
	}
	t.Skip("three sets of recordings were undecided, had a thread under 40% of its CPU or got unequal CPU from the host: this host is too busy to compare single runs fairly (see the log)")
}

// starvedThreads names the recordings of good, bad and good2 in which the
// thread on CPU 0 or 1 ran less than 40% of the time, and says so when
// the host gave the three recordings unequal CPU (their target's median
// cpu-clock/s more than 10% apart: both variants keep two threads busy,
// so only the neighbours make them differ), or returns "".
func starvedThreads(fwd, same diffOutcome) string {
	var out []string
	for _, cpu := range []string{"0", "1"} {
		name := "cpu-clock/s{cpu=" + cpu + "}"
		got := map[string]float64{"good": fwd.metrics[name].BaseMedian, "bad": fwd.metrics[name].NewMedian, "good2": same.metrics[name].NewMedian}
		for _, rec := range []string{"good", "bad", "good2"} {
			if got[rec] < 0.4e9 {
				out = append(out, fmt.Sprintf("%s: CPU %s %.2g s/s", rec, cpu, got[rec]/1e9))
			}
		}
	}
	const total = "cpu-clock/s"
	given := []float64{fwd.metrics[total].BaseMedian, fwd.metrics[total].NewMedian, same.metrics[total].NewMedian}
	lo, hi := slices.Min(given), slices.Max(given)
	if lo <= 0 || hi/lo > 1.1 {
		out = append(out, fmt.Sprintf("the host gave good, bad and good2 %.2g, %.2g and %.2g CPU-s/s", given[0]/1e9, given[1]/1e9, given[2]/1e9))
	}
	return strings.Join(out, ", ")
}

// diffOutcome is what one diff run said.
type diffOutcome struct {
	pair    string
	code    int
	table   string
	metrics map[string]diffMetric
}

type diffMetric struct {
	Verdict    string
	Ratio      float64
	PAdj       float64 `json:"p_adj"`
	BaseMedian float64 `json:"base_median"`
	NewMedian  float64 `json:"new_median"`
}

// diffRun runs diff BASE NEW with --json, then for the table; the exit
// code must be the same both times.
func diffRun(t *testing.T, bin, base, new string) diffOutcome {
	t.Helper()
	d := diffOutcome{pair: filepath.Base(base) + " " + filepath.Base(new), metrics: map[string]diffMetric{}}
	exit := func(err error) int {
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ee):
			return ee.ExitCode()
		}
		t.Fatalf("diff %s: %v", d.pair, err)
		return -1
	}
	out, err := exec.Command(bin, "diff", "--json", base, new).Output()
	d.code = exit(err)
	var doc struct {
		Metrics []struct {
			Name string
			diffMetric
		} `json:"metrics"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("diff --json %s: %v\n%s", d.pair, err, out)
	}
	for _, m := range doc.Metrics {
		d.metrics[m.Name] = m.diffMetric
	}
	table, err := exec.Command(bin, "diff", base, new).CombinedOutput()
	if code := exit(err); code != d.code {
		t.Errorf("diff %s: exit %d with --json, %d without", d.pair, d.code, code)
	}
	d.table = string(table)
	return d
}
