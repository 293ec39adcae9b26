package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/heatmap"
	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
)

// gradeWorkloads are the O3 pairs the findings are graded on, each with the
// rules that would name its cause on a host with hardware cache events.
var gradeWorkloads = []struct {
	name  string
	cause []string // rules that name the bad variant's cause; nil: rcu (software mode names it)
}{
	{"falseshare", []string{"false-sharing"}},
	{"align", []string{"l1-bandwidth-contention", "false-sharing"}},
	{"ffn", []string{"l1-bandwidth-contention", "llc-thrashing"}},
	{"kvcache", []string{"llc-thrashing", "dtlb-pressure"}},
	{"rcu", nil},
}

// aboutOthers are the rules whose findings are about other processes, not
// the target: allowed on a good variant.
var aboutOthers = map[string]bool{"noisy-neighbour": true}

// Markers around the grade table in docs/ATTRIBUTION.md, written by
// go test -run Grade -update.
const (
	gradeBegin = "<!-- grade:begin (written by 'go test ./cmd/cacheheat -run Grade -update'; do not edit) -->"
	gradeEnd   = "<!-- grade:end -->"
)

// TestGradeO3 grades the findings against ground truth: every O3 workload
// recorded bad and good with defaults (-t 2 -d 4s) on this host. A good
// variant gets no finding about the target; lock-contention on rcu is
// judged by the readers' blocked time as the kernel accounted it (bad:
// well over the rule's threshold, so it must fire and name the RWMutex
// path; good: near zero, so it must not); in software mode the cache workloads' bad
// variants get no invented cause, their rules are listed as not evaluated
// with the host's reason, and analyze points at diff against a good build.
func TestGradeO3(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: cacheheat record loads BPF programs")
	}
	if testing.Short() {
		t.Skip("records ten workloads for ~60 s; skipped with -short")
	}
	bin := cacheheatBinary(t)
	dir := t.TempDir()
	results := map[string]attribution.Result{}
	blocked := map[string]float64{} // the workload's own account, by key
	var software bool
	for _, w := range gradeWorkloads {
		for _, v := range []string{"bad", "good"} {
			key := w.name + " " + v
			rec := filepath.Join(dir, w.name+"-"+v+".rec")
			args := []string{"record", "-q", "-o", rec, "--", bin, "workload", "run", w.name, "--variant", v, "-t", "2", "-d", "4s"}
			out, err := exec.Command(bin, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("cacheheat %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			if m := blockedShareRE.FindSubmatch(out); m != nil {
				blocked[key], _ = strconv.ParseFloat(string(m[1]), 64)
			}
			out, err = exec.Command(bin, "analyze", "--json", rec).Output()
			if err != nil {
				t.Fatalf("analyze %s: %v", key, err)
			}
			var res attribution.Result
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("analyze %s: %v", key, err)
			}
			results[key] = res
			r, err := profile.ReadFile(rec)
			if err != nil {
				t.Fatal(err)
			}
			software = r.Header.Host.Mode == "software"
			text, _ := exec.Command(bin, "analyze", rec).Output()
			t.Logf("analyze %s:\n%s", key, text)
			// What the blocking rules read, for a failure to be explained.
			sum := model.FromRecording(r).Summary()
			if sum.OffCPU != nil {
				t.Logf("%s: on-CPU %.2fs, off-CPU by reason %v", key, float64(sum.Totals["cpu-clock"].Total)/1e9, sum.OffCPU.ByReason)
			}
		}
	}

	table := gradeTable(results)
	t.Logf("grade table:\n%s", table)
	if *update {
		writeGradeTable(t, table)
	}

	for _, w := range gradeWorkloads {
		good := results[w.name+" good"]
		for _, f := range good.Findings {
			if !aboutOthers[f.Rule] {
				t.Errorf("%s good: %s finding %s: %s", w.name, f.Severity, f.Rule, f.Advice)
			}
		}
		bad := results[w.name+" bad"]
		if w.cause == nil { // rcu
			gradeLockContention(t, "rcu bad", bad, blocked, true)
			gradeLockContention(t, "rcu good", good, blocked, false)
			if _, ok := findingOf(bad, attribution.RuleLockContention); !ok {
				continue
			}
			// The report's off-CPU flame graph: lock is its largest
			// reason, and its top stack is the RWMutex wait.
			r, err := profile.ReadFile(filepath.Join(dir, "rcu-bad.rec"))
			if err != nil {
				t.Fatal(err)
			}
			v := heatmap.OffCPU(model.FromRecording(r))
			switch {
			case v == nil || len(v.Flame.Children) == 0:
				t.Errorf("rcu bad: no off-CPU flame graph")
			case v.Flame.Children[0].Name != profile.OffCPULock:
				t.Errorf("rcu bad: the off-CPU flame graph's largest reason is %s, want lock", v.Flame.Children[0].Name)
			case len(v.Stacks) == 0 || !strings.Contains(strings.Join(v.Stacks[0].Frames, ";"), "RWMutex"):
				t.Errorf("rcu bad: top off-CPU stack %v lacks RWMutex", v.Stacks)
			}
			continue
		}
		if !software {
			continue // with hardware events the cause rules are evaluated
		}
		for _, f := range bad.Findings {
			if !aboutOthers[f.Rule] {
				t.Errorf("%s bad: invented cause %s: %s", w.name, f.Rule, f.Advice)
			}
		}
		ne := map[string]string{}
		for _, n := range bad.NotEvaluated {
			ne[n.Rule] = n.Reason
		}
		for _, r := range w.cause {
			if !strings.Contains(ne[r], "unsupported on this host") {
				t.Errorf("%s bad: %s not listed as not evaluated with the host's reason (got %q)", w.name, r, ne[r])
			}
		}
		if !strings.Contains(bad.Note, "cacheheat diff") {
			t.Errorf("%s bad: analyze does not point at diff against a good build: note %q", w.name, bad.Note)
		}
	}
}

