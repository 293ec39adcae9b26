package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
)

func init() {
	register(command{name: "inspect", summary: "summarize a recording (--json: stable fields for scripts)", run: runInspect})
}

func runInspect(name string, args []string, stdout io.Writer) error {
	fs := newFlagSet(name, "FILE [--json] [--top N]", `  cacheheat inspect r.rec
  cacheheat inspect --json r.rec | jq '.totals["page-faults"].total'
`, stdout)
	asJSON := fs.Bool("json", false, "print the JSON summary, whose field names are stable for scripts")
	top := fs.Int("top", 10, "list this many processes, the costliest first (0: all)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("inspect: want one recording file, got %d arguments; run 'cacheheat inspect --help'", fs.NArg())
	}
	// The summary needs no window twice: stream the recording into its
	// model rather than reading it whole.
	m, err := readModel(fs.Arg(0))
	if err != nil {
		return err
	}
	if m.Warning != "" {
		fmt.Fprintf(os.Stderr, "cacheheat: warning: %s\n", termSafe(m.Warning))
	}
	s := m.Summary()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	printSummary(newTermWriter(stdout), s, *top)
	return nil
}

// readModel streams a recording into its model (streamRecording: the
// one way commands read recordings).
func readModel(path string) (*model.Model, error) {
	var mb *model.Builder
	s, err := streamRecording(path, func(s *profile.Stream) func(*profile.Window) {
		mb = model.NewBuilder(s.Header, s.Stacks)
		return mb.Add
	})
	if err != nil {
		return nil, err
	}
	return mb.Model(s.Trailer, s.Truncated, s.Warning), nil
}

func checkRecordingPath(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return usageErrorf("%s is a directory, not a recording file (cacheheat serve --dir %s browses the recordings in it)", path, path)
	}
	return nil
}

// recordingError turns a missing file into a usage error (exit 2) and
// anything unreadable into a format error (exit 4).
func recordingError(path string, err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return usageErrorf("%v", err)
	}
	if errors.Is(err, profile.ErrFormat) {
		return err
	}
	return fmt.Errorf("reading %s: %w", path, err)
}

// printSummary writes the summary for people: plain words and numbers,
// the processes that cost the most first.
func printSummary(w io.Writer, s profile.Summary, top int) {
	printRecording(w, s)
	printEvents(w, s)
	if len(s.Processes) > 0 {
		printProcesses(w, s, top)
	}
	printLatency(w, s)
	fmt.Fprintf(w, "\nsamples   %s: %s (requested %.0f Hz/CPU, achieved %.1f Hz/CPU), %s dropped\n",
		s.Samples.Event, count(s.Samples.Total), s.Samples.RequestedHz, s.Samples.AchievedHz, count(s.Samples.Dropped))
	for _, f := range s.Samples.TopFunctions {
		fmt.Fprintf(w, "  %8d  %s\n", f.Samples, termSafe(f.Name))
	}
	fmt.Fprintf(w, "\ndrops     %s\n", s.Drops)
	if d := profile.DropWindowsString(s.DropWindows, s.Windows); d != "" {
		fmt.Fprintf(w, "          %s\n", d)
	}
	if len(s.AppMetrics) > 0 {
		keys := make([]string, 0, len(s.AppMetrics))
		for k := range s.AppMetrics {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %.4g", termSafe(k), s.AppMetrics[k]))
		}
		fmt.Fprintf(w, "app       %s\n", strings.Join(parts, ", "))
	}
}

// printRecording writes what was recorded, where, and how it ended.
func printRecording(w io.Writer, s profile.Summary) {
	if s.PMU != nil && s.PMU.Simulated != "" {
		fmt.Fprintf(w, "%s (simulated %s)\n\n", profile.SimulatedWarning, s.PMU.Simulated)
	}
	if s.Synthetic != "" {
		fmt.Fprintf(w, "SYNTHETIC RECORDING: %s\n\n", termSafe(s.Synthetic))
	}
	fmt.Fprintf(w, "host      %s, %s, %s (%s, %s)\n", termSafe(s.Host.Hostname), termSafe(s.Host.Kernel), termSafe(s.Host.CPUModel),
		plural(s.Host.CPUs, "CPU"), plural(s.Host.NUMANodes, "NUMA node"))
	fmt.Fprintf(w, "mode      %s\n", s.Mode)
	fmt.Fprintf(w, "target    %s\n", termSafe(s.Target.String()))
	end := s.EndReason
	if s.Truncated {
		end = "truncated (" + s.Warning + ")"
	}
	fmt.Fprintf(w, "windows   %s of %gs = %.2fs, end: %s\n", plural(s.Windows, "window"), s.IntervalS, s.DurationS, end)
	if s.ExitStatus != nil {
		if s.ExitSignal != "" {
			fmt.Fprintf(w, "exit      %d (ended by %s)\n", *s.ExitStatus, s.ExitSignal)
		} else {
			fmt.Fprintf(w, "exit      %d\n", *s.ExitStatus)
		}
	}
	if s.QuietWindows > 0 {
		fmt.Fprintf(w, "quiet     %d of %d windows, %.1f s: the target did nothing and the recorder slept until it ran\n", s.QuietWindows, s.Windows, s.QuietS)
	}
	if s.StretchedWindows > 0 {
		fmt.Fprintf(w, "stretched %d of %d windows lasted more than %gx the interval (the recorder was starved of CPU), longest %.1f s\n", s.StretchedWindows, s.Windows, profile.StretchFactor, s.LongestWindowS)
	}
	for _, msg := range s.Warnings {
		fmt.Fprintf(w, "warning   %s\n", termSafe(msg))
	}
}

