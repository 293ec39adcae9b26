package collector

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cacheheat/cacheheat/profile"
)

// queuesSrc is a C program with more busy threads than CPUs: each spins 1
// ms and sleeps 0.1 ms, 150 times, so that they queue for the CPUs both
// after wake-ups and after preemptions. It starts them when a line comes
// on stdin, prints "done" when all have finished (its main thread looks
// every 0.5 ms), and keeps them, blocked, until the next line, so that
// their kernel account can be read after the work. With "flip" the main
// thread also moves each worker between CPUs 0 and 1 every time it
// looks, mostly while the worker waits on a run queue: a wait then has
// parts on two CPUs.
const queuesSrc = `#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
static int quit[2];
static int tids[256];
static volatile int finished;
static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}
static void *worker(void *a) {
	struct timespec nap = {0, 100000};
	char c;
	tids[(long)a] = syscall(SYS_gettid);
	for (int i = 0; i < 150; i++) {
		double end = now() + 0.001;
		while (now() < end)
			;
		nanosleep(&nap, 0);
	}
	__sync_fetch_and_add(&finished, 1);
	if (read(quit[0], &c, 1) < 0)
		return 0;
	return a;
}
int main(int argc, char **argv) {
	int n = atoi(argv[1]), flip = argc > 2 && !strcmp(argv[2], "flip");
	char line[16];
	pthread_t th[256];
	struct timespec nap = {0, 500000};
	if (n < 1 || n > 256 || pipe(quit) || !fgets(line, sizeof line, stdin))
		return 1;
	for (long i = 0; i < n; i++)
		pthread_create(&th[i], 0, worker, (void *)i);
	// With flip, each worker is moved between CPU 0 and CPU 1 every 0.5
	// ms, mostly while it waits on a run queue.
	for (int r = 0; finished < n; r++) {
		nanosleep(&nap, 0);
		for (int i = 0; flip && i < n; i++) {
			cpu_set_t set;
			CPU_ZERO(&set);
			CPU_SET((i + r) % 2, &set);
			if (tids[i])
				sched_setaffinity(tids[i], sizeof set, &set);
		}
	}
	printf("done\n");
	fflush(stdout);
	if (!fgets(line, sizeof line, stdin))
		line[0] = 0;
	close(quit[1]);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], 0);
	return 0;
}
`

// schedstat is the kernel's account of one thread's run-queue waits
// (/proc/PID/task/TID/schedstat: time run, time waited on a run queue,
// switch-ins).
type schedstat struct{ delay, pcount uint64 }

// readSchedstats reads the account of each thread of process pid.
func readSchedstats(t *testing.T, pid int) map[string]schedstat {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]schedstat{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "schedstat"))
		if err != nil {
			t.Fatalf("the kernel's run-queue account: %v", err)
		}
		f := strings.Fields(string(b))
		if len(f) != 3 {
			t.Fatalf("%s/%s/schedstat = %q: want 3 fields", dir, e.Name(), b)
		}
		d, _ := strconv.ParseUint(f[1], 10, 64)
		n, _ := strconv.ParseUint(f[2], 10, 64)
		out[e.Name()] = schedstat{d, n}
	}
	return out
}

// allSleeping says whether every thread of process pid is blocked
// (state S in /proc/PID/task/TID/stat).
func allSleeping(pid int) bool {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if procState(filepath.Join(dir, e.Name(), "stat")) != 'S' {
			return false
		}
	}
	return true
}

// TestRunqAgainstSchedstat holds run-queue latency to the kernel's own
// account of the same threads' waits (CONFIG_SCHED_INFO,
// /proc/PID/task/TID/schedstat), read before the threads start and after
// they finish, while the recorder watches and nothing else of the target
// runs. The recorded waits must be as many as the kernel's switch-ins
// (none made up, next to none missed); the kernel's total must lie
// between the sums of the histogram's bucket bounds, and by cgroup (the
// exporter's mode, which keeps the exact sum too) match it. Both ways of
// timing a wait are held to it: from the kernel's account at the
// switch-in (sched_info_wait) and from the wake-up (on_wakeup, for
// kernels without that account or a way to the run queue).
func TestRunqAgainstSchedstat(t *testing.T) {
	needBPF(t)
	if _, err := os.Stat("/proc/self/schedstat"); err != nil {
		t.Skip("needs the kernel's run-queue account (CONFIG_SCHED_INFO): /proc/self/schedstat is missing")
	}
	bin := buildC(t, "queues", queuesSrc, "-O1", "-pthread")
	threads := strconv.Itoa(2*runtime.NumCPU() + 1)
	for _, tc := range []struct {
		name     string
		atWakeup bool
	}{{"sched_info", false}, {"wakeup", true}} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.atWakeup && !runqFromSchedInfo() {
				t.Skip("the kernel's BTF lacks sched_info's fields or sched_entity.cfs_rq (CONFIG_SCHED_INFO, CONFIG_FAIR_GROUP_SCHED)")
			}
			saved := runqAtWakeup
			runqAtWakeup = tc.atWakeup
			t.Cleanup(func() { runqAtWakeup = saved })
			t.Run("threads", func(t *testing.T) { runqAgainstSchedstat(t, []string{bin, threads}, false) })
			t.Run("cgroup", func(t *testing.T) { runqAgainstSchedstat(t, []string{bin, threads}, true) })
			// Only the kernel's account is held to the kernel's account
			// while threads move: timed from the wake-up (runqlat.bt's
			// definition), waits of moved threads summed 2.0-2.6% under
			// it in two runs here.
			t.Run("moved", func(t *testing.T) {
				if tc.atWakeup {
					t.Skip("timed from the wake-up: runqlat.bt's waits, not the kernel's")
				}
				if runtime.NumCPU() < 2 {
					t.Skip("needs 2 CPUs to move threads between")
				}
				runqAgainstSchedstat(t, []string{bin, threads, "flip"}, true)
			})
		})
	}
}

