package collector

import (
	"context"
	"fmt"
	"io"
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cacheheat/cacheheat/profile"
)

// hopperSrc spins 15 ms of its own CPU time, touching 100 new pages, then
// sleeps as many ms as its second argument (if any), for as many rounds
// as its first, once it reads a byte and sleeps 1 ms; then it prints its
// CPU time (ns) and its page faults over the rounds.
// The 1 ms sleep gives the rounds a switch-out to count their faults
// from: the faults of a thread's first slice in a recording, if its
// switch-in is untraced, count only from its first sample or switch-out
// (replay_in).
const hopperSrc = `#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
static long ns(clockid_t c) {
	struct timespec t;
	clock_gettime(c, &t);
	return t.tv_sec * 1000000000L + t.tv_nsec;
}
int main(int argc, char **argv) {
	int rounds = atoi(argv[1]);
	static const struct timespec start = {0, 1000000};
	struct timespec nap = {0, atoi(argv[2]) * 1000000L};
	struct rusage r0, r1;
	char c;
	char *mem = mmap(0, rounds * 100 * 4096L, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED || read(0, &c, 1) != 1)
		return 1;
	nanosleep(&start, 0);
	getrusage(RUSAGE_SELF, &r0);
	long cpu0 = ns(CLOCK_PROCESS_CPUTIME_ID);
	for (int i = 0; i < rounds; i++) {
		for (int p = 0; p < 100; p++)
			mem[(i * 100L + p) * 4096] = 1;
		long t0 = ns(CLOCK_THREAD_CPUTIME_ID);
		while (ns(CLOCK_THREAD_CPUTIME_ID) - t0 < 15000000L)
			;
		if (nap.tv_nsec)
			nanosleep(&nap, 0);
	}
	long cpu1 = ns(CLOCK_PROCESS_CPUTIME_ID);
	getrusage(RUSAGE_SELF, &r1);
	printf("%ld %ld\n", cpu1 - cpu0, (r1.ru_minflt + r1.ru_majflt) - (r0.ru_minflt + r0.ru_majflt));
	return 0;
}
`

var (
	unattributedRE = regexp.MustCompile(`around (\d+) switches`)
	lostSlicesRE   = regexp.MustCompile(`(\d+) slices of the target's threads`)
)

// hopper is one run of hopperSrc: the process and what it printed.
type hopper struct {
	cmd           *exec.Cmd
	in            io.WriteCloser
	out           io.ReadCloser
	cpuNS, faults float64
}

