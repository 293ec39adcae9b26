package collector

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/cacheheat/cacheheat/bpf"
	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/profile"
)

// Host modes (profile.Host.Mode).
const (
	ModeHardware = "hardware"
	ModeSoftware = "software"
)

// Capability bits of CapEff (linux/capability.h).
const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// Caps is what this host can do for cacheheat, and why not.
type Caps struct {
	Hostname string `json:"hostname"`
	Kernel   string `json:"kernel"`
	// BTF says whether the kernel exposes its type information
	// (/sys/kernel/btf/vmlinux), which the BPF programs need.
	BTF         bool `json:"btf"`
	Root        bool `json:"root"` // effective uid 0
	CapSysAdmin bool `json:"cap_sys_admin"`
	CapBPF      bool `json:"cap_bpf"`
	CapPerfmon  bool `json:"cap_perfmon"`
	// PerfEventParanoid is kernel.perf_event_paranoid; nil when unreadable.
	PerfEventParanoid *int `json:"perf_event_paranoid"`
	// Lockdown is the kernel lockdown mode ("none", "integrity",
	// "confidentiality"), or "unknown" when the kernel does not say.
	Lockdown string `json:"lockdown"`
	// BPFLoad is the outcome of really loading cacheheat's BPF object.
	BPFLoad BPFLoad `json:"bpf_load"`
	// PMU is set when the events are a simulated PMU's stand-ins
	// (CACHEHEAT_SIMULATED_PMU).
	PMU *profile.PMU `json:"pmu,omitempty"`
	// Multiplexing says how a simulated PMU schedules the default
	// events: whether they fit its counters at once, the events' counter
	// masks honoured, or how many rotate and which are constrained. Empty
	// on a real PMU, whose kernel does the scheduling.
	Multiplexing string       `json:"multiplexing,omitempty"`
	CPU          host.CPUInfo `json:"cpu"`
	// PMUs are the kernel's perf event sources (event_source/devices).
	PMUs     []string              `json:"pmus"`
	Topology profile.Topology      `json:"topology"`
	Events   []profile.EventStatus `json:"events"`
	// Catalogue holds the encoding of each event in Events, in the same
	// order, with the source of each raw vendor encoding.
	Catalogue []Event `json:"catalogue"`
	Mode      string  `json:"mode"` // ModeHardware or ModeSoftware
	Verdict   string  `json:"verdict"`
	// Warnings are things caps could not find out; the rest still holds.
	Warnings []string `json:"warnings,omitempty"`
}

// BPFLoad is the result of the BPF load test.
type BPFLoad struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// hostCPU is the CPU of the host at root: on the running host (root "/")
// the simulated PMU's when CACHEHEAT_SIMULATED_PMU is set.
func hostCPU(root string) (host.CPUInfo, error) {
	if filepath.Clean(root) == "/" {
		return LiveCPU()
	}
	return host.ReadCPUInfo(root)
}

// DetectCaps finds out what this host can do. It reads procfs and sysfs
// under root, and really loads a BPF program and opens each catalogue
// event on the running kernel: the answers come from the kernel, not from
// guesses. What cannot be read goes into Warnings.
func DetectCaps(root string) Caps {
	var c Caps
	warn := func(err error) { c.Warnings = append(c.Warnings, err.Error()) }

	c.Hostname = host.Hostname(root)
	var err error
	if c.Kernel, err = host.Kernel(root); err != nil {
		warn(err)
	}
	_, err = os.Stat(filepath.Join(root, "sys", "kernel", "btf", "vmlinux"))
	c.BTF = err == nil
	if err := c.readPrivileges(root); err != nil {
		warn(err)
	}
	if n, err := readParanoid(root); err == nil {
		c.PerfEventParanoid = &n
	} else {
		warn(err)
	}
	c.Lockdown = readLockdown(root)
	c.BPFLoad = LoadBPFObject()
	if c.CPU, err = hostCPU(root); err != nil {
		warn(err)
	}
	if c.PMUs, err = readPMUs(root); err != nil {
		warn(err)
	}
	if c.Topology, err = host.DetectTopology(root); err != nil {
		warn(err)
	}
	c.Catalogue = ModelCatalogue(c.CPU)
	c.PMU = SimulatedPMU(c.CPU)
	if c.PMU != nil {
		c.Multiplexing = muxText(DefaultEvents(c.CPU), c.CPU)
	}
	c.Events = ProbeEvents(c.Catalogue)
	c.Conclude()
	return c
}

// Conclude sets Mode and Verdict from the probed events and the BPF and
// BTF results.
func (c *Caps) Conclude() {
	c.Mode = HostMode(c.Events)
	c.Verdict = verdict(*c)
}

