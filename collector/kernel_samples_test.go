package collector

import (
	"errors"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/cacheheat/cacheheat/host"
	"github.com/cacheheat/cacheheat/profile"
)

// TestSampleRingFull: when user space does not read the sample ring, the
// BPF side drops what does not fit, counts every drop, and never blocks:
// each sample of the target is either in the ring, read before, or
// counted as dropped, and the window says how many were dropped.
func TestSampleRingFull(t *testing.T) {
	needBPF(t)
	t.Setenv(EnvSimulatedPMU, "")
	cpus, err := host.OnlineCPUs("/")
	if err != nil {
		t.Fatal(err)
	}
	// A loop of shell builtins: on the CPU until killed, never blocked,
	// so every record it causes is a cpu-clock sample (no off-CPU ones).
	busy := exec.Command("sh", "-c", "while :; do :; done")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Process.Kill(); busy.Wait() })
	// One page: room for a few samples' records.
	k, err := openKernel(kernelConfig{mode: modePIDs, pids: []int{busy.Process.Pid}, cpus: cpus, sampleHz: 997,
		counted: events(t, "cpu-clock"), refSlot: -1, ringBytes: uint32(os.Getpagesize())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.close() })
	time.Sleep(100 * time.Millisecond)
	s0, err := k.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// The reader stops; what it aggregated so far is kept.
	r := k.samples
	if err := r.close(); err != nil {
		t.Fatal(err)
	}
	k.samples = nil
	read := 0
	for key, n := range r.agg.counts {
		if int(key.slot) != slotClock {
			t.Fatalf("a record of slot %d from a target that never blocks", key.slot)
		}
		read += int(n)
	}
	time.Sleep(300 * time.Millisecond)
	s1, err := k.snapshot()
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
	left := 0
	for {
		if _, err := rd.Read(); err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal(err)
			}
			break
		}
		left++
	}
	total, _, samples := windowStats(&snapshot{}, s1)
	window, _, _ := windowStats(s0, s1)
	t.Logf("%d target samples: %d read, %d left in the ring, %d dropped (%d in the window after the reader stopped)",
		samples[slotClock], read, left, total.SampleMapFull, window.SampleMapFull)
	if samples[slotClock] < 10 {
		t.Fatalf("only %d samples of a busy loop at 997 Hz in 0.4 s", samples[slotClock])
	}
	if left == 0 || left > os.Getpagesize()/sampleRecSize {
		t.Errorf("%d records left in a full one-page ring", left)
	}
	if got := uint64(read+left) + total.SampleMapFull; got != samples[slotClock] {
		t.Errorf("read %d + left %d + dropped %d = %d, want every sample: %d", read, left, total.SampleMapFull, got, samples[slotClock])
	}
	if window.SampleMapFull == 0 {
		t.Errorf("the window after the reader stopped counts no drop")
	}
}

// TestWaitsWalkedOnlyWhenOneEnded: the waits and peers maps are walked
// only when one of the target's waits ended since the last walk, and the
// task map only when a task record was written; the windows in between
// keep the last values and lose nothing.
func TestWaitsWalkedOnlyWhenOneEnded(t *testing.T) {
	needBPF(t)
	t.Setenv(EnvSimulatedPMU, "")
	cpus, err := host.OnlineCPUs("/")
	if err != nil {
		t.Fatal(err)
	}
	// cat blocks reading a pipe this test writes to: each byte ends one
	// of its waits, and this process is the waker.
	cat := exec.Command("cat")
	in, err := cat.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cat.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cat.Process.Kill(); cat.Wait() })
	k, err := openKernel(kernelConfig{mode: modePIDs, pids: []int{cat.Process.Pid}, cpus: cpus, sampleHz: 19,
		counted: events(t, "cpu-clock"), refSlot: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.close() })
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
	s1, err := k.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	p1 := k.drainPeers()
	s2, err := k.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	p2 := k.drainPeers()
	echo()
	s3, err := k.snapshot()
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
}
