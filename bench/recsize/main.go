// Command recsize measures the recording format for bench/format.sh.
//
//	recsize -marginal SHORT.rec LONG.rec
//	    rewrites both recordings in format v1 and v2 and prints, per
//	    format, the marginal size per CPU-window:
//	    (size(LONG) - size(SHORT)) / ((windows(LONG) - windows(SHORT)) x CPUs)
//	recsize -breakdown SHORT.rec LONG.rec
//	    the same marginal size in v2, and what each Window field costs of
//	    it: the marginal size minus that of the recordings rewritten with
//	    the field cleared in every window
//	recsize -read FILE [RUNS]
//	    prints the best wall time of profile.ReadFile over RUNS (default 3)
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"time"

	"github.com/cacheheat/cacheheat/profile"
)

func main() {
	marginal := flag.Bool("marginal", false, "marginal size per CPU-window of SHORT.rec and LONG.rec in v1 and v2")
	read := flag.Bool("read", false, "best read time of FILE")
	breakdown := flag.Bool("breakdown", false, "what each window field costs of the v2 marginal size")
	flag.Parse()
	var err error
	switch {
	case *marginal && flag.NArg() == 2:
		err = marginalSize(flag.Arg(0), flag.Arg(1))
	case *breakdown && flag.NArg() == 2:
		err = breakdownSize(flag.Arg(0), flag.Arg(1))
	case *read && flag.NArg() >= 1:
		runs := 3
		if flag.NArg() > 1 {
			runs, _ = strconv.Atoi(flag.Arg(1))
		}
		err = readTime(flag.Arg(0), max(1, runs))
	default:
		fmt.Fprintln(os.Stderr, "usage: recsize -marginal|-breakdown SHORT.rec LONG.rec | recsize -read FILE [RUNS]")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "recsize:", err)
		os.Exit(1)
	}
}

