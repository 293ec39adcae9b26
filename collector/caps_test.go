package collector

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cacheheat/cacheheat/internal/testfs"
	"github.com/cacheheat/cacheheat/profile"
)

// fixture returns the root of a fixture host of package host
// (host/testdata/hosts/README.md describes them).
func fixture(name string) string { return filepath.Join("..", "host", "testdata", "hosts", name) }

func TestReadPrivilegesFixture(t *testing.T) {
	var c Caps
	if err := c.readPrivileges(fixture("vm2")); err != nil {
		t.Fatal(err)
	}
	if !c.Root || !c.CapBPF || !c.CapPerfmon || !c.CapSysAdmin {
		t.Errorf("vm2 runs as root with every capability; got %+v", c)
	}
	dir := t.TempDir()
	// An unprivileged user: uid 1000, no capabilities.
	testfs.WriteFile(t, dir, "proc/self/status", "Name:\tcacheheat\nUid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000000000\n")
	c = Caps{}
	if err := c.readPrivileges(dir); err != nil {
		t.Fatal(err)
	}
	if c.Root || c.CapBPF || c.CapPerfmon {
		t.Errorf("unprivileged status read as %+v", c)
	}
	// CAP_BPF and CAP_PERFMON only (bits 39 and 38).
	testfs.WriteFile(t, dir, "proc/self/status", "Uid:\t1000\t1000\t1000\t1000\nCapEff:\t000000c000000000\n")
	c = Caps{}
	if err := c.readPrivileges(dir); err != nil {
		t.Fatal(err)
	}
	if c.Root || !c.CapBPF || !c.CapPerfmon || c.CapSysAdmin {
		t.Errorf("CAP_BPF+CAP_PERFMON read as %+v", c)
	}
}

func TestReadLockdown(t *testing.T) {
	dir := t.TempDir()
	if got := readLockdown(dir); got != "unknown" {
		t.Errorf("no lockdown file: %q, want unknown", got)
	}
	testfs.WriteFile(t, dir, "sys/kernel/security/lockdown", "none [integrity] confidentiality\n")
	if got := readLockdown(dir); got != "integrity" {
		t.Errorf("lockdown = %q, want integrity", got)
	}
}

// TestDetectCapsThisHost runs the whole detection on the running kernel
// and checks what must hold on any host, and this project's VM verdict
// when the host has no PMU.
func TestDetectCapsThisHost(t *testing.T) {
	needRoot(t)
	c := DetectCaps("/")
	if !c.BPFLoad.OK {
		t.Errorf("BPF load failed as root: %s", c.BPFLoad.Error)
	}
	if !c.Root {
		t.Error("running as root, caps says not root")
	}
	// One status per event of this CPU's catalogue: the generic events,
	// and the vendor events of its model where cacheheat has a table.
	if want := len(ModelCatalogue(c.CPU)); len(c.Events) != want || want < len(designEvents) {
		t.Errorf("%d event statuses, want one per catalogue event of %s family %d model %d (%d, at least the %d generic ones)",
			len(c.Events), c.CPU.Vendor, c.CPU.Family, c.CPU.Model, want, len(designEvents))
	}
	for _, e := range c.Events {
		if e.Status != profile.StatusMeasured && e.Reason == "" {
			t.Errorf("event %s is %s without a reason", e.Name, e.Status)
		}
		if e.Kind == KindSoftware && e.Status != profile.StatusMeasured {
			t.Errorf("software event %s as root: %+v", e.Name, e)
		}
	}
	if !HasCorePMU() {
		if c.Mode != ModeSoftware || !strings.HasPrefix(c.Verdict, "software mode (no PMU)") {
			t.Errorf("mode %q verdict %q on a host without a PMU", c.Mode, c.Verdict)
		}
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"kernel"`, `"btf"`, `"cap_bpf"`, `"cap_perfmon"`, `"perf_event_paranoid"`, `"lockdown"`, `"bpf_load"`, `"events"`, `"verdict"`, `"topology"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("caps JSON lacks %s", key)
		}
	}
}
