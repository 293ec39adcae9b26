package compare

import (
	"math"
	"math/rand/v2"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// The example of scipy.stats.mannwhitneyu's documentation (Conover,
// "Practical Nonparametric Statistics"): U1 = 17, exact two-sided p = 1/9;
// with method="asymptotic" p = 0.11134688653314041.
func TestMannWhitneyScipyExample(t *testing.T) {
	males := []float64{19, 22, 16, 29, 24}
	females := []float64{20, 11, 17, 12}
	r := MannWhitney(males, females)
	if r.U != 17 || !r.Exact || !near(r.P, 1.0/9, 1e-12) {
		t.Fatalf("got %+v, want U=17 exact p=0.1111", r)
	}
	_, p := normalTwoSided(17, 5, 4, 0)
	if !near(p, 0.11134688653314041, 1e-12) {
		t.Fatalf("asymptotic p = %.17g, want 0.11134688653314041", p)
	}
	// Swapping the samples gives U2 = n1*n2 - U1 and the same p.
	r2 := MannWhitney(females, males)
	if r2.U != 3 || r2.P != r.P {
		t.Fatalf("swapped: got %+v, want U=3 p=%g", r2, r.P)
	}
}

// Critical values of U from the published two-sided alpha = 0.05 table
// (for example Siegel & Castellan, Table J; Zar, Table B.11): U <= crit is
// significant, crit+1 is not.
func TestMannWhitneyCriticalValues(t *testing.T) {
	for _, c := range []struct{ n1, n2, crit int }{
		{5, 5, 2}, {6, 6, 5}, {7, 7, 8}, {8, 8, 13}, {9, 9, 17}, {10, 10, 23}, {4, 6, 2}, {5, 8, 6}, {20, 20, 127},
	} {
		if p := exactTwoSided(c.n1, c.n2, float64(c.crit)); p > 0.05 {
			t.Errorf("n=%d,%d: p(U=%d) = %g, want <= 0.05", c.n1, c.n2, c.crit, p)
		}
		if p := exactTwoSided(c.n1, c.n2, float64(c.crit+1)); p <= 0.05 {
			t.Errorf("n=%d,%d: p(U=%d) = %g, want > 0.05", c.n1, c.n2, c.crit+1, p)
		}
	}
}

// enumerate calls f with every way of choosing which k of n pooled
// positions belong to the first sample.
func enumerate(n, k int, f func(inX []bool)) {
	inX := make([]bool, n)
	var rec func(i, left int)
	rec = func(i, left int) {
		if left == 0 {
			f(inX)
			return
		}
		if n-i < left {
			return
		}
		inX[i] = true
		rec(i+1, left-1)
		inX[i] = false
		rec(i+1, left)
	}
	rec(0, k)
}

// uByDefinition counts pairs with x > y, ties one half: the definition of
// U, independent of ranks.
func uByDefinition(x, y []float64) float64 {
	var u float64
	for _, a := range x {
		for _, b := range y {
			switch {
			case a > b:
				u++
			case a == b:
				u += 0.5
			}
		}
	}
	return u
}

func split(pool []float64, inX []bool) (x, y []float64) {
	for i, v := range pool {
		if inX[i] {
			x = append(x, v)
		} else {
			y = append(y, v)
		}
	}
	return x, y
}

// Small samples without ties: the exact p-value must equal the share of
// all C(n1+n2, n1) rank assignments at least as extreme, computed here by
// brute force.
func TestMannWhitneyExactByEnumeration(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n1 := 3; n1 <= 5; n1++ {
		for n2 := 3; n2 <= 5; n2++ {
			pool := make([]float64, n1+n2)
			for i := range pool {
				pool[i] = float64(i) * 1.5
			}
			var us []float64
			enumerate(len(pool), n1, func(inX []bool) {
				x, y := split(pool, inX)
				us = append(us, uByDefinition(x, y))
			})
			for trial := 0; trial < 6; trial++ {
				perm := rng.Perm(len(pool))
				x, y := []float64{}, []float64{}
				for i, p := range perm {
					if i < n1 {
						x = append(x, pool[p])
					} else {
						y = append(y, pool[p])
					}
				}
				u := uByDefinition(x, y)
				var le, ge float64
				for _, v := range us {
					if v <= u {
						le++
					}
					if v >= u {
						ge++
					}
				}
				want := math.Min(1, 2*math.Min(le, ge)/float64(len(us)))
				got := MannWhitney(x, y)
				if got.U != u || !got.Exact || !near(got.P, want, 1e-12) {
					t.Errorf("x=%v y=%v: got U=%g p=%g exact=%v, want U=%g p=%g", x, y, got.U, got.P, got.Exact, u, want)
				}
			}
		}
	}
}

// With ties the normal approximation needs the tie-corrected variance. The
// exact permutation mean and variance of U, enumerated over every split of
// the pooled values, must give the same z and p.
func TestMannWhitneyTiesByEnumeration(t *testing.T) {
	cases := []struct{ x, y []float64 }{
		{[]float64{1, 2, 2, 3}, []float64{2, 3, 3, 4, 5}},
		{[]float64{1, 1, 1}, []float64{1, 2, 2}},
		{[]float64{5, 5, 6, 7, 7}, []float64{4, 5, 5, 5, 6}},
		{[]float64{0, 0, 0, 1, 1}, []float64{1, 1, 2}},
	}
	for _, c := range cases {
		pool := append(append([]float64{}, c.x...), c.y...)
		var sum, sum2, count float64
		enumerate(len(pool), len(c.x), func(inX []bool) {
			x, y := split(pool, inX)
			u := uByDefinition(x, y)
			sum += u
			sum2 += u * u
			count++
		})
		mean := sum / count
		variance := sum2/count - mean*mean
		u := uByDefinition(c.x, c.y)
		d := math.Max(0, math.Abs(u-mean)-0.5)
		wantP := math.Erfc(d / math.Sqrt(variance) / math.Sqrt2)
		got := MannWhitney(c.x, c.y)
		if got.Exact || got.U != u || !near(got.P, math.Min(1, wantP), 1e-9) {
			t.Errorf("x=%v y=%v: got %+v, want U=%g p=%g (mean %g var %g)", c.x, c.y, got, u, wantP, mean, variance)
		}
	}
}

func TestMannWhitneyDegenerate(t *testing.T) {
	if r := MannWhitney(nil, []float64{1, 2}); r.P != 1 {
		t.Errorf("empty sample: p = %g, want 1", r.P)
	}
	if r := MannWhitney([]float64{3, 3, 3}, []float64{3, 3}); r.P != 1 {
		t.Errorf("all tied: p = %g, want 1", r.P)
	}
	// Large samples without ties use the normal approximation.
	x, y := make([]float64, 25), make([]float64, 25)
	for i := range x {
		x[i], y[i] = float64(i), float64(i)+100
	}
	r := MannWhitney(x, y)
	if r.Exact || r.U != 0 || r.P > 1e-8 {
		t.Errorf("separated n=25: got %+v, want approximate, U=0, tiny p", r)
	}
}

// Holm's procedure on the usual textbook example (four hypotheses, p =
// 0.01, 0.04, 0.03, 0.005): adjusted 0.03, 0.06, 0.06, 0.02, so at alpha
// 0.05 the first and fourth are rejected.
func TestHolm(t *testing.T) {
	got := Holm([]float64{0.01, 0.04, 0.03, 0.005})
	want := []float64{0.03, 0.06, 0.06, 0.02}
	for i := range want {
		if !near(got[i], want[i], 1e-12) {
			t.Fatalf("Holm = %v, want %v", got, want)
		}
	}
	if got := Holm([]float64{0.5, 0.9}); got[0] != 1 || got[1] != 1 {
		t.Errorf("Holm caps at 1: got %v", got)
	}
	if got := Holm(nil); len(got) != 0 {
		t.Errorf("Holm(nil) = %v", got)
	}
}

func TestBootstrapRatioCI(t *testing.T) {
	base := []float64{100, 102, 98, 101, 99, 103, 97, 100, 101, 99}
	new := make([]float64, len(base))
	for i, v := range base {
		new[i] = 2 * v
	}
	lo, hi := BootstrapRatioCI(base, new, 2000, 0.95, 7)
	if !(lo <= 2 && 2 <= hi && lo > 1.9 && hi < 2.1) {
		t.Errorf("CI [%g, %g], want around 2", lo, hi)
	}
	lo2, hi2 := BootstrapRatioCI(base, new, 2000, 0.95, 7)
	if lo != lo2 || hi != hi2 {
		t.Errorf("same seed gave [%g, %g] then [%g, %g]", lo, hi, lo2, hi2)
	}
	if lo, hi := BootstrapRatioCI([]float64{0, 0, 0}, []float64{0, 0}, 100, 0.95, 1); lo != 1 || hi != 1 {
		t.Errorf("0/0: CI [%g, %g], want [1, 1]", lo, hi)
	}
	if lo, hi := BootstrapRatioCI([]float64{0, 0, 0}, []float64{1, 2}, 100, 0.95, 1); !math.IsInf(lo, 1) || !math.IsInf(hi, 1) {
		t.Errorf("x/0: CI [%g, %g], want [inf, inf]", lo, hi)
	}
}

func TestMedian(t *testing.T) {
	if m := Median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("odd median %g", m)
	}
	if m := Median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("even median %g", m)
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("empty median is not NaN")
	}
}

