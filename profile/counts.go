package profile

import (
	"errors"
	"strconv"
)

// Counts is an array of counts indexed by CPU id or histogram bucket. It is
// the bulk of every window, so it has its own JSON codec: encoding/json's
// reflection costs about 1 µs a number, which made reading a 1-hour,
// 128-CPU recording take most of a report's time budget. The encoding is
// the plain JSON array of integers that encoding/json would write.
type Counts []uint64

// MarshalJSON writes the counts as a JSON array of integers.
func (c Counts) MarshalJSON() ([]byte, error) {
	if c == nil {
		return []byte("null"), nil
	}
	b := make([]byte, 0, 2+len(c)*4)
	b = append(b, '[')
	for i, v := range c {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, v, 10)
	}
	return append(b, ']'), nil
}

var errCounts = errors.New("counts: want a JSON array of non-negative integers")

// UnmarshalJSON reads a JSON array of non-negative integers (or null).
// encoding/json has already checked that data is one valid JSON value.
func (c *Counts) UnmarshalJSON(data []byte) error {
	i := skipSpace(data, 0)
	if i < len(data) && data[i] == 'n' {
		*c = nil
		return nil
	}
	if i >= len(data) || data[i] != '[' {
		return errCounts
	}
	// Size the slice once: growing it by append was a third of the time
	// spent reading a large recording.
	n := 1
	for _, b := range data[i:] {
		if b == ',' {
			n++
		}
	}
	out := make(Counts, 0, n)
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		*c = Counts{}
		return nil
	}
	for {
		start := i
		var v uint64
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			d := uint64(data[i] - '0')
			if v > (1<<64-1-d)/10 {
				return errCounts
			}
			v = v*10 + d
			i++
		}
		if i == start {
			return errCounts
		}
		out = append(out, v)
		i = skipSpace(data, i)
		if i >= len(data) {
			return errCounts
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case ']':
			*c = out
			return nil
		default:
			return errCounts
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
