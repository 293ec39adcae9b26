package collector

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/cacheheat/cacheheat/bpf"
	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/profile"
)

// TestSampleRingFull: when user space does not read the sample ring, the
// BPF side drops what does not fit, counts every drop, and never blocks:
// each sample of the target is either in the ring, read before, or
// counted as dropped, and the window says how many were dropped.
func TestSampleRingFull(t *testing.T) {
	needBPF(t)
	// A loop of shell builtins: on the CPU until killed. It may still block
	// now and then (a page brought in from disk on a busy host), and a
	// sampled block sends an off-CPU record through the same ring: those
	// are bounded by its voluntary context switches.
	busy := exec.Command("sh", "-c", "while :; do :; done")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Process.Kill(); busy.Wait() })
	// One page: room for a few samples' records.
	k := pidKernel(t, busy.Process.Pid, 997, uint32(os.Getpagesize()))
	time.Sleep(100 * time.Millisecond)
	s0, err := k.snapshot(false)
	if err != nil {
		t.Fatal(err)
	}
	// The reader stops; what it aggregated so far is kept.
	r := k.samples
	if err := r.close(); err != nil {
		t.Fatal(err)
	}
	k.samples = nil
	// Records by kind: cpu-clock samples (a count each) and off-CPU ones.
	var read, readOff uint64
	for key, n := range r.agg.counts {
		if int(key.slot) == slotClock {
			read += n
		} else {
			readOff++ // an off-CPU aggregate: at least one record
		}
	}
	time.Sleep(300 * time.Millisecond)
	// The loop stops before the counts are read: reading the ring below
	// frees room in it, and a sample of a loop still running landed
	// there uncounted (seen beside stress-ng: one record more than the
	// samples). Stopping is a voluntary switch, counted in blocked.
	stopped(t, busy.Process.Pid)
	s1, err := k.snapshot(false)
	if err != nil {
		t.Fatal(err)
	}
	// What is left in the ring.
	rd, err := ringbuf.NewReader(k.objs.SampleRing)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	rd.SetDeadline(time.Now())
	var left, leftOff uint64
	for {
		rec, err := rd.Read()
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal(err)
			}
			break
		}
		if h := (*bpf.CacheheatSampleRec)(unsafe.Pointer(&rec.RawSample[0])); int(h.Slot) == slotClock {
			left++
		} else {
			leftOff++
		}
	}
	blocked := voluntarySwitches(t, busy.Process.Pid)
	total, _, samples := windowStats(&snapshot{}, s1)
	window, _, _ := windowStats(s0, s1)
	t.Logf("%d target samples: %d read, %d left in the ring, %d records dropped (%d in the window after the reader stopped); off-CPU records %d read, %d left; the loop blocked %d times",
		samples[slotClock], read, left, total.SampleMapFull, window.SampleMapFull, readOff, leftOff, blocked)
	if samples[slotClock] < 10 {
		t.Fatalf("only %d samples of a busy loop at 997 Hz in 0.4 s", samples[slotClock])
	}
	if n := left + leftOff; n == 0 || n > uint64(os.Getpagesize()/sampleRecSize) {
		t.Errorf("%d records left in a full one-page ring", n)
	}
	// Every sample is read, in the ring or counted as dropped; what the
	// drops count beyond that are off-CPU records, one per sampled block
	// at most.
	if read+left > samples[slotClock] || read+left+total.SampleMapFull < samples[slotClock] {
		t.Errorf("read %d + left %d + dropped %d, want every one of %d samples once", read, left, total.SampleMapFull, samples[slotClock])
	} else if off := readOff + leftOff + read + left + total.SampleMapFull - samples[slotClock]; off > blocked {
		t.Errorf("%d off-CPU records (read, left or dropped) from a loop that blocked %d times", off, blocked)
	}
	if window.SampleMapFull == 0 {
		t.Errorf("the window after the reader stopped counts no drop")
	}
}

