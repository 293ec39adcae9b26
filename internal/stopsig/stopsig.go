package stopsig

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Signals finish a recording or a workload: Ctrl-C, kill, and SIGHUP,
// which a process started over SSH gets when the session closes.
var Signals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// Early is subscribed to Signals at initialization when the process is
// `cacheheat record` or `cacheheat workload`; nil otherwise, so that every
// other command keeps Go's default handling.
var Early chan os.Signal

func init() {
	if len(os.Args) > 1 && (os.Args[1] == "record" || os.Args[1] == "workload") {
		Early = Notify()
	}
}

// Context returns a context that is cancelled by the first of Signals
// (from Early when set) and a function that stops listening.
func Context() (context.Context, func()) {
	c := Early
	if c == nil {
		c = Notify()
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-c:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(); signal.Stop(c) }
}

// Notify subscribes a new channel to Signals.
func Notify() chan os.Signal {
	c := make(chan os.Signal, 2)
	signal.Notify(c, Signals...)
	return c
}
