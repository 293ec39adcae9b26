package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/cacheheat/cacheheat/collector"
	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/profile"
	"github.com/cacheheat/cacheheat/promexporter"
	"github.com/cacheheat/cacheheat/web"
)

func init() {
	register(command{name: "exporter", summary: "serve per-CPU and per-cgroup counts and latency histograms as Prometheus metrics", run: runExporter})
}

// exporterSampleHz is the exporter's default cpu-clock rate. Its samples
// take no stacks; they only bring a long-running task's counts into the
// window it ran in, and every one wakes an idle CPU.
const exporterSampleHz = 19

func runExporter(name string, args []string, stdout io.Writer) error {
	fs, f := exporterFlagSet(name, stdout)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	opts, err := f.options(fs)
	if err != nil {
		return err
	}
	exp := promexporter.New(promexporter.Options{MaxCgroups: *f.maxCgroups, Version: Version})
	ready := &announce{w: stdout}
	opts.Sinks = []collector.Sink{exp, ready}
	rec, err := collector.NewRecorder(opts)
	if err != nil {
		return usageErrorf("exporter: %v", err)
	}
	return serveMetrics(rec, exp.Handler(), *f.listen, ready)
}

// announce says where the metrics are once the recorder has its BPF
// programs loaded and attached (its header is made then): not before, so
// an exporter that cannot load them never claims to serve.
type announce struct {
	w    io.Writer
	line string
}

func (a *announce) Header(profile.Header) error {
	if a.line != "" {
		fmt.Fprintln(a.w, a.line)
	}
	return nil
}

func (a *announce) Window(*profile.Window, *collector.WindowExtras, collector.Status) error {
	return nil
}
func (a *announce) Close(*profile.Trailer) error { return nil }

// exporterFlags are the exporter's flags, as parsed.
type exporterFlags struct {
	listen, events, interval *string
	allowRemote              *bool
	maxCgroups, hz           *int
}

func exporterFlagSet(name string, stdout io.Writer) (*pflag.FlagSet, *exporterFlags) {
	fs := newFlagSet(name, "[--listen HOST:PORT] [--allow-remote] [--max-cgroups N] [-e EVENTS] [-i INTERVAL] [-F HZ]", `  sudo cacheheat exporter                            metrics at http://127.0.0.1:9632/metrics
  sudo cacheheat exporter --listen 0.0.0.0:9632 --allow-remote
  sudo cacheheat exporter -e cpu-clock,page-faults,context-switches --max-cgroups 100
`, stdout)
	var f exporterFlags
	f.listen = fs.String("listen", "127.0.0.1:9632", "address to serve /metrics on")
	f.allowRemote = fs.Bool("allow-remote", false, "allow a --listen address that is not loopback (the metrics name every cgroup and container on the host)")
	f.maxCgroups = fs.Int("max-cgroups", promexporter.DefaultMaxCgroups, "most cgroups with their own series; the rest are summed into cgroup=\"other\"")
	f.events = fs.StringP("event", "e", "", "events to count, comma-separated (default: as record)")
	f.interval = fs.StringP("interval", "i", "1s", "how often the counts are brought up to date, at least 10ms")
	f.hz = fs.IntP("freq", "F", exporterSampleHz, "cpu-clock samples per second per CPU (no stacks; they attribute long-running tasks' counts between switches)")
	return fs, &f
}

// options checks the flags (exit 2 for a bad one) and turns them into
// the options of a whole-host, by-cgroup recorder without a file.
func (f *exporterFlags) options(fs *pflag.FlagSet) (collector.Options, error) {
	var opts collector.Options
	if fs.NArg() != 0 {
		return opts, usageErrorf("exporter: unexpected arguments %q; run 'cacheheat exporter --help'", fs.Args())
	}
	if !web.IsLoopback(*f.listen) && !*f.allowRemote {
		return opts, usageErrorf("exporter: --listen %s is not a loopback address: add --allow-remote to serve the metrics to other hosts", *f.listen)
	}
	if *f.maxCgroups <= 0 {
		return opts, usageErrorf("exporter: --max-cgroups %d: want a positive number", *f.maxCgroups)
	}
	if *f.hz <= 0 {
		return opts, usageErrorf("exporter: -F %d: want a positive frequency", *f.hz)
	}
	opts = collector.Options{
		Target:   collector.Target{Kind: profile.TargetAll},
		SampleHz: *f.hz, ByCgroup: true, BPFStats: true,
		Warn: func(msg string) { fmt.Fprintf(os.Stderr, "cacheheat: warning: %s\n", msg) },
	}
	var err error
	// The minimum interval is NewRecorder's to check; 0 would mean its default.
	if opts.Interval, err = time.ParseDuration(*f.interval); err != nil || opts.Interval == 0 {
		return opts, usageErrorf("exporter: -i %q: want a duration of at least %v, such as 1s", *f.interval, collector.MinInterval)
	}
	if *f.events != "" {
		cpu, err := host.ReadCPUInfo("/")
		if err != nil {
			return opts, &hostError{err}
		}
		for _, n := range strings.Split(*f.events, ",") {
			ev, err := collector.LookupEvent(strings.TrimSpace(n), cpu)
			if err != nil {
				return opts, usageErrorf("exporter: %v", err)
			}
			opts.Events = append(opts.Events, ev)
		}
	}
	return opts, nil
}

// serveMetrics serves the metrics at addr while rec records, until a
// signal (SIGINT, SIGTERM, SIGHUP) or the server fails.
func serveMetrics(rec *collector.Recorder, metrics http.Handler, addr string, ready *announce) error {
	stdout := ready.w
	if !web.IsLoopback(addr) {
		fmt.Fprintf(os.Stderr, "cacheheat: warning: %s is not a loopback address: anyone who can reach this host can read its cgroup and container names and counts\n", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return usageErrorf("exporter: listening on %s: %v (pick another address with a free port)", addr, err)
	}
	srv := &http.Server{
		Handler:           web.CheckHost(metrics, addr, ln.Addr()),
		ReadHeaderTimeout: 10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       time.Minute,
	}
	defer srv.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srvErr := make(chan error, 1)
	go func() {
		srvErr <- srv.Serve(ln)
		cancel()
	}()
	ready.line = fmt.Sprintf("serving metrics at http://%s/metrics (Ctrl-C or SIGTERM to stop)", ln.Addr())

	// The recorder runs until a signal, then releases every BPF object
	// before Run returns.
	_, runErr := rec.Run(ctx)
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer scancel()
	_ = srv.Shutdown(sctx)
	if runErr != nil {
		return runErr
	}
	select {
	case err := <-srvErr:
		if err != nil && err != http.ErrServerClosed {
			return fmt.Errorf("serving metrics: %w", err)
		}
	default:
	}
	fmt.Fprintln(stdout, "exporter stopped; every bpf object released")
	return nil
}
