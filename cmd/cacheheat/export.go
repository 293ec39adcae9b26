package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cacheheat/cacheheat/export"
	"github.com/cacheheat/cacheheat/internal/outfile"
	"github.com/cacheheat/cacheheat/profile"
	"github.com/cacheheat/cacheheat/symbolize"
)

func init() {
	register(command{name: "export", summary: "write a recording's stack samples for pprof or flame graphs", run: runExport})
}

func runExport(name string, args []string, stdout io.Writer) error {
	fs := newFlagSet(name, "FILE --pprof|--folded [-o OUT] [--from D] [--to D] [--pid PID]", `  cacheheat export r.rec --pprof                writes r.pb.gz; go tool pprof -top r.pb.gz
  cacheheat export r.rec --folded | flamegraph.pl > r.svg
  cacheheat export r.rec --folded --from 10s --to 20s --pid 1234 -o r.folded
  cacheheat export r.rec --folded --lines          frames as 'func (file:line)', inlined ones too
`, stdout)
	asPprof := fs.Bool("pprof", false, "gzip'd pprof profile (go tool pprof, Pyroscope, Parca); default output FILE with .pb.gz")
	asFolded := fs.Bool("folded", false, "collapsed stacks, 'comm;outer;...;inner count' per line (flamegraph.pl, speedscope); default output stdout")
	out := fs.StringP("output", "o", "", "file to write ('-' for stdout)")
	from := fs.Duration("from", 0, "keep windows that start at or after this offset from the recording's start (e.g. 10s)")
	to := fs.Duration("to", 0, "keep windows that start before this offset (default: the end)")
	pid := fs.Int("pid", 0, "keep this process's samples only")
	event := fs.String("event", "", "sample event of the folded output (default: the recording's primary sample event, cpu-clock)")
	lines := fs.Bool("lines", false, "folded: frames as 'func (file:line)', inlined functions as frames of their own (pprof profiles always carry lines)")
	noLines := fs.Bool("no-lines", false, "pprof: functions only, without reading the binaries' debug information")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("export: want one recording file, got %d arguments; run 'cacheheat export --help'", fs.NArg())
	}
	if *asPprof == *asFolded {
		return usageErrorf("export: pass exactly one of --pprof and --folded")
	}
	if *from < 0 || *to < 0 || (*to > 0 && *to <= *from) {
		return usageErrorf("export: --from %v --to %v is not a time range", *from, *to)
	}
	in := fs.Arg(0)
	if *out == "" && *asPprof {
		*out = strings.TrimSuffix(in, filepath.Ext(in)) + ".pb.gz"
	}
	if *out != "" && *out != "-" && filepath.Clean(*out) == filepath.Clean(in) {
		return usageErrorf("export: output %s would overwrite the recording; pass -o OUT", *out)
	}
	if *out != "" && *out != "-" {
		if err := outfile.Check(*out); err != nil {
			return err
		}
	}
	o := export.Options{From: *from, To: *to, PID: *pid, Event: *event, FoldedLines: *lines}
	// Lines come from the recording's trailer, else from the binaries
	// the frames name, on this host; a file that is gone or changed
	// keeps its frames without them.
	if (*asPprof && !*noLines) || *lines {
		o.Lines = symbolize.NewLines()
	}
	var sel *export.Selection
	st, err := streamRecording(in, func(s *profile.Stream) func(*profile.Window) {
		sel = export.NewSelection(s.Header, s.Stacks, o)
		return sel.Add
	})
	if err != nil {
		return err
	}
	sel.End(st.Trailer)
	if events := st.Header.Settings.SampleEvents; *event != "" && !slices.Contains(events, *event) {
		return usageErrorf("export: the recording has no samples of %q; its sample events: %s", *event, strings.Join(events, ", "))
	}
	write := func(w io.Writer) error { return export.Folded(w, sel) }
	if *asPprof {
		write = func(w io.Writer) error { return export.Pprof(w, sel) }
	}
	if *out == "" || *out == "-" {
		if f, ok := stdout.(*os.File); ok && isTerminal(f) {
			if *asPprof {
				return usageErrorf("export: a pprof profile is binary, not for a terminal: pass -o FILE or redirect the output")
			}
			// Process names and symbols are the target's: on a terminal,
			// their control bytes are shown escaped, not obeyed.
			return write(newTermWriter(stdout))
		}
		return write(stdout)
	}
	if err := outfile.Write(*out, write); err != nil {
		return err
	}
	fmt.Fprintln(stdout, *out)
	return nil
}
