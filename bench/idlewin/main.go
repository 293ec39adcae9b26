// Command idlewin prints, for bench/idle-compare.py, each window of a
// recording as one line: its start and end (Unix ns), the idle time of
// all CPUs in it and their cpu-clock busy time (ns). On stderr it then
// counts, per CPU, the windows in which the CPU made no context switch:
// on an idle host, those in which it ran its idle task only.
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
	quiet := map[int]int{}
	cells, nquiet := 0, 0
	for _, w := range r.Windows {
		var idle, busy uint64
		for _, v := range w.IdleNS {
			idle += v
		}
		for _, c := range w.Counters {
			switch c.Event {
			case "cpu-clock":
				for _, v := range c.HostPerCPU {
					busy += v
				}
			case "context-switches":
				for cpu, v := range c.HostPerCPU {
					cells++
					if v == 0 {
						quiet[cpu]++
						nquiet++
					}
				}
			}
		}
		fmt.Println(t0+w.StartNS, t0+w.EndNS, idle, busy)
	}
	if cells > 0 {
		fmt.Fprintf(os.Stderr, "%d of %d CPU-windows without a context switch; by CPU: %v\n", nquiet, cells, quiet)
	}
}
