package compare

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
)

// ExactMaxN is the largest sample size (each side) for which MannWhitney
// computes the exact null distribution of U when there are no ties. Up to
// 20+20 the counts (at most C(40,20) ~ 1.4e11) are exact in a float64.
const ExactMaxN = 20

// MWResult is a two-sided Mann-Whitney U test of x against y.
type MWResult struct {
	// U is the statistic for x: the number of pairs (xi, yj) with xi > yj,
	// ties counting one half. U near len(x)*len(y) means x tends larger.
	U float64
	// P is the two-sided p-value.
	P float64
	// Exact is true when P comes from the exact distribution of U (small
	// samples without ties); otherwise from the normal approximation with
	// continuity and tie correction.
	Exact bool
	// Z is the standardized statistic of the normal approximation (with
	// continuity correction, signed like U - mean); 0 when Exact.
	Z float64
}

// MannWhitney runs a two-sided Mann-Whitney U (Wilcoxon rank-sum) test:
// exact when both samples have at most ExactMaxN values and no value is
// tied, else the normal approximation with continuity correction and the
// tie-corrected variance. U and both p-values are defined as in
// scipy.stats.mannwhitneyu (method "exact" and "asymptotic"). With an empty
// sample, or when every value is tied, P is 1.
func MannWhitney(x, y []float64) MWResult {
	n1, n2 := len(x), len(y)
	if n1 == 0 || n2 == 0 {
		return MWResult{P: 1}
	}
	type obs struct {
		v    float64
		inX  bool
		rank float64
	}
	all := make([]obs, 0, n1+n2)
	for _, v := range x {
		all = append(all, obs{v: v, inX: true})
	}
	for _, v := range y {
		all = append(all, obs{v: v})
	}
	// Stable is not needed (ties get one midrank), and a typed sort
	// avoids reflection: thousands of metrics of thousands of windows
	// are ranked in a large diff.
	slices.SortFunc(all, func(a, b obs) int { return cmp.Compare(a.v, b.v) })
	// Midranks for ties, and the tie term sum(t^3 - t) of the variance.
	var tieSum float64
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		mid := float64(i+1+j) / 2 // mean of ranks i+1 .. j
		for k := i; k < j; k++ {
			all[k].rank = mid
		}
		if t := float64(j - i); t > 1 {
			tieSum += t*t*t - t
		}
		i = j
	}
	var r1 float64
	for _, o := range all {
		if o.inX {
			r1 += o.rank
		}
	}
	fn1, fn2 := float64(n1), float64(n2)
	u := r1 - fn1*(fn1+1)/2
	res := MWResult{U: u}
	if tieSum == 0 && n1 <= ExactMaxN && n2 <= ExactMaxN {
		res.Exact = true
		res.P = exactTwoSided(n1, n2, u)
		return res
	}
	res.Z, res.P = normalTwoSided(u, fn1, fn2, tieSum)
	return res
}

// normalTwoSided is the normal approximation of the two-sided p-value of U,
// with the tie-corrected variance n1*n2/12 * ((n+1) - sum(t^3-t)/(n(n-1)))
// and a continuity correction of 0.5 toward the mean (scipy's
// "asymptotic" method).
func normalTwoSided(u, n1, n2, tieSum float64) (z, p float64) {
	n := n1 + n2
	mean := n1 * n2 / 2
	variance := n1 * n2 / 12 * ((n + 1) - tieSum/(n*(n-1)))
	if variance <= 0 {
		return 0, 1
	}
	d := math.Max(0, math.Abs(u-mean)-0.5)
	z = d / math.Sqrt(variance)
	if u < mean {
		z = -z
	}
	return z, math.Min(1, math.Erfc(math.Abs(z)/math.Sqrt2))
}

// exactTwoSided returns min(1, 2*min(P(U <= u), P(U >= u))) under the null.
func exactTwoSided(n1, n2 int, u float64) float64 {
	counts := uCounts(n1, n2)
	var total, le, ge float64
	for k, c := range counts {
		total += c
		if float64(k) <= u {
			le += c
		}
		if float64(k) >= u {
			ge += c
		}
	}
	return math.Min(1, 2*math.Min(le, ge)/total)
}

