package workloads

import (
	"encoding/binary"
	"math/bits"
)

// align updates 64-byte records in a random order, as a table of
// reference-counted entries is updated: every word of the record is read
// and written, and its reference count (the last word) is bumped with an
// atomic add. Misaligned by 4 bytes, every record straddles two cache
// lines, its last word is split across them, and the locked add on a split
// word is a split lock: the core must lock both lines (on most CPUs the
// whole memory bus) instead of one. Plain split loads and stores cost
// little on modern cores (measured here: about 1.1x); the locked
// operation is what a misaligned layout really costs. Aligned, each record
// is one line.
var align = &Workload{
	Name:    "align",
	Summary: "64-byte records straddling two cache lines vs aligned to one",
	Variants: map[string]string{
		Bad:  "64-byte records that straddle two cache lines (they start 4 bytes into a line): loads, stores and an atomic reference count split across lines (a split lock)",
		Good: "the same records 64-byte aligned: one line each, the atomic add stays in one line",
	},
	Size: &SizeParam{
		Meaning: "bytes of records",
		Default: 64 << 20,
		Min:     4 << 10,
		Memory:  func(s int64) int64 { return s + 128 },
	},
	Op:      "one read-modify-write of a whole record plus an atomic add of its reference count",
	Threads: true,
	run:     runAlign,
}

const (
	recordBytes = 64
	alignBatch  = 1 << 12
)

func runAlign(e *env) (Result, error) {
	nrec := int(e.cfg.Size / recordBytes)
	offset := 0
	if e.cfg.Variant == Bad {
		offset = 4
	}
	buf := alignedBytes(nrec*recordBytes, 64, offset)
	// Words are read through byte slices: on amd64 this is one unaligned
	// load or store, and it stays legal for Go's pointer checks.
	le := binary.LittleEndian
	word := func(i, w int) []byte { return buf[i*recordBytes+w*8 : i*recordBytes+w*8+8] }
	// Touch every page before timing: first-touch faults (slow in a VM)
	// are not the effect under test.
	for i := range buf {
		buf[i] = 0
	}
	n := e.cfg.Threads
	if n > nrec {
		n = nrec
	}
	ops := make([]uint64, n)
	e.begin()
	err := runWorkers(n, workerOpts{name: e.threadName()}, func(id int) error {
		lo, hi := split(nrec, n, id)
		span := uint64(hi - lo)
		x := uint64(id)*0x9E3779B97F4A7C15 + 1
		var done uint64
		for !e.done() {
			for i := 0; i < alignBatch; i++ {
				// xorshift picks the next record: a random order
				// defeats the prefetcher, as hash lookups do.
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				// Multiply-shift maps x onto [0, span) without a
				// division, which would otherwise bound the loop.
				hi64, _ := bits.Mul64(x, span)
				r := buf[(lo+int(hi64))*recordBytes:][:recordBytes]
				// Every word is read and written, so a straddling
				// record really costs both of its lines.
				s := le.Uint64(r) + 1
				le.PutUint64(r, s)
				for w := 8; w < recordBytes-8; w += 8 {
					le.PutUint64(r[w:], le.Uint64(r[w:])+s)
				}
				refAdd(r[recordBytes-8:], 1)
			}
			done += alignBatch
			e.progress.add(id, alignBatch)
		}
		ops[id] = done
		return nil
	})
	e.ended()
	if err != nil {
		return Result{}, err
	}
	// Each op increments its record's word 0 and its reference count once,
	// so both summed over all records are the op count.
	var total, sum, refs uint64
	for _, o := range ops {
		total += o
	}
	for i := 0; i < nrec; i++ {
		sum += le.Uint64(word(i, 0))
		refs += le.Uint64(word(i, recordBytes/8-1))
	}
	return Result{
		Ops:          total,
		BytesTouched: total * recordBytes * 2,
		Check:        checkf(sum == total && refs == total, "updates=%d refs=%d records=%d", sum, refs, nrec),
	}, nil
}