// printEvents writes each measured event's total; events that were not
// measured are grouped by reason: on a host without a PMU that is one
// line instead of sixteen.
func printEvents(w io.Writer, s profile.Summary) {
	fmt.Fprintln(w, "\nevents")
	var notMeasured []string
	byReason := map[string][]string{}
	for _, e := range s.Events {
		if e.Status == profile.StatusMeasured {
			printEvent(w, e, s.Totals[e.Name].Total)
			continue
		}
		key := e.Status + ": " + e.Reason
		if _, ok := byReason[key]; !ok {
			notMeasured = append(notMeasured, key)
		}
		byReason[key] = append(byReason[key], e.Name)
	}
	for _, key := range notMeasured {
		names := byReason[key]
		fmt.Fprintf(w, "  %s %s\n    %s\n", plural(len(names), "event"), key, strings.Join(names, ", "))
	}
}

// printEvent writes one measured event's total t, with its scaling and
// simulation notes.
func printEvent(w io.Writer, e profile.EventSummary, t uint64) {
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
	if e.Name == "cpu-clock" {
		fmt.Fprintf(w, "  %-24s %s of CPU time%s\n", e.Name, metric.FormatNS(float64(t)), note)
	} else {
		fmt.Fprintf(w, "  %-24s %s%s\n", e.Name, count(t), note)
	}
}

// printLatency writes the latency histograms' and --func functions'
// percentiles.
func printLatency(w io.Writer, s profile.Summary) {
	if len(s.Histograms) > 0 {
		fmt.Fprintln(w, "\nlatency")
		for _, h := range s.Histograms {
			fmt.Fprintf(w, "  %-13s %s, p50 %s, p90 %s, p99 %s\n", h.Name, plural(int(h.Count), "event"), metric.FormatNS(h.P50), metric.FormatNS(h.P90), metric.FormatNS(h.P99))
		}
	}
	if len(s.Functions) > 0 {
		fmt.Fprintln(w, "\nfunctions")
		for _, f := range s.Functions {
			fmt.Fprintf(w, "  %-24s %-2s %s, p50 %s, p90 %s, p99 %s; %s unmatched, %s abandoned, %s moved\n",
				termSafe(f.Name), f.Lang, plural(int(f.Calls), "call"), metric.FormatNS(f.P50), metric.FormatNS(f.P90), metric.FormatNS(f.P99),
				count(f.Unmatched), count(f.Abandoned), count(f.Moved))
		}
	}
}

// printProcesses lists the top processes by the cost the recording
// measured best: cpu-clock where it was counted, else stack samples.
func printProcesses(w io.Writer, s profile.Summary, top int) {
	ps := append([]profile.ProcessSummary(nil), s.Processes...)
	key := "cpu-clock"
	if _, ok := s.Totals[key]; !ok {
		key = "samples"
	}
	cost := func(p profile.ProcessSummary) uint64 {
		if key == "samples" {
			return p.Samples
		}
		return p.Totals[key]
	}
	sort.SliceStable(ps, func(i, j int) bool {
		if a, b := cost(ps[i]), cost(ps[j]); a != b {
			return a > b
		}
		return ps[i].PID < ps[j].PID
	})
	fmt.Fprintf(w, "\nprocesses (%s, by %s)\n", plural(len(ps), "process"), key)
	shown := ps
	if top > 0 && len(ps) > top {
		shown = ps[:top]
	}
	for _, p := range shown {
		keys := make([]string, 0, len(p.Totals))
		for k := range p.Totals {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := []string{plural(int(p.Samples), "sample")}
		for _, k := range keys {
			v := p.Totals[k]
			if k == "cpu-clock" {
				parts = append(parts, "cpu-clock "+metric.FormatNS(float64(v)))
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %s", k, count(v)))
		}
		if p.Container != "" {
			parts = append(parts, "container "+termSafe(shortID(p.Container)))
		}
		fmt.Fprintf(w, "  %-7d %-16s %s\n", p.PID, termSafe(p.Comm), strings.Join(parts, ", "))
	}
	if n := len(ps) - len(shown); n > 0 {
		fmt.Fprintf(w, "  %s not shown (--top N shows more, --top 0 all)\n", plural(n, "process"))
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
