package collector

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/cacheheat/cacheheat/host"
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
