package collector

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cacheheat/cacheheat/profile"
)

// TestRecordNothingMeasurable: -e with only events this host cannot
// count is a host error (exit 3), with the reason, and writes no file.
func TestRecordNothingMeasurable(t *testing.T) {
	needBPF(t)
	cycles := events(t, "cycles")
	if st := ProbeEvent(cycles[0]); st.Status == profile.StatusMeasured {
		t.Skip("this host has a PMU: cycles is measurable, so the case cannot be built here")
	}
	out := filepath.Join(t.TempDir(), "r.rec")
	r, err := NewRecorder(Options{Target: Target{Kind: profile.TargetAll}, Events: cycles, Output: out, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Run(context.Background())
	if !errors.Is(err, ErrHost) || !strings.Contains(err.Error(), "cycles") {
		t.Fatalf("err = %v, want ErrHost naming cycles and why", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 0 {
		t.Errorf("files left: %v", entries)
	}
	// The case where it must not fire: one measurable event among them.
	r, err = NewRecorder(Options{Target: Target{Kind: profile.TargetAll}, Events: append(cycles, events(t, "page-faults")...), Output: out, Duration: 300 * time.Millisecond, Interval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatalf("cycles + page-faults: %v, want a recording", err)
	}
}

// TestClampSampleRate: -F above the kernel's perf_event_max_sample_rate
// is lowered to it with a note naming the limit, and the recording's
// header says the rate used; at the limit it is kept (with the note on
// the recorder's own cost); at 99 Hz there is nothing to say.
func TestClampSampleRate(t *testing.T) {
	b, err := os.ReadFile(maxSampleRateFile)
	if err != nil {
		t.Skipf("cannot read %s: %v", maxSampleRateFile, err)
	}
	limit, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if hz, note := ClampSampleRate(99); hz != 99 || note != "" {
		t.Errorf("99 Hz: %d, %q", hz, note)
	}
	if hz, note := ClampSampleRate(limit); hz != limit || (limit > HighSampleHz) != (note != "") {
		t.Errorf("at the limit %d: %d, %q", limit, hz, note)
	}
	hz, note := ClampSampleRate(limit + 1)
	if hz != limit || !strings.Contains(note, strconv.Itoa(limit)) || !strings.Contains(note, "perf_event_max_sample_rate") {
		t.Errorf("above the limit: %d, %q; want %d and the limit named", hz, note, limit)
	}
	var warned []string
	r, err := NewRecorder(Options{Output: "x", SampleHz: limit + 1, Warn: func(s string) { warned = append(warned, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if r.opts.SampleHz != limit || len(warned) != 1 {
		t.Errorf("NewRecorder with -F above the limit: rate %d, notes %q", r.opts.SampleHz, warned)
	}
}

// TestCommandGroupKilled: a command that ignores SIGTERM, and the child it
// started, are both gone when the recording ends; the trailer says the
// command was ended by SIGKILL.
func TestCommandGroupKilled(t *testing.T) {
	needBPF(t)
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	opts := Options{
		Target:   Target{Kind: profile.TargetCommand, Command: []string{"bash", "-c", `trap "" TERM; sleep 300 & echo $! > ` + pidFile + `; wait; sleep 300`}},
		Duration: time.Second, Interval: 250 * time.Millisecond,
	}
	rec := record(t, context.Background(), opts)
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the command never started its child: %v", err)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if child <= 0 || alive(child) {
		t.Errorf("the command's child (pid %d) outlived the recorder", child)
	}
	leader := rec.Header.Target.PIDs[0]
	if alive(leader) {
		t.Errorf("the command (pid %d) outlived the recorder", leader)
	}
	if tr := rec.Trailer; tr.ExitStatus == nil || *tr.ExitStatus != 137 || tr.ExitSignal != "SIGKILL" {
		t.Errorf("trailer exit %v signal %q, want 137 and SIGKILL", tr.ExitStatus, tr.ExitSignal)
	}
}
