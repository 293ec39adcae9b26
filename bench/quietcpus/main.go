// Command quietcpus counts, per CPU, the windows of a recording in which
// the CPU made no context switch: on an idle host, the windows in which it
// ran its idle task only (or one task throughout), whose software counters
// the recorder keeps rather than reads (collector/kernel_maps.go).
//
//	quietcpus FILE.rec
package main

import (
	"fmt"
	"os"

	"github.com/cacheheat/cacheheat/profile"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: quietcpus FILE.rec")
		os.Exit(2)
	}
	rec, err := profile.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "quietcpus:", err)
		os.Exit(1)
	}
	quiet := map[int]int{}
	windows, cells, total := 0, 0, 0
	for _, w := range rec.Windows {
		for _, c := range w.Counters {
			if c.Event != "context-switches" || c.HostPerCPU == nil {
				continue
			}
			windows++
			for cpu, v := range c.HostPerCPU {
				cells++
				if v == 0 {
					quiet[cpu]++
					total++
				}
			}
		}
	}
	if windows == 0 {
		fmt.Fprintln(os.Stderr, "quietcpus: no window counts context-switches per CPU")
		os.Exit(1)
	}
	fmt.Printf("%d windows, %d of %d CPU-windows without a context switch; by CPU: %v\n", windows, total, cells, quiet)
}