var (
	uCountsMu    sync.Mutex
	uCountsCache = map[[2]int][]float64{}
)

// uCounts returns, for every u in 0..n1*n2, how many of the C(n1+n2, n1)
// equally likely rank assignments give U = u. It uses the recurrence on
// the largest observation: it is either from the first sample (adding n2
// to U) or from the second, f(m, n, u) = f(m-1, n, u-n) + f(m, n-1, u).
func uCounts(n1, n2 int) []float64 {
	uCountsMu.Lock()
	defer uCountsMu.Unlock()
	return uCountsLocked(n1, n2)
}

func uCountsLocked(m, n int) []float64 {
	if c, ok := uCountsCache[[2]int{m, n}]; ok {
		return c
	}
	out := make([]float64, m*n+1)
	if m == 0 || n == 0 {
		out[0] = 1
	} else {
		a := uCountsLocked(m-1, n) // largest from sample 1: U += n
		b := uCountsLocked(m, n-1)
		for u := range out {
			if u-n >= 0 && u-n < len(a) {
				out[u] += a[u-n]
			}
			if u < len(b) {
				out[u] += b[u]
			}
		}
	}
	uCountsCache[[2]int{m, n}] = out
	return out
}

// Holm returns Holm-Bonferroni adjusted p-values, in the order of p:
// sorted ascending, the i-th smallest (from 0) is multiplied by (m - i),
// made monotone and capped at 1. Rejecting where adjusted < alpha controls
// the family-wise error rate at alpha.
func Holm(p []float64) []float64 {
	m := len(p)
	idx := make([]int, m)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return p[idx[a]] < p[idx[b]] })
	adj := make([]float64, m)
	var running float64
	for rank, i := range idx {
		v := math.Min(1, float64(m-rank)*p[i])
		if v < running {
			v = running
		}
		running = v
		adj[i] = v
	}
	return adj
}

// Median returns the median of v (the mean of the two middle values for an
// even length), or NaN for an empty slice. v is not modified.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return medianSorted(s)
}

func medianSorted(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Ratio is num/den with the conventions a ratio of medians needs: 0/0 is 1
// (nothing changed) and x/0 is +Inf.
func Ratio(num, den float64) float64 {
	switch {
	case den == 0 && num == 0:
		return 1
	case den == 0:
		return math.Inf(1)
	}
	return num / den
}

// maxBootstrapValues bounds the values a side's bootstrap resamples: a
// longer series is resampled in blocks (BootstrapRatioCI).
const maxBootstrapValues = 64

// blockMedians reduces a series longer than maxBootstrapValues to the
// medians of consecutive blocks of equal length (the last block takes the
// rest): at most maxBootstrapValues values.
func blockMedians(v []float64) []float64 {
	if len(v) <= maxBootstrapValues {
		return v
	}
	size := (len(v) + maxBootstrapValues - 1) / maxBootstrapValues
	var out []float64
	buf := make([]float64, 0, size)
	for i := 0; i < len(v); i += size {
		buf = append(buf[:0], v[i:min(i+size, len(v))]...)
		sort.Float64s(buf)
		out = append(out, medianSorted(buf))
	}
	return out
}

// BootstrapRatioCI returns a percentile bootstrap confidence interval at
// level conf (for example 0.95) for median(new)/median(base): each of iters
// rounds resamples both sides with replacement. The generator is seeded
// with seed, so the same inputs always give the same interval.
//
// A side of more than maxBootstrapValues windows is resampled in blocks:
// the medians of consecutive blocks of windows are what is drawn, as a
// block bootstrap does. That keeps neighbouring windows, which move
// together, together (a window-by-window bootstrap of a long recording
// gives an interval too narrow for values that are not independent), and
// makes the cost per metric bounded: two hour-long 128-CPU recordings
// have about 1,400 metrics of 3,600 windows each, whose window bootstrap
// took minutes.
func BootstrapRatioCI(base, new []float64, iters int, conf float64, seed uint64) (lo, hi float64) {
	if len(base) == 0 || len(new) == 0 || iters <= 0 {
		return math.NaN(), math.NaN()
	}
	base, new = blockMedians(base), blockMedians(new)
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	ratios := make([]float64, iters)
	// A resample's median without sorting it: the values are sorted once,
	// a resample is how many times each was drawn, and its median is
	// found by walking those counts (the same draws and the same median
	// as sorting the drawn values).
	bs, ns := sortedCopy(base), sortedCopy(new)
	bc, nc := make([]int, len(bs)), make([]int, len(ns))
	for it := range ratios {
		b := resampleMedian(bs, bc, rng) // base drawn first, as before
		ratios[it] = Ratio(resampleMedian(ns, nc, rng), b)
	}
	sort.Float64s(ratios)
	a := (1 - conf) / 2
	return quantileSorted(ratios, a), quantileSorted(ratios, 1-a)
}

func sortedCopy(v []float64) []float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s
}

