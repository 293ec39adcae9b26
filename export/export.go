package export

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/cacheheat/cacheheat/profile"
	"github.com/cacheheat/cacheheat/symbolize"
)

// Options select what is exported.
type Options struct {
	// From and To keep the windows that start in [From, To), as offsets
	// from the recording's start; To 0 means the end.
	From, To time.Duration
	// PID keeps one process's samples; 0 keeps all.
	PID int
	// Event is the sample event of the folded output; "" is the
	// recording's primary sample event (cpu-clock).
	Event string
	// Lines resolves frames to source lines and inlined frames: the
	// pprof profile's locations carry them, and folded output with
	// FoldedLines writes "func (file:line)" frames. nil: functions only.
	Lines *symbolize.Lines
	// FoldedLines writes folded frames with their source line.
	FoldedLines bool
}

// key identifies identical samples summed over the selected windows.
type key struct {
	event         string
	pid, tid, cpu int
	user, kernel  uint64
}

// Selection is the samples Options keep, summed as a recording is read
// window by window (profile.Stream: no window is kept), with each
// process's name. Pprof and Folded write it.
type Selection struct {
	h       profile.Header
	stacks  map[uint64]profile.Stack
	o       Options
	counts  map[key]uint64
	keys    []key // first-seen order, so the output is deterministic
	comm    map[int]string
	startNS int64
	endNS   int64
	// all counts every window's samples by event, selected or not: the
	// recording's primary sample event is the first with any.
	all map[string]uint64
}

// NewSelection starts a selection of a recording with header h; stacks
// is the map the recording's stacks are (or, for a stream, will be)
// defined in, as the windows are added.
func NewSelection(h profile.Header, stacks map[uint64]profile.Stack, o Options) *Selection {
	return &Selection{h: h, stacks: stacks, o: o, counts: map[key]uint64{}, comm: map[int]string{}, startNS: -1, all: map[string]uint64{}}
}

// FromRecording selects from a recording in memory.
func FromRecording(rec *profile.Recording, o Options) *Selection {
	s := NewSelection(rec.Header, rec.Stacks, o)
	for i := range rec.Windows {
		s.Add(&rec.Windows[i])
	}
	s.End(rec.Trailer)
	return s
}

// Add sums the next window's samples that Options keep.
func (s *Selection) Add(w *profile.Window) {
	for _, smp := range w.Samples {
		s.all[smp.Event] += smp.Count
	}
	o := s.o
	if w.StartNS < int64(o.From) || (o.To > 0 && w.StartNS >= int64(o.To)) {
		return
	}
	if s.startNS < 0 {
		s.startNS = w.StartNS
	}
	s.endNS = w.EndNS
	for _, p := range w.Processes {
		s.comm[p.PID] = p.Comm
	}
	for _, smp := range w.Samples {
		if o.PID != 0 && smp.PID != o.PID {
			continue
		}
		k := key{smp.Event, smp.PID, smp.TID, smp.CPU, smp.UserStack, smp.KernelStack}
		if _, ok := s.counts[k]; !ok {
			s.keys = append(s.keys, k)
		}
		s.counts[k] += smp.Count
	}
}

// End takes the recording's trailer (nil when it was cut short): the
// source lines resolved when it ended.
func (s *Selection) End(t *profile.Trailer) {
	if s.o.Lines != nil && t != nil {
		s.o.Lines.AddRecorded(t.Lines)
	}
}

// primary is the recording's primary sample event: the first of its
// sample events with samples (profile.Recording.PrimarySampleEvent).
func (s *Selection) primary() string {
	return profile.PrimaryOf(s.h.Settings.SampleEvents, func(e string) uint64 { return s.all[e] })
}

// commOf names a process: its comm from the recording, else "pid N".
func (s *Selection) commOf(pid int) string {
	if c := s.comm[pid]; c != "" {
		return c
	}
	return fmt.Sprintf("pid %d", pid)
}

// events lists the sample events present, the primary one first.
func (s *Selection) events() []string {
	primary := s.primary()
	var out []string
	for _, k := range s.keys {
		if !slices.Contains(out, k.event) {
			out = append(out, k.event)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		switch {
		case a == primary:
			return -1
		case b == primary:
			return 1
		}
		return strings.Compare(a, b)
	})
	return out
}

// sampleWeight is what one stack sample of an event stands for: a
// cpu-clock sample is 1/Hz of CPU time; a miss-event sample is one
// sampling period of events.
func sampleWeight(h profile.Header, event string) (typ, unit string, weight int64) {
	if event == "cpu-clock" {
		hz := max(1, h.Settings.SampleHz)
		return event, "nanoseconds", int64(time.Second) / int64(hz)
	}
	return event, "events", int64(max(1, h.Settings.SamplePeriod))
}

