package workloads

import (
	"slices"
	"sync"

	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/profile"
)

// Caches are the host's data cache sizes in bytes as seen from the first
// online CPU, and where they came from.
type Caches struct {
	L1d      int64  `json:"l1d"`
	L2       int64  `json:"l2"`
	L3       int64  `json:"l3"`
	LineSize int64  `json:"line_size"`
	Source   string `json:"source"`
}

// Fallbacks when the host reports no cache at all: a common x86 core.
const (
	fallbackL1d  = 32 << 10
	fallbackL2   = 1 << 20
	fallbackL3   = 32 << 20
	fallbackLine = 64
)

var (
	cachesOnce sync.Once
	hostCaches Caches
)

// HostCaches returns the caches package host finds on this host (sysfs,
// else CPUID on VMs that hide sysfs' cache directories, the same numbers
// `cacheheat caps` shows), with fallbacks for levels it cannot find.
func HostCaches() Caches {
	cachesOnce.Do(func() {
		topo, err := host.DetectTopology("/")
		hostCaches = fromTopology(topo.CPUs, topo.Caches)
		if err != nil {
			hostCaches.Source = "fallback (" + err.Error() + ")"
		}
	})
	return hostCaches
}

// fromTopology picks the data caches of the first CPU.
func fromTopology(cpus []profile.CPU, caches []profile.Cache) Caches {
	c := Caches{Source: "fallback (the host reports no caches)"}
	if len(cpus) > 0 {
		first := cpus[0].ID
		for _, k := range caches {
			if !slices.Contains(k.SharedCPUs, first) || k.Type == "Instruction" {
				continue
			}
			switch k.Level {
			case 1:
				c.L1d = k.SizeBytes
			case 2:
				c.L2 = k.SizeBytes
			case 3:
				c.L3 = k.SizeBytes
			default:
				continue
			}
			c.LineSize = int64(k.LineSize)
			c.Source = "sysfs"
			if k.Source != "" {
				c.Source = k.Source
			}
		}
	}
	for _, f := range []struct {
		v  *int64
		fb int64
	}{{&c.L1d, fallbackL1d}, {&c.L2, fallbackL2}, {&c.L3, fallbackL3}, {&c.LineSize, fallbackLine}} {
		if *f.v <= 0 {
			*f.v = f.fb
		}
	}
	return c
}
