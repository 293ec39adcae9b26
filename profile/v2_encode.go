package profile

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"reflect"
	"slices"
	"strings"
)

// The v2 writer's side: the tables a window adds to, and the window's
// varint layout (docs/FORMAT.md, "Window record").

// encoder2 is the writer's side of the v2 tables.
type encoder2 struct {
	strings map[string]uint64
	lists   map[string]uint64
	frames  map[Frame]uint64
	nodes   map[[2]uint64]uint64 // {parent node + 1 (0: root), frame} to node
	stacks  map[uint64]uint64    // Stack.ID to table index
	procs   rowTable[procDef]
	samples rowTable[sampleKey]
	offcpu  rowTable[offKey]
	// Definitions added by the window being encoded.
	newStrings []string
	newLists   [][]uint64
	newFrames  []Frame
	newNodes   [][2]uint64
	newStacks  []stackDef
	body, out  []byte
	keys       []string
	sum        map[string]uint64
	// The function id of the last frame and the frame id of the last
	// node defined: new frames and nodes are written as differences from
	// them (a new call path's frames are defined one after the other).
	lastFunc, lastNodeFrame uint64
	// ext are the Window fields carried as JSON (windowExtFields).
	ext []extField
}

// sampleKey is a stack-sample row without its count, and offKey an
// off-CPU row without its time (format 2.1): the same threads block and
// run at the same stacks window after window, so a row is written once in
// a table and then referred to by its index. Stacks are Stack.IDs.
type sampleKey struct {
	event         uint64 // string id
	pid, tid, cpu int
	user, kernel  uint64
}

type offKey struct {
	pid, tid     int
	user, kernel uint64
	reason       uint64 // string id
}

// maxRowKeys bounds the sample and off-CPU row tables, so a recorder that
// runs for days keeps bounded tables: past it, new rows are written in
// full where they are used (reference 0).
const maxRowKeys = 1 << 16

// procDef is a process as the processes table holds it (format 2.1): what
// stays the same from window to window, written once.
type procDef struct {
	pid     int
	comm    uint64 // string id
	cmdline uint64 // 0: nil, k: list k-1
}

func newEncoder2() *encoder2 {
	return &encoder2{strings: map[string]uint64{}, lists: map[string]uint64{},
		frames: map[Frame]uint64{}, nodes: map[[2]uint64]uint64{}, stacks: map[uint64]uint64{},
		procs: newRowTable[procDef](), samples: newRowTable[sampleKey](), offcpu: newRowTable[offKey](),
		ext: windowExtFields()}
}

func (e *encoder2) str(s string) uint64 {
	id, ok := e.strings[s]
	if !ok {
		id = uint64(len(e.strings))
		e.strings[s] = id
		e.newStrings = append(e.newStrings, s)
	}
	return id
}

// list interns a string list; 0 means nil, n+1 the list with index n.
func (e *encoder2) list(l []string) uint64 {
	if l == nil {
		return 0
	}
	var key strings.Builder
	for _, s := range l {
		key.WriteString(fmt.Sprint(len(s)))
		key.WriteByte(':')
		key.WriteString(s)
	}
	id, ok := e.lists[key.String()]
	if !ok {
		ids := make([]uint64, len(l))
		for i, s := range l {
			ids[i] = e.str(s)
		}
		id = uint64(len(e.lists))
		e.lists[key.String()] = id
		e.newLists = append(e.newLists, ids)
	}
	return id + 1
}

// procRef writes a reference to an entry of the processes table (a pid or
// tid, a comm and a command line, interned): k+1 for entry k, or 0 and the
// entry in full once the table is full.
func (e *encoder2) procRef(b []byte, id int, comm string, cmdline []string) []byte {
	k := procDef{pid: id, comm: e.str(comm), cmdline: e.list(cmdline)}
	return e.procs.ref(b, k, appendProcDef)
}

// rowTable interns the rows of one table (processes, sample rows,
// off-CPU rows): a row is defined once, by the window that first has it,
// and referred to by id after. A full table (maxRowKeys rows) stops
// growing: a new row is then written in full where it is used.
type rowTable[K comparable] struct {
	ids   map[K]uint64
	fresh []K // defined by the window being encoded
}

