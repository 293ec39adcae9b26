package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/compare"
	"github.com/cacheheat/cacheheat/profile"
)

// buildWork compiles testdata/programs/work.c.
func buildWork(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		if cc, err = exec.LookPath("gcc"); err != nil {
			t.Skip("needs a C compiler (cc or gcc) to build the program the runs repeat")
		}
	}
	bin := filepath.Join(t.TempDir(), "work")
	if out, err := exec.Command(cc, "-O2", "-o", bin, filepath.Join("testdata", "programs", "work.c")).CombinedOutput(); err != nil {
		t.Fatalf("building work.c: %v\n%s", err, out)
	}
	return bin
}

func runsOf(t *testing.T, path string) (*profile.Recording, []profile.RunTotal) {
	t.Helper()
	r, err := profile.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var runs []profile.RunTotal
	for _, w := range r.Windows {
		runs = append(runs, w.Runs...)
	}
	return r, runs
}

// TestRepeatedRuns: record -r 3 --warmup 1 keeps four runs' totals, the
// first marked warm-up, each with its wall and CPU time, counters and
// samples by function; a command that fails on its second run stops the
// runs there, keeps the first, and record exits 1; bad counts exit 2.
func TestRepeatedRuns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: cacheheat record loads BPF programs")
	}
	bin := cacheheatBinary(t)
	work := buildWork(t)
	dir := t.TempDir()
	rec := filepath.Join(dir, "runs.rec")
	if out, err := exec.Command(bin, "record", "-q", "-r", "3", "--warmup", "1", "-o", rec, "--", work, "100000000").CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	r, runs := runsOf(t, rec)
	if len(runs) != 4 || r.Trailer.Runs != 4 || r.Trailer.RunsFailed != "" {
		t.Fatalf("%d runs (trailer %d, %q), want 4", len(runs), r.Trailer.Runs, r.Trailer.RunsFailed)
	}
	for i, run := range runs {
		if run.Index != i || run.Warmup != (i == 0) || run.WallNS <= 0 || run.CPUNS() <= 0 || run.ExitStatus != 0 {
			t.Errorf("run %d: %+v", i, run)
		}
		// The target's cpu-clock over the run is its CPU time, within a
		// sample period and the gate's start.
		if cc := float64(run.Counts["cpu-clock"]); cc < 0.5*float64(run.CPUNS()) || cc > 1.5*float64(run.CPUNS())+2e7 {
			t.Errorf("run %d: cpu-clock %v ns against %d ns of user+system time", i, cc, run.CPUNS())
		}
		if run.Samples > 0 && run.Functions["generate"] == 0 {
			t.Errorf("run %d: %d samples, none in generate: %v", i, run.Samples, run.Functions)
		}
	}

	// Fails on its second run (the flag file exists then).
	flag := filepath.Join(dir, "flag")
	failing := filepath.Join(dir, "failing.rec")
	cmd := exec.Command(bin, "record", "-q", "-r", "4", "-o", failing, "--", "sh", "-c", "test -e "+flag+" && exit 3; touch "+flag)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if code := exitCodeOf(err); code != exitRegression {
		t.Errorf("a run failed: record exited %d, want %d; stderr %s", code, exitRegression, stderr.String())
	}
	if !strings.Contains(stderr.String(), "run 2 of 4 exited with status 3") {
		t.Errorf("stderr does not say which run failed: %s", stderr.String())
	}
	fr, fruns := runsOf(t, failing)
	if len(fruns) != 2 || fruns[0].ExitStatus != 0 || fruns[1].ExitStatus != 3 || fr.Trailer.RunsFailed == "" {
		t.Errorf("failing: runs %+v, trailer %+v", fruns, fr.Trailer)
	}

	for _, args := range [][]string{{"-r", "0"}, {"--warmup", "-1"}, {"-r", "3", "-a"}} {
		var out, errb bytes.Buffer
		a := append([]string{"record", "-o", filepath.Join(dir, "x.rec")}, args...)
		if args[len(args)-1] != "-a" {
			a = append(a, "--", "true")
		}
		if code := run(a, &out, &errb); code != exitUsage {
			t.Errorf("record %v: exit %d, want %d (%s)", args, code, exitUsage, errb.String())
		}
	}
}

