package collector

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cacheheat/cacheheat/profile"
)

// testSink keeps what a recorder hands it.
type testSink struct {
	mu      sync.Mutex
	header  *profile.Header
	windows []*profile.Window
	extras  []*WindowExtras
	onWin   func(*WindowExtras)
}

func (s *testSink) Header(h profile.Header) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.header = &h
	return nil
}

func (s *testSink) Window(w *profile.Window, x *WindowExtras, _ Status) error {
	s.mu.Lock()
	s.windows = append(s.windows, w)
	s.extras = append(s.extras, x)
	f := s.onWin
	s.mu.Unlock()
	if f != nil {
		f(x)
	}
	return nil
}

func (s *testSink) Close(*profile.Trailer) error { return nil }

// The exporter's mode against the kernel: a recorder with a sink and no
// file counts by cgroup. A process sleeping in the test's cgroup shows up
// there with cpu-clock, run-queue latencies and off-CPU time of reason
// sleep; windows carry no processes and no stacks; once the cgroup is
// removed, it is reported removed.
func TestRecordByCgroupToSink(t *testing.T) {
	needBPF(t)
	dir := testCgroup(t)
	path := "/" + filepath.Base(dir)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), helperEnv+"=sleeps 100000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := &testSink{}
	var once sync.Once
	sink.onWin = func(x *WindowExtras) {
		for _, c := range x.Cgroups {
			if c.Path == path && c.Counts["cpu-clock"] > 0 {
				// Seen: end the process and remove its cgroup.
				once.Do(func() {
					go func() {
						cmd.Process.Kill()
						cmd.Wait()
						for os.Remove(dir) != nil {
							time.Sleep(10 * time.Millisecond)
						}
					}()
				})
			}
			if c.Path == path && c.Removed {
				cancel()
			}
		}
	}
	wd, _ := os.Getwd()
	before, _ := os.ReadDir(wd)
	r, err := NewRecorder(Options{
		Target: Target{Kind: profile.TargetAll}, Events: events(t, "cpu-clock", "context-switches"),
		Interval: 200 * time.Millisecond, Duration: time.Minute, ByCgroup: true, Sinks: []Sink{sink},
	})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := r.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tr.EndReason != profile.EndSignal {
		t.Fatalf("the cgroup was never reported removed within a minute (end: %s)", tr.EndReason)
	}
	after, _ := os.ReadDir(wd)
	if len(after) != len(before) {
		t.Errorf("a recorder without output wrote files: %d entries before, %d after", len(before), len(after))
	}
	if sink.header == nil || len(sink.header.Events) != 2 {
		t.Fatalf("sink header: %+v", sink.header)
	}
	var clock, runq, sleeps uint64
	if len(sink.windows) != len(sink.extras) {
		t.Errorf("%d windows but %d extras", len(sink.windows), len(sink.extras))
	}
	for _, w := range sink.windows {
		if len(w.Processes) != 0 || len(w.Samples) != 0 {
			t.Fatalf("by-cgroup window has %d processes, %d samples; want none", len(w.Processes), len(w.Samples))
		}
	}
	for _, x := range sink.extras {
		for _, c := range x.Cgroups {
			if c.Path != path {
				continue
			}
			clock += c.Counts["cpu-clock"]
			for _, n := range c.Runq {
				runq += n
			}
			for _, n := range c.OffCPU[OffCPUSleep] {
				sleeps += n
			}
		}
	}
	if clock == 0 || runq == 0 || sleeps == 0 {
		t.Errorf("cgroup %s: cpu-clock %d ns, %d run-queue latencies, %d sleeps; want all > 0", path, clock, runq, sleeps)
	}
	t.Logf("cgroup %s: cpu-clock %d ns, %d run-queue latencies, %d off-CPU sleeps over %d windows", path, clock, runq, sleeps, len(sink.windows))
}
