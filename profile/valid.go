package profile

import "fmt"

// Limits that keep a hostile file from making consumers allocate without
// bound when they index per-CPU arrays by CPU id.
const (
	maxCPUID = 1 << 16
	maxNodes = 1 << 12
)

// CheckValid states the invariants every consumer may rely on:
// CPU ids are in [0, 65536) and unique; every CPU's node exists; per-CPU
// arrays are no longer than MaxCPU()+1; histograms have at most HistBuckets
// buckets; every sample's stacks are defined; windows are in time order;
// every window's function is one the header lists, its buckets are
// histogram buckets and its sums no more than the function's counters.
func (r *Recording) CheckValid() error {
	funcs, err := r.Header.checkValid()
	if err != nil {
		return err
	}
	ncpu := r.Header.Host.Topology.MaxCPU() + 1
	var prevEnd int64
	for i := range r.Windows {
		if err := checkWindow(i, &r.Windows[i], prevEnd, ncpu, funcs, r.Stacks); err != nil {
			return err
		}
		prevEnd = r.Windows[i].EndNS
	}
	return nil
}

// checkValid checks the header's invariants (CheckValid) and returns the
// number of counters of each --func function by id.
func (h *Header) checkValid() (map[int]int, error) {
	funcs := map[int]int{} // id -> counters
	for _, f := range h.Functions {
		if _, dup := funcs[f.ID]; dup {
			return nil, fmt.Errorf("function id %d listed twice", f.ID)
		}
		funcs[f.ID] = len(f.Counters)
	}
	t := &h.Host.Topology
	seen := map[int]bool{}
	nodes := map[int]bool{}
	for _, n := range t.Nodes {
		if n.ID < 0 || n.ID >= maxNodes {
			return nil, fmt.Errorf("node id %d out of range", n.ID)
		}
		nodes[n.ID] = true
	}
	for _, c := range t.CPUs {
		if c.ID < 0 || c.ID >= maxCPUID {
			return nil, fmt.Errorf("cpu id %d out of range", c.ID)
		}
		if seen[c.ID] {
			return nil, fmt.Errorf("cpu %d listed twice", c.ID)
		}
		seen[c.ID] = true
		if !nodes[c.Node] {
			return nil, fmt.Errorf("cpu %d is on node %d, which the topology does not list", c.ID, c.Node)
		}
	}
	return funcs, nil
}

// checkWindow checks window i's invariants (CheckValid) against the window
// before it (prevEnd), the topology's CPU count, the header's functions
// and the stacks defined so far.
func checkWindow(i int, w *Window, prevEnd int64, ncpu int, funcs map[int]int, stacks map[uint64]Stack) error {
	if w.EndNS < w.StartNS || w.StartNS < prevEnd {
		return fmt.Errorf("window %d: time range [%d, %d] out of order", i, w.StartNS, w.EndNS)
	}
	for _, c := range w.Counters {
		if len(c.PerCPU) > ncpu || len(c.HostPerCPU) > ncpu {
			return fmt.Errorf("window %d: event %q has counts for more CPUs than the topology's %d", i, c.Event, ncpu)
		}
	}
	for _, h := range w.Histograms {
		if len(h.PerCPU) > ncpu {
			return fmt.Errorf("window %d: histogram %q has more CPUs than the topology's %d", i, h.Name, ncpu)
		}
		for _, b := range h.PerCPU {
			if len(b) > HistBuckets {
				return fmt.Errorf("window %d: histogram %q has %d buckets, at most %d allowed", i, h.Name, len(b), HistBuckets)
			}
		}
	}
	for _, f := range w.Functions {
		nc, ok := funcs[f.ID]
		if !ok {
			return fmt.Errorf("window %d: function id %d is not in the header", i, f.ID)
		}
		for _, b := range f.Buckets {
			if b.Bucket < 0 || b.Bucket >= HistBuckets || len(b.Sums) > nc {
				return fmt.Errorf("window %d: function %d has bucket %d with %d sums (at most %d buckets, %d counters)", i, f.ID, b.Bucket, len(b.Sums), HistBuckets, nc)
			}
		}
	}
	for _, s := range w.Samples {
		if s.CPU < 0 || s.CPU >= ncpu {
			return fmt.Errorf("window %d: sample on cpu %d outside the topology", i, s.CPU)
		}
		for _, id := range []uint64{s.UserStack, s.KernelStack} {
			if id != 0 {
				if _, ok := stacks[id]; !ok {
					return fmt.Errorf("window %d: sample references undefined stack %d", i, id)
				}
			}
		}
	}
	if len(w.IdleNS) > ncpu {
		return fmt.Errorf("window %d: idle time of more CPUs than the topology's %d", i, ncpu)
	}
	if o := w.OffCPU; o != nil {
		for _, s := range o.Stacks {
			for _, id := range []uint64{s.UserStack, s.KernelStack} {
				if _, ok := stacks[id]; id != 0 && !ok {
					return fmt.Errorf("window %d: off-cpu stack references undefined stack %d", i, id)
				}
			}
		}
	}
	return nil
}

// MaxCPU is the largest online CPU id, or -1 without CPUs.
func (t *Topology) MaxCPU() int {
	m := -1
	for _, c := range t.CPUs {
		m = max(m, c.ID)
	}
	return m
}

// NodeOf returns the NUMA node of each CPU id (index = CPU id, -1 where the
// CPU is not online).
func (t *Topology) NodeOf() []int {
	n := make([]int, t.MaxCPU()+1)
	for i := range n {
		n[i] = -1
	}
	for _, c := range t.CPUs {
		n[c.ID] = c.Node
	}
	return n
}

// String renders a frame as perf does: the function, or module+0xoffset
// when the address could not be resolved.
func (f Frame) String() string {
	if f.Function != "" {
		return f.Function
	}
	if f.Module == "" {
		return fmt.Sprintf("[unknown]+0x%x", f.Offset)
	}
	return fmt.Sprintf("%s+0x%x", f.Module, f.Offset)
}
