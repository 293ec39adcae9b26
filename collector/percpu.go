package collector

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// perCPU reads the value at key 0 of a per-CPU array, for every possible
// CPU, once a window. cilium/ebpf's Lookup allocates the kernel's buffer
// and a slice, and decodes each CPU's value through reflection each time:
// on an idle host that was a tenth of the recorder's time, and it grows
// with the CPUs. This reads into a kept buffer with one system call and
// copies each CPU's value out as T, whose layout is the kernel's: T is a
// bpf2go binding (explicit padding), and its size is checked against
// the map's value size.
type perCPU[T any] struct {
	key uint32 // 0; on the heap, as is buf, so the kernel's pointers stay valid
	buf []byte
	out []T
}

// read returns the values by CPU; valid until the next read.
func (p *perCPU[T]) read(m *ebpf.Map) ([]T, error) {
	size := int(unsafe.Sizeof(*new(T)))
	if m.Type() != ebpf.PerCPUArray || int(m.ValueSize()) != size {
		return nil, fmt.Errorf("%v: a per-CPU array of %d-byte values, not %v of %d", m, size, m.Type(), m.ValueSize())
	}
	if p.out == nil {
		n, err := ebpf.PossibleCPU()
		if err != nil {
			return nil, err
		}
		// Each CPU's value starts on 8 bytes (the kernel's stride).
		p.buf, p.out = make([]byte, n*((size+7)&^7)), make([]T, n)
	}
	attr := struct {
		fd         uint32
		_          uint32
		key, value uint64
		flags      uint64
	}{
		fd:    uint32(m.FD()),
		key:   uint64(uintptr(unsafe.Pointer(&p.key))),
		value: uint64(uintptr(unsafe.Pointer(&p.buf[0]))),
	}
	// Raw: a lookup does not block (see rawRead).
	_, _, errno := unix.RawSyscall(unix.SYS_BPF, unix.BPF_MAP_LOOKUP_ELEM, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(p)
	if errno != 0 {
		return nil, fmt.Errorf("%v: lookup: %w", m, errno)
	}
	stride := (size + 7) &^ 7
	for cpu := range p.out {
		p.out[cpu] = *(*T)(unsafe.Pointer(&p.buf[cpu*stride]))
	}
	return p.out, nil
}