// readPrivileges reads the effective uid and capabilities of this process
// from root/proc/self/status.
func (c *Caps) readPrivileges(root string) error {
	path := filepath.Join(root, "proc", "self", "status")
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading privileges: %w", err)
	}
	var haveUID, haveCaps bool
	for _, line := range strings.Split(string(b), "\n") {
		key, val, _ := strings.Cut(line, ":")
		fields := strings.Fields(val)
		switch {
		case key == "Uid" && len(fields) >= 2:
			c.Root, haveUID = fields[1] == "0", true
		case key == "CapEff" && len(fields) == 1:
			eff, err := strconv.ParseUint(fields[0], 16, 64)
			if err != nil {
				return fmt.Errorf("parsing CapEff in %s: %w", path, err)
			}
			c.CapSysAdmin = eff&(1<<capSysAdmin) != 0
			c.CapPerfmon = eff&(1<<capPerfmon) != 0
			c.CapBPF = eff&(1<<capBPF) != 0
			haveCaps = true
		}
	}
	if !haveUID || !haveCaps {
		return fmt.Errorf("reading privileges: no Uid or CapEff line in %s", path)
	}
	return nil
}

// readLockdown returns the selected mode of
// root/sys/kernel/security/lockdown ("none [integrity] confidentiality").
func readLockdown(root string) string {
	b, err := os.ReadFile(filepath.Join(root, "sys", "kernel", "security", "lockdown"))
	if err != nil {
		return "unknown"
	}
	s := strings.TrimSpace(string(b))
	for _, f := range strings.Fields(s) {
		if strings.HasPrefix(f, "[") && strings.HasSuffix(f, "]") {
			return strings.Trim(f, "[]")
		}
	}
	return s
}

// readParanoid reads kernel.perf_event_paranoid, which decides what an
// unprivileged user may count.
func readParanoid(root string) (int, error) {
	path := filepath.Join(root, "proc", "sys", "kernel", "perf_event_paranoid")
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading perf_event_paranoid: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("parsing %s: %w", path, err)
	}
	return n, nil
}

// readPMUs lists the perf event sources the kernel registered.
func readPMUs(root string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(root, "sys", "bus", "event_source", "devices"))
	if err != nil {
		return nil, fmt.Errorf("reading perf event sources: %w", err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, nil
}

// LoadBPFObject loads cacheheat's own BPF object, the programs and maps
// record uses, and releases it again without attaching anything: what the
// kernel's verifier accepts here is what record will run. On failure the
// error names what was refused (the verifier's complaint, a missing map or
// program type, or privileges).
func LoadBPFObject() BPFLoad {
	spec, err := bpf.LoadCacheheat()
	if err != nil {
		return BPFLoad{Error: "reading the bpf object: " + err.Error()}
	}
	var objs bpf.CacheheatObjects
	err = spec.LoadAndAssign(&objs, nil)
	if err == nil {
		objs.Close()
		return BPFLoad{OK: true}
	}
	var ve *ebpf.VerifierError
	msg := err.Error()
	switch {
	case errors.As(err, &ve):
		msg = "the kernel's verifier refused cacheheat's programs: " + fmt.Sprintf("%v", ve)
	case errors.Is(err, ebpf.ErrNotSupported):
		msg = "this kernel lacks a BPF feature cacheheat needs: " + msg
	case errors.Is(err, os.ErrPermission):
		msg += " (run as root or grant CAP_BPF and CAP_PERFMON)"
	}
	return BPFLoad{Error: msg}
}

// verdict is the one line caps ends with. It names the mode, then what is
// missing and the fix, so an SRE can act on the line alone.
func verdict(c Caps) string {
	var hwDenied, swDenied, swMeasured bool
	for _, e := range c.Events {
		switch {
		case e.Kind != KindSoftware && e.Status == profile.StatusDenied:
			hwDenied = true
		case e.Kind == KindSoftware && e.Status == profile.StatusDenied:
			swDenied = true
		case e.Kind == KindSoftware && e.Status == profile.StatusMeasured:
			swMeasured = true
		}
	}
	var v string
	switch {
	case c.PMU != nil && c.PMU.Simulated != "":
		v = fmt.Sprintf("%s (%s, %s): hardware mode is simulated, every hardware event is a software counter standing in for it", profile.SimulatedWarning, c.PMU.Simulated, EnvSimulatedPMU)
	case c.Mode == ModeHardware:
		v = "hardware mode: cache events, software events and latency histograms are available"
	case hwDenied && hasCorePMU(c.PMUs):
		v = "software mode for now (this host has a PMU, but hardware events are denied: run as root or grant CAP_PERFMON): cache events are unavailable"
	case hasCorePMU(c.PMUs):
		v = "software mode (the PMU counts none of the cache events): cache events are unavailable"
	default:
		v = "software mode (no PMU): cache events are unavailable"
	}
	if c.Mode != ModeHardware && c.PMU == nil {
		switch {
		case swMeasured && !swDenied:
			v += "; software events and latency histograms are available"
		case swDenied:
			v += "; software events are denied too (run as root or grant CAP_PERFMON)"
		}
	}
	if !c.BPFLoad.OK {
		v += "; BPF programs cannot be loaded (run as root or grant CAP_BPF and CAP_PERFMON), so record cannot run here"
	} else if !c.BTF {
		v += "; the kernel has no BTF (/sys/kernel/btf/vmlinux), so the BPF programs cannot be loaded"
	}
	return v
}