func newRowTable[K comparable]() rowTable[K] { return rowTable[K]{ids: map[K]uint64{}} }

// ref appends k's reference: id+1, or 0 and the row in full (appendRow)
// once the table is full.
func (t *rowTable[K]) ref(b []byte, k K, appendRow func([]byte, K) []byte) []byte {
	id, ok := t.ids[k]
	if !ok {
		if len(t.ids) >= maxRowKeys {
			return appendRow(append(b, 0), k)
		}
		id = uint64(len(t.ids))
		t.ids[k] = id
		t.fresh = append(t.fresh, k)
	}
	return binary.AppendUvarint(b, id+1)
}

// appendFresh appends the count and the rows the window defined.
func (t *rowTable[K]) appendFresh(b []byte, appendRow func([]byte, K) []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(t.fresh)))
	for _, k := range t.fresh {
		b = appendRow(b, k)
	}
	return b
}

func appendProcDef(b []byte, k procDef) []byte {
	b = binary.AppendVarint(b, int64(k.pid))
	b = binary.AppendUvarint(b, k.comm)
	return binary.AppendUvarint(b, k.cmdline)
}

// sampleRow writes a reference to s's row in the sample rows table:
// k+1 for entry k, or 0 and the row in full once the table is full.
func (e *encoder2) sampleRow(b []byte, s *Sample) []byte {
	k := sampleKey{event: e.str(s.Event), pid: s.PID, tid: s.TID, cpu: s.CPU, user: s.UserStack, kernel: s.KernelStack}
	return e.samples.ref(b, k, e.appendSampleKey)
}

func (e *encoder2) appendSampleKey(b []byte, k sampleKey) []byte {
	b = binary.AppendUvarint(b, k.event)
	b = binary.AppendVarint(b, int64(k.pid))
	b = binary.AppendVarint(b, int64(k.tid)-int64(k.pid))
	b = binary.AppendVarint(b, int64(k.cpu))
	b = e.stackRef(b, k.user)
	return e.stackRef(b, k.kernel)
}

// offRow is sampleRow for an off-CPU row.
func (e *encoder2) offRow(b []byte, s *OffCPUStack) []byte {
	k := offKey{pid: s.PID, tid: s.TID, user: s.UserStack, kernel: s.KernelStack, reason: e.str(s.Reason)}
	return e.offcpu.ref(b, k, e.appendOffKey)
}

func (e *encoder2) appendOffKey(b []byte, k offKey) []byte {
	b = binary.AppendVarint(b, int64(k.pid))
	b = binary.AppendVarint(b, int64(k.tid)-int64(k.pid))
	b = e.stackRef(b, k.user)
	b = e.stackRef(b, k.kernel)
	return binary.AppendUvarint(b, k.reason)
}

func (e *encoder2) frame(f Frame) uint64 {
	id, ok := e.frames[f]
	if !ok {
		e.str(f.Function)
		e.str(f.Module)
		e.str(f.BuildID)
		id = uint64(len(e.frames))
		e.frames[f] = id
		e.newFrames = append(e.newFrames, f)
	}
	return id
}

// stackDef is a stack as written: its leaf in the call tree.
type stackDef struct {
	id     uint64
	kernel bool
	leaf   uint64 // 0: nil frames, 1: no frames, n+2: node n
	hashed bool   // id is HashStack of the frames: not written
}

// Stack definition flags (format 2.1).
const (
	stackKernel = 1 << iota
	stackIDFollows
)

// leaf interns frames (innermost first) as a path in the call tree, root
// side first, so stacks that share their outer frames share those nodes.
func (e *encoder2) leaf(frames []Frame) uint64 {
	if frames == nil {
		return 0
	}
	parent := uint64(0) // node + 1; 0 is the root
	for i := len(frames) - 1; i >= 0; i-- {
		k := [2]uint64{parent, e.frame(frames[i])}
		n, ok := e.nodes[k]
		if !ok {
			n = uint64(len(e.nodes))
			e.nodes[k] = n
			e.newNodes = append(e.newNodes, k)
		}
		parent = n + 1
	}
	return parent + 1
}

