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

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/cacheheat/cacheheat/collector"
	"github.com/cacheheat/cacheheat/host"
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := watchRecordSignals(sigs, cancel)
	defer w.stop()

	fs, f := recordFlagSet(name, stdout)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	opts, err := f.options(fs)
	if err != nil {
		return err
	}
	w.setOutput(opts.Output)

	// The recorder is one goroutine that wakes once a window; with one P
	// the Go scheduler has no idle P to wake a spinning thread for at each
	// wakeup, which was most of its cost on an idle host (BENCHMARKS.md).
	// GOMAXPROCS in the environment still wins.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	status := f.report(&opts)
	if status != nil {
		defer status.close()
	}
	lingerFor, err := f.lingerFor()
	if err != nil {
		return err
	}
	var lv *liveView
	if *f.live != "" {
		if lv, err = startLive(*f.live, opts.Output); err != nil {
			return err
		}
		opts.Sinks = append(opts.Sinks, lv)
	}
	r, err := collector.NewRecorder(opts)
	if err != nil {
		return usageErrorf("record: %v", err)
	}
	w.setRecorder(r)

	tr, err := r.Run(ctx)
	if status != nil {
		status.close()
	}
	w.stop()
	if lv != nil {
		if err == nil {
			fmt.Fprintf(stdout, "recorded %s to %s (end: %s)\n", plural(tr.Windows, "window"), termSafe(opts.Output), tr.EndReason)
		}
		ctx, stop := lingerContext(lingerFor)
		defer stop()
		lv.finish(ctx, err)
		return err
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "recorded %s to %s (end: %s)\n", plural(tr.Windows, "window"), termSafe(opts.Output), tr.EndReason)
	if tr.RunsFailed != "" {
		// The runs so far are in the file, readable; the job failed.
		return fmt.Errorf("%w: %s", errRunFailed, tr.RunsFailed)
	}
	return nil
}

// errRunFailed ends record with exit 1: a run of a repeated command
// failed, and the recording holds the runs before it.
var errRunFailed = errors.New("a run failed")

// recordSignals ends a recording on the stop signals: the first cancels
// the recording's context, which finishes the file; a second one ends the
// file where it is and exits at once. Signals that come before the
// recorder exists finish it as soon as it starts.
type recordSignals struct {
	// finished stops the watcher once the recording is over: a signal
	// while the live view lingers only ends the lingering.
	finished   chan struct{}
	finishOnce sync.Once
	sigs       chan os.Signal

	mu     sync.Mutex
	rec    *collector.Recorder
	output string
}

func watchRecordSignals(sigs chan os.Signal, cancel context.CancelFunc) *recordSignals {
	w := &recordSignals{finished: make(chan struct{}), sigs: sigs}
	go func() {
		if !w.next() {
			return
		}
		cancel()
		if !w.next() {
			return
		}
		w.mu.Lock()
		r, output := w.rec, w.output
		w.mu.Unlock()
		if r != nil {
			if err := r.Abort(); err != nil {
				fmt.Fprintf(os.Stderr, "\ncacheheat: %v\n", err)
			}
			fmt.Fprintf(os.Stderr, "\ncacheheat: interrupted twice: %s ends after its last complete window\n", termSafe(output))
		}
		os.Exit(130)
	}()
	return w
}

// next waits for a signal; false when the recording finished first.
func (w *recordSignals) next() bool {
	select {
	case <-w.sigs:
		return true
	case <-w.finished:
		return false
	}
}

func (w *recordSignals) setOutput(path string) {
	w.mu.Lock()
	w.output = path
	w.mu.Unlock()
}

func (w *recordSignals) setRecorder(r *collector.Recorder) {
	w.mu.Lock()
	w.rec = r
	w.mu.Unlock()
}

// stop ends the watching; signals go back to their default handling.
func (w *recordSignals) stop() {
	w.finishOnce.Do(func() { signal.Stop(w.sigs); close(w.finished) })
}

// recordFlags are record's flags, as parsed.
type recordFlags struct {
	pids, cgroup, cpuList, events, dur, interval, out, live, linger *string
	quietMax                                                        *time.Duration
	all, quiet, funcEvents, noLines                                 *bool
	hz, runs, warmup                                                *int
	period                                                          *uint64
	funcs                                                           *[]string
}

