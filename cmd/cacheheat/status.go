package main

import (
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// statusLine keeps record's progress on the terminal's last line while
// the target writes above it: the lines above become a scroll region (as
// apt's progress bar does), so the target's output never lands on, or is
// overwritten by, the status. It is only used when stderr is a terminal.
type statusLine struct {
	mu   sync.Mutex
	w    io.Writer
	rows int
	on   bool
}

// newStatusLine reserves the last line of the terminal on f; nil when f is
// not a terminal or too small to spare a line.
func newStatusLine(f *os.File) *statusLine {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Row < 3 {
		return nil
	}
	s := &statusLine{w: f, rows: int(ws.Row), on: true}
	// A newline makes room at the bottom; the cursor is saved and
	// restored around the scroll-region change, which homes it.
	fmt.Fprintf(s.w, "\n\0337\033[1;%dr\0338\033[1A", s.rows-1)
	return s
}

// set writes msg on the reserved line and puts the cursor back.
func (s *statusLine) set(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.on {
		fmt.Fprintf(s.w, "\0337\033[%d;1H\033[2K%s\0338", s.rows, msg)
	}
}

// close clears the reserved line and gives the whole terminal back.
func (s *statusLine) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.on {
		s.on = false
		fmt.Fprintf(s.w, "\0337\033[%d;1H\033[2K\033[1;%dr\0338", s.rows, s.rows)
	}
}
