package collector

import (
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/cacheheat/cacheheat/bpf"
)

// Draining the sampled stacks each window: the sample maps (double
// buffered), the kernel's stack maps, and goroutine stacks.

// drainSamples flips the active stack buffer, then takes every sample
// count of the previous buffer with its stacks' addresses and clears that
// buffer's stack map. Samples whose stack cannot be read any more count as
// stack errors.
func (k *kernel) drainSamples() ([]rawSample, uint64, error) {
	old := k.buf
	k.buf ^= 1
	var zero uint32
	if err := k.objs.Ctrl.Put(zero, k.buf); err != nil {
		return nil, 0, fmt.Errorf("switching stack buffers: %w", err)
	}
	keys, cnts, err := k.takeSamples(old)
	if err != nil {
		return nil, 0, err
	}
	sr := stackReader{stacks: k.objs.Stacks0, offcpu: k.objs.OffcpuStacks, read: map[stackRef][]uint64{}}
	if old == 1 {
		sr.stacks = k.objs.Stacks1
	}
	var out []rawSample
	var lost uint64
	for i, key := range keys {
		us, ok1 := sr.stack(key.Slot, key.Ustack)
		ks, ok2 := sr.stack(key.Slot, key.Kstack)
		if key.Gstack != 0 {
			us = k.withGoroutine(us, key.Gstack)
		}
		if (!ok1 || !ok2) && int(key.Slot) != slotOffCPU {
			lost += cnts[i] // a count of samples; off-CPU values are nanoseconds
		}
		out = append(out, rawSample{
			pid: int(key.Pid), tid: int(key.Tid), cpu: int(key.Cpu), slot: int(key.Slot),
			user: us, kernel: ks, count: cnts[i], wait: key.Wait,
		})
	}
	k.drains++
	sr.clear(k.drains%sweepEvery == 0)
	return out, lost, nil
}

// takeSamples reads the sample counts of stack buffer buf and deletes
// them from the samples map.
func (k *kernel) takeSamples(buf uint32) ([]bpf.CacheheatSampleKey, []uint64, error) {
	// Walking the map visits every bucket, which costs milliseconds even
	// when it is empty: a recorder of idle targets skips a buffer in
	// which no key was created since it was last drained (it holds none).
	created, err := k.newKeys(buf)
	if err != nil {
		return nil, nil, err
	}
	if created == k.keysTaken[buf] {
		return nil, nil, nil
	}
	k.keysTaken[buf] = created
	all, counts, err := k.sampleBuf.readAll(k.objs.Samples)
	if err != nil {
		return nil, nil, fmt.Errorf("reading samples: %w", err)
	}
	var keys []bpf.CacheheatSampleKey
	var cnts []uint64
	for i, key := range all {
		if uint32(key.Buf) == buf {
			keys = append(keys, key)
			cnts = append(cnts, counts[i])
		}
	}
	if len(keys) > 0 {
		// Only this process deletes samples, and the programs write to the
		// other buffer now: every key read is still there.
		if _, err := k.objs.Samples.BatchDelete(keys, nil); err != nil {
			return nil, nil, fmt.Errorf("clearing samples: %w", err)
		}
	}
	return keys, cnts, nil
}

// newKeys sums over CPUs the sample keys created in buffer buf so far.
func (k *kernel) newKeys(buf uint32) (uint64, error) {
	var zero uint32
	var st []bpf.CacheheatStatsVal
	if err := k.objs.Stats.Lookup(&zero, &st); err != nil {
		return 0, fmt.Errorf("reading sample stats: %w", err)
	}
	var n uint64
	for _, s := range st {
		n += s.NewKeys[buf&1]
	}
	return n, nil
}

// withGoroutine appends a goroutine's frames to the user stack of the
// thread it is locked to: they continue it, outermost last (see
// go_locked_stack).
func (k *kernel) withGoroutine(us []uint64, id uint32) []uint64 {
	var gs bpf.CacheheatGoStack
	if err := k.objs.Gostacks.Lookup(id, &gs); err != nil {
		return us
	}
	us = append([]uint64(nil), us...) // us may be shared by the stack cache
	for _, pc := range gs.Pc {
		if pc == 0 {
			break
		}
		us = append(us, pc)
	}
	return us
}

// stackRef names a stack: off-CPU samples name stacks of their own map.
type stackRef struct {
	offcpu bool
	id     int32
}

// stackReader reads the stacks of one drain, each once, and remembers
// which ids it read so that they can be cleared.
type stackReader struct {
	stacks *ebpf.Map // the drained buffer's stack map
	offcpu *ebpf.Map // never cleared (see offcpu_stacks)
	read   map[stackRef][]uint64
}

// stack returns a stack's addresses; ok is false when it cannot be read
// any more. A negative id is no stack.
func (sr *stackReader) stack(slot uint16, id int32) ([]uint64, bool) {
	if id < 0 {
		return nil, true
	}
	ref := stackRef{int(slot) == slotOffCPU, id}
	if a, ok := sr.read[ref]; ok {
		return a, a != nil
	}
	m := sr.stacks
	if ref.offcpu {
		m = sr.offcpu
	}
	var raw [bpf.CacheheatSizesMAX_STACK_DEPTH]uint64
	if err := m.Lookup(uint32(id), &raw); err != nil {
		sr.read[ref] = nil
		return nil, false
	}
	var addrs []uint64
	for _, a := range raw {
		if a == 0 {
			break
		}
		addrs = append(addrs, a)
	}
	sr.read[ref] = addrs
	return addrs, true
}

// clear deletes the drained buffer's stack ids: the kernel hands out the
// same ids again for other stacks. The ids the samples named are deleted
// one by one (a stack map has no batch operations); a stack whose sample
// was lost (a full sample map) goes in a sweep of every id.
func (sr *stackReader) clear(sweep bool) {
	if sweep {
		var id uint32
		var raw [bpf.CacheheatSizesMAX_STACK_DEPTH]uint64
		it := sr.stacks.Iterate()
		for it.Next(&id, &raw) {
			sr.read[stackRef{id: int32(id)}] = nil
		}
	}
	for ref := range sr.read {
		// The off-CPU stack map is never cleared (see offcpu_stacks).
		if ref.id >= 0 && !ref.offcpu {
			_ = sr.stacks.Delete(uint32(ref.id))
		}
	}
}

// sweepEvery is how often (in drains) every id of a stack map is cleared.
const sweepEvery = 64