// TestRankRatioCI: the interval inverts the rank test (it excludes 1
// exactly when the exact two-sided p is at most 1-conf), it covers the
// true ratio in at least conf of repeated draws, and it is absent where
// no interval can reach conf.
func TestRankRatioCI(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	draw := func(n int, scale float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = scale * math.Exp(0.1*rng.NormFloat64())
		}
		return v
	}
	for _, n := range []int{4, 5, 8, 10} {
		covered, reps := 0, 2000
		for r := 0; r < reps; r++ {
			b, nw := draw(n, 1), draw(n, 1.1)
			lo, hi := RankRatioCI(b, nw, 0.95)
			if lo > hi || math.IsNaN(lo) {
				t.Fatalf("n=%d: interval [%g, %g]", n, lo, hi)
			}
			if lo <= 1.1 && 1.1 <= hi {
				covered++
			}
			p := MannWhitney(b, nw).P
			if excl := lo > 1 || hi < 1; excl != (p <= 0.05) {
				t.Errorf("n=%d: interval [%g, %g] but exact p = %g", n, lo, hi, p)
			}
		}
		if f := float64(covered) / float64(reps); f < 0.94 {
			t.Errorf("n=%d: the interval covered the true ratio in %.3f of draws, want >= 0.95", n, f)
		}
	}
	if lo, hi := RankRatioCI([]float64{1, 2, 3}, []float64{4, 5, 6}, 0.95); !math.IsNaN(lo) || !math.IsNaN(hi) {
		t.Errorf("3 a side at 95%%: [%g, %g], want none (no interval reaches 95%%)", lo, hi)
	}
	// 5 a side, fully separated: the 3rd smallest and largest of 25 ratios.
	lo, hi := RankRatioCI([]float64{1, 1, 1, 1, 1}, []float64{2, 2, 2, 2, 3}, 0.95)
	if lo != 2 || hi != 3 {
		t.Errorf("separated samples: [%g, %g], want [2, 3]", lo, hi)
	}
}
