// Command genrec writes synthetic recordings. By default, for
// bench/report.sh: the report's size and speed on a long, wide recording
// (1 h of 1 s windows on 128 CPUs with ten events). With --effect RULE, a
// small recording of a hardware host whose counts show that root-cause
// rule's effect (--effect none: a healthy one), for demos and for the test
// that each hardware rule fires on its effect alone. Its counts are made
// up, the header says so ("synthetic"); it never stands in for a
// measurement.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cacheheat/cacheheat/heatmap/synth"
)

func main() {
	o := synth.Big()
	out := flag.String("o", "", "recording to write")
	flag.IntVar(&o.CPUs, "cpus", o.CPUs, "CPUs")
	flag.IntVar(&o.Nodes, "nodes", o.Nodes, "NUMA nodes")
	flag.IntVar(&o.Windows, "windows", o.Windows, "windows")
	flag.DurationVar(&o.Interval, "interval", time.Second, "window length")
	flag.Uint64Var(&o.Seed, "seed", o.Seed, "random seed of the counts (two seeds: two runs of one workload)")
	flag.IntVar(&o.Format, "format", 0, "file format major version (default: the current one)")
	eff := flag.String("effect", "", "write the effect of this rule instead ("+strings.Join(effectNames(), ", ")+")")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "genrec: -o FILE is required")
		os.Exit(2)
	}
	if *eff != "" {
		if _, err := findEffect(*eff); err != nil {
			fmt.Fprintln(os.Stderr, "genrec:", err)
			os.Exit(2)
		}
		if err := writeEffect(*out, *eff); err != nil {
			fmt.Fprintln(os.Stderr, "genrec:", err)
			os.Exit(1)
		}
		return
	}
	if err := synth.Write(*out, o); err != nil {
		fmt.Fprintln(os.Stderr, "genrec:", err)
		os.Exit(1)
	}
}
