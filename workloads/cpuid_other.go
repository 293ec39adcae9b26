//go:build !amd64

package workloads

// cpuidCaches has no CPUID to ask on this architecture.
func cpuidCaches() (Caches, bool) { return Caches{}, false }
