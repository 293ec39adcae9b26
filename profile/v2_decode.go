package profile

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// The v2 reader's side: the tables as read so far, and the window's
// definitions and body decoded against them, every length and
// reference checked (docs/FORMAT.md, "What a reader checks").

// tables2 is the reader's side of the v2 tables. Entries are only
// appended, so a copy of the slice headers taken after a window's
// definitions stays valid for decoding that window's body while later
// windows add entries.
type tables2 struct {
	strings []string
	lists   [][]string
	frames  []Frame
	nodes   []node
	stacks  []uint64      // table index to Stack.ID
	procs   []proc        // format 2.1
	samples []Sample      // format 2.1: rows without counts
	offcpu  []OffCPUStack // format 2.1: rows without times
	// lastFunc is the function string id of the last frame (format 2.1
	// writes the next one as a difference).
	lastFunc uint64
}

// proc is a processes table entry.
type proc struct {
	pid     int
	comm    string
	cmdline []string
}

// node is one call-tree node: a frame and its caller's node.
type node struct {
	parent int32 // node index + 1; 0: the root
	frame  int32
	depth  int32 // frames from the root to this node, itself included
}

// dec2 reads varints from one record and remembers the first error, so
// the decoding code reads straight through and checks once. Every
// allocation is sized by a count that is checked against the bytes left
// (each element takes at least one byte) or against budget.
type dec2 struct {
	b   []byte
	err error
	// budget is how many more count values the record may allocate: a
	// run of zeros costs one byte for any length, so lengths alone do not
	// bound memory.
	budget int
	// minor is the file's format minor version: 0 is the layout before
	// the processes table, count-map key lists, dense arrays and the
	// off-CPU section (docs/FORMAT.md, "Format 2.0").
	minor int
}

var errCorrupt = errors.New("corrupt window")

func (d *dec2) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{errCorrupt}, args...)...)
	}
}

func (d *dec2) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec2) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// int reads a signed value that must fit an int32 (pids, cpus).
func (d *dec2) int(delta int64) int {
	v := d.varint() + delta
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail("value %d out of range", v)
		return 0
	}
	return int(v)
}

func (d *dec2) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("short record")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// count reads an element count; each element takes at least min bytes.
func (d *dec2) count(min int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/min) {
		d.fail("count %d exceeds the record", n)
		return 0
	}
	return int(n)
}

// length reads an appendLen value: -1 for nil.
func (d *dec2) length(min int) int {
	n := d.uvarint()
	if n == 0 {
		return -1
	}
	if n-1 > uint64(len(d.b)/min) {
		d.fail("length %d exceeds the record", n-1)
		return -1
	}
	return int(n - 1)
}

func (d *dec2) float() float64 {
	return math.Float64frombits(bits.ReverseBytes64(d.uvarint()))
}

func (d *dec2) ref(n int) uint64 {
	v := d.uvarint()
	if v >= uint64(n) {
		d.fail("reference %d past a table of %d", v, n)
		return 0
	}
	return v
}

func (d *dec2) str(t *tables2) string {
	if i := d.ref(len(t.strings)); d.err == nil {
		return t.strings[i]
	}
	return ""
}

// maxCounts caps one per-CPU or per-bucket array: CPU ids are below 65536
// (CheckValid).
const maxCounts = 1 << 16

func (d *dec2) counts(prev Counts) Counts {
	tag := d.uvarint()
	switch {
	case d.err != nil || tag == 0:
		return nil
	case tag == countsSame:
		// Shared, not copied: a read recording is never modified, and
		// under -a this halves the counters' memory.
		return prev
	}
	n := tag - 2
	if n > maxCounts || int(n) > d.budget {
		d.fail("array of %d values exceeds the limit", n)
		return nil
	}
	d.budget -= int(n)
	c := make(Counts, n)
	if d.minor >= 1 {
		return d.counts21(c)
	}
	nz := d.count(2)
	i := uint64(0)
	for range nz {
		i += d.uvarint()
		if i >= n {
			d.fail("array index %d past its length %d", i, n)
			return nil
		}
		c[i] = d.uvarint()
		i++
	}
	return c
}

