package workloads

import (
	"math"
)

// ffn is the first matrix product of a transformer feed-forward layer:
// C[T x 4d] = X[T x d] * W[d x 4d]. The naive loop reads W down a column
// for every output element, one cache line per multiply-add once W is
// larger than the caches; the tiled loop walks W row-wise in tiles sized
// from the host's L2, reusing each tile for a block of tokens.
var ffn = &Workload{
	Name:    "ffn",
	Summary: "FFN layer GEMM: naive column-walking loop vs tiles that fit L2",
	Variants: map[string]string{
		Bad:  "FFN layer, naive GEMM (i, j, k loop) over d_model x 4*d_model: W read down its columns",
		Good: "tiled GEMM whose W tiles fit L2 (tile size from the host's cache sizes), rows read contiguously",
	},
	Size: &SizeParam{
		Meaning: "bytes of the weight matrix W (d_model x 4*d_model float32); d_model = sqrt(size/16)",
		Default: 4 << 20, // d_model 512
		Min:     4 << 10, // d_model 16
		Memory: func(s int64) int64 {
			d := ffnDModel(s)
			return int64(d*4*d*4 + ffnTokens*d*4 + ffnTokens*4*d*4)
		},
	},
	Op:      "one multiply-add",
	Threads: true,
	run:     runFFN,
}

// ffnTokens is the batch of token rows; enough rows that a tile of W is
// reused, few enough that the naive loop still finishes a pass quickly.
const ffnTokens = 64

// ffnDModel derives d_model from W's size, rounded down to a multiple of 8.
func ffnDModel(size int64) int {
	d := int(math.Sqrt(float64(size / 16)))
	return d &^ 7
}

// ffnTiles picks tile sizes: a kb x jb tile of W takes half of L2,
// leaving room for the X and C rows that stream past it.
func ffnTiles(d int, l2 int64) (ib, kb, jb int) {
	n := 4 * d
	jb = min(n, 256)
	kb = int(l2 / 2 / int64(jb*4))
	kb = max(8, min(d, kb&^7))
	return 16, kb, jb
}

func runFFN(e *env) (Result, error) {
	d := ffnDModel(e.cfg.Size)
	n := 4 * d
	T := ffnTokens
	X := make([]float32, T*d)
	W := make([]float32, d*n)
	C := make([]float32, T*n)
	for i := range X {
		X[i] = genValue(1, uint64(i))
	}
	for i := range W {
		W[i] = genValue(2, uint64(i))
	}
	caches := HostCaches()
	ib, kb, jb := ffnTiles(d, caches.L2)
	workers := min(e.cfg.Threads, T)
	ops := make([]uint64, workers)
	clear(C)
	e.begin()
	err := runWorkers(workers, workerOpts{name: e.threadName()}, func(id int) error {
		lo, hi := split(T, workers, id)
		var done uint64
		// The first pass always completes so the result can be checked;
		// later passes stop between row blocks, each of which rewrites
		// its rows of C completely.
		for pass := 0; !e.stopBefore(pass); pass++ {
			for i0 := lo; i0 < hi; i0 += ib {
				i1 := min(i0+ib, hi)
				if e.stopBefore(pass) {
					break
				}
				if e.cfg.Variant == Bad {
					ffnNaive(X, W, C, d, n, i0, i1)
				} else {
					ffnTiled(X, W, C, d, n, i0, i1, kb, jb)
				}
				macs := uint64((i1 - i0) * d * n)
				done += macs
				e.progress.add(id, macs)
			}
		}
		ops[id] = done
		return nil
	})
	e.ended()
	if err != nil {
		return Result{}, err
	}
	var total uint64
	for _, o := range ops {
		total += o
	}
	if e.interrupted() {
		// The float64 reference takes seconds: a stopped run skips it
		// (Run marks the result interrupted).
		return Result{Ops: total, BytesTouched: total * 8, Caches: &caches}, nil
	}
	maxErr, ok := ffnCheck(X, W, C, d, n, T)
	return Result{
		Ops:          total,
		BytesTouched: total * 8, // one X and one W element per multiply-add
		Check:        checkf(ok, "max_rel_err=%.2g vs float64 reference, d_model=%d tiles=%dx%dx%d", maxErr, d, ib, kb, jb),
		Caches:       &caches,
	}, nil
}

// ffnNaive computes rows [i0, i1) of C one dot product at a time.
func ffnNaive(X, W, C []float32, d, n, i0, i1 int) {
	for i := i0; i < i1; i++ {
		x := X[i*d : i*d+d]
		for j := 0; j < n; j++ {
			var s float32
			for k := 0; k < d; k++ {
				s += x[k] * W[k*n+j]
			}
			C[i*n+j] = s
		}
	}
}

// ffnTiled computes rows [i0, i1) of C over kb x jb tiles of W; the inner
// loop runs along a row of W and of C.
func ffnTiled(X, W, C []float32, d, n, i0, i1, kb, jb int) {
	for i := i0; i < i1; i++ {
		clear(C[i*n : i*n+n])
	}
	for j0 := 0; j0 < n; j0 += jb {
		j1 := min(j0+jb, n)
		for k0 := 0; k0 < d; k0 += kb {
			k1 := min(k0+kb, d)
			for i := i0; i < i1; i++ {
				c := C[i*n+j0 : i*n+j1]
				for k := k0; k < k1; k++ {
					a := X[i*d+k]
					w := W[k*n+j0 : k*n+j1]
					for j := range c {
						c[j] += a * w[j]
					}
				}
			}
		}
	}
}

// ffnCheck compares C with a float64 product of the same inputs. The
// error is relative to the sum of the terms' magnitudes and the tolerance
// is the rigorous float32 bound for a d-term sum in any order (d * 2^-24,
// doubled), so it never fails on rounding and always fails on a wrong
// index.
func ffnCheck(X, W, C []float32, d, n, T int) (maxErr float64, ok bool) {
	ok = true
	tol := 2 * float64(d) * math.Ldexp(1, -24)
	acc := make([]float64, n)
	mag := make([]float64, n)
	for i := 0; i < T; i++ {
		clear(acc)
		clear(mag)
		for k := 0; k < d; k++ {
			a := float64(X[i*d+k])
			for j, w := range W[k*n : k*n+n] {
				t := a * float64(w)
				acc[j] += t
				mag[j] += math.Abs(t)
			}
		}
		for j := 0; j < n; j++ {
			err := math.Abs(float64(C[i*n+j])-acc[j]) / math.Max(mag[j], 1e-30)
			maxErr = math.Max(maxErr, err)
			if !(err <= tol) {
				ok = false
			}
		}
	}
	return maxErr, ok
}
