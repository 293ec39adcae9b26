package workloads

import "fmt"

func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

// cpuidCaches walks the deterministic cache parameter leaf: 4 on Intel,
// 0x8000001D on AMD (with TOPOEXT), one subleaf per cache until type 0.
func cpuidCaches() (Caches, bool) {
	maxLeaf, b, c, d := cpuid(0, 0)
	vendor := string([]byte{byte(b), byte(b >> 8), byte(b >> 16), byte(b >> 24), byte(d), byte(d >> 8), byte(d >> 16), byte(d >> 24), byte(c), byte(c >> 8), byte(c >> 16), byte(c >> 24)})
	leaf := uint32(4)
	if vendor == "AuthenticAMD" || vendor == "HygonGenuine" {
		maxExt, _, _, _ := cpuid(0x80000000, 0)
		if maxExt < 0x8000001D {
			return amdLegacyCaches(maxExt)
		}
		leaf = 0x8000001D
	} else if maxLeaf < 4 {
		return Caches{}, false
	}
	out := Caches{Source: fmt.Sprintf("cpuid leaf %#x", leaf)}
	for sub := uint32(0); sub < 16; sub++ {
		eax, ebx, ecx, _ := cpuid(leaf, sub)
		typ, level, size, line := decodeCacheLeaf(eax, ebx, ecx)
		if typ == 0 {
			break
		}
		if typ == 2 { // instruction cache
			continue
		}
		switch level {
		case 1:
			out.L1d = size
		case 2:
			out.L2 = size
		case 3:
			out.L3 = size
		}
		if out.LineSize == 0 {
			out.LineSize = line
		}
	}
	if out.L1d == 0 {
		if leaf == 0x8000001D {
			// Some hypervisors leave the topology leaf empty.
			maxExt, _, _, _ := cpuid(0x80000000, 0)
			return amdLegacyCaches(maxExt)
		}
		return Caches{}, false
	}
	return out, true
}

// amdLegacyCaches reads AMD's older cache leaves: L1d KiB in
// 0x80000005 ECX[31:24], L2 KiB in 0x80000006 ECX[31:16], L3 in 512 KiB
// units in 0x80000006 EDX[31:18].
func amdLegacyCaches(maxExt uint32) (Caches, bool) {
	if maxExt < 0x80000006 {
		return Caches{}, false
	}
	_, _, c5, _ := cpuid(0x80000005, 0)
	_, _, c6, d6 := cpuid(0x80000006, 0)
	out := Caches{
		L1d:      int64(c5>>24) << 10,
		L2:       int64(c6>>16) << 10,
		L3:       int64(d6>>18) * 512 << 10,
		LineSize: int64(c5 & 0xff),
		Source:   "cpuid leaves 0x80000005/6",
	}
	if out.L1d == 0 {
		return Caches{}, false
	}
	if out.LineSize == 0 {
		out.LineSize = fallbackLine
	}
	return out, true
}