// counts21 reads the values of an array of format 2.1 into c: sparse or
// dense (appendCounts).
func (d *dec2) counts21(c Counts) Counts {
	k := d.uvarint()
	if k%2 == 0 {
		if k/2 > uint64(len(d.b)/2) {
			d.fail("count %d exceeds the record", k/2)
			return nil
		}
		i := uint64(0)
		for range k / 2 {
			i += d.uvarint()
			if i >= uint64(len(c)) {
				d.fail("array index %d past its length %d", i, len(c))
				return nil
			}
			c[i] = d.uvarint()
			i++
		}
		return c
	}
	first := d.uvarint()
	if k/2 > uint64(len(d.b)) || first > uint64(len(c)) || k/2 > uint64(len(c))-first {
		d.fail("dense run of %d values from %d in an array of %d", k/2, first, len(c))
		return nil
	}
	for i := range k / 2 {
		c[first+i] = d.uvarint()
	}
	return c
}

// defs reads a window's definitions into t and returns the stacks the
// window defines.
func (d *dec2) defs(t *tables2) []Stack {
	n := d.count(1)
	for range n {
		l := d.count(1)
		if d.err != nil {
			return nil
		}
		t.strings = append(t.strings, string(d.b[:l]))
		d.b = d.b[l:]
	}
	n = d.count(1)
	for range n {
		l := d.count(1)
		list := make([]string, l)
		for i := range list {
			list[i] = d.str(t)
		}
		t.lists = append(t.lists, list)
	}
	d.frameDefs(t)
	d.nodeDefs(t)
	stacks := d.stackDefs(t)
	if d.minor >= 1 {
		n = d.count(3)
		for range n {
			t.procs = append(t.procs, d.procDef(t))
		}
		n = d.count(6)
		for range n {
			t.samples = append(t.samples, d.sampleKey(t))
		}
		n = d.count(5)
		for range n {
			t.offcpu = append(t.offcpu, d.offKey(t))
		}
	}
	return stacks
}

func (d *dec2) frameDefs(t *tables2) {
	n := d.count(4)
	for range n {
		var f Frame
		if d.minor >= 1 {
			fn := t.lastFunc + uint64(d.varint())
			if d.err != nil || fn >= uint64(len(t.strings)) {
				d.fail("function %d past a table of %d strings", fn, len(t.strings))
				return
			}
			f.Function, t.lastFunc = t.strings[fn], fn
		} else {
			f.Function = d.str(t)
		}
		f.Module = d.str(t)
		f.Offset = d.uvarint()
		f.BuildID = d.str(t)
		t.frames = append(t.frames, f)
	}
}

func (d *dec2) nodeDefs(t *tables2) {
	n := d.count(2)
	for range n {
		var parent, frame uint64 // parent: node index + 1, 0 the root
		if d.minor >= 1 {
			k := uint64(len(t.nodes))
			if back := d.uvarint(); back > 0 {
				if back > k {
					d.fail("node %d's parent is %d nodes before the first", k, back)
					return
				}
				parent = k + 1 - back
			}
			frame = uint64(d.varint())
			if k > 0 {
				frame += uint64(t.nodes[k-1].frame)
			}
			if frame >= uint64(len(t.frames)) {
				d.fail("reference %d past a table of %d", frame, len(t.frames))
				return
			}
		} else {
			parent = d.ref(len(t.nodes) + 1)
			frame = d.ref(len(t.frames))
		}
		if d.err != nil {
			return
		}
		nd := node{parent: int32(parent), frame: int32(frame), depth: 1}
		if parent > 0 {
			nd.depth = t.nodes[parent-1].depth + 1
		}
		t.nodes = append(t.nodes, nd)
	}
}

