package workloads

import (
	"encoding/binary"
	"math/bits"
)

// align updates 64-byte records in a random order. Misaligned by 4 bytes,
// every record straddles two cache lines, so each update touches two lines
// (two misses when the array does not fit in cache) and one of its words
// is a split load and store; aligned, each record is one line.
var align = &Workload{
	Name:    "align",
	Summary: "64-byte records straddling two cache lines vs aligned to one",
	Variants: map[string]string{
		Bad:  "loads and stores of 64-byte records that straddle two cache lines (records start 4 bytes into a line)",
		Good: "the same records 64-byte aligned: one line each",
	},
	Size: &SizeParam{
		Meaning: "bytes of records",
		Default: 64 << 20,
		Min:     4 << 10,
		Memory:  func(s int64) int64 { return s + 128 },
	},
	Op:      "one read-modify-write of a whole record",
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
				for w := 8; w < recordBytes; w += 8 {
					le.PutUint64(r[w:], le.Uint64(r[w:])+s)
				}
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
	// Each op increments its record's word 0 once, so word 0 summed over
	// all records is the op count.
	var total, sum uint64
	for _, o := range ops {
		total += o
	}
	for i := 0; i < nrec; i++ {
		sum += le.Uint64(word(i, 0))
	}
	return Result{
		Ops:          total,
		BytesTouched: total * recordBytes * 2,
		Check:        checkf(sum == total, "updates=%d records=%d", sum, nrec),
	}, nil
}
