package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cacheheat/cacheheat/collector"
	"github.com/cacheheat/cacheheat/internal/outfile"
	"github.com/cacheheat/cacheheat/internal/stopsig"
	"github.com/cacheheat/cacheheat/profile"
)

func init() {
	// A command target starts as a re-executed cacheheat that waits for
	// the recorder before exec'ing the command (collector.RunGate).
	collector.RunGate()
	register(command{name: "record", summary: "record a process, a cgroup, a command or the whole host", run: runRecord})
	errorClassifiers = append(errorClassifiers, func(err error) (int, bool) {
		switch {
		case errors.Is(err, collector.ErrHost):
			return exitHost, true
		case errors.Is(err, collector.ErrNoTarget), errors.Is(err, collector.ErrUnknownEvent), errors.Is(err, collector.ErrUnknownPMU):
			return exitUsage, true
		}
		return 0, false
	})
}

func runRecord(name string, args []string, stdout io.Writer) error {
	// The stop signals (stopsig.Signals: SIGINT, SIGTERM, SIGHUP) were
	// caught before main ran when this process is a recorder, so one during
	// start-up is never lost; tests that call run subscribe here.
	sigs := stopsig.Early
	if sigs == nil {
		sigs = stopsig.Notify()
	}
	// The first signal finishes the recording; a second one ends the file
	// where it is and exits at once. Signals that come before the recorder
	// exists finish it as soon as it starts.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// finished stops the signal watcher once the recording is over: a
	// signal while the live view lingers only ends the lingering.
	finished := make(chan struct{})
	var finishOnce sync.Once
	stopWatching := func() { finishOnce.Do(func() { signal.Stop(sigs); close(finished) }) }
	defer stopWatching()
	var recMu sync.Mutex
	var rec *collector.Recorder
	var output string
	go func() {
		select {
		case <-sigs:
		case <-finished:
			return
		}
		cancel()
		select {
		case <-sigs:
		case <-finished:
			return
		}
		recMu.Lock()
		r := rec
		recMu.Unlock()
		if r != nil {
			if err := r.Abort(); err != nil {
				fmt.Fprintf(os.Stderr, "\ncacheheat: %v\n", err)
			}
			fmt.Fprintf(os.Stderr, "\ncacheheat: interrupted twice: %s ends after its last complete window\n", termSafe(output))
		}
		os.Exit(130)
	}()
	fs := newFlagSet(name, "[-p PID[,PID..] | -a | -G CGROUP | -- CMD ARGS] [-C CPUS] [-e EVENTS] [-d DURATION] [-i INTERVAL] [-F HZ] [-c PERIOD] [--func [PATH:]SYMBOL].. [-q] -o FILE", `  cacheheat record -d 10s -o r.rec -- ./bench --size 1G
  sudo cacheheat record -p 1234 -d 30s -o r.rec
  cacheheat record -a -e cpu-clock,page-faults -i 100ms -d 5s -o host.rec
  cacheheat record -G system.slice/nginx.service -d 1m -o nginx.rec
  cacheheat record --func main.handle --func /usr/lib/libz.so.1:deflate -o f.rec -- ./server
`, stdout)
	pids := fs.StringP("pid", "p", "", "record these processes (comma-separated), their threads and children")
	all := fs.BoolP("all-cpus", "a", false, "record every task on every CPU")
	cgroup := fs.StringP("cgroup", "G", "", "record the tasks of this cgroup v2 and its descendants: a path (absolute or under the cgroup2 mount), a container id (or its first 12+ hex digits) or a pod uid")
	cpuList := fs.StringP("cpu", "C", "", "only these CPUs (e.g. 0-3,8)")
	events := fs.StringP("event", "e", "", "events to measure, comma-separated (default: a curated set of cache and hardware events for the CPU's vendor, plus cpu-clock, page-faults, major-faults, context-switches, cpu-migrations)")
	dur := fs.StringP("duration", "d", "", "stop after this long (e.g. 10s, 1m); default: until the targets exit or Ctrl-C")
	interval := fs.StringP("interval", "i", "1s", "window length, at least 10ms")
	hz := fs.IntP("freq", "F", collector.DefaultSampleHz, "cpu-clock stack samples per second per CPU")
	period := fs.Uint64P("count", "c", collector.DefaultMissPeriod, "sample a stack every this many primary miss events (LLC-load-misses, else cache-misses) where the PMU has them")
	quiet := fs.BoolP("quiet", "q", false, "no status line, and no note on the events this host cannot measure")
	out := fs.StringP("output", "o", "", "recording file to write (required)")
	funcs := fs.StringArray("func", nil, "time each call of this function, with the calling thread's counters per call; [PATH:]SYMBOL, PATH defaulting to the target's executable (repeatable)")
	funcEvents := fs.Bool("func-events", false, fmt.Sprintf("also keep every --func call (at most %d a window, the rest counted as dropped)", collector.FuncEventsPerWindow))
	live := fs.String("live", "", "serve a live view of the recording at this address (e.g. 127.0.0.1:8080; port 0 picks one, printed on stderr)")
	linger := fs.String("linger", "", "with --live: after the recording, keep the live view and its report up this long (default: until Ctrl-C)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}

	opts := collector.Options{Output: *out, SampleHz: *hz, SamplePeriod: *period, Tool: "cacheheat " + Version}
	if opts.Output == "" {
		return usageErrorf("record: -o FILE is required; run 'cacheheat record --help'")
	}
	// Refused now, not after the whole recording.
	if err := outfile.Check(opts.Output); err != nil {
		return err
	}
	output = opts.Output
	var cmdArgs []string
	if at := fs.ArgsLenAtDash(); at >= 0 {
		if at > 0 {
			return usageErrorf("record: unexpected arguments %q before --", fs.Args()[:at])
		}
		cmdArgs = fs.Args()
	} else if fs.NArg() > 0 {
		return usageErrorf("record: unexpected arguments %q; put a command after --", fs.Args())
	}
	n := 0
	for _, set := range []bool{*pids != "", *all, *cgroup != "", len(cmdArgs) > 0} {
		if set {
			n++
		}
	}
	if n != 1 {
		return usageErrorf("record: give exactly one target: -p PID, -a, -G CGROUP or -- CMD ARGS")
	}
	switch {
	case *pids != "":
		opts.Target.Kind = profile.TargetPID
		for _, s := range strings.Split(*pids, ",") {
			p, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || p <= 0 {
				return usageErrorf("record: -p %q: not a process id", s)
			}
			opts.Target.PIDs = append(opts.Target.PIDs, p)
		}
	case *all:
		opts.Target.Kind = profile.TargetAll
	case *cgroup != "":
		opts.Target.Kind, opts.Target.Cgroup = profile.TargetCgroup, *cgroup
	default:
		opts.Target.Kind, opts.Target.Command = profile.TargetCommand, cmdArgs
	}
	if *cpuList != "" {
		cpus, err := collector.ParseCPUList(*cpuList)
		if err != nil {
			return usageErrorf("record: -C %q: %v", *cpuList, err)
		}
		opts.CPUs = cpus
	}
	if *events != "" {
		cpu, err := collector.LiveCPU()
		if errors.Is(err, collector.ErrUnknownPMU) {
			return usageErrorf("record: %v", err)
		}
		if err != nil {
			return &hostError{err}
		}
		opts.CPU = &cpu // read once per recording
		seen := map[string]bool{}
		for _, name := range strings.Split(*events, ",") {
			ev, err := collector.LookupEvent(strings.TrimSpace(name), cpu)
			if err != nil {
				return usageErrorf("record: %v", err)
			}
			// One event named twice (or by two aliases) is measured once.
			if !seen[ev.Name] {
				seen[ev.Name] = true
				opts.Events = append(opts.Events, ev)
			}
		}
	}
	for _, f := range *funcs {
		spec, err := collector.ParseFuncSpec(f)
		if err != nil {
			return usageErrorf("record: %v", err)
		}
		opts.Funcs = append(opts.Funcs, spec)
	}
	for _, f := range opts.Funcs {
		if f.Path == "" && (*all || *cgroup != "") {
			return usageErrorf("record: --func %s: with -a or -G there is no main executable; give PATH:%s", f.Symbol, f.Symbol)
		}
	}
	if *funcEvents && len(opts.Funcs) == 0 {
		return usageErrorf("record: --func-events needs --func")
	}
	opts.FuncEvents = *funcEvents
	var err error
	if *dur != "" {
		if opts.Duration, err = time.ParseDuration(*dur); err != nil || opts.Duration <= 0 {
			return usageErrorf("record: -d %q: want a positive duration such as 10s or 2m", *dur)
		}
	}
	// The minimum interval is NewRecorder's to check; here what does not
	// parse, and 0, which means the default to NewRecorder.
	if opts.Interval, err = time.ParseDuration(*interval); err != nil || opts.Interval == 0 {
		return usageErrorf("record: -i %q: want a duration of at least %v, such as 1s or 100ms", *interval, collector.MinInterval)
	}
	if *hz <= 0 {
		return usageErrorf("record: -F %d: want a positive frequency", *hz)
	}
	if *period == 0 {
		return usageErrorf("record: -c 0: want a positive period")
	}

	// The recorder is one goroutine that wakes once a window; with one P
	// the Go scheduler has no idle P to wake a spinning thread for at each
	// wakeup, which was most of its cost on an idle host (BENCHMARKS.md).
	// GOMAXPROCS in the environment still wins.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	opts.Warn = func(msg string) { fmt.Fprintf(os.Stderr, "cacheheat: warning: %s\n", termSafe(msg)) }
	if !*quiet {
		opts.Note = func(msg string) { fmt.Fprintf(os.Stderr, "cacheheat: %s\n", termSafe(msg)) }
	}
	var status *statusLine
	if !*quiet && isTerminal(os.Stderr) {
		status = newStatusLine(os.Stderr)
	}
	if status != nil {
		defer status.close()
		opts.OnWindow = func(_ *profile.Window, s collector.Status) {
			status.set(fmt.Sprintf("recording %s: %.0fs, %s, %s, %s",
				termSafe(opts.Output), s.Elapsed.Seconds(), plural(s.Windows, "window"), plural(int(s.Samples), "sample"), plural(int(s.Drops), "drop")))
		}
	}
	var lingerFor time.Duration = -1
	if *linger != "" {
		if *live == "" {
			return usageErrorf("record: --linger needs --live")
		}
		if lingerFor, err = time.ParseDuration(*linger); err != nil || lingerFor < 0 {
			return usageErrorf("record: --linger %q: want a duration such as 30s, or 0 to stop with the recording", *linger)
		}
	}
	var lv *liveView
	if *live != "" {
		if lv, err = startLive(*live, opts.Output); err != nil {
			return err
		}
		opts.Sinks = append(opts.Sinks, lv)
	}
	r, err := collector.NewRecorder(opts)
	if err != nil {
		return usageErrorf("record: %v", err)
	}
	recMu.Lock()
	rec = r
	recMu.Unlock()

	tr, err := r.Run(ctx)
	if status != nil {
		status.close()
	}
	stopWatching()
	if lv != nil {
		if err == nil {
			fmt.Fprintf(stdout, "recorded %s to %s (end: %s)\n", plural(tr.Windows, "window"), termSafe(opts.Output), tr.EndReason)
		}
		ctx, stop := lingerContext(lingerFor)
		defer stop()
		lv.finish(ctx, tr, err)
		return err
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "recorded %s to %s (end: %s)\n", plural(tr.Windows, "window"), termSafe(opts.Output), tr.EndReason)
	return nil
}

// lingerContext ends after d, or at Ctrl-C (SIGINT or SIGTERM) when d
// is negative (no --linger): how long the live view outlives its
// recording.
func lingerContext(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), stopsig.Signals...)
	if d < 0 {
		return ctx, stop
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	return ctx, func() { cancel(); stop() }
}

// isTerminal says whether f is a terminal: the status line is for people,
// not for logs.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
