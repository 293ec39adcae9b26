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
}

// key identifies identical samples summed over the selected windows.
type key struct {
	event         string
	pid, tid, cpu int
	user, kernel  uint64
}

// selection is the samples Options keep, summed, with each process's name.
type selection struct {
	rec     *profile.Recording
	counts  map[key]uint64
	keys    []key // first-seen order, so the output is deterministic
	comm    map[int]string
	startNS int64
	endNS   int64
}

func selectSamples(rec *profile.Recording, o Options) *selection {
	s := &selection{rec: rec, counts: map[key]uint64{}, comm: map[int]string{}, startNS: -1}
	for i := range rec.Windows {
		w := &rec.Windows[i]
		if w.StartNS < int64(o.From) || (o.To > 0 && w.StartNS >= int64(o.To)) {
			continue
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
	if s.startNS < 0 {
		s.startNS = 0
	}
	return s
}

// commOf names a process: its comm from the recording, else "pid N".
func (s *selection) commOf(pid int) string {
	if c := s.comm[pid]; c != "" {
		return c
	}
	return fmt.Sprintf("pid %d", pid)
}

// events lists the sample events present, the primary one first.
func (s *selection) events() []string {
	primary := s.rec.PrimarySampleEvent()
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
func Pprof(w io.Writer, rec *profile.Recording, o Options) error {
	s := selectSamples(rec, o)
	events := s.events()
	if len(events) == 0 {
		events = []string{rec.PrimarySampleEvent()}
	}
	p := &pprof.Profile{
		TimeNanos:     rec.Header.StartTime.Add(time.Duration(s.startNS)).UnixNano(),
		DurationNanos: s.endNS - s.startNS,
		Comments:      []string{rec.Header.Tool},
	}
	col := map[string]int{}
	weight := map[string]int64{}
	for _, ev := range events {
		typ, unit, wt := sampleWeight(rec.Header, ev)
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
	nodeOf := rec.Header.Host.Topology.NodeOf()
	cgroup := ""
	if rec.Header.Target.Kind == profile.TargetCgroup {
		cgroup = rec.Header.Target.Cgroup
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
		frames := rec.SampleFrames(profile.Sample{UserStack: k.user, KernelStack: k.kernel})
		if len(frames) == 0 {
			frames = []profile.Frame{{Function: "[no stack]"}}
		}
		for _, f := range frames {
			smp.Location = append(smp.Location, b.location(f))
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
	functions map[string]*pprof.Function
	locations map[profile.Frame]*pprof.Location
}

func newBuilder(p *pprof.Profile) *builder {
	return &builder{p: p, mappings: map[[2]string]*pprof.Mapping{},
		functions: map[string]*pprof.Function{}, locations: map[profile.Frame]*pprof.Location{}}
}

func (b *builder) location(f profile.Frame) *pprof.Location {
	if l, ok := b.locations[f]; ok {
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
	name := f.String()
	fn, ok := b.functions[name]
	if !ok {
		fn = &pprof.Function{ID: uint64(len(b.p.Function) + 1), Name: name, SystemName: name, Filename: f.Module}
		b.functions[name] = fn
		b.p.Function = append(b.p.Function, fn)
	}
	l := &pprof.Location{ID: uint64(len(b.p.Location) + 1), Mapping: m, Address: f.Offset,
		Line: []pprof.Line{{Function: fn}}}
	b.locations[f] = l
	b.p.Location = append(b.p.Location, l)
	return l
}

// Folded writes collapsed stacks, one line per distinct stack: the
// process's comm, then the frames from the outermost to the innermost,
// separated by ';', a space and the number of samples of o.Event. The
// counts sum to the recording's samples of that event in the selection.
func Folded(w io.Writer, rec *profile.Recording, o Options) error {
	s := selectSamples(rec, o)
	ev := o.Event
	if ev == "" {
		ev = rec.PrimarySampleEvent()
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
		frames := rec.SampleFrames(profile.Sample{UserStack: k.user, KernelStack: k.kernel})
		for i := len(frames) - 1; i >= 0; i-- {
			sb.WriteByte(';')
			sb.WriteString(foldName(frames[i].String()))
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
