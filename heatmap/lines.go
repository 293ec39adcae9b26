package heatmap

import (
	"bytes"
	"sort"

	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
	"github.com/cacheheat/cacheheat/symbolize"
)

// The hot-lines view is what perf annotate gives, for every sample event
// at once: for the top functions, each source line's share of each event's
// samples (and of the off-CPU time), with the line's text when the source
// file is readable on this host. Lines come from the binaries' debug
// information, read when the report is made (symbolize.Lines).

// HotLinesView is the report's hot-lines section.
type HotLinesView struct {
	// Columns are the sample events, then "off-CPU time" when the
	// recording has off-CPU stacks.
	Columns   []string      `json:"columns"`
	Functions []HotFunction `json:"functions"`
	// Notes say which files gave no lines, and why.
	Notes []string `json:"notes,omitempty"`
}

// HotFunction is one function with its lines.
type HotFunction struct {
	Name string `json:"name"`
	// Shares are the function's share of each column's total (self: its
	// innermost user frame).
	Shares []float64 `json:"shares"`
	Lines  []HotLine `json:"lines"`
	// NoLines is the share of its primary samples whose line is unknown.
	NoLines float64 `json:"no_lines"`
}

// HotLine is one source line of a function.
type HotLine struct {
	File string `json:"file"`
	Line int    `json:"line"`
	// Inlined names the function inlined at this line, when the address
	// is in code the compiler inlined into the function.
	Inlined string    `json:"inlined,omitempty"`
	Shares  []float64 `json:"shares"`
	// Source is the line's text; empty when the file is not readable
	// here (Unreadable then says why).
	Source     string `json:"source,omitempty"`
	Unreadable string `json:"unreadable,omitempty"`
}

const (
	hotFunctions = 10
	// hotLinesKept are kept per function; the page shows hotLinesShown
	// and pages through the rest.
	hotLinesKept  = 100
	hotLinesShown = 10
)

type lineKey struct {
	file, inlined string
	line          int
}

// HotLines builds the section: nil when there are no samples, and only
// its notes when no sample resolves to a line.
func HotLines(m *model.Model, l *symbolize.Lines) *HotLinesView {
	if l == nil {
		return nil
	}
	if m.Trailer != nil {
		l.AddRecorded(m.Trailer.Lines) // resolved when the recording ended
	}
	v := &HotLinesView{}
	type fn struct {
		total []float64
		lines map[lineKey][]float64
	}
	fns := map[string]*fn{}
	notes := map[string]bool{}
	var colTotals []float64
	add := func(col int, f profile.Frame, caller bool, n float64) {
		colTotals[col] += n
		name := f.String()
		x := fns[name]
		if x == nil {
			x = &fn{total: make([]float64, len(v.Columns)), lines: map[lineKey][]float64{}}
			fns[name] = x
		}
		x.total[col] += n
		resolve := l.Resolve
		if caller {
			resolve = l.ResolveCaller
		}
		lines, err := resolve(f)
		if err != nil {
			notes[err.Error()] = true
		}
		k := lineKey{}
		if len(lines) > 0 {
			k = lineKey{file: lines[0].File, line: lines[0].Line}
			if lines[0].Inlined {
				k.inlined = lines[0].Function
			}
		}
		if x.lines[k] == nil {
			x.lines[k] = make([]float64, len(v.Columns))
		}
		x.lines[k][col] += n
	}
	for _, ev := range m.SampleEvents {
		if s := m.Samples[ev]; s != nil && s.Total > 0 {
			v.Columns = append(v.Columns, ev)
		}
	}
	off := m.Light.OffCPUScaler()
	hasOff := false
	for _, w := range m.Light.Windows {
		hasOff = hasOff || (w.OffCPU != nil && len(w.OffCPU.Stacks) > 0)
	}
	if hasOff {
		v.Columns = append(v.Columns, "off-CPU time")
	}
	if len(v.Columns) == 0 {
		return nil
	}
	colTotals = make([]float64, len(v.Columns))
	for col, ev := range m.SampleEvents {
		s := m.Samples[ev]
		if s == nil || s.Total == 0 {
			continue
		}
		for p, n := range s.ByStack {
			if f, ok := innermostUser(m, p); ok {
				add(col, f, false, float64(n))
			}
		}
	}
	if hasOff {
		col := len(v.Columns) - 1
		for _, w := range m.Light.Windows {
			if w.OffCPU == nil {
				continue
			}
			for _, st := range w.OffCPU.Stacks {
				if profile.Waiting(st.Reason) {
					continue // idle threads and sleeps are not where time is lost
				}
				if f, caller, ok := blamedFrame(m, st); ok {
					add(col, f, caller, float64(st.NS)*off.Scale(st.Key()))
				}
			}
		}
	}
	names := make([]string, 0, len(fns))
	for n := range fns {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := fns[names[i]].total, fns[names[j]].total
		for c := range a {
			if a[c] != b[c] {
				return a[c] > b[c]
			}
		}
		return names[i] < names[j]
	})
	src := newSources()
	for _, name := range names {
		if len(v.Functions) == hotFunctions {
			break
		}
		x := fns[name]
		hf := HotFunction{Name: name, Shares: shares(x.total, colTotals)}
		var keys []lineKey
		for k := range x.lines {
			if k.line == 0 {
				hf.NoLines = x.lines[k][0] / max(x.total[0], 1)
				continue
			}
			keys = append(keys, k)
		}
		if len(keys) == 0 {
			continue
		}
		sort.Slice(keys, func(i, j int) bool {
			a, b := x.lines[keys[i]], x.lines[keys[j]]
			for c := range a {
				if a[c] != b[c] {
					return a[c] > b[c]
				}
			}
			if keys[i].file != keys[j].file {
				return keys[i].file < keys[j].file
			}
			return keys[i].line < keys[j].line
		})
		for _, k := range keys {
			if len(hf.Lines) == hotLinesKept {
				break
			}
			hl := HotLine{File: k.file, Line: k.line, Inlined: k.inlined, Shares: shares(x.lines[k], colTotals)}
			hl.Source, hl.Unreadable = src.line(k.file, k.line)
			hf.Lines = append(hf.Lines, hl)
		}
		v.Functions = append(v.Functions, hf)
	}
	for n := range notes {
		v.Notes = append(v.Notes, n)
	}
	sort.Strings(v.Notes)
	if len(v.Functions) == 0 && len(v.Notes) == 0 {
		return nil
	}
	return v
}