// TestWaitsWalkedOnlyWhenOneEnded: the waits and peers maps are walked
// only when one of the target's waits ended since the last walk, and the
// task map only when a task record was written; the windows in between
// keep the last values and lose nothing. Each peer wait names the process
// whose write ended it, whether the waker is the same as last time (the
// BPF side then writes nothing) or another (struct waker).
func TestWaitsWalkedOnlyWhenOneEnded(t *testing.T) {
	needBPF(t)
	// cat blocks reading a pipe this test writes to: each byte ends one
	// of its waits, and this process is the waker.
	cat, in, out := piped(t, "cat")
	k := pidKernel(t, cat.Process.Pid, 19, 0)
	echo := func() {
		t.Helper()
		if _, err := in.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		var b [1]byte
		if _, err := out.Read(b[:]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // cat is blocked again
	}
	pipeReads := func(s *snapshot) uint64 {
		var n uint64
		for code, w := range s.waits {
			if _, call, fd := waitOf(code); call == "read" && fd == "pipe" {
				n += w.count
			}
		}
		return n
	}
	// cat blocked before the programs were attached: the first wait that
	// is seen whole is the second.
	echo()
	echo()
	s1, err := k.snapshot(false)
	if err != nil {
		t.Fatal(err)
	}
	p1 := k.drainPeers()
	s2, err := k.snapshot(false)
	if err != nil {
		t.Fatal(err)
	}
	p2 := k.drainPeers()
	for range 8 {
		echo()
	}
	// Then wakers that change at every write: a shell of its own writes
	// every other byte.
	stdin, ok := in.(*os.File)
	if !ok {
		t.Fatalf("cat's stdin is a %T, not a pipe's *os.File", in)
	}
	shells := map[int]bool{}
	for range 3 {
		sh := exec.Command("sh", "-c", "printf x")
		sh.Stdout = stdin
		if err := sh.Run(); err != nil {
			t.Fatal(err)
		}
		shells[sh.Process.Pid] = true
		var b [1]byte
		if _, err := out.Read(b[:]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		echo()
	}
	s3, err := k.snapshot(false)
	if err != nil {
		t.Fatal(err)
	}
	p3 := k.drainPeers()
	t.Logf("pipe reads ended: %d, %d, %d; peers drained: %d, %d, %d", pipeReads(s1), pipeReads(s2), pipeReads(s3), len(p1), len(p2), len(p3))
	if pipeReads(s1) == 0 {
		t.Fatalf("no pipe read of cat counted: %v", s1.waits)
	}
	if pipeReads(s2) != pipeReads(s1) || len(p2) != 0 {
		t.Errorf("nothing ended between the first two snapshots, yet the waits moved or peers came")
	}
	if reflect.ValueOf(s2.waits).Pointer() != reflect.ValueOf(s1.waits).Pointer() {
		t.Errorf("the waits map was walked again though no wait ended")
	}
	// Likewise the task map: cat did not run between the first two.
	catKey := taskKey{tgid: cat.Process.Pid, tid: cat.Process.Pid}
	if reflect.ValueOf(s2.tasks).Pointer() != reflect.ValueOf(s1.tasks).Pointer() {
		t.Errorf("the task map was walked again though no task record was written")
	}
	if c1, c3 := s1.tasks[catKey], s3.tasks[catKey]; len(c1.counts) == 0 || len(c3.counts) == 0 || c3.counts[0] <= c1.counts[0] {
		t.Errorf("cat's cpu-clock did not grow when it ran: %v then %v", c1.counts, c3.counts)
	}
	if pipeReads(s3) <= pipeReads(s1) {
		t.Errorf("cat's next pipe read was not counted: %d then %d", pipeReads(s1), pipeReads(s3))
	}
	if !slices.ContainsFunc(p3, func(p profile.Peer) bool { return p.WakerPID == os.Getpid() }) {
		t.Errorf("the second read's waker (this process) is not among the peers: %+v", p3)
	}
	// Each pipe read seen whole was ended by a write of this process or
	// of one of the shells, one each: as many peer waits, each with its
	// writer as the waker.
	var mine, others uint64
	byShell := map[int]uint64{}
	for _, p := range slices.Concat(p1, p2, p3) {
		switch {
		case p.WakerPID == os.Getpid():
			mine += p.Count
		case shells[p.WakerPID]:
			byShell[p.WakerPID] += p.Count
		default:
			others += p.Count
		}
	}
	if want := pipeReads(s3) - uint64(len(shells)); mine != want || others != 0 {
		t.Errorf("peer waits: %d woken by this process, %d by others; want %d (the pipe reads less the shells' %d)", mine, others, want, len(shells))
	}
	for pid := range shells {
		if byShell[pid] != 1 {
			t.Errorf("the shell %d wrote one byte; its peer waits: %d (all shells: %v)", pid, byShell[pid], byShell)
		}
	}
}

// timeoutsSrc pins itself to CPU 0 and, at each line on stdin, waits on
// a futex word nobody wakes with a 5 ms timeout, 40 times; at "p" it
// reads 10 bytes from stdin one at a time instead; it answers each line
// with one on stdout when done.
const timeoutsSrc = `#define _GNU_SOURCE
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
int main(void) {
	static int word;
	char c;
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(0, &one);
	if (sched_setaffinity(0, sizeof(one), &one))
		return 1;
	while (read(0, &c, 1) == 1) {
		if (c == '\n')
			continue;
		for (int i = 0; i < 10 && c == 'p'; i++)
			if (read(0, &c, 1) != 1)
				return 1;
		struct timespec ts = {0, 5000000};
		for (int i = 0; i < 40 && c != 'p' && c != 'x'; i++)
			syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &ts, 0, 0);
		if (write(1, "\n", 1) != 1)
			return 1;
	}
	return 0;
}
`

// TestTimeoutNamesNoWaker: a futex wait that times out is woken from the
// timer's interrupt, and the task it interrupted (stress-ng, spinning on
// the same CPU) did not wake it: no peer wait names anyone for it
// (in_interrupt), and it is a sleep, not a lock's wait (WAIT_NO_WAKER).
// The same program's pipe reads, under the same load, still name this
// process, which wrote each byte.
func TestTimeoutNamesNoWaker(t *testing.T) {
	needBPF(t)
	if preemptCountAt() == 0 {
		t.Skip("needs the CPU's preempt count located from the kernel's BTF (__preempt_count and runqueues in .data..percpu: x86-64): without it an interrupt's wake-up names the task it stopped")
	}
	sng, err := exec.LookPath("stress-ng")
	if err != nil {
		t.Skipf("needs stress-ng (apt-get install stress-ng): %v", err)
	}
	bin := buildC(t, "timeouts", timeoutsSrc)
	spin := exec.Command(sng, "--cpu", "1", "--taskset", "0", "--timeout", "60s", "--quiet")
	if err := spin.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { spin.Process.Kill(); spin.Wait() })
	prog, in, out := piped(t, bin)
	k := pidKernel(t, prog.Process.Pid, 19, 0)
	ask := func(line string) {
		t.Helper()
		for _, c := range line {
			if _, err := in.Write([]byte{byte(c)}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond) // it is blocked again
		}
		var b [1]byte
		if _, err := out.Read(b[:]); err != nil {
			t.Fatal(err)
		}
	}
	ask("x\n") // it now waits in a read that this test's next write ends
	ask("t\n")
	ask("pxxxxxxxxxx\n")
	s, err := k.snapshot(false)
	if err != nil {
		t.Fatal(err)
	}
	var futexWaits, pipeReads uint64
	for code, w := range s.waits {
		switch reason, call, fd := waitOf(code); {
		case call == "futex":
			futexWaits += w.count
			if reason != profile.OffCPUSleep {
				t.Errorf("%d futex waits that timed out are called %q, not %q", w.count, reason, profile.OffCPUSleep)
			}
		case call == "read" && fd == "pipe":
			pipeReads += w.count
		}
	}
	var mine uint64
	for _, p := range k.drainPeers() {
		switch {
		case p.Call == "futex":
			t.Errorf("a futex wait that timed out names a waker: %+v", p)
		case p.WakerPID == os.Getpid() && p.Call == "read":
			mine += p.Count
		default:
			t.Errorf("a peer wait this test did not cause: %+v", p)
		}
	}
	t.Logf("futex waits %d, pipe reads %d, pipe reads woken by this process %d", futexWaits, pipeReads, mine)
	if futexWaits < 40 {
		t.Errorf("%d futex waits seen; the program timed out 40 times", futexWaits)
	}
	// 16 bytes written: the bytes that came before the program's read
	// and the first, which it waited for before the programs attached,
	// end no wait that is seen whole.
	if pipeReads < 10 || mine != pipeReads {
		t.Errorf("%d pipe reads seen, %d of them named this process as the waker: want 10 or more, all", pipeReads, mine)
	}
}

// piped starts program name with args and pipes to its stdin and from its
// stdout, and kills it when the test ends.
func piped(t *testing.T, name string, args ...string) (*exec.Cmd, io.WriteCloser, io.ReadCloser) {
	t.Helper()
	cmd := exec.Command(name, args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	return cmd, in, out
}

// stopped stops process pid (SIGSTOP) and waits until it is off the CPU.
func stopped(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		if procState("/proc/"+strconv.Itoa(pid)+"/stat") == 'T' {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("process %d not stopped after a second", pid)
}

// procState is the state letter of a /proc/PID[/task/TID]/stat file (R,
// S, D, T...), 0 when it cannot be read.
func procState(path string) byte {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	// The state follows the command's closing parenthesis.
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return b[i+2]
	}
	return 0
}

// voluntarySwitches is how often process pid blocked so far
// (/proc/PID/status voluntary_ctxt_switches, its main thread).
func voluntarySwitches(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no voluntary_ctxt_switches in /proc/%d/status", pid)
	return 0
}

// TestOthersDrained: the samples of a process that is not a target reach
// the window's others list as the kernel counted them, once; the map is
// drained only when a sample was added (stats other_writes).
func TestOthersDrained(t *testing.T) {
	needBPF(t)
	// The target sleeps; a busy shell loop started by this test is the
	// other process whose samples are looked at.
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	k := pidKernel(t, sleeper.Process.Pid, 997, 0)
	s, err := k.snapshot(false)
	if err != nil {
		t.Fatal(err)
	}
	k.drainOthers(s)
	// A planted entry that no add counted (no pid is this large): the
	// drain it is found in is the one after some add moved the count, a
	// window late on a quiet host, at once on a busy one; either way
	// exactly once. Its count puts it first among the few a drain keeps.
	const plantedN = 1 << 40
	planted := bpf.CacheheatOtherKey{Tgid: 1 << 30}
	if err := k.objs.Others.Put(&planted, uint64(plantedN)); err != nil {
		t.Fatal(err)
	}
	var plantedSeen []int
	find := func(list []profile.OtherProcess, pid int) (uint64, bool) {
		for _, o := range list {
			if o.PID == pid {
				return o.Samples, true
			}
		}
		return 0, false
	}
	for i := range 2 {
		s, err := k.snapshot(false)
		if err != nil {
			t.Fatal(err)
		}
		moved := s.otherWrites != k.othersAt
		got := k.drainOthers(s)
		if !moved && got != nil {
			t.Errorf("drained %d processes though no sample was added", len(got))
		}
		if n, ok := find(got, 1<<30); ok {
			plantedSeen = append(plantedSeen, int(n))
		}
		t.Logf("drain %d before the loop: added since the last: %v", i, moved)
	}
	loop := exec.Command("sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
	if err := loop.Run(); err != nil {
		t.Fatal(err)
	}
	pid := loop.Process.Pid
	// The kernel's own count for the loop, now that it has exited.
	var key bpf.CacheheatOtherKey
	var n, inMap uint64
	it := k.objs.Others.Iterate()
	for it.Next(&key, &n) {
		if int(key.Tgid) == pid {
			inMap += n
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if inMap == 0 {
		t.Fatalf("no sample of a busy loop (pid %d) at 997 Hz", pid)
	}
	drained := func() (uint64, bool) {
		t.Helper()
		var err error
		if s, err = k.snapshot(false); err != nil {
			t.Fatal(err)
		}
		got := k.drainOthers(s)
		if n, ok := find(got, 1<<30); ok {
			plantedSeen = append(plantedSeen, int(n))
		}
		return find(got, pid)
	}
	got, _ := drained()
	again, seen := drained()
	t.Logf("loop pid %d: %d samples in the map, %d drained, then %d (%v)", pid, inMap, got, again, seen)
	if got != inMap {
		t.Errorf("drained %d samples of the loop, the map had %d", got, inMap)
	}
	if seen {
		t.Errorf("the loop's samples came again in the next drain (%d)", again)
	}
	if !slices.Equal(plantedSeen, []int{plantedN}) {
		t.Errorf("the planted entry of %d samples was drained as %v, want once", plantedN, plantedSeen)
	}
	if k.othersAt != s.otherWrites {
		t.Errorf("after a drain the drained count %d is not the written count %d", k.othersAt, s.otherWrites)
	}
}

// TestTargetChanges: the BPF side counts each fork and exec of a target
// (stats target_changes: the -p watcher lists the target set only when it
// moved), and nothing for the forks and execs of other processes.
func TestTargetChanges(t *testing.T) {
	needBPF(t)
	// Released by a line on stdin: a fork whose child execs sleep (two
	// changes), then an exec of the target itself (one more).
	target := exec.Command("sh", "-c", "read x; sleep 0.1 & wait; exec sleep 0.2")
	in := startWithStdin(t, target)
	k := pidKernel(t, target.Process.Pid, 19, 0)
	changes := func() uint64 {
		t.Helper()
		s, err := k.snapshot(false)
		if err != nil {
			t.Fatal(err)
		}
		return s.targetChanges
	}
	before := changes()
	// Another process's fork and exec count nothing.
	if err := exec.Command("sh", "-c", "sleep 0.01 & wait").Run(); err != nil {
		t.Fatal(err)
	}
	other := changes()
	if _, err := in.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	if err := target.Wait(); err != nil {
		t.Fatal(err)
	}
	after := changes()
	t.Logf("target changes: %d at the start, %d after another process forked, %d after the target's fork, child's exec and exec", before, other, after)
	if other != before {
		t.Errorf("another process's fork and exec counted %d target changes", other-before)
	}
	if after-other != 3 {
		t.Errorf("the target's fork, its child's exec and its own exec counted %d changes, want 3", after-other)
	}
}

// pidKernel opens the BPF side for one target process (its tree), with
// cpu-clock counted and sampled at hz, the sample ring of ringBytes (0:
// the recorder's size), closed at the test's end.
func pidKernel(t *testing.T, pid, hz int, ringBytes uint32) *kernel {
	t.Helper()
	t.Setenv(EnvSimulatedPMU, "")
	cpus, err := host.OnlineCPUs("/")
	if err != nil {
		t.Fatal(err)
	}
	k, err := openKernel(kernelConfig{mode: modePIDs, pids: []int{pid}, cpus: cpus, sampleHz: hz,
		counted: events(t, "cpu-clock"), refSlot: -1, ringBytes: ringBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.close() })
	return k
}

// TestWatchCommandRegistersAfterExec: the command watcher registers the
// Go runtime of the command's process after a window in which a target
// exec'd (stats target_changes moved), and not after one in which the
// count stood, though the binary changed (the count is what it trusts).
// The BPF side then tells the program's idle threads (WAIT_GO_IDLE), and
// not before: its threads, the one that exec'd included, were found not
// to be a Go program's before the registration and kept that answer
// (go_gen), which the registration must undo.
func TestWatchCommandRegistersAfterExec(t *testing.T) {
	needBPF(t)
	// A Go program with its DWARF (test binaries have none), which sleeps
	// in short steps: its threads park idle in the scheduler at each.
	dir := t.TempDir()
	src, self := filepath.Join(dir, "sleeper.go"), filepath.Join(dir, "sleeper")
	if err := os.WriteFile(src, []byte("package main\n\nimport \"time\"\n\nfunc main() {\n\tfor {\n\t\ttime.Sleep(2 * time.Millisecond)\n\t}\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", self, src)
	build.Dir, build.Env = dir, append(os.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the Go program: %v\n%s", err, out)
	}
	if _, err := goOffsets(self); err != nil {
		t.Fatalf("the Go program's runtime offsets: %v", err)
	}
	// A shell (no Go program) that execs the Go program when told to.
	sh := exec.Command("sh", "-c", `read x; exec "$0"`, self)
	in := startWithStdin(t, sh)
	pid := sh.Process.Pid
	k := pidKernel(t, pid, 19, 0)
	windows, exited, stop := make(chan uint64), make(chan struct{}), make(chan struct{})
	defer close(stop)
	go watchCommand(&command{cmd: sh, done: make(chan struct{})}, k, nil, newGoProcs(), true, windows, exited, stop)
	// A window is handled once the watcher takes the next one.
	window := func(changes uint64) { windows <- changes; windows <- changes }
	registered := func() bool {
		var o bpf.CacheheatGoOffsets
		return k.objs.GoProcs.Lookup(uint32(pid), &o) == nil
	}
	if _, err := in.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); exe == self {
			break
		}
		if i == 500 {
			t.Fatal("the shell did not exec the helper in 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	window(0)
	if registered() {
		t.Errorf("registered after a window in which no target change was counted")
	}
	goIdle := func() (n uint64) {
		s, err := k.snapshot(false)
		if err != nil {
			t.Fatal(err)
		}
		for code, w := range s.waits {
			if code&waitGoIdle != 0 {
				n += w.count
			}
		}
		return n
	}
	// Long enough for its threads to park a few times each.
	time.Sleep(100 * time.Millisecond)
	if n := goIdle(); n != 0 {
		t.Errorf("%d waits of idle Go threads before the program was registered", n)
	}
	// /proc/PID/exe names the new binary before sched_process_exec fires,
	// where the change is counted (beside stress-ng a snapshot taken at
	// once counted none): wait for the count.
	var changes uint64
	for i := 0; ; i++ {
		s, err := k.snapshot(false)
		if err != nil {
			t.Fatal(err)
		}
		if changes = s.targetChanges; changes > 0 || i == 500 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	window(changes)
	if changes != 1 || !registered() {
		t.Fatalf("after the exec (%d target changes counted, want 1) the Go runtime registered: %v", changes, registered())
	}
	var idle uint64
	for i := 0; i < 500 && idle == 0; i++ {
		time.Sleep(10 * time.Millisecond)
		idle = goIdle()
	}
	if idle == 0 {
		t.Errorf("no wait of an idle Go thread in 5 s after the registration")
	}
	t.Logf("waits of idle Go threads after the registration: %d", idle)
}

// startWithStdin starts cmd with a pipe to its stdin, which it returns;
// cmd is killed at the test's end.
func startWithStdin(t *testing.T, cmd *exec.Cmd) io.WriteCloser {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return in
}
