package workloads

import (
	"math"
)

// kvcache is one attention decode step: for each head, the new token's
// query is scored against every cached key, softmaxed, and the cached
// values are summed with those weights. Stored token-major ([token][head]
// [dim]), reading one head walks the whole cache with a stride of
// heads*dim floats, one scattered page per token; stored in blocks of 256
// tokens ([block][head][token][dim], as paged KV caches do), one head's
// block is one contiguous run.
var kvcache = &Workload{
	Name:    "kvcache",
	Summary: "attention decode over a token-major KV cache vs 256-token blocks",
	Variants: map[string]string{
		Bad:  "attention decode reading the KV cache head-strided over the whole sequence (token-major layout)",
		Good: "KV cache in contiguous 256-token blocks per head, read block by block",
	},
	Size: &SizeParam{
		Meaning: "bytes of the K and V caches together (32 heads x 64 dims float32); tokens = size/16KiB",
		Default: 64 << 20, // 4096 tokens
		Min:     64 << 10, // 4 tokens
		Memory:  func(s int64) int64 { return s + s/64 },
	},
	Op:      "one cached token of one head (a key dot product and a value accumulation)",
	Threads: true,
	run:     runKVCache,
}

const (
	kvHeads = 32
	kvDim   = 64
	kvBlock = 256
)

// kvLayout maps (token, head) to the offset of that key's (and value's)
// kvDim floats.
type kvLayout func(t, h int) int

func kvTokenMajor(t, h int) int { return (t*kvHeads + h) * kvDim }

func kvBlocked(seq int) kvLayout {
	return func(t, h int) int {
		b, i := t/kvBlock, t%kvBlock
		// The last block may be partial; its heads are packed by its
		// own length so the cache stays dense.
		n := min(kvBlock, seq-b*kvBlock)
		return b*kvBlock*kvHeads*kvDim + (h*n+i)*kvDim
	}
}

func kvSeq(size int64) int { return int(size / (2 * kvHeads * kvDim * 4)) }

