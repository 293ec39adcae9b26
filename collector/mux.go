package collector

import (
	"sync"
	"time"
)

// rotator multiplexes the simulated PMU's stand-ins the way the kernel
// multiplexes a real PMU: when more events are counted than the PMU has
// general counters, only `counters` of them count at a time, and every
// interval the next ones take their place (round robin over the slots, as
// perf_rotate_context rotates its event list). A counter out of its turn
// is disabled, so the kernel's running time of each stand-in is the time it
// really counted; its enabled time is the reference slot's (see
// enabled_ref_slot in bpf/cacheheat.c), and the pipeline scales its counts
// by enabled / running exactly as it scales a real multiplexed counter.
type rotator struct {
	slots    []int            // the rotated slots, in order
	counters int              // how many count at a time
	pcs      [][]*perfCounter // [slot][cpu index]
	turn     int
	active   map[int]bool

	stop chan struct{}
	done sync.WaitGroup
	err  error // the first enable/disable error, for close
	mu   sync.Mutex
}

func newRotator(slots []int, counters int, pcs [][]*perfCounter) *rotator {
	return &rotator{slots: slots, counters: counters, pcs: pcs, active: map[int]bool{}, stop: make(chan struct{})}
}

// due returns the slots that count in turn t.
func (r *rotator) due(t int) map[int]bool {
	out := map[int]bool{}
	n := len(r.slots)
	for j := 0; j < r.counters && j < n; j++ {
		out[r.slots[(t*r.counters+j)%n]] = true
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
	if err := r.apply(r.due(0)); err != nil {
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
			r.turn++
			if err := r.apply(r.due(r.turn)); err != nil {
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
