// Command recprof runs cacheheat's recorder on the whole host under a Go
// CPU profile, to see what the recorder process spends its time on in the
// steady state (go tool pprof). Profiling starts after the first window,
// so loading the BPF programs is left out.
//
//	go run ./bench/recprof -d 30s -F 99 -cpuprofile rec.pprof [-rate HZ] [-p PID | -G CGROUP]
//	go tool pprof -top rec.pprof
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/cacheheat/cacheheat/collector"
	"github.com/cacheheat/cacheheat/profile"
)

func main() {
	d := flag.Duration("d", 30*time.Second, "recording length")
	hz := flag.Int("F", collector.DefaultSampleHz, "samples per second per CPU")
	out := flag.String("cpuprofile", "recorder.pprof", "CPU profile to write")
	pid := flag.Int("p", 0, "record this process instead of the whole host")
	cgroup := flag.String("G", "", "record this cgroup instead of the whole host")
	// The recorder uses a few ms of CPU a second: at the default 100 Hz a
	// minute's profile has a few dozen samples. The kernel's tick
	// (CONFIG_HZ, 250 on this guest) bounds the real rate: a higher one
	// is written to the profile as asked, and its times come out short.
	rate := flag.Int("rate", 100, "profile samples per second of CPU time, at most CONFIG_HZ")
	flag.Parse()
	tgt := collector.Target{Kind: profile.TargetAll}
	switch {
	case *pid != 0:
		tgt = collector.Target{Kind: profile.TargetPID, PIDs: []int{*pid}}
	case *cgroup != "":
		tgt = collector.Target{Kind: profile.TargetCgroup, Cgroup: *cgroup}
	}
	if err := run(tgt, *d, *hz, *rate, *out); err != nil {
		fmt.Fprintln(os.Stderr, "recprof:", err)
		os.Exit(1)
	}
}

func run(tgt collector.Target, d time.Duration, hz, rate int, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tmp, err := os.MkdirTemp("", "recprof")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var once sync.Once
	var perr error
	r, err := collector.NewRecorder(collector.Options{
		Target:   tgt,
		Duration: d, SampleHz: hz,
		Output: filepath.Join(tmp, "r.rec"),
		Sinks: []collector.Sink{collector.WindowFunc(func(*profile.Window, collector.Status) {
			once.Do(func() {
				if rate != 100 {
					// Set first, StartCPUProfile then warns that a
					// rate is set and keeps it.
					runtime.SetCPUProfileRate(rate)
				}
				perr = pprof.StartCPUProfile(f)
			})
		})},
	})
	if err != nil {
		return err
	}
	_, err = r.Run(context.Background())
	pprof.StopCPUProfile()
	if err != nil {
		return err
	}
	return perr
}
