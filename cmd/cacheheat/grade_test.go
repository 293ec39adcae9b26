package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
// variant gets no finding about the target; rcu bad gets lock-contention
// naming the RWMutex path; in software mode the cache workloads' bad
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
	var software bool
	for _, w := range gradeWorkloads {
		for _, v := range []string{"bad", "good"} {
			key := w.name + " " + v
			rec := filepath.Join(dir, w.name+"-"+v+".rec")
			args := []string{"record", "-q", "-o", rec, "--", bin, "workload", "run", w.name, "--variant", v, "-t", "2", "-d", "4s"}
			if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
				t.Fatalf("cacheheat %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			out, err := exec.Command(bin, "analyze", "--json", rec).Output()
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
			f, ok := findingOf(bad, "lock-contention")
			switch {
			case !ok:
				t.Errorf("rcu bad: no lock-contention")
			case !namesRWMutex(f.Scope.Functions):
				t.Errorf("rcu bad: lock-contention names %v, want sync.(*RWMutex) or the runtime's semacquire path under it", f.Scope.Functions)
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
			if f, ok := findingOf(good, "lock-contention"); ok {
				t.Errorf("rcu good: lock-contention %v", f.Scope.Functions)
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