// Pprof writes the selected samples as a gzip-compressed pprof profile.
// Each sample event gets two sample types: "<event> samples"/count and
// the event's weight (cpu-clock/nanoseconds; other events/events, the
// sampling period times the samples). Samples carry labels pid, tid, comm,
// cpu and node (and cgroup for a cgroup target); mappings carry the
// module's build id when the recorder read one.
func Pprof(w io.Writer, s *Selection) error {
	if s.startNS < 0 {
		s.startNS = 0
	}
	h, o := &s.h, s.o
	events := s.events()
	if len(events) == 0 {
		events = []string{s.primary()}
	}
	p := &pprof.Profile{
		TimeNanos:     h.StartTime.Add(time.Duration(s.startNS)).UnixNano(),
		DurationNanos: s.endNS - s.startNS,
		Comments:      []string{h.Tool},
	}
	col := map[string]int{}
	weight := map[string]int64{}
	for _, ev := range events {
		typ, unit, wt := sampleWeight(*h, ev)
		col[ev] = len(p.SampleType)
		weight[ev] = wt
		p.SampleType = append(p.SampleType,
			&pprof.ValueType{Type: ev + " samples", Unit: "count"},
			&pprof.ValueType{Type: typ, Unit: unit})
	}
	p.DefaultSampleType = p.SampleType[1].Type
	p.PeriodType = &pprof.ValueType{Type: p.SampleType[1].Type, Unit: p.SampleType[1].Unit}
	p.Period = weight[events[0]]

	b := newBuilder(p)
	b.lines = o.Lines
	nodeOf := h.Host.Topology.NodeOf()
	cgroup := ""
	if h.Target.Kind == profile.TargetCgroup {
		cgroup = h.Target.Cgroup
	}
	for _, k := range s.keys {
		n := s.counts[k]
		// String labels: pprof drops a numeric label whose value is 0
		// (CPU 0, node 0) when it has no unit.
		smp := &pprof.Sample{
			Value: make([]int64, len(p.SampleType)),
			Label: map[string][]string{
				"comm": {s.commOf(k.pid)}, "pid": {strconv.Itoa(k.pid)},
				"tid": {strconv.Itoa(k.tid)}, "cpu": {strconv.Itoa(k.cpu)},
			},
		}
		if k.cpu >= 0 && k.cpu < len(nodeOf) && nodeOf[k.cpu] >= 0 {
			smp.Label["node"] = []string{strconv.Itoa(nodeOf[k.cpu])}
		}
		if cgroup != "" {
			smp.Label["cgroup"] = []string{cgroup}
		}
		c := col[k.event]
		smp.Value[c] = int64(n)
		smp.Value[c+1] = int64(n) * weight[k.event]
		frames, caller := s.sampleFrames(k)
		if len(frames) == 0 {
			frames, caller = []profile.Frame{{Function: "[no stack]"}}, []bool{false}
		}
		for i, f := range frames {
			smp.Location = append(smp.Location, b.location(f, caller[i]))
		}
		p.Sample = append(p.Sample, smp)
	}
	if err := p.CheckValid(); err != nil {
		return fmt.Errorf("building pprof profile: %w", err)
	}
	return p.Write(w) // gzip-compressed, as pprof expects
}

// builder interns mappings, functions and locations.
type builder struct {
	p         *pprof.Profile
	mappings  map[[2]string]*pprof.Mapping
	functions map[[2]string]*pprof.Function
	locations map[locKey]*pprof.Location
	lines     *symbolize.Lines
}

func newBuilder(p *pprof.Profile) *builder {
	return &builder{p: p, mappings: map[[2]string]*pprof.Mapping{},
		functions: map[[2]string]*pprof.Function{}, locations: map[locKey]*pprof.Location{}}
}

// locKey is a frame, and whether it is a caller's (its lines are the
// call's, one byte before the return address).
type locKey struct {
	f      profile.Frame
	caller bool
}

