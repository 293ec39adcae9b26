package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cacheheat/cacheheat/heatmap"
	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/internal/outfile"
	"github.com/cacheheat/cacheheat/internal/stopsig"
	"github.com/cacheheat/cacheheat/metric"
	"github.com/cacheheat/cacheheat/probe"
	"github.com/cacheheat/cacheheat/profile"
)

func init() {
	register(command{name: "probe", summary: "measure this machine: core-to-core latency, the cache latency staircase, bandwidth (no root needed)", run: runProbe})
}

func runProbe(name string, args []string, stdout io.Writer) error {
	fs := newFlagSet(name, "[--quick] [--cpus LIST] [--json] [-o machine.html|machine.json|-]", `  cacheheat probe --quick                 a summary here; the result saved for reports of this host
  cacheheat probe -o machine.html         the page: matrix, staircase, bandwidth, topology
  cacheheat probe --json -o - | jq .c2c   the result as JSON
  cacheheat probe --cpus 0-7
`, stdout)
	quick := fs.Bool("quick", false, "fewer rounds and sizes (about 10 s on 16 CPUs; the full probe takes up to a minute)")
	cpuList := fs.String("cpus", "", "measure only these CPUs (e.g. 0-7,16); default: every CPU this process may run on")
	asJSON := fs.Bool("json", false, "write the result as JSON (to -o, or standard output)")
	out := fs.StringP("output", "o", "", "file to write: the page (.html) or, with --json, the JSON; - for standard output")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("probe: takes no arguments, got %q; run 'cacheheat probe --help'", fs.Args())
	}
	o := probe.Options{Quick: *quick}
	if *cpuList != "" {
		cpus, err := host.ParseCPUList(*cpuList)
		if err != nil {
			return usageErrorf("probe: --cpus: %v", err)
		}
		o.CPUs = cpus
	}
	if *out != "" && *out != "-" {
		if err := outfile.Check(*out); err != nil {
			return err
		}
	}
	if *out != "-" {
		o.Progress = func(s string) { fmt.Fprintln(os.Stderr, "cacheheat probe: "+s) }
	}
	ctx, stop := stopsig.Context()
	defer stop()
	r, err := probe.Run(ctx, o)
	if errors.Is(err, probe.ErrCPUs) {
		return usageErrorf("probe: --cpus: %v", err)
	}
	if err != nil {
		return err
	}
	if path, err := saveProbe(r); err != nil {
		fmt.Fprintf(os.Stderr, "cacheheat probe: warning: not saved for reports: %v\n", err)
	} else if *out != "-" {
		fmt.Fprintf(os.Stderr, "cacheheat probe: saved to %s (reports of recordings made on %s use it)\n", path, r.Host)
	}
	write := func(w io.Writer) error {
		switch {
		case *asJSON:
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(r)
		case *out == "":
			writeProbeSummary(w, r)
			return nil
		}
		return heatmap.WriteProbe(w, r)
	}
	if *out == "" || *out == "-" {
		return write(stdout)
	}
	if err := outfile.Write(*out, write); err != nil {
		return err
	}
	fmt.Fprintln(stdout, *out)
	return nil
}

// probeDir is where probes are kept for reports: $CACHEHEAT_PROBE_DIR,
// else the user's cache directory.
func probeDir() (string, error) {
	if d := os.Getenv("CACHEHEAT_PROBE_DIR"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "cacheheat"), nil
}

// probePath is the file of host's probe.
func probePath(hostname string) (string, error) {
	d, err := probeDir()
	if err != nil {
		return "", err
	}
	safe := strings.Map(func(r rune) rune {
		if r == '/' || r == 0 || r == '\\' {
			return '_'
		}
		return r
	}, hostname)
	return filepath.Join(d, "probe-"+safe+".json"), nil
}