// resampleMedian draws len(sorted) values of sorted with replacement and
// returns their median; counts is scratch space of the same length.
func resampleMedian(sorted []float64, counts []int, rng *rand.Rand) float64 {
	n := len(sorted)
	clear(counts)
	for range n {
		counts[rng.IntN(n)]++
	}
	// The median of n values: the (n+1)/2-th, or the mean of the n/2-th
	// and n/2+1-th, in sorted order (1-based).
	lo, hi := (n+1)/2, n/2+1
	var a, b float64
	seen := 0
	for i, c := range counts {
		if c == 0 {
			continue
		}
		if seen < lo && seen+c >= lo {
			a = sorted[i]
		}
		if seen < hi && seen+c >= hi {
			b = sorted[i]
			break
		}
		seen += c
	}
	if n%2 == 1 {
		return a
	}
	return (a + b) / 2
}

// quantileSorted is the q-quantile of sorted s with linear interpolation
// between order statistics.
func quantileSorted(s []float64, q float64) float64 {
	pos := q * float64(len(s)-1)
	i := int(math.Floor(pos))
	if i >= len(s)-1 {
		return s[len(s)-1]
	}
	f := pos - float64(i)
	if f == 0 || math.IsInf(s[i], 0) || math.IsInf(s[i+1], 0) {
		if f < 0.5 {
			return s[i]
		}
		return s[i+1]
	}
	return s[i] + f*(s[i+1]-s[i])
}

// RankRatioCI is the distribution-free interval of new/base that inverts
// the Mann-Whitney test (Moses' interval for a shift, taken on the log
// scale): of the m*n ratios new_j/base_i, sorted, the k-th from each end,
// where k-1 is the largest U whose two-sided exact tail stays within
// 1-conf. It holds with at least conf and excludes 1 exactly when the
// rank test, uncorrected, rejects at 1-conf. A base value of 0 gives +Inf
// against a positive new one and 1 against 0. NaN, NaN when the samples
// are too small to reach conf (fewer than 4 a side at 95%) or too large
// for the exact distribution.
func RankRatioCI(base, new []float64, conf float64) (lo, hi float64) {
	m, n := len(base), len(new)
	if m == 0 || n == 0 || m > ExactMaxN || n > ExactMaxN {
		return math.NaN(), math.NaN()
	}
	counts := uCounts(m, n)
	var total float64
	for _, c := range counts {
		total += c
	}
	// k: how many ratios to drop at each end.
	k, tail := 0, 0.0
	for u := 0; u < len(counts); u++ {
		tail += counts[u]
		if 2*tail/total > 1-conf {
			break
		}
		k = u + 1
	}
	if k == 0 {
		return math.NaN(), math.NaN()
	}
	ratios := make([]float64, 0, m*n)
	for _, b := range base {
		for _, v := range new {
			switch {
			case b > 0:
				ratios = append(ratios, v/b)
			case v > 0:
				ratios = append(ratios, math.Inf(1))
			default:
				ratios = append(ratios, 1)
			}
		}
	}
	slices.Sort(ratios)
	return ratios[k-1], ratios[len(ratios)-k]
}
