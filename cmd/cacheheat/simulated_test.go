package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/collector"
	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/profile"
)

// runBin runs the binary with env added and returns its stdout; a non-zero
// exit fails the test.
func runBin(t *testing.T, env []string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(cacheheatBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cacheheat %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

type inspectDoc struct {
	Mode   string       `json:"mode"`
	PMU    *profile.PMU `json:"pmu"`
	Events []struct {
		Name      string  `json:"name"`
		Kind      string  `json:"kind"`
		Status    string  `json:"status"`
		Simulated bool    `json:"simulated"`
		Scaling   float64 `json:"scaling"`
	} `json:"events"`
}

type analyzeDoc struct {
	Warning  string `json:"warning"`
	Findings []struct {
		Rule    string `json:"rule"`
		Warning string `json:"warning"`
	} `json:"findings"`
	NotEvaluated []struct {
		Rule string `json:"rule"`
	} `json:"not_evaluated"`
}

// TestSimulatedPMUEndToEnd is the hardware path on this host, as a user
// runs it: record the false-sharing workload with the default events on a
// simulated PMU, then inspect, analyze and report it. Everything must say
// simulated, the fixture's HITM event must be measured, and false-sharing
// must be evaluated.
func TestSimulatedPMUEndToEnd(t *testing.T) {
	needRoot(t)
	bin := cacheheatBinary(t)
	for _, tc := range []struct{ pmu, c2c string }{
		{"intel-icx", "mem_load_l3_hit_retired.xsnp_fwd"},
		{"amd-zen4", "ls_dmnd_fills_from_sys."},
	} {
		t.Run(tc.pmu, func(t *testing.T) {
			env := []string{collector.EnvSimulatedPMU + "=" + tc.pmu}
			dir := t.TempDir()
			rec := filepath.Join(dir, "r.rec")
			runBin(t, env, "record", "-q", "-o", rec, "--", bin, "workload", "run", "falseshare", "-t", "2", "-d", "2s")

			var ins inspectDoc
			if err := json.Unmarshal(runBin(t, nil, "inspect", "--json", rec), &ins); err != nil {
				t.Fatal(err)
			}
			if ins.PMU == nil || ins.PMU.Simulated != tc.pmu {
				t.Errorf("inspect pmu %+v, want simulated %s", ins.PMU, tc.pmu)
			}
			var hw []string
			for _, e := range ins.Events {
				if e.Kind != "software" && e.Status == profile.StatusMeasured && e.Simulated {
					hw = append(hw, e.Name)
				}
			}
			c2c := slices.IndexFunc(hw, func(n string) bool { return strings.HasPrefix(n, tc.c2c) })
			if len(hw) < 10 || c2c < 0 {
				t.Errorf("measured simulated hardware events %v: want at least 10 including %s*", hw, tc.c2c)
			}

			var an analyzeDoc
			if err := json.Unmarshal(runBin(t, nil, "analyze", "--json", rec), &an); err != nil {
				t.Fatal(err)
			}
			if an.Warning != profile.SimulatedWarning {
				t.Errorf("analyze warning %q", an.Warning)
			}
			for _, ne := range an.NotEvaluated {
				if ne.Rule == "false-sharing" {
					t.Error("false-sharing not evaluated on a simulated PMU with HITM events")
				}
			}
			hardware := map[string]bool{"l1-bandwidth-contention": true, "l3-writeback-congestion": true, "llc-thrashing": true,
				"remote-numa": true, "dtlb-pressure": true, "false-sharing": true}
			for _, f := range an.Findings {
				if hardware[f.Rule] && f.Warning != profile.SimulatedWarning {
					t.Errorf("hardware finding %s without the simulated warning", f.Rule)
				}
			}
			text := string(runBin(t, nil, "analyze", rec))
			if !strings.HasPrefix(text, profile.SimulatedWarning) {
				t.Errorf("analyze text does not start with the warning:\n%s", text)
			}

			html := filepath.Join(dir, "r.html")
			runBin(t, nil, "report", rec, "-o", html)
			page, err := os.ReadFile(html)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(page), `<p class="sim-banner" role="alert">`+profile.SimulatedWarning) {
				t.Error("the report has no simulated-PMU banner")
			}
		})
	}
}

// TestSimulated24Events: -e with 24 events on Ice Lake-SP's 8 counters
// records, and inspect and the report give each event its scaling factor.
func TestSimulated24Events(t *testing.T) {
	needRoot(t)
	bin := cacheheatBinary(t)
	env := []string{collector.EnvSimulatedPMU + "=intel-icx"}
	t.Setenv(collector.EnvSimulatedPMU, "intel-icx")
	cpu, err := collector.LiveCPU()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range collector.ModelCatalogue(cpu) {
		if e.IsHardware() && e.Missing == "" && len(names) < 24 {
			names = append(names, e.Name)
		}
	}
	if len(names) != 24 {
		t.Fatalf("%d hardware events on intel-icx, want 24", len(names))
	}
	dir := t.TempDir()
	rec := filepath.Join(dir, "r.rec")
	runBin(t, env, "record", "-q", "-e", strings.Join(names, ","), "-o", rec, "--", bin, "workload", "run", "falseshare", "-t", "2", "-d", "1s")
	var ins inspectDoc
	if err := json.Unmarshal(runBin(t, nil, "inspect", "--json", rec), &ins); err != nil {
		t.Fatal(err)
	}
	if len(ins.Events) != 24 {
		t.Errorf("%d events in the recording, want 24", len(ins.Events))
	}
	scaled := 0
	for _, e := range ins.Events {
		if e.Status != profile.StatusMeasured || e.Scaling < 1 {
			t.Errorf("%s: status %s scaling %v; want measured with a scaling factor", e.Name, e.Status, e.Scaling)
		}
		if e.Scaling > 1.01 {
			scaled++
		}
	}
	if scaled == 0 {
		t.Error("no event was scaled: 22 events on 8 counters must multiplex")
	}
	html := filepath.Join(dir, "r.html")
	runBin(t, nil, "report", rec, "-o", html)
	page, _ := os.ReadFile(html)
	if !strings.Contains(string(page), "(scaled)") {
		t.Error("the report's event table shows no scaling")
	}
}

// TestNotSimulatedByDefault: without the variable this host records in
// software mode and nothing says simulated.
func TestNotSimulatedByDefault(t *testing.T) {
	needRoot(t)
	bin := cacheheatBinary(t)
	env := []string{collector.EnvSimulatedPMU + "="}
	dir := t.TempDir()
	rec := filepath.Join(dir, "r.rec")
	runBin(t, env, "record", "-q", "-o", rec, "--", bin, "workload", "run", "falseshare", "-t", "2", "-d", "1s")
	out := runBin(t, nil, "inspect", "--json", rec)
	var ins inspectDoc
	if err := json.Unmarshal(out, &ins); err != nil {
		t.Fatal(err)
	}
	if ins.PMU != nil || strings.Contains(string(out), "simulated") {
		t.Errorf("a recording without %s says simulated: pmu %+v", collector.EnvSimulatedPMU, ins.PMU)
	}
	if !collector.HasCorePMU() && ins.Mode != collector.ModeSoftware {
		t.Errorf("mode %q on a host without a PMU, want software", ins.Mode)
	}
	html := filepath.Join(dir, "r.html")
	runBin(t, nil, "report", rec, "-o", html)
	if page, _ := os.ReadFile(html); strings.Contains(string(page), "sim-banner") {
		t.Error("the report of a real recording has the simulated banner")
	}
}

// TestSimulatedCaps: caps on a simulated PMU reports the fixture's CPU and
// its events as measured by stand-ins, this host's topology, and says
// SIMULATED in its verdict; an unknown fixture is a usage error.
func TestSimulatedCaps(t *testing.T) {
	needRoot(t)
	var caps struct {
		CPU      host.CPUInfo          `json:"cpu"`
		PMU      *profile.PMU          `json:"pmu"`
		Events   []profile.EventStatus `json:"events"`
		Verdict  string                `json:"verdict"`
		Topology profile.Topology      `json:"topology"`
		BPFLoad  collector.BPFLoad     `json:"bpf_load"`
		Mux      string                `json:"multiplexing"`
	}
	out := runBin(t, []string{collector.EnvSimulatedPMU + "=intel-icx"}, "caps", "--json")
	if err := json.Unmarshal(out, &caps); err != nil {
		t.Fatal(err)
	}
	if caps.CPU.Model != 0x6a || caps.CPU.Simulated != "intel-icx" || caps.PMU == nil || caps.PMU.Counters != 8 {
		t.Errorf("cpu %+v pmu %+v, want the Ice Lake-SP fixture", caps.CPU, caps.PMU)
	}
	if !strings.HasPrefix(caps.Verdict, profile.SimulatedWarning) {
		t.Errorf("verdict %q does not start with the simulated warning", caps.Verdict)
	}
	// Ice Lake-SP's l2-misses and xsnp_fwd count on counters 0-3 only
	// (perfmon), and caps says how the defaults are scheduled.
	if want := "10 default events rotate over 8 counters (2 on counters 0,1,2,3 only)"; !strings.Contains(caps.Mux, want) {
		t.Errorf("multiplexing %q, want %q", caps.Mux, want)
	}
	if !caps.BPFLoad.OK {
		t.Errorf("cacheheat's BPF object did not load: %s", caps.BPFLoad.Error)
	}
	real, err := host.ReadTopology("/")
	if err != nil {
		t.Fatal(err)
	}
	if len(caps.Topology.CPUs) != len(real.CPUs) {
		t.Errorf("caps shows %d CPUs, this host has %d: the topology must stay the real one", len(caps.Topology.CPUs), len(real.CPUs))
	}
	measured := map[string]bool{}
	for _, e := range caps.Events {
		if e.Kind != collector.KindSoftware && e.Status == profile.StatusMeasured {
			if !e.Simulated {
				t.Errorf("%s measured without a stand-in", e.Name)
			}
			measured[e.Name] = true
		}
	}
	for _, want := range []string{"instructions", "LLC-load-misses", "mem_load_l3_hit_retired.xsnp_fwd", "mem_load_l3_miss_retired.remote_dram"} {
		if !measured[want] {
			t.Errorf("caps does not list %s as measured (simulated)", want)
		}
	}

	cmd := exec.Command(cacheheatBinary(t), "caps")
	cmd.Env = append(os.Environ(), collector.EnvSimulatedPMU+"=intel-nope")
	if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != exitUsage {
		t.Errorf("caps with an unknown fixture: %v, want exit %d", err, exitUsage)
	}
}
