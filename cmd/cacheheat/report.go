package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cacheheat/cacheheat/heatmap"
	"github.com/cacheheat/cacheheat/internal/outfile"
)

func init() {
	register(command{name: "report", summary: "write a recording's self-contained HTML report", run: runReport})
}

func runReport(name string, args []string, stdout io.Writer) error {
	fs := newFlagSet(name, "FILE [-o OUT.html]", `  cacheheat report r.rec                 writes r.html
  cacheheat report r.rec -o /tmp/r.html
`, stdout)
	out := fs.StringP("output", "o", "", "HTML file to write (default: FILE with .html)")
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
	rec, err := readRecording(in)
	if err != nil {
		return err
	}
	if rec.Warning != "" {
		fmt.Fprintf(os.Stderr, "cacheheat: warning: %s\n", termSafe(rec.Warning))
	}
	if err := outfile.Write(*out, func(w io.Writer) error { return heatmap.Render(w, rec, heatmap.Options{}) }); err != nil {
		return err
	}
	fmt.Fprintln(stdout, *out)
	return nil
}
