package profile

import (
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"strings"
)

// Stream reads a recording one window at a time. It holds the header, the
// stacks defined so far and, at the end, the trailer, but never more than
// the window being read (and the decoder's read-ahead batch): what a
// consumer that reduces windows as they come (the derived model, model/)
// needs instead of the whole Recording in memory. Each window is checked
// against CheckValid's invariants as it is read.
type Stream struct {
	Header Header
	// Stacks holds every stack defined by the windows read so far; a
	// window's samples only refer to stacks it or an earlier window
	// defined.
	Stacks map[uint64]Stack
	// Trailer, Truncated and Warning are set once the windows are read,
	// as Recording's are.
	Trailer   *Trailer
	Truncated bool
	Warning   string

	d       *Decoder
	closer  io.Closer
	funcs   map[int]int
	ncpu    int
	prevEnd int64
	windows int
	err     error
}

// NewStream reads the preamble and header. An error wraps ErrFormat when
// the stream is not a recording this version can read.
func NewStream(r io.Reader) (*Stream, error) {
	d, err := NewDecoder(r)
	if err != nil {
		return nil, err
	}
	funcs, err := d.Header.checkValid()
	if err != nil {
		return nil, formatErr("invalid recording: %v", err)
	}
	return &Stream{Header: d.Header, Stacks: map[uint64]Stack{}, d: d, funcs: funcs, ncpu: d.Header.Host.Topology.MaxCPU() + 1}, nil
}

// OpenFile opens the recording at path as a stream; Close closes the file.
// When path does not exist but an unfinished path+PartialSuffix does, the
// error says so.
func OpenFile(path string) (*Stream, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && !strings.HasSuffix(path, PartialSuffix) {
			if p := PartialFiles(path); len(p) > 0 {
				return nil, fmt.Errorf("%s does not exist, but %s does: the recorder did not finish; read that file instead: %w", path, p[len(p)-1], err)
			}
		}
		return nil, err
	}
	s, err := NewStream(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s.closer = f
	return s, nil
}

// Close closes the file OpenFile opened; it does nothing for NewStream's.
func (s *Stream) Close() error {
	if s.closer == nil {
		return nil
	}
	err := s.closer.Close()
	s.closer = nil
	return err
}

// Windows yields the windows in file order, each one's NewStacks already
// added to Stacks (and NewStacks cleared). The loop ends at the trailer,
// at the end of a truncated file, or at the first window that breaks
// CheckValid's invariants; Err then says which.
func (s *Stream) Windows() iter.Seq[*Window] {
	return func(yield func(*Window) bool) {
		for s.err == nil {
			w, t, err := s.d.Next()
			if err == io.EOF {
				s.Truncated, s.Warning = s.d.Truncated, s.d.Warning
				return
			}
			if err != nil {
				s.err = err
				return
			}
			if t != nil {
				s.Trailer = t
				continue
			}
			for _, st := range w.NewStacks {
				s.Stacks[st.ID] = st
			}
			w.NewStacks = nil
			if err := checkWindow(s.windows, w, s.prevEnd, s.ncpu, s.funcs, s.Stacks); err != nil {
				s.err = formatErr("invalid recording: %v", err)
				return
			}
			s.windows++
			s.prevEnd = w.EndNS
			if !yield(w) {
				return
			}
		}
	}
}

// Err is the reason Windows stopped early: a window that breaks the
// recording's invariants (wrapping ErrFormat); nil otherwise.
func (s *Stream) Err() error { return s.err }
