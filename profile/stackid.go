package profile

import (
	"encoding/binary"
	"hash/fnv"
)

// HashStack is the Stack.ID the recorder gives a stack (collector/window.go
// computes the same): FNV-1a over the kernel flag and each frame's
// function, module and offset, never 0. Format 2.1 does not write an ID
// that equals its stack's hash, so the recorder and this must stay the
// same function; a recorder that changes its ids costs only file size
// (each id is then written), never correctness.
func HashStack(kernel bool, frames []Frame) uint64 {
	h := fnv.New64a()
	var b [8]byte
	if kernel {
		h.Write([]byte{'k'})
	}
	for _, f := range frames {
		h.Write([]byte(f.Function))
		h.Write([]byte{0})
		h.Write([]byte(f.Module))
		h.Write([]byte{0})
		binary.LittleEndian.PutUint64(b[:], f.Offset)
		h.Write(b[:])
	}
	if id := h.Sum64(); id != 0 {
		return id
	}
	return 1
}