func recordFlagSet(name string, stdout io.Writer) (*pflag.FlagSet, *recordFlags) {
	fs := newFlagSet(name, "[-p PID[,PID..] | -a | -G CGROUP | -- CMD ARGS] [-C CPUS] [-e EVENTS] [-d DURATION] [-i INTERVAL] [-F HZ] [-c PERIOD] [--func [PATH:]SYMBOL].. [-q] -o FILE", `  cacheheat record -d 10s -o r.rec -- ./bench --size 1G
  sudo cacheheat record -p 1234 -d 30s -o r.rec
  cacheheat record -a -e cpu-clock,page-faults -i 100ms -d 5s -o host.rec
  cacheheat record -G system.slice/nginx.service -d 1m -o nginx.rec
  cacheheat record --func main.handle --func /usr/lib/libz.so.1:deflate -o f.rec -- ./server
  cacheheat record -r 10 --warmup 1 -o runs.rec -- ./bench    10 runs for diff, after 1 warm-up run
  cacheheat record -a -o host.rec -- ./bench                 the whole host while ./bench runs
`, stdout)
	var f recordFlags
	f.pids = fs.StringP("pid", "p", "", "record these processes (comma-separated), their threads and children")
	f.all = fs.BoolP("all-cpus", "a", false, "record every task on every CPU")
	f.cgroup = fs.StringP("cgroup", "G", "", "record the tasks of this cgroup v2 and its descendants: a path (absolute or under the cgroup2 mount), a container id (or its first 12+ hex digits) or a pod uid")
	f.cpuList = fs.StringP("cpu", "C", "", "only these CPUs (e.g. 0-3,8)")
	f.events = fs.StringP("event", "e", "", "events to measure, comma-separated (default: a curated set of cache and hardware events for the CPU's vendor, plus cpu-clock, page-faults, major-faults, context-switches, cpu-migrations)")
	f.dur = fs.StringP("duration", "d", "", "stop after this long (e.g. 10s, 1m); default: until the targets exit or Ctrl-C")
	f.interval = fs.StringP("interval", "i", "1s", "window length, at least 10ms")
	f.hz = fs.IntP("freq", "F", collector.DefaultSampleHz, "cpu-clock stack samples per second per CPU")
	f.runs = fs.IntP("repeat", "r", 1, "run the command this many times, one after the other, keeping each run's totals (wall and CPU time, peak RSS, counters, samples by function) for diff")
	f.warmup = fs.Int("warmup", 0, "with -r: run the command this many times more first; kept, marked warm-up, not compared")
	f.period = fs.Uint64P("count", "c", collector.DefaultMissPeriod, "sample a stack every this many primary miss events (LLC-load-misses, else cache-misses) where the PMU has them")
	f.quiet = fs.BoolP("quiet", "q", false, "no status line, and no note on the events this host cannot measure")
	f.out = fs.StringP("output", "o", "", "recording file to write (required)")
	f.funcs = fs.StringArray("func", nil, "time each call of this function, with the calling thread's counters per call; [PATH:]SYMBOL, PATH defaulting to the target's executable (repeatable)")
	f.funcEvents = fs.Bool("func-events", false, fmt.Sprintf("also keep every --func call (at most %d a window, the rest counted as dropped)", collector.FuncEventsPerWindow))
	f.noLines = fs.Bool("no-lines", false, "do not resolve the sampled addresses' source lines when the recording ends (report and export then read them from the binaries)")
	f.quietMax = fs.Duration("quiet-max", collector.DefaultQuietMax, "after a window in which the target did nothing, take no other until it runs again, for at most this long (one window, marked quiet; at least -i); 0: a window every interval. Not with -a or -r")
	f.live = fs.String("live", "", "serve a live view of the recording at this address (e.g. 127.0.0.1:8080; port 0 picks one, printed on stderr)")
	f.linger = fs.String("linger", "", "with --live: after the recording, keep the live view and its report up this long (default: until Ctrl-C)")
	return fs, &f
}

