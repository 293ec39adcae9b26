package workloads

import (
	"sync/atomic"
	"unsafe"
)

// refAdd atomically adds delta to the little-endian uint64 in b[:8], which
// may straddle two cache lines: x86 executes a locked add on any address,
// and on a split one it takes a split lock, the cost the align workload
// shows. checkptr (go test -race) would reject the misaligned conversion,
// hence nocheckptr; the pointer is in bounds of b.
//
//go:nocheckptr
func refAdd(b []byte, delta uint64) {
	_ = b[7]
	atomic.AddUint64((*uint64)(unsafe.Pointer(&b[0])), delta)
}
