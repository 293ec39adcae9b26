package collector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/profile"
	"github.com/cacheheat/cacheheat/symbolize"
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
	case "work":
		// n pages touched, then about 100 ms of CPU.
		page := os.Getpagesize()
		mem, err := syscall.Mmap(-1, 0, n*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			panic(err)
		}
		for i := 0; i < n; i++ {
			mem[i*page] = 1
		}
		x := uint64(n)
		for start := time.Now(); time.Since(start) < 100*time.Millisecond; {
			for j := 0; j < 100_000; j++ {
				x = x*6364136223846793005 + 1442695040888963407
			}
		}
		sink.Add(x)
	case "rename":
		// Another thread renames the process (its main thread) while the
		// main thread sleeps, as the bundled workloads do; then it exits.
		time.Sleep(50 * time.Millisecond)
		done := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			os.WriteFile("/proc/self/comm", []byte(f[2]), 0)
			close(done)
		}()
		<-done
		time.Sleep(200 * time.Millisecond)
	case "sleeps":
		for i := 0; i < n; i++ {
			time.Sleep(time.Millisecond)
		}
	case "threads":
		var b [1]byte
		os.Stdin.Read(b[:])
		var wg sync.WaitGroup
		// A locked goroutine may be given one of the runtime's idle
		// threads (how many exist depends on what ran at start-up), so
		// start one more per existing thread: at least n run on threads
		// created after the signal.
		existing, _ := os.ReadDir("/proc/self/task")
		for i := 0; i < n+len(existing); i++ {
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
		ev, err := LookupEvent(n, host.CPUInfo{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// kernelFDs lists this process's file descriptors of BPF objects and perf
// events. Only the test's own process is looked at: other profilers, and
// other cacheheat instances, may run on the host at the same time.
func kernelFDs(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // the fd of the directory being read
		}
		if strings.HasPrefix(target, "anon_inode:bpf") || target == "anon_inode:[perf_event]" {
			found = append(found, e.Name()+" "+target)
		}
	}
	return found
}

// record runs a recording in the test and reads it back, checking that
// the recorder closed every BPF object and perf event it opened (so the
// kernel unloads them).
func record(t *testing.T, ctx context.Context, opts Options) *profile.Recording {
	t.Helper()
	before := kernelFDs(t)
	if opts.Output == "" {
		opts.Output = filepath.Join(t.TempDir(), "r.rec")
	}
	if opts.Events == nil {
		opts.Events = events(t, softwareEvents...)
	}
	if opts.Interval == 0 {
		opts.Interval = 200 * time.Millisecond
	}
	warn := opts.Warn
	opts.Warn = func(s string) {
		t.Log("warning:", s)
		if warn != nil {
			warn(s)
		}
	}
	sink := &memSink{}
	opts.Sinks = append(opts.Sinks, sink)
	r, err := NewRecorder(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if after := kernelFDs(t); len(after) > len(before) {
		t.Errorf("BPF objects or perf events left open after the recording: %v (before: %v)", after, before)
	}
	rec, err := profile.ReadFile(opts.Output)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Trailer == nil {
		t.Fatalf("recording has no trailer: %s", rec.Warning)
	}
	sink.check(t, rec)
	return rec
}

// memSink keeps what a Sink receives, to compare with the file.
type memSink struct {
	headers, closes int
	header          profile.Header
	windows         []*profile.Window
	trailer         *profile.Trailer
}

func (m *memSink) Header(h profile.Header) error { m.headers++; m.header = h; return nil }
func (m *memSink) Window(w *profile.Window, _ *WindowExtras, _ Status) error {
	m.windows = append(m.windows, w)
	return nil
}
func (m *memSink) Close(t *profile.Trailer) error { m.closes++; m.trailer = t; return nil }

// check asserts that the sink got, in memory, the header and windows the
// file holds: one header before the windows, and the same counters,
// samples and histograms window by window.
func (m *memSink) check(t *testing.T, rec *profile.Recording) {
	t.Helper()
	if m.headers != 1 || m.closes != 1 {
		t.Fatalf("sink got %d headers and %d closes, want 1 of each", m.headers, m.closes)
	}
	if m.trailer == nil || rec.Trailer == nil || m.trailer.Windows != rec.Trailer.Windows || m.trailer.EndReason != rec.Trailer.EndReason {
		t.Errorf("sink's trailer %+v, the file's %+v", m.trailer, rec.Trailer)
	}
	hj, _ := json.Marshal(m.header)
	fj, _ := json.Marshal(rec.Header)
	if string(hj) != string(fj) {
		t.Errorf("sink's header differs from the file's:\n%s\n%s", hj, fj)
	}
	if len(m.windows) != len(rec.Windows) {
		t.Fatalf("sink got %d windows, the file has %d", len(m.windows), len(rec.Windows))
	}
	for i, w := range m.windows {
		f := rec.Windows[i]
		for _, part := range []struct {
			name string
			a, b any
		}{{"counters", w.Counters, f.Counters}, {"samples", w.Samples, f.Samples}, {"histograms", w.Histograms, f.Histograms}} {
			a, _ := json.Marshal(part.a)
			b, _ := json.Marshal(part.b)
			if string(a) != string(b) {
				t.Errorf("window %d: the sink's %s differ from the file's", i, part.name)
			}
		}
	}
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
	// Within 5%: beside stress-ng --cpu 2 about 1 run in 100 once counted
	// 150-400 of its ~5,450 faults short: a slice whose switch-in this
	// guest's sched_switch did not show went uncounted. Replayed since
	// (replay_in in bpf/cacheheat.c), 100 of 100 runs gave 4,950-5,064.
	diff := int64(got) - int64(base)
	t.Logf("page-faults: %d with %d pages touched, %d without", got, pages, base)
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

// TestRecordSoftwareSourcesMatchCounters records cpu-clock and
// page-faults twice in one run: as software events (switch timestamps, and
// the fault counter read only after slices with faults) and as stand-ins
// of another kind, which take the path of hardware events (their perf
// counters read at every switch of the target). The two must agree. They
// cannot where this guest's sched_switch left a switch of the target out:
// the software counts of that slice are replayed from the kernel's
// account, its counter reads do not exist (the recording warns; beside
// stress-ng --cpu 2, 3 runs of 40 had one, and one such run in a clean
// clone's make test had the two 2.1% of cpu-clock and 2.7% of page-faults
// apart). Such a run decides nothing, and the recording is made again, up
// to five times.
func TestRecordSoftwareSourcesMatchCounters(t *testing.T) {
	needBPF(t)
	evs := events(t, "cpu-clock", "page-faults", "context-switches")
	evs = append(evs,
		Event{Name: "cpu-clock-by-counter", Kind: KindRaw, Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK},
		Event{Name: "page-faults-by-counter", Kind: KindRaw, Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_PAGE_FAULTS})
	if src, counters, faults := slotSources(evs, 16); src[0] != srcClock || src[3] != srcCounter || counters != 2 || faults != 1<<1 {
		t.Fatalf("slot sources %v, %d counters, fault slots %b: want the stand-ins on counters", src[:5], counters, faults)
	}
	var rec *profile.Recording
	for try := 1; ; try++ {
		untraced := false
		rec = record(t, context.Background(), Options{
			Target: Target{Kind: profile.TargetCommand, Command: helperCommand(t, "work 5000")},
			Events: evs,
			Warn: func(s string) {
				untraced = untraced || strings.Contains(s, "switches the kernel did not trace are not attributed")
			},
		})
		if !untraced {
			break
		}
		if try == 5 {
			t.Fatalf("all %d recordings had switches of the target the kernel did not trace: the two paths cannot be compared", try)
		}
		t.Logf("recording %d had switches of the target the kernel did not trace: made again", try)
	}
	pid := rec.Header.Target.PIDs[0]
	for _, c := range []struct {
		soft, counter string
		tol           float64
	}{{"cpu-clock", "cpu-clock-by-counter", 0.02}, {"page-faults", "page-faults-by-counter", 0.01}} {
		s, k := processTotal(rec, pid, c.soft), processTotal(rec, pid, c.counter)
		t.Logf("%s %d, %s %d", c.soft, s, c.counter, k)
		if s == 0 || math.Abs(float64(s)-float64(k)) > c.tol*float64(k) {
			t.Errorf("%s %d, %s %d: want them within %.0f%%", c.soft, s, c.counter, k, c.tol*100)
		}
	}
	if pf := processTotal(rec, pid, "page-faults"); pf < 5000 {
		t.Errorf("page-faults %d with 5000 pages touched", pf)
	}
}

// TestRecordRename: a process renamed by another of its threads (a write
// to /proc/self/comm) is recorded under its new name, also once it has
// exited and /proc has nothing left to ask.
func TestRecordRename(t *testing.T) {
	needBPF(t)
	rec := record(t, context.Background(), Options{
		Target: Target{Kind: profile.TargetCommand, Command: helperCommand(t, "rename 0 ch-renamed")},
		Events: events(t, "cpu-clock", "context-switches"),
	})
	pid := rec.Header.Target.PIDs[0]
	for _, p := range rec.ProcessTotals() {
		if p.PID == pid && p.Comm != "ch-renamed" {
			t.Errorf("process %d recorded as %q, want ch-renamed", pid, p.Comm)
		}
	}
}

func TestSlotSources(t *testing.T) {
	evs := events(t, "cpu-clock", "page-faults", "major-faults", "context-switches", "cpu-migrations")
	// Hardware events, and a software counter standing in for one (a
	// simulated PMU), are read from their counters; a context-switches
	// stand-in is counted at the switch.
	evs = append(evs, Event{Name: "cycles", Kind: KindHardware, Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_CPU_CYCLES},
		Event{Name: "LLC-load-misses", Kind: KindCache, Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_PAGE_FAULTS},
		Event{Name: "xsnp_hitm", Kind: KindRaw, Type: unix.PERF_TYPE_RAW, Config: 0x4d2,
			StandIn: &Event{Name: "context-switches", Kind: KindSoftware, Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CONTEXT_SWITCHES}})
	src, counters, faults := slotSources(evs, 40)
	want := []uint32{srcClock, srcFault, srcMajFault, srcSwitch, srcMigration, srcCounter, srcCounter, srcSwitch}
	for i, w := range want {
		if src[i] != w {
			t.Errorf("slot %d (%s): source %d, want %d", i, evs[i].Name, src[i], w)
		}
	}
	if len(src) != 40 || counters != 2 || faults != 0b110 {
		t.Errorf("%d slots, %d counter slots, fault slots %b: want 40, 2 and 110", len(src), counters, faults)
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
	stdin := startWithStdin(t, cmd)
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
	opts.Sinks = append(opts.Sinks, WindowFunc(func(*profile.Window, Status) { once.Do(func() { stdin.Write([]byte("go\n")) }) }))
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
		t.Errorf("no thread created during the recording was counted (threads before: %v)", known)
	}
	if child == nil || child.Totals["context-switches"] < 20 {
		t.Errorf("the target's child process (20 sleeps) was not followed: %+v", child)
	}
}

func TestRecordAll(t *testing.T) {
	needBPF(t)
	ctx, opts := stopAfterWindows(t, 3, Options{Target: Target{Kind: profile.TargetAll}})
	// The samples checked are this process's own: a thread that spins for
	// the whole recording, so that they do not depend on what else the
	// host runs (an idle host gave none in 0.6 s).
	spun := make(chan struct{})
	go func() {
		defer close(spun)
		for ctx.Err() == nil {
		}
	}()
	// The ground truth for idle time: the kernel's own, /proc/stat read
	// every 5 ms from before the recording to past its end.
	stop := make(chan struct{})
	stat := readStatIdle(t, stop)
	rec := record(t, ctx, opts)
	<-spun
	time.Sleep(60 * time.Millisecond)
	close(stop)
	truth := <-stat
	if rec.Trailer.EndReason != profile.EndSignal {
		t.Errorf("end reason %q, want %q", rec.Trailer.EndReason, profile.EndSignal)
	}
	if n := len(rec.ProcessTotals()); n < 2 {
		t.Errorf("-a saw %d processes, want more than one", n)
	}
	var samples uint64
	for _, w := range rec.Windows {
		for _, s := range w.Samples {
			if s.PID == os.Getpid() {
				samples += s.Count
			}
		}
		for _, c := range w.Counters {
			for i := range c.PerCPU {
				if c.PerCPU[i] != c.HostPerCPU[i] {
					t.Fatalf("-a: %s on cpu %d: target %d != host %d", c.Event, i, c.PerCPU[i], c.HostPerCPU[i])
				}
			}
			if c.Event != "cpu-clock" {
				continue
			}
			// A CPU's cpu-clock is its busy time: never more than the
			// window, and over all CPUs at least what this process's
			// spinning thread ran (most of a window, whatever the host
			// does beside it). The idle task's time is not in it. Busy
			// time and the process's time advance at the same switches
			// and samples but are read a moment apart: a sample period
			// (10 ms at 99 Hz) of slack, and windows shorter than 100 ms
			// (the last) are not held to it.
			span := uint64(w.EndNS - w.StartNS)
			if span < 100e6 {
				continue
			}
			slack := span/20 + 20e6
			var sum uint64
			for cpu, v := range c.HostPerCPU {
				sum += v
				if v > span+slack {
					t.Errorf("window %d cpu %d: cpu-clock %d ns in a %d ns window", w.Index, cpu, v, span)
				}
			}
			var mine, idle uint64
			for _, p := range w.Processes {
				if p.PID == os.Getpid() {
					mine += p.Counts["cpu-clock"]
				}
			}
			for _, v := range w.IdleNS {
				idle += v
			}
			if sum+slack < mine {
				t.Errorf("window %d: cpu-clock of all CPUs %d ns, less than this process's %d", w.Index, sum, mine)
			}
			// The window's idle time (the rest of its busy time's clock)
			// against the kernel's: between what /proc/stat counted from
			// 50 ms into the window to its end and from before it to 50
			// ms past it (the recorder reads busy time a moment after
			// the window's end). Each CPU may be off by a tick of
			// /proc/stat (10 ms) and a sample period of busy time (10 ms
			// at 99 Hz), and 5 ms more.
			start := rec.Header.StartTime.Add(time.Duration(w.StartNS))
			end := rec.Header.StartTime.Add(time.Duration(w.EndNS))
			n := uint64(len(c.HostPerCPU))
			lo, hi, ok := truth.between(start.Add(50*time.Millisecond), end, start, end.Add(50*time.Millisecond))
			tol := n * 25e6
			switch {
			case !ok:
				t.Errorf("window %d: /proc/stat was not read around it", w.Index)
			case w.IdleNS == nil:
				t.Errorf("window %d: no idle time", w.Index)
			case idle+tol < lo:
				t.Errorf("window %d: idle %d ns over %d CPUs, /proc/stat counted at least %d: idle counted as busy", w.Index, idle, n, lo)
			case idle > hi+tol:
				t.Errorf("window %d: idle %d ns over %d CPUs, /proc/stat counted at most %d", w.Index, idle, n, hi)
			}
		}
	}
	if samples == 0 {
		t.Error("-a recorded no samples of this process, which spun on a CPU throughout")
	}
}

// statIdle is /proc/stat's idle + iowait time of all CPUs (ns), read at
// the times in at.
type statIdle struct {
	at   []time.Time
	idle []uint64
}

// readStatIdle reads /proc/stat every 5 ms until stop is closed, and then
// sends what it read.
func readStatIdle(t *testing.T, stop <-chan struct{}) <-chan statIdle {
	out := make(chan statIdle, 1)
	go func() {
		var s statIdle
		for {
			select {
			case <-stop:
				out <- s
				return
			default:
			}
			b, err := os.ReadFile("/proc/stat")
			now := time.Now()
			if err != nil {
				t.Error(err)
				out <- s
				return
			}
			// "cpu  user nice system idle iowait ...", in USER_HZ (100)
			// ticks; the first line sums the CPUs.
			f := strings.Fields(string(b[:bytes.IndexByte(b, '\n')]))
			idle, _ := strconv.ParseUint(f[4], 10, 64)
			iowait, _ := strconv.ParseUint(f[5], 10, 64)
			s.at, s.idle = append(s.at, now), append(s.idle, (idle+iowait)*1e7)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return out
}

// between returns the idle time from the first reading at or after a0 to
// the last at or before a1, and from the last at or before b0 to the first
// at or after b1; ok is false when a reading is missing.
func (s statIdle) between(a0, a1, b0, b1 time.Time) (lo, hi uint64, ok bool) {
	first := func(from time.Time) int { // the first at or after from
		return sort.Search(len(s.at), func(i int) bool { return !s.at[i].Before(from) })
	}
	ia, ja := first(a0), first(a1.Add(1))-1
	ib, jb := first(b0.Add(1))-1, first(b1)
	if ia >= len(s.at) || ja < ia || ib < 0 || jb >= len(s.at) {
		return 0, 0, false
	}
	return s.idle[ja] - s.idle[ia], s.idle[jb] - s.idle[ib], true
}

// testCgroup makes an empty cgroup for the test, removed after it (and
// after whatever the test's own cleanups remove first).
func testCgroup(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(cgroup2Mount(), "cacheheat-test-")
	if err != nil {
		t.Skipf("needs a writable cgroup v2 hierarchy: %v", err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	return dir
}

func TestRecordCgroup(t *testing.T) {
	needBPF(t)
	dir := testCgroup(t)
	// A child cgroup: -G covers its descendants, as a container's
	// processes often live below the cgroup that names it.
	child := filepath.Join(dir, "child")
	if err := os.Mkdir(child, 0o755); err != nil {
		t.Skipf("needs nested cgroups: %v", err)
	}
	t.Cleanup(func() { os.Remove(child) })
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
	opts.Sinks = append(opts.Sinks, WindowFunc(func(_ *profile.Window, s Status) {
		if s.Windows >= n {
			cancel()
		}
	}))
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
	// each CPU the helper ran on, and 2% more: beside stress-ng --cpu 2
	// one run of many gave 199 samples of 20,415 faults (cause not found;
	// the runs since log their drops). A wrong period or a lost
	// attribution is still far outside.
	want := faults / period
	slack := 4 + want/50
	var drops profile.Drops
	for _, w := range rec.Windows {
		drops.Add(w.Drops)
	}
	t.Logf("%d page-faults, %d samples; drops %+v", faults, samples, drops)
	if samples+slack < want || samples > want+slack {
		t.Errorf("%d page-faults sampled every %d gave %d samples, want %d give or take %d (drops %+v)", faults, period, samples, want, slack, drops)
	}
	if !withStack {
		t.Error("miss samples carry no stack")
	}
}

// TestPIDWatch: the -p watcher's liveness check says a running process
// is alive, reports its exit on its channel, and then, as for a process
// exited before it was asked about, says it is not, as alive's /proc read
// does.
func TestPIDWatch(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := newPIDWatch()
	defer w.close()
	pid := cmd.Process.Pid
	if !w.alive(pid) || !alive(pid) {
		t.Fatalf("a running sleep: pidfd alive %v, /proc alive %v", w.alive(pid), alive(pid))
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// A zombie until waited for: its exit is reported all the same.
	select {
	case got := <-w.exits:
		if got != pid {
			t.Fatalf("exit of %d reported as %d", pid, got)
		}
		w.exited(got)
	case <-time.After(30 * time.Second):
		t.Fatal("a killed process's exit was never reported")
	}
	if w.alive(pid) || alive(pid) {
		t.Errorf("a killed, unreaped process: pidfd alive %v, /proc alive %v", w.alive(pid), alive(pid))
	}
	_ = cmd.Wait()
	if newPIDWatch().alive(pid) {
		t.Error("a reaped process, asked about first: alive")
	}
}

// TestExecSameAddresses: a target that execs another program whose code
// lies at the same addresses (two static builds of one source, each
// spinning in a function of its own name) has its samples after the exec
// named from the new program, never from the old one's mappings. (It
// fails with the exec left unseen: the mapping watcher's exec and mapping
// records ignored and no snapshot read again. Samples taken before the
// exec in the window that has it are named from the new program: a
// snapshot has no time.)
func TestExecSameAddresses(t *testing.T) {
	needBPF(t)
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("needs gcc to build the C test programs: not in PATH")
	}
	// No system call nor vDSO call while spinning: every sample's
	// addresses are in the program's own code, at the same addresses in
	// both builds (static, so no library moves with ASLR).
	const src = `#include <unistd.h>
__attribute__((noinline)) void SPIN(unsigned long n) {
	volatile unsigned long x = 0;
	for (unsigned long i = 0; i < n; i++)
		x += i;
}
int main(int argc, char **argv) {
	SPIN(3000000000UL);
	if (argc > 1)
		execv(argv[1], argv + 1);
	return 0;
}
`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "spin.c"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bins := map[string]string{}
	for _, fn := range []string{"spin_before_exec", "spin_after_exec"} {
		bins[fn] = filepath.Join(dir, fn)
		out, err := exec.Command(cc, "-O1", "-static", "-fno-omit-frame-pointer", "-DSPIN="+fn, "-o", bins[fn], filepath.Join(dir, "spin.c")).CombinedOutput()
		if err != nil {
			t.Fatalf("gcc: %v\n%s", err, out)
		}
	}
	addr := func(bin, fn string) uint64 {
		syms, _ := elfSymbols(t, bin)
		for _, s := range syms {
			if s.Name == fn {
				return s.Value
			}
		}
		t.Fatalf("%s: no symbol %s", bin, fn)
		return 0
	}
	// The premise: the new program's function is at the old one's address.
	if a, b := addr(bins["spin_before_exec"], "spin_before_exec"), addr(bins["spin_after_exec"], "spin_after_exec"); a != b {
		t.Fatalf("the two builds' functions are at %#x and %#x, want one address", a, b)
	}
	rec := record(t, context.Background(), Options{
		Target: Target{Kind: profile.TargetCommand, Command: []string{bins["spin_before_exec"], bins["spin_after_exec"]}},
	})
	named := map[string]uint64{}
	for _, w := range rec.Windows {
		for _, s := range w.Samples {
			if s.Event != "cpu-clock" || s.UserStack == 0 {
				continue
			}
			named[rec.Stacks[s.UserStack].Frames[0].Function] += s.Count
		}
	}
	// About 0.5 s each here, 50 samples at 99 Hz; a busy host gives fewer.
	if named["spin_before_exec"] < 10 || named["spin_after_exec"] < 10 {
		t.Errorf("samples by innermost function: %v; want at least 10 in each of spin_before_exec and spin_after_exec", named)
	}
}

// TestSampledAddrs: while the mapping watcher follows every mapping, a
// process's mappings are read again for a sample whose innermost address
// (where it ran) no mapping holds, not for the words a frame-pointer walk
// found past the code that had frame pointers; without the watcher, for
// any address outside them.
func TestSampledAddrs(t *testing.T) {
	self := os.Getpid()
	sym := symbolize.New()
	if err := sym.Snapshot(self); err != nil {
		t.Fatal(err)
	}
	ran := uint64(reflect.ValueOf(TestSampledAddrs).Pointer())
	const junk = 0x10 // no mapping starts at page 0
	walked := []rawSample{{pid: self, user: []uint64{ran, ran + 1, junk}}}
	if sym.NeedsSnapshot(self, sampledAddrs(walked, true)[self]) {
		t.Error("followed: a junk outer frame asks for the mappings again")
	}
	if !sym.NeedsSnapshot(self, sampledAddrs(walked, false)[self]) {
		t.Error("not followed: an address outside the mappings does not ask for them again")
	}
	if outside := []rawSample{{pid: self, user: []uint64{junk, ran}}}; !sym.NeedsSnapshot(self, sampledAddrs(outside, true)[self]) {
		t.Error("followed: a sample that ran outside the mappings does not ask for them again")
	}
	if got := sampledAddrs([]rawSample{{pid: self}, {pid: 7, user: []uint64{ran}}}, true); len(got) != 1 || len(got[7]) != 1 {
		t.Errorf("sampledAddrs of a sample without a user stack and one with: %v, want pid 7's one address", got)
	}
}

// TestOwnPathKernelStacks: an interruptible wait in a call whose kernel
// side is the call's own (a sleep, a mutex's futex) has its user stack
// and no kernel stack, and no stack error for the one not taken; a wait
// whose kernel side depends on what it waits for (a read of a pipe) keeps
// its kernel stack, with the pipe's frames in it. Each thread blocks for
// about 150 ms at a time, so from its second block on its stacks are
// taken for sure (by size).
func TestOwnPathKernelStacks(t *testing.T) {
	needBPF(t)
	const src = `#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
static int fds[2];
static const struct timespec block = {0, 150000000};
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static volatile int done;
__attribute__((noinline)) void *sleeper(void *a) {
	for (int i = 0; i < 12; i++)
		nanosleep(&block, 0);
	return a;
}
__attribute__((noinline)) void *locker(void *a) {
	while (!done) {
		pthread_mutex_lock(&mu); // held by main while it sleeps
		pthread_mutex_unlock(&mu);
		sched_yield();
	}
	return a;
}
__attribute__((noinline)) void *reader(void *a) {
	char c;
	while (read(fds[0], &c, 1) == 1)
		;
	return a;
}
int main(void) {
	pthread_t s, r, l;
	if (pipe(fds))
		return 1;
	pthread_mutex_lock(&mu);
	pthread_create(&s, 0, sleeper, 0);
	pthread_create(&r, 0, reader, 0);
	pthread_create(&l, 0, locker, 0);
	for (int i = 0; i < 12; i++) {
		nanosleep(&block, 0);
		if (write(fds[1], "x", 1) != 1)
			return 1;
		pthread_mutex_unlock(&mu);
		sched_yield();
		pthread_mutex_lock(&mu);
	}
	done = 1;
	pthread_mutex_unlock(&mu);
	close(fds[1]);
	pthread_join(s, 0);
	pthread_join(r, 0);
	pthread_join(l, 0);
	return 0;
}
`
	bin := buildC(t, "waits", src, "-O1", "-pthread", "-fno-omit-frame-pointer")
	rec := record(t, context.Background(), Options{Target: Target{Kind: profile.TargetCommand, Command: []string{bin}}})
	var sleeps, sleepsWithKernel, locks, locksWithKernel, pipeReads, pipeReadsWithKernel, stackErrors uint64
	var pipeFrames []string
	for _, w := range rec.Windows {
		stackErrors += w.Drops.StackErrors
		if w.OffCPU == nil {
			continue
		}
		for _, s := range w.OffCPU.Stacks {
			switch {
			case s.WaitCall == "nanosleep" || s.WaitCall == "clock_nanosleep":
				sleeps++
				if s.KernelStack != 0 {
					sleepsWithKernel++
				}
			case s.WaitCall == "futex" && s.NS >= 50e6:
				locks++ // the locker's waits for main's mutex (not the joins)
				if s.KernelStack != 0 {
					locksWithKernel++
				}
			case s.WaitCall == "read" && s.WaitFD == "pipe":
				pipeReads++
				if s.KernelStack != 0 {
					pipeReadsWithKernel++
					for _, f := range rec.Stacks[s.KernelStack].Frames {
						pipeFrames = append(pipeFrames, f.Function)
					}
				}
			}
		}
	}
	// 2 threads x 11 sleeps by size, 11 pipe reads by size; a busy host
	// can merge a few into one entry, not most.
	if sleeps < 5 || pipeReads < 3 || locks < 3 {
		t.Fatalf("off-CPU stacks: %d of sleeps, %d of pipe reads, %d of long futex waits; want at least 5, 3 and 3", sleeps, pipeReads, locks)
	}
	if locksWithKernel != 0 {
		t.Errorf("%d of %d futex waits' stacks have a kernel stack; want none", locksWithKernel, locks)
	}
	if sleepsWithKernel != 0 {
		t.Errorf("%d of %d sleeps' stacks have a kernel stack; want none (nanosleep's kernel side is its own)", sleepsWithKernel, sleeps)
	}
	if pipeReadsWithKernel != pipeReads {
		t.Errorf("%d of %d pipe reads' stacks have a kernel stack; want all", pipeReadsWithKernel, pipeReads)
	}
	if !slices.ContainsFunc(pipeFrames, func(f string) bool { return strings.Contains(f, "pipe_read") }) {
		t.Errorf("the pipe reads' kernel frames %v have no pipe_read", pipeFrames)
	}
	if stackErrors != 0 {
		t.Errorf("%d stack errors; want 0 (a kernel stack not taken is no error)", stackErrors)
	}
}

// TestIdleWaitsTakeNoStacks: a wait the kernel's account alone calls idle
// (here pthread_join) takes no off-CPU stacks, whose reason would be idle
// and which nothing shows, and its exact time is still there, under idle;
// a thread's sleeps beside it still take theirs. Main joins twelve
// threads of about 150 ms each: from the second join on, its blocks are
// long enough that their stacks would be taken for sure (by size), as
// the sleeper's are.
func TestIdleWaitsTakeNoStacks(t *testing.T) {
	needBPF(t)
	const src = `#include <pthread.h>
#include <time.h>
static const struct timespec block = {0, 150000000};
__attribute__((noinline)) void *sleeper(void *a) {
	for (int i = 0; i < 12; i++)
		nanosleep(&block, 0);
	return a;
}
__attribute__((noinline)) void *once(void *a) {
	nanosleep(&block, 0);
	return a;
}
int main(void) {
	pthread_t s, w;
	pthread_create(&s, 0, sleeper, 0);
	for (int i = 0; i < 12; i++) {
		pthread_create(&w, 0, once, 0);
		pthread_join(w, 0);
	}
	pthread_join(s, 0);
	return 0;
}
`
	bin := buildC(t, "joiner", src, "-O1", "-pthread", "-fno-omit-frame-pointer")
	rec := record(t, context.Background(), Options{Target: Target{Kind: profile.TargetCommand, Command: []string{bin}}})
	var sleeps, idle uint64
	var joinNS uint64
	for _, w := range rec.Windows {
		for _, wt := range w.Waits {
			if wt.Call == "futex" && wt.Reason == profile.OffCPUIdle {
				joinNS += wt.NS
			}
		}
		if w.OffCPU == nil {
			continue
		}
		for _, s := range w.OffCPU.Stacks {
			switch {
			case s.Wait == profile.OffCPUIdle:
				idle++
			case s.WaitCall == "nanosleep" || s.WaitCall == "clock_nanosleep":
				sleeps++
			}
		}
	}
	unsampled := rec.OffCPUScaler().Unsampled()[profile.OffCPUIdle]
	t.Logf("stacks: %d of sleeps, %d of idle waits; idle futex waits %d ns, idle time without stacks %.0f ns", sleeps, idle, joinNS, unsampled)
	// 11 sleeps by size; a busy host can merge a few into one entry.
	if sleeps < 5 {
		t.Errorf("%d off-CPU stacks of sleeps; want at least 5 (the sleeper's by size)", sleeps)
	}
	if idle != 0 {
		t.Errorf("%d off-CPU stacks of idle waits; want none", idle)
	}
	// Twelve joins of about 150 ms; a busy host stretches them.
	if joinNS < 1e9 {
		t.Errorf("%d ns of idle futex waits (the joins); want about 1.8 s", joinNS)
	}
	if unsampled < 1e9 {
		t.Errorf("%.0f ns of idle time without stacks; want the joins' (about 1.8 s), shown under idle", unsampled)
	}
}

// TestJoinIsNotALock: glibc's pthread_join waits on a futex too, but for
// a thread to exit, and its own frames are not on the stack (glibc has no
// frame pointers): the kernel's account must call the join idle and a
// thread blocked on a mutex a lock. The main thread joins a thread that
// sleeps 600 ms; then holds a mutex for 400 ms while another thread
// blocks on it.
func TestJoinIsNotALock(t *testing.T) {
	needBPF(t)
	if !haveKfunc("bpf_task_from_pid") {
		t.Skip("needs the bpf_task_from_pid kfunc (Linux 6.2 or later)")
	}
	const src = `#include <pthread.h>
#include <time.h>
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void *sleeper(void *a) {
	struct timespec ts = {0, 600000000};
	nanosleep(&ts, 0);
	return a;
}
static void *locker(void *a) {
	pthread_mutex_lock(&mu);
	pthread_mutex_unlock(&mu);
	return a;
}
int main(void) {
	pthread_t s, l;
	struct timespec ts = {0, 400000000};
	pthread_create(&s, 0, sleeper, 0);
	pthread_join(s, 0);
	pthread_mutex_lock(&mu);
	pthread_create(&l, 0, locker, 0);
	nanosleep(&ts, 0);
	pthread_mutex_unlock(&mu);
	pthread_join(l, 0);
	return 0;
}
`
	bin := buildC(t, "joins", src, "-O1", "-pthread")
	rec := record(t, context.Background(), Options{Target: Target{Kind: profile.TargetCommand, Command: []string{bin}}})
	futex := map[string]uint64{} // reason: ns of futex waits
	for _, w := range rec.Windows {
		for _, wt := range w.Waits {
			if wt.Call == "futex" {
				futex[wt.Reason] += wt.NS
			}
		}
	}
	t.Logf("futex waits by reason, ns: %v", futex)
	// The join: about 600 ms (less the sleeper's start); the lock: about
	// 400 ms; a busy host stretches both, never shrinks them much.
	if futex[profile.OffCPUIdle] < 400e6 {
		t.Errorf("%d ns of futex waits called idle; want the join's, about 600 ms", futex[profile.OffCPUIdle])
	}
	if futex[profile.OffCPULock] < 250e6 {
		t.Errorf("%d ns of futex waits called a lock; want the mutex's, about 400 ms", futex[profile.OffCPULock])
	}
	if futex[profile.OffCPULock] >= 800e6 {
		t.Errorf("%d ns of futex waits called a lock; want the mutex's 400 ms, not the join's 600 too", futex[profile.OffCPULock])
	}
}

// buildC compiles C source src with gcc and flags into a program named
// name in a temporary directory, and returns its path; the test is
// skipped without gcc.
func buildC(t *testing.T, name, src string, flags ...string) string {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("needs gcc to build the C test program: not in PATH")
	}
	bin := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(bin+".c", []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append(append([]string(nil), flags...), "-o", bin, bin+".c")
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return bin
}

// TestWaitOfRunningThread: a thread that wakes from one 300 ms sleep and
// then runs on past the recording's end, as a real-time task that nothing
// on the host preempts, never switches out while recorded: its sleep must
// still be in the recording, once and whole. (Written for a build that
// accounted a switch-in at the thread's next switch-out or sample, where
// without the sample's account it failed 3 runs of 3: BENCHMARKS.md,
// "Eighteenth session".)
func TestWaitOfRunningThread(t *testing.T) {
	needBPF(t)
	const src = `#include <sched.h>
#include <time.h>
#include <unistd.h>
int main(void) {
	static const struct timespec nap = {0, 300000000};
	struct sched_param fifo = {.sched_priority = 1};
	struct timespec t0, t;
	char c;
	if (sched_setscheduler(0, SCHED_FIFO, &fifo) || read(0, &c, 1) != 1)
		return 1;
	nanosleep(&nap, 0);
	// 800 ms at most: under the kernel's real-time throttling (950 ms a
	// second), which would switch it out.
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do
		clock_gettime(CLOCK_MONOTONIC, &t);
	while ((t.tv_sec - t0.tv_sec) * 1000000000L + t.tv_nsec - t0.tv_nsec < 800000000L);
	return 0;
}
`
	bin := buildC(t, "napper", src, "-O1")
	cmd, in, _ := piped(t, bin)
	opts := Options{Target: Target{Kind: profile.TargetPID, PIDs: []int{cmd.Process.Pid}}}
	// The nap starts once the recorder is attached (its first window);
	// the read before it switched out before: not counted. The recording
	// stops three windows later (600 ms), while the thread spins.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	windows := 0
	opts.Sinks = append(opts.Sinks, WindowFunc(func(*profile.Window, Status) {
		windows++
		switch windows {
		case 1:
			in.Write([]byte("g"))
		case 4:
			cancel()
		}
	}))
	rec := record(t, ctx, opts)
	naps, ns := sleepTotals(rec)
	if naps != 1 || ns < 300e6 || ns > 800e6 {
		t.Errorf("%d nanosleep waits of %.0f ns in all; want the one nap of 300 ms (recording ended by %s)", naps, ns, rec.Trailer.EndReason)
	}
}

// sleepTotals is how many nanosleep and clock_nanosleep waits a recording
// holds and their time in all (ns).
func sleepTotals(rec *profile.Recording) (n uint64, ns float64) {
	for _, wt := range rec.WaitTotals(0) {
		if wt.Call == "nanosleep" || wt.Call == "clock_nanosleep" {
			n += wt.Count
			ns += wt.NS
		}
	}
	return n, ns
}
