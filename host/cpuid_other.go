//go:build !amd64

package host

import "github.com/cacheheat/cacheheat/profile"

// cachesFromCPUID is the CPUID fallback for hosts whose sysfs lists no
// caches; it exists on amd64 only, so elsewhere there is nothing to add.
func cachesFromCPUID(cpus []profile.CPU) []profile.Cache { return nil }
