package collector

import (
	"sync"
	"time"
)

// rotator multiplexes the simulated PMU's stand-ins the way the kernel
// multiplexes a real PMU: when more events are counted than the PMU has
// general counters, only `counters` of them count at a time, each on a
// counter its mask allows, and every interval the next ones take their
// place (round robin over the slots, as perf_rotate_context rotates its
// event list; an event that cannot get a counter in a turn waits for the
// next, where it comes first). A counter out of its turn
// is disabled, so the kernel's running time of each stand-in is the time it
// really counted; its enabled time is the reference slot's (see
// enabled_ref_slot in bpf/cacheheat.c), and the pipeline scales its counts
// by enabled / running exactly as it scales a real multiplexed counter.
type rotator struct {
	slots    []int            // the rotated slots, in order
	masks    []uint64         // each slot's counters (Event.Counters; 0: any)
	counters int              // how many count at a time
	pcs      [][]*perfCounter // [slot][cpu index]
	from     int              // the index in slots the next turn begins at
	active   map[int]bool
	// placed is the last turn's counter of each slot counting (for the
	// tests: every event only on a counter its mask allows).
	placed map[int]int

	stop chan struct{}
	done sync.WaitGroup
	err  error // the first enable/disable error, for close
	mu   sync.Mutex
}

func newRotator(slots []int, masks []uint64, counters int, pcs [][]*perfCounter) *rotator {
	if masks == nil {
		masks = make([]uint64, len(slots))
	}
	return &rotator{slots: slots, masks: masks, counters: counters, pcs: pcs, active: map[int]bool{}, stop: make(chan struct{})}
}

// next returns the slots that count in the next turn: from where the last
// turn stopped, each slot in order that can join those already taken (a
// counter assignment still exists), until the counters are full or every
// slot was tried. The next turn starts at the first slot passed over for
// want of a counter it may use, so that it comes first then; else after
// the last one taken.
func (r *rotator) next() map[int]bool {
	n := len(r.slots)
	var take []int // indices into slots
	var masks []uint64
	skipped, last := -1, r.from
	for j := 0; j < n && len(take) < r.counters; j++ {
		i := (r.from + j) % n
		if _, ok := assignCounters(append(masks, r.masks[i]), r.counters); !ok {
			if skipped < 0 {
				skipped = i
			}
			continue
		}
		take = append(take, i)
		masks = append(masks, r.masks[i])
		last = i
	}
	assigned, _ := assignCounters(masks, r.counters)
	out := map[int]bool{}
	r.placed = map[int]int{}
	for k, i := range take {
		out[r.slots[i]] = true
		r.placed[r.slots[i]] = assigned[k]
	}
	r.from = (last + 1) % max(n, 1)
	if skipped >= 0 {
		r.from = skipped
	}
	return out
}

// apply disables the slots leaving and enables the slots joining, on every
// CPU.
func (r *rotator) apply(next map[int]bool) error {
	for slot := range r.active {
		if !next[slot] {
			for _, pc := range r.pcs[slot] {
				if err := pc.disable(); err != nil {
					return err
				}
			}
		}
	}
	for slot := range next {
		if !r.active[slot] {
			for _, pc := range r.pcs[slot] {
				if err := pc.enable(); err != nil {
					return err
				}
			}
		}
	}
	r.active = next
	return nil
}

// start enables the first turn and rotates every interval until close.
func (r *rotator) start(interval time.Duration) error {
	if err := r.apply(r.next()); err != nil {
		return err
	}
	r.done.Add(1)
	go func() {
		defer r.done.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-t.C:
			}
			if err := r.apply(r.next()); err != nil {
				r.mu.Lock()
				r.err = err
				r.mu.Unlock()
				return
			}
		}
	}()
	return nil
}

// close stops the rotation; the counters themselves are closed with the
// kernel's.
func (r *rotator) close() error {
	if r == nil {
		return nil
	}
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.done.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
