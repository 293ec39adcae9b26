package profile

import (
	"encoding/binary"
	"hash/fnv"
)

// HashStack is the Stack.ID the recorder gives a stack
// (collector/window.go): FNV-1a over the kernel flag and each frame's
// function, module and offset, never 0. Format 2.1 does not write an ID
// that equals its stack's hash; an ID that does not (a recording from an
// older recorder, or one rewritten with other ids) is written in full,
// so changing this function costs file size, never correctness.
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
