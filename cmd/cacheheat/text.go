package main

import (
	"strconv"
	"strings"
	"unicode"

	"github.com/cacheheat/cacheheat/profile"
)

// plural writes "1 window", "2 windows", "3 processes".
func plural(n int, noun string) string { return profile.Plural(n, noun) }

// count writes a count with spaces between thousands: 12 345 678.
func count(v uint64) string { return profile.GroupDigits(v, " ") }

// printable keeps a name from the recording (a process name, a symbol)
// from writing control sequences to the terminal: non-printable runes
// become \xNN or \uNNNN.
func printable(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsPrint(r) {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRuneToASCII(r)
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}
