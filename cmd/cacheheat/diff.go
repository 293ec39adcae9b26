package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/cacheheat/cacheheat/attribution"
	"github.com/cacheheat/cacheheat/compare"
	"github.com/cacheheat/cacheheat/heatmap"
	"github.com/cacheheat/cacheheat/internal/outfile"
	"github.com/cacheheat/cacheheat/model"
	"github.com/cacheheat/cacheheat/profile"
)

func init() {
	register(command{name: "diff", summary: "compare two recordings; exit 1 on a significant regression", run: runDiff})
}

// diffArgs are diff's parsed arguments.
type diffArgs struct {
	base, new      string
	html, markdown string
	asJSON         bool
	opts           compare.Options
}

func runDiff(name string, args []string, stdout io.Writer) error {
	a, err := parseDiffArgs(name, args, stdout)
	if err != nil {
		return err
	}
	// Two recordings' reductions and models are live at once: collecting
	// at half the default growth keeps the heap near them (two 1 h x
	// 128-CPU recordings with -o: 347 MB instead of 501 MB, in the same
	// time).
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
	base, err := readDiffSide(a.base, a.opts.Warmup, a.html != "")
	if err != nil {
		return err
	}
	newRec, err := readDiffSide(a.new, a.opts.Warmup, a.html != "")
	if err != nil {
		return err
	}
	if unmatched, names := compare.UnmatchedPatterns(base.reduced, newRec.reduced, a.opts); len(unmatched) > 0 {
		return usageErrorf("diff: --metric %s matches no metric of these recordings; valid names: %s", strings.Join(unmatched, ", "), termSafe(strings.Join(names, ", ")))
	}
	res := compare.CompareReduced(base.reduced, newRec.reduced, a.opts)
	for _, w := range res.Warnings {
		fmt.Fprintf(os.Stderr, "cacheheat: warning: %s\n", termSafe(w))
	}
	// Every requested output is written before the verdict decides the
	// exit code, so a failing CI job still has its report to upload.
	if err := writeDiffOutputs(a, base, newRec, &res, stdout); err != nil {
		return err
	}
	if res.Regressed() {
		var names []string
		for _, m := range res.ByVerdict(compare.VerdictRegression) {
			names = append(names, m.Name)
		}
		return fmt.Errorf("%w: %s", errRegression, strings.Join(names, ", "))
	}
	if res.Undecided() {
		// Not "OK": too few windows is no evidence of no regression.
		what := fmt.Sprintf("%d metrics", len(res.Need.Metrics))
		if len(res.Need.Metrics) == 0 {
			what = "anything" // neither recording had a usable window
		}
		if res.Need.Unit == compare.EvidenceRuns {
			return usageErrorf("diff: cannot decide %s with %d and %d runs: record at least %d runs a side (record -r %d)", what, res.Base.Runs, res.New.Runs, res.Need.Record, res.Need.Record)
		}
		return usageErrorf("diff: cannot decide %s with %d and %d usable windows: record at least %d windows a side", what, res.Base.Used, res.New.Used, res.Need.Record)
	}
	return nil
}

// diffSide is one recording of a diff, read once as a stream: its
// reduction for the comparison and, when the HTML report is asked for, its
// model. Neither keeps the windows, so a long recording is not held in
// memory.
type diffSide struct {
	reduced  *compare.Reduced
	model    *model.Model        // nil without the HTML report
	findings *attribution.Result // nil without the HTML report
}

// readDiffSide streams the recording at path into a diffSide, with
// readRecording's errors. Its truncation and stretched windows are warned
// about by the comparison (compare.Result.Warnings), not here.
func readDiffSide(path string, warmup int, withModel bool) (diffSide, error) {
	if err := checkRecordingPath(path); err != nil {
		return diffSide{}, err
	}
	side, err := readDiffStreams(func() (*profile.Stream, error) { return profile.OpenFile(path) }, warmup, withModel)
	if err != nil {
		return diffSide{}, recordingError(path, err)
	}
	return side, nil
}

// readDiffStreams reads a diffSide from the streams open gives, one per
// pass over the recording (a file, or serve's open file rewound).
func readDiffStreams(open func() (*profile.Stream, error), warmup int, withModel bool) (diffSide, error) {
	var side diffSide
	if withModel {
		// The findings first, in a pass of their own: attribution's
		// reductions are then freed before the models are built, which
		// a page of two long recordings holds at once.
		res, err := analyzeStream(open)
		if err != nil {
			return diffSide{}, err
		}
		side.findings = res
	}
	s, err := open()
	if err != nil {
		return diffSide{}, err
	}
	defer s.Close()
	r := compare.NewReducer(s.Header, warmup)
	var mb *model.Builder
	if withModel {
		mb = model.NewBuilder(s.Header, s.Stacks)
	}
	for w := range s.Windows() {
		r.Add(w)
		if mb != nil {
			mb.Add(w)
		}
	}
	if err := s.Err(); err != nil {
		return diffSide{}, err
	}
	side.reduced = r.Reduced(s.Trailer, s.Truncated, s.Warning)
	if mb != nil {
		side.model = mb.Model(s.Trailer, s.Truncated, s.Warning)
	}
	return side, nil
}

