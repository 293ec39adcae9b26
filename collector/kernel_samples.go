package collector

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/cacheheat/cacheheat/bpf"
)

// Draining the sampled stacks: the BPF programs send every sample through
// one ring buffer (sample_ring in bpf/cacheheat.c); a goroutine reads it
// and aggregates the records by thread, CPU and stack, and each window
// takes what it aggregated. The kernel wakes the goroutine only when the
// ring is half full, so it sleeps from window to window; a window in which
// no record came wakes nothing.

// Sizes of the sample ring: ringBytesPerCPU for each possible CPU, a power
// of two between the bounds. A CPU sample's record is its header (48
// bytes) and its frames, 8 bytes each: ~400 bytes for a 40-frame stack, so
// a CPU holds about 160 of those before the reader is woken at half, more
// than a second of samples at 99 Hz; at any rate the reader is woken
// before the ring fills unless it cannot keep up, when records are
// dropped and counted.
const (
	ringBytesPerCPU = 64 << 10
	ringBytesMin    = 256 << 10
	ringBytesMax    = 16 << 20
)

// ringBytes is the sample ring's size for possible CPUs.
func ringBytes(possible int) uint32 {
	n := uint32(ringBytesMin)
	for n < ringBytesMax && n < uint32(possible)*ringBytesPerCPU {
		n <<= 1
	}
	return n
}

// sampleAgg is what samples are aggregated by: a CPU sample's stacks are
// an index into the aggregate's stacks (their addresses' bytes), an
// off-CPU sample's the ids of its stacks in offcpu_stacks (never cleared
// while recording) and its goroutine's stack, or for a user stack that
// came through the ring (ustack ownUstack) an index into the stacks too.
type sampleAgg struct {
	pid, tid, cpu  uint32
	slot           uint16
	wait, gstack   uint32
	ustack, kstack int32
	stack          int32 // index in aggregate.stacks; -1: none
}

// aggregate is what the reader aggregated since the last take.
type aggregate struct {
	counts map[sampleAgg]uint64
	// stacks are the CPU samples' distinct stack pairs: the kernel
	// stack's bytes then the user stack's, as the record carries them.
	stacks []stackPair
	index  map[string]int32 // stacks by their bytes
	// bad counts records too short to be ours and off-CPU samples whose
	// user stack record was not seen (neither expected).
	bad uint64
}

type stackPair struct {
	frames string
	klen   int
}

// newAggregate sizes the maps for about as many keys and stacks as the
// last window had: grown from empty each window, their growth and
// allocation were 6% of a perf profile of rcu bad's recorder under -a.
func newAggregate(keys, stacks int) *aggregate {
	return &aggregate{counts: make(map[sampleAgg]uint64, keys), index: make(map[string]int32, stacks)}
}

// sampleReader reads the sample ring into aggregated samples.
type sampleReader struct {
	rd      *ringbuf.Reader
	wg      sync.WaitGroup
	flushed chan struct{} // the reader read every record sent before a Flush
	failed  error         // why the reader stopped, set before wg.Done

	mu  sync.Mutex
	agg *aggregate
	// records counts the records aggregated since the last take: with the
	// ring empty too, nothing happened and take does not wake the reader.
	records atomic.Uint64
	// woke hears of each SLOT_WAKE record, without waiting: the target
	// ran while the recorder slept through a quiet window (quiet.go).
	woke chan struct{}
	// pending holds each thread's last off-CPU user stack (its bytes)
	// until the off-CPU sample it belongs to: the stack is sent at the
	// switch-out, the sample at the switch-in, later in the same ring.
	pending map[uint32]string
}

// maxPending bounds sampleReader.pending: a thread that exits blocked
// never sends its sample. Past it the stacks held are dropped, and a
// sample that then finds none is counted (aggregate.bad).
const maxPending = 1 << 16

