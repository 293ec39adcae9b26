package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cacheheat/cacheheat/internal/stopsig"
	"github.com/cacheheat/cacheheat/workloads"
	"github.com/spf13/pflag"
)

func init() {
	register(command{name: "workload", summary: "list or run the bundled O3 workloads (bad/good cache effects)", run: runWorkload})
	errorClassifiers = append(errorClassifiers, func(err error) (int, bool) {
		switch {
		case errors.Is(err, workloads.ErrNeedsNUMA):
			return exitHost, true
		case errors.Is(err, workloads.ErrBadInput):
			return exitUsage, true
		}
		return 0, false
	})
}

func runWorkload(name string, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageErrorf("workload: want 'list' or 'run NAME'; run 'cacheheat workload --help'")
	}
	switch args[0] {
	case "list":
		return runWorkloadList(name+" list", args[1:], stdout)
	case "run":
		return runWorkloadRun(name+" run", args[1:], stdout)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, `Usage: cacheheat workload list [--json]
       cacheheat workload run NAME [--variant bad|good] [-t THREADS] [-d DURATION] [--size SIZE] [--json]

Runs one bundled O3 workload and prints one result line: workload, variant,
threads, duration_s, ops, ops_per_sec, ns_per_op (per thread), bytes_touched
and check (the computed result validated). Worker threads are named
o3-NAME. With CACHEHEAT_METRICS=FILE set, the running total of ops is
appended to FILE every 25 ms ("ops_total N"), and the run's ops_per_sec
and ns_per_op at its end.

Examples:
  cacheheat workload list
  cacheheat workload run falseshare --variant good -t 2 -d 2s
  cacheheat workload run chase --size 64MiB --json
`)
		return pflag.ErrHelp
	}
	return usageErrorf("workload: unknown subcommand %q; want 'list' or 'run'", args[0])
}

func runWorkloadList(name string, args []string, stdout io.Writer) error {
	fs := newFlagSet(name, "[--json]", "  cacheheat workload list\n", stdout)
	asJSON := fs.Bool("json", false, "print the table as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("workload list: takes no arguments, got %q", fs.Args())
	}
	type param struct {
		Name    string `json:"name"`
		Meaning string `json:"meaning"`
		Default string `json:"default"`
		Min     string `json:"min"`
	}
	type row struct {
		Name     string            `json:"name"`
		Summary  string            `json:"summary"`
		Variants map[string]string `json:"variants"`
		Op       string            `json:"op"`
		Params   []param           `json:"params"`
	}
	var rows []row
	for _, w := range workloads.All() {
		r := row{Name: w.Name, Summary: w.Summary, Variants: w.Variants, Op: w.Op,
			Params: []param{{Name: "threads", Meaning: "worker threads", Default: fmt.Sprint(runtime.NumCPU()), Min: "1"},
				{Name: "duration", Meaning: "how long to run", Default: workloads.DefaultDuration.String()}}}
		if !w.Threads {
			r.Params[0] = param{Name: "threads", Meaning: "always 1 (one dependent chain)", Default: "1", Min: "1"}
		}
		if w.Size != nil {
			r.Params = append(r.Params, param{Name: "size", Meaning: w.Size.Meaning, Default: workloads.FormatSize(w.Size.Default), Min: workloads.FormatSize(w.Size.Min)})
		}
		rows = append(rows, r)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVARIANTS\tPARAMETERS\tSHOWS")
	for _, r := range rows {
		var vs, ps []string
		for v := range r.Variants {
			vs = append(vs, v)
		}
		sort.Strings(vs)
		for _, p := range r.Params[2:] {
			ps = append(ps, fmt.Sprintf("--size (default %s)", p.Default))
		}
		ps = append(ps, "-t", "-d")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, strings.Join(vs, ","), strings.Join(ps, " "), r.Summary)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	for _, r := range rows {
		fmt.Fprintf(stdout, "%s: one op is %s\n", r.Name, r.Op)
		for _, v := range []string{"bad", "good", "only"} {
			if d, ok := r.Variants[v]; ok {
				fmt.Fprintf(stdout, "  %-5s %s\n", v, d)
			}
		}
		for _, p := range r.Params[2:] {
			fmt.Fprintf(stdout, "  --size %s (default %s, min %s)\n", p.Meaning, p.Default, p.Min)
		}
	}
	return nil
}

func runWorkloadRun(name string, args []string, stdout io.Writer) error {
	fs := newFlagSet(name, "NAME [--variant bad|good] [-t THREADS] [-d DURATION] [--size SIZE] [--json]", `  cacheheat workload run falseshare --variant bad -t 2 -d 5s
  cacheheat workload run ffn --variant good --size 16MiB --json
  CACHEHEAT_METRICS=/tmp/m cacheheat workload run rcu -d 10s
`, stdout)
	variant := fs.String("variant", "", "bad or good (default bad; chase and stream have one variant)")
	threads := fs.IntP("threads", "t", runtime.NumCPU(), "worker threads")
	duration := fs.DurationP("duration", "d", workloads.DefaultDuration, "how long to run (1s, 500ms)")
	size := fs.String("size", "", "working-set size (4KiB, 64MiB, 1GiB); see 'cacheheat workload list'")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the result line")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("workload run: want one workload name (%s), got %d arguments", strings.Join(workloads.Names(), ", "), fs.NArg())
	}
	w, err := workloads.Lookup(fs.Arg(0))
	if err != nil {
		return err
	}
	if *threads < 1 {
		return usageErrorf("workload run: -t/--threads must be at least 1, got %d", *threads)
	}
	if *duration <= 0 {
		return usageErrorf("workload run: -d/--duration must be positive, got %v", *duration)
	}
	cfg := workloads.Config{Variant: *variant, Threads: *threads, Duration: *duration, MetricsPath: os.Getenv(workloads.MetricsEnv)}
	if *size != "" {
		if cfg.Size, err = workloads.ParseSize(*size); err != nil {
			return err
		}
	}
	// Ctrl-C ends the run early but still prints its result.
	// (SIGINT, SIGTERM and SIGHUP are caught from start-up on, by
	// internal/stopsig, so a signal during set-up is not lost either.)
	ctx, stop := stopsig.Context()
	defer stop()
	res, err := runWithin(ctx, w, cfg, stopGrace)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(res); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(stdout, res.Line())
	}
	if !res.OK {
		return fmt.Errorf("workload %s %s: result check failed: %s", res.Workload, res.Variant, res.Check)
	}
	return nil
}

// stopGrace is how long a signalled workload may take to return its
// result; the goal is to be gone within 0.5 s of the signal.
const stopGrace = 250 * time.Millisecond

// runWithin runs w, and once ctx is cancelled (a signal) waits at most
// grace for it to return (its loops look at ctx every batch; set-up loops
// and reference checks may not). A workload still busy then (a set-up loop that
// does not look at the context) is abandoned: the process exits with a
// result that says it was interrupted.
func runWithin(ctx context.Context, w *workloads.Workload, cfg workloads.Config, grace time.Duration) (workloads.Result, error) {
	type outcome struct {
		res workloads.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := w.Run(ctx, cfg)
		done <- outcome{res, err}
	}()
	select {
	case o := <-done:
		return o.res, o.err
	case <-ctx.Done():
	}
	select {
	case o := <-done:
		return o.res, o.err
	case <-time.After(grace):
		if resolved, err := w.Resolve(cfg); err == nil {
			cfg = resolved
		}
		return workloads.Result{Workload: w.Name, Variant: cfg.Variant, Threads: cfg.Threads, Interrupted: true, OK: true,
			Check: "interrupted(stopped before the run returned: no result)"}, nil
	}
}