func exitCodeOf(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// TestGateOnRuns: the CI gate on repeated runs. A program doing 1.5x the
// work is a regression in CPU time with 5 runs a side, whatever else runs
// on the host (wall time may drown in a busy host's noise: it must then
// not read as an improvement); its interval holds the ratio; the same
// program against itself is not. Two recordings of one run each are
// compared window by window, and say so.
func TestGateOnRuns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: cacheheat record loads BPF programs")
	}
	if testing.Short() {
		t.Skip("records 15 runs of a program; skipped with -short")
	}
	bin := cacheheatBinary(t)
	work := buildWork(t)
	dir := t.TempDir()
	rec := func(name, n string) string {
		p := filepath.Join(dir, name+".rec")
		if out, err := exec.Command(bin, "record", "-q", "-r", "5", "-o", p, "--", work, n).CombinedOutput(); err != nil {
			t.Fatalf("record %s: %v\n%s", name, err, out)
		}
		return p
	}
	base, slower, again := rec("base", "100000000"), rec("slower", "150000000"), rec("again", "100000000")
	// What the test reads of diff --json.
	type result struct {
		Evidence string
		Base     struct{ Runs int }
		Metrics  []struct {
			Name, Verdict string
			Gate          bool
			Ratio         float64
			CILow         *float64 `json:"ci_low"`
			CIHigh        *float64 `json:"ci_high"`
		}
	}
	diff := func(a, b string) (int, result) {
		var out, errb bytes.Buffer
		code := run([]string{"diff", "--json", a, b}, &out, &errb)
		var res result
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("diff --json: %v\n%s%s", err, out.String(), errb.String())
		}
		return code, res
	}
	code, res := diff(base, slower)
	if code != exitRegression || res.Evidence != compare.EvidenceRuns || res.Base.Runs != 5 {
		t.Errorf("1.5x the work: exit %d, evidence %q, %d runs; want exit %d on runs: %+v", code, res.Evidence, res.Base.Runs, exitRegression, res.Metrics)
	}
	for _, m := range res.Metrics {
		switch {
		case m.Name == compare.RunCPU && (m.Verdict != compare.VerdictRegression || m.CILow == nil || m.CIHigh == nil || *m.CILow <= 1.1 || *m.CIHigh < 1.3):
			t.Errorf("1.5x the work: cpu time %s, x%.3g, interval %s; want a regression whose interval holds about 1.5", m.Verdict, m.Ratio, interval(m.CILow, m.CIHigh))
		case m.Gate && m.Verdict == compare.VerdictImprovement:
			t.Errorf("1.5x the work: gate %s is an improvement (x%.3g)", m.Name, m.Ratio)
		}
	}
	// The gate's goal is at most one false alarm in 20 pairs of the
	// same program (beside load too: batches recorded one after the
	// other see different neighbours), so one pair may call a
	// regression; a second, fresh pair must not (two in a row: about
	// one in 400).
	code, res = diff(base, again)
	if code == exitRegression {
		t.Logf("the same program against itself: a regression, allowed once in 20 pairs; recording a fresh pair: %+v", res.Metrics)
		code, res = diff(rec("base2", "100000000"), rec("again2", "100000000"))
		if code == exitRegression {
			t.Errorf("the same program against itself: a regression in two pairs of two: %+v", res.Metrics)
		}
	}
	// One run a side: windows, and the text says what that cannot see.
	one := filepath.Join(dir, "one.rec")
	if out, err := exec.Command(bin, "record", "-q", "-o", one, "--", work, "100000000").CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	var out, errb bytes.Buffer
	run([]string{"diff", one, one}, &out, &errb)
	if !strings.Contains(out.String(), "evidence: per-window rates of one run a side") {
		t.Errorf("a diff of single runs does not say it compared windows:\n%s", out.String())
	}
}

// TestRecordAllWhileCommand: record -a -- CMD records every task while
// CMD runs, as perf record -a -- CMD does, and ends when it exits.
func TestRecordAllWhileCommand(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: cacheheat record loads BPF programs")
	}
	bin := cacheheatBinary(t)
	work := buildWork(t)
	rec := filepath.Join(t.TempDir(), "all.rec")
	if out, err := exec.Command(bin, "record", "-q", "-a", "-o", rec, "--", work, "100000000").CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	r, err := profile.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	h := r.Header.Target
	if h.Kind != profile.TargetAll || len(h.Command) != 2 || r.Trailer.EndReason != profile.EndTargetExit {
		t.Errorf("target %+v, end %q; want all, with the command, ending at its exit", h, r.Trailer.EndReason)
	}
	seen := false
	for _, p := range r.ProcessTotals() {
		seen = seen || p.Comm == "work"
	}
	if !seen || len(r.ProcessTotals()) < 2 {
		t.Errorf("-a -- CMD: %d processes, work among them: %v", len(r.ProcessTotals()), seen)
	}
}

// interval prints a JSON interval whose bounds may be null.
func interval(lo, hi *float64) string {
	f := func(v *float64) string {
		if v == nil {
			return "none"
		}
		return strconv.FormatFloat(*v, 'g', 3, 64)
	}
	return "[" + f(lo) + ", " + f(hi) + "]"
}