// options turns the flags into the recorder's options, checking each
// (exit 2 for a bad one) in the order they are listed in the help.
func (f *recordFlags) options(fs *pflag.FlagSet) (collector.Options, error) {
	opts := collector.Options{Output: *f.out, SampleHz: *f.hz, SamplePeriod: *f.period, Tool: "cacheheat " + Version}
	if opts.Output == "" {
		return opts, usageErrorf("record: -o FILE is required; run 'cacheheat record --help'")
	}
	// Refused now, not after the whole recording.
	if err := outfile.Check(opts.Output); err != nil {
		return opts, err
	}
	var err error
	if opts.Target, err = f.target(fs); err != nil {
		return opts, err
	}
	if *f.cpuList != "" {
		if opts.CPUs, err = host.ParseCPUList(*f.cpuList); err != nil {
			return opts, usageErrorf("record: -C %q: %v", *f.cpuList, err)
		}
	}
	if *f.events != "" {
		cpu, evs, err := lookupEvents(*f.events)
		if err != nil {
			return opts, err
		}
		opts.CPU, opts.Events = &cpu, evs // the CPU is read once per recording
	}
	if opts.Funcs, err = f.funcSpecs(); err != nil {
		return opts, err
	}
	opts.FuncEvents = *f.funcEvents
	if *f.dur != "" {
		if opts.Duration, err = time.ParseDuration(*f.dur); err != nil || opts.Duration <= 0 {
			return opts, usageErrorf("record: -d %q: want a positive duration such as 10s or 2m", *f.dur)
		}
	}
	// The minimum interval is NewRecorder's to check; here what does not
	// parse, and 0, which means the default to NewRecorder.
	if opts.Interval, err = time.ParseDuration(*f.interval); err != nil || opts.Interval == 0 {
		return opts, usageErrorf("record: -i %q: want a duration of at least %v, such as 1s or 100ms", *f.interval, collector.MinInterval)
	}
	if *f.hz <= 0 {
		return opts, usageErrorf("record: -F %d: want a positive frequency", *f.hz)
	}
	if *f.period == 0 {
		return opts, usageErrorf("record: -c 0: want a positive period")
	}
	if *f.runs < 1 {
		return opts, usageErrorf("record: -r %d: want a number of runs, 1 or more", *f.runs)
	}
	if *f.warmup < 0 {
		return opts, usageErrorf("record: --warmup %d: want a number of runs, 0 or more", *f.warmup)
	}
	if (*f.runs > 1 || *f.warmup > 0) && len(opts.Target.Command) == 0 {
		return opts, usageErrorf("record: -r and --warmup repeat a command: give it after --")
	}
	opts.Runs, opts.Warmup = *f.runs, *f.warmup
	opts.NoLines = *f.noLines
	// A negative or too short --quiet-max is NewRecorder's to refuse.
	opts.QuietMax = *f.quietMax
	return opts, nil
}

// target is the one target the flags name: -p, -a, -G or a command
// after --.
func (f *recordFlags) target(fs *pflag.FlagSet) (collector.Target, error) {
	var t collector.Target
	var cmdArgs []string
	if at := fs.ArgsLenAtDash(); at >= 0 {
		if at > 0 {
			return t, usageErrorf("record: unexpected arguments %q before --", fs.Args()[:at])
		}
		cmdArgs = fs.Args()
	} else if fs.NArg() > 0 {
		return t, usageErrorf("record: unexpected arguments %q; put a command after --", fs.Args())
	}
	n := 0
	// -a -- CMD records the whole host while CMD runs (perf record -a --
	// CMD): the command is not a target of its own.
	for _, set := range []bool{*f.pids != "", *f.all, *f.cgroup != "", len(cmdArgs) > 0 && !*f.all} {
		if set {
			n++
		}
	}
	if n != 1 {
		return t, usageErrorf("record: give exactly one target: -p PID, -a, -G CGROUP or -- CMD ARGS (-a -- CMD: the whole host while CMD runs)")
	}
	switch {
	case *f.pids != "":
		t.Kind = profile.TargetPID
		for _, s := range strings.Split(*f.pids, ",") {
			p, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || p <= 0 {
				return t, usageErrorf("record: -p %q: not a process id", s)
			}
			t.PIDs = append(t.PIDs, p)
		}
	case *f.all:
		t.Kind, t.Command = profile.TargetAll, cmdArgs
	case *f.cgroup != "":
		t.Kind, t.Cgroup = profile.TargetCgroup, *f.cgroup
	default:
		t.Kind, t.Command = profile.TargetCommand, cmdArgs
	}
	return t, nil
}

