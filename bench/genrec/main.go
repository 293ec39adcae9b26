// Command genrec writes a synthetic recording for bench/report.sh: the
// report's size and speed on a long, wide recording (by default 1 h of 1 s
// windows on 128 CPUs with ten events). Its counts are made up; it never
// stands in for a measurement.
package main

import (
	"flag"
	"fmt"
	"os"
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
	flag.IntVar(&o.Format, "format", 0, "file format major version (default: the current one)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "genrec: -o FILE is required")
		os.Exit(2)
	}
	if err := synth.Write(*out, o); err != nil {
		fmt.Fprintln(os.Stderr, "genrec:", err)
		os.Exit(1)
	}
}
