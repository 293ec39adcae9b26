package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cacheheat/cacheheat/internal/outfile"
	"github.com/cacheheat/cacheheat/profile"
)

// privateNodes makes, under a temp dir, what an output path must never
// replace: a directory, a FIFO and (as root) a character device with
// /dev/null's numbers. Never the real /dev.
func privateNodes(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	nodes := map[string]string{}
	sub := filepath.Join(dir, "adir")
	must(t, os.Mkdir(sub, 0o755))
	nodes[sub] = "a directory"
	fifo := filepath.Join(dir, "fifo")
	must(t, syscall.Mkfifo(fifo, 0o600))
	nodes[fifo] = "a FIFO"
	if os.Geteuid() == 0 {
		null := filepath.Join(dir, "null")
		must(t, syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3))
		nodes[null] = "a character device"
	}
	return nodes
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// checkNodesUntouched checks that each node is still what it was and that
// nothing was created beside it.
func checkNodesUntouched(t *testing.T, nodes map[string]string) {
	t.Helper()
	for path, kind := range nodes {
		fi, err := os.Lstat(path)
		if err != nil || outfile.Kind(fi.Mode()) != kind {
			t.Errorf("%s was %s, now %v (%v)", path, kind, fi, err)
		}
		entries, _ := os.ReadDir(filepath.Dir(path))
		if len(entries) != len(nodes) {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("files beside the nodes: %v", names)
		}
	}
}

// TestOutputRefusesNonRegular: report -o, diff -o and diff --markdown
// refuse a directory, a FIFO or a device node before any work, with exit
// 2 and one line naming the path and what it is; the node is untouched.
func TestOutputRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.rec"), filepath.Join(dir, "b.rec")
	writeSynth(t, a, 1, 1e6, 4000, "bench")
	writeSynth(t, b, 2, 1e6, 4000, "bench")
	nodes := privateNodes(t)
	for path, kind := range nodes {
		for _, args := range [][]string{
			{"report", a, "-o", path},
			{"diff", a, b, "-o", path},
			{"diff", a, b, "--markdown", path},
		} {
			code, out, errs := runCmd(args...)
			if code != exitUsage || !strings.Contains(errs, path) || !strings.Contains(errs, kind) || strings.Count(errs, "\n") != 1 {
				t.Errorf("%v: exit %d, stderr %q; want 2 and one line naming %s as %s", args, code, errs, path, kind)
			}
			if out != "" {
				t.Errorf("%v: work was done before the refusal: %q", args, out)
			}
		}
	}
	checkNodesUntouched(t, nodes)
}

// TestRecordRefusesNonRegular: record -o refuses the same paths before it
// records anything (it used to record the whole duration and then fail,
// and as root it replaced a device node with the recording).
func TestRecordRefusesNonRegular(t *testing.T) {
	bin := cacheheatBinary(t)
	nodes := privateNodes(t)
	for path, kind := range nodes {
		cmd := exec.Command(bin, "record", "-a", "-q", "-e", "cpu-clock", "-d", "2s", "-o", path)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if code := exitStatus(err); code != exitUsage || !strings.Contains(stderr.String(), kind) {
			t.Errorf("record -o %s: exit %d, stderr %q; want 2 naming %s", path, code, stderr.String(), kind)
		}
	}
	checkNodesUntouched(t, nodes)
}

func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// TestOutputKeepsOld: an existing output is kept as FILE.old, as perf
// does, by report and diff alike.
func TestOutputKeepsOld(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.rec"), filepath.Join(dir, "b.rec")
	writeSynth(t, a, 1, 1e6, 4000, "bench")
	writeSynth(t, b, 2, 1e6, 4000, "bench")
	html, md := filepath.Join(dir, "r.html"), filepath.Join(dir, "d.md")
	for _, p := range []string{html, md} {
		must(t, os.WriteFile(p, []byte("mine"), 0o644))
	}
	if code, _, errs := runCmd("report", a, "-o", html); code != 0 {
		t.Fatalf("report: %d %s", code, errs)
	}
	if code, _, errs := runCmd("diff", a, b, "--markdown", md); code != 0 {
		t.Fatalf("diff: %d %s", code, errs)
	}
	for _, p := range []string{html, md} {
		if got, err := os.ReadFile(p + ".old"); err != nil || string(got) != "mine" {
			t.Errorf("%s.old = %q, %v; want the previous file", p, got, err)
		}
		if got, _ := os.ReadFile(p); string(got) == "mine" || len(got) == 0 {
			t.Errorf("%s was not written", p)
		}
	}
}

