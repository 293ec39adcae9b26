// Package export writes a recording's stack samples in formats other tools
// read: a pprof profile (go tool pprof, Pyroscope, Parca) and Brendan
// Gregg's collapsed stacks (flamegraph.pl, speedscope). It reads the
// recording through profile's model only; docs/EXPORT.md describes what
// each format carries.
package export