// saveProbe keeps a full probe as this host's (an interrupted one is
// not kept: a report would take a part for the whole).
func saveProbe(r *probe.Result) (string, error) {
	if r.Interrupted {
		return "", errors.New("the probe was interrupted")
	}
	path, err := probePath(r.Host)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	return path, outfile.Write(path, func(w io.Writer) error { return json.NewEncoder(w).Encode(r) })
}

func writeProbeSummary(w io.Writer, r *probe.Result) {
	fmt.Fprintf(w, "%s: %s, %s measured (%s) in %.1f s\n", termSafe(r.Host), termSafe(r.CPUModel), profile.Plural(len(r.Order), "CPU"), host.FormatCPUList(r.Order), r.DurationS)
	if r.Noise.Warning != "" {
		fmt.Fprintf(w, "warning: %s\n", r.Noise.Warning)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if m := r.C2C; m != nil && len(m.Cells) > 0 {
		fmt.Fprintln(w, "\nCore-to-core latency (one line transfer, median over pairs):")
		for _, rel := range []string{"smt", "l3", "node", "package", "remote"} {
			if s, ok := probe.Summarize(m, probe.OfRelation(rel)); ok {
				fmt.Fprintf(w, "  %-28s %s  (%d pairs, %s to %s)\n", probe.RelationNames[rel], metric.FormatNS(s.Median), s.Pairs, metric.FormatNS(s.Min), metric.FormatNS(s.Max))
			}
		}
	}
	for _, s := range r.Staircase {
		fmt.Fprintf(w, "\nLoad latency, node %d (CPU %d):\n", s.Node, s.CPU)
		for _, st := range s.Steps {
			fmt.Fprintf(w, "  %9s  %s\n", metric.FormatBytes(st.SizeBytes), metric.FormatNS(st.NS))
		}
		for _, l := range s.Levels {
			at := "no step found"
			if l.StepBytes > 0 {
				at = "steps up at " + metric.FormatBytes(l.StepBytes)
			}
			fmt.Fprintf(w, "  L%d %s: %s\n", l.Level, metric.FormatBytes(l.SizeBytes), at)
		}
	}
	if len(r.Bandwidth) > 0 {
		fmt.Fprintf(w, "\nBandwidth, GB/s (read, copy): 1 thread | %d threads\n", r.Bandwidth[0].AllThreads)
		for _, b := range r.Bandwidth {
			fmt.Fprintf(w, "  %-5s %7.1f %7.1f | %7.1f %7.1f\n", b.Level, b.ReadGBps, b.CopyGBps, b.AllReadGB, b.AllCopyGB)
		}
	}
}

// loadProbe reads the probe a report is read against: path when given
// (an error when it cannot be read), else the one saved for hostname,
// if any (nil when there is none).
func loadProbe(path, hostname string) (*probe.Result, error) {
	explicit := path != ""
	if !explicit {
		var err error
		if path, err = probePath(hostname); err != nil {
			return nil, nil
		}
		if _, err := os.Stat(path); err != nil {
			return nil, nil
		}
	}
	var r probe.Result
	b, err := os.ReadFile(path)
	if err == nil {
		if err = json.Unmarshal(b, &r); err != nil {
			err = fmt.Errorf("%s is not a 'cacheheat probe --json' result: %v", path, err)
		} else if len(r.Order) == 0 {
			err = fmt.Errorf("%s measured no CPU", path)
		}
	}
	switch {
	case err != nil && explicit:
		return nil, usageErrorf("--probe: %v", err)
	case err != nil:
		// The saved probe is a convenience: a broken one is said and
		// left out, never a reason not to write the report.
		fmt.Fprintf(os.Stderr, "cacheheat: warning: the saved probe of this host is left out: %v\n", termSafe(err.Error()))
		return nil, nil
	}
	if explicit && r.Host != hostname {
		fmt.Fprintf(os.Stderr, "cacheheat: warning: the probe %s was made on %s, the recording on %s: its numbers may not apply\n", path, termSafe(r.Host), termSafe(hostname))
	}
	return &r, nil
}
