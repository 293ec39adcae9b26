package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/collector"
	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/profile"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// fixtureCaps builds the caps of a fixture host from package host's
// fixture trees, with event statuses given by status: the text layout is
// tested without depending on the machine the test runs on.
func fixtureCaps(t *testing.T, name string, status func(host.CPUInfo, collector.Event) profile.EventStatus) collector.Caps {
	t.Helper()
	root := filepath.Join("..", "..", "host", "testdata", "hosts", name)
	h, err := host.Detect(root)
	if err != nil {
		t.Fatal(err)
	}
	cpu, err := host.ReadCPUInfo(root)
	if err != nil {
		t.Fatal(err)
	}
	paranoid := 2
	c := collector.Caps{
		Hostname: h.Hostname, Kernel: h.Kernel, BTF: true, Root: true,
		CapSysAdmin: true, CapBPF: true, CapPerfmon: true,
		PerfEventParanoid: &paranoid, Lockdown: "none",
		BPFLoad: collector.BPFLoad{OK: true}, CPU: cpu, Topology: h.Topology,
	}
	entries, err := os.ReadDir(filepath.Join(root, "sys", "bus", "event_source", "devices"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		c.PMUs = append(c.PMUs, e.Name())
	}
	c.Catalogue = collector.Catalogue(cpu)
	for _, ev := range c.Catalogue {
		c.Events = append(c.Events, status(cpu, ev))
	}
	c.Conclude()
	return c
}

func noPMU(_ host.CPUInfo, ev collector.Event) profile.EventStatus {
	st := profile.EventStatus{Name: ev.Name, Kind: ev.Kind, Status: profile.StatusMeasured}
	if ev.IsHardware() {
		st.Status, st.Errno, st.Reason = profile.StatusUnsupported, "ENOENT", collector.ReasonNoPMU
	}
	return st
}

// withPMU is what a PMU of cpu's model answers: every event measured but
// the generic ones its kernel driver maps no encoding for (ENOENT), by the
// kernel's tables (collector.KernelMapsGeneric): LLC-* and node-* on Zen,
// none on Intel, whose tables map node events on client and server parts.
func withPMU(cpu host.CPUInfo, ev collector.Event) profile.EventStatus {
	st := profile.EventStatus{Name: ev.Name, Kind: ev.Kind, Status: profile.StatusMeasured}
	if ev.Kind != collector.KindRaw && ev.IsHardware() && !collector.KernelMapsGeneric(cpu, ev.Name) {
		st.Status, st.Errno, st.Reason = profile.StatusUnsupported, "ENOENT", collector.ReasonNoSuchEvent
	}
	return st
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run Caps -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (go test -run Caps -update to accept):\n%s", path, got)
	}
}

func TestCapsTextGolden(t *testing.T) {
	for _, tc := range []struct {
		host   string
		status func(host.CPUInfo, collector.Event) profile.EventStatus
	}{
		{"vm2", noPMU},
		{"epyc-nps4", withPMU},
		{"intel2s", withPMU},
		{"offline", withPMU},
	} {
		var b bytes.Buffer
		writeCaps(&b, fixtureCaps(t, tc.host, tc.status))
		checkGolden(t, "caps-"+tc.host+".golden", b.Bytes())

		// The structure scripts and people rely on: the sections in
		// order, every catalogue event named, the verdict last.
		out := b.String()
		last := -1
		for _, s := range []string{"Kernel & privileges\n", "\nBPF\n", "\nCPU\n", "\nTopology\n", "\nEvents\n", "\nVerdict\n"} {
			i := strings.Index(out, s)
			if i < 0 || i < last {
				t.Errorf("%s: section %q missing or out of order", tc.host, strings.TrimSpace(s))
			}
			last = i
		}
		for _, name := range collector.EventNames() {
			if !strings.Contains(out, "  "+name+" ") {
				t.Errorf("%s: event %s not listed", tc.host, name)
			}
		}
	}
}

func TestCapsVerdicts(t *testing.T) {
	vm := fixtureCaps(t, "vm2", noPMU)
	if vm.Mode != "software" || vm.Verdict != "software mode (no PMU): cache events are unavailable; software events and latency histograms are available" {
		t.Errorf("vm2: mode %q verdict %q", vm.Mode, vm.Verdict)
	}
	epyc := fixtureCaps(t, "epyc-nps4", withPMU)
	if epyc.Mode != "hardware" || !strings.HasPrefix(epyc.Verdict, "hardware mode") {
		t.Errorf("epyc: mode %q verdict %q", epyc.Mode, epyc.Verdict)
	}
	denied := fixtureCaps(t, "intel2s", func(cpu host.CPUInfo, ev collector.Event) profile.EventStatus {
		st := noPMU(cpu, ev)
		if ev.IsHardware() {
			st.Status, st.Errno, st.Reason = profile.StatusDenied, "EACCES", "run as root or grant CAP_PERFMON; perf_event_paranoid is 2"
		}
		return st
	})
	if denied.Mode != "software" || !strings.Contains(denied.Verdict, "this host has a PMU, but hardware events are denied") {
		t.Errorf("denied: mode %q verdict %q", denied.Mode, denied.Verdict)
	}
	// An unprivileged user on the VM: nothing opens, BPF is refused.
	user := fixtureCaps(t, "vm2", func(cpu host.CPUInfo, ev collector.Event) profile.EventStatus {
		return profile.EventStatus{Name: ev.Name, Kind: ev.Kind, Status: profile.StatusDenied, Errno: "EACCES", Reason: "run as root or grant CAP_PERFMON; perf_event_paranoid is 2"}
	})
	user.BPFLoad = collector.BPFLoad{Error: "load program: operation not permitted"}
	user.Conclude()
	want := "software mode (no PMU): cache events are unavailable; software events are denied too (run as root or grant CAP_PERFMON); BPF programs cannot be loaded (run as root or grant CAP_BPF and CAP_PERFMON), so record cannot run here"
	if user.Verdict != want {
		t.Errorf("unprivileged verdict:\n got  %q\n want %q", user.Verdict, want)
	}
}

// TestCapsCommand runs the real command on this host: exit 0 in any mode,
// and --json is valid JSON naming every event with status and reason.
func TestCapsCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"caps", "--json"}, &out, &errb); code != exitOK {
		t.Fatalf("caps --json exit %d, stderr %s", code, errb.String())
	}
	var got struct {
		Mode    string                `json:"mode"`
		Verdict string                `json:"verdict"`
		Events  []profile.EventStatus `json:"events"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("caps --json is not JSON: %v\n%s", err, out.String())
	}
	cpu, err := collector.LiveCPU()
	if err != nil {
		t.Fatal(err)
	}
	// The generic catalogue plus this model's vendor events.
	if len(got.Events) != len(collector.ModelCatalogue(cpu)) || got.Verdict == "" {
		t.Errorf("caps --json: %d events, verdict %q", len(got.Events), got.Verdict)
	}
	for _, e := range got.Events {
		if e.Name == "" || e.Status == "" || (e.Status != profile.StatusMeasured && e.Reason == "") {
			t.Errorf("event without name, status or reason: %+v", e)
		}
	}
	out.Reset()
	if code := run([]string{"caps"}, &out, &errb); code != exitOK {
		t.Fatalf("caps exit %d", code)
	}
	if !strings.Contains(out.String(), got.Verdict) {
		t.Errorf("text output lacks the verdict %q", got.Verdict)
	}
	if code := run([]string{"caps", "extra"}, &out, &errb); code != exitUsage {
		t.Errorf("caps with an argument: exit %d, want %d", code, exitUsage)
	}
}
