// Package metric is the catalogue of the metrics cacheheat derives from a
// recording: each has one name (its ID), a unit and a formula, and every
// package that computes or shows one (attribution's rules, the heatmap
// report, the diff, the web views) takes them from here, so that one
// ratio has one name everywhere.
//
// It also names the perf events those formulas read. The events
// themselves (their perf encodings, kinds and vendor variants) are the
// collector's catalogue (collector/events.go); this package spells their
// names only, so that the analysis packages, which read recordings, need
// not link the recorder. A test checks that every name here is one the
// collector can open.
package metric
