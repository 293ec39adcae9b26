package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/profile"
)

// writeAnalyzeRec writes a small software-mode recording; faultsPerSec
// sets the target's page-fault rate (over 10,000/s fires
// page-fault-storm).
func writeAnalyzeRec(t *testing.T, path string, faultsPerSec uint64) {
	t.Helper()
	h := profile.Header{
		Host: profile.Host{Hostname: "test", Mode: "software", Topology: profile.Topology{
			CPUs:  []profile.CPU{{ID: 0, Node: 0, Siblings: []int{0}}, {ID: 1, Node: 0, Siblings: []int{1}}},
			Nodes: []profile.Node{{ID: 0, CPUs: []int{0, 1}}},
		}},
		Target:   profile.Target{Kind: profile.TargetPID, PIDs: []int{7}},
		Settings: profile.Settings{IntervalNS: 1e9, SampleHz: 99, SampleEvents: []string{"cpu-clock"}},
		Events: []profile.EventStatus{
			{Name: "page-faults", Kind: "software", Status: profile.StatusMeasured},
			{Name: "LLC-loads", Kind: "cache", Status: profile.StatusUnsupported, Reason: "no hardware PMU", Errno: "ENOENT"},
		},
	}
	w, err := profile.Create(path, h)
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(0); i < 3; i++ {
		win := profile.Window{StartNS: i * 1e9, EndNS: (i + 1) * 1e9,
			Counters: []profile.Counter{{Event: "page-faults", PerCPU: []uint64{faultsPerSec, 0}}}}
		if err := w.WriteWindow(&win); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(profile.Trailer{EndReason: profile.EndDuration}); err != nil {
		t.Fatal(err)
	}
}

func analyzeCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"analyze"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestAnalyzeExitCodes(t *testing.T) {
	dir := t.TempDir()
	quiet, storm := filepath.Join(dir, "quiet.rec"), filepath.Join(dir, "storm.rec")
	writeAnalyzeRec(t, quiet, 10)
	writeAnalyzeRec(t, storm, 50000)
	garbage := filepath.Join(dir, "garbage.rec")
	if err := os.WriteFile(garbage, []byte("this is not a recording\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want int
		out  string // substring of stdout (exit 0) or stderr
	}{
		{"no findings", []string{quiet}, exitOK, "findings: none"},
		{"findings", []string{storm}, exitOK, "page-fault-storm"},
		{"not evaluated", []string{quiet}, exitOK, "unsupported on this host: no hardware PMU"},
		{"missing file", []string{filepath.Join(dir, "nope.rec")}, exitUsage, "no such file"},
		{"garbage", []string{garbage}, exitFormat, "not a cacheheat recording"},
		{"no file", nil, exitUsage, "want one recording file"},
		{"bad flag", []string{"--bogus", quiet}, exitUsage, "unknown flag"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := analyzeCmd(t, c.args...)
			if code != c.want {
				t.Fatalf("exit %d, want %d; stderr: %s", code, c.want, errs)
			}
			if !strings.Contains(out+errs, c.out) {
				t.Fatalf("output lacks %q:\n%s%s", c.out, out, errs)
			}
		})
	}
}

func TestAnalyzeJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "storm.rec")
	writeAnalyzeRec(t, path, 50000)
	code, out, errs := analyzeCmd(t, "--json", path)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res attribution.Result
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("analyze --json is not a Result: %v\n%s", err, out)
	}
	if len(res.Findings) != 1 || res.Findings[0].Rule != "page-fault-storm" {
		t.Fatalf("findings %+v, want page-fault-storm", res.Findings)
	}
	// The raw document uses the documented snake_case names.
	for _, k := range []string{`"findings"`, `"not_evaluated"`, `"start_ns"`, `"end_ns"`, `"threshold"`, `"needs"`, `"reason"`} {
		if !strings.Contains(out, k) {
			t.Errorf("JSON lacks %s", k)
		}
	}
}

