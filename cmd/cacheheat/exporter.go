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

	"github.com/cacheheat/cacheheat/collector"
	"github.com/cacheheat/cacheheat/exporter"
	"github.com/cacheheat/cacheheat/profile"
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
	fs := newFlagSet(name, "[--listen HOST:PORT] [--allow-remote] [--max-cgroups N] [-e EVENTS] [-i INTERVAL] [-F HZ]", `  sudo cacheheat exporter                            metrics at http://127.0.0.1:9632/metrics
  sudo cacheheat exporter --listen 0.0.0.0:9632 --allow-remote
  sudo cacheheat exporter -e cpu-clock,page-faults,context-switches --max-cgroups 100
`, stdout)
	listenAddr := fs.String("listen", "127.0.0.1:9632", "address to serve /metrics on")
	allowRemote := fs.Bool("allow-remote", false, "allow a --listen address that is not loopback (the metrics name every cgroup and container on the host)")
	maxCgroups := fs.Int("max-cgroups", exporter.DefaultMaxCgroups, "most cgroups with their own series; the rest are summed into cgroup=\"other\"")
	events := fs.StringP("event", "e", "", "events to count, comma-separated (default: as record)")
	interval := fs.StringP("interval", "i", "1s", "how often the counts are brought up to date, at least 10ms")
	hz := fs.IntP("freq", "F", exporterSampleHz, "cpu-clock samples per second per CPU (no stacks; they attribute long-running tasks' counts between switches)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("exporter: unexpected arguments %q; run 'cacheheat exporter --help'", fs.Args())
	}
	if !web.IsLoopback(*listenAddr) && !*allowRemote {
		return usageErrorf("exporter: --listen %s is not a loopback address: add --allow-remote to serve the metrics to other hosts", *listenAddr)
	}
	if *maxCgroups <= 0 {
		return usageErrorf("exporter: --max-cgroups %d: want a positive number", *maxCgroups)
	}
	if *hz <= 0 {
		return usageErrorf("exporter: -F %d: want a positive frequency", *hz)
	}
	opts := collector.Options{
		Target:   collector.Target{Kind: profile.TargetAll},
		SampleHz: *hz, ByCgroup: true, BPFStats: true,
		Warn: func(msg string) { fmt.Fprintf(os.Stderr, "cacheheat: warning: %s\n", msg) },
	}
	var err error
	// The minimum interval is NewRecorder's to check; 0 would mean its default.
	if opts.Interval, err = time.ParseDuration(*interval); err != nil || opts.Interval == 0 {
		return usageErrorf("exporter: -i %q: want a duration of at least %v, such as 1s", *interval, collector.MinInterval)
	}
	if *events != "" {
		cpu, err := collector.ReadCPUInfo("/")
		if err != nil {
			return &hostError{err}
		}
		for _, n := range strings.Split(*events, ",") {
			ev, err := collector.LookupEvent(strings.TrimSpace(n), cpu)
			if err != nil {
				return usageErrorf("exporter: %v", err)
			}
			opts.Events = append(opts.Events, ev)
		}
	}
	exp := exporter.New(exporter.Options{MaxCgroups: *maxCgroups, Version: Version})
	opts.Sinks = []collector.WindowSink{exp}
	rec, err := collector.NewRecorder(opts)
	if err != nil {
		return usageErrorf("exporter: %v", err)
	}

	if !web.IsLoopback(*listenAddr) {
		fmt.Fprintf(os.Stderr, "cacheheat: warning: %s is not a loopback address: anyone who can reach this host can read its cgroup and container names and counts\n", *listenAddr)
	}
	ln, err := net.Listen("tcp", *listenAddr)
	if err != nil {
		return usageErrorf("exporter: listening on %s: %v (pick another address with a free port)", *listenAddr, err)
	}
	srv := &http.Server{
		Handler:           web.CheckHost(exp.Handler(), *listenAddr, ln.Addr()),
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
	fmt.Fprintf(stdout, "serving metrics at http://%s/metrics (Ctrl-C or SIGTERM to stop)\n", ln.Addr())

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