// Stack references: 0 none, 1 a raw id follows (a stack no window
// defined; CheckValid refuses it on reading), k >= 2 table index k-2.
func (e *encoder2) stackRef(b []byte, id uint64) []byte {
	if id == 0 {
		return append(b, 0)
	}
	if i, ok := e.stacks[id]; ok {
		return binary.AppendUvarint(b, i+2)
	}
	return binary.AppendUvarint(append(b, 1), id)
}

// window encodes win, adding its new definitions to the tables.
func (e *encoder2) window(win *Window) ([]byte, error) {
	// The extension is encoded first: a failure must leave the tables as
	// they were.
	ext, err := windowExt(win, e.ext)
	if err != nil {
		return nil, err
	}
	e.newStrings, e.newLists, e.newFrames, e.newNodes, e.newStacks = e.newStrings[:0], e.newLists[:0], e.newFrames[:0], e.newNodes[:0], e.newStacks[:0]
	e.procs.fresh, e.samples.fresh, e.offcpu.fresh = e.procs.fresh[:0], e.samples.fresh[:0], e.offcpu.fresh[:0]
	for _, s := range win.NewStacks {
		if _, ok := e.stacks[s.ID]; ok {
			continue
		}
		e.stacks[s.ID] = uint64(len(e.stacks))
		e.newStacks = append(e.newStacks, stackDef{id: s.ID, kernel: s.Kernel, leaf: e.leaf(s.Frames),
			hashed: s.ID == HashStack(s.Kernel, s.Frames)})
	}
	b := e.body[:0]
	b = binary.AppendUvarint(b, uint64(win.Index))
	b = binary.AppendVarint(b, win.StartNS)
	b = binary.AppendVarint(b, win.EndNS-win.StartNS)
	b = e.appendCounters(b, win)
	b = e.appendProcesses(b, win.Processes)
	b = e.appendHistograms(b, win.Histograms)
	b = e.appendSamples(b, win)
	b = e.appendTail(b, win)
	b = e.appendSections(b, win, ext)
	e.body = b
	// Definitions first, then the body that refers to them.
	e.out = append(e.appendDefs(e.out[:0]), b...)
	return compress(e.out), nil
}

func (e *encoder2) appendCounters(b []byte, win *Window) []byte {
	b = appendLen(b, len(win.Counters), win.Counters == nil)
	// Enabled times are alike (every event is enabled on every CPU for
	// the window): each is written as the difference from the previous
	// counter's, the first from the window's length times its CPUs, and
	// running as the difference from enabled (0 unless multiplexed).
	for i := range win.Counters {
		c := &win.Counters[i]
		b = binary.AppendUvarint(b, e.str(c.Event))
		b = appendCounts(b, c.PerCPU)
		if c.HostPerCPU != nil && slices.Equal(c.HostPerCPU, c.PerCPU) {
			b = append(b, countsSame)
		} else {
			b = appendCounts(b, c.HostPerCPU)
		}
		b = binary.AppendVarint(b, int64(c.Enabled-enabledBase(win, i)))
		b = binary.AppendVarint(b, int64(c.Enabled-c.Running))
	}
	return b
}

func (e *encoder2) appendProcesses(b []byte, procs []Process) []byte {
	b = appendLen(b, len(procs), procs == nil)
	for i := range procs {
		p := &procs[i]
		b = e.procRef(b, p.PID, p.Comm, p.Cmdline)
		if e.isThreadSum(p) {
			b = append(b, mapThreadSum)
		} else {
			b = e.appendMap(b, p.Counts)
		}
		b = appendLen(b, len(p.Threads), p.Threads == nil)
		for _, t := range p.Threads {
			b = e.procRef(b, t.TID, t.Comm, nil)
			b = e.appendMap(b, t.Counts)
		}
	}
	return b
}

func (e *encoder2) appendHistograms(b []byte, hists []Histogram) []byte {
	b = appendLen(b, len(hists), hists == nil)
	for _, h := range hists {
		b = binary.AppendUvarint(b, e.str(h.Name))
		b = binary.AppendUvarint(b, e.str(h.Unit))
		b = appendLen(b, len(h.PerCPU), h.PerCPU == nil)
		for _, c := range h.PerCPU {
			b = appendCounts(b, c)
		}
	}
	return b
}

