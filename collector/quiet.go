package collector

import (
	"fmt"
	"time"

	"github.com/cacheheat/cacheheat/profile"
)

// Quiet windows: a recorder of a target that does nothing sleeps. After a
// window in which the target did nothing (quietTarget), the recorder arms
// the BPF side (wake_armed in bpf/cacheheat.c) and stops its ticker; the
// target's next switch-in or sample sends one record through the sample
// ring that wakes it, and the window it slept through ends there, marked
// profile.Window.Quiet. So an idle service costs no wake-up, no drain and
// no write until it runs, or until Options.QuietMax passes, which bounds
// how long the host's own figures (its CPUs' idle time, the others that
// ran) are averaged over and how much a crash could take. Nothing is
// lost by sleeping: the counts are cumulative, and the window that ends
// at the wake-up holds all of them; only their time resolution is the
// quiet window's.
//
// DefaultQuietMax is record's --quiet-max.
const DefaultQuietMax = time.Minute

// quietTarget says whether win shows the target doing nothing: no count,
// sample, process, latency, off-CPU time, wait, peer, function call, run
// or loss. What the rest of the host did (its busy and idle time, the
// others that ran, its own counts) does not count: the recording is the
// target's.
func quietTarget(win *profile.Window) bool {
	for _, c := range win.Counters {
		for _, v := range c.PerCPU {
			if v != 0 {
				return false
			}
		}
	}
	for _, h := range win.Histograms {
		for _, c := range h.PerCPU {
			for _, v := range c {
				if v != 0 {
					return false
				}
			}
		}
	}
	if o := win.OffCPU; o != nil && (o.BlockedNS != 0 || len(o.Stacks) > 0) {
		return false
	}
	return len(win.Processes) == 0 && len(win.Samples) == 0 && len(win.Waits) == 0 &&
		len(win.Peers) == 0 && len(win.Functions) == 0 && len(win.Runs) == 0 && win.Drops.Total() == 0
}

// quietMax is how long a recorder of p may sleep through a quiet window,
// 0 when it may not: it needs a target it can be woken by (not -a, whose
// target is every task, nor by cgroup), whose samples wake it if a target
// thread runs on without a switch (cpu-clock sampling on), and not a
// repeated command, whose runs are released and ended at window ends.
func (o Options) quietMax(p *plan) time.Duration {
	if p.target.Kind == profile.TargetAll || o.ByCgroup || o.SampleHz <= 0 || o.repeated() {
		return 0
	}
	return o.QuietMax
}

// armWake has the BPF side wake the recorder at the target's next
// switch-in or sample. The variable lives in memory shared with the
// programs (the object's .bss, mapped): no system call.
func (k *kernel) armWake() error {
	if err := k.objs.WakeArmed.Set(uint32(1)); err != nil {
		return fmt.Errorf("arming the wake-up: %w", err)
	}
	return nil
}
