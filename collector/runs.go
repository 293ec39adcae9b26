package collector

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cacheheat/cacheheat/profile"
	"github.com/cacheheat/cacheheat/symbolize"
)

// A command recorded with -r N runs N times (after --warmup K runs that
// are kept but marked), one after the other, into one recording: the
// windows and heatmaps cover all of them, and each run's totals (wall
// and CPU time, peak RSS, every counter, samples by function) travel in
// the window that closes after it ends (profile.RunTotal). That is what a
// CI gate compares, as perf stat -r and hyperfine do: runs are
// independent repetitions, where the windows of one run are not.

// runner starts the runs and takes their totals.
type runner struct {
	r     *Recorder
	p     *plan
	k     *kernel
	rec   *run
	env   []string
	total int // runs to do, warm-up included
	warm  int

	mu      sync.Mutex
	cur     *command
	stopped bool
	// started are the runs begun so far; a run's end fields are set when
	// it exits.
	started []*runState
	// pidRun maps a process seen in the samples to the run it belongs to.
	pidRun map[int]*runState
	// frames names each user stack's innermost function, for the runs'
	// samples by function.
	frames map[uint64]string
	failed string // why the runs stopped early; "" when they did not
}

// runState is a run being recorded.
type runState struct {
	total   profile.RunTotal
	root    int
	start   time.Time
	base    []uint64 // the target's totals by slot at its start
	ended   bool
	emitted bool
}

func newRunner(r *Recorder, p *plan, k *kernel, rec *run, first *command, env []string) *runner {
	rn := &runner{r: r, p: p, k: k, rec: rec, env: env, total: r.opts.Runs + r.opts.Warmup, warm: r.opts.Warmup,
		cur: first, pidRun: map[int]*runState{}, frames: map[uint64]string{}}
	// The first run was released by begin, right after the first
	// snapshot: its totals start there.
	rn.started = append(rn.started, rn.newRun(first, first.released, sumSlots(rec.prev.target)))
	return rn
}

func (rn *runner) newRun(c *command, start time.Time, base []uint64) *runState {
	i := len(rn.started)
	rs := &runState{root: c.cmd.Process.Pid, start: start, base: base}
	rs.total = profile.RunTotal{Index: i, Warmup: i < rn.warm, StartNS: start.Sub(rn.rec.start).Nanoseconds()}
	rn.pidRun[rs.root] = rs
	return rs
}

// current is the command running now.
func (rn *runner) current() *command {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return rn.cur
}

// stop keeps any further run from starting: the recording is ending.
func (rn *runner) stop() {
	rn.mu.Lock()
	rn.stopped = true
	rn.mu.Unlock()
}

// loop waits for each run to end, takes its totals, and starts the next;
// it closes exited when the last one ends, or a run fails, or stop was
// called.
func (rn *runner) loop(exited chan struct{}, stop chan struct{}) {
	defer close(exited)
	for {
		rn.mu.Lock()
		c, rs := rn.cur, rn.started[len(rn.started)-1]
		rn.mu.Unlock()
		watchUntilDone(c, rn.k, rn.rec.sym, rn.rec.goProcs, stop)
		select {
		case <-stop:
			return
		default:
		}
		rn.mu.Lock()
		cut := rn.stopped
		rn.mu.Unlock()
		if cut {
			return // the recording ended during this run: not a run's whole cost
		}
		// The exiting task's last switch-out, which attributes its final
		// counts, may still be running on another CPU.
		time.Sleep(20 * time.Millisecond)
		rn.end(rs, c)
		// What the run left running (a daemon it started) would run on
		// into the next run's totals: it ends with its run.
		c.stop(CommandGrace)
		rn.mu.Lock()
		more := !rn.stopped && len(rn.started) < rn.total && rn.failed == ""
		rn.mu.Unlock()
		if !more {
			return
		}
		if err := rn.next(); err != nil {
			rn.mu.Lock()
			rn.failed = err.Error()
			rn.mu.Unlock()
			return
		}
	}
}