// appendSamples writes the stack samples and the sampling rates.
func (e *encoder2) appendSamples(b []byte, win *Window) []byte {
	b = appendLen(b, len(win.Samples), win.Samples == nil)
	for i := range win.Samples {
		b = e.sampleRow(b, &win.Samples[i])
		b = binary.AppendUvarint(b, win.Samples[i].Count)
	}

	b = appendLen(b, len(win.SampleRate), win.SampleRate == nil)
	for _, r := range win.SampleRate {
		b = binary.AppendUvarint(b, e.str(r.Event))
		b = appendFloat(b, r.Requested)
		b = binary.AppendUvarint(b, r.Samples)
		if k := achievedCPUs(win, r); k > 0 {
			b = binary.AppendUvarint(b, k)
		} else {
			b = appendFloat(append(b, 0), r.Achieved)
		}
	}
	return b
}

// appendTail writes the drops and the app metrics.
func (e *encoder2) appendTail(b []byte, win *Window) []byte {
	d := win.Drops
	for _, v := range []uint64{d.StackErrors, d.SampleMapFull, d.ProcMapFull, d.Throttled, d.MapErrors} {
		b = binary.AppendUvarint(b, v)
	}

	b = appendLen(b, len(win.AppMetrics), win.AppMetrics == nil)
	e.keys = sortedKeys(e.keys, win.AppMetrics)
	for _, k := range e.keys {
		b = binary.AppendUvarint(b, e.str(k))
		b = appendFloat(b, win.AppMetrics[k])
	}
	return b
}

// appendSections writes the fields that have a section of their own, the
// JSON extension and the end of the sections.
func (e *encoder2) appendSections(b []byte, win *Window, ext []byte) []byte {
	if o := win.OffCPU; o != nil {
		sec := binary.AppendUvarint(nil, o.BlockedNS)
		sec = binary.AppendUvarint(sec, o.SampledNS)
		sec = appendLen(sec, len(o.Stacks), o.Stacks == nil)
		for i := range o.Stacks {
			sec = e.offRow(sec, &o.Stacks[i])
			sec = binary.AppendUvarint(sec, o.Stacks[i].NS)
		}
		b = appendSection(b, sectionOffCPU, sec)
		if hasWaits(o.Stacks) {
			sec := appendLen(nil, len(o.Stacks), false)
			for i := range o.Stacks {
				sec = binary.AppendUvarint(sec, e.str(o.Stacks[i].Wait))
				sec = binary.AppendUvarint(sec, e.str(o.Stacks[i].WaitCall))
				sec = binary.AppendUvarint(sec, e.str(o.Stacks[i].WaitFD))
			}
			b = appendSection(b, sectionOffCPUWait, sec)
		}
		if hasLengths(o.Stacks) {
			sec := appendLen(nil, len(o.Stacks), false)
			for i := range o.Stacks {
				sec = binary.AppendUvarint(sec, uint64(o.Stacks[i].LengthBucket))
			}
			b = appendSection(b, sectionOffCPULength, sec)
		}
	}
	if win.IdleNS != nil {
		b = appendSection(b, sectionIdle, appendCounts(nil, win.IdleNS))
	}
	if win.Others != nil {
		sec := appendLen(nil, len(win.Others), false)
		for _, o := range win.Others {
			sec = e.procRef(sec, o.PID, o.Comm, nil)
			sec = binary.AppendUvarint(sec, o.Samples)
		}
		b = appendSection(b, sectionOthers, sec)
	}

	// Containers are rare (a process in a container's cgroup): a
	// section of (process index, string) pairs rather than a field in
	// every process row.
	var cont []byte
	for i := range win.Processes {
		if c := win.Processes[i].Container; c != "" {
			cont = binary.AppendUvarint(cont, uint64(i))
			cont = binary.AppendUvarint(cont, e.str(c))
		}
	}
	if len(cont) > 0 {
		b = appendSection(b, sectionContainers, cont)
	}
	if len(ext) > 0 {
		b = appendSection(b, sectionJSON, ext)
	}
	return append(b, sectionEnd)
}

