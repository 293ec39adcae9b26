package workloads

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Caches are the host's data cache sizes in bytes (0 when unknown) and
// where they came from.
type Caches struct {
	L1d      int64  `json:"l1d"`
	L2       int64  `json:"l2"`
	L3       int64  `json:"l3"`
	LineSize int64  `json:"line_size"`
	Source   string `json:"source"`
}

// Fallbacks when neither sysfs nor CPUID answers: a common x86 core.
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

// HostCaches returns cpu0's data cache sizes: from sysfs
// (/sys/devices/system/cpu/cpu0/cache), else from CPUID's deterministic
// cache leaves (many VMs hide the sysfs cache directory), else fallbacks,
// with Source saying which.
func HostCaches() Caches {
	cachesOnce.Do(func() {
		if c, err := readSysfsCaches("/sys/devices/system/cpu/cpu0/cache"); err == nil {
			hostCaches = c
			return
		}
		if c, ok := cpuidCaches(); ok {
			hostCaches = c
			return
		}
		hostCaches = Caches{L1d: fallbackL1d, L2: fallbackL2, L3: fallbackL3, LineSize: fallbackLine, Source: "fallback (no sysfs cache info, no CPUID)"}
	})
	return hostCaches
}

// readSysfsCaches reads index*/{level,type,size,coherency_line_size}.
func readSysfsCaches(dir string) (Caches, error) {
	idx, err := filepath.Glob(filepath.Join(dir, "index*"))
	if err != nil || len(idx) == 0 {
		return Caches{}, fmt.Errorf("no cache entries in %s", dir)
	}
	c := Caches{Source: "sysfs"}
	read := func(d, f string) string {
		b, _ := os.ReadFile(filepath.Join(d, f))
		return strings.TrimSpace(string(b))
	}
	for _, d := range idx {
		typ := read(d, "type")
		if typ != "Data" && typ != "Unified" {
			continue
		}
		size, err := parseCacheSize(read(d, "size"))
		if err != nil {
			continue
		}
		switch read(d, "level") {
		case "1":
			c.L1d = size
		case "2":
			c.L2 = size
		case "3":
			c.L3 = size
		}
		if l, err := strconv.ParseInt(read(d, "coherency_line_size"), 10, 64); err == nil && c.LineSize == 0 {
			c.LineSize = l
		}
	}
	if c.L1d == 0 && c.L2 == 0 {
		return Caches{}, fmt.Errorf("no data caches in %s", dir)
	}
	if c.LineSize == 0 {
		c.LineSize = fallbackLine
	}
	return c, nil
}

// parseCacheSize reads sysfs sizes like "48K" or "32768K" or "1M".
func parseCacheSize(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing cache size %q: %w", s, err)
	}
	return n * mult, nil
}

// decodeCacheLeaf decodes one subleaf of CPUID leaf 4 (Intel) or
// 0x8000001D (AMD), which share a layout: type in EAX[4:0], level in
// EAX[7:5], ways-1 in EBX[31:22], partitions-1 in EBX[21:12], line-1 in
// EBX[11:0], sets-1 in ECX.
func decodeCacheLeaf(eax, ebx, ecx uint32) (typ, level int, size, line int64) {
	typ = int(eax & 0x1f)
	level = int(eax>>5) & 0x7
	ways := int64(ebx>>22) + 1
	parts := int64((ebx>>12)&0x3ff) + 1
	line = int64(ebx&0xfff) + 1
	sets := int64(ecx) + 1
	return typ, level, ways * parts * line * sets, line
}
