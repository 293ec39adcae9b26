package collector

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cacheheat/cacheheat/profile"
)

func TestQuietTarget(t *testing.T) {
	zero := profile.Counts{0, 0}
	for _, tc := range []struct {
		name string
		win  profile.Window
		want bool
	}{
		{"nothing", profile.Window{Counters: []profile.Counter{{Event: "cpu-clock", PerCPU: zero, HostPerCPU: profile.Counts{5, 9}}},
			IdleNS: profile.Counts{1, 2}, Others: []profile.OtherProcess{{PID: 9, Comm: "other", Samples: 3}},
			Histograms: []profile.Histogram{{Name: profile.HistRunqLatency, PerCPU: []profile.Counts{zero, nil}}}, OffCPU: &profile.OffCPU{}}, true},
		{"a count", profile.Window{Counters: []profile.Counter{{Event: "cpu-clock", PerCPU: profile.Counts{0, 1}}}}, false},
		{"a latency", profile.Window{Histograms: []profile.Histogram{{Name: profile.HistOffCPU, PerCPU: []profile.Counts{{0, 0, 1}}}}}, false},
		{"a process", profile.Window{Processes: []profile.Process{{PID: 1}}}, false},
		{"a sample", profile.Window{Samples: []profile.Sample{{Count: 1}}}, false},
		{"blocked", profile.Window{OffCPU: &profile.OffCPU{BlockedNS: 1}}, false},
		{"a wait", profile.Window{Waits: []profile.Wait{{NS: 1}}}, false},
		{"a call", profile.Window{Functions: []profile.FunctionWindow{{}}}, false},
		{"a run", profile.Window{Runs: []profile.RunTotal{{}}}, false},
		{"a loss", profile.Window{Drops: profile.Drops{SampleMapFull: 1}}, false},
	} {
		if got := quietTarget(&tc.win); got != tc.want {
			t.Errorf("%s: quietTarget = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// windowsOf lists a recording's windows for a failure message.
func windowsOf(rec *profile.Recording) string {
	var b strings.Builder
	for _, w := range rec.Windows {
		fmt.Fprintf(&b, "\n  %d: %.3f-%.3f s quiet=%v cpu-clock %.1f ms", w.Index, float64(w.StartNS)/1e9, float64(w.EndNS)/1e9, w.Quiet, float64(targetClock(&w))/1e6)
	}
	return b.String()
}

// targetClock is the target's cpu-clock in w, summed over CPUs.
func targetClock(w *profile.Window) uint64 {
	var n uint64
	for _, c := range w.Counters {
		if c.Event == "cpu-clock" {
			for _, v := range c.PerCPU {
				n += v
			}
		}
	}
	return n
}

// A command that sleeps, works and sleeps (shell, coreutils sleep and awk:
// programs we did not write) is recorded with 200 ms windows: the
// recorder must sleep through each sleep in one quiet window that ends
// when the target runs again, lose none of the target's CPU time (its
// children's, as the kernel reports them to the shell, is the ground
// truth), and keep the work in windows of their own.
func TestQuietWindowsSleepThrough(t *testing.T) {
	needBPF(t)
	for _, p := range []string{"sh", "sleep", "awk"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("needs %s: %v", p, err)
		}
	}
	stat := filepath.Join(t.TempDir(), "stat")
	// The awk loop is a fixed amount of work, whatever the host's load.
	script := `sleep 2; awk 'BEGIN { for (i = 0; i < 3000000; i++) x += i }'; sleep 2; cat /proc/$$/stat > ` + stat
	rec := record(t, context.Background(), Options{
		Target:   Target{Kind: profile.TargetCommand, Command: []string{"sh", "-c", script}},
		QuietMax: time.Minute,
	})
	var quiet, long int
	var total, inQuiet uint64
	for i := range rec.Windows {
		w := &rec.Windows[i]
		c := targetClock(w)
		total += c
		if w.Quiet {
			quiet++
			inQuiet += c
			if w.EndNS-w.StartNS > int64(time.Second) {
				long++
			}
		}
	}
	b, err := os.ReadFile(stat)
	if err != nil {
		t.Fatalf("the command did not finish: %v", err)
	}
	// /proc/PID/stat after the command's name: fields 16 and 17 (cutime,
	// cstime) are the waited-for children's CPU time in clock ticks.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	cu, _ := strconv.ParseUint(f[13], 10, 64)
	cs, _ := strconv.ParseUint(f[14], 10, 64)
	children := (cu + cs) * uint64(time.Second) / 100 // USER_HZ is 100 on Linux
	if long < 2 || quiet < 2 {
		t.Errorf("%d quiet windows, %d of them longer than 1 s; want the recorder to sleep through both 2-s sleeps:%s", quiet, long, windowsOf(rec))
	}
	if n := len(rec.Windows); n > 3*4+quiet {
		t.Errorf("%d windows: more than the work and the sleeps' edges need:%s", n, windowsOf(rec))
	}
	if children == 0 {
		t.Fatalf("the kernel reports no CPU time for awk (stat %q): no ground truth", b)
	}
	// The recording also counts sh, sleep and cat themselves; the kernel's
	// ticks are 10 ms each, and a process's time is sampled at ticks.
	if total+20e6 < children*9/10 {
		t.Errorf("the target's cpu-clock over the windows is %.1f ms, the kernel says its children ran %.1f ms: time was lost while the recorder slept:%s", float64(total)/1e6, float64(children)/1e6, windowsOf(rec))
	}
	// The work woke the recorder: it is in windows of its own, not
	// averaged over a quiet one (which holds only what ran before the
	// wake-up was drained).
	if inQuiet > total/4 {
		t.Errorf("%.1f of %.1f ms of the target's CPU time are in quiet windows:%s", float64(inQuiet)/1e6, float64(total)/1e6, windowsOf(rec))
	}
}

// A program that works in short bursts every few milliseconds (stress-ng
// at 20% load in 10-ms slices) is never quiet for a window: no window is
// marked quiet, and there is one every interval.
func TestQuietWindowsNotWhileBusy(t *testing.T) {
	needBPF(t)
	sng, err := exec.LookPath("stress-ng")
	if err != nil {
		t.Skipf("needs stress-ng (apt-get install stress-ng): %v", err)
	}
	rec := record(t, context.Background(), Options{
		Target:   Target{Kind: profile.TargetCommand, Command: []string{sng, "--cpu", "1", "--cpu-load", "20", "--cpu-load-slice", "10", "--timeout", "3s", "--quiet"}},
		QuietMax: time.Minute,
	})
	for _, w := range rec.Windows {
		if w.Quiet {
			t.Fatalf("window %d is quiet while stress-ng ran:%s", w.Index, windowsOf(&profile.Recording{Windows: rec.Windows}))
		}
	}
	if n := len(rec.Windows); n < 12 {
		t.Errorf("%d windows of 200 ms over 3 s of stress-ng:%s", n, windowsOf(rec))
	}
}

// An empty cgroup is never woken for: a recording of it has one window
// before the recorder sleeps and one quiet window to the end; with a
// shorter --quiet-max the quiet windows end at it.
func TestQuietWindowsEmptyCgroup(t *testing.T) {
	needBPF(t)
	dir := testCgroup(t)
	opts := Options{Target: Target{Kind: profile.TargetCgroup, Cgroup: dir}, Duration: 2 * time.Second, QuietMax: time.Minute}
	rec := record(t, context.Background(), opts)
	if len(rec.Windows) != 2 || rec.Windows[0].Quiet || !rec.Windows[1].Quiet {
		t.Errorf("empty cgroup, --quiet-max 1m: want a window, then one quiet window to the end:%s", windowsOf(rec))
	}
	if st := profile.Stretched(rec); st.Stretched != 0 || st.Quiet != 1 {
		t.Errorf("stretched %d, quiet %d: a quiet window is not a starved recorder's", st.Stretched, st.Quiet)
	}
	opts.QuietMax = 500 * time.Millisecond
	rec = record(t, context.Background(), opts)
	quiet := 0
	for _, w := range rec.Windows[1:] {
		if !w.Quiet {
			t.Errorf("window %d is not quiet", w.Index)
		}
		quiet++
	}
	// 2 s less the first 200-ms window, in quiet windows of 500 ms.
	if quiet < 3 || quiet > 5 {
		t.Errorf("%d quiet windows with --quiet-max 500ms over 2 s:%s", quiet, windowsOf(rec))
	}
}