// TestOutputPlantedSymlinks: symlinks planted at FILE.tmp and
// FILE.partial (the names the writers used to open) are never followed.
func TestOutputPlantedSymlinks(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.rec"), filepath.Join(dir, "b.rec")
	writeSynth(t, a, 1, 1e6, 4000, "bench")
	writeSynth(t, b, 2, 1e6, 4000, "bench")
	victim := filepath.Join(dir, "victim")
	must(t, os.WriteFile(victim, []byte("precious"), 0o600))
	html, md := filepath.Join(dir, "d.html"), filepath.Join(dir, "d.md")
	for _, p := range []string{html, md} {
		for _, s := range []string{".tmp", ".partial"} {
			must(t, os.Symlink(victim, p+s))
		}
	}
	if code, _, errs := runCmd("diff", a, b, "-o", html, "--markdown", md); code != 0 {
		t.Fatalf("diff: %d %s", code, errs)
	}
	if got, _ := os.ReadFile(victim); string(got) != "precious" {
		t.Errorf("victim = %q: a planted symlink was followed", got)
	}
}

// TestOutputWriteFailure: a write that fails for want of space is exit 5,
// not 2 ("usage error"), and leaves no half-written file. The disk is a
// 64 KiB tmpfs mounted for the test.
func TestOutputWriteFailure(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounts a tiny tmpfs to fill")
	}
	dir := t.TempDir()
	a := filepath.Join(dir, "a.rec")
	writeSynth(t, a, 1, 1e6, 4000, "bench")
	small := filepath.Join(dir, "small")
	must(t, os.Mkdir(small, 0o755))
	if err := syscall.Mount("tmpfs", small, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatalf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(small, 0) })
	out := filepath.Join(small, "r.html")
	code, _, errs := runCmd("report", a, "-o", out)
	if code != exitOutput || !strings.Contains(errs, "no space") {
		t.Errorf("report onto a full disk: exit %d %q, want %d and the reason", code, errs, exitOutput)
	}
	if entries, _ := os.ReadDir(small); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}

// TestInspectDirectory: inspect on a directory says so (exit 2).
func TestInspectDirectory(t *testing.T) {
	dir := t.TempDir()
	code, _, errs := runCmd("inspect", dir)
	if code != exitUsage || !strings.Contains(errs, "is a directory") {
		t.Errorf("inspect DIR: exit %d %q, want 2 and 'is a directory'", code, errs)
	}
}

// TestDiffUnknownMetric: a --metric that matches nothing is exit 2 with
// the valid names; one that matches is compared.
func TestDiffUnknownMetric(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.rec"), filepath.Join(dir, "b.rec")
	writeSynth(t, a, 1, 1e6, 4000, "bench")
	writeSynth(t, b, 2, 1e6, 4000, "bench")
	code, _, errs := runCmd("diff", "--metric", "no-such-metric", a, b)
	if code != exitUsage || !strings.Contains(errs, "no-such-metric") || !strings.Contains(errs, "app.ops_per_sec") {
		t.Errorf("--metric no-such-metric: exit %d %q, want 2 listing valid names", code, errs)
	}
	if code, out, errs := runCmd("diff", "--metric", "ops_per_sec", a, b); code != 0 || !strings.Contains(out, "ops_per_sec") {
		t.Errorf("--metric ops_per_sec: exit %d %s%s", code, out, errs)
	}
}