func (d *dec2) stackDefs(t *tables2) []Stack {
	n := d.count(2)
	var stacks []Stack
	if n > 0 {
		stacks = make([]Stack, 0, n)
	}
	for range n {
		var s Stack
		flags := byte(stackIDFollows)
		if d.minor >= 1 {
			flags = d.byte()
			s.Kernel = flags&stackKernel != 0
			if flags&^(stackKernel|stackIDFollows) != 0 {
				d.fail("stack flags %#x", flags)
			}
		} else {
			s.ID, s.Kernel = d.uvarint(), d.byte() != 0
		}
		switch leaf := d.ref(len(t.nodes) + 2); {
		case d.err != nil:
		case leaf == 1:
			s.Frames = []Frame{}
		case leaf >= 2:
			nd := t.nodes[leaf-2]
			if int(nd.depth) > d.budget {
				d.fail("stack of %d frames exceeds the limit", nd.depth)
				break
			}
			d.budget -= int(nd.depth)
			// Leaf to root is innermost first, the order of Frames.
			s.Frames = make([]Frame, 0, nd.depth)
			for {
				s.Frames = append(s.Frames, t.frames[nd.frame])
				if nd.parent == 0 {
					break
				}
				nd = t.nodes[nd.parent-1]
			}
		}
		switch {
		case d.minor < 1:
		case flags&stackIDFollows != 0:
			s.ID = d.uvarint()
		default:
			s.ID = HashStack(s.Kernel, s.Frames)
		}
		t.stacks = append(t.stacks, s.ID)
		stacks = append(stacks, s)
	}
	return stacks
}

func (d *dec2) procDef(t *tables2) proc {
	p := proc{pid: d.int(0), comm: d.str(t)}
	p.cmdline = d.list(t)
	return p
}

func (d *dec2) sampleKey(t *tables2) Sample {
	s := Sample{Event: d.str(t), PID: d.int(0)}
	s.TID = d.int(int64(s.PID))
	s.CPU = d.int(0)
	s.UserStack = d.stackRef(t)
	s.KernelStack = d.stackRef(t)
	return s
}

func (d *dec2) offKey(t *tables2) OffCPUStack {
	s := OffCPUStack{PID: d.int(0)}
	s.TID = d.int(int64(s.PID))
	s.UserStack = d.stackRef(t)
	s.KernelStack = d.stackRef(t)
	s.Reason = d.str(t)
	return s
}

// row reads a reference to a row table entry: 0 the row in full (read by
// full), k entry k-1.
func row[T any](d *dec2, t *tables2, table []T, full func(*tables2) T) T {
	var zero T
	switch r := d.uvarint(); {
	case d.err != nil:
		return zero
	case r == 0:
		return full(t)
	case r-1 >= uint64(len(table)):
		d.fail("row reference %d past a table of %d", r-1, len(table))
		return zero
	default:
		return table[r-1]
	}
}

// list reads a reference to the lists table: 0 nil, k list k-1.
func (d *dec2) list(t *tables2) []string {
	l := d.uvarint()
	if l == 0 || d.err != nil {
		return nil
	}
	if l-1 >= uint64(len(t.lists)) {
		d.fail("list reference %d past a table of %d", l-1, len(t.lists))
		return nil
	}
	return t.lists[l-1]
}

func (d *dec2) stackRef(t *tables2) uint64 {
	switch v := d.uvarint(); v {
	case 0:
		return 0
	case 1:
		return d.uvarint()
	default:
		if v-2 >= uint64(len(t.stacks)) {
			d.fail("stack reference %d past a table of %d", v-2, len(t.stacks))
			return 0
		}
		return t.stacks[v-2]
	}
}

// countMap reads a count map; threadSum is true for a process's map of
// format 2.1 that is its threads' counts summed (the caller sums them).
func (d *dec2) countMap(t *tables2) (m map[string]uint64, threadSum bool) {
	if d.minor >= 1 {
		return d.countMap21(t)
	}
	return d.countMap20(t), false
}

func (d *dec2) countMap21(t *tables2) (map[string]uint64, bool) {
	switch tag := d.uvarint(); {
	case d.err != nil || tag == 0:
		return nil, false
	case tag == mapThreadSum:
		return nil, true
	default:
		if tag-2 >= uint64(len(t.lists)) {
			d.fail("list reference %d past a table of %d", tag-2, len(t.lists))
			return nil, false
		}
		keys := t.lists[tag-2]
		if len(keys) > len(d.b) {
			d.fail("map of %d values exceeds the record", len(keys))
			return nil, false
		}
		m := make(map[string]uint64, len(keys))
		for _, k := range keys {
			m[k] = d.uvarint()
		}
		return m, false
	}
}

