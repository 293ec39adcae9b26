package symbolize

import (
	"cmp"
	"errors"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cacheheat/cacheheat/profile"
)

// Lines can be resolved when a recording ends and kept in its trailer
// (profile.Trailer.Lines): the recorder lists the addresses its stacks
// name as they are written (LineRequests), then reads each file's debug
// information once, after the last window. A report then reads no
// debug information at all: for a large Go binary that reading is most of
// a report's time. The recorder pays it once, where it is idle anyway,
// and the lines stay right when a binary is rebuilt or deleted after the
// run, or the recording is read on another host.

// recordDebugBytes bounds the debug sections of one file that the
// recorder reads when the recording ends: it runs beside production
// services, and a large C++ binary's DWARF can be gigabytes inflated.
// A larger file's lines are left to whoever reads the recording (which
// reads up to maxDebugBytes).
const recordDebugBytes = 128 << 20

// MaxLineRequests bounds the addresses a recording resolves when it ends
// (about 80 bytes of recorder memory each); past it, the rest are
// resolved from the files when the recording is read.
const MaxLineRequests = 100_000

// LineRequests collects the file addresses a recording's stacks name.
type LineRequests struct {
	addrs    map[lineKey]map[uint64]struct{}
	n, limit int
	// Dropped counts addresses left out past MaxLineRequests.
	Dropped int
	// TooLarge lists the files whose debug information was too large to
	// read when the recording ended (recordDebugBytes).
	TooLarge []string
}

// NewLineRequests returns an empty collection.
func NewLineRequests() *LineRequests {
	return &LineRequests{addrs: map[lineKey]map[uint64]struct{}{}, limit: MaxLineRequests}
}

// AddStack notes a user stack's frames (innermost first) as Resolve and
// ResolveCaller will look them up: the innermost at its offset, each
// caller at its return address minus one. Frames without a file or a
// build id (without one, a reader could not tell the file's lines from
// another file's at the same path) are left to the reader.
func (q *LineRequests) AddStack(frames []profile.Frame) {
	for i, f := range frames {
		if !strings.HasPrefix(f.Module, "/") || f.BuildID == "" || IsMarker(f) {
			continue
		}
		off := f.Offset
		if i > 0 && off > 0 {
			off--
		}
		k := lineKey{f.Module, f.BuildID}
		m := q.addrs[k]
		if m == nil {
			m = map[uint64]struct{}{}
			q.addrs[k] = m
		}
		if _, ok := m[off]; ok {
			continue
		}
		if q.n >= q.limit {
			q.Dropped++
			continue
		}
		m[off] = struct{}{}
		q.n++
	}
}

// Resolve reads each file's lines for its addresses, one file at a time
// (its debug information is let go before the next is read), from the
// files under root ("/" on the recording host). Files that give no lines
// (missing, changed, without debug information) are left out: a reader
// tries them again and says why.
func (q *LineRequests) Resolve(root string) []profile.SourceLines {
	keys := make([]lineKey, 0, len(q.addrs))
	for k := range q.addrs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b lineKey) int {
		return cmp.Or(cmp.Compare(a.path, b.path), cmp.Compare(a.buildID, b.buildID))
	})
	var out []profile.SourceLines
	for _, k := range keys {
		lf := openLineFile(filepath.Join(root, strings.TrimSuffix(k.path, " (deleted)")), k.path, k.buildID, recordDebugBytes)
		if lf.err != nil {
			if errors.Is(lf.err, ErrDebugTooLarge) {
				q.TooLarge = append(q.TooLarge, k.path)
			}
			continue
		}
		offs := make([]uint64, 0, len(q.addrs[k]))
		for off := range q.addrs[k] {
			offs = append(offs, off)
		}
		slices.Sort(offs)
		sl := profile.SourceLines{Module: k.path, BuildID: k.buildID}
		names := map[string]int{}
		name := func(s string) int {
			if s == "" {
				return -1
			}
			i, ok := names[s]
			if !ok {
				i = len(sl.Names)
				names[s] = i
				sl.Names = append(sl.Names, s)
			}
			return i
		}
		// An address without lines is kept too, with none: a reader
		// that did not find it would read the file after all.
		for _, off := range offs {
			lines := lf.lines(off)
			a := profile.AddrLines{Offset: off, Lines: make([]profile.SourceLine, len(lines))}
			for i, l := range lines {
				a.Lines[i] = profile.SourceLine{Function: name(l.Function), File: name(l.File), Line: l.Line, Inlined: l.Inlined}
			}
			sl.Addrs = append(sl.Addrs, a)
		}
		if len(sl.Addrs) > 0 {
			out = append(out, sl)
		}
	}
	return out
}

// AddRecorded adds a recording's resolved lines; Resolve answers from
// them before it reads any file. A file (path and build id) already
// added is kept as it was: the same build id has the same lines.
func (l *Lines) AddRecorded(recorded []profile.SourceLines) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, sl := range recorded {
		k := lineKey{sl.Module, sl.BuildID}
		if sl.BuildID == "" || l.recorded[k] != nil {
			continue
		}
		name := func(i int) string {
			if i < 0 || i >= len(sl.Names) {
				return ""
			}
			return sl.Names[i]
		}
		m := make(map[uint64][]Line, len(sl.Addrs))
		for _, a := range sl.Addrs {
			lines := make([]Line, len(a.Lines))
			for i, x := range a.Lines {
				lines[i] = Line{Function: name(x.Function), File: name(x.File), Line: x.Line, Inlined: x.Inlined}
			}
			m[a.Offset] = lines
		}
		l.recorded[k] = m
	}
}

// recordedLines is the recording's lines of path and build id at off.
func (l *Lines) recordedLines(path, buildID string, off uint64) ([]Line, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines, ok := l.recorded[lineKey{path, buildID}][off]
	return lines, ok
}