// TestUntracedSwitchIn holds what is counted for a thread whose switch-ins
// the sched_switch tracepoint does not show to the thread's own account of
// its CPU time, page faults and sleeps. This guest's kernel leaves some
// switches out (its agent's threads switch out untraced: replay_in in
// bpf/cacheheat.c); untracedTgid makes the switch program leave out every
// switch into the test's process from another, so each of its slices
// starts unseen and is replayed from the kernel's scheduler account at its
// switch-out, a cpu-clock sample or its exit. Without the replay it
// counted no sleep and a fraction of the CPU time. In "shared" a second
// target, a spinner, shares the hopper's CPU, and leaves it untraced each
// time the hopper comes in: its slice up to then must be counted to it.
// The same runs with every switch traced must agree with the same account
// too. A software counter standing in for a hardware event (read at the
// switches, as a PMU's are) says how many slices were replayed: their
// hardware counts are not attributed, and the recording says so.
func TestUntracedSwitchIn(t *testing.T) {
	needBPF(t)
	if !runqFromSchedInfo() {
		t.Skip("the kernel's BTF lacks sched_info's fields or sched_entity.cfs_rq (CONFIG_SCHED_INFO, CONFIG_FAIR_GROUP_SCHED): an untraced switch-in cannot be replayed")
	}
	const rounds = 30
	bin := buildC(t, "hopper", hopperSrc, "-O1")
	evs := events(t, "cpu-clock", "page-faults", "context-switches")
	evs = append(evs, Event{Name: "cpu-clock-by-counter", Kind: KindRaw, Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK})
	for _, tc := range []struct {
		name     string
		untraced bool
		spinner  bool
	}{{"alone/untraced", true, false}, {"alone/traced", false, false}, {"shared/untraced", true, true}, {"shared/traced", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			procs := []*hopper{{}}
			if tc.spinner {
				procs = append(procs, &hopper{})
			}
			var pids []int
			for i, h := range procs {
				nap := "10"
				if i == 1 {
					nap = "0" // the spinner
				}
				h.cmd, h.in, h.out = piped(t, bin, strconv.Itoa(rounds), nap)
				pids = append(pids, h.cmd.Process.Pid)
				if tc.spinner {
					// Both on one CPU: the spinner runs whenever the
					// hopper sleeps, and is switched out for it.
					var cpus unix.CPUSet
					cpus.Set(0)
					if err := unix.SchedSetaffinity(h.cmd.Process.Pid, &cpus); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tc.untraced {
				untracedTgid = uint32(pids[0])
				t.Cleanup(func() { untracedTgid = 0 })
			}
			started := false
			opts := Options{
				Target: Target{Kind: profile.TargetPID, PIDs: pids},
				Events: evs,
				Sinks: []Sink{WindowFunc(func(*profile.Window, Status) {
					if !started {
						started = true
						for _, h := range procs {
							h.in.Write([]byte("g"))
						}
					}
				})},
			}
			rec := record(t, context.Background(), opts)
			for _, h := range procs {
				b, _ := io.ReadAll(h.out)
				if _, err := fmt.Sscan(string(b), &h.cpuNS, &h.faults); err != nil {
					t.Fatalf("hopper %d printed %q: %v", h.cmd.Process.Pid, b, err)
				}
			}
			replayed, lost := -1, 0
			for _, w := range rec.Trailer.Warnings {
				if m := unattributedRE.FindStringSubmatch(w); m != nil {
					replayed, _ = strconv.Atoi(m[1])
				}
				if m := lostSlicesRE.FindStringSubmatch(w); m != nil {
					lost, _ = strconv.Atoi(m[1])
				}
			}
			t.Logf("warnings: %q", rec.Trailer.Warnings)
			for i, h := range procs {
				pid := h.cmd.Process.Pid
				clock := float64(processTotal(rec, pid, "cpu-clock"))
				pf := float64(processTotal(rec, pid, "page-faults"))
				t.Logf("process %d: its own account %.1f ms of CPU, %.0f faults; recorded: cpu-clock %.1f ms, page-faults %.0f",
					i, h.cpuNS/1e6, h.faults, clock/1e6, pf)
				// Besides the rounds the recording holds the read that
				// waited for the start and the exit: well under a
				// millisecond of CPU and a few dozen faults.
				if math.Abs(clock-h.cpuNS) > 0.03*h.cpuNS+2e6 {
					t.Errorf("process %d: cpu-clock %.1f ms, its own account %.1f ms: want them within 3%% + 2 ms", i, clock/1e6, h.cpuNS/1e6)
				}
				// A slice that came in and left untraced (this guest's own
				// untraced switches beside the knob's: the spinner, after an
				// agent thread, then leaving for the hopper) is not counted,
				// and the recording says how many: each is less than one
				// round's 15 ms of CPU (a sample would have replayed it), so
				// it holds at most one round's 100 pages.
				if pf < h.faults-float64(100*lost) || pf > h.faults+100 {
					t.Errorf("process %d: page-faults %.0f, its own account %.0f over the rounds, %d slices not counted by the recording's account: want at most 100 more, and at most 100 a slice not counted fewer", i, pf, h.faults, lost)
				}
			}
			// The waits are by wait code, not by process: the hopper's
			// naps and each process's 1 ms nap. A wait that starts with a
			// switch-out the kernel does not trace is not seen: the
			// spinner's, when it leaves the CPU to the hopper.
			naps, napNS := sleepTotals(rec)
			t.Logf("%d naps of %.1f ms in all; %d switch-ins replayed", naps, napNS/1e6, replayed)
			if naps < rounds+1 || naps > uint64(rounds+len(procs)) || napNS < rounds*10e6+1e6 {
				t.Errorf("%d naps of %.1f ms in all: want the hopper's %d naps of 10 ms and a 1 ms nap of each of the %d processes (the spinner's may be missed)", naps, napNS/1e6, rounds, len(procs))
			}
			switch {
			case tc.untraced && replayed < rounds:
				t.Errorf("%d switch-ins replayed, want at least the %d rounds'", replayed, rounds)
			case !tc.untraced && replayed > rounds/3:
				// This guest leaves out a few switches of its own.
				t.Errorf("%d switch-ins replayed with every switch into the hopper traced, want few", replayed)
			}
		})
	}
}

// TestUntracedWarning: the recording says what untraced switches cost it,
// and nothing when they cost nothing (software counts are replayed whole).
func TestUntracedWarning(t *testing.T) {
	for _, tc := range []struct {
		in, lost    uint64
		counters    uint32
		want, want2 string
	}{
		{0, 0, 2, "", ""},
		{5, 0, 0, "", ""},
		{5, 0, 2, "around 5 switches the kernel did not trace are not attributed", ""},
		{0, 3, 0, "3 slices of the target's threads around switches the kernel did not trace are not counted", ""},
		{5, 3, 2, "around 5 switches", "3 slices"},
	} {
		got := untracedWarning(&snapshot{unseenIn: tc.in, unseenLost: tc.lost}, &kernel{nrCounters: tc.counters})
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) || !strings.Contains(got, tc.want2) {
			t.Errorf("%d replayed, %d lost, %d counters: %q, want one with %q and %q", tc.in, tc.lost, tc.counters, got, tc.want, tc.want2)
		}
	}
	if got := untracedWarning(nil, nil); got != "" {
		t.Errorf("no snapshot: %q, want none", got)
	}
}
