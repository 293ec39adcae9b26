package profile

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/bits"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Format v2 payloads (docs/FORMAT.md, "Version 2"). Every record's payload
// is one zstd frame, so a record decompresses alone. Header and trailer are
// JSON inside the frame: they are written once and are small. A window is a
// varint layout: first the definitions it adds to the file's tables
// (strings, string lists, frames, call-tree nodes, stacks and, since 2.1,
// processes and sample and off-CPU rows), then its body, which refers to
// table entries by index. Tables only grow, so the body of any window can
// be decoded once the definitions of it and every earlier window are read.

// maxRecordBytes caps a v2 record's decompressed size.
const maxRecordBytes = 64 << 20

// A zstd frame can inflate by a factor of thousands, and a record may hold
// many frames end to end, so what a record claims is never what memory is
// sized by. A recording's records inflate, all together, to at most
// inflateRatio times their compressed bytes plus inflateFloor; recordings
// compress 1.1x to 4x (BENCHMARKS.md), so only a zstd bomb or a damaged
// file gets near it. Each record stops inflating at its share of that
// (inflateLimit), frames counted across their concatenation, before more
// memory is taken.
const (
	inflateRatio = 16
	inflateFloor = 64 << 20
)

// ErrInflate marks a recording that inflates past its budget; it wraps
// ErrFormat.
var ErrInflate = &formatError{msg: "recording inflates past its decompression budget"}

// inflateLimit is the most a record of n compressed bytes may inflate to
// within a read-ahead batch: its own share, capped by maxRecordBytes.
func inflateLimit(n int) int { return min(maxRecordBytes, inflateRatio*n+1<<20) }

var (
	zstdEnc = sync.OnceValue(func() *zstd.Encoder {
		// The records carry a CRC-32C already: no second checksum.
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault),
			zstd.WithEncoderCRC(false), zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
		if err != nil {
			panic(fmt.Sprintf("zstd encoder: %v", err)) // only bad options fail
		}
		return e
	})
	// Streaming decoders, one per decoding goroutine: a stream stops
	// where the reader stops reading, which DecodeAll does only at a
	// frame's end.
	zstdDecs = sync.Pool{New: func() any {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.IgnoreChecksum(true),
			zstd.WithDecoderMaxWindow(maxRecordBytes), zstd.WithDecoderLowmem(true))
		if err != nil {
			panic(fmt.Sprintf("zstd decoder: %v", err))
		}
		return d
	}}
)

func compress(raw []byte) []byte { return zstdEnc().EncodeAll(raw, nil) }

// decompress inflates a record's frames, stopping with an error wrapping
// ErrInflate once they pass limit bytes.
func decompress(payload []byte, limit int) ([]byte, error) {
	d := zstdDecs.Get().(*zstd.Decoder)
	defer zstdDecs.Put(d)
	if err := d.Reset(bytes.NewReader(payload)); err != nil {
		return nil, fmt.Errorf("decompressing record: %w", err)
	}
	defer d.Reset(nil) // drop the reference to payload
	out := bytes.NewBuffer(make([]byte, 0, min(limit, 4*len(payload)+512)))
	n, err := out.ReadFrom(io.LimitReader(d, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("decompressing record: %w", err)
	}
	if n > int64(limit) {
		return nil, fmt.Errorf("%w: a record of %d bytes inflates past %d bytes", ErrInflate, len(payload), limit)
	}
	return out.Bytes(), nil
}

// windowFields are the Window fields the binary layout encodes. Any other
// exported field (one added to the model later) is carried as JSON in the
// window's extension, so it is never lost; giving it a binary encoding is
// an optimisation (docs/FORMAT.md, "Adding a field").
var windowFields = map[string]bool{
	"Index": true, "StartNS": true, "EndNS": true, "Counters": true, "Processes": true,
	"Histograms": true, "Samples": true, "NewStacks": true, "SampleRate": true,
	"Drops": true, "AppMetrics": true, "OffCPU": true, "IdleNS": true, "Others": true,
}

// windowExtFields lists the indexes of Window fields carried as JSON.
func windowExtFields() []int {
	var out []int
	t := reflect.TypeFor[Window]()
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() && !windowFields[f.Name] {
			out = append(out, i)
		}
	}
	return out
}

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
		procs: newRowTable[procDef](), samples: newRowTable[sampleKey](), offcpu: newRowTable[offKey]()}
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
	ext, err := windowExt(win)
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
// not know, nil when they are all zero.
func windowExt(win *Window) ([]byte, error) {
	idx := windowExtFields()
	if len(idx) == 0 {
		return nil, nil
	}
	v := reflect.ValueOf(win).Elem()
	m := map[string]any{}
	for _, i := range idx {
		f := v.Field(i)
		if f.IsZero() {
			continue
		}
		name := v.Type().Field(i).Name
		if tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ","); tag != "" && tag != "-" {
			name = tag
		}
		m[name] = f.Interface()
	}
	if len(m) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding window extension: %w", err)
	}
	return b, nil
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
