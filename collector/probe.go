package collector

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/profile"
)

// Plain reasons for unsupported and denied events, the same words in caps,
// the recording and the report.
const (
	ReasonNoPMU        = "no hardware PMU exposed (common in VMs and containers)"
	ReasonNoSuchEvent  = "this CPU has no such event"
	ReasonNotCountable = "the PMU cannot count this event in this mode"
	ReasonBadEncoding  = "the kernel rejected this encoding for this CPU"
	ReasonNoPMUDevice  = "no PMU handles this event type"
)

// ProbeEvent really opens ev as a CPU-wide counter on the first online CPU
// (pid -1, as record -a does), closes it, and classifies the outcome.
// Nothing is inferred from the CPU model: only the kernel's answer counts.
func ProbeEvent(ev Event) profile.EventStatus {
	st := profile.EventStatus{Name: ev.Name, Kind: ev.Kind}
	if ev.Missing == "" && ev.StandIn != nil {
		st.Simulated, st.StandIn = true, ev.StandIn.Name
	}
	if ev.Missing != "" {
		st.Status, st.Reason = profile.StatusUnsupported, ev.Missing
		return st
	}
	cpu := 0
	if online, err := host.OnlineCPUs("/"); err == nil && len(online) > 0 {
		cpu = online[0]
	}
	attr := ev.Attr()
	fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err == nil {
		unix.Close(fd)
		st.Status = profile.StatusMeasured
		return st
	}
	return ClassifyOpenError(ev, err)
}

// ProbeEvents probes each event in order.
func ProbeEvents(evs []Event) []profile.EventStatus {
	out := make([]profile.EventStatus, len(evs))
	for i, e := range evs {
		out[i] = ProbeEvent(e)
	}
	return out
}

// ClassifyOpenError turns a perf_event_open error for ev into a status
// with the errno's name and a reason an SRE can act on. record uses it for
// events that fail when opened for real.
func ClassifyOpenError(ev Event, err error) profile.EventStatus {
	st := profile.EventStatus{Name: ev.Name, Kind: ev.Kind, Status: profile.StatusUnsupported}
	if ev.StandIn != nil {
		st.Simulated, st.StandIn = true, ev.StandIn.Name
	}
	var errno unix.Errno
	if !errors.As(err, &errno) {
		st.Reason = err.Error()
		return st
	}
	st.Errno = errnoName(errno)
	switch errno {
	case unix.EACCES, unix.EPERM:
		st.Status = profile.StatusDenied
		st.Reason = fmt.Sprintf("run as root or grant CAP_PERFMON; perf_event_paranoid is %s", paranoidString("/"))
	case unix.ENOENT:
		st.Reason = ReasonNoSuchEvent
		if ev.IsHardware() && !HasCorePMU() {
			st.Reason = ReasonNoPMU
		}
	case unix.EOPNOTSUPP:
		st.Reason = ReasonNotCountable
		if ev.IsHardware() && !HasCorePMU() {
			st.Reason = ReasonNoPMU
		}
	case unix.ENODEV:
		st.Reason = ReasonNoPMUDevice
		if ev.IsHardware() && !HasCorePMU() {
			st.Reason = ReasonNoPMU
		}
	case unix.EINVAL:
		st.Reason = ReasonBadEncoding
	case unix.EMFILE, unix.ENFILE:
		st.Reason = "too many open files; raise the limit with ulimit -n"
	default:
		st.Reason = errno.Error()
	}
	return st
}

// corePMUPrefixes name the PMUs that count CPU events: "cpu" on x86,
// "cpu_core"/"cpu_atom" on hybrid Intel parts, armv8_* and similar on Arm.
var corePMUPrefixes = []string{"cpu", "armv", "arm_", "riscv"}

// HasCorePMU says whether the running kernel exposes a PMU for CPU
// events, by the names in /sys/bus/event_source/devices. (perf-utils'
// AvailablePMUs reads the same directory but leaks a file descriptor per
// PMU, so it is not used here.)
func HasCorePMU() bool {
	pmus, err := readPMUs("/")
	if err != nil {
		return true // cannot tell; do not claim there is no PMU
	}
	return hasCorePMU(pmus)
}

func hasCorePMU(pmus []string) bool {
	for _, name := range pmus {
		for _, p := range corePMUPrefixes {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
	}
	return false
}

// HostMode is "hardware" when any hardware, cache or raw event could be
// measured, and "software" otherwise.
func HostMode(statuses []profile.EventStatus) string {
	for _, s := range statuses {
		if s.Kind != KindSoftware && s.Status == profile.StatusMeasured {
			return "hardware"
		}
	}
	return "software"
}

func paranoidString(root string) string {
	b, err := os.ReadFile(filepath.Join(root, "proc", "sys", "kernel", "perf_event_paranoid"))
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// errnoName names errno as perf_event_open(2) documents it: Linux's
// EOPNOTSUPP and ENOTSUP are one number, and the man page says EOPNOTSUPP.
func errnoName(errno unix.Errno) string {
	if errno == unix.EOPNOTSUPP {
		return "EOPNOTSUPP"
	}
	return unix.ErrnoName(errno)
}