// TestAnalyzeEndToEnd records real loads on this host with the real
// recorder and checks what analyze finds (docs/ATTRIBUTION.md lists the
// numbers seen).
func TestAnalyzeEndToEnd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: cacheheat record loads BPF programs")
	}
	if testing.Short() {
		t.Skip("records for ~20 s; skipped with -short")
	}
	dir := t.TempDir()
	bin := cacheheatBinary(t)
	fresh := filepath.Join(dir, "freshmem")
	if out, err := exec.Command("go", "build", "-o", fresh, "../../attribution/testdata/freshmem").CombinedOutput(); err != nil {
		t.Fatalf("building freshmem: %v\n%s", err, out)
	}
	hardware := []string{"l1-bandwidth-contention", "l3-writeback-congestion", "llc-thrashing", "remote-numa", "dtlb-pressure", "false-sharing"}
	for _, c := range []struct {
		name string
		cmd  []string
		// anyOf: at least one of these rules fires; none: no finding.
		anyOf []string
		none  bool
	}{
		{"rcu-bad-8-threads", []string{bin, "workload", "run", "rcu", "--variant", "bad", "-t", "8", "-d", "3s"}, []string{"lock-contention", "cpu-saturation"}, false},
		{"falseshare-bad-8-threads", []string{bin, "workload", "run", "falseshare", "--variant", "bad", "-t", "8", "-d", "3s"}, []string{"cpu-saturation"}, false},
		// One thread on one core is no hotspot, pinned or not (two
		// pinned threads are: TestGradeVerdicts).
		{"pinned-spin", []string{"taskset", "-c", "1", "timeout", "3", "sh", "-c", "while :; do :; done"}, nil, true},
		{"fresh-memory", []string{fresh, "3"}, []string{"page-fault-storm"}, false},
		{"idle-sleep", []string{"sleep", "3"}, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := filepath.Join(dir, c.name+".rec")
			args := append([]string{"record", "-q", "-o", rec, "--"}, c.cmd...)
			if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
				t.Fatalf("cacheheat %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			out, err := exec.Command(bin, "analyze", "--json", rec).Output()
			if err != nil {
				t.Fatalf("analyze: %v", err)
			}
			var res attribution.Result
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatal(err)
			}
			text, _ := exec.Command(bin, "analyze", rec).Output()
			t.Logf("analyze %s:\n%s", c.name, text)
			fired := map[string]bool{}
			for _, f := range res.Findings {
				fired[f.Rule] = true
			}
			// A finding about other processes (noisy-neighbour) says
			// what the shared host did, not the target: allowed anywhere.
			if c.none {
				for r := range fired {
					if !aboutOthers[r] {
						t.Errorf("want no finding about the target, got %v", fired)
						break
					}
				}
			}
			if len(c.anyOf) > 0 {
				ok := false
				for _, r := range c.anyOf {
					ok = ok || fired[r]
				}
				if !ok {
					t.Errorf("want one of %v, got %v", c.anyOf, fired)
				}
			}
			sum, err := profile.ReadFile(rec)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Header.Host.Mode != "software" {
				return // a PMU host evaluates the hardware rules
			}
			ne := map[string]string{}
			for _, n := range res.NotEvaluated {
				ne[n.Rule] = n.Reason
			}
			for _, r := range hardware {
				if !strings.Contains(ne[r], "unsupported on this host: ") {
					t.Errorf("%s: want not evaluated with the host's reason, got %q", r, ne[r])
				}
			}
		})
	}
}

// TestAnalyzeMetrics: --metrics prints the numbers the rules read, here
// the page-fault rate the page-fault-storm rule compares with its floor.
func TestAnalyzeMetrics(t *testing.T) {
	path := filepath.Join(t.TempDir(), "storm.rec")
	writeAnalyzeRec(t, path, 50000)
	code, out, errs := analyzeCmd(t, "--metrics", path)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"duration 3.00s windows 3", "page-faults       total 150000 rate 50000.0/s", "window   2.0s"} {
		if !strings.Contains(out, want) {
			t.Errorf("--metrics output lacks %q:\n%s", want, out)
		}
	}
}