// blamedFrame is the frame an off-CPU stack's time is blamed on (the
// lock's API, where the program called into the kernel: what the
// lock-contention finding names), else its innermost user frame; caller
// says it is a caller's frame (its offset a return address).
func blamedFrame(m *model.Model, st profile.OffCPUStack) (f profile.Frame, caller, ok bool) {
	var user, kernel []profile.Frame
	if s, ok := m.Stacks[st.UserStack]; ok && st.UserStack != 0 {
		user = s.Frames
	}
	if s, ok := m.Stacks[st.KernelStack]; ok && st.KernelStack != 0 {
		kernel = s.Frames
	}
	_, blamed := profile.ExplainOffCPU(st.Wait, user, kernel)
	for i, f := range user {
		if f.String() == blamed {
			return f, i > 0, true
		}
	}
	f, ok = innermostUser(m, model.StackPair{User: st.UserStack, Kernel: st.KernelStack})
	return f, false, ok
}

// innermostUser is the innermost user frame of a stack pair, or its
// innermost kernel frame when it has no user stack.
func innermostUser(m *model.Model, p model.StackPair) (profile.Frame, bool) {
	if st, ok := m.Stacks[p.User]; ok && p.User != 0 && len(st.Frames) > 0 {
		return st.Frames[0], true
	}
	if st, ok := m.Stacks[p.Kernel]; ok && p.Kernel != 0 && len(st.Frames) > 0 {
		return st.Frames[0], true
	}
	return profile.Frame{}, false
}

func shares(v, totals []float64) []float64 {
	out := make([]float64, len(v))
	for i := range v {
		if totals[i] > 0 {
			out[i] = v[i] / totals[i]
		}
	}
	return out
}

// sources reads source files once each.
type sources struct {
	files map[string][][]byte
	errs  map[string]string
}

func newSources() *sources {
	return &sources{files: map[string][][]byte{}, errs: map[string]string{}}
}

// maxSourceLine bounds a line's text in the page.
const maxSourceLine = 240

// line is one line's text (1-based), or why the file cannot be shown.
func (s *sources) line(file string, n int) (text, why string) {
	lines, ok := s.files[file]
	if !ok {
		b, err := symbolize.Source("/", file)
		if err != nil {
			s.errs[file] = err.Error()
		} else {
			lines = bytes.Split(b, []byte("\n"))
		}
		s.files[file] = lines
	}
	if why := s.errs[file]; why != "" {
		return "", why
	}
	if n < 1 || n > len(lines) {
		return "", "no such line in the file on this host (it changed?)"
	}
	t := bytes.TrimRight(lines[n-1], "\r")
	if len(t) > maxSourceLine {
		t = append(t[:maxSourceLine:maxSourceLine], "…"...)
	}
	return string(bytes.ToValidUTF8(t, []byte("\uFFFD"))), ""
}