// end takes a finished run's totals.
func (rn *runner) end(rs *runState, c *command) {
	cur := sumSlots(nil)
	if t, err := rn.k.readTargetTotals(); err == nil {
		cur = sumSlots(t)
	}
	status, sig := c.exitStatus()
	rn.mu.Lock()
	defer rn.mu.Unlock()
	t := &rs.total
	// The run's wall time ends when it was waited for, not now (after
	// the pause that lets its last switch-out be counted).
	t.EndNS = c.exited.Sub(rn.rec.start).Nanoseconds()
	t.WallNS = c.exited.Sub(rs.start).Nanoseconds()
	t.ExitStatus, t.ExitSignal = status, sig
	if ru, ok := c.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && ru != nil {
		t.UserNS, t.SysNS = withoutGate(ru.Utime.Nano(), ru.Stime.Nano(), c.gateCPUNS)
	}
	// Not wait4's ru_maxrss: it keeps the gate's peak from before the
	// exec (the kernel carries it over), tens of MB for a small command.
	t.MaxRSSKB = c.peakRSSKB
	t.Counts = map[string]uint64{}
	for slot, name := range rn.rec.meta.events {
		if slot < len(cur) && slot < len(rs.base) {
			t.Counts[name] = delta(cur[slot], rs.base[slot])
		}
	}
	rs.ended = true
	if status != 0 && rn.failed == "" {
		rn.failed = fmt.Sprintf("run %d of %d exited with status %d%s: the runs stopped there", t.Index+1, rn.total, status, sigSuffix(sig))
	}
}

func sigSuffix(sig string) string {
	if sig == "" {
		return ""
	}
	return " (" + sig + ")"
}

// next starts the next run behind its gate, as the first was: a target
// (with -p semantics) from its exec on.
func (rn *runner) next() error {
	c, err := startCommand(rn.p.target.Command, rn.env, rn.r.cleanup.tree)
	if err != nil {
		return fmt.Errorf("starting run %d: %w", len(rn.started)+1, err)
	}
	pid := c.cmd.Process.Pid
	if rn.p.kc.mode == modePIDs {
		if err := rn.k.addPID(pid, targetAtExec); err != nil {
			c.kill()
			return fmt.Errorf("starting run %d: %w", len(rn.started)+1, err)
		}
	}
	rn.rec.goProcs.addCommand(rn.k, pid, c.path)
	base := sumSlots(nil)
	if t, err := rn.k.readTargetTotals(); err == nil {
		base = sumSlots(t)
	}
	rn.mu.Lock()
	rn.cur = c
	rn.started = append(rn.started, rn.newRun(c, time.Now(), base))
	rn.mu.Unlock()
	rn.r.setCommand(c)
	if err := c.release(); err != nil {
		c.kill()
		return err
	}
	return nil
}

