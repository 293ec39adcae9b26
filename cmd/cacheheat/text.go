package main

import (
	"strconv"
	"strings"
	"unicode"

	"github.com/cacheheat/cacheheat/profile"
)

// plural writes a count and its noun, in the plural unless n is 1:
// "1 window", "2 windows", "3 processes".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	switch {
	case strings.HasSuffix(noun, "s"):
		noun += "es"
	default:
		noun += "s"
	}
	return strconv.Itoa(n) + " " + noun
}

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
