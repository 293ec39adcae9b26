package metric

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

// FormatValue writes a value with its unit for people: the one formatter
// of every text, table and page (findings, diff tables, inspect), so one
// value reads the same everywhere. Ratios as percentages, nanoseconds and
// seconds as a duration (FormatNS), multiples as "1.50x", and any other
// value with an SI prefix (12.3k, 4.56M) followed by its unit.
func FormatValue(v float64, unit string) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case unit == UnitRatio:
		return fmt.Sprintf("%.1f%%", v*100)
	case unit == UnitNS:
		return FormatNS(v)
	case unit == "s":
		return FormatNS(v * 1e9)
	case unit == UnitTimes:
		return fmt.Sprintf("%.2fx", v)
	case unit == UnitPerSecond:
		return si(v) + "/s"
	case unit == "":
		return si(v)
	}
	return si(v) + " " + unit
}

// si writes v with three significant digits and an SI prefix from 10^4 up.
func si(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return fmt.Sprintf("%.3gG", v/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.3g", v)
}

// FormatNS writes a duration in nanoseconds with the unit that reads best
// and three significant digits: 512ns, 1.02us, 2.1ms, 1.1s.
func FormatNS(ns float64) string {
	switch {
	case ns >= 1e9:
		return strconv.FormatFloat(ns/1e9, 'g', 3, 64) + "s"
	case ns >= 1e6:
		return strconv.FormatFloat(ns/1e6, 'g', 3, 64) + "ms"
	case ns >= 1e3:
		return strconv.FormatFloat(ns/1e3, 'g', 3, 64) + "us"
	}
	return strconv.FormatFloat(ns, 'g', 3, 64) + "ns"
}

// FormatBytes writes a size in the largest binary unit that divides it
// (cache and working-set sizes are powers of two): 32 KiB, 1 MiB.
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// Median is the median of v (0 for none), v left as it is: the one
// median of the rules and the probe.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