// analyzeStream reads a recording's findings in one pass.
func analyzeStream(open func() (*profile.Stream, error)) (*attribution.Result, error) {
	s, err := open()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	mb := model.NewBuilder(s.Header, s.Stacks)
	for w := range s.Windows() {
		mb.Add(w)
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	res := attribution.Analyze(mb.Model(s.Trailer, s.Truncated, s.Warning))
	return &res, nil
}

// parseDiffArgs parses diff's flags and checks them, and that the output
// files can be created, before any recording is read.
func parseDiffArgs(name string, args []string, stdout io.Writer) (diffArgs, error) {
	fs := newFlagSet(name, "BASE NEW [-o diff.html] [--markdown FILE] [--json] [--threshold 5%] [--alpha 0.01] [--metric PATTERN]...", `  cacheheat diff base.rec new.rec
  cacheheat diff base.rec new.rec -o diff.html --markdown comment.md
  cacheheat diff --json --metric 'app.*' --metric 'context-switches*' base.rec new.rec
  cacheheat diff --higher-is-better hits base.rec new.rec

Recordings of repeated runs (record -r N, both sides with 2 or more) are
compared run by run, as benchstat does: per-run wall and CPU time gate
(--metric names other gates), with counters and functions' shares of the
samples reported. Otherwise each metric both recordings share is tested per
window. Either way with a Mann-Whitney U test, Holm-corrected; a metric
regressed when significant at --alpha and its median moved beyond
--threshold in its worse direction (and, for windows of one run a side,
beyond 20%). Exit 0: no regression; 1: a regression; 2: usage, or too few
runs or windows to decide (the output says how many are needed); 4:
unreadable recording.
`, stdout)
	var a diffArgs
	fs.StringVarP(&a.html, "output", "o", "", "write the HTML diff report to this file")
	fs.StringVar(&a.markdown, "markdown", "", "write a short markdown summary (for a pull-request comment) to this file")
	fs.BoolVar(&a.asJSON, "json", false, "print the result as JSON instead of the table")
	// No flag default: windows and runs have their own, given below.
	threshold := fs.String("threshold", "", "smallest change of the median that counts (\"5%\" or 0.05; default 5% for windows, 3% for runs)")
	alpha := fs.Float64("alpha", 0, "family-wise significance level after Holm's correction (default 0.01 for windows, 0.05 for runs)")
	metrics := fs.StringSlice("metric", nil, "compare only metrics matching this pattern ('*' wildcard; repeatable)")
	higher := fs.StringSlice("higher-is-better", nil, "declare metrics matching this pattern higher-is-better (repeatable)")
	lower := fs.StringSlice("lower-is-better", nil, "declare metrics matching this pattern lower-is-better (repeatable)")
	if err := parseFlags(fs, args); err != nil {
		return a, err
	}
	if fs.NArg() != 2 {
		return a, usageErrorf("diff: want two recordings, BASE and NEW, got %d arguments; run 'cacheheat diff --help'", fs.NArg())
	}
	a.base, a.new = fs.Arg(0), fs.Arg(1)
	a.opts = compare.DefaultOptions()
	// Given, they hold for windows and runs alike.
	if fs.Changed("threshold") {
		thr, err := parseThreshold(*threshold)
		if err != nil {
			return a, usageErrorf("diff: --threshold %q: %v; give a percentage such as 5%% or a fraction such as 0.05", *threshold, err)
		}
		a.opts.Threshold, a.opts.RunThreshold = thr, thr
	}
	if fs.Changed("alpha") {
		if !(*alpha > 0 && *alpha < 1) {
			return a, usageErrorf("diff: --alpha %g: want a probability between 0 and 1, such as 0.01", *alpha)
		}
		a.opts.Alpha, a.opts.RunAlpha = *alpha, *alpha
	}
	a.opts.Metrics, a.opts.HigherIsBetter, a.opts.LowerIsBetter = *metrics, *higher, *lower
	for _, out := range []string{a.html, a.markdown} {
		if out == "" {
			continue
		}
		if err := outfile.Check(out); err != nil {
			return a, err
		}
	}
	return a, nil
}

// writeDiffOutputs writes the HTML report and markdown summary when asked
// for, then the JSON or the table to stdout.
func writeDiffOutputs(a diffArgs, base, newRec diffSide, res *compare.Result, stdout io.Writer) error {
	if a.html != "" {
		if err := outfile.Write(a.html, func(w io.Writer) error {
			return heatmap.WriteDiffModels(w, base.model, newRec.model, res, base.findings, newRec.findings)
		}); err != nil {
			return fmt.Errorf("writing diff report: %w", err)
		}
	}
	if a.markdown != "" {
		if err := outfile.Write(a.markdown, func(w io.Writer) error { return compare.WriteMarkdown(w, res) }); err != nil {
			return fmt.Errorf("writing markdown summary: %w", err)
		}
	}
	if a.asJSON {
		return compare.WriteJSON(stdout, res)
	}
	// Warnings went to stderr already; the table goes to stdout.
	res2 := *res
	res2.Warnings = nil
	return compare.WriteText(newTermWriter(stdout), &res2)
}

// parseThreshold accepts "5%", "5 %" or a fraction "0.05".
func parseThreshold(s string) (float64, error) {
	s = strings.TrimSpace(s)
	pct := strings.HasSuffix(s, "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(s, "%")), 64)
	if err != nil {
		return 0, fmt.Errorf("not a number")
	}
	if pct {
		v /= 100
	}
	if !(v >= 0 && v < 10) {
		return 0, fmt.Errorf("out of range")
	}
	return v, nil
}