func newSampleReader(ring *ebpf.Map) (*sampleReader, error) {
	rd, err := ringbuf.NewReader(ring)
	if err != nil {
		return nil, fmt.Errorf("opening the sample ring: %w", err)
	}
	r := &sampleReader{rd: rd, flushed: make(chan struct{}), agg: newAggregate(0, 0), woke: make(chan struct{}, 1), pending: map[uint32]string{}}
	r.wg.Add(1)
	go r.run()
	return r, nil
}

var sampleRecSize = int(unsafe.Sizeof(bpf.CacheheatSampleRec{}))

// run reads records until the reader is closed.
func (r *sampleReader) run() {
	defer r.wg.Done()
	var rec ringbuf.Record
	for {
		err := r.rd.ReadInto(&rec)
		switch {
		case err == nil:
			r.add(rec.RawSample)
		case errors.Is(err, ringbuf.ErrFlushed):
			r.flushed <- struct{}{}
		case errors.Is(err, os.ErrClosed), errors.Is(err, ringbuf.ErrClosed):
			return
		default:
			r.failed = err
			close(r.flushed)
			return
		}
	}
}

// add aggregates one record, or passes a wake record on.
func (r *sampleReader) add(raw []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.agg
	if len(raw) < sampleRecSize {
		a.bad++
		return
	}
	h := (*bpf.CacheheatSampleRec)(unsafe.Pointer(&raw[0]))
	if int(h.Slot) == slotWake {
		select {
		case r.woke <- struct{}{}:
		default: // one is waiting already
		}
		return
	}
	if int(h.Slot) == slotOffCPUUstack {
		n := int(h.Ulen)
		if len(raw) < sampleRecSize+n {
			a.bad++
			return
		}
		if len(r.pending) >= maxPending {
			clear(r.pending)
		}
		r.pending[h.Tid] = string(raw[sampleRecSize : sampleRecSize+n])
		return
	}
	k := sampleAgg{pid: h.Pid, tid: h.Tid, cpu: h.Cpu, slot: h.Slot, wait: h.Wait, gstack: h.Gstack, ustack: h.Ustack, kstack: h.Kstack, stack: -1}
	if int(h.Slot) == slotOffCPU && h.Ustack == ownUstack {
		frames, ok := r.pending[h.Tid]
		delete(r.pending, h.Tid)
		if !ok {
			a.bad++
			k.ustack = -1 // the time stays, without its user stack
		} else {
			k.stack = a.intern(frames, 0)
		}
	} else if int(h.Slot) != slotOffCPU {
		n := int(h.Klen) + int(h.Ulen)
		if len(raw) < sampleRecSize+n {
			a.bad++
			return
		}
		var frames string // the record's bytes, not copied to look up
		if n > 0 {
			frames = unsafe.String(&raw[sampleRecSize], n)
		}
		k.stack = a.intern(frames, int(h.Klen))
	}
	a.counts[k] += h.Value
	r.records.Add(1)
}

// intern returns the index of the stack pair of these bytes, the first
// klen of them the kernel stack's, adding it the first time. frames may
// point into a record: it is copied only when added.
func (a *aggregate) intern(frames string, klen int) int32 {
	if i, ok := a.index[frames]; ok && a.stacks[i].klen == klen {
		return i
	}
	i := int32(len(a.stacks))
	a.stacks = append(a.stacks, stackPair{frames: strings.Clone(frames), klen: klen})
	a.index[a.stacks[i].frames] = i
	return i
}

