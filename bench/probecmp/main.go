// Command probecmp compares a `cacheheat probe --json` result with the
// independent C ping-pong of bench/c2c (its "from to median min max"
// lines) over the same pairs, for bench/probe.sh: the median over pairs
// of how far the probe's cell is from C's, and each relation's medians.
// Given two C outputs, it compares them the same way: how far two runs
// of the same program are apart, the floor for the first comparison.
//
//	probecmp probe.json c2c.txt
//	probecmp c2c-1.txt c2c-2.txt
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/probe"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: probecmp probe.json c2c.txt")
		os.Exit(2)
	}
	c := readC(os.Args[2])
	if strings.HasSuffix(os.Args[1], ".txt") {
		a := readC(os.Args[1])
		var dev []float64
		for k, v := range a {
			if w, ok := c[k]; ok {
				dev = append(dev, math.Abs(v/w-1))
			}
		}
		if len(dev) == 0 {
			fail(fmt.Errorf("no pair in both"))
		}
		fmt.Printf("%d pairs in both; C vs C, median over pairs of |C1/C2 - 1|: %.1f%% (90th percentile %.1f%%)\n",
			len(dev), 100*quantile(dev, 0.5), 100*quantile(dev, 0.9))
		return
	}
	b, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail(err)
	}
	var r probe.Result
	if err := json.Unmarshal(b, &r); err != nil {
		fail(err)
	}
	if r.C2C == nil {
		fail(fmt.Errorf("%s has no matrix", os.Args[1]))
	}
	var dev []float64
	probeBy, cBy := map[string][]float64{}, map[string][]float64{}
	for _, cell := range r.C2C.Cells {
		want, ok := c[[2]int{cell.From, cell.To}]
		if !ok || cell.Error != "" {
			continue
		}
		dev = append(dev, math.Abs(cell.MedianNS/want-1))
		probeBy[cell.Relation] = append(probeBy[cell.Relation], cell.MedianNS)
		cBy[cell.Relation] = append(cBy[cell.Relation], want)
	}
	if len(dev) == 0 {
		fail(fmt.Errorf("no pair in both"))
	}
	fmt.Printf("%d pairs in both; probe vs C, median over pairs of |probe/C - 1|: %.1f%% (90th percentile %.1f%%)\n",
		len(dev), 100*quantile(dev, 0.5), 100*quantile(dev, 0.9))
	fmt.Println("| pairs | n | probe median | C median |")
	fmt.Println("|---|---|---|---|")
	for _, rel := range []string{"smt", "l3", "node", "package", "remote"} {
		if len(probeBy[rel]) > 0 {
			fmt.Printf("| %s | %d | %s | %s |\n", probe.RelationNames[rel], len(probeBy[rel]),
				metric.FormatNS(quantile(probeBy[rel], 0.5)), metric.FormatNS(quantile(cBy[rel], 0.5)))
		}
	}
	fmt.Printf("probe took %.1f s (quick %v); other load %.1f%%\n", r.DurationS, r.Quick, 100*r.Noise.OtherBusy)
	for _, s := range r.Staircase {
		for _, l := range s.Levels {
			fmt.Printf("node %d cpu %d: L%d %s, latency steps up at %s, within one size step: %v\n",
				s.Node, s.CPU, l.Level, metric.FormatBytes(l.SizeBytes), metric.FormatBytes(l.StepBytes), l.Within)
		}
	}
}

// readC reads bench/c2c's "from to median min max" lines.
func readC(path string) map[[2]int]float64 {
	f, err := os.Open(path)
	if err != nil {
		fail(err)
	}
	defer f.Close()
	c := map[[2]int]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var from, to int
		var med, lo, hi float64
		if n, _ := fmt.Sscanf(sc.Text(), "%d %d %f %f %f", &from, &to, &med, &lo, &hi); n == 5 {
			c[[2]int{from, to}] = med
		}
	}
	return c
}

func quantile(v []float64, q float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1)+0.5)]
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "probecmp:", err)
	os.Exit(1)
}