func marginalSize(short, long string) error {
	dir, err := os.MkdirTemp("", "recsize-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	recs, cpus, dw, err := readPair(short, long)
	if err != nil {
		return err
	}
	fmt.Printf("windows %d and %d, %d CPUs\n", len(recs[0].Windows), len(recs[1].Windows), cpus)
	for _, major := range []int{1, 2} {
		var size [2]int64
		for i, r := range recs {
			out := filepath.Join(dir, fmt.Sprintf("v%d-%d.rec", major, i))
			if err := profile.WriteFile(out, r, major); err != nil {
				return err
			}
			st, err := os.Stat(out)
			if err != nil {
				return err
			}
			size[i] = st.Size()
		}
		nominal := (recs[1].Header.Settings.DurationNS - recs[0].Header.Settings.DurationNS) / max(1, recs[1].Header.Settings.IntervalNS)
		fmt.Printf("v%d: %d and %d bytes; marginal %.1f bytes per CPU-window over the %d windows written, %.1f over the nominal %d\n",
			major, size[0], size[1], float64(size[1]-size[0])/float64(dw*cpus), dw,
			float64(size[1]-size[0])/float64(max(1, nominal)*int64(cpus)), nominal)
	}
	// The same recording cut: its windows past the short recording's
	// count, without the difference between two recordings' early windows
	// (what else ran while each started).
	cut := *recs[1]
	cut.Windows = cut.Windows[:len(recs[0].Windows)]
	var size [2]int64
	for i, rec := range []*profile.Recording{&cut, recs[1]} {
		out := filepath.Join(dir, fmt.Sprintf("cut-%d.rec", i))
		if err := profile.WriteFile(out, rec, 2); err != nil {
			return err
		}
		st, err := os.Stat(out)
		if err != nil {
			return err
		}
		size[i] = st.Size()
	}
	fmt.Printf("v2, windows %d-%d of %s alone: %.1f bytes per CPU-window\n",
		len(recs[0].Windows), len(recs[1].Windows)-1, long, float64(size[1]-size[0])/float64(dw*cpus))
	// What the long recording's windows hold: on a shared host, other
	// processes' activity (new stacks every window) is most of the size.
	r := recs[1]
	var procs, rows, stacks int
	for _, w := range r.Windows {
		procs += len(w.Processes)
		rows += len(w.Samples)
	}
	stacks = len(r.Stacks)
	n := len(r.Windows)
	fmt.Printf("%s per window: %d processes, %d sample rows; %d distinct stacks in %d windows\n",
		long, procs/n, rows/n, stacks, n)
	// The same without stack samples, to separate their cost.
	for i, rec := range recs {
		c := *rec
		c.Windows = nil
		for _, w := range rec.Windows {
			w.Samples = nil
			c.Windows = append(c.Windows, w)
		}
		out := filepath.Join(dir, fmt.Sprintf("nosamples-%d.rec", i))
		if err := profile.WriteFile(out, &c, 2); err != nil {
			return err
		}
		st, err := os.Stat(out)
		if err != nil {
			return err
		}
		size[i] = st.Size()
	}
	fmt.Printf("v2 without stack samples: marginal %.1f bytes per CPU-window over the windows written\n",
		float64(size[1]-size[0])/float64(dw*cpus))
	return nil
}

func readTime(path string, runs int) error {
	best := time.Duration(1<<63 - 1)
	for range runs {
		start := time.Now()
		if _, err := profile.ReadFile(path); err != nil {
			return err
		}
		best = min(best, time.Since(start))
	}
	fmt.Printf("%.2f\n", best.Seconds())
	return nil
}

// breakdownSize prints the v2 marginal size per CPU-window and, per Window
// field, how much of it goes away when that field is cleared in every
// window of both recordings (zstd compresses fields together, so the parts
// need not add up exactly to the whole).
func breakdownSize(short, long string) error {
	dir, err := os.MkdirTemp("", "recsize-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	recs, cpus, dw, err := readPair(short, long)
	if err != nil {
		return err
	}
	// marginal rewrites both recordings with clear applied to each window.
	marginal := func(clear func(w *profile.Window)) (float64, error) {
		var size [2]int64
		for i, rec := range recs {
			c := *rec
			c.Windows = make([]profile.Window, len(rec.Windows))
			copy(c.Windows, rec.Windows)
			for j := range c.Windows {
				clear(&c.Windows[j])
			}
			out := filepath.Join(dir, fmt.Sprintf("b-%d.rec", i))
			if err := profile.WriteFile(out, &c, 2); err != nil {
				return 0, err
			}
			st, err := os.Stat(out)
			if err != nil {
				return 0, err
			}
			size[i] = st.Size()
		}
		return float64(size[1]-size[0]) / float64(dw*cpus), nil
	}
	all, err := marginal(func(*profile.Window) {})
	if err != nil {
		return err
	}
	fmt.Printf("v2 marginal: %.1f bytes per CPU-window (%d windows, %d CPUs)\n", all, dw, cpus)
	t := reflect.TypeFor[profile.Window]()
	for i := range t.NumField() {
		name := t.Field(i).Name
		if name == "Index" || name == "StartNS" || name == "EndNS" {
			continue
		}
		without, err := marginal(func(w *profile.Window) {
			f := reflect.ValueOf(w).Elem().Field(i)
			f.Set(reflect.Zero(f.Type()))
			if name == "Samples" {
				w.NewStacks = nil // stacks only samples and off-CPU stacks refer to
			}
		})
		if err != nil {
			return err
		}
		fmt.Printf("  %-12s %8.1f\n", name, all-without)
	}
	return nil
}

// readPair reads a short and a long recording of the same run and returns
// them with the long one's CPU count and how many more windows it has.
func readPair(short, long string) (recs [2]*profile.Recording, cpus, dw int, err error) {
	for i, p := range []string{short, long} {
		if recs[i], err = profile.ReadFile(p); err != nil {
			return recs, 0, 0, err
		}
	}
	cpus = len(recs[1].Header.Host.Topology.CPUs)
	dw = len(recs[1].Windows) - len(recs[0].Windows)
	if dw <= 0 {
		return recs, 0, 0, fmt.Errorf("%s has no more windows than %s", long, short)
	}
	return recs, cpus, dw, nil
}