// take returns the samples aggregated since the last take, after reading
// every record sent so far. When none was aggregated and the ring is
// empty it returns at once, waking nobody. A record the reader has taken
// off the ring but not yet aggregated is then left for the next window:
// late by one window, never lost.
func (r *sampleReader) take() (*aggregate, error) {
	if r.records.Load() == 0 && r.rd.AvailableBytes() == 0 {
		return newAggregate(0, 0), nil
	}
	if err := r.rd.Flush(); err != nil {
		return nil, fmt.Errorf("flushing the sample ring: %w", err)
	}
	if _, ok := <-r.flushed; !ok {
		return nil, fmt.Errorf("reading the sample ring: %w", r.failed)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.agg
	r.agg = newAggregate(len(a.counts), len(a.stacks))
	r.records.Store(0)
	return a, nil
}

// clearWake forgets a wake record heard before the recorder armed the
// next one.
func (r *sampleReader) clearWake() {
	select {
	case <-r.woke:
	default:
	}
}

// close stops the reader.
func (r *sampleReader) close() error {
	if r == nil {
		return nil
	}
	err := r.rd.Close()
	r.wg.Wait()
	return err
}

// drainSamples returns the samples sent since the last drain with their
// stacks' addresses, and how many records could not be read.
func (k *kernel) drainSamples() ([]rawSample, uint64, error) {
	a, err := k.samples.take()
	if err != nil {
		return nil, 0, err
	}
	stacks := make([][2][]uint64, len(a.stacks)) // kernel, user
	for i, p := range a.stacks {
		stacks[i] = [2][]uint64{addrs(p.frames[:p.klen]), addrs(p.frames[p.klen:])}
	}
	out := make([]rawSample, 0, len(a.counts))
	for key, v := range a.counts {
		s := rawSample{pid: int(key.pid), tid: int(key.tid), cpu: int(key.cpu), slot: int(key.slot), count: v, wait: key.wait}
		if int(key.slot) == slotOffCPU {
			if key.stack >= 0 { // a user stack through the ring
				s.user = stacks[key.stack][1]
			} else {
				s.user = k.offcpuStack(key.ustack)
			}
			s.kernel = k.offcpuStack(key.kstack)
			if key.gstack != 0 {
				s.user = k.withGoroutine(s.user, key.gstack)
			}
		} else if key.stack >= 0 {
			s.kernel, s.user = stacks[key.stack][0], stacks[key.stack][1]
		}
		out = append(out, s)
	}
	return out, a.bad, nil
}

// addrs decodes a stack's bytes (bpf_get_stack's output, native order).
func addrs(b string) []uint64 {
	if len(b) == 0 {
		return nil
	}
	out := make([]uint64, len(b)/8)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(out)*8), b)
	return out
}

// offcpuStack reads an off-CPU stack by id, each id once a recording:
// offcpu_stacks is never cleared while recording and its stacks are never
// replaced (an id taken by another stack is an error, not an overwrite),
// so an id names one stack throughout and is read once, not every window.
// A negative id is no stack; an id that cannot be read (never expected)
// gives none.
func (k *kernel) offcpuStack(id int32) []uint64 {
	if id < 0 {
		return nil
	}
	if a, ok := k.offcpuStacks[id]; ok {
		return a
	}
	var raw [bpf.CacheheatSizesMAX_STACK_DEPTH]uint64
	if err := k.objs.OffcpuStacks.Lookup(uint32(id), &raw); err != nil {
		return nil
	}
	var a []uint64
	for _, pc := range raw {
		if pc == 0 {
			break
		}
		a = append(a, pc)
	}
	if k.offcpuStacks == nil {
		k.offcpuStacks = map[int32][]uint64{}
	}
	k.offcpuStacks[id] = a
	return a
}

// withGoroutine appends a goroutine's frames to the user stack of the
// thread it is locked to: they continue it, outermost last (see
// go_locked_stack).
func (k *kernel) withGoroutine(us []uint64, id uint32) []uint64 {
	var gs bpf.CacheheatGoStack
	if err := k.objs.Gostacks.Lookup(id, &gs); err != nil {
		return us
	}
	us = append([]uint64(nil), us...) // us is shared by the drain's stack cache
	for _, pc := range gs.Pc {
		if pc == 0 {
			break
		}
		us = append(us, pc)
	}
	return us
}
