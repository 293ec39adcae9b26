package workloads

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"
)

func unsafePointer(b *byte) unsafe.Pointer { return unsafe.Pointer(b) }

// alignedBytes returns n bytes starting at a multiple of align (a power of
// two) plus offset, carved from a larger Go allocation so the GC keeps it.
func alignedBytes(n, align, offset int) []byte {
	buf := make([]byte, n+align+offset)
	addr := uintptr(unsafe.Pointer(&buf[0]))
	skip := int((uintptr(align) - addr%uintptr(align)) % uintptr(align))
	return buf[skip+offset : skip+offset+n : skip+offset+n]
}

// alignedUint64s returns n uint64s whose first element starts on a
// multiple of align.
func alignedUint64s(n, align int) []uint64 {
	b := alignedBytes(n*8, align, 0)
	return unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), n)
}

// memAvailable reads MemAvailable from /proc/meminfo in bytes.
func memAvailable() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing MemAvailable %q: %w", fields[1], err)
			}
			return kb * 1024, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no MemAvailable in /proc/meminfo")
}

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1000}, {"mb", 1000 * 1000}, {"gb", 1000 * 1000 * 1000},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
	{"b", 1},
}

// ParseSize reads sizes like 4096, 4KiB, 64MiB, 1GiB (K/M/G alone are
// binary too; KB/MB/GB are decimal).
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t = strings.TrimSpace(strings.TrimSuffix(t, u.suffix))
			mult = u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%w: size %q: want a positive number with an optional unit (4096, 4KiB, 64MiB, 1GiB)", ErrBadInput, s)
	}
	if n > (1<<62)/mult {
		return 0, fmt.Errorf("%w: size %q is too large", ErrBadInput, s)
	}
	return n * mult, nil
}

// FormatSize prints a byte count with the largest binary unit that divides
// it, or with one decimal.
func FormatSize(n int64) string {
	units := []struct {
		name string
		v    int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	for _, u := range units {
		if n >= u.v {
			if n%u.v == 0 {
				return fmt.Sprintf("%d%s", n/u.v, u.name)
			}
			return fmt.Sprintf("%.1f%s", float64(n)/float64(u.v), u.name)
		}
	}
	return fmt.Sprintf("%dB", n)
}