func runKVCache(e *env) (Result, error) {
	seq := kvSeq(e.cfg.Size)
	layout := kvLayout(kvTokenMajor)
	if e.cfg.Variant == Good {
		layout = kvBlocked(seq)
	}
	K := make([]float32, seq*kvHeads*kvDim)
	V := make([]float32, seq*kvHeads*kvDim)
	for t := 0; t < seq; t++ {
		for h := 0; h < kvHeads; h++ {
			off := layout(t, h)
			for d := 0; d < kvDim; d++ {
				logical := uint64((t*kvHeads+h)*kvDim + d)
				K[off+d] = genValue(3, logical)
				V[off+d] = genValue(4, logical)
			}
		}
	}
	Q := make([]float32, kvHeads*kvDim)
	for i := range Q {
		Q[i] = kvQuery(i)
	}
	out := make([]float32, kvHeads*kvDim)
	workers := min(e.cfg.Threads, kvHeads)
	ops := make([]uint64, workers)
	e.begin()
	err := runWorkers(workers, workerOpts{name: e.threadName()}, func(id int) error {
		lo, hi := split(kvHeads, workers, id)
		scores := make([]float32, seq)
		var done uint64
		// As in ffn, the first pass completes for the check; each head
		// rewrites its whole output row.
		for pass := 0; !e.stopBefore(pass); pass++ {
			for h := lo; h < hi; h++ {
				if e.stopBefore(pass) {
					break
				}
				if e.cfg.Variant == Bad {
					kvAttendStrided(K, V, Q, out, scores, seq, h)
				} else {
					kvAttendBlocked(K, V, Q, out, scores, seq, h)
				}
				done += uint64(seq)
				e.progress.add(id, uint64(seq))
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
		// As in ffn: no reference check for a stopped run.
		return Result{Ops: total, BytesTouched: total * 2 * kvDim * 4}, nil
	}
	maxErr, ok := kvCheck(out, seq)
	return Result{
		Ops:          total,
		BytesTouched: total * 2 * kvDim * 4,
		Check:        checkf(ok, "max_err=%.2g vs float64 reference, tokens=%d heads=%d", maxErr, seq, kvHeads),
	}, nil
}

var kvScale = float32(1 / math.Sqrt(kvDim))

// kvQuery is element i of the query. Scaled by 4 so attention is peaked,
// as real attention is, rather than a near-uniform average that would
// hide a wrong key.
func kvQuery(i int) float32 { return 4 * genValue(5, uint64(i)) }

// kvAttendStrided reads head h's keys and values token by token from the
// token-major cache.
func kvAttendStrided(K, V, Q, out, scores []float32, seq, h int) {
	q := Q[h*kvDim : h*kvDim+kvDim]
	for t := 0; t < seq; t++ {
		k := K[kvTokenMajor(t, h):][:kvDim]
		var s float32
		for d, x := range q {
			s += x * k[d]
		}
		scores[t] = s * kvScale
	}
	kvSoftmax(scores)
	o := out[h*kvDim : h*kvDim+kvDim]
	clear(o)
	for t := 0; t < seq; t++ {
		v := V[kvTokenMajor(t, h):][:kvDim]
		p := scores[t]
		for d := range o {
			o[d] += p * v[d]
		}
	}
}

// kvAttendBlocked reads head h block by block: each block's keys for this
// head are one contiguous run of n*kvDim floats.
func kvAttendBlocked(K, V, Q, out, scores []float32, seq, h int) {
	q := Q[h*kvDim : h*kvDim+kvDim]
	for b0 := 0; b0 < seq; b0 += kvBlock {
		n := min(kvBlock, seq-b0)
		base := b0*kvHeads*kvDim + h*n*kvDim
		ks := K[base : base+n*kvDim]
		for i := 0; i < n; i++ {
			k := ks[i*kvDim : i*kvDim+kvDim]
			var s float32
			for d, x := range q {
				s += x * k[d]
			}
			scores[b0+i] = s * kvScale
		}
	}
	kvSoftmax(scores)
	o := out[h*kvDim : h*kvDim+kvDim]
	clear(o)
	for b0 := 0; b0 < seq; b0 += kvBlock {
		n := min(kvBlock, seq-b0)
		base := b0*kvHeads*kvDim + h*n*kvDim
		vs := V[base : base+n*kvDim]
		for i := 0; i < n; i++ {
			v := vs[i*kvDim : i*kvDim+kvDim]
			p := scores[b0+i]
			for d := range o {
				o[d] += p * v[d]
			}
		}
	}
}

func kvSoftmax(s []float32) {
	m := float32(math.Inf(-1))
	for _, x := range s {
		m = max(m, x)
	}
	var sum float32
	for i, x := range s {
		e := float32(math.Exp(float64(x - m)))
		s[i] = e
		sum += e
	}
	inv := 1 / sum
	for i := range s {
		s[i] *= inv
	}
}

// kvCheck recomputes attention in float64 from regenerated keys, values
// and queries (never from the workload's layout, so a layout bug fails)
// and returns the largest absolute difference. Outputs are convex
// combinations of values in [-1, 1], so an absolute tolerance fits.
func kvCheck(out []float32, seq int) (maxErr float64, ok bool) {
	scores := make([]float64, seq)
	for h := 0; h < kvHeads; h++ {
		m := math.Inf(-1)
		for t := 0; t < seq; t++ {
			var s float64
			for d := 0; d < kvDim; d++ {
				s += float64(kvQuery(h*kvDim+d)) * float64(genValue(3, uint64((t*kvHeads+h)*kvDim+d)))
			}
			scores[t] = s / math.Sqrt(kvDim)
			m = math.Max(m, scores[t])
		}
		var sum float64
		for t := range scores {
			scores[t] = math.Exp(scores[t] - m)
			sum += scores[t]
		}
		for d := 0; d < kvDim; d++ {
			var o float64
			for t := 0; t < seq; t++ {
				o += scores[t] / sum * float64(genValue(4, uint64((t*kvHeads+h)*kvDim+d)))
			}
			maxErr = math.Max(maxErr, math.Abs(o-float64(out[h*kvDim+d])))
		}
	}
	// float32 sums over seq terms of weights summing to 1: the rounding
	// bound grows with seq; a wrong key or value moves outputs by ~1e-2.
	tol := 4*float64(seq)*math.Ldexp(1, -24) + 1e-6
	return maxErr, maxErr <= tol
}