func runqAgainstSchedstat(t *testing.T, args []string, byCgroup bool) {
	cmd := exec.Command(args[0], args[1:]...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin := startWithStdin(t, cmd)
	pid := cmd.Process.Pid
	finished, drained := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "done" {
				close(finished)
				break
			}
		}
		io.Copy(io.Discard, out)
	}()
	var cgroup string
	if byCgroup {
		dir := testCgroup(t)
		cgroup = "/" + filepath.Base(dir)
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The program blocks reading stdin before the recorder attaches, so
	// that none of its switch-ins falls between the attach and the first
	// read of its account.
	for deadline := time.Now().Add(10 * time.Second); !allSleeping(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the program never blocked on its stdin")
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var before, after map[string]schedstat
	var once sync.Once
	var failure string
	windows := 0
	// Run in the recorder's goroutine, once a window: the first window
	// says the programs are attached.
	sink := &testSink{onWin: func(*WindowExtras) {
		windows++
		once.Do(func() {
			before = readSchedstats(t, pid)
			if _, err := stdin.Write([]byte("go\n")); err != nil {
				failure = err.Error()
				cancel()
			}
		})
		select {
		case <-finished:
		default:
			if windows > 300 {
				failure = "the program did not finish in 300 windows"
				cancel()
			}
			return
		}
		// Done, and every thread blocked: the account is final until the
		// next line, which comes after the recording.
		if after == nil && allSleeping(pid) {
			after = readSchedstats(t, pid)
			cancel()
		}
	}}
	if byCgroup {
		r, err := NewRecorder(Options{
			Target: Target{Kind: profile.TargetAll}, Events: events(t, "cpu-clock", "context-switches"),
			Interval: 200 * time.Millisecond, ByCgroup: true, Sinks: []Sink{sink},
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Run(ctx); err != nil {
			t.Fatal(err)
		}
	} else {
		record(t, ctx, Options{Target: Target{Kind: profile.TargetPID, PIDs: []int{pid}}, Sinks: []Sink{sink}})
	}
	// Let the program end, so that its cgroup can go.
	stdin.Write([]byte("quit\n"))
	<-drained
	cmd.Wait()
	if failure != "" {
		t.Fatal(failure)
	}
	if after == nil {
		t.Fatal("the recording ended before the program's threads blocked after their work")
	}
	var waits, delay uint64
	for tid, a := range after {
		b := before[tid] // zero for a thread started during the recording
		waits += a.pcount - b.pcount
		delay += a.delay - b.delay
	}
	var count, lo, hi, mapErrors, sum uint64
	add := func(hist []uint64) {
		for b, n := range hist {
			count += n
			if b > 0 {
				lo += n << b
			}
			hi += n << (b + 1)
		}
	}
	for i, w := range sink.windows {
		mapErrors += w.Drops.MapErrors
		if byCgroup {
			for _, c := range sink.extras[i].Cgroups {
				if c.Path == cgroup {
					add(c.Runq)
					sum += c.RunqNS
				}
			}
			continue
		}
		for _, h := range w.Histograms {
			if h.Name == profile.HistRunqLatency {
				for _, cpu := range h.PerCPU {
					add(cpu)
				}
			}
		}
	}
	t.Logf("%d threads: the kernel counts %d switch-ins and %.3f ms on run queues; the recording %d waits, %.3f-%.3f ms by their buckets, %.3f ms summed (by cgroup) (%d windows)",
		len(after), waits, float64(delay)/1e6, count, float64(lo)/1e6, float64(hi)/1e6, float64(sum)/1e6, len(sink.windows))
	if threads, _ := strconv.Atoi(args[1]); waits < uint64(threads)*100 {
		t.Fatalf("the kernel counts %d switch-ins of %d threads that each slept 150 times: no ground truth", waits, threads)
	}
	if mapErrors != 0 {
		t.Errorf("%d map errors: waits uncounted", mapErrors)
	}
	// A wait is counted at its switch-in, as the kernel counts it. Never
	// more; a few fewer where sched_switch did not fire for a switch-in
	// the kernel counted: on this 6.18 guest bpftrace's count of the
	// tracepoint's switch-ins of the same program fell 0-2 short of
	// pcount's in 3 runs of about 900 (see also unseen_faults in
	// bpf/cacheheat.c).
	if count > waits+2 || count+max(3, waits/100) < waits {
		t.Errorf("%d run-queue waits recorded, the kernel counts %d switch-ins", count, waits)
	}
	if delay < lo || delay > hi {
		t.Errorf("the kernel's run-queue time %d ns is outside the recorded waits' bucket bounds [%d, %d] ns", delay, lo, hi)
	}
	// By cgroup the waits' exact sum is kept: within 3% of the kernel's,
	// the share a few waits not seen (above) can take (0.2-0.8% in runs
	// here).
	if byCgroup && (sum > delay+delay*3/100 || sum+delay*3/100 < delay) {
		t.Errorf("the cgroup's run-queue time %d ns; the kernel's %d ns", sum, delay)
	}
}