func (d *dec2) countMap20(t *tables2) map[string]uint64 {
	n := d.length(2)
	if n < 0 {
		return nil
	}
	m := make(map[string]uint64, n)
	for range n {
		k := d.str(t)
		m[k] = d.uvarint()
	}
	return m
}

// body decodes a window's body (everything after its definitions).
func (d *dec2) body(t *tables2, w *Window) {
	w.Index = int(min(d.uvarint(), math.MaxInt32))
	w.StartNS = d.varint()
	w.EndNS = w.StartNS + d.varint()
	d.counters(t, w)
	d.processes(t, w)
	d.histograms(t, w)
	d.samples(t, w)
	d.sampleRates(t, w)
	d.tail(t, w)
	d.sections(t, w)
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d bytes after the window", len(d.b))
	}
}

func (d *dec2) counters(t *tables2, w *Window) {
	if n := d.length(5); n >= 0 {
		w.Counters = make([]Counter, n)
		for i := range w.Counters {
			c := &w.Counters[i]
			c.Event = d.str(t)
			if d.minor >= 1 {
				c.PerCPU = d.counts(nil)
				c.HostPerCPU = d.counts(c.PerCPU)
				c.Enabled = enabledBase(w, i) + uint64(d.varint())
				c.Running = c.Enabled - uint64(d.varint())
				continue
			}
			c.Enabled = d.uvarint()
			c.Running = d.uvarint()
			c.PerCPU = d.counts(nil)
			c.HostPerCPU = d.counts(c.PerCPU)
		}
	}
}

func (d *dec2) processes(t *tables2, w *Window) {
	if n := d.length(3); n >= 0 {
		w.Processes = make([]Process, n)
		for i := range w.Processes {
			p := &w.Processes[i]
			if d.minor >= 1 {
				pr := row(d, t, t.procs, d.procDef)
				p.PID, p.Comm, p.Cmdline = pr.pid, pr.comm, pr.cmdline
			} else {
				p.PID = d.int(0)
				p.Comm = d.str(t)
				p.Cmdline = d.list(t)
			}
			var sum bool
			p.Counts, sum = d.countMap(t)
			if n := d.length(2); n >= 0 {
				p.Threads = make([]Thread, n)
				for j := range p.Threads {
					th := &p.Threads[j]
					if d.minor >= 1 {
						pr := row(d, t, t.procs, d.procDef)
						th.TID, th.Comm = pr.pid, pr.comm
						if pr.cmdline != nil {
							d.fail("a thread with a command line")
						}
					} else {
						th.TID = d.int(int64(p.PID))
						th.Comm = d.str(t)
					}
					var bad bool
					if th.Counts, bad = d.countMap(t); bad {
						d.fail("a thread's counts refer to its threads")
					}
				}
			}
			if sum {
				p.Counts = map[string]uint64{}
				for _, th := range p.Threads {
					for k, v := range th.Counts {
						p.Counts[k] += v
					}
				}
			}
		}
	}
}

func (d *dec2) histograms(t *tables2, w *Window) {
	if n := d.length(3); n >= 0 {
		w.Histograms = make([]Histogram, n)
		for i := range w.Histograms {
			h := &w.Histograms[i]
			h.Name = d.str(t)
			h.Unit = d.str(t)
			if n := d.length(1); n >= 0 {
				h.PerCPU = make([]Counts, n)
				for j := range h.PerCPU {
					h.PerCPU[j] = d.counts(nil)
				}
			}
		}
	}
}