// TestAnalyzeJSONMetrics: --json with --metrics is refused (exit 2), not
// answered with a text table where JSON was asked for.
func TestAnalyzeJSONMetrics(t *testing.T) {
	a := filepath.Join(t.TempDir(), "a.rec")
	writeSynth(t, a, 1, 1e6, 4000, "bench")
	if code, out, errs := runCmd("analyze", "--json", "--metrics", a); code != exitUsage || out != "" {
		t.Errorf("analyze --json --metrics: exit %d, out %q, err %q; want 2 and no output", code, out, errs)
	}
	if code, out, _ := runCmd("analyze", "--json", a); code != 0 || !json.Valid([]byte(out)) {
		t.Errorf("analyze --json: exit %d, valid JSON %v", code, json.Valid([]byte(out)))
	}
}

// writeHostile writes a recording whose every string from the target or
// host carries terminal escape sequences.
func writeHostile(t *testing.T, path string, seed uint64) {
	t.Helper()
	const esc = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202e"
	writeSynth(t, path, seed, 1e6, 4000, "bench"+esc)
	rec, err := profile.ReadFile(path)
	must(t, err)
	h := rec.Header
	h.Host.Hostname, h.Host.Kernel, h.Host.CPUModel = "host"+esc, "6.18"+esc, "cpu"+esc
	h.Events = append(h.Events, profile.EventStatus{Name: "cycles", Kind: "hardware", Status: profile.StatusUnsupported, Reason: "no PMU" + esc})
	h.Settings.SampleEvents = []string{"cpu-clock"}
	must(t, os.Remove(path))
	w, err := profile.Create(path, h)
	must(t, err)
	stack := profile.Stack{ID: 7, Frames: []profile.Frame{{Function: "main.work" + esc, Module: "/bin/x" + esc}}}
	for i, win := range rec.Windows {
		win.AppMetrics = map[string]float64{"ops_per_sec": win.AppMetrics["ops_per_sec"], "evil" + esc: 1}
		win.Samples = []profile.Sample{{Event: "cpu-clock", PID: 10, TID: 10, CPU: 0, UserStack: 7, Count: 50}}
		if i == 0 {
			win.NewStacks = []profile.Stack{stack}
		}
		must(t, w.WriteWindow(&win))
	}
	tr := *rec.Trailer
	tr.Warnings = []string{"warning" + esc}
	tr.AppMetrics = map[string]float64{"ops_per_sec": 1e6, "evil" + esc: 1}
	must(t, w.Close(tr))
}

// TestNoEscapeReachesTerminal: inspect, analyze and diff print the
// hostile strings escaped: no ESC, BEL, C1 CSI or bidi override byte in
// their output or errors.
func TestNoEscapeReachesTerminal(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.rec"), filepath.Join(dir, "b.rec")
	writeHostile(t, a, 1)
	writeHostile(t, b, 2)
	bad := []string{"\x1b", "\x07", "\u009b", "\u202e"}
	for _, args := range [][]string{
		{"inspect", a},
		{"analyze", a},
		{"analyze", "--metrics", a},
		{"diff", a, b},
		{"diff", "--metric", "nothing\x1b[2J", a, b},
	} {
		_, out, errs := runCmd(args...)
		for _, s := range bad {
			if strings.Contains(out+errs, s) {
				t.Errorf("%q: output carries %q:\n%s%s", args, s, out, errs)
			}
		}
		if args[0] == "inspect" && !strings.Contains(out, `host\x1b]0;pwned`) {
			t.Errorf("inspect does not show the hostname escaped:\n%s", out)
		}
	}
	// The one helper, on its own: must fire on controls, not on text.
	for in, want := range map[string]string{
		"a\x1b[31mb": `a\x1b[31mb`, "tab\there": `tab\x09here`, "ünïcode ok": "ünïcode ok",
		"c1\u009bx": `c1\u009bx`, "bidi\u202e": `bidi\u202e`, "bad\xffutf8": `bad\xffutf8`,
	} {
		if got := termSafe(in); got != want {
			t.Errorf("termSafe(%q) = %q, want %q", in, got, want)
		}
	}
	var buf bytes.Buffer
	fmt.Fprint(newTermWriter(&buf), "line\n\tindent\x1b")
	if buf.String() != "line\n\tindent\\x1b" {
		t.Errorf("termWriter kept %q, want layout kept and ESC escaped", buf.String())
	}
}