func (b *builder) location(f profile.Frame, caller bool) *pprof.Location {
	if l, ok := b.locations[locKey{f, caller}]; ok {
		return l
	}
	mk := [2]string{f.Module, f.BuildID}
	m, ok := b.mappings[mk]
	if !ok && f.Module != "" {
		// Frames are symbolized already: HasFunctions stops pprof from
		// trying again. Offsets are file offsets, so the mapping spans
		// every offset.
		m = &pprof.Mapping{ID: uint64(len(b.p.Mapping) + 1), File: f.Module, BuildID: f.BuildID,
			Limit: ^uint64(0), HasFunctions: true}
		b.mappings[mk] = m
		b.p.Mapping = append(b.p.Mapping, m)
	}
	l := &pprof.Location{ID: uint64(len(b.p.Location) + 1), Mapping: m, Address: f.Offset}
	// With lines, one pprof.Line per inlining level, innermost first (the
	// last is the function the others were inlined into), as pprof reads
	// them; the symbolized name stays the outermost's.
	if lines := resolveLines(b.lines, f, caller); len(lines) > 0 {
		for i, ln := range lines {
			name := ln.Function
			if name == "" || i == len(lines)-1 {
				name = f.String()
			}
			l.Line = append(l.Line, pprof.Line{Function: b.function(name, ln.File), Line: int64(ln.Line)})
		}
	} else {
		l.Line = []pprof.Line{{Function: b.function(f.String(), f.Module)}}
	}
	b.locations[locKey{f, caller}] = l
	b.p.Location = append(b.p.Location, l)
	return l
}

// function interns a function by name and file.
func (b *builder) function(name, file string) *pprof.Function {
	k := [2]string{name, file}
	fn, ok := b.functions[k]
	if !ok {
		fn = &pprof.Function{ID: uint64(len(b.p.Function) + 1), Name: name, SystemName: name, Filename: file}
		b.functions[k] = fn
		b.p.Function = append(b.p.Function, fn)
	}
	return fn
}

// resolveLines is f's source lines, none without a resolver or a marker
// frame; caller says f is a caller's frame, whose offset is a return
// address.
func resolveLines(l *symbolize.Lines, f profile.Frame, caller bool) []symbolize.Line {
	if l == nil || symbolize.IsMarker(f) {
		return nil
	}
	resolve := l.Resolve
	if caller {
		resolve = l.ResolveCaller
	}
	lines, _ := resolve(f)
	return lines
}

// sampleFrames are a sample's frames, innermost first (its kernel stack,
// then its user stack), and for each whether it is a caller's: the first
// frame of each stack is where the thread was (in the kernel, or
// entering it), every other one a return address.
func (s *Selection) sampleFrames(k key) ([]profile.Frame, []bool) {
	var frames []profile.Frame
	var caller []bool
	for _, id := range []uint64{k.kernel, k.user} {
		if id == 0 {
			continue
		}
		for i, f := range s.stacks[id].Frames {
			frames = append(frames, f)
			caller = append(caller, i > 0)
		}
	}
	return frames, caller
}

// foldedFrames are a stack's folded frames, outermost first: with lines,
// each inlining level a frame of its own, "func (file:line)".
func foldedFrames(frames []profile.Frame, caller []bool, o Options) []string {
	var out []string
	for i := len(frames) - 1; i >= 0; i-- {
		f := frames[i]
		lines := resolveLines(o.Lines, f, caller[i])
		if !o.FoldedLines || len(lines) == 0 {
			out = append(out, f.String())
			continue
		}
		for j := len(lines) - 1; j >= 0; j-- {
			name := lines[j].Function
			if name == "" || j == len(lines)-1 {
				name = f.String()
			}
			out = append(out, fmt.Sprintf("%s (%s:%d)", name, lines[j].File, lines[j].Line))
		}
	}
	return out
}

// Folded writes collapsed stacks, one line per distinct stack: the
// process's comm, then the frames from the outermost to the innermost,
// separated by ';', a space and the number of samples of o.Event. The
// counts sum to the recording's samples of that event in the selection.
func Folded(w io.Writer, s *Selection) error {
	o := s.o
	ev := o.Event
	if ev == "" {
		ev = s.primary()
	}
	sums := map[string]uint64{}
	var lines []string
	var sb strings.Builder
	for _, k := range s.keys {
		if k.event != ev {
			continue
		}
		sb.Reset()
		sb.WriteString(foldName(s.commOf(k.pid)))
		frames, caller := s.sampleFrames(k)
		for _, name := range foldedFrames(frames, caller, o) {
			sb.WriteByte(';')
			sb.WriteString(foldName(name))
		}
		line := sb.String()
		if _, ok := sums[line]; !ok {
			lines = append(lines, line)
		}
		sums[line] += s.counts[k]
	}
	slices.Sort(lines)
	bw := bufio.NewWriter(w)
	for _, l := range lines {
		fmt.Fprintf(bw, "%s %d\n", l, sums[l])
	}
	return bw.Flush()
}

// foldName keeps a name on its line and in its field: ';' separates
// frames and a newline ends the record, so both become '_'.
func foldName(s string) string {
	if !strings.ContainsAny(s, ";\n\r") {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == ';' || r == '\n' || r == '\r' {
			return '_'
		}
		return r
	}, s)
}