// window attributes a window's samples to the runs, and hands the runs
// that have ended (their samples are now all drained) to the window.
func (rn *runner) window(w *profile.Window, primary string) {
	for _, s := range w.NewStacks {
		if !s.Kernel && len(s.Frames) > 0 && !symbolize.IsMarker(s.Frames[0]) {
			rn.frames[s.ID] = s.Frames[0].String()
		}
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	for _, s := range w.Samples {
		if s.Event != primary {
			continue
		}
		rs := rn.runOf(s.PID, w)
		if rs == nil {
			continue
		}
		rs.total.Samples += s.Count
		name := "[unknown]"
		if n, ok := rn.frames[s.UserStack]; ok {
			name = n
		} else if s.UserStack == 0 {
			name = "[kernel]"
		}
		if rs.total.Functions == nil {
			rs.total.Functions = map[string]uint64{}
		}
		rs.total.Functions[name] += s.Count
	}
	for _, rs := range rn.started {
		if rs.ended && !rs.emitted {
			rs.emitted = true
			rs.total.Functions = topFunctions(rs.total.Functions, profile.MaxRunFunctions)
			w.Runs = append(w.Runs, rs.total)
		}
	}
}

// runOf is the run a sampled process belongs to: a run's own command, or
// a process first seen while a run was going (its child).
func (rn *runner) runOf(pid int, w *profile.Window) *runState {
	if rs, ok := rn.pidRun[pid]; ok {
		return rs
	}
	var last *runState
	for _, rs := range rn.started {
		if rs.total.StartNS <= w.EndNS && (!rs.ended || rs.total.EndNS >= w.StartNS) {
			last = rs
		}
	}
	if last != nil {
		rn.pidRun[pid] = last
	}
	return last
}

// pending says whether an ended run is still to be written.
func (rn *runner) pending() bool {
	if rn == nil {
		return false
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	for _, rs := range rn.started {
		if rs.ended && !rs.emitted {
			return true
		}
	}
	return false
}

// count is the number of runs recorded (ended).
func (rn *runner) count() int {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	n := 0
	for _, rs := range rn.started {
		if rs.ended {
			n++
		}
	}
	return n
}

// finish says what the runs left undone, for the trailer.
func (rn *runner) finish() (warning string, failedStatus int) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	done := 0
	for _, rs := range rn.started {
		if rs.ended {
			done++
		}
	}
	switch {
	case rn.failed != "":
		last := rn.started[len(rn.started)-1]
		return fmt.Sprintf("%s; %d of %d runs recorded", rn.failed, done, rn.total), last.total.ExitStatus
	case done < rn.total:
		return fmt.Sprintf("the recording ended after %d of %d runs; a run cut short is not kept", done, rn.total), 0
	}
	return "", 0
}

// topFunctions keeps the n most sampled functions.
func topFunctions(m map[string]uint64, n int) map[string]uint64 {
	if len(m) <= n {
		return m
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		if m[names[i]] != m[names[j]] {
			return m[names[i]] > m[names[j]]
		}
		return names[i] < names[j]
	})
	out := make(map[string]uint64, n)
	for _, k := range names[:n] {
		out[k] = m[k]
	}
	return out
}

// sumSlots sums the target's per-CPU totals of each slot.
func sumSlots(t [][]uint64) []uint64 {
	out := make([]uint64, len(t))
	for slot, perCPU := range t {
		for _, v := range perCPU {
			out[slot] += v
		}
	}
	return out
}

// watchUntilDone waits for c to exit, or for stop. It keeps the
// symbolizer's view of its mappings fresh, and reads its peak resident
// set (VmHWM, the image's since its exec) every rssPoll.
func watchUntilDone(c *command, k *kernel, sym *symbolize.Symbolizer, gp *goProcs, stop chan struct{}) {
	t := time.NewTicker(rssPoll)
	defer t.Stop()
	pid := c.cmd.Process.Pid
	// Only the command's own image counts: the gate (a cacheheat) may not
	// have exec'd it yet.
	exe, err := filepath.EvalSymlinks(c.path)
	if err != nil {
		exe = c.path
	}
	for i := 0; ; i++ {
		select {
		case <-c.done:
			return
		case <-stop:
			return
		case <-t.C:
			if cur, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err == nil && cur == exe {
				c.peakRSSKB = max(c.peakRSSKB, vmHWMKB(pid))
			}
			if i%5 == 0 {
				_ = sym.Snapshot(pid)
				gp.add(k, pid)
			}
		}
	}
}

// rssPoll is how often a run's peak RSS is read.
const rssPoll = 20 * time.Millisecond

// vmHWMKB reads a process's VmHWM (kB), 0 when it cannot.
func vmHWMKB(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// withoutGate takes the gate's own CPU time out of a run's user and
// system time, from each in proportion (the gate's start-up is Go's
// runtime: both). Left in, it was 2-4% of a 120 ms program's CPU time and
// varied from one recording to the next.
func withoutGate(user, sys, gate int64) (int64, int64) {
	total := user + sys
	if gate <= 0 || total <= 0 {
		return user, sys
	}
	gate = min(gate, total)
	u := user - gate*user/total
	return u, total - gate - u
}
