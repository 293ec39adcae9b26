// Package stopsig catches the signals that stop a recording as early as a
// Go program can. A signal that arrives before signal.Notify kills a Go
// program, and the package initializers of cacheheat's dependencies (the
// BPF library, the chart and template packages) take milliseconds, so a
// Notify in package main's init would leave that window open. Go
// initializes, among the packages whose imports are ready, the one with
// the smallest import path first; this package imports only the standard
// library and sorts before every other third-party path cacheheat uses,
// so its init runs right after the standard library's.
package stopsig

import (
	"os"
	"os/signal"
	"syscall"
)

// Signals finish a recording: Ctrl-C, kill, and SIGHUP, which a recorder
// started over SSH gets when the session closes.
var Signals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// Early is subscribed to Signals at initialization when the process is
// `cacheheat record` (its first argument is "record"); nil otherwise, so
// that every other command keeps Go's default handling.
var Early chan os.Signal

func init() {
	if len(os.Args) > 1 && os.Args[1] == "record" {
		Early = Notify()
	}
}

// Notify subscribes a new channel to Signals.
func Notify() chan os.Signal {
	c := make(chan os.Signal, 2)
	signal.Notify(c, Signals...)
	return c
}