// blockedShareRE finds the rcu workload's own account of its readers'
// blocked time in its result line.
var blockedShareRE = regexp.MustCompile(`blocked_share=([0-9.]+)`)

// gradeLockContention judges lock-contention on an rcu run by the
// readers' blocked time as the kernel accounted it to them (the
// workload's blocked_share, from /proc/thread-self/schedstat), which the
// rule does not read: it estimates the wait from sampled off-CPU stacks.
// Over twice the rule's share threshold the rule must fire and name the
// RWMutex path; under half of it, it must not. Between, the run cannot
// decide the verdict, and the test says so and fails: the workload is
// built so that bad is well above (its writer waits holding the lock)
// and good is near zero. want is the variant's expected side,
// so that a run landing on the other one fails too.
func gradeLockContention(t *testing.T, key string, res attribution.Result, blocked map[string]float64, want bool) {
	t.Helper()
	truth, ok := blocked[key]
	if !ok {
		t.Errorf("%s: the workload printed no blocked_share: no ground truth to grade lock-contention by", key)
		return
	}
	var share float64
	for _, r := range attribution.Rules() {
		if r.ID == attribution.RuleLockContention {
			share = r.Thresholds[0].Value
		}
	}
	f, fired := findingOf(res, attribution.RuleLockContention)
	estimate := "not fired"
	if fired && len(f.Evidence) > 0 {
		estimate = fmt.Sprintf("estimated lock wait share %.1f%%", 100*f.Evidence[0].Value)
	}
	t.Logf("%s: readers blocked %.1f%% of their time (kernel's account); %s", key, 100*truth, estimate)
	switch {
	case truth > 2*share:
		if !want {
			t.Errorf("%s: readers blocked %.1f%% of their time: the good variant contends", key, 100*truth)
		}
		if !fired {
			t.Errorf("%s: readers blocked %.1f%% of their time (over twice the rule's %.0f%%), yet no lock-contention", key, 100*truth, 100*share)
		} else if !namesRWMutex(f.Scope.Functions) {
			t.Errorf("%s: lock-contention names %v, want sync.(*RWMutex) or the runtime's semacquire path under it", key, f.Scope.Functions)
		}
	case truth < share/2:
		if want {
			t.Errorf("%s: readers blocked only %.1f%% of their time: the bad variant did not contend", key, 100*truth)
		}
		if fired {
			t.Errorf("%s: readers blocked %.1f%% of their time (under half the rule's %.0f%%), yet lock-contention %v", key, 100*truth, 100*share, f.Scope.Functions)
		}
	default:
		t.Errorf("%s: readers blocked %.1f%% of their time, between half and twice the rule's %.0f%%: this run cannot decide the verdict", key, 100*truth, 100*share)
	}
}

func findingOf(res attribution.Result, rule string) (attribution.Finding, bool) {
	for _, f := range res.Findings {
		if f.Rule == rule {
			return f, true
		}
	}
	return attribution.Finding{}, false
}

// namesRWMutex: the lock is sync.RWMutex, named by its method or by the
// runtime path its slow path takes (RLock is inlined into its caller).
func namesRWMutex(fns []string) bool {
	for _, f := range fns {
		if strings.Contains(f, "RWMutex") || strings.Contains(f, "semacquire") || strings.Contains(f, "futex") {
			return true
		}
	}
	return false
}

// gradeTable renders rule x workload x variant: "**high**"/"medium" when
// the rule fired, "n/e" when it could not be evaluated, "-" when it did
// not fire.
func gradeTable(results map[string]attribution.Result) string {
	var b strings.Builder
	b.WriteString("| rule |")
	for _, w := range gradeWorkloads {
		fmt.Fprintf(&b, " %s bad | %s good |", w.name, w.name)
	}
	b.WriteString("\n|---|")
	for range gradeWorkloads {
		b.WriteString("---|---|")
	}
	b.WriteString("\n")
	for _, r := range attribution.Rules() {
		fmt.Fprintf(&b, "| `%s` |", r.ID)
		for _, w := range gradeWorkloads {
			for _, v := range []string{"bad", "good"} {
				res := results[w.name+" "+v]
				cell := "-"
				for _, n := range res.NotEvaluated {
					if n.Rule == r.ID {
						cell = "n/e"
					}
				}
				if f, ok := findingOf(res, r.ID); ok {
					cell = "fired (" + f.Severity + ")"
				}
				fmt.Fprintf(&b, " %s |", cell)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// writeGradeTable puts the table between the grade markers of
// docs/ATTRIBUTION.md.
func writeGradeTable(t *testing.T, table string) {
	t.Helper()
	path := filepath.Join("..", "..", "docs", "ATTRIBUTION.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, gradeBegin), strings.Index(s, gradeEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the grade markers", path)
	}
	s = s[:i+len(gradeBegin)] + "\n" + table + s[j:]
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