// lookupEvents resolves -e's comma-separated names for this host's CPU,
// which it returns too.
func lookupEvents(list string) (host.CPUInfo, []collector.Event, error) {
	cpu, err := collector.LiveCPU()
	if errors.Is(err, collector.ErrUnknownPMU) {
		return cpu, nil, usageErrorf("record: %v", err)
	}
	if err != nil {
		return cpu, nil, &hostError{err}
	}
	var evs []collector.Event
	seen := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		ev, err := collector.LookupEvent(strings.TrimSpace(name), cpu)
		if err != nil {
			return cpu, nil, usageErrorf("record: %v", err)
		}
		// One event named twice (or by two aliases) is measured once.
		if !seen[ev.Name] {
			seen[ev.Name] = true
			evs = append(evs, ev)
		}
	}
	return cpu, evs, nil
}

// funcSpecs parses the --func functions; with -a or -G each needs its
// binary's path, there being no main executable.
func (f *recordFlags) funcSpecs() ([]collector.FuncSpec, error) {
	var specs []collector.FuncSpec
	for _, s := range *f.funcs {
		spec, err := collector.ParseFuncSpec(s)
		if err != nil {
			return nil, usageErrorf("record: %v", err)
		}
		specs = append(specs, spec)
	}
	for _, spec := range specs {
		if spec.Path == "" && (*f.all || *f.cgroup != "") {
			return nil, usageErrorf("record: --func %s: with -a or -G there is no main executable; give PATH:%s", spec.Symbol, spec.Symbol)
		}
	}
	if *f.funcEvents && len(specs) == 0 {
		return nil, usageErrorf("record: --func-events needs --func")
	}
	return specs, nil
}

// report sets where the recorder's warnings and notes go, and returns the
// status line when there is one (not with -q, and only on a terminal).
func (f *recordFlags) report(opts *collector.Options) *statusLine {
	opts.Warn = func(msg string) { fmt.Fprintf(os.Stderr, "cacheheat: warning: %s\n", termSafe(msg)) }
	if *f.quiet {
		return nil
	}
	opts.Note = func(msg string) { fmt.Fprintf(os.Stderr, "cacheheat: %s\n", termSafe(msg)) }
	if !isTerminal(os.Stderr) {
		return nil
	}
	status := newStatusLine(os.Stderr)
	opts.Sinks = append(opts.Sinks, progressSink{status: status, output: opts.Output})
	return status
}

// progressSink shows the recording's progress on the status line.
type progressSink struct {
	status *statusLine
	output string
}

func (progressSink) Header(profile.Header) error { return nil }

func (p progressSink) Window(_ *profile.Window, _ *collector.WindowExtras, s collector.Status) error {
	quiet := ""
	if s.Quiet {
		quiet = "; the target did nothing: waiting for it to run"
	}
	p.status.set(fmt.Sprintf("recording %s: %.0fs, %s, %s, %s%s",
		termSafe(p.output), s.Elapsed.Seconds(), plural(s.Windows, "window"), plural(int(s.Samples), "sample"), plural(int(s.Drops), "drop"), quiet))
	return nil
}

func (progressSink) Close(*profile.Trailer) error { return nil }

// lingerFor is how long the live view stays up after the recording: -1
// (no --linger) until Ctrl-C.
func (f *recordFlags) lingerFor() (time.Duration, error) {
	if *f.linger == "" {
		return -1, nil
	}
	if *f.live == "" {
		return 0, usageErrorf("record: --linger needs --live")
	}
	d, err := time.ParseDuration(*f.linger)
	if err != nil || d < 0 {
		return 0, usageErrorf("record: --linger %q: want a duration such as 30s, or 0 to stop with the recording", *f.linger)
	}
	return d, nil
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