func (d *dec2) samples(t *tables2, w *Window) {
	if n := d.length(2); n >= 0 && d.minor >= 1 {
		w.Samples = make([]Sample, n)
		for i := range w.Samples {
			w.Samples[i] = row(d, t, t.samples, d.sampleKey)
			w.Samples[i].Count = d.uvarint()
		}
	} else if n >= 0 {
		w.Samples = make([]Sample, n)
		prevPID := 0
		for i := range w.Samples {
			s := &w.Samples[i]
			s.Event = d.str(t)
			s.PID = d.int(int64(prevPID))
			s.TID = d.int(int64(s.PID))
			s.CPU = d.int(0)
			s.UserStack = d.stackRef(t)
			s.KernelStack = d.stackRef(t)
			s.Count = d.uvarint()
			prevPID = s.PID
		}
	}
}

func (d *dec2) sampleRates(t *tables2, w *Window) {
	if n := d.length(4); n >= 0 {
		w.SampleRate = make([]SampleRate, n)
		for i := range w.SampleRate {
			r := &w.SampleRate[i]
			r.Event = d.str(t)
			r.Requested = d.float()
			if d.minor >= 1 {
				r.Samples = d.uvarint()
				if k := d.uvarint(); k == 0 {
					r.Achieved = d.float()
				} else if k <= maxAchievedCPUs {
					r.Achieved = achieved(w, r.Samples, k)
				} else {
					d.fail("achieved rate over %d CPUs", k)
				}
				continue
			}
			r.Achieved = d.float()
			r.Samples = d.uvarint()
		}
	}
}

// tail reads the drops and the app metrics.
func (d *dec2) tail(t *tables2, w *Window) {
	dr := &w.Drops
	for _, p := range []*uint64{&dr.StackErrors, &dr.SampleMapFull, &dr.ProcMapFull, &dr.Throttled, &dr.MapErrors} {
		*p = d.uvarint()
	}

	if n := d.length(2); n >= 0 {
		w.AppMetrics = make(map[string]float64, n)
		for range n {
			k := d.str(t)
			w.AppMetrics[k] = d.float()
		}
	}
}

// sectionReaders read the sections with a binary layout, each from the
// section's bytes alone (the JSON extension is read in sections).
var sectionReaders = map[uint64]func(d *dec2, t *tables2, w *Window){
	sectionOffCPU:       (*dec2).offCPU,
	sectionIdle:         func(d *dec2, t *tables2, w *Window) { w.IdleNS = d.counts(nil) },
	sectionOthers:       (*dec2).others,
	sectionOffCPUWait:   (*dec2).offCPUWait,
	sectionOffCPULength: (*dec2).offCPULength,
	sectionContainers: func(d *dec2, t *tables2, w *Window) {
		for len(d.b) > 0 && d.err == nil {
			i := d.uvarint()
			c := d.str(t)
			if d.err == nil && i >= uint64(len(w.Processes)) {
				d.fail("container of process %d of %d", i, len(w.Processes))
			} else if d.err == nil {
				w.Processes[i].Container = c
			}
		}
	},
}

// sections reads the tagged sections up to sectionEnd.
func (d *dec2) sections(t *tables2, w *Window) {
	for d.err == nil {
		tag := d.uvarint()
		if tag == sectionEnd || d.err != nil {
			return
		}
		l := d.count(1)
		if d.err != nil {
			return
		}
		sec := d.b[:l]
		d.b = d.b[l:]
		if tag == sectionJSON {
			if err := json.Unmarshal(sec, w); err != nil {
				d.fail("window extension: %v", err)
			}
			continue
		}
		read, ok := sectionReaders[tag]
		if !ok {
			continue // a section a newer minor version added: skipped
		}
		rest := d.b
		d.b = sec
		read(d, t, w)
		if d.err == nil && len(d.b) != 0 {
			d.fail("%d bytes after section %d", len(d.b), tag)
		}
		d.b = rest
	}
}

// others reads the other processes' section.
func (d *dec2) others(t *tables2, w *Window) {
	if n := d.length(2); n >= 0 {
		w.Others = make([]OtherProcess, n)
		for i := range w.Others {
			pr := row(d, t, t.procs, d.procDef)
			if pr.cmdline != nil {
				d.fail("another process with a command line")
			}
			w.Others[i] = OtherProcess{PID: pr.pid, Comm: pr.comm, Samples: d.uvarint()}
		}
	}
}