// appendDefs writes the entries the window adds to the tables.
func (e *encoder2) appendDefs(o []byte) []byte {
	o = binary.AppendUvarint(o, uint64(len(e.newStrings)))
	for _, s := range e.newStrings {
		o = binary.AppendUvarint(o, uint64(len(s)))
		o = append(o, s...)
	}
	o = binary.AppendUvarint(o, uint64(len(e.newLists)))
	for _, l := range e.newLists {
		o = binary.AppendUvarint(o, uint64(len(l)))
		for _, id := range l {
			o = binary.AppendUvarint(o, id)
		}
	}
	o = binary.AppendUvarint(o, uint64(len(e.newFrames)))
	for _, f := range e.newFrames {
		fn := e.strings[f.Function]
		o = binary.AppendVarint(o, int64(fn-e.lastFunc))
		o = binary.AppendUvarint(o, e.strings[f.Module])
		o = binary.AppendUvarint(o, f.Offset)
		o = binary.AppendUvarint(o, e.strings[f.BuildID])
		e.lastFunc = fn
	}
	o = binary.AppendUvarint(o, uint64(len(e.newNodes)))
	k := uint64(len(e.nodes) - len(e.newNodes)) // the first new node's index
	for _, n := range e.newNodes {
		// n[0] is the parent node's index + 1, 0 for the root: written
		// as k - parent index, 1 for the node just before.
		if n[0] == 0 {
			o = append(o, 0)
		} else {
			o = binary.AppendUvarint(o, k+1-n[0])
		}
		o = binary.AppendVarint(o, int64(n[1]-e.lastNodeFrame))
		e.lastNodeFrame = n[1]
		k++
	}
	o = binary.AppendUvarint(o, uint64(len(e.newStacks)))
	for _, s := range e.newStacks {
		flags := byte(0)
		if s.kernel {
			flags |= stackKernel
		}
		if !s.hashed {
			flags |= stackIDFollows
		}
		o = append(o, flags)
		o = binary.AppendUvarint(o, s.leaf)
		if !s.hashed {
			o = binary.AppendUvarint(o, s.id)
		}
	}
	o = e.procs.appendFresh(o, appendProcDef)
	o = e.samples.appendFresh(o, e.appendSampleKey)
	return e.offcpu.appendFresh(o, e.appendOffKey)
}

func appendSection(b []byte, tag uint64, sec []byte) []byte {
	b = binary.AppendUvarint(b, tag)
	b = binary.AppendUvarint(b, uint64(len(sec)))
	return append(b, sec...)
}

// windowExt is the JSON object of the Window fields the binary layout does
// not know, nil when they are all zero. An empty slice is written as []
// without encoding/json: it still says something (Waits: the wait account
// was kept, nothing waited), and an idle window has nothing else.
func windowExt(win *Window, fields []extField) ([]byte, error) {
	v := reflect.ValueOf(win).Elem()
	var b []byte
	for _, f := range fields {
		fv := v.Field(f.index)
		if fv.IsZero() {
			continue
		}
		if b == nil {
			b = append(b, '{')
		} else {
			b = append(b, ',')
		}
		b = append(append(b, f.name...), ':')
		if fv.Kind() == reflect.Slice && fv.Len() == 0 {
			b = append(b, "[]"...)
			continue
		}
		j, err := json.Marshal(fv.Interface())
		if err != nil {
			return nil, fmt.Errorf("encoding window extension: %w", err)
		}
		b = append(b, j...)
	}
	if b == nil {
		return nil, nil
	}
	return append(b, '}'), nil
}

// appendMap writes a count map (format 2.1): its sorted keys as a string
// list (the same few event names, so one list id), then the values in
// that order. Tag 0 is nil, mapThreadSum a process's counts that are its
// threads' summed, k+2 the keys of list k.
func (e *encoder2) appendMap(b []byte, m map[string]uint64) []byte {
	if m == nil {
		return append(b, 0)
	}
	e.keys = sortedKeys(e.keys, m)
	if e.keys == nil {
		e.keys = []string{}
	}
	b = binary.AppendUvarint(b, e.list(e.keys)+1)
	for _, k := range e.keys {
		b = binary.AppendUvarint(b, m[k])
	}
	return b
}

const mapThreadSum = 1

