package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cacheheat/cacheheat/heatmap"
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
	rec, err := readRecording(in)
	if err != nil {
		return err
	}
	if rec.Warning != "" {
		fmt.Fprintf(os.Stderr, "cacheheat: warning: %s\n", rec.Warning)
	}
	if err := writeReport(*out, func(w io.Writer) error { return heatmap.Render(w, rec, heatmap.Options{}) }); err != nil {
		return err
	}
	fmt.Fprintln(stdout, *out)
	return nil
}

// writeReport writes through a temporary file and renames it, so a
// failed render never leaves half a report under the final name.
func writeReport(path string, render func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".report-*.html")
	if err != nil {
		return usageErrorf("report: creating %s: %v", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := render(bw); err != nil {
		f.Close()
		return fmt.Errorf("rendering report: %w", err)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("writing report: %w", err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("writing report: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("moving report into place: %w", err)
	}
	return nil
}
