package collector

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cacheheat/cacheheat/host"
)

// TestIdleThrough: a CPU keeps its last software counts only when it ran
// its idle task, and only it, from one snapshot to the next.
func TestIdleThrough(t *testing.T) {
	snap := func(idleAt, busy uint64) *snapshot {
		return &snapshot{idleAt: []uint64{7, idleAt}, busyNS: []uint64{7, busy}}
	}
	for _, c := range []struct {
		name      string
		prev, cur *snapshot
		cpu       int
		idle      bool
	}{
		{"idle since the same switch", snap(100, 50), snap(100, 50), 1, true},
		{"never switched (ts 0): whatever ran is unknown", snap(0, 50), snap(0, 50), 1, false},
		{"a task ran at the last snapshot", snap(0, 50), snap(100, 60), 1, false},
		{"switched to a task and back to idle", snap(100, 50), snap(200, 70), 1, false},
		{"torn read: the switch time not yet written, busy time moved", snap(100, 50), snap(100, 70), 1, false},
		{"a CPU beyond the arrays", snap(100, 50), snap(100, 50), 5, false},
	} {
		if got := idleThrough(c.prev, c.cur, c.cpu); got != c.idle {
			t.Errorf("%s: idleThrough %v, want %v", c.name, got, c.idle)
		}
	}
}

// TestBusyCPUCountersRead: a CPU that ran a task between two snapshots has
// its software counters read, though it is idle again at the second: a
// thread pinned to the last CPU touches fresh pages and sleeps, and the
// page faults it took must all be in that CPU's host count of the window.
func TestBusyCPUCountersRead(t *testing.T) {
	needBPF(t)
	t.Setenv(EnvSimulatedPMU, "")
	cpus, err := host.OnlineCPUs("/")
	if err != nil {
		t.Fatal(err)
	}
	counted := events(t, "cpu-clock", "page-faults", "context-switches")
	k, err := openKernel(kernelConfig{mode: modeAll, cpus: cpus, sampleHz: 99,
		counted: counted, refSlot: -1, ringBytes: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer k.close()
	const faultSlot, pages = 1, 4000
	cpu := cpus[len(cpus)-1]
	for round := range 3 {
		s0, err := k.snapshot(false)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var set unix.CPUSet
			set.Set(cpu)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				done <- err
				return
			}
			mem, err := unix.Mmap(-1, 0, pages*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			if err != nil {
				done <- err
				return
			}
			for i := 0; i < len(mem); i += 4096 {
				mem[i] = 1
			}
			done <- unix.Munmap(mem)
		}()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// The thread is gone from the CPU: it may be idle at the snapshot.
		time.Sleep(50 * time.Millisecond)
		s1, err := k.snapshot(false)
		if err != nil {
			t.Fatal(err)
		}
		got := s1.host[faultSlot][cpu].Value - s0.host[faultSlot][cpu].Value
		t.Logf("round %d: cpu %d page faults %d (idle at the snapshot: %v)", round, cpu, got, s1.idleAt[cpu] != 0)
		if got < pages {
			t.Errorf("round %d: cpu %d counted %d page faults in the window, want at least the %d pages touched there", round, cpu, got, pages)
		}
	}
}
