package host

import (
	"math"
	"slices"

	"github.com/cacheheat/cacheheat/profile"
)

// cpuid executes CPUID with the given leaf (EAX) and subleaf (ECX)
// (cpuid_amd64.s).
func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

// cpuidCache is one cache level/type as CPUID describes it, for the CPU that
// ran the instruction.
type cpuidCache struct {
	level int
	typ   string // "Data", "Instruction", "Unified", as sysfs spells them
	size  int64
	line  int
	ways  int // 0 when CPUID does not say
	// sharing is CPUID's "maximum logical processors sharing this cache";
	// 0 means CPUID does not say and the cache is taken to be per core
	// (AMD's legacy L1/L2 leaves), math.MaxInt32 the whole package (AMD's
	// legacy L3 leaf, as the kernel assumes).
	sharing int
}

// cachesFromCPUID decodes CPUID's cache leaves and lays them over the
// online CPUs: the fallback for hosts (many VMs) whose sysfs has no
// cpu*/cache directories. CPUID describes the caches of the CPU running it
// and every CPU is taken to have the same caches, which is wrong on hybrid
// (P/E core) parts; hence Source "cpuid" on every cache it returns.
func cachesFromCPUID(cpus []profile.CPU) []profile.Cache {
	return groupCPUIDCaches(decodeCPUIDCaches(cpuid), cpus)
}

// decodeCPUIDCaches reads the deterministic cache parameters: Intel's leaf 4,
// AMD's leaf 0x8000001D when the topology extensions are advertised (and
// the leaf is filled in: some hypervisors advertise it and return zeros),
// else AMD's legacy leaves 0x80000005 (L1) and 0x80000006 (L2, L3).
func decodeCPUIDCaches(id func(eax, ecx uint32) (uint32, uint32, uint32, uint32)) []cpuidCache {
	maxLeaf, b, c, d := id(0, 0)
	vendor := string(le32(b)) + string(le32(d)) + string(le32(c))
	maxExt, _, _, _ := id(0x80000000, 0)
	switch vendor {
	case "AuthenticAMD", "HygonGenuine":
		if maxExt >= 0x8000001D {
			_, _, ecx, _ := id(0x80000001, 0)
			if ecx&(1<<22) != 0 { // TopologyExtensions
				if cs := decodeLeaf4Style(id, 0x8000001D); len(cs) > 0 {
					return cs
				}
			}
		}
		return decodeAMDLegacy(id, maxExt)
	default: // Intel, and the others (Zhaoxin, Centaur) that implement leaf 4
		if maxLeaf >= 4 {
			return decodeLeaf4Style(id, 4)
		}
	}
	return nil
}

func le32(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }

// decodeLeaf4Style walks the subleaves of leaf 4 or 0x8000001D, which
// share one layout, until a subleaf of type 0 (no more caches).
func decodeLeaf4Style(id func(eax, ecx uint32) (uint32, uint32, uint32, uint32), leaf uint32) []cpuidCache {
	var out []cpuidCache
	for sub := uint32(0); sub < 16; sub++ {
		eax, ebx, ecx, _ := id(leaf, sub)
		var typ string
		switch eax & 0x1f {
		case 0:
			return out
		case 1:
			typ = "Data"
		case 2:
			typ = "Instruction"
		case 3:
			typ = "Unified"
		default:
			continue // reserved types
		}
		line := int(ebx&0xfff) + 1
		partitions := int((ebx>>12)&0x3ff) + 1
		ways := int(ebx>>22) + 1
		sets := int64(ecx) + 1
		c := cpuidCache{
			level:   int((eax >> 5) & 7),
			typ:     typ,
			line:    line,
			ways:    ways,
			size:    int64(ways) * int64(partitions) * int64(line) * sets,
			sharing: int((eax>>14)&0xfff) + 1,
		}
		if eax&(1<<9) != 0 { // fully associative: ways is meaningless
			c.ways = 0
		}
		out = append(out, c)
	}
	return out
}