// hasWaits says whether any stack has a wait reason (sectionOffCPUWait).
func hasWaits(st []OffCPUStack) bool {
	for i := range st {
		if st[i].Wait != "" {
			return true
		}
	}
	return false
}

// perOffCPUStack reads the count of a section that holds one entry per
// off-CPU stack (what), and fails unless it is the window's count.
func (d *dec2) perOffCPUStack(w *Window, what string) bool {
	n := d.length(1)
	if w.OffCPU == nil || n != len(w.OffCPU.Stacks) {
		d.fail("%d off-CPU %s for %d stacks", n, what, offCPULen(w))
		return false
	}
	return true
}

// offCPUWait reads the off-CPU stacks' wait reasons, in the order of the
// off-CPU section, which comes first.
func (d *dec2) offCPUWait(t *tables2, w *Window) {
	if !d.perOffCPUStack(w, "wait reasons") {
		return
	}
	for i := range w.OffCPU.Stacks {
		st := &w.OffCPU.Stacks[i]
		st.Wait, st.WaitCall, st.WaitFD = d.str(t), d.str(t), d.str(t)
	}
}

// offCPULength reads sectionOffCPULength.
func (d *dec2) offCPULength(_ *tables2, w *Window) {
	if !d.perOffCPUStack(w, "wait lengths") {
		return
	}
	for i := range w.OffCPU.Stacks {
		v := d.uvarint()
		if v > 1<<16 {
			d.fail("off-CPU wait length bucket %d", v)
			return
		}
		w.OffCPU.Stacks[i].LengthBucket = int(v)
	}
}

// hasLengths says whether any stack has a wait length
// (sectionOffCPULength).
func hasLengths(stacks []OffCPUStack) bool {
	for _, s := range stacks {
		if s.LengthBucket > 0 {
			return true
		}
	}
	return false
}

func offCPULen(w *Window) int {
	if w.OffCPU == nil {
		return -1
	}
	return len(w.OffCPU.Stacks)
}

// offCPU reads the off-CPU section (encoder2.window).
func (d *dec2) offCPU(t *tables2, w *Window) {
	o := &OffCPU{BlockedNS: d.uvarint(), SampledNS: d.uvarint()}
	if n := d.length(2); n >= 0 {
		o.Stacks = make([]OffCPUStack, n)
		for i := range o.Stacks {
			o.Stacks[i] = row(d, t, t.offcpu, d.offKey)
			o.Stacks[i].NS = d.uvarint()
		}
	}
	w.OffCPU = o
}

// A window ends with tagged sections, each a tag, a length and its bytes,
// then sectionEnd. A reader skips tags it does not know, so a field can get
// a binary section of its own in a minor version.
const (
	sectionEnd  = 0
	sectionJSON = 1 // Window fields without a binary encoding, as JSON
	// sectionContainers: (process index, string id) pairs naming the
	// container of a process (Process.Container).
	sectionContainers = 2
	// sectionOffCPU: Window.OffCPU (format 2.1; 2.0 carried it in the
	// JSON extension).
	sectionOffCPU = 3
	// sectionIdle: Window.IdleNS, a counts array (format 2.1).
	sectionIdle = 4
	// sectionOthers: Window.Others, (process, samples) pairs (format 2.1).
	sectionOthers = 5
	// sectionOffCPUWait: each off-CPU stack's OffCPUStack.Wait, WaitCall
	// and WaitFD, three string ids per stack of sectionOffCPU, in its
	// order (format 2.1, added with wait codes; older readers skip it).
	sectionOffCPUWait = 6
	// sectionOffCPULength: each off-CPU stack's OffCPUStack.LengthBucket,
	// one u per stack of sectionOffCPU, in its order (format 2.2; older
	// readers skip it).
	sectionOffCPULength = 7
)

// windowBudget is how many count values a window of n decompressed bytes
// may allocate: generous for real windows (a 1024-CPU all-zero row costs
// three bytes), bounded for garbage.
func windowBudget(n int) int { return 1<<20 + 64*n }
