package host

import (
	"os"
	"path/filepath"
	"slices"

	"github.com/cacheheat/cacheheat/profile"
)

// Detect describes the host at root for a recording header: its name,
// kernel, CPU model (root/proc/cpuinfo) and topology. Mode is left for
// the caller to set from its probes of the PMU.
func Detect(root string) (profile.Host, error) {
	cpu, err := ReadCPUInfo(root)
	if err != nil {
		return profile.Host{}, err
	}
	return Describe(root, cpu)
}

// Describe is Detect with the CPU identity given, for a caller that knows
// it better than /proc/cpuinfo: the recorder under a simulated PMU names
// the simulated model. The topology is always the one under root.
func Describe(root string, cpu CPUInfo) (profile.Host, error) {
	var h profile.Host
	topo, err := DetectTopology(root)
	if err != nil {
		return h, err
	}
	h.Hostname = Hostname(root)
	h.Kernel, _ = Kernel(root)
	h.CPUModel, h.Vendor, h.Family, h.Model, h.Stepping = cpu.ModelName, cpu.Vendor, cpu.Family, cpu.Model, cpu.Stepping
	h.Topology = topo
	return h, nil
}

// DetectTopology is ReadTopology plus, on the running host (root "/")
// only, caches decoded from CPUID when sysfs lists none (many VMs):
// fixture roots describe another machine, whose caches this CPU cannot
// tell.
func DetectTopology(root string) (profile.Topology, error) {
	topo, err := ReadTopology(root)
	if err != nil || filepath.Clean(root) != "/" || len(topo.Caches) > 0 {
		return topo, err
	}
	if caches := cachesFromCPUID(topo.CPUs); len(caches) > 0 {
		topo.Caches = caches
		for i := range topo.CPUs {
			for _, c := range caches {
				if c.Level == 3 && slices.Contains(c.SharedCPUs, topo.CPUs[i].ID) {
					topo.CPUs[i].L3 = c.ID
				}
			}
		}
	}
	return topo, nil
}

// Hostname is the host name under root (kernel.hostname), or on the
// running host what uname says when procfs does not; "" when unknown.
func Hostname(root string) string {
	if s, err := readString(filepath.Join(root, "proc", "sys", "kernel", "hostname")); err == nil {
		return s
	}
	if root == "/" {
		s, _ := os.Hostname()
		return s
	}
	return ""
}

// Kernel is the kernel release under root (kernel.osrelease).
func Kernel(root string) (string, error) {
	return readString(filepath.Join(root, "proc", "sys", "kernel", "osrelease"))
}
