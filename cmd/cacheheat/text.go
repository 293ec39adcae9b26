package main

import (
	"github.com/cacheheat/cacheheat/profile"
)

// plural writes "1 window", "2 windows", "3 processes".
func plural(n int, noun string) string { return profile.Plural(n, noun) }

// count writes a count with spaces between thousands: 12 345 678.
func count(v uint64) string { return profile.GroupDigits(v, " ") }
