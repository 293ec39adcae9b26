// Command idlewin prints, for bench/idle-compare.py, each window of a
// recording as one line: its start and end (Unix ns), the idle time of
// all CPUs in it and their cpu-clock busy time (ns).
//
//	idlewin FILE.rec
package main

import (
	"fmt"
	"os"

	"github.com/cacheheat/cacheheat/profile"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: idlewin FILE.rec")
		os.Exit(2)
	}
	r, err := profile.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(4)
	}
	t0 := r.Header.StartTime.UnixNano()
	for _, w := range r.Windows {
		var idle, busy uint64
		for _, v := range w.IdleNS {
			idle += v
		}
		for _, c := range w.Counters {
			if c.Event == "cpu-clock" {
				for _, v := range c.HostPerCPU {
					busy += v
				}
			}
		}
		fmt.Println(t0+w.StartNS, t0+w.EndNS, idle, busy)
	}
}
