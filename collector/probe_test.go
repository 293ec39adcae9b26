package collector

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/profile"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: CPU-wide perf events and BPF loading are privileged")
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// TestProbeThisHost opens real perf events on the running kernel. On a
// host without a PMU (this project's build VMs) cycles must come back
// unsupported with the no-PMU reason; with one, measured.
func TestProbeThisHost(t *testing.T) {
	needRoot(t)
	before := openFDs(t)

	clock, _ := LookupEvent("cpu-clock", host.CPUInfo{})
	if st := ProbeEvent(clock); st.Status != profile.StatusMeasured || st.Reason != "" {
		t.Errorf("cpu-clock: %+v, want measured", st)
	}
	cycles, _ := LookupEvent("cycles", host.CPUInfo{})
	st := ProbeEvent(cycles)
	if HasCorePMU() {
		if st.Status != profile.StatusMeasured {
			t.Errorf("cycles on a host with a core PMU: %+v, want measured", st)
		}
	} else {
		if st.Status != profile.StatusUnsupported || st.Errno != "ENOENT" || st.Reason != ReasonNoPMU {
			t.Errorf("cycles without a PMU: %+v, want unsupported, ENOENT, %q", st, ReasonNoPMU)
		}
	}
	if after := openFDs(t); after != before {
		t.Errorf("probing leaked file descriptors: %d open before, %d after", before, after)
	}
}

func TestHostMode(t *testing.T) {
	sw := []profile.EventStatus{
		{Name: "cpu-clock", Kind: KindSoftware, Status: profile.StatusMeasured},
		{Name: "cycles", Kind: KindHardware, Status: profile.StatusUnsupported},
	}
	if got := HostMode(sw); got != ModeSoftware {
		t.Errorf("HostMode(only software measured) = %q", got)
	}
	hw := append(sw, profile.EventStatus{Name: "LLC-load-misses", Kind: KindCache, Status: profile.StatusMeasured})
	if got := HostMode(hw); got != ModeHardware {
		t.Errorf("HostMode(a cache event measured) = %q", got)
	}
}

func TestClassifyOpenError(t *testing.T) {
	cycles, _ := LookupEvent("cycles", host.CPUInfo{})
	for _, tc := range []struct {
		err    error
		status string
		errno  string
	}{
		{unix.EACCES, profile.StatusDenied, "EACCES"},
		{unix.EPERM, profile.StatusDenied, "EPERM"},
		{unix.ENOENT, profile.StatusUnsupported, "ENOENT"},
		{unix.EOPNOTSUPP, profile.StatusUnsupported, "EOPNOTSUPP"},
		{unix.ENODEV, profile.StatusUnsupported, "ENODEV"},
		{unix.EINVAL, profile.StatusUnsupported, "EINVAL"},
	} {
		st := ClassifyOpenError(cycles, tc.err)
		if st.Status != tc.status || st.Errno != tc.errno || st.Reason == "" {
			t.Errorf("%v: %+v, want %s with errno %s and a reason", tc.err, st, tc.status, tc.errno)
		}
	}
	if st := ClassifyOpenError(cycles, unix.EACCES); st.Reason == "" || !strings.Contains(st.Reason, "CAP_PERFMON") {
		t.Errorf("denied reason %q does not say how to fix it", st.Reason)
	}
}

func TestHasCorePMUFixtures(t *testing.T) {
	for host, want := range map[string]bool{"vm2": false, "intel2s": true, "epyc-nps4": true, "offline": true} {
		pmus, err := readPMUs(fixture(host))
		if err != nil {
			t.Fatal(err)
		}
		if got := hasCorePMU(pmus); got != want {
			t.Errorf("%s (PMUs %v): hasCorePMU = %v, want %v", host, pmus, got, want)
		}
	}
}
