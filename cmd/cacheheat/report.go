package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/heatmap"
	"github.com/cacheheat/cacheheat/internal/outfile"
	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
	"github.com/cacheheat/cacheheat/symbolize"
)

func init() {
	register(command{name: "report", summary: "write a recording's self-contained HTML report", run: runReport})
}

func runReport(name string, args []string, stdout io.Writer) error {
	fs := newFlagSet(name, "FILE [-o OUT.html]", `  cacheheat report r.rec                 writes r.html
  cacheheat report r.rec -o /tmp/r.html
`, stdout)
	out := fs.StringP("output", "o", "", "HTML file to write (default: FILE with .html)")
	noLines := fs.Bool("no-lines", false, "leave out the hot-lines section (source lines from the binaries' debug information on this host)")
	probeFile := fs.String("probe", "", "read the report against this 'cacheheat probe --json' result (default: the probe saved for the recording's host, if any)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("report: want one recording file, got %d arguments; run 'cacheheat report --help'", fs.NArg())
	}
	in := fs.Arg(0)
	if *out == "" {
		*out = strings.TrimSuffix(in, filepath.Ext(in)) + ".html"
	}
	if filepath.Clean(*out) == filepath.Clean(in) {
		return usageErrorf("report: output %s would overwrite the recording; pass -o OUT.html", *out)
	}
	if err := outfile.Check(*out); err != nil {
		return err
	}
	var rb reportBuilder
	if _, err := streamRecording(in, rb.start); err != nil {
		return err
	}
	opts := heatmap.Options{}
	if !*noLines {
		opts.Lines = symbolize.NewLines()
	}
	var err error
	if opts.Probe, err = loadProbe(*probeFile, rb.s.Header.Host.Hostname); err != nil {
		return err
	}
	if err := outfile.Write(*out, func(w io.Writer) error { return rb.render(w, opts) }); err != nil {
		return err
	}
	fmt.Fprintln(stdout, *out)
	return nil
}

// reportBuilder reads a recording into its report in one pass: the model,
// which keeps no window, and from it the views and the findings. report
// and serve read recordings this one way.
type reportBuilder struct {
	s  *profile.Stream
	mb *model.Builder
}

// start is streamRecording's: the model is made from the stream's header
// and stacks.
func (rb *reportBuilder) start(s *profile.Stream) func(*profile.Window) {
	rb.s, rb.mb = s, model.NewBuilder(s.Header, s.Stacks)
	return rb.mb.Add
}

// render writes the report of the recording read.
func (rb *reportBuilder) render(w io.Writer, opts heatmap.Options) error {
	m := rb.mb.Model(rb.s.Trailer, rb.s.Truncated, rb.s.Warning)
	res := attribution.Analyze(m)
	return heatmap.RenderModel(w, m, &res, opts)
}

// streamRecording reads the recording at path once, window by window: start
// makes, from the stream's header and stacks, the function each window is
// given to, and nothing else keeps the windows. It warns on stderr as
// readRecording's callers do and returns its errors; the stream returned
// is read to its end (trailer, truncation) and closed.
func streamRecording(path string, start func(*profile.Stream) func(*profile.Window)) (*profile.Stream, error) {
	if err := checkRecordingPath(path); err != nil {
		return nil, err
	}
	s, err := profile.OpenFile(path)
	if err != nil {
		return nil, recordingError(path, err)
	}
	defer s.Close()
	if err := readStream(s, start); err != nil {
		return nil, recordingError(path, fmt.Errorf("%s: %w", path, err))
	}
	if s.Warning != "" {
		fmt.Fprintf(os.Stderr, "cacheheat: warning: %s\n", termSafe(s.Warning))
	}
	return s, nil
}

// readStream reads s to its end, each window given to the function start
// makes from the stream's header and stacks.
func readStream(s *profile.Stream, start func(*profile.Stream) func(*profile.Window)) error {
	add := start(s)
	for w := range s.Windows() {
		add(w)
	}
	return s.Err()
}
