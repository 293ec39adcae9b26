package main

import (
	"encoding/json"
	"io"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
)

func init() {
	register(command{name: "analyze", summary: "root-cause findings of a recording (--json for CI)", run: runAnalyze})
}

// runAnalyze prints findings and the rules that could not be evaluated.
// It exits 0 with or without findings: a finding is information, and CI
// that wants to fail on one tests the JSON (jq -e '.findings | length == 0').
func runAnalyze(name string, args []string, stdout io.Writer) error {
	fs := newFlagSet(name, "FILE [--json | --metrics]", `  cacheheat analyze r.rec
  cacheheat analyze --json r.rec | jq -r '.findings[].rule'
  cacheheat analyze --metrics r.rec       the numbers the rules read
`, stdout)
	asJSON := fs.Bool("json", false, "print findings and not-evaluated rules as JSON (docs/ATTRIBUTION.md)")
	metrics := fs.Bool("metrics", false, "print the derived metrics the rules read, to see how far a recording is from each threshold")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *asJSON && *metrics {
		// The metrics dump is a text table for people; JSON is for CI.
		return usageErrorf("analyze: --json and --metrics do not go together: pick one")
	}
	if fs.NArg() != 1 {
		return usageErrorf("analyze: want one recording file, got %d arguments; run 'cacheheat analyze --help'", fs.NArg())
	}
	var mb *model.Builder
	s, err := streamRecording(fs.Arg(0), func(s *profile.Stream) func(*profile.Window) {
		mb = model.NewBuilder(s.Header, s.Stacks)
		return mb.Add
	})
	if err != nil {
		return err
	}
	md := mb.Model(s.Trailer, s.Truncated, s.Warning)
	if *metrics {
		_, err := io.WriteString(newTermWriter(stdout), attribution.NewMetrics(md).Dump())
		return err
	}
	res := attribution.Analyze(md)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	return res.WriteText(newTermWriter(stdout))
}