// isThreadSum says whether p's counts are exactly its threads' summed, as
// the recorder makes them: then they are not written.
func (e *encoder2) isThreadSum(p *Process) bool {
	if p.Counts == nil {
		return false
	}
	if e.sum == nil {
		e.sum = map[string]uint64{}
	}
	clear(e.sum)
	for _, t := range p.Threads {
		for k, v := range t.Counts {
			e.sum[k] += v
		}
	}
	return maps.Equal(e.sum, p.Counts)
}

// The recorder computes a sampling rate as samples / window seconds /
// CPUs sampled; when that gives Achieved to the bit for some number of
// CPUs k, k is written (one byte) instead of the float (nine).
const maxAchievedCPUs = 1 << 12

func achieved(win *Window, samples, k uint64) float64 {
	return float64(samples) / (float64(win.EndNS-win.StartNS) / 1e9) / float64(k)
}

// achievedCPUs is the k for r, 0 when there is none.
func achievedCPUs(win *Window, r SampleRate) uint64 {
	want := math.Float64bits(r.Achieved)
	for k := uint64(1); k <= maxAchievedCPUs; k++ {
		if math.Float64bits(achieved(win, r.Samples, k)) == want {
			return k
		}
	}
	return 0
}

// enabledBase is what counter i's enabled time is written against: the
// previous counter's, or for the first the window's length times the
// number of CPUs of its array.
func enabledBase(win *Window, i int) uint64 {
	if i > 0 {
		return win.Counters[i-1].Enabled
	}
	return uint64(win.EndNS-win.StartNS) * uint64(len(win.Counters[0].PerCPU))
}

func sortedKeys[V any](dst []string, m map[string]V) []string {
	dst = dst[:0]
	for k := range m {
		dst = append(dst, k)
	}
	slices.Sort(dst)
	return dst
}

// appendLen writes a slice or map length as n+1, 0 for nil, so nil and
// empty survive the round trip.
func appendLen(b []byte, n int, isNil bool) []byte {
	if isNil {
		return append(b, 0)
	}
	return binary.AppendUvarint(b, uint64(n)+1)
}

// appendFloat writes a float64's bits byte-reversed as a uvarint (as gob
// does): round numbers such as 99 or 49.5 take 2 or 3 bytes.
func appendFloat(b []byte, f float64) []byte {
	return binary.AppendUvarint(b, bits.ReverseBytes64(math.Float64bits(f)))
}

// Counts encoding: a tag, 0 nil, 1 the same values as the previous array
// (host counts equal to the target's under -a), n+2 an array of length n;
// then the number of non-zero values and, for each, the count of zeros
// skipped before it and the value. Idle CPUs and empty buckets cost
// nothing.
const countsSame = 1

// appendCounts writes an array in the smaller of two forms (format 2.1),
// told apart by the low bit of the count that follows the length:
// sparse, 2k, then k (zeros skipped, value) pairs; dense, 2k+1, then the
// zeros before the first non-zero value and the k values from there
// (zeros included), the rest being zeros. Latency histograms, whose
// non-zero buckets are contiguous, take one byte a bucket dense and two
// sparse.
func appendCounts(b []byte, c Counts) []byte {
	if c == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(c))+2)
	nz, first, last := 0, -1, -1
	sparse, dense := 0, 0 // bytes of each form's values
	for i, v := range c {
		if v != 0 {
			if first < 0 {
				first = i
			}
			sparse += uvarintLen(uint64(i-last-1)) + uvarintLen(v)
			nz, last = nz+1, i
		}
	}
	if nz == 0 {
		return append(b, 0)
	}
	for _, v := range c[first : last+1] {
		dense += uvarintLen(v)
	}
	if dense+uvarintLen(uint64(first)) < sparse {
		b = binary.AppendUvarint(b, uint64(last+1-first)*2+1)
		b = binary.AppendUvarint(b, uint64(first))
		for _, v := range c[first : last+1] {
			b = binary.AppendUvarint(b, v)
		}
		return b
	}
	b = binary.AppendUvarint(b, uint64(nz)*2)
	last = -1
	for i, v := range c {
		if v != 0 {
			b = binary.AppendUvarint(b, uint64(i-last-1))
			b = binary.AppendUvarint(b, v)
			last = i
		}
	}
	return b
}

func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }
