package collector

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/cacheheat/cacheheat/profile"
)

// helperEnv makes the test binary act as a small workload (runHelper)
// instead of running tests: the integration tests record it.
const helperEnv = "CACHEHEAT_TEST_HELPER"

func TestMain(m *testing.M) {
	RunGate()
	if h := os.Getenv(helperEnv); h != "" {
		runHelper(h)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runHelper runs one workload: "faults N" touches N fresh pages, "sleeps N"
// sleeps 1ms N times, "threads N" waits for a line on stdin and then runs N
// new threads (OS threads, locked) that each spin briefly.
func runHelper(h string) {
	f := strings.Fields(h)
	n, _ := strconv.Atoi(f[1])
	switch f[0] {
	case "faults":
		if n == 0 {
			return
		}
		page := os.Getpagesize()
		mem, err := syscall.Mmap(-1, 0, n*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			panic(err)
		}
		for i := 0; i < n; i++ {
			mem[i*page] = 1
		}
	case "sleeps":
		for i := 0; i < n; i++ {
			time.Sleep(time.Millisecond)
		}
	case "threads":
		var b [1]byte
		os.Stdin.Read(b[:])
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Locked and never unlocked: the thread exits with the
				// goroutine, so the runtime has to start new ones.
				runtime.LockOSThread()
				x := uint64(i)
				for j := 0; j < 50_000_000; j++ {
					x = x*6364136223846793005 + 1442695040888963407
				}
				sink.Add(x)
			}()
		}
		// And a child process, which must be followed too.
		self, _ := os.Executable()
		child := exec.Command(self)
		child.Env = append(os.Environ(), helperEnv+"=sleeps 20")
		child.Run()
		wg.Wait()
		// Linger, so the recorder sees the threads' last switches.
		time.Sleep(300 * time.Millisecond)
	}
}

var sink atomic.Uint64

func needBPF(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: loads and attaches BPF programs")
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		t.Skip("needs kernel BTF: /sys/kernel/btf/vmlinux is missing")
	}
}

var softwareEvents = []string{"cpu-clock", "page-faults", "context-switches", "cpu-migrations"}

