package metric

import (
	"math"
	"testing"
)

func TestFormatValue(t *testing.T) {
	for _, c := range []struct {
		v    float64
		unit string
		want string
	}{
		{math.NaN(), UnitNS, "-"},
		{0.123, UnitRatio, "12.3%"},
		{1500, UnitNS, "1.5us"},
		{2.5e6, UnitNS, "2.5ms"},
		{1.25, "s", "1.25s"},
		{1.5, UnitTimes, "1.50x"},
		{1e6, UnitPerSecond, "1M/s"},
		{12345, "", "12.3k"},
		{0.25, UnitPerKiloInstr, "0.25 per 1000 instructions"},
		{3e9, UnitEvents, "3G events"},
		{-2e4, "", "-20k"},
	} {
		if got := FormatValue(c.v, c.unit); got != c.want {
			t.Errorf("FormatValue(%v, %q) = %q, want %q", c.v, c.unit, got, c.want)
		}
	}
}