// amdAssoc decodes the 4-bit associativity of leaf 0x80000006 (AMD APM
// vol. 3, CPUID Fn8000_0006); 0 when unknown or deferred to 0x8000001D.
var amdAssoc = [16]int{1: 1, 2: 2, 4: 4, 6: 8, 8: 16, 0xa: 32, 0xb: 48, 0xc: 64, 0xd: 96, 0xe: 128}

// decodeAMDLegacy reads L1 from 0x80000005 and L2/L3 from 0x80000006.
// They carry no sharing counts: L1 and L2 are per core on every AMD part,
// L3 is taken as shared by the package.
func decodeAMDLegacy(id func(eax, ecx uint32) (uint32, uint32, uint32, uint32), maxExt uint32) []cpuidCache {
	var out []cpuidCache
	if maxExt >= 0x80000005 {
		_, _, ecx, edx := id(0x80000005, 0)
		l1 := func(r uint32, typ string) {
			if size := int64(r>>24) << 10; size > 0 {
				ways := int((r >> 16) & 0xff)
				if ways == 0xff { // fully associative
					ways = 0
				}
				out = append(out, cpuidCache{level: 1, typ: typ, size: size, line: int(r & 0xff), ways: ways})
			}
		}
		l1(ecx, "Data")
		l1(edx, "Instruction")
	}
	if maxExt >= 0x80000006 {
		_, _, ecx, edx := id(0x80000006, 0)
		if size := int64(ecx>>16) << 10; size > 0 {
			out = append(out, cpuidCache{level: 2, typ: "Unified", size: size, line: int(ecx & 0xff), ways: amdAssoc[(ecx>>12)&0xf]})
		}
		if size := int64(edx>>18) * 512 << 10; size > 0 {
			out = append(out, cpuidCache{level: 3, typ: "Unified", size: size, line: int(edx & 0xff), ways: amdAssoc[(edx>>12)&0xf], sharing: math.MaxInt32})
		}
	}
	return out
}

// groupCPUIDCaches makes cache instances over the online CPUs from CPUID's
// sharing counts. Within each package, a cache shared by N logical CPUs
// covers the whole package when N is at least the package's CPU count, a
// core's SMT siblings when N equals their count (or CPUID gave no count),
// and otherwise consecutive CPU ids in groups of N: CPUID gives no ids, so
// the last is an assumption (the kernel numbers CPUs this way on most
// hosts, but not all).
func groupCPUIDCaches(decoded []cpuidCache, cpus []profile.CPU) []profile.Cache {
	online := make([]int, len(cpus))
	pkgCPUs := map[int][]int{}
	for i, c := range cpus {
		online[i] = c.ID
		pkgCPUs[c.Package] = append(pkgCPUs[c.Package], c.ID)
	}
	for _, ids := range pkgCPUs {
		slices.Sort(ids)
	}
	set := newCacheSet()
	for _, d := range decoded {
		for _, cpu := range cpus {
			pkg := pkgCPUs[cpu.Package]
			var shared []int
			switch {
			case d.sharing >= len(pkg):
				shared = pkg
			case d.sharing <= 0 || d.sharing == len(cpu.Siblings):
				shared = onlyOnline(cpu.Siblings, online)
				if !slices.Contains(shared, cpu.ID) {
					shared = append(shared, cpu.ID)
				}
			default:
				i := slices.Index(pkg, cpu.ID)
				lo := i / d.sharing * d.sharing
				shared = pkg[lo:min(lo+d.sharing, len(pkg))]
			}
			shared = slices.Clone(shared)
			slices.Sort(shared)
			set.add(profile.Cache{
				Level:      d.level,
				Type:       d.typ,
				SizeBytes:  d.size,
				LineSize:   d.line,
				Ways:       d.ways,
				SharedCPUs: shared,
				Source:     "cpuid",
			}, false)
		}
	}
	return set.list()
}
