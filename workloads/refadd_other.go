//go:build !amd64

package workloads

import "encoding/binary"

// refAdd adds delta to the little-endian uint64 in b[:8]. Outside x86 a
// misaligned atomic faults, so the reference count is a plain
// read-modify-write there: only the split loads and stores remain.
func refAdd(b []byte, delta uint64) {
	binary.LittleEndian.PutUint64(b, binary.LittleEndian.Uint64(b)+delta)
}