func events(t *testing.T, names ...string) []Event {
	t.Helper()
	var out []Event
	for _, n := range names {
		ev, err := LookupEvent(n, CPUInfo{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// stillLoaded lists the kernel objects of ids that still exist. Only the
// ids this test's recorder read from its own fds are looked at, never every
// program on the host by name: another cacheheat or BPF tool may run
// beside the tests.
func stillLoaded(ids kernelIDs) []string {
	var left []string
	for _, id := range ids.programs {
		if p, err := ebpf.NewProgramFromID(id); err == nil {
			p.Close()
			left = append(left, fmt.Sprintf("program %d", id))
		}
	}
	for _, id := range ids.maps {
		if m, err := ebpf.NewMapFromID(id); err == nil {
			m.Close()
			left = append(left, fmt.Sprintf("map %d", id))
		}
	}
	for _, id := range ids.links {
		if l, err := link.NewFromID(id); err == nil {
			l.Close()
			left = append(left, fmt.Sprintf("link %d", id))
		}
	}
	return left
}

// record runs a recording in the test and reads it back, checking that
// nothing of ours stays loaded afterwards.
func record(t *testing.T, ctx context.Context, opts Options) *profile.Recording {
	t.Helper()
	var ids kernelIDs
	onKernelLoaded = func(k kernelIDs) { ids = k }
	t.Cleanup(func() { onKernelLoaded = nil })
	if opts.Output == "" {
		opts.Output = filepath.Join(t.TempDir(), "r.rec")
	}
	if opts.Events == nil {
		opts.Events = events(t, softwareEvents...)
	}
	if opts.Interval == 0 {
		opts.Interval = 200 * time.Millisecond
	}
	opts.Warn = func(s string) { t.Log("warning:", s) }
	r, err := NewRecorder(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	// The kernel frees detached tracing programs after an RCU grace
	// period, so "released" is checked until it settles.
	if len(ids.programs) == 0 || len(ids.maps) == 0 {
		t.Fatalf("the recorder reported no kernel objects: %+v", ids)
	}
	var left []string
	for range 50 {
		if left = stillLoaded(ids); len(left) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("still loaded 5s after the recording: %v", left)
	}
	rec, err := profile.ReadFile(opts.Output)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Trailer == nil {
		t.Fatalf("recording has no trailer: %s", rec.Warning)
	}
	return rec
}

func helperCommand(t *testing.T, h string) []string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(helperEnv, h)
	return []string{self}
}

func processTotal(rec *profile.Recording, pid int, event string) uint64 {
	for _, p := range rec.ProcessTotals() {
		if p.PID == pid {
			return p.Totals[event]
		}
	}
	return 0
}

func TestRecordCommandPageFaults(t *testing.T) {
	needBPF(t)
	// The helper's own start-up faults are measured by a run that touches
	// no pages; the difference must be the pages touched.
	const pages = 5000
	count := func(n int) (uint64, *profile.Recording) {
		rec := record(t, context.Background(), Options{Target: Target{Kind: profile.TargetCommand, Command: helperCommand(t, fmt.Sprintf("faults %d", n))}})
		pid := rec.Header.Target.PIDs[0]
		return processTotal(rec, pid, "page-faults"), rec
	}
	base, _ := count(0)
	got, rec := count(pages)
	if rec.Trailer.EndReason != profile.EndTargetExit {
		t.Errorf("end reason %q, want %q", rec.Trailer.EndReason, profile.EndTargetExit)
	}
	if rec.Trailer.ExitStatus == nil || *rec.Trailer.ExitStatus != 0 {
		t.Errorf("exit status %v, want 0", rec.Trailer.ExitStatus)
	}
	diff := int64(got) - int64(base)
	if diff < pages*95/100 || diff > pages*105/100 {
		t.Errorf("page-faults: %d with %d pages touched, %d without: difference %d, want %d within 5%%", got, pages, base, diff, pages)
	}
	// The target's per-CPU counter totals hold the same faults.
	var perCPU uint64
	for _, v := range rec.CounterTotals(false)["page-faults"] {
		perCPU += v
	}
	if perCPU < got {
		t.Errorf("per-CPU target page-faults %d below the process's %d", perCPU, got)
	}
}

func TestRecordCommandContextSwitches(t *testing.T) {
	needBPF(t)
	const sleeps = 50
	rec := record(t, context.Background(), Options{Target: Target{Kind: profile.TargetCommand, Command: helperCommand(t, fmt.Sprintf("sleeps %d", sleeps))}})
	pid := rec.Header.Target.PIDs[0]
	if got := processTotal(rec, pid, "context-switches"); got < sleeps {
		t.Errorf("context-switches = %d, want at least %d (one per sleep)", got, sleeps)
	}
	// Each sleep is off-CPU time of the target's threads.
	var off uint64
	for _, c := range rec.HistogramTotal(profile.HistOffCPU) {
		off += c
	}
	if off < sleeps {
		t.Errorf("offcpu histogram counts %d, want at least %d", off, sleeps)
	}
	// Each 1ms sleep is an off-CPU period of at least 2^19 ns (the Go
	// runtime's other threads add shorter ones).
	var long uint64
	for i, c := range rec.HistogramTotal(profile.HistOffCPU) {
		if i >= 19 {
			long += c
		}
	}
	if long < sleeps {
		t.Errorf("offcpu periods >= 2^19 ns: %d, want at least %d", long, sleeps)
	}
}

func TestRecordPIDNewThreads(t *testing.T) {
	needBPF(t)
	// The helper's spinning goroutines are locked to threads, so each
	// needs a thread of its own; the Go runtime gives them the idle ones it
	// already has first (on a loaded host it had 6, and 4 goroutines all
	// ran on threads that existed before the recorder attached). 16 are
	// more than it ever keeps idle, so some threads are created after.
	const threads = 16
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), helperEnv+"=threads "+strconv.Itoa(threads))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	// Wait until the helper runs before attaching to it.
	time.Sleep(100 * time.Millisecond)
	before, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	known := map[int]bool{}
	for _, e := range before {
		tid, _ := strconv.Atoi(e.Name())
		known[tid] = true
	}

	opts := Options{Target: Target{Kind: profile.TargetPID, PIDs: []int{pid}}}
	// The threads start once the recorder is attached: the first window
	// tells us it is.
	var once sync.Once
	opts.OnWindow = func(*profile.Window, Status) { once.Do(func() { stdin.Write([]byte("go\n")) }) }
	rec := record(t, context.Background(), opts)
	if rec.Trailer.EndReason != profile.EndTargetExit {
		t.Errorf("end reason %q, want %q", rec.Trailer.EndReason, profile.EndTargetExit)
	}
	var newThreads int
	var child *profile.ProcessSummary
	for _, p := range rec.ProcessTotals() {
		if p.PID != pid {
			child = &p
			continue
		}
		for _, th := range p.Threads {
			if !known[th.TID] && th.Totals["cpu-clock"] > 10e6 {
				newThreads++
			}
		}
	}
	if newThreads == 0 {
		var seen []string
		for _, p := range rec.ProcessTotals() {
			for _, th := range p.Threads {
				seen = append(seen, fmt.Sprintf("%d/%d:%d", p.PID, th.TID, th.Totals["cpu-clock"]))
			}
		}
		t.Errorf("no thread created during the recording was counted (threads before: %v; recorded pid/tid:cpu-clock %v)", known, seen)
	}
	if child == nil || child.Totals["context-switches"] < 20 {
		t.Errorf("the target's child process (20 sleeps) was not followed: %+v", child)
	}
}

func TestRecordAll(t *testing.T) {
	needBPF(t)
	ctx, opts := stopAfterWindows(t, 3, Options{Target: Target{Kind: profile.TargetAll}})
	rec := record(t, ctx, opts)
	if rec.Trailer.EndReason != profile.EndSignal {
		t.Errorf("end reason %q, want %q", rec.Trailer.EndReason, profile.EndSignal)
	}
	if n := len(rec.ProcessTotals()); n < 2 {
		t.Errorf("-a saw %d processes, want more than one", n)
	}
	var samples uint64
	for _, w := range rec.Windows {
		for _, s := range w.Samples {
			samples += s.Count
		}
		for _, c := range w.Counters {
			for i := range c.PerCPU {
				if c.PerCPU[i] != c.HostPerCPU[i] {
					t.Fatalf("-a: %s on cpu %d: target %d != host %d", c.Event, i, c.PerCPU[i], c.HostPerCPU[i])
				}
			}
		}
	}
	if samples == 0 {
		t.Error("-a recorded no samples")
	}
}

func TestRecordCgroup(t *testing.T) {
	needBPF(t)
	dir, err := os.MkdirTemp(cgroup2Mount(), "cacheheat-test-")
	if err != nil {
		t.Skipf("needs a writable cgroup v2 hierarchy: %v", err)
	}
	// A child cgroup: -G covers its descendants, as a container's
	// processes often live below the cgroup that names it.
	child := filepath.Join(dir, "child")
	if err := os.Mkdir(child, 0o755); err != nil {
		os.Remove(dir)
		t.Skipf("needs nested cgroups: %v", err)
	}
	t.Cleanup(func() { os.Remove(child); os.Remove(dir) })
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for _, g := range []string{dir, child} {
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), helperEnv+"=sleeps 5000")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		if err := os.WriteFile(filepath.Join(g, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			t.Fatal(err)
		}
		want = append(want, cmd.Process.Pid)
	}
	if got := cgroupLevel(child); got != cgroupLevel(dir)+1 || cgroupLevel(dir) == 0 {
		t.Errorf("cgroup levels: %s %d, %s %d", dir, cgroupLevel(dir), child, got)
	}
	ctx, opts := stopAfterWindows(t, 3, Options{Target: Target{Kind: profile.TargetCgroup, Cgroup: dir}})
	rec := record(t, ctx, opts)
	procs := rec.ProcessTotals()
	var pids []int
	for _, p := range procs {
		pids = append(pids, p.PID)
	}
	if len(procs) != 2 || procs[0].PID != min(want[0], want[1]) || procs[1].PID != max(want[0], want[1]) {
		t.Fatalf("-G recorded processes %v, want only %v (the cgroup's and its child cgroup's)", pids, want)
	}
	for _, p := range procs {
		if p.Totals["context-switches"] == 0 {
			t.Errorf("-G: process %d has no context switches", p.PID)
		}
	}
}

func TestRecordErrors(t *testing.T) {
	needBPF(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		t    Target
	}{
		{"missing pid", Target{Kind: profile.TargetPID, PIDs: []int{1 << 30}}},
		{"missing cgroup", Target{Kind: profile.TargetCgroup, Cgroup: "/sys/fs/cgroup/no-such-cgroup-here"}},
		{"missing command", Target{Kind: profile.TargetCommand, Command: []string{"/no/such/command"}}},
	} {
		r, err := NewRecorder(Options{Target: tc.t, Output: filepath.Join(dir, "r.rec"), Events: events(t, "cpu-clock")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Run(context.Background()); !errors.Is(err, ErrNoTarget) {
			t.Errorf("%s: error %v, want ErrNoTarget", tc.name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "r.rec")); err == nil {
		t.Error("a failed recording left a file")
	}
}

// stopAfterWindows returns a context that is cancelled, as by a SIGINT,
// once n windows are written: no wall-clock guesses on a loaded host.
func stopAfterWindows(t *testing.T, n int, opts Options) (context.Context, Options) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	opts.OnWindow = func(_ *profile.Window, s Status) {
		if s.Windows >= n {
			cancel()
		}
	}
	return ctx, opts
}

// TestRecordMissSampling drives the miss-event sampling path (the second
// perf_event program, period sampling with stacks), which only a PMU's
// LLC-load-misses or cache-misses would otherwise take: the miss events
// are data, so page-faults stands in for them here. Every 100th fault of a
// helper that touches 20000 pages is sampled with its stack.
func TestRecordMissSampling(t *testing.T) {
	needBPF(t)
	saved := missEvents
	missEvents = []string{"page-faults"}
	t.Cleanup(func() { missEvents = saved })
	const pages, period = 20000, 100
	rec := record(t, context.Background(), Options{
		Target:       Target{Kind: profile.TargetCommand, Command: helperCommand(t, fmt.Sprintf("faults %d", pages))},
		SamplePeriod: period,
	})
	if got := rec.Header.Settings.SampleEvents; len(got) != 2 || got[1] != "page-faults" || rec.Header.Settings.SamplePeriod != period {
		t.Fatalf("sample events %v, period %d; want cpu-clock and page-faults every %d", got, rec.Header.Settings.SamplePeriod, period)
	}
	pid := rec.Header.Target.PIDs[0]
	faults := processTotal(rec, pid, "page-faults")
	var samples uint64
	var withStack bool
	for _, w := range rec.Windows {
		for _, s := range w.Samples {
			if s.Event == "page-faults" && s.PID == pid {
				samples += s.Count
				withStack = withStack || s.UserStack != 0 || s.KernelStack != 0
			}
		}
	}
	// One sample per period faults, give or take the period boundary on
	// each CPU the helper ran on.
	want := faults / period
	if samples+4 < want || samples > want+4 {
		t.Errorf("%d page-faults sampled every %d gave %d samples, want about %d", faults, period, samples, want)
	}
	if !withStack {
		t.Error("miss samples carry no stack")
	}
}
