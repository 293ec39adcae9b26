package workloads

// genValue is a deterministic pseudo-random value in [-1, 1) for index i
// and a seed, so a reference computation can regenerate any input element
// without trusting the layout the workload stored it in.
func genValue(seed, i uint64) float32 {
	x := i*0x9E3779B97F4A7C15 + seed*0xBF58476D1CE4E5B9 + 1
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return float32(x>>40)/float32(1<<23) - 1
}
