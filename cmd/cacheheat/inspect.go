package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/cacheheat/cacheheat/profile"
)

func init() {
	register(command{name: "inspect", summary: "summarize a recording (--json: stable fields for scripts)", run: runInspect})
}

func runInspect(name string, args []string, stdout io.Writer) error {
	fs := newFlagSet(name, "FILE [--json]", `  cacheheat inspect r.rec
  cacheheat inspect --json r.rec | jq '.totals["page-faults"].total'
`, stdout)
	asJSON := fs.Bool("json", false, "print the stable JSON summary (DESIGN.md)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("inspect: want one recording file, got %d arguments; run 'cacheheat inspect --help'", fs.NArg())
	}
	rec, err := readRecording(fs.Arg(0))
	if err != nil {
		return err
	}
	if rec.Warning != "" {
		fmt.Fprintf(os.Stderr, "cacheheat: warning: %s\n", rec.Warning)
	}
	s := profile.Summarize(rec)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	printSummary(stdout, s)
	return nil
}

// readRecording reads a recording, turning a missing file into a usage
// error (exit 2) and anything unreadable into a format error (exit 4).
func readRecording(path string) (*profile.Recording, error) {
	rec, err := profile.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, usageErrorf("%v", err)
		}
		if errors.Is(err, profile.ErrFormat) {
			return nil, err
		}
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return rec, nil
}

func printSummary(w io.Writer, s profile.Summary) {
	if s.PMU != nil && s.PMU.Simulated != "" {
		fmt.Fprintf(w, "%s (simulated %s)\n\n", profile.SimulatedWarning, s.PMU.Simulated)
	}
	if s.Synthetic != "" {
		fmt.Fprintf(w, "SYNTHETIC RECORDING: %s\n\n", s.Synthetic)
	}
	fmt.Fprintf(w, "host      %s, %s, %s (%d CPUs, %d NUMA nodes)\n", s.Host.Hostname, s.Host.Kernel, s.Host.CPUModel, s.Host.CPUs, s.Host.NUMANodes)
	fmt.Fprintf(w, "mode      %s\n", s.Mode)
	target := s.Target.Kind
	switch {
	case len(s.Target.Command) > 0:
		target += ": " + strings.Join(s.Target.Command, " ")
	case s.Target.Cgroup != "":
		target += ": " + s.Target.Cgroup
	case len(s.Target.PIDs) > 0:
		target += fmt.Sprintf(": %v", s.Target.PIDs)
	}
	fmt.Fprintf(w, "target    %q\n", target)
	end := s.EndReason
	if s.Truncated {
		end = "truncated (" + s.Warning + ")"
	}
	fmt.Fprintf(w, "windows   %d x %gs = %.2fs, end: %s\n", s.Windows, s.IntervalS, s.DurationS, end)
	if s.ExitStatus != nil {
		fmt.Fprintf(w, "exit      %d\n", *s.ExitStatus)
	}
	fmt.Fprintln(w, "\nevents")
	for _, e := range s.Events {
		if e.Status == profile.StatusMeasured {
			t := s.Totals[e.Name]
			var notes []string
			if e.Scaling > 1.005 {
				notes = append(notes, fmt.Sprintf("scaled x%.3g (multiplexed)", e.Scaling))
			}
			if e.Simulated {
				notes = append(notes, "SIMULATED by "+e.StandIn)
			}
			note := ""
			if len(notes) > 0 {
				note = "  (" + strings.Join(notes, "; ") + ")"
			}
			fmt.Fprintf(w, "  %-24s %-11s %d%s\n", e.Name, e.Status, t.Total, note)
		} else {
			fmt.Fprintf(w, "  %-24s %-11s %s\n", e.Name, e.Status, e.Reason)
		}
	}
	if len(s.Processes) > 0 {
		fmt.Fprintln(w, "\nprocesses")
		for _, p := range s.Processes {
			keys := make([]string, 0, len(p.Totals))
			for k := range p.Totals {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var parts []string
			for _, k := range keys {
				parts = append(parts, fmt.Sprintf("%s=%d", k, p.Totals[k]))
			}
			if p.Container != "" {
				parts = append(parts, "container="+shortID(p.Container))
			}
			fmt.Fprintf(w, "  %-7d %-16q samples=%d %s\n", p.PID, p.Comm, p.Samples, strings.Join(parts, " "))
		}
	}
	if len(s.Histograms) > 0 {
		fmt.Fprintln(w, "\nlatency")
		for _, h := range s.Histograms {
			fmt.Fprintf(w, "  %-13s count=%d p50=%s p90=%s p99=%s\n", h.Name, h.Count, profile.FormatNS(h.P50), profile.FormatNS(h.P90), profile.FormatNS(h.P99))
		}
	}
	fmt.Fprintf(w, "\nsamples   %s: %d (requested %.0f Hz/CPU, achieved %.1f Hz/CPU), dropped %d\n",
		s.Samples.Event, s.Samples.Total, s.Samples.RequestedHz, s.Samples.AchievedHz, s.Samples.Dropped)
	for _, f := range s.Samples.TopFunctions {
		fmt.Fprintf(w, "  %8d  %q\n", f.Samples, f.Name)
	}
	fmt.Fprintf(w, "\ndrops     %+v\n", s.Drops)
	if len(s.AppMetrics) > 0 {
		fmt.Fprintf(w, "app       %v\n", s.AppMetrics)
	}
}

// shortID is a container id as `docker ps` shows it (12 hex digits); a pod
// uid is shown whole.
func shortID(id string) string {
	if len(id) == 64 {
		return id[:12]
	}
	return id
}
