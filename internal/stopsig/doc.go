// Package stopsig catches the signals that stop a recording or a workload
// as early as a Go program can. A signal that arrives before signal.Notify kills a Go
// program, and the package initializers of cacheheat's dependencies (the
// BPF library, the chart and template packages) take milliseconds, so a
// Notify in package main's init would leave that window open. Go
// initializes, among the packages whose imports are ready, the one with
// the smallest import path first; this package imports only the standard
// library and sorts before every other third-party path cacheheat uses,
// so its init runs right after the standard library's.
package stopsig
