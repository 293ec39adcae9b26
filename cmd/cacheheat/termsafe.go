package main

import (
	"fmt"
	"io"
	"unicode/utf8"
)

// Strings from recordings and targets (comm, command lines, symbols, metric
// and host names, event reasons) are untrusted: a recording can carry an
// escape sequence that rewrites the terminal of whoever inspects it. Every
// text output of inspect, analyze, diff and the record status line goes
// through appendTermSafe, so no control character, C1 control, invalid
// UTF-8 byte or bidirectional override from a recording reaches the
// terminal unescaped (JSON output is escaped by encoding/json instead).

// termSafe returns s with every control character escaped, \n and \t
// included: for one field on one line.
func termSafe(s string) string {
	return string(appendTermSafe(nil, []byte(s), false))
}

// termWriter escapes what is written to it like termSafe, but keeps \n and
// \t: for whole reports whose layout is the program's own.
type termWriter struct{ w io.Writer }

func newTermWriter(w io.Writer) io.Writer { return termWriter{w} }

func (t termWriter) Write(p []byte) (int, error) {
	if _, err := t.w.Write(appendTermSafe(make([]byte, 0, len(p)), p, true)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// appendTermSafe appends s to dst with unsafe runes written as \xNN
// (bytes: C0 controls, DEL, invalid UTF-8) or \uNNNN (C1 controls and
// bidirectional formatting characters). keepLayout lets \n and \t through.
func appendTermSafe(dst, s []byte, keepLayout bool) []byte {
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		switch {
		case r == utf8.RuneError && size <= 1:
			dst = fmt.Appendf(dst, `\x%02x`, s[0])
		case keepLayout && (r == '\n' || r == '\t'):
			dst = append(dst, byte(r))
		case r < 0x20 || r == 0x7f:
			dst = fmt.Appendf(dst, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f, // C1 controls: 0x9b is CSI on some terminals
			r == 0x200e || r == 0x200f, // directional marks
			r >= 0x202a && r <= 0x202e, // embeddings and overrides
			r >= 0x2066 && r <= 0x2069, // isolates
			r == 0x2028 || r == 0x2029: // line and paragraph separators
			dst = fmt.Appendf(dst, `\u%04x`, r)
		default:
			dst = append(dst, s[:size]...)
		}
		s = s[size:]
	}
	return dst
}
